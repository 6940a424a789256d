//! The transmit stages without root or a tun device: IPv4/UDP packets are
//! put in a [`TxBatch`]'s buffers as a tun read would leave them, then
//! driven through plan → number → charge → head → seal (→ send over
//! loopback sockets) by a [`TxStages`] built here; the tests read the
//! headers written in front of the packets, open sealed datagrams with the
//! peer's keys, and look at which counters moved.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{Psk, SessionKeys, TAG_LEN};
use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::{Redundancy, SchedPath};
use mpt_proto::wire::{split_flow_prefix, Flags, Header, MsgType, HEADER_LEN};

use super::batch::{TxBatch, PACKET_OFFSET};
use super::conn::TxConn;
use super::seal::seal_batch;
use super::stages::TxStages;
use crate::dataplane::crypto_pool::{CryptoPool, Submitter};
use crate::io::udp::PathSocket;
use crate::plane::route::{Router, SourceFilter};
use crate::plane::{ConnCrypto, ConnShared, PathShared, PathTable, TxStats, TxWakes};

/// Connection `i`'s id on the wire.
fn conn_id(i: usize) -> u32 {
    100 + i as u32
}

/// Connection `i`'s peer tunnel address (routed to it as a /32).
fn peer_addr(i: usize) -> [u8; 4] {
    [192, 168, 1 + i as u8, 2]
}

/// An IPv4/UDP packet to `dst` carrying `tag` (its IP id and its one byte
/// of payload), all of one flow per destination.
fn packet_to(dst: [u8; 4], tag: u16) -> Vec<u8> {
    let mut p = vec![0u8; 29];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&29u16.to_be_bytes());
    p[4..6].copy_from_slice(&tag.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[192, 168, 0, 1]);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&4000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p[24..26].copy_from_slice(&9u16.to_be_bytes());
    p[28] = tag as u8;
    p
}

/// The tag of a packet.
fn tag_of(packet: &[u8]) -> u16 {
    u16::from_be_bytes([packet[4], packet[5]])
}

/// Path `id` of weight 1, window 1, bound on loopback and sending to `to`.
fn path(id: usize, to: SocketAddr) -> PathShared {
    let socket = PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    PathShared::new(
        id,
        format!("p{id}"),
        socket,
        Some(to),
        SchedPath {
            weight: 1,
            window: 1,
        },
        1,
        Instant::now(),
    )
}

/// Connection `i` with paths sending to `remotes` (path id = place),
/// all eligible, under the `weighted` scheduler (with equal weights it
/// alternates, starting with path 0) and without redundancy copies.
fn conn(i: usize, remotes: &[SocketAddr], crypto: Option<ConnCrypto>) -> Arc<ConnShared> {
    let paths = remotes.iter().enumerate().map(|(id, &to)| path(id, to));
    let c = ConnShared::new(
        i,
        format!("c{i}"),
        conn_id(i),
        Instant::now(),
        PathTable::new(paths.collect::<Vec<_>>()),
        crypto,
        SourceFilter::default(),
        Resequencer::new(64, 1500, Duration::from_millis(25)),
        Duration::from_millis(25),
        Some(crate::io::udp::Waker::new().unwrap()),
        TxWakes(Arc::new(Vec::new())),
    );
    c.eligible.store((1u64 << remotes.len()) - 1, Relaxed);
    // Numbers from 1 (a real connection starts at the clock, `first_seq`),
    // so the expected numbers read plainly.
    c.seq.store(1, Relaxed);
    c.adaptive.store(false, Relaxed);
    c.set_redundancy(Redundancy::Off);
    Arc::new(c)
}

/// A PSK connection with established keys (the initiator's); returns the
/// keys the peer opens with.
fn sealed_conn(i: usize, remotes: &[SocketAddr]) -> (Arc<ConnShared>, SessionKeys) {
    let (ours, peers) = crate::plane::testing::session_keys();
    let crypto = ConnCrypto::new(Psk::from_bytes([9; 32]));
    crypto.install_current(ours, None, Instant::now());
    (conn(i, remotes, Some(crypto)), peers)
}

/// A remote nobody listens on (for tests that do not send).
fn nowhere() -> SocketAddr {
    "127.0.0.1:9".parse().unwrap()
}

/// A transmit worker's stages and per-batch state, without its tun queue.
struct Harness {
    stages: TxStages,
    batch: TxBatch,
    txc: Vec<TxConn>,
    submitter: Submitter,
    _pool: Arc<CryptoPool>,
}

