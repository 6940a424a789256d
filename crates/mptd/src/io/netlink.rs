//! Link and address events from the kernel (rtnetlink), as a small typed
//! enum.
//!
//! One job: turn `RTM_NEWLINK`/`RTM_DELLINK`/`RTM_NEWADDR`/`RTM_DELADDR`
//! and `RTM_NEWROUTE`/`RTM_DELROUTE` messages into [`NetEvent`]s. What
//! they mean for the paths is [`crate::control::links`]' business, and for
//! the uplinks' routing [`crate::control::routing`]'s.
//!
//! [`Listener`] subscribes to the link, IPv4/IPv6 address and route groups
//! and then dumps every link, address and route, so whoever reads its events learns
//! the whole state first ([`NetEvent::DumpStart`] ... [`NetEvent::DumpDone`])
//! and the changes after. Events that arrive while a dump runs are passed
//! on as they come: a dump entry and a change of the same object say the
//! same kind of thing (the object as it is now), so order does not matter
//! beyond "later wins". If the kernel drops notifications (`ENOBUFS`: the
//! socket's buffer overflowed), the listener dumps again.
//!
//! The wire format is the netlink crates' (`netlink-packet-core` for the
//! message header, errors and attribute framing, `netlink-packet-route`
//! for the link and address headers and attributes, `netlink-sys` for the
//! socket); requests are built with their emitters. Of a link or address
//! message only the header and the few attributes we use are decoded, each
//! with the crate's own parser: a whole-message parse fails when any one
//! attribute is newer than the crate (a statistics block a kernel grew),
//! and a link event lost that way is a path that never learns its link
//! went down. A message that does not parse is counted in
//! [`NetlinkStats::malformed`] and skipped, never a panic.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use netlink_packet_core::{
    Emitable, ErrorBuffer, ErrorMessage, NetlinkBuffer, NetlinkHeader, NetlinkMessage,
    NetlinkPayload, NlaBuffer, NlasIterator, Parseable, ParseableParametrized, NLMSG_DONE,
    NLMSG_ERROR, NLMSG_OVERRUN, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressHeader, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkHeader, LinkMessage};
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use nix::sys::socket::{setsockopt, sockopt};

use crate::io::policy::parse_route;
pub use crate::io::policy::RouteInfo;
use crate::sync::Counter;

/// One change (or dump entry) the kernel reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetEvent {
    /// A link exists (`RTM_NEWLINK`): its name and whether it can carry
    /// traffic (administratively up *and* running, i.e. with carrier).
    Link {
        /// Interface index.
        index: u32,
        /// Interface name (`IFLA_IFNAME`), if the message had one.
        name: Option<String>,
        /// `IFF_UP` and `IFF_RUNNING` both set.
        up: bool,
        /// `IFF_POINTOPOINT`: no neighbours, so no gateway is needed.
        p2p: bool,
    },
    /// A link was deleted (`RTM_DELLINK`).
    LinkGone {
        /// Interface index.
        index: u32,
    },
    /// An address exists (`RTM_NEWADDR`).
    Addr(AddrInfo),
    /// An address was deleted (`RTM_DELADDR`).
    AddrGone {
        /// Interface index.
        index: u32,
        /// The address.
        addr: IpAddr,
    },
    /// A unicast route exists (`RTM_NEWROUTE`), in any table.
    Route(RouteInfo),
    /// A route was deleted (`RTM_DELROUTE`).
    RouteGone(RouteInfo),
    /// A full dump begins: what follows until [`NetEvent::DumpDone`] is
    /// the whole state (plus changes racing with it).
    DumpStart,
    /// The dump is complete.
    DumpDone,
}

