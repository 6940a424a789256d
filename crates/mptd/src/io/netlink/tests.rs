use std::net::{Ipv4Addr, Ipv6Addr};
use std::num::NonZeroI32;

use netlink_packet_core::{DefaultNla, DoneMessage};
use netlink_packet_route::address::{AddressFlags, AddressHeaderFlags, AddressScope};
use netlink_packet_route::route::RouteMessage;

use super::*;

const AF_INET: AddressFamily = AddressFamily::Inet;
const AF_INET6: AddressFamily = AddressFamily::Inet6;
const IFF_UP: LinkFlags = LinkFlags::Up;
const IFF_RUNNING: LinkFlags = LinkFlags::Running;

/// `payload` as a netlink message with sequence number `seq`, emitted by
/// the crate (header length and type filled in by `finalize`).
fn msg(seq: u32, payload: NetlinkPayload<RouteNetlinkMessage>) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.sequence_number = seq;
    let mut m = NetlinkMessage::new(header, payload);
    m.finalize();
    let mut buf = vec![0; m.buffer_len()];
    m.serialize(&mut buf);
    buf
}

/// A message of type `kind` around a `body` that need not be well formed:
/// the crate's header emitter, then the bytes, padded to 4.
fn raw(kind: u16, body: &[u8]) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.message_type = kind;
    header.length = (header.buffer_len() + body.len()) as u32;
    let mut m = vec![0; header.buffer_len()];
    header.emit(&mut m);
    m.extend_from_slice(body);
    m.resize(m.len().next_multiple_of(4), 0);
    m
}

/// The bytes of an emitted (link, address or route) message body.
fn body(m: &impl Emitable) -> Vec<u8> {
    let mut b = vec![0; m.buffer_len()];
    m.emit(&mut b);
    b
}

fn link(index: u32, flags: LinkFlags, name: &str) -> LinkMessage {
    let mut m = LinkMessage::default();
    m.header = LinkHeader {
        index,
        flags,
        ..LinkHeader::default()
    };
    m.attributes = vec![LinkAttribute::IfName(name.into())];
    m
}

fn new_link(index: u32, flags: LinkFlags, name: &str) -> Vec<u8> {
    msg(
        0,
        RouteNetlinkMessage::NewLink(link(index, flags, name)).into(),
    )
}

fn addr(
    family: AddressFamily,
    index: u32,
    scope: u8,
    attrs: Vec<AddressAttribute>,
) -> AddressMessage {
    let mut m = AddressMessage::default();
    m.header = AddressHeader {
        family,
        prefix_len: 24,
        flags: AddressHeaderFlags::empty(),
        scope: AddressScope::from(scope),
        index,
    };
    m.attributes = attrs;
    m
}

fn all(buf: &[u8]) -> (Vec<Message>, u64) {
    let mut v = Vec::new();
    let bad = parse(buf, |m| v.push(m));
    (v, bad)
}

#[test]
fn link_up_needs_up_and_running() {
    let mut buf = new_link(3, IFF_UP | IFF_RUNNING, "wlan0");
    buf.extend(new_link(4, IFF_UP, "eth1"));
    buf.extend(msg(
        0,
        RouteNetlinkMessage::DelLink(link(5, LinkFlags::empty(), "gone")).into(),
    ));
    let (v, bad) = all(&buf);
    assert_eq!(bad, 0);
    assert_eq!(
        v,
        vec![
            Message::Event(NetEvent::Link {
                index: 3,
                name: Some("wlan0".into()),
                up: true,
                p2p: false
            }),
            Message::Event(NetEvent::Link {
                index: 4,
                name: Some("eth1".into()),
                up: false,
                p2p: false
            }),
            Message::Event(NetEvent::LinkGone { index: 5 }),
        ]
    );
}

