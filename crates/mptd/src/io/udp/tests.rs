use super::*;

#[test]
fn batch_round_trip_on_loopback() {
    let a = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let b = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let packets: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
    let to = SockAddr::from(b.local_addr());
    let (sent, failed) = a.send_batch(&to, None, packets.iter().map(|p| p.as_slice()));
    assert_eq!((sent, failed), (10, 0));
    let mut bufs = vec![vec![0u8; 2048]; BATCH];
    let mut meta = [RecvMeta::default(); BATCH];
    let mut got = 0;
    while got < 10 {
        assert!(b.wait_readable(Duration::from_secs(5)).unwrap());
        got += b.recv_batch(&mut bufs[got..], &mut meta[got..]).unwrap();
    }
    for i in 0..10 {
        assert_eq!(meta[i].len, packets[i].len());
        assert_eq!(&bufs[i][..meta[i].len], &packets[i][..]);
        assert_eq!(meta[i].from, Some(a.local_addr()));
        assert!(!meta[i].truncated);
    }
}

/// A shared (wildcard) socket learns which of its addresses a datagram
/// was sent to, and replies leave from that one: 127.0.0.3 here, where
/// routing alone picks 127.0.0.1.
#[test]
fn a_shared_socket_replies_from_the_address_it_was_reached_on() {
    let server = PathSocket::bind_shared("0.0.0.0:0".parse().unwrap()).unwrap();
    let port = server.local_addr().port();
    let client = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let reached: SocketAddr = SocketAddr::new([127, 0, 0, 3].into(), port);
    client.send_to(b"hello", reached).unwrap();
    let mut bufs = vec![vec![0u8; 2048]; 4];
    let mut meta = [RecvMeta::default(); 4];
    assert!(server.wait_readable(Duration::from_secs(5)).unwrap());
    assert_eq!(server.recv_batch(&mut bufs, &mut meta).unwrap(), 1);
    let via = meta[0].to.expect("the destination address is reported");
    assert_eq!(via.addr, reached.ip());
    let from = meta[0].from.unwrap();
    // One datagram, then three in one GSO send, then one without a
    // source (routing's choice) to show the difference.
    server.send_from(b"one", from, Some(&via)).unwrap();
    let to = SockAddr::from(from);
    assert_eq!(
        server
            .send_segments(&to, Some(&via), &[7u8; 1200], 400)
            .unwrap(),
        3
    );
    server.send_from(b"plain", from, None).unwrap();
    let mut sources = Vec::new();
    while sources.len() < 5 {
        assert!(client.wait_readable(Duration::from_secs(5)).unwrap());
        let n = client.recv_batch(&mut bufs, &mut meta).unwrap();
        for m in &meta[..n] {
            let count = m.datagrams(&bufs[0]).count();
            sources.extend(std::iter::repeat_n(m.from.unwrap().ip(), count));
        }
    }
    let lo: std::net::IpAddr = [127, 0, 0, 1].into();
    assert_eq!(
        sources,
        [reached.ip(), reached.ip(), reached.ip(), reached.ip(), lo]
    );
}

/// An address that is not ours any more (here one that never was)
/// does not stop the datagrams: they leave as routing picks.
#[test]
fn a_source_address_the_host_does_not_have_falls_back_to_routing() {
    let server = PathSocket::bind_shared("0.0.0.0:0".parse().unwrap()).unwrap();
    let client = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let gone = Source {
        addr: [192, 0, 2, 1].into(),
        ifindex: 0,
    };
    let to = client.local_addr();
    server.send_from(b"one", to, Some(&gone)).unwrap();
    let sock = SockAddr::from(to);
    assert_eq!(
        server
            .send_segments(&sock, Some(&gone), &[1u8; 900], 300)
            .unwrap(),
        3
    );
    let (sent, failed) = server.send_batch(&sock, Some(&gone), [&b"a"[..], &b"b"[..]].into_iter());
    assert_eq!((sent, failed), (2, 0));
    assert!(server.gso(), "not taken for a GSO refusal");
    let mut bufs = vec![vec![0u8; 2048]; 8];
    let mut meta = [RecvMeta::default(); 8];
    let mut got = 0;
    while got < 6 {
        assert!(client.wait_readable(Duration::from_secs(5)).unwrap());
        let n = client.recv_batch(&mut bufs, &mut meta).unwrap();
        for (b, m) in bufs.iter().zip(&meta[..n]) {
            assert_eq!(m.from.map(|f| f.ip()), Some([127, 0, 0, 1].into()));
            got += m.datagrams(b).count();
        }
    }
    assert_eq!(got, 6);
}

