//! Policy routing as the kernel holds it: routing rules (`ip rule`) and
//! routes in any table (`ip route show table all`), read, added and
//! deleted through rtnetlink.
//!
//! The types here are plain descriptions ([`RuleSpec`], [`RouteSpec`],
//! [`RouteInfo`]); what to install is decided elsewhere
//! (`crate::control::routing_plan`). Everything mptd adds carries the
//! rtnetlink protocol number [`RTPROT_MPT`], so that `ip rule` and `ip
//! route` show it as mptd's (`proto 109`) and a start after a crash can
//! find and remove exactly what an earlier run left ([`leftovers`]).
//!
//! Routes are read with only the attributes used here decoded (as
//! `crate::io::netlink` does for links and addresses): a route that
//! carries an attribute newer than `netlink-packet-route` still parses.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::Duration;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NlasIterator, NLMSG_DONE,
    NLMSG_ERROR, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
    RouteType,
};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket};
use nix::sys::socket::{setsockopt, sockopt};

use crate::io::routes::{request, RouteError};

/// The rtnetlink protocol number of every rule and route mptd adds
/// (`ip route` prints `proto 109`). Unassigned in the kernel's and
/// iproute2's lists (`/etc/iproute2/rt_protos`); 'm' in ASCII.
pub const RTPROT_MPT: u8 = 109;

/// The main routing table.
pub const TABLE_MAIN: u32 = 254;

/// A routing rule mptd installs (`ip rule add ... proto 109`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleSpec {
    /// IPv6 rule (else IPv4).
    pub v6: bool,
    /// Priority (`pref`).
    pub priority: u32,
    /// Table looked up.
    pub table: u32,
    /// `fwmark MARK/MASK`.
    pub fwmark: Option<(u32, u32)>,
    /// `not`: the rule applies to what does not match.
    pub invert: bool,
    /// `suppress_prefixlength N`: a route found with a prefix this long or
    /// shorter is ignored (the lookup goes on with the next rule).
    pub suppress_prefixlen: Option<u32>,
}

/// A route mptd installs (`ip route add ... proto 109`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteSpec {
    /// Table.
    pub table: u32,
    /// Destination prefix.
    pub dst: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// Output interface.
    pub oif: u32,
    /// Gateway (`via`); none: the destination is on the link.
    pub gateway: Option<IpAddr>,
    /// `onlink`: the gateway is on the link even if no prefix says so.
    pub onlink: bool,
    /// Preferred source address (`src`).
    pub src: Option<IpAddr>,
}

impl std::fmt::Display for RuleSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ip -{} rule pref {}",
            if self.v6 { 6 } else { 4 },
            self.priority
        )?;
        if self.invert {
            f.write_str(" not")?;
        }
        if let Some((m, k)) = self.fwmark {
            write!(f, " fwmark {m:#x}/{k:#x}")?;
        }
        write!(f, " lookup {}", self.table)?;
        if let Some(n) = self.suppress_prefixlen {
            write!(f, " suppress_prefixlength {n}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for RouteSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.dst, self.len)?;
        if let Some(g) = self.gateway {
            write!(f, " via {g}")?;
        }
        write!(f, " dev#{} table {}", self.oif, self.table)?;
        if self.onlink {
            f.write_str(" onlink")?;
        }
        if let Some(s) = self.src {
            write!(f, " src {s}")?;
        }
        Ok(())
    }
}

/// A unicast route as the kernel reported it (in a dump or an event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    /// Table.
    pub table: u32,
    /// Destination.
    pub dst: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// Output interface (none for a multipath route).
    pub oif: Option<u32>,
    /// Gateway.
    pub gateway: Option<IpAddr>,
    /// Metric (`RTA_PRIORITY`).
    pub metric: u32,
    /// Who added it (`RTPROT_*`).
    pub protocol: u8,
}

// Route attribute kinds (linux/rtnetlink.h).
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_TABLE: u16 = 15;

fn ip_from(family_v6: bool, b: &[u8]) -> Option<IpAddr> {
    if family_v6 {
        <[u8; 16]>::try_from(b).ok().map(IpAddr::from)
    } else {
        <[u8; 4]>::try_from(b).ok().map(IpAddr::from)
    }
}

