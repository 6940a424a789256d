//! Link and address events from the kernel (rtnetlink), as a small typed
//! enum.
//!
//! One job: turn `RTM_NEWLINK`/`RTM_DELLINK`/`RTM_NEWADDR`/`RTM_DELADDR`
//! messages into [`NetEvent`]s. What they mean for the paths is
//! [`crate::control::links`]' business.
//!
//! [`Listener`] subscribes to the link and IPv4/IPv6 address groups and
//! then dumps every link and address, so whoever reads its events learns
//! the whole state first ([`NetEvent::DumpStart`] ... [`NetEvent::DumpDone`])
//! and the changes after. Events that arrive while a dump runs are passed
//! on as they come: a dump entry and a change of the same object say the
//! same kind of thing (the object as it is now), so order does not matter
//! beyond "later wins". If the kernel drops notifications (`ENOBUFS`: the
//! socket's buffer overflowed), the listener dumps again.
//!
//! Parsing is our own (about a hundred lines, four message types and four
//! attributes): the netlink crates would bring a larger dependency than
//! the parser. Every length is checked before it is used; a message that
//! does not parse is counted in [`NetlinkStats::malformed`] and skipped,
//! never a panic.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};

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

// rtnetlink constants (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h,
// linux/if_link.h); libc has most, spelled out here with their values so
// the parser reads on its own.
const NLMSG_HDR_LEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const RTM_GETADDR: u16 = 22;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const IFINFO_LEN: usize = 16;
const IFADDR_LEN: usize = 8;
const IFLA_IFNAME: u16 = 3;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_FLAGS: u16 = 8;
const IFF_UP: u32 = 0x1;
const IFF_RUNNING: u32 = 0x40;
const IFA_F_DADFAILED: u32 = 0x08;
const IFA_F_DEPRECATED: u32 = 0x20;
const IFA_F_TENTATIVE: u32 = 0x40;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const RTMGRP_LINK: u32 = 0x1;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

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
    /// Another message type (e.g. a route): of no interest.
    Other,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Route attributes (`struct rtattr`: u16 length, u16 type, value) in `b`,
/// each as (type, value). Stops at the first attribute whose length does
/// not fit, and says so with `Err(())`.
fn attrs(mut b: &[u8], mut f: impl FnMut(u16, &[u8])) -> Result<(), ()> {
    while !b.is_empty() {
        let len = usize::from(u16_at(b, 0).ok_or(())?);
        let kind = u16_at(b, 2).ok_or(())?;
        if len < 4 || len > b.len() {
            return Err(());
        }
        // The top bits are flags (NLA_F_NESTED, NLA_F_NET_BYTEORDER).
        f(kind & 0x3fff, &b[4..len]);
        b = b.get(align4(len)..).unwrap_or(&[]);
    }
    Ok(())
}

fn ip_from(family: u8, v: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?))),
        _ => None,
    }
}

fn parse_link(kind: u16, body: &[u8]) -> Option<NetEvent> {
    let head = body.get(..IFINFO_LEN)?;
    let index = u32_at(head, 4)?;
    let flags = u32_at(head, 8)?;
    if kind == RTM_DELLINK {
        return Some(NetEvent::LinkGone { index });
    }
    let mut name = None;
    attrs(&body[IFINFO_LEN..], |t, v| {
        if t == IFLA_IFNAME {
            let v = v.split(|&c| c == 0).next().unwrap_or(v);
            name = std::str::from_utf8(v).ok().map(str::to_owned);
        }
    })
    .ok()?;
    Some(NetEvent::Link {
        index,
        name,
        up: flags & IFF_UP != 0 && flags & IFF_RUNNING != 0,
    })
}

fn parse_addr(kind: u16, body: &[u8]) -> Option<Option<NetEvent>> {
    let head = body.get(..IFADDR_LEN)?;
    let family = head[0];
    let prefix_len = head[1];
    let mut flags = u32::from(head[2]);
    let scope = head[3];
    let index = u32_at(head, 4)?;
    let (mut local, mut address) = (None, None);
    let mut bad = false;
    attrs(&body[IFADDR_LEN..], |t, v| match t {
        IFA_LOCAL => {
            local = ip_from(family, v).or_else(|| {
                bad = true;
                None
            })
        }
        IFA_ADDRESS => {
            address = ip_from(family, v).or_else(|| {
                bad = true;
                None
            })
        }
        IFA_FLAGS => match u32_at(v, 0) {
            Some(f) => flags = f,
            None => bad = true,
        },
        _ => {}
    })
    .ok()?;
    if family != AF_INET && family != AF_INET6 {
        // Another family's address (e.g. AF_PACKET would never come here,
        // but a future one might): not ours to judge.
        return Some(None);
    }
    if bad {
        return None;
    }
    // IFA_LOCAL is the local end of a point-to-point link (IFA_ADDRESS
    // is then the peer); otherwise only IFA_ADDRESS is present.
    let addr = local.or(address)?;
    Some(Some(if kind == RTM_DELADDR {
        NetEvent::AddrGone { index, addr }
    } else {
        NetEvent::Addr(AddrInfo {
            index,
            addr,
            prefix_len,
            scope,
            usable: flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED) == 0,
            deprecated: flags & IFA_F_DEPRECATED != 0,
        })
    }))
}