#[test]
fn a_shared_ipv6_socket_reports_the_address_it_was_reached_on() {
    let Ok(server) = PathSocket::bind_shared("[::]:0".parse().unwrap()) else {
        return; // no IPv6 on this host
    };
    let Ok(client) = PathSocket::bind("[::1]:0".parse().unwrap(), None) else {
        return;
    };
    let reached: SocketAddr = SocketAddr::new(
        std::net::Ipv6Addr::LOCALHOST.into(),
        server.local_addr().port(),
    );
    client.send_to(b"hello", reached).unwrap();
    let mut bufs = vec![vec![0u8; 2048]; 1];
    let mut meta = [RecvMeta::default(); 1];
    assert!(server.wait_readable(Duration::from_secs(5)).unwrap());
    assert_eq!(server.recv_batch(&mut bufs, &mut meta).unwrap(), 1);
    let via = meta[0].to.expect("the destination address is reported");
    assert_eq!(via.addr, reached.ip());
    server
        .send_from(b"back", meta[0].from.unwrap(), Some(&via))
        .unwrap();
    assert!(client.wait_readable(Duration::from_secs(5)).unwrap());
    assert_eq!(client.recv_batch(&mut bufs, &mut meta).unwrap(), 1);
    assert_eq!(meta[0].from.map(|f| f.ip()), Some(reached.ip()));
}

#[test]
fn oversized_datagram_is_flagged_truncated() {
    let a = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let b = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    a.send_to(&[7u8; 3000], b.local_addr()).unwrap();
    assert!(b.wait_readable(Duration::from_secs(5)).unwrap());
    let mut bufs = vec![vec![0u8; 1000]; 1];
    let mut meta = [RecvMeta::default(); 1];
    assert_eq!(b.recv_batch(&mut bufs, &mut meta).unwrap(), 1);
    assert!(meta[0].truncated);
}

#[test]
fn empty_socket_would_block_and_wait_times_out() {
    let b = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let mut bufs = vec![vec![0u8; 100]; 1];
    let mut meta = [RecvMeta::default(); 1];
    let e = b.recv_batch(&mut bufs, &mut meta).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    assert!(!b.wait_readable(Duration::from_millis(20)).unwrap());
}

#[test]
fn gso_is_retried_after_a_growing_wait() {
    let g = GsoState::new();
    let t = g.epoch;
    assert!(g.usable(|| t));
    assert_eq!(g.refused(t), 1);
    assert!(!g.usable(|| t + Duration::from_secs(9)));
    assert!(
        g.usable(|| t + Duration::from_secs(10)),
        "tried again after 10 s"
    );
    // Refused again: twice the wait.
    let t2 = t + Duration::from_secs(10);
    assert_eq!(g.refused(t2), 2);
    assert!(!g.usable(|| t2 + Duration::from_secs(19)));
    assert!(g.usable(|| t2 + Duration::from_secs(20)));
    // Many refusals: the wait stops growing at 10 minutes.
    for _ in 0..30 {
        g.refused(t2);
    }
    assert!(g.usable(|| t2 + GSO_RETRY_MAX));
    // It works again: on for good, and the next refusal starts over.
    assert!(g.worked());
    assert!(!g.worked());
    assert!(g.usable(|| t2));
    assert_eq!(g.refused(t2), 1);
}

#[test]
fn gso_send_arrives_as_separate_datagrams() {
    let a = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let b = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    // Three datagrams of 500 bytes and a last one of 123.
    let mut buf = Vec::new();
    for i in 0..3u8 {
        buf.extend_from_slice(&[i; 500]);
    }
    buf.extend_from_slice(&[9u8; 123]);
    let to = SockAddr::from(b.local_addr());
    assert_eq!(a.send_segments(&to, None, &buf, 500).unwrap(), 4);
    let got = receive_datagrams(&b, 4);
    let lens: Vec<usize> = got.iter().map(Vec::len).collect();
    assert_eq!(lens, [500, 500, 500, 123]);
    assert_eq!(got[1][0], 1);
    assert_eq!(got[3][0], 9);
}

/// Receives datagrams on `b` until `count` have come.
fn receive_datagrams(b: &PathSocket, count: usize) -> Vec<Vec<u8>> {
    let mut bufs = vec![vec![0u8; 65536]; 8];
    let mut meta = [RecvMeta::default(); 8];
    let mut got: Vec<Vec<u8>> = Vec::new();
    while got.len() < count {
        assert!(b.wait_readable(Duration::from_secs(5)).unwrap());
        let n = b.recv_batch(&mut bufs, &mut meta).unwrap();
        for i in 0..n {
            got.extend(meta[i].datagrams(&bufs[i]).map(|d| d.to_vec()));
        }
    }
    got
}