fn u32_from(b: &[u8]) -> Option<u32> {
    <[u8; 4]>::try_from(b).ok().map(u32::from_ne_bytes)
}

/// Parses a route message body (`RTM_NEWROUTE`/`RTM_DELROUTE`). `None`:
/// it does not parse; `Some(None)`: a route of no interest here (not
/// unicast, of another family, or a cached clone).
pub fn parse_route(body: &[u8]) -> Option<Option<RouteInfo>> {
    let head = RouteHeader::parse(body).ok()?;
    let v6 = match head.address_family {
        AddressFamily::Inet => false,
        AddressFamily::Inet6 => true,
        _ => return Some(None),
    };
    if head.kind != RouteType::Unicast || head.flags.contains(RouteFlags::Cloned) {
        return Some(None);
    }
    let mut info = RouteInfo {
        table: u32::from(head.table),
        dst: if v6 {
            IpAddr::from([0u8; 16])
        } else {
            IpAddr::from([0u8; 4])
        },
        len: head.destination_prefix_length,
        oif: None,
        gateway: None,
        metric: 0,
        protocol: head.protocol.into(),
    };
    const HEADER_LEN: usize = 12;
    for nla in NlasIterator::new(body.get(HEADER_LEN..)?) {
        let nla = nla.ok()?;
        let v = nla.value();
        match nla.kind() {
            RTA_DST => info.dst = ip_from(v6, v)?,
            RTA_OIF => info.oif = Some(u32_from(v)?),
            RTA_GATEWAY => info.gateway = Some(ip_from(v6, v)?),
            RTA_PRIORITY => info.metric = u32_from(v)?,
            RTA_TABLE => info.table = u32_from(v)?,
            _ => {}
        }
    }
    Some(Some(info))
}

/// A rule as the kernel reported it: what [`leftovers`] needs to judge
/// and delete it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// The rule as parsed (sent back as is to delete it).
    pub message: RuleMessage,
    /// Priority.
    pub priority: u32,
    /// Table.
    pub table: u32,
    /// Who added it (`FRA_PROTOCOL`; 0 on kernels before 4.17).
    pub protocol: u8,
}

fn parse_rule(body: &[u8]) -> Option<RuleInfo> {
    use netlink_packet_core::Parseable;
    let message = RuleMessage::parse(body).ok()?;
    let mut info = RuleInfo {
        priority: 0,
        table: u32::from(message.header.table),
        protocol: 0,
        message: message.clone(),
    };
    for a in &message.attributes {
        match a {
            RuleAttribute::Priority(p) => info.priority = *p,
            RuleAttribute::Table(t) => info.table = *t,
            RuleAttribute::Protocol(p) => info.protocol = (*p).into(),
            _ => {}
        }
    }
    Some(info)
}

/// How long a dump may take before it is given up.
const DUMP_TIMEOUT: Duration = Duration::from_secs(5);

/// Dumps every message of kind `what` (routes or rules of both
/// families) and returns each message's type and body.
fn dump(what: RouteNetlinkMessage) -> io::Result<Vec<(u16, Vec<u8>)>> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    let timeout = nix::sys::time::TimeVal::new(DUMP_TIMEOUT.as_secs() as i64, 0);
    setsockopt(&socket.as_fd(), sockopt::ReceiveTimeout, &timeout).map_err(io::Error::from)?;
    const SEQ: u32 = 1;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = SEQ;
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(what));
    msg.finalize();
    let mut buf = vec![0; msg.buffer_len()];
    msg.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "rtnetlink dump that does not parse",
        )
    };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = socket.recv(&mut &mut buf[..], 0)?;
        let mut datagram = &buf[..n.min(buf.len())];
        while !datagram.is_empty() {
            let m = NetlinkBuffer::new_checked(&datagram).map_err(|_| bad())?;
            if m.sequence_number() == SEQ {
                match m.message_type() {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => return Err(bad()),
                    t => out.push((t, m.payload().to_vec())),
                }
            }
            let len = m.length() as usize;
            datagram = datagram.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        }
    }
}