/// An interface address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrInfo {
    /// Interface index.
    pub index: u32,
    /// The local address (`IFA_LOCAL`, else `IFA_ADDRESS`).
    pub addr: IpAddr,
    /// Prefix length.
    pub prefix_len: u8,
    /// Scope (`RT_SCOPE_*`: 0 universe, 200 site, 253 link, 254 host).
    pub scope: u8,
    /// Usable as a source: neither tentative (IPv6 duplicate address
    /// detection still running) nor failed DAD.
    pub usable: bool,
    /// Deprecated (IPv6 preferred lifetime over): still usable, last
    /// choice.
    pub deprecated: bool,
}

/// What the listener counts.
#[derive(Debug, Default)]
pub struct NetlinkStats {
    /// Messages (or whole datagrams) that did not parse: skipped.
    pub malformed: Counter,
    /// Notifications the kernel dropped (`ENOBUFS`); each costs a new dump.
    pub overruns: Counter,
    /// Events passed on.
    pub events: Counter,
    /// Error answers to our dump requests.
    pub errors: Counter,
}

// Message types, multicast groups and attribute kinds of rtnetlink
// (linux/rtnetlink.h, linux/if_link.h, linux/if_addr.h) that we pick out
// before handing a message to the crates' parsers.
const RTM_NEWLINK: u16 = libc::RTM_NEWLINK;
const RTM_DELLINK: u16 = libc::RTM_DELLINK;
const RTM_NEWADDR: u16 = libc::RTM_NEWADDR;
const RTM_DELADDR: u16 = libc::RTM_DELADDR;
const RTM_NEWROUTE: u16 = libc::RTM_NEWROUTE;
const RTM_DELROUTE: u16 = libc::RTM_DELROUTE;
const RTMGRP_IPV4_ROUTE: u32 = libc::RTMGRP_IPV4_ROUTE as u32;
const RTMGRP_IPV6_ROUTE: u32 = libc::RTMGRP_IPV6_ROUTE as u32;
const RTMGRP_LINK: u32 = libc::RTMGRP_LINK as u32;
const RTMGRP_IPV4_IFADDR: u32 = libc::RTMGRP_IPV4_IFADDR as u32;
const RTMGRP_IPV6_IFADDR: u32 = libc::RTMGRP_IPV6_IFADDR as u32;
const IFLA_IFNAME: u16 = 3;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;

/// One message of a netlink datagram, as far as we care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A link or address message.
    Event(NetEvent),
    /// End of the dump with this sequence number.
    Done(u32),
    /// An error answer (negative errno, 0 = ack) to request `seq`.
    Error {
        /// The request's sequence number.
        seq: u32,
        /// `-errno`, or 0 for an acknowledgement.
        code: i32,
    },
    /// The kernel lost messages.
    Overrun,
    /// Another message type, or a route of no interest (not unicast).
    Other,
}

/// The attributes of a message body after its fixed header, each framing
/// checked; `None` if one's length does not fit (the rest cannot be
/// found then).
fn attributes(rest: &[u8]) -> Option<Vec<NlaBuffer<&[u8]>>> {
    NlasIterator::new(rest).collect::<Result<_, _>>().ok()
}

fn parse_link(kind: u16, body: &[u8]) -> Option<NetEvent> {
    let head = LinkHeader::parse(body).ok()?;
    if kind == RTM_DELLINK {
        return Some(NetEvent::LinkGone { index: head.index });
    }
    let mut name = None;
    for nla in attributes(&body[head.buffer_len()..])? {
        if nla.kind() == IFLA_IFNAME {
            // A name that is not UTF-8 is left out, not the whole link.
            name = match LinkAttribute::parse_with_param(&nla, head.interface_family) {
                Ok(LinkAttribute::IfName(n)) => n.split('\0').next().map(str::to_owned),
                _ => None,
            };
        }
    }
    Some(NetEvent::Link {
        index: head.index,
        name,
        up: head.flags.contains(LinkFlags::Up | LinkFlags::Running),
        p2p: head.flags.contains(LinkFlags::Pointopoint),
    })
}

