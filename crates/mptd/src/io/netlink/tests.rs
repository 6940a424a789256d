use super::*;

/// A netlink message: header (length, type, flags 0, `seq`, pid 0) and
/// `body`, padded to 4 bytes.
fn msg(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&((NLMSG_HDR_LEN + body.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    while m.len() % 4 != 0 {
        m.push(0);
    }
    m
}

fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(value);
    while a.len() % 4 != 0 {
        a.push(0);
    }
    a
}

fn link_body(index: u32, flags: u32, name: &str) -> Vec<u8> {
    let mut b = vec![0u8; IFINFO_LEN];
    b[4..8].copy_from_slice(&index.to_ne_bytes());
    b[8..12].copy_from_slice(&flags.to_ne_bytes());
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    b.extend(attr(IFLA_IFNAME, &n));
    b
}

fn addr_body(family: u8, index: u32, scope: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![family, 24, 0, scope];
    b.extend_from_slice(&index.to_ne_bytes());
    for a in attrs {
        b.extend_from_slice(a);
    }
    b
}

fn all(buf: &[u8]) -> (Vec<Message>, u64) {
    let mut v = Vec::new();
    let bad = parse(buf, |m| v.push(m));
    (v, bad)
}

#[test]
fn link_up_needs_up_and_running() {
    let mut buf = msg(RTM_NEWLINK, 0, &link_body(3, IFF_UP | IFF_RUNNING, "wlan0"));
    buf.extend(msg(RTM_NEWLINK, 0, &link_body(4, IFF_UP, "eth1")));
    buf.extend(msg(RTM_DELLINK, 0, &link_body(5, 0, "gone")));
    let (v, bad) = all(&buf);
    assert_eq!(bad, 0);
    assert_eq!(
        v,
        vec![
            Message::Event(NetEvent::Link {
                index: 3,
                name: Some("wlan0".into()),
                up: true
            }),
            Message::Event(NetEvent::Link {
                index: 4,
                name: Some("eth1".into()),
                up: false
            }),
            Message::Event(NetEvent::LinkGone { index: 5 }),
        ]
    );
}

#[test]
fn addresses_prefer_ifa_local_and_read_flags() {
    let v4 = [10, 0, 0, 1];
    let peer = [10, 0, 0, 2];
    let mut buf = msg(
        RTM_NEWADDR,
        0,
        &addr_body(
            AF_INET,
            3,
            0,
            &[attr(IFA_ADDRESS, &peer), attr(IFA_LOCAL, &v4)],
        ),
    );
    let v6: Ipv6Addr = "fd00::1".parse().unwrap();
    buf.extend(msg(
        RTM_NEWADDR,
        0,
        &addr_body(
            AF_INET6,
            4,
            0,
            &[
                attr(IFA_ADDRESS, &v6.octets()),
                attr(
                    IFA_FLAGS,
                    &(IFA_F_TENTATIVE | IFA_F_DEPRECATED).to_ne_bytes(),
                ),
            ],
        ),
    ));
    buf.extend(msg(
        RTM_DELADDR,
        0,
        &addr_body(AF_INET, 3, 0, &[attr(IFA_ADDRESS, &v4)]),
    ));
    let (v, bad) = all(&buf);
    assert_eq!(bad, 0);
    assert_eq!(
        v,
        vec![
            Message::Event(NetEvent::Addr(AddrInfo {
                index: 3,
                addr: IpAddr::from(v4),
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
                addr: IpAddr::from(v4)
            }),
        ]
    );
}

#[test]
fn done_error_and_other_types() {
    let mut buf = msg(NLMSG_DONE, 7, &0i32.to_ne_bytes());
    buf.extend(msg(NLMSG_ERROR, 8, &(-16i32).to_ne_bytes()));
    buf.extend(msg(24 /* RTM_NEWROUTE */, 0, &[0; 12]));
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
    let mut buf = msg(
        RTM_NEWADDR,
        0,
        &addr_body(AF_INET, 3, 0, &[attr(IFA_ADDRESS, &[1, 2, 3])]),
    );
    // A body too short for its header.
    buf.extend(msg(RTM_NEWLINK, 0, &[0; 8]));
    // An attribute claiming more than there is.
    let mut body = link_body(9, IFF_UP, "x");
    body.extend_from_slice(&200u16.to_ne_bytes());
    body.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
    buf.extend(msg(RTM_NEWLINK, 0, &body));
    buf.extend(msg(RTM_NEWLINK, 0, &link_body(3, 0, "ok")));
    let (v, bad) = all(&buf);
    assert_eq!(bad, 3);
    assert_eq!(
        v,
        vec![Message::Event(NetEvent::Link {
            index: 3,
            name: Some("ok".into()),
            up: false
        })]
    );
    // A header whose length runs past the datagram ends it.
    let mut cut = msg(RTM_NEWLINK, 0, &link_body(3, 0, "ok"));
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
        RTM_NEWADDR,
        0,
        &addr_body(AF_INET6, 1, 0, &[attr(IFA_ADDRESS, &[0; 16])]),
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