impl Harness {
    fn new(conns: Vec<Arc<ConnShared>>) -> Harness {
        let mut router = Router::default();
        for c in &conns {
            let prefix = format!("{}/32", std::net::Ipv4Addr::from(peer_addr(c.index)));
            router.insert(prefix.parse().unwrap(), c.index);
        }
        let pool = Arc::new(CryptoPool::start(0, 4, Duration::ZERO).unwrap());
        let stages = TxStages {
            conns: Arc::new(conns),
            router: Arc::new(router),
            stats: Arc::new(TxStats::default()),
            mtu: 1400,
            mss_clamp: true,
        };
        Harness {
            batch: TxBatch::new(stages.mtu, stages.conns.len()),
            txc: stages.conns.iter().map(|c| TxConn::new(c)).collect(),
            stages,
            submitter: pool.submitter(),
            _pool: pool,
        }
    }

    /// Puts `packets` in the batch's buffers as a tun read does, then runs
    /// the stages as the worker does, up to and including sealing.
    fn prepare(&mut self, packets: &[Vec<u8>]) {
        for (i, p) in packets.iter().enumerate() {
            self.batch.bufs[i][PACKET_OFFSET..PACKET_OFFSET + p.len()].copy_from_slice(p);
            self.batch.sizes[i] = p.len();
        }
        let now = Instant::now();
        let (s, b) = (&self.stages, &mut self.batch);
        s.plan_batch(b, &mut self.txc, packets.len(), now);
        s.number(b, &mut self.txc);
        s.charge(b, &self.txc, now);
        b.plan.sort_unstable();
        s.head_batch(b, &self.txc, now);
        seal_batch(b, &mut self.submitter);
    }

    /// The send stage.
    fn send(&mut self) {
        self.stages.send_batch(&mut self.batch, &self.txc);
    }

    /// Buffer `i`'s datagram as it would be sent.
    fn datagram(&self, i: usize, sealed: bool) -> Vec<u8> {
        let tag = if sealed { TAG_LEN } else { 0 };
        self.batch.bufs[i][..PACKET_OFFSET + self.batch.sizes[i] + tag].to_vec()
    }

    /// The plan in its (sorted) order as (connection, path, rank, buffer).
    fn plan(&self) -> Vec<(usize, usize, u32, usize)> {
        let p = &self.batch.plan;
        p.iter()
            .map(|e| (e.conn(), e.path(), e.rank(), e.buf()))
            .collect()
    }

    /// The headed groups as (connection, path, plan range).
    fn groups(&self) -> Vec<(usize, usize, usize, usize)> {
        let b = &self.batch;
        b.prepared
            .iter()
            .map(|g| (b.plan[g.start].conn(), g.path.id, g.start, g.end))
            .collect()
    }
}

/// A cleartext datagram's header, flow gap and packet.
fn parse_clear(d: &[u8]) -> (Header, u32, Vec<u8>) {
    let (h, payload) = Header::parse(d).unwrap();
    let (gap, packet) = split_flow_prefix(payload).unwrap();
    (h, gap, packet.to_vec())
}

/// (conn id, path id, seq, path seq, flow gap, tag) of a cleartext datagram.
fn numbers(d: &[u8]) -> (u32, u16, u64, u32, u32, u16) {
    let (h, gap, packet) = parse_clear(d);
    (
        h.conn_id,
        h.path_id,
        h.seq,
        h.path_seq,
        gap,
        tag_of(&packet),
    )
}

#[test]
fn a_batch_of_two_connections_is_numbered_in_tun_order_and_grouped_by_path() {
    let (a, b) = (peer_addr(0), peer_addr(1));
    let mut h = Harness::new(vec![
        conn(0, &[nowhere(), nowhere()], None),
        conn(1, &[nowhere(), nowhere()], None),
    ]);
    // Tun order: A0 B0 A1 A2 B1 A3 (buffers 0..6). Each connection
    // alternates its paths: A0 p0, A1 p1, A2 p0, A3 p1; B0 p0, B1 p1.
    let packets = [
        packet_to(a, 10),
        packet_to(b, 20),
        packet_to(a, 11),
        packet_to(a, 12),
        packet_to(b, 21),
        packet_to(a, 13),
    ];
    h.prepare(&packets);
    assert_eq!(
        h.plan(),
        [
            (0, 0, 0, 0),
            (0, 0, 2, 3),
            (0, 1, 1, 2),
            (0, 1, 3, 5),
            (1, 0, 0, 1),
            (1, 1, 1, 4),
        ]
    );
    assert_eq!(
        h.groups(),
        [(0, 0, 0, 2), (0, 1, 2, 4), (1, 0, 4, 5), (1, 1, 5, 6)]
    );
    // Connection sequence numbers follow tun order (from 1), path
    // sequence numbers each path's order (from 1); each flow's gap names
    // its predecessor.
    let got: Vec<_> = (0..6).map(|i| numbers(&h.datagram(i, false))).collect();
    assert_eq!(
        got,
        [
            (100, 0, 1, 1, 0, 10),
            (101, 0, 1, 1, 0, 20),
            (100, 1, 2, 1, 1, 11),
            (100, 0, 3, 2, 1, 12),
            (101, 1, 2, 1, 1, 21),
            (100, 1, 4, 2, 1, 13),
        ]
    );
    assert_eq!(h.batch.counted[..6], [true; 6]);
    // The next batch goes on where this one ended.
    h.prepare(&[packet_to(b, 22), packet_to(a, 14), packet_to(a, 15)]);
    let got: Vec<_> = (0..3).map(|i| numbers(&h.datagram(i, false))).collect();
    assert_eq!(
        got,
        [
            (101, 0, 3, 2, 1, 22),
            (100, 0, 5, 3, 1, 14),
            (100, 1, 6, 3, 1, 15),
        ]
    );
    assert_eq!(h.stages.stats.no_route.get(), 0);
}

