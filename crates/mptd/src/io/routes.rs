//! Routes into the tunnel: a connection's `networks` (and a client's
//! tunnel address) point at the tun device; with TCP acceleration, the
//! peers' tunnel addresses carry the legs' initial window.
//!
//! Each change is one rtnetlink request on a socket of its own, answered
//! by the kernel's acknowledgement, the same requests `ip route replace
//! NET dev DEV` and `ip route del NET dev DEV` send: `RTM_NEWROUTE` with
//! `NLM_F_CREATE | NLM_F_REPLACE` (so adding a route that is already there
//! is no error) and `RTM_DELROUTE` (deleting a route that is not there
//! is: [`RouteError::Refused`] with `ESRCH`), both on the main table and
//! through the device's interface index. The route is the kernel's own
//! and disappears with the interface.
//!
//! The messages are built with `netlink-packet-route`'s emitters. The
//! kernel's refusal keeps its own explanation where it gives one
//! (extended acknowledgement, e.g. "Nexthop device is not up").

use std::io;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::Duration;

use netlink_packet_core::{
    parse_string, parse_u32, ErrorBuffer, ErrorMessage, NetlinkBuffer, NetlinkHeader,
    NetlinkMessage, NetlinkPayload, NlasIterator, Parseable, NLMSG_ERROR, NLM_F_ACK,
    NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteMetric, RouteProtocol,
    RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket};
use nix::sys::socket::{setsockopt, sockopt};

use crate::config::Prefix;

/// Why a route could not be set or removed.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The device does not exist (it has no interface index).
    #[error("no interface named `{0}`")]
    NoInterface(String),
    /// The rtnetlink socket could not be opened, or the request not sent
    /// or answered.
    #[error("rtnetlink: {0}")]
    Socket(#[from] io::Error),
    /// The kernel refused the request.
    #[error("the kernel refused to {action} the route: {}", refusal(*.errno, .message.as_deref()))]
    Refused {
        /// "replace" or "delete".
        action: &'static str,
        /// The positive errno of the refusal.
        errno: i32,
        /// The kernel's explanation, if it gave one.
        message: Option<String>,
    },
    /// The kernel's answer did not parse.
    #[error("rtnetlink answer that does not parse")]
    BadAnswer,
}

/// A refusal in words: the errno's meaning (what `ip` prints after
/// "RTNETLINK answers:"), what it means here for the common ones, and the
/// kernel's own explanation.
fn refusal(errno: i32, message: Option<&str>) -> String {
    let mut s = nix::errno::Errno::from_raw(errno).desc().to_owned();
    let meaning = match errno {
        libc::ESRCH => Some("no such route"),
        libc::EPERM | libc::EACCES => Some("CAP_NET_ADMIN is needed"),
        libc::ENETDOWN => Some("the interface is down"),
        _ => None,
    };
    if let Some(m) = meaning {
        s = format!("{s} ({m})");
    }
    if let Some(m) = message {
        s = format!("{s}: {m}");
    }
    s
}

/// Routes `net` into the tunnel. The route disappears with the interface.
pub fn add_route(net: &Prefix, dev: &str) -> Result<(), RouteError> {
    let msg = route_message(net, interface_index(dev)?, Change::Replace);
    let flags = NLM_F_CREATE | NLM_F_REPLACE;
    request(RouteNetlinkMessage::NewRoute(msg), flags, "replace")
}

/// Routes the peer tunnel address `peer` into the tunnel with an initial
/// congestion and receive window of `packets` (`ip route add PEER dev
/// DEV initcwnd N initrwnd N`): the TCP acceleration's legs run between
/// the tunnel addresses, and a leg over a satellite otherwise starts at
/// the kernel's 10 packets and needs a round trip of 600 ms for each
/// doubling. The kernel reads the route's windows when a connection is
/// set up, so this goes in before the first leg. A host route of mptd's
/// own protocol; it disappears with the interface. Like
/// [`add_route_if_absent`], it replaces no route that is there already
/// (`EEXIST`): a host route to the peer that someone else set is theirs.
pub fn add_leg_route(peer: IpAddr, dev: &str, packets: u32) -> Result<(), RouteError> {
    let host = Prefix {
        addr: peer,
        len: if peer.is_ipv4() { 32 } else { 128 },
    };
    let mut msg = route_message(&host, interface_index(dev)?, Change::Replace);
    msg.attributes.push(RouteAttribute::Metrics(vec![
        RouteMetric::InitCwnd(packets),
        RouteMetric::InitRwnd(packets),
    ]));
    request(
        RouteNetlinkMessage::NewRoute(msg),
        NLM_F_CREATE | NLM_F_EXCL,
        "add",
    )
}

/// Routes `net` into the tunnel unless a route to it is there already:
/// mptd never replaces a route it did not create (docs/DEPLOY.md). The
/// kernel's refusal is [`RouteError::Refused`] with `EEXIST`.
pub fn add_route_if_absent(net: &Prefix, dev: &str) -> Result<(), RouteError> {
    let msg = route_message(net, interface_index(dev)?, Change::Replace);
    request(
        RouteNetlinkMessage::NewRoute(msg),
        NLM_F_CREATE | NLM_F_EXCL,
        "add",
    )
}