/// Every unicast route of every table and both families.
pub fn dump_routes() -> io::Result<Vec<RouteInfo>> {
    let mut m = RouteMessage::default();
    m.header.address_family = AddressFamily::Unspec;
    Ok(dump(RouteNetlinkMessage::GetRoute(m))?
        .iter()
        .filter_map(|(_, body)| parse_route(body).flatten())
        .collect())
}

/// Every rule of both families.
pub fn dump_rules() -> io::Result<Vec<RuleInfo>> {
    let mut m = RuleMessage::default();
    m.header.family = AddressFamily::Unspec;
    Ok(dump(RouteNetlinkMessage::GetRule(m))?
        .iter()
        .filter_map(|(_, body)| parse_rule(body))
        .collect())
}

fn rule_message(r: &RuleSpec) -> RuleMessage {
    let mut m = RuleMessage::default();
    m.header.family = if r.v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    m.header.action = RuleAction::ToTable;
    m.header.table = if r.table < 256 { r.table as u8 } else { 0 };
    if r.invert {
        m.header.flags = RuleFlags::Invert;
    }
    m.attributes.push(RuleAttribute::Priority(r.priority));
    m.attributes.push(RuleAttribute::Table(r.table));
    m.attributes
        .push(RuleAttribute::Protocol(RouteProtocol::from(RTPROT_MPT)));
    if let Some((mark, mask)) = r.fwmark {
        m.attributes.push(RuleAttribute::FwMark(mark));
        m.attributes.push(RuleAttribute::FwMask(mask));
    }
    if let Some(n) = r.suppress_prefixlen {
        m.attributes.push(RuleAttribute::SuppressPrefixLen(n));
    }
    m
}

fn route_message(r: &RouteSpec) -> RouteMessage {
    let mut m = RouteMessage::default();
    let v6 = r.dst.is_ipv6();
    m.header.address_family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    m.header.destination_prefix_length = r.len;
    m.header.table = if r.table < 256 { r.table as u8 } else { 0 };
    m.header.protocol = RouteProtocol::from(RTPROT_MPT);
    m.header.kind = RouteType::Unicast;
    m.header.scope = if r.gateway.is_none() && !v6 {
        RouteScope::Link
    } else {
        RouteScope::Universe
    };
    if r.onlink {
        m.header.flags = RouteFlags::Onlink;
    }
    m.attributes.push(RouteAttribute::Table(r.table));
    m.attributes
        .push(RouteAttribute::Destination(RouteAddress::from(r.dst)));
    m.attributes.push(RouteAttribute::Oif(r.oif));
    if let Some(g) = r.gateway {
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::from(g)));
    }
    if let Some(s) = r.src {
        m.attributes
            .push(RouteAttribute::PrefSource(RouteAddress::from(s)));
    }
    m
}

/// Adds a rule. An identical rule already there is no error.
pub fn add_rule(r: &RuleSpec) -> Result<(), RouteError> {
    let msg = RouteNetlinkMessage::NewRule(rule_message(r));
    match request(msg, NLM_F_CREATE | NLM_F_EXCL, "add") {
        Err(RouteError::Refused { errno, .. }) if errno == libc::EEXIST => Ok(()),
        other => other,
    }
}

/// Deletes a rule; one that is not there is no error.
pub fn del_rule(r: &RuleSpec) -> Result<(), RouteError> {
    gone_is_ok(request(
        RouteNetlinkMessage::DelRule(rule_message(r)),
        0,
        "delete",
    ))
}

/// Adds a route. `replace`: one with the same key (table, prefix, metric)
/// is replaced (only ever in mptd's own tables); otherwise an existing one
/// is a refusal (`EEXIST`).
pub fn add_route(r: &RouteSpec, replace: bool) -> Result<(), RouteError> {
    let flags = if replace {
        NLM_F_CREATE | NLM_F_REPLACE
    } else {
        NLM_F_CREATE | NLM_F_EXCL
    };
    request(
        RouteNetlinkMessage::NewRoute(route_message(r)),
        flags,
        "add",
    )
}