fn parse_addr(kind: u16, body: &[u8]) -> Option<Option<NetEvent>> {
    let head = AddressHeader::parse(body).ok()?;
    let nlas = attributes(&body[head.buffer_len()..])?;
    let v4 = match head.family {
        AddressFamily::Inet => true,
        AddressFamily::Inet6 => false,
        // Another family's address (e.g. AF_PACKET would never come here,
        // but a future one might): not ours to judge.
        _ => return Some(None),
    };
    let mut flags = u32::from(head.flags.bits());
    let (mut local, mut address) = (None, None);
    for nla in nlas {
        if !matches!(nla.kind(), IFA_ADDRESS | IFA_LOCAL | IFA_FLAGS) {
            continue;
        }
        // An address of the other family's length is as wrong as one of
        // no family's: the message is malformed.
        match AddressAttribute::parse(&nla).ok()? {
            AddressAttribute::Local(ip) if ip.is_ipv4() == v4 => local = Some(ip),
            AddressAttribute::Address(ip) if ip.is_ipv4() == v4 => address = Some(ip),
            AddressAttribute::Flags(f) => flags = f.bits(),
            _ => return None,
        }
    }
    // IFA_LOCAL is the local end of a point-to-point link (IFA_ADDRESS
    // is then the peer); otherwise only IFA_ADDRESS is present.
    let addr = local.or(address)?;
    let index = head.index;
    Some(Some(if kind == RTM_DELADDR {
        NetEvent::AddrGone { index, addr }
    } else {
        NetEvent::Addr(AddrInfo {
            index,
            addr,
            prefix_len: head.prefix_len,
            scope: head.scope.into(),
            usable: flags & (libc::IFA_F_TENTATIVE | libc::IFA_F_DADFAILED) == 0,
            deprecated: flags & libc::IFA_F_DEPRECATED != 0,
        })
    }))
}

/// One message whose header has been checked; `None` if its body does not
/// parse.
fn parse_message(msg: &NetlinkBuffer<&&[u8]>) -> Option<Message> {
    let kind = msg.message_type();
    let body = msg.payload();
    match kind {
        RTM_NEWLINK | RTM_DELLINK => parse_link(kind, body).map(Message::Event),
        RTM_NEWADDR | RTM_DELADDR => {
            parse_addr(kind, body).map(|e| e.map_or(Message::Other, Message::Event))
        }
        RTM_NEWROUTE | RTM_DELROUTE => Some(match parse_route(body)? {
            Some(r) if kind == RTM_NEWROUTE => Message::Event(NetEvent::Route(r)),
            Some(r) => Message::Event(NetEvent::RouteGone(r)),
            None => Message::Other,
        }),
        NLMSG_DONE => Some(Message::Done(msg.sequence_number())),
        NLMSG_ERROR => {
            let error = ErrorMessage::parse(&ErrorBuffer::new_checked(&body).ok()?).ok()?;
            Some(Message::Error {
                seq: msg.sequence_number(),
                code: error.raw_code(),
            })
        }
        NLMSG_OVERRUN => Some(Message::Overrun),
        _ => Some(Message::Other),
    }
}

/// Parses one netlink datagram, calling `f` for each message in it.
/// Returns how many messages did not parse (each skipped; a header whose
/// length does not fit ends the datagram).
pub fn parse(mut buf: &[u8], mut f: impl FnMut(Message)) -> u64 {
    let mut bad = 0;
    while !buf.is_empty() {
        let Ok(msg) = NetlinkBuffer::new_checked(&buf) else {
            return bad + 1;
        };
        match parse_message(&msg) {
            Some(m) => f(m),
            None => bad += 1,
        }
        let len = msg.length() as usize;
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
    bad
}

/// A dump request for every family's links or addresses (`GetLink` or
/// `GetAddress` with an empty message: family `AF_UNSPEC`).
fn dump_request(what: RouteNetlinkMessage, seq: u32) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = seq;
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(what));
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    buf
}

/// Largest netlink datagram read at once (the kernel sends at most a page,
/// or 8 KiB on large-page machines, per dump datagram; 32 KiB is ample).
const RECV_LEN: usize = 32 * 1024;

