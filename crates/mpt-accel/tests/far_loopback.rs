//! The far end over loopback, no root: a hand-driven leg opens flows to a
//! local destination, moves bytes both ways with half-close, is reused,
//! meets a refusing port, and a leg that sends garbage is counted and
//! closed; and a pinned leg set of two legs, joined in either order,
//! carries a flow.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use mpt_accel::chunk::Msg;
use mpt_accel::far::FarConfig;
use mpt_accel::frame::{self, ConnectResult, Frame, Join};
use mpt_accel::set::{LegSet, PinnedLeg};
use mpt_accel::{Accel, Stats};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_connect(addr: SocketAddr) -> TcpStream {
    for _ in 0..100 {
        if let Ok(s) = TcpStream::connect(addr) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("far end not listening on {addr}");
}

/// Reads frames until FIN, returning the data.
fn read_to_fin(leg: &mut TcpStream) -> Vec<u8> {
    let mut buf = vec![0u8; frame::MAX_DATA];
    let mut got = Vec::new();
    loop {
        match frame::read_frame(leg, &mut buf).unwrap() {
            Frame::Data(n) => got.extend_from_slice(&buf[..n]),
            Frame::Fin => return got,
            f => panic!("unexpected {f:?}"),
        }
    }
}

/// A destination that reads everything, then answers with the bytes
/// reversed (so the answer exists only after the half-close).
fn reversing_destination() -> SocketAddr {
    let dest = TcpListener::bind("127.0.0.1:0").unwrap();
    let dest_addr = dest.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in dest.incoming() {
            let mut s = s.unwrap();
            let mut v = Vec::new();
            s.read_to_end(&mut v).unwrap();
            v.reverse();
            s.write_all(&v).unwrap();
        }
    });
    dest_addr
}