/// Takes the route to `net` out of the tunnel (a removed client's
/// `networks`).
pub fn del_route(net: &Prefix, dev: &str) -> Result<(), RouteError> {
    let msg = route_message(net, interface_index(dev)?, Change::Delete);
    request(RouteNetlinkMessage::DelRoute(msg), 0, "delete")
}

fn interface_index(dev: &str) -> Result<u32, RouteError> {
    nix::net::if_::if_nametoindex(dev).map_err(|_| RouteError::NoInterface(dev.to_owned()))
}

/// Whether a route is set or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Replace,
    Delete,
}

/// The route to `net` through interface `index` on the main table, as
/// `ip route` fills it in: a new route is a unicast one of protocol
/// mptd's own ([`crate::io::policy::RTPROT_MPT`]), of link scope for IPv4 (no
/// gateway: the destination is on the link) and universe scope for IPv6;
/// a deletion leaves type and protocol open and asks for any scope.
fn route_message(net: &Prefix, index: u32, change: Change) -> RouteMessage {
    let mut m = RouteMessage::default();
    let (family, dst) = match net.addr {
        IpAddr::V4(a) => (AddressFamily::Inet, RouteAddress::Inet(a)),
        IpAddr::V6(a) => (AddressFamily::Inet6, RouteAddress::Inet6(a)),
    };
    m.header.address_family = family;
    m.header.destination_prefix_length = net.len;
    m.header.table = RouteHeader::RT_TABLE_MAIN;
    match change {
        Change::Replace => {
            m.header.protocol = RouteProtocol::from(crate::io::policy::RTPROT_MPT);
            m.header.kind = RouteType::Unicast;
            m.header.scope = if net.addr.is_ipv4() {
                RouteScope::Link
            } else {
                RouteScope::Universe
            };
        }
        Change::Delete => m.header.scope = RouteScope::NoWhere,
    }
    m.attributes = vec![RouteAttribute::Destination(dst), RouteAttribute::Oif(index)];
    m
}

/// How long the kernel may take to answer (it answers at once; this only
/// bounds a wait that would otherwise block the caller for good).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `msg` with `flags` (plus request and acknowledge) on a socket of
/// its own and waits for the kernel's acknowledgement.
pub(super) fn request(
    msg: RouteNetlinkMessage,
    flags: u16,
    action: &'static str,
) -> Result<(), RouteError> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    // Explanations with errors, and our request not echoed back: both
    // optional (older kernels), so a failure to set them is no error.
    let _ = socket.set_ext_ack(true);
    let _ = socket.set_cap_ack(true);
    let timeout = nix::sys::time::TimeVal::new(ANSWER_TIMEOUT.as_secs() as i64, 0);
    setsockopt(&socket.as_fd(), sockopt::ReceiveTimeout, &timeout).map_err(io::Error::from)?;

    const SEQ: u32 = 1;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    header.sequence_number = SEQ;
    let mut request = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
    request.finalize();
    let mut buf = vec![0; request.buffer_len()];
    request.serialize(&mut buf);
    socket.send(&buf, 0)?;

    let mut buf = vec![0u8; 8192];
    loop {
        let n = socket.recv(&mut &mut buf[..], 0)?;
        let mut datagram = &buf[..n.min(buf.len())];
        while !datagram.is_empty() {
            let answer =
                NetlinkBuffer::new_checked(&datagram).map_err(|_| RouteError::BadAnswer)?;
            if answer.message_type() == NLMSG_ERROR && answer.sequence_number() == SEQ {
                return acknowledged(answer.flags(), answer.payload(), action);
            }
            let len = answer.length() as usize;
            datagram = datagram.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        }
    }
}

/// The acknowledgement (`NLMSG_ERROR` with code 0) or refusal in
/// `payload`, an error message whose header had `flags`.
fn acknowledged(flags: u16, payload: &[u8], action: &'static str) -> Result<(), RouteError> {
    let error = ErrorBuffer::new_checked(&payload)
        .and_then(|b| ErrorMessage::parse(&b))
        .map_err(|_| RouteError::BadAnswer)?;
    match error.raw_code() {
        0 => Ok(()),
        code => Err(RouteError::Refused {
            action,
            errno: -code,
            message: kernel_message(flags, &error.header),
        }),
    }
}

/// The kernel's explanation (`NLMSGERR_ATTR_MSG`) in an error message's
/// extended acknowledgement: after the echoed request (only its header if
/// `NLM_F_CAPPED`), attributes, present if `NLM_F_ACK_TLVS`.
fn kernel_message(flags: u16, echoed: &[u8]) -> Option<String> {
    const NLMSGERR_ATTR_MSG: u16 = 1;
    const NLMSG_HDR_LEN: usize = 16;
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let echo_len = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDR_LEN
    } else {
        parse_u32(echoed.get(..4)?).ok()? as usize
    };
    let attrs = echoed.get(echo_len.next_multiple_of(4)..)?;
    NlasIterator::new(attrs)
        .map_while(Result::ok)
        .find(|nla| nla.kind() == NLMSGERR_ATTR_MSG)
        .and_then(|nla| parse_string(nla.value()).ok())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests;