#[test]
fn addresses_prefer_ifa_local_and_read_flags() {
    let v4 = Ipv4Addr::new(10, 0, 0, 1);
    let peer = Ipv4Addr::new(10, 0, 0, 2);
    let mut buf = msg(
        0,
        RouteNetlinkMessage::NewAddress(addr(
            AF_INET,
            3,
            0,
            vec![
                AddressAttribute::Address(peer.into()),
                AddressAttribute::Local(v4.into()),
            ],
        ))
        .into(),
    );
    let v6: Ipv6Addr = "fd00::1".parse().unwrap();
    buf.extend(msg(
        0,
        RouteNetlinkMessage::NewAddress(addr(
            AF_INET6,
            4,
            0,
            vec![
                AddressAttribute::Address(v6.into()),
                AddressAttribute::Flags(AddressFlags::Tentative | AddressFlags::Deprecated),
            ],
        ))
        .into(),
    ));
    buf.extend(msg(
        0,
        RouteNetlinkMessage::DelAddress(addr(
            AF_INET,
            3,
            0,
            vec![AddressAttribute::Address(v4.into())],
        ))
        .into(),
    ));
    let (v, bad) = all(&buf);
    assert_eq!(bad, 0);
    assert_eq!(
        v,
        vec![
            Message::Event(NetEvent::Addr(AddrInfo {
                index: 3,
                addr: IpAddr::V4(v4),
                prefix_len: 24,
                scope: 0,
                usable: true,
                deprecated: false,
            })),
            Message::Event(NetEvent::Addr(AddrInfo {
                index: 4,
                addr: IpAddr::V6(v6),
                prefix_len: 24,
                scope: 0,
                usable: false,
                deprecated: true,
            })),
            Message::Event(NetEvent::AddrGone {
                index: 3,
                addr: IpAddr::V4(v4)
            }),
        ]
    );
}

#[test]
fn done_error_and_other_types() {
    let mut buf = msg(7, NetlinkPayload::Done(DoneMessage::default()));
    let mut busy = ErrorMessage::default();
    busy.code = NonZeroI32::new(-16);
    buf.extend(msg(8, NetlinkPayload::Error(busy)));
    buf.extend(msg(
        0,
        RouteNetlinkMessage::NewRoute(RouteMessage::default()).into(),
    ));
    let (v, bad) = all(&buf);
    assert_eq!(bad, 0);
    assert_eq!(
        v,
        vec![
            Message::Done(7),
            Message::Error { seq: 8, code: -16 },
            Message::Other
        ]
    );
}

#[test]
fn bad_messages_are_counted_and_skipped() {
    // An address of the wrong length, then a good link message.
    let short = AddressAttribute::Other(DefaultNla::new(IFA_ADDRESS, vec![1, 2, 3]));
    let mut buf = msg(
        0,
        RouteNetlinkMessage::NewAddress(addr(AF_INET, 3, 0, vec![short])).into(),
    );
    // A body too short for its header.
    buf.extend(raw(RTM_NEWLINK, &[0; 8]));
    // An attribute claiming more than there is.
    let mut long = body(&link(9, IFF_UP, "x"));
    long.extend_from_slice(&200u16.to_ne_bytes());
    long.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
    buf.extend(raw(RTM_NEWLINK, &long));
    buf.extend(new_link(3, LinkFlags::empty(), "ok"));
    let (v, bad) = all(&buf);
    assert_eq!(bad, 3);
    assert_eq!(
        v,
        vec![Message::Event(NetEvent::Link {
            index: 3,
            name: Some("ok".into()),
            up: false,
            p2p: false
        })]
    );
    // A header whose length runs past the datagram ends it.
    let mut cut = new_link(3, LinkFlags::empty(), "ok");
    cut.truncate(cut.len() - 4);
    assert_eq!(all(&cut).1, 1);
    assert_eq!(all(&[1, 2, 3]).1, 1);
    assert_eq!(all(&[]), (vec![], 0));
}

#[test]
fn arbitrary_bytes_never_panic() {
    // xorshift: many random datagrams, some starting with a valid header.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let good = msg(
        0,
        RouteNetlinkMessage::NewAddress(addr(
            AF_INET6,
            1,
            0,
            vec![AddressAttribute::Address(Ipv6Addr::UNSPECIFIED.into())],
        ))
        .into(),
    );
    for i in 0..20_000 {
        let len = (next() % 96) as usize;
        let mut buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 {
            // Mutate a valid message instead.
            buf = good.clone();
            let at = (next() as usize) % buf.len();
            buf[at] = next() as u8;
            buf.truncate((next() as usize) % (buf.len() + 1));
        }
        let _ = parse(&buf, |_| {});
    }
}

#[test]
fn snapshot_sees_loopback() {
    let events = snapshot().expect("netlink dump");
    let lo = events
        .iter()
        .find_map(|e| match e {
            NetEvent::Link {
                index,
                name: Some(n),
                ..
            } if n == "lo" => Some(*index),
            _ => None,
        })
        .expect("lo in the dump");
    assert!(
        events.iter().any(|e| matches!(e,
            NetEvent::Addr(a) if a.index == lo && a.addr == IpAddr::V4(Ipv4Addr::LOCALHOST))),
        "127.0.0.1 on lo: {events:?}"
    );
}