#[test]
fn a_packet_without_a_route_is_counted_and_left_out() {
    let mut h = Harness::new(vec![conn(0, &[nowhere()], None)]);
    h.prepare(&[
        packet_to([10, 9, 9, 9], 1),
        packet_to(peer_addr(0), 2),
        packet_to([192, 168, 7, 2], 3),
    ]);
    assert_eq!(h.stages.stats.no_route.get(), 2);
    assert_eq!(h.plan(), [(0, 0, 0, 1)]);
    assert_eq!(numbers(&h.datagram(1, false)), (100, 0, 1, 1, 0, 2));
}

#[test]
fn a_connection_without_an_eligible_path_counts_its_packets_as_no_path() {
    let quiet = conn(0, &[nowhere(), nowhere()], None);
    quiet.eligible.store(0, Relaxed);
    let mut h = Harness::new(vec![quiet.clone(), conn(1, &[nowhere()], None)]);
    h.prepare(&[
        packet_to(peer_addr(0), 1),
        packet_to(peer_addr(1), 2),
        packet_to(peer_addr(0), 3),
    ]);
    assert_eq!(quiet.drops.no_path.get(), 2);
    assert_eq!(h.stages.conns[1].drops.no_path.get(), 0);
    assert_eq!(h.plan(), [(1, 0, 0, 1)]);
    assert_eq!(h.groups(), [(1, 0, 0, 1)]);
    // Nothing was numbered for the connection that sent nothing.
    assert_eq!(quiet.seq.load(Relaxed), 1);
}

#[test]
fn with_keys_each_datagram_is_sealed_and_opens_with_the_peers_keys() {
    let (c, peer) = sealed_conn(0, &[nowhere(), nowhere()]);
    let mut h = Harness::new(vec![c]);
    let packets: Vec<_> = (0..5).map(|t| packet_to(peer_addr(0), 30 + t)).collect();
    h.prepare(&packets);
    assert_eq!(h.batch.counted[..5], [true; 5]);
    for (i, sent) in packets.iter().enumerate() {
        let mut d = h.datagram(i, true);
        let (header, _) = Header::parse(&d).unwrap();
        assert_eq!(header.msg_type, MsgType::Data);
        assert_eq!(header.flags, Flags::SEALED.with(Flags::FLOW));
        assert_eq!(header.conn_id, conn_id(0));
        assert_eq!(header.seq, i as u64 + 1);
        assert_eq!(header.path_id, (i % 2) as u16);
        assert_eq!(header.path_seq, i as u32 / 2 + 1);
        // Sealed: the packet is not there in the clear.
        assert_ne!(&d[PACKET_OFFSET..PACKET_OFFSET + sent.len()], &sent[..]);
        let payload = peer.open_datagram(&mut d).unwrap();
        let (gap, packet) = split_flow_prefix(payload).unwrap();
        assert_eq!(gap, u32::from(i > 0));
        assert_eq!(packet, &sent[..]);
    }
}

#[test]
fn without_keys_each_datagram_is_cleartext_with_a_parseable_header() {
    let mut h = Harness::new(vec![conn(0, &[nowhere()], None)]);
    let sent = packet_to(peer_addr(0), 40);
    h.prepare(std::slice::from_ref(&sent));
    let d = h.datagram(0, false);
    assert_eq!(d.len(), HEADER_LEN + 4 + sent.len());
    let (header, gap, packet) = parse_clear(&d);
    assert_eq!(header.msg_type, MsgType::Data);
    assert_eq!(header.flags, Flags::FLOW);
    assert_eq!((header.conn_id, header.path_id), (conn_id(0), 0));
    assert_eq!((header.seq, header.path_seq, gap), (1, 1, 0));
    assert_eq!(packet, sent);
}