#[test]
fn a_received_message_says_when_the_kernel_took_it_in() {
    let a = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let b = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let to = SockAddr::from(b.local_addr());
    let mut bufs = vec![vec![0u8; 2048]; 1];
    let mut meta = [RecvMeta::default(); 1];
    // The kernel turns arrival stamping on a moment after the first
    // socket asks (until then it stamps at the read): a few tries.
    let mut lags = Vec::new();
    for _ in 0..5 {
        let before = wall_clock_ns();
        assert_eq!(
            a.send_datagrams(&to, None, &[io::IoSlice::new(b"x")])
                .unwrap(),
            1
        );
        // Read 50 ms later: the stamp is from the arrival, not the read.
        std::thread::sleep(Duration::from_millis(50));
        assert!(b.wait_readable(Duration::from_secs(5)).unwrap());
        assert_eq!(b.recv_batch(&mut bufs, &mut meta).unwrap(), 1);
        let read = wall_clock_ns();
        let arrived = meta[0].arrived_ns.expect("a receive timestamp");
        assert!(
            arrived >= before && arrived <= read,
            "{before} {arrived} {read}"
        );
        lags.push(arrival_lag(meta[0].arrived_ns, read));
        if lags.last().is_some_and(|&l| l >= Duration::from_millis(45)) {
            return;
        }
    }
    panic!("stamped at the read, not at the arrival: lags {lags:?}");
}

#[test]
fn an_arrival_lag_is_never_negative_nor_implausible() {
    let s = 1_000_000_000u64;
    assert_eq!(arrival_lag(None, 5 * s), Duration::ZERO);
    assert_eq!(
        arrival_lag(Some(5 * s - 300), 5 * s),
        Duration::from_nanos(300)
    );
    // Stamped after "now": the wall clock was stepped back.
    assert_eq!(arrival_lag(Some(6 * s), 5 * s), Duration::ZERO);
    // A second or more: stepped forward, not a real lag.
    assert_eq!(arrival_lag(Some(3 * s), 5 * s), Duration::ZERO);
}

#[test]
fn datagrams_from_separate_buffers_go_as_one_gso_send() {
    let a = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let b = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    // Each datagram in its own buffer, as the transmit stage has them;
    // only the first 300 bytes of the longer buffers are sent.
    let bufs: Vec<Vec<u8>> = (0..5u8)
        .map(|i| vec![0xa0 + i; if i == 4 { 77 } else { 400 }])
        .collect();
    let parts: Vec<io::IoSlice<'_>> = bufs
        .iter()
        .map(|b| io::IoSlice::new(&b[..b.len().min(300)]))
        .collect();
    let to = SockAddr::from(b.local_addr());
    assert_eq!(a.send_datagrams(&to, None, &parts).unwrap(), 5);
    let got = receive_datagrams(&b, 5);
    let lens: Vec<usize> = got.iter().map(Vec::len).collect();
    assert_eq!(lens, [300, 300, 300, 300, 77]);
    for (i, d) in got.iter().enumerate() {
        assert!(d.iter().all(|&x| x == 0xa0 + i as u8), "datagram {i} mixed");
    }
    // GSO refused (as after EIO on a device without it): the same
    // datagrams one by one.
    a.gso.refused(Instant::now());
    assert!(!a.gso());
    assert_eq!(a.send_datagrams(&to, None, &parts).unwrap(), 5);
    let got = receive_datagrams(&b, 5);
    let lens: Vec<usize> = got.iter().map(Vec::len).collect();
    assert_eq!(lens, [300, 300, 300, 300, 77]);
    assert_eq!(got[2][0], 0xa2);
    // One datagram is a plain send.
    assert_eq!(a.send_datagrams(&to, None, &parts[4..]).unwrap(), 1);
    assert_eq!(receive_datagrams(&b, 1), [vec![0xa4; 77]]);
}

#[test]
fn empty_datagram_is_one_datagram() {
    let m = RecvMeta {
        len: 0,
        ..RecvMeta::default()
    };
    assert_eq!(m.datagrams(&[1, 2, 3]).collect::<Vec<_>>(), [&[] as &[u8]]);
    let m = RecvMeta {
        len: 5,
        segment: Some(2),
        ..RecvMeta::default()
    };
    let parts: Vec<&[u8]> = m.datagrams(&[1, 2, 3, 4, 5, 6]).collect();
    assert_eq!(parts, [&[1u8, 2][..], &[3, 4][..], &[5][..]]);
}

#[test]
fn unreachable_destination_is_counted_not_fatal() {
    let a = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    // An IPv6 destination on an IPv4 socket fails for every datagram.
    let to = SockAddr::from("[::1]:9".parse::<SocketAddr>().unwrap());
    let p = [0u8; 10];
    let (sent, failed) = a.send_batch(&to, None, [&p[..], &p[..]].into_iter());
    assert_eq!((sent, failed), (0, 2));
}