/// Parses one netlink datagram, calling `f` for each message in it.
/// Returns how many messages did not parse (each skipped; a header whose
/// length does not fit ends the datagram).
pub fn parse(mut buf: &[u8], mut f: impl FnMut(Message)) -> u64 {
    let mut bad = 0;
    while !buf.is_empty() {
        let (Some(len), Some(kind), Some(seq)) = (u32_at(buf, 0), u16_at(buf, 4), u32_at(buf, 8))
        else {
            return bad + 1;
        };
        let len = len as usize;
        if len < NLMSG_HDR_LEN || len > buf.len() {
            return bad + 1;
        }
        let body = &buf[NLMSG_HDR_LEN..len];
        let msg = match kind {
            RTM_NEWLINK | RTM_DELLINK => parse_link(kind, body).map(Message::Event),
            RTM_NEWADDR | RTM_DELADDR => {
                parse_addr(kind, body).map(|e| e.map_or(Message::Other, Message::Event))
            }
            NLMSG_DONE => Some(Message::Done(seq)),
            NLMSG_ERROR => body
                .get(..4)
                .and_then(|b| Some(i32::from_ne_bytes(b.try_into().ok()?)))
                .map(|code| Message::Error { seq, code }),
            NLMSG_OVERRUN => Some(Message::Overrun),
            _ => Some(Message::Other),
        };
        match msg {
            Some(m) => f(m),
            None => bad += 1,
        }
        buf = buf.get(align4(len)..).unwrap_or(&[]);
    }
    bad
}

/// A dump request (`RTM_GETLINK` or `RTM_GETADDR`, all families).
fn dump_request(kind: u16, seq: u32) -> [u8; NLMSG_HDR_LEN + IFINFO_LEN] {
    // Both ifinfomsg (16 bytes) and ifaddrmsg (8) start with the family
    // byte; AF_UNSPEC (0) asks for every family. The longer body serves
    // both: the kernel reads the header it needs.
    let body = if kind == RTM_GETLINK {
        IFINFO_LEN
    } else {
        IFADDR_LEN
    };
    let len = (NLMSG_HDR_LEN + body) as u32;
    let mut m = [0u8; NLMSG_HDR_LEN + IFINFO_LEN];
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m
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
    Live,
}

/// The subscribed rtnetlink socket.
pub struct Listener {
    fd: OwnedFd,
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
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRoute,
        )?;
        let groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, groups))?;
        setsockopt(&fd, sockopt::RcvBuf, &SOCKET_BUFFER)?;
        let timeout = nix::sys::time::TimeVal::new(0, SHUTDOWN_POLL.as_micros() as i64);
        setsockopt(&fd, sockopt::ReceiveTimeout, &timeout)?;
        let mut l = Listener {
            fd,
            seq: 0,
            phase: Phase::Live,
            lost_in_dump: false,
            stats: Arc::new(NetlinkStats::default()),
        };
        l.start_dump()?;
        Ok(l)
    }

    fn request(&mut self, kind: u16) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let m = dump_request(kind, self.seq);
        let len = if kind == RTM_GETLINK {
            NLMSG_HDR_LEN + IFINFO_LEN
        } else {
            NLMSG_HDR_LEN + IFADDR_LEN
        };
        send(self.fd.as_raw_fd(), &m[..len], MsgFlags::empty())?;
        Ok(self.seq)
    }

    fn start_dump(&mut self) -> io::Result<()> {
        let seq = self.request(RTM_GETLINK)?;
        self.phase = Phase::Links(seq);
        Ok(())
    }

    /// Reads one datagram (waiting at most [`SHUTDOWN_POLL`]) and passes
    /// its events to `out`. A dump in progress goes on to its next part
    /// when one ends; a lost notification starts a new dump.
    pub fn poll(&mut self, buf: &mut [u8], out: &mut impl FnMut(NetEvent)) -> io::Result<()> {
        let n = match recv(self.fd.as_raw_fd(), buf, MsgFlags::empty()) {
            Ok(n) => n,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return Ok(()),
            Err(nix::errno::Errno::ENOBUFS) => {
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
            Err(e) => return Err(e.into()),
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
                Phase::Links(s) if s == seq => next = Some(RTM_GETADDR),
                Phase::Addrs(s) if s == seq => next = Some(0),
                _ => {}
            },
            Message::Error { code, seq } => {
                if code != 0 {
                    stats.errors.add(1);
                    tracing::debug!(seq, code, "netlink error answer");
                }
                if matches!(phase, Phase::Links(s) | Phase::Addrs(s) if s == seq) {
                    // The dump failed (e.g. EBUSY): start over.
                    next = Some(RTM_GETLINK);
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
            Some(RTM_GETADDR) => {
                let seq = self.request(RTM_GETADDR)?;
                self.phase = Phase::Addrs(seq);
            }
            Some(RTM_GETLINK) => {
                out(NetEvent::DumpStart);
                self.start_dump()?;
            }
            Some(_) => {
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

/// The links and addresses as they are now: one full dump, synchronously
/// (at start-up, to bind interface-only paths to their current address).
pub fn snapshot() -> io::Result<Vec<NetEvent>> {
    let mut l = Listener::open()?;
    let mut buf = vec![0u8; RECV_LEN];
    let mut events = Vec::new();
    let mut done = false;
    // A dump is a few datagrams; bound the reads in case the kernel never
    // ends it (each read waits at most SHUTDOWN_POLL).
    for _ in 0..1000 {
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
        "the kernel did not finish the link and address dump",
    ))
}

#[cfg(test)]
mod tests;