/// How often the listener looks at the shutdown flag.
const SHUTDOWN_POLL: Duration = Duration::from_millis(200);

/// Receive buffer asked for: room for a burst of notifications (a VPN or
/// container start adding hundreds of addresses) before `ENOBUFS`.
const SOCKET_BUFFER: usize = 1 << 20;

/// Which dump the listener is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Links(u32),
    Addrs(u32),
    Routes(u32),
    Live,
}

/// What a datagram's messages ask the listener to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The link dump ended: dump the addresses.
    DumpAddrs,
    /// The address dump ended: dump the routes.
    DumpRoutes,
    /// The route dump ended: the state is whole.
    Live,
    /// The dump failed: start over.
    Restart,
}

/// The subscribed rtnetlink socket.
pub struct Listener {
    socket: Socket,
    seq: u32,
    phase: Phase,
    /// Notifications were lost while a dump ran: dump again after it.
    lost_in_dump: bool,
    /// Counters, shared with whoever reports them.
    pub stats: Arc<NetlinkStats>,
}

impl Listener {
    /// Opens the socket, subscribed to link and address changes, and asks
    /// for the first dump.
    pub fn open() -> io::Result<Listener> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        let groups = RTMGRP_LINK
            | RTMGRP_IPV4_IFADDR
            | RTMGRP_IPV6_IFADDR
            | RTMGRP_IPV4_ROUTE
            | RTMGRP_IPV6_ROUTE;
        socket.bind(&SocketAddr::new(0, groups))?;
        setsockopt(&socket.as_fd(), sockopt::RcvBuf, &SOCKET_BUFFER)?;
        let timeout = nix::sys::time::TimeVal::new(0, SHUTDOWN_POLL.as_micros() as i64);
        setsockopt(&socket.as_fd(), sockopt::ReceiveTimeout, &timeout)?;
        let mut l = Listener {
            socket,
            seq: 0,
            phase: Phase::Live,
            lost_in_dump: false,
            stats: Arc::new(NetlinkStats::default()),
        };
        l.start_dump()?;
        Ok(l)
    }

    fn request(&mut self, what: RouteNetlinkMessage) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        self.socket.send(&dump_request(what, self.seq), 0)?;
        Ok(self.seq)
    }

    fn start_dump(&mut self) -> io::Result<()> {
        let seq = self.request(RouteNetlinkMessage::GetLink(LinkMessage::default()))?;
        self.phase = Phase::Links(seq);
        Ok(())
    }

    /// Reads one datagram (waiting at most [`SHUTDOWN_POLL`]) and passes
    /// its events to `out`. A dump in progress goes on to its next part
    /// when one ends; a lost notification starts a new dump.
    pub fn poll(&mut self, buf: &mut [u8], out: &mut impl FnMut(NetEvent)) -> io::Result<()> {
        let n = match self.socket.recv(&mut &mut *buf, 0) {
            Ok(n) => n,
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => return Ok(()),
                Some(libc::ENOBUFS) => {
                    self.stats.overruns.add(1);
                    // A dump already running would be answered by EBUSY:
                    // the next one starts when it ends.
                    if self.phase == Phase::Live {
                        out(NetEvent::DumpStart);
                        self.start_dump()?;
                    } else {
                        self.lost_in_dump = true;
                    }
                    return Ok(());
                }
                _ => return Err(e),
            },
        };
        let mut next = None;
        let stats = self.stats.clone();
        let phase = self.phase;
        let bad = parse(&buf[..n.min(buf.len())], |m| match m {
            Message::Event(e) => {
                stats.events.add(1);
                out(e);
            }
            Message::Done(seq) => match phase {
                Phase::Links(s) if s == seq => next = Some(Next::DumpAddrs),
                Phase::Addrs(s) if s == seq => next = Some(Next::DumpRoutes),
                Phase::Routes(s) if s == seq => next = Some(Next::Live),
                _ => {}
            },
            Message::Error { code, seq } => {
                if code != 0 {
                    stats.errors.add(1);
                    tracing::debug!(seq, code, "netlink error answer");
                }
                if matches!(phase, Phase::Links(s) | Phase::Addrs(s) | Phase::Routes(s) if s == seq)
                {
                    // The dump failed (e.g. EBUSY): start over.
                    next = Some(Next::Restart);
                }
            }
            Message::Overrun => stats.overruns.add(1),
            Message::Other => {}
        });
        if bad > 0 {
            if self.stats.malformed.get() == 0 {
                tracing::warn!(
                    count = bad,
                    "netlink message that does not parse; skipped (counted, logged once)"
                );
            }
            self.stats.malformed.add(bad);
        }
        match next {
            Some(Next::DumpAddrs) => {
                let seq =
                    self.request(RouteNetlinkMessage::GetAddress(AddressMessage::default()))?;
                self.phase = Phase::Addrs(seq);
            }
            Some(Next::DumpRoutes) => {
                let seq = self.request(RouteNetlinkMessage::GetRoute(RouteMessage::default()))?;
                self.phase = Phase::Routes(seq);
            }
            Some(Next::Restart) => {
                out(NetEvent::DumpStart);
                self.start_dump()?;
            }
            Some(Next::Live) => {
                self.phase = Phase::Live;
                out(NetEvent::DumpDone);
                if std::mem::take(&mut self.lost_in_dump) {
                    out(NetEvent::DumpStart);
                    self.start_dump()?;
                }
            }
            None => {}
        }
        Ok(())
    }

    /// Runs on its own thread until `shutdown`: every event goes to
    /// `events`, then `wake` is called once per datagram that had any.
    /// Returns when the receiver is gone too. A socket error other than a
    /// timeout or a lost notification ends the listener (logged): the
    /// paths then follow their timers only.
    pub fn run(mut self, events: Sender<NetEvent>, wake: impl Fn(), shutdown: Arc<AtomicBool>) {
        let mut buf = vec![0u8; RECV_LEN];
        let receiver_gone = std::cell::Cell::new(false);
        let mut out = |e: NetEvent| {
            if events.send(e).is_err() {
                receiver_gone.set(true);
            }
        };
        // The first dump's start.
        out(NetEvent::DumpStart);
        while !shutdown.load(Relaxed) {
            let before = self.stats.events.get();
            if let Err(e) = self.poll(&mut buf, &mut out) {
                tracing::error!(error = %e, "netlink listener failed; link and address events are no longer followed");
                return;
            }
            if receiver_gone.get() {
                return;
            }
            if self.stats.events.get() != before {
                wake();
            }
        }
    }
}

/// How long [`snapshot`] waits for the kernel to finish its dump.
const SNAPSHOT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// The links, addresses and routes as they are now: one full dump,
/// synchronously (at start-up, to bind interface-only paths to their
/// current address and plan the uplinks' routing).
pub fn snapshot() -> io::Result<Vec<NetEvent>> {
    let mut l = Listener::open()?;
    let mut buf = vec![0u8; RECV_LEN];
    let mut events = Vec::new();
    let mut done = false;
    // A dump is a few datagrams, but the socket also gets every change
    // made meanwhile (and a dump the kernel interrupts starts again): on
    // a host where many links come and go at once (200 mptds starting in
    // one namespace) a bound on reads ran out before the dump ended. So
    // bound the time instead, in case the kernel never ends it (each read
    // waits at most SHUTDOWN_POLL).
    let deadline = std::time::Instant::now() + SNAPSHOT_TIMEOUT;
    while std::time::Instant::now() < deadline {
        l.poll(&mut buf, &mut |e| match e {
            NetEvent::DumpDone => done = true,
            e => events.push(e),
        })?;
        if done {
            return Ok(events);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "the kernel did not finish the link and address dump within 20 s",
    ))
}

#[cfg(test)]
mod tests;