/// Deletes a route (matched on all its attributes, so a route that has
/// changed since is left alone); one that is not there is no error.
pub fn del_route(r: &RouteSpec) -> Result<(), RouteError> {
    gone_is_ok(request(
        RouteNetlinkMessage::DelRoute(route_message(r)),
        0,
        "delete",
    ))
}

fn gone_is_ok(r: Result<(), RouteError>) -> Result<(), RouteError> {
    match r {
        Err(RouteError::Refused { errno, .. })
            if errno == libc::ESRCH || errno == libc::ENOENT || errno == libc::ENODEV =>
        {
            Ok(())
        }
        other => other,
    }
}

/// The numbers that make a rule or route mptd's (of one daemon: its
/// configured bases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// Rule priorities `priority..priority + 3`.
    pub priority: u32,
    /// Tables `table..=table + tables`.
    pub table: u32,
    /// How many uplink tables there can be.
    pub tables: u32,
}

impl Ownership {
    fn owns_table(&self, t: u32) -> bool {
        t >= self.table && t <= self.table.saturating_add(self.tables)
    }
}

/// Removes what an earlier run of this daemon (same bases) left behind: its
/// rules (our protocol, or on kernels without rule protocols our
/// priorities and tables) and the routes of its tables with our protocol.
/// Returns how many were removed.
pub fn remove_leftovers(own: &Ownership) -> Result<usize, RouteError> {
    let mut removed = 0;
    for rule in dump_rules()? {
        let ours_by_numbers = rule.priority >= own.priority
            && rule.priority < own.priority + 3
            && (own.owns_table(rule.table) || rule.table == TABLE_MAIN);
        if ours_by_numbers && (rule.protocol == RTPROT_MPT || rule.protocol == 0) {
            gone_is_ok(request(
                RouteNetlinkMessage::DelRule(rule.message),
                0,
                "delete",
            ))?;
            removed += 1;
        }
    }
    for route in dump_routes()? {
        if route.protocol == RTPROT_MPT && own.owns_table(route.table) {
            if let Some(oif) = route.oif {
                del_route(&RouteSpec {
                    table: route.table,
                    dst: route.dst,
                    len: route.len,
                    oif,
                    gateway: route.gateway,
                    onlink: false,
                    src: None,
                })?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;

    #[test]
    fn a_route_reads_back_as_written() {
        let spec = RouteSpec {
            table: 28017,
            dst: "0.0.0.0".parse().unwrap(),
            len: 0,
            oif: 7,
            gateway: Some("10.1.1.1".parse().unwrap()),
            onlink: false,
            src: None,
        };
        let m = route_message(&spec);
        let mut buf = vec![0; m.buffer_len()];
        m.emit(&mut buf);
        let info = parse_route(&buf).unwrap().unwrap();
        assert_eq!(info.table, 28017);
        assert_eq!(info.oif, Some(7));
        assert_eq!(info.gateway, spec.gateway);
        assert_eq!(info.protocol, RTPROT_MPT);
        assert_eq!((info.dst, info.len), (spec.dst, 0));
        // Cut anywhere: never a panic.
        for n in 0..buf.len() {
            let _ = parse_route(&buf[..n]);
        }
    }

    #[test]
    fn a_rule_reads_back_as_written() {
        let spec = RuleSpec {
            v6: true,
            priority: 28018,
            table: 28016,
            fwmark: Some((0x6d70_0000, 0xffff_0000)),
            invert: true,
            suppress_prefixlen: None,
        };
        let m = rule_message(&spec);
        let mut buf = vec![0; m.buffer_len()];
        m.emit(&mut buf);
        let info = parse_rule(&buf).unwrap();
        assert_eq!(
            (info.priority, info.table, info.protocol),
            (28018, 28016, RTPROT_MPT)
        );
        assert!(info.message.header.flags.contains(RuleFlags::Invert));
        assert_eq!(
            spec.to_string(),
            "ip -6 rule pref 28018 not fwmark 0x6d700000/0xffff0000 lookup 28016"
        );
    }
}