/// One flow on `set` to the reversing destination at `dest`: OPEN and
/// the data at once, without waiting for the result, then FIN; the answer
/// must be the data reversed.
fn reversed_through(set: &LegSet, dest: SocketAddr, data: &[u8]) {
    set.send(&Msg::Open {
        src: "10.1.0.2:40000".parse().unwrap(),
        dst: dest,
    })
    .unwrap();
    set.send_data(data).unwrap();
    set.send(&Msg::Fin).unwrap();
    assert_eq!(set.recv(), Some(Msg::Result(ConnectResult::Ok)));
    let mut got = Vec::new();
    loop {
        match set.recv() {
            Some(Msg::Data(d)) => got.extend_from_slice(&d),
            Some(Msg::Fin) => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    let mut want = data.to_vec();
    want.reverse();
    assert!(got == want, "{} bytes: the answer differs", data.len());
}

fn far_end(listen: SocketAddr) -> Accel {
    Accel::start(
        None,
        Some(&FarConfig {
            listen: vec![listen],
            peers: vec!["127.0.0.1".parse().unwrap()],
            congestion: String::new(),
            path_congestion: Default::default(),
            connect_timeout: Duration::from_secs(2),
            client_source: false,
            direct: None,
        }),
    )
    .unwrap()
}

#[test]
fn far_end_serves_flows_on_a_pinned_leg_set() {
    let dest_addr = reversing_destination();
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let accel = far_end(listen);
    let mut legs = vec![wait_connect(listen), wait_connect(listen)];
    // Leg 1 joins first: the far end waits for leg 0.
    for i in [1u8, 0] {
        let join = Join {
            set: 42,
            index: i,
            count: 2,
            path: i,
        };
        legs[usize::from(i)]
            .write_all(&frame::encode_join(join))
            .unwrap();
    }
    let legs = legs
        .into_iter()
        .zip([0u8, 1])
        .map(|(l, p)| PinnedLeg::plain(l, p))
        .collect();
    let set = LegSet::start(legs, std::sync::Arc::new(Stats::default())).unwrap();
    let client: SocketAddr = "10.1.0.2:40000".parse().unwrap();
    for size in [5usize, 400_000] {
        let data: Vec<u8> = (0..size).map(|i| (i * 13) as u8).collect();
        reversed_through(&set, dest_addr, &data);
    }
    // Refused: RESULT, then the far end closes the set.
    let closed: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    set.send(&Msg::Open {
        src: client,
        dst: closed,
    })
    .unwrap();
    assert_eq!(set.recv(), Some(Msg::Result(ConnectResult::Refused)));
    assert_eq!(set.recv(), None);
    let s = accel.stats.snapshot();
    assert_eq!((s.flows, s.refused, s.bad_frames), (3, 1, 0));
    assert_eq!(s.bytes_up, 400_005);
    // The answers went back on the set's legs, counted by the paths the
    // JOINs named.
    let back: u64 = s.path_bytes.iter().map(|p| p.1).sum();
    assert_eq!(back, 400_005, "{:?}", s.path_bytes);
    assert!(s.path_bytes.iter().all(|p| p.0 < 2), "{:?}", s.path_bytes);
    accel.stop();
}

#[test]
fn far_end_serves_flows_on_one_leg() {
    let dest_addr = reversing_destination();
    let port = free_port();
    let listen: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let accel = far_end(listen);
    let mut leg = wait_connect(listen);
    let client: SocketAddr = "10.1.0.2:40000".parse().unwrap();
    let mut scratch = Vec::new();
    for size in [1usize, 300_000] {
        let mut open = Vec::new();
        frame::encode_open(client, dest_addr, &mut open);
        leg.write_all(&open).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(
            frame::read_frame(&mut leg, &mut buf).unwrap(),
            Frame::Result(ConnectResult::Ok)
        );
        let data: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
        frame::write_data(&mut leg, &data, &mut scratch).unwrap();
        leg.write_all(&frame::FIN).unwrap();
        let mut want = data.clone();
        want.reverse();
        assert_eq!(read_to_fin(&mut leg), want);
    }
    // A port nobody listens on: refused, and the leg closed (the near end
    // does not wait for the result, so the client's bytes may follow).
    let closed: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut open = Vec::new();
    frame::encode_open(client, closed, &mut open);
    leg.write_all(&open).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(
        frame::read_frame(&mut leg, &mut buf).unwrap(),
        Frame::Result(ConnectResult::Refused)
    );
    assert!(frame::read_frame(&mut leg, &mut buf).unwrap_err().is_io());
    // Garbage instead of OPEN: counted, leg closed.
    let mut leg = wait_connect(listen);
    leg.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = leg.read_to_end(&mut rest);
    assert!(rest.is_empty());
    let s = accel.stats.snapshot();
    assert_eq!((s.flows, s.refused, s.bad_frames), (3, 1, 1));
    assert_eq!(s.bytes_up, 300_001);
    assert_eq!(s.bytes_down, 300_001);
    let _ = leg.shutdown(Shutdown::Both);
    accel.stop();
}

#[test]
fn far_end_serves_flows_on_a_sealed_direct_set() {
    use mpt_accel::direct::{self, DirectAuth, DirectPeer, DirectRoute, LegKey};
    use mpt_accel::far::FarDirect;
    use std::sync::Arc;
    use zeroize::Zeroizing;

    let dest_addr = reversing_destination();
    let port = free_port();
    let key = |b: u8| LegKey::Psk(Arc::new(Zeroizing::new([b; 32])));
    let accel = Accel::start(
        None,
        Some(&FarConfig {
            listen: vec![],
            peers: vec![],
            congestion: String::new(),
            path_congestion: Default::default(),
            connect_timeout: Duration::from_secs(2),
            client_source: false,
            direct: Some(FarDirect {
                ports: vec![port],
                peers: [(
                    7,
                    DirectPeer {
                        peer: "10.99.0.1".parse().unwrap(),
                        key: key(5),
                        remotes: vec![],
                    },
                )]
                .into(),
            }),
        }),
    )
    .unwrap();
    let route = DirectRoute {
        remote: format!("127.0.0.1:{port}").parse().unwrap(),
        local: None,
        device: None,
        mark: 0,
    };
    let leg = |index: u8, key: LegKey| {
        let join = Join {
            set: 42,
            index,
            count: 2,
            path: index,
        };
        let auth = DirectAuth { conn_id: 7, key };
        direct::connect(&route, &auth, join, Duration::from_secs(2))
    };
    // A leg with the wrong key is refused and counted.
    assert!(leg(0, key(6)).is_err());
    let mut legs = Vec::new();
    for i in [1u8, 0] {
        let (stream, seals) = leg(i, key(5)).unwrap();
        assert!(seals.is_some());
        legs.push(PinnedLeg {
            stream,
            path: i,
            seals,
            watch: None,
        });
    }
    let set = LegSet::start(legs, std::sync::Arc::new(Stats::default())).unwrap();
    let data: Vec<u8> = (0..700_000usize).map(|i| (i * 11) as u8).collect();
    reversed_through(&set, dest_addr, &data);
    let s = accel.stats.snapshot();
    assert_eq!((s.flows, s.bytes_up, s.bad_frames), (1, 700_000, 1));
    assert_eq!(s.legs_opened, 2);
    accel.stop();
}