/// `udp` turned into a TCP SYN announcing MSS `mss` (checksum left 0:
/// the plan stage's update is checked in `mpt_proto::mss`).
fn syn_to(dst: [u8; 4], mss: u16) -> Vec<u8> {
    let mut p = packet_to(dst, 50)[..20].to_vec();
    p[2..4].copy_from_slice(&44u16.to_be_bytes());
    p[9] = 6;
    p.extend_from_slice(&[0; 20]);
    p[32] = 6 << 4; // 24-byte header: one option
    p[33] = 0x02;
    p.extend_from_slice(&[2, 4]);
    p.extend_from_slice(&mss.to_be_bytes());
    p
}

#[test]
fn syns_get_their_mss_clamped_and_counted_unless_turned_off() {
    for clamp in [true, false] {
        let mut h = Harness::new(vec![conn(0, &[nowhere()], None)]);
        h.stages.mss_clamp = clamp;
        let sent = [syn_to(peer_addr(0), 1460), packet_to(peer_addr(0), 41)];
        h.prepare(&sent);
        let (_, _, syn) = parse_clear(&h.datagram(0, false));
        let mss = u16::from_be_bytes([syn[42], syn[43]]);
        let conn = &h.stages.conns[0];
        if clamp {
            assert_eq!(mss, 1360, "1400 - 40");
            assert_eq!(conn.tcp.mss_clamped.get(), 1);
        } else {
            assert_eq!(mss, 1460);
            assert_eq!(conn.tcp.mss_clamped.get(), 0);
        }
        let (_, _, udp) = parse_clear(&h.datagram(1, false));
        assert_eq!(udp, sent[1], "other packets untouched");
    }
}

/// Every datagram waiting at `socket`, in arrival order.
fn drain(socket: &UdpSocket, want: usize) -> Vec<Vec<u8>> {
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while got.len() < want {
        let n = socket.recv(&mut buf).unwrap();
        got.push(buf[..n].to_vec());
    }
    got
}

#[test]
fn the_send_stage_delivers_each_paths_datagrams_in_order() {
    let receivers = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    let remotes = receivers.each_ref().map(|r| r.local_addr().unwrap());
    let (c, peer) = sealed_conn(0, &remotes);
    let mut h = Harness::new(vec![c.clone()]);
    // Seven packets: four on path 0, three on path 1, of two sizes so a
    // path's group goes in more than one GSO run.
    let packets: Vec<_> = (0..7u16)
        .map(|t| {
            let mut p = packet_to(peer_addr(0), 50 + t);
            if t >= 4 {
                p.extend_from_slice(&[0; 100]);
            }
            p
        })
        .collect();
    h.prepare(&packets);
    h.send();
    assert!(h.batch.prepared.is_empty());
    for (id, r) in receivers.iter().enumerate() {
        let want: Vec<usize> = (0..7).filter(|i| i % 2 == id).collect();
        let got = drain(r, want.len());
        let mut seen = Vec::new();
        for mut d in got {
            let (header, _) = Header::parse(&d).unwrap();
            let payload = peer.open_datagram(&mut d).unwrap();
            let (_, packet) = split_flow_prefix(payload).unwrap();
            seen.push((header.seq, header.path_seq, tag_of(packet)));
            assert_eq!(packet, &packets[usize::from(tag_of(packet) - 50)][..]);
        }
        let expected: Vec<_> = want
            .iter()
            .enumerate()
            .map(|(k, &i)| (i as u64 + 1, k as u32 + 1, 50 + i as u16))
            .collect();
        assert_eq!(seen, expected, "path {id}");
        let path = c.paths().get(id).unwrap().clone();
        assert_eq!(path.tx_packets.get(), want.len() as u64);
        let bytes: usize = want
            .iter()
            .map(|&i| PACKET_OFFSET + packets[i].len() + TAG_LEN)
            .sum();
        assert_eq!(path.tx_data_bytes.get(), bytes as u64);
    }
    assert_eq!(c.drops.send_error.get(), 0);
    // The send order's turn passed on: the next batch is not held up. Its
    // packet takes path 1's turn (path 0 had the seventh).
    h.prepare(&packets[..1]);
    h.send();
    let next = drain(&receivers[1], 1);
    let (header, _) = Header::parse(&next[0]).unwrap();
    assert_eq!((header.path_id, header.seq, header.path_seq), (1, 8, 4));
}
