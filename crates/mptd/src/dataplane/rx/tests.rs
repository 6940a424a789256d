//! The receive stages end to end, without root, sockets or tun: datagrams
//! built with the wire format's emit functions (sealed with real session
//! keys) go through check → holes → deliver into a buffer standing in for
//! the tun device; the tests look at what reached it, in which order, and
//! which counters moved.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{Psk, SessionKeys, TAG_LEN};
use mpt_proto::reorder::Resequencer;
use mpt_proto::wire::{Flags, Header, Keepalive, MsgType, Repair, HEADER_LEN, REPAIR_PREFIX_LEN};

use crate::dataplane::crypto_pool::CryptoPool;
use crate::dataplane::rx::batch::Batch;
use crate::dataplane::rx::driver::{Plan, Rx, WorkerStages};
use crate::dataplane::rx::sink::PacketSink;
use crate::dataplane::rx::state::ConnRxState;
use crate::io::udp::RecvMeta;
use crate::plane::{ConnCrypto, ConnShared, ControlInput, ControlSender, PathTable, TxWakes};

/// The connection id both sides use.
const CONN_ID: u32 = 7;

/// Where the peer's datagrams come from.
fn peer() -> SocketAddr {
    "10.0.0.2:65022".parse().unwrap()
}

/// A tun device that keeps what is written to it (no virtio header: each
/// frame is one IP packet).
#[derive(Default)]
struct VecSink {
    frames: RefCell<Vec<Vec<u8>>>,
}

impl PacketSink for VecSink {
    fn takes_vnet(&self) -> bool {
        false
    }
    fn takes_udp_gso(&self) -> bool {
        false
    }
    fn write_frame(&self, frame: &[u8]) -> std::io::Result<usize> {
        self.frames.borrow_mut().push(frame.to_vec());
        Ok(frame.len())
    }
}

/// An IPv4/UDP packet from `src` carrying `tag` (as its IP id and its one
/// byte of payload), so the sink's frames say which datagram they were.
fn packet_from(src: [u8; 4], tag: u16) -> Vec<u8> {
    let mut p = vec![0u8; 29];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&29u16.to_be_bytes());
    p[4..6].copy_from_slice(&tag.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&[192, 168, 1, 1]);
    p[20..22].copy_from_slice(&4000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5000u16.to_be_bytes());
    p[24..26].copy_from_slice(&9u16.to_be_bytes());
    p[28] = tag as u8;
    p
}

/// A packet from the peer's tunnel address.
fn packet(tag: u16) -> Vec<u8> {
    packet_from([192, 168, 1, 2], tag)
}

/// The tag of a packet the sink got.
fn tag_of(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[4], frame[5]])
}

/// One connection's receive side, run as a connection's own worker runs
/// it, but writing to a [`VecSink`].
struct Harness {
    conn: Arc<ConnShared>,
    /// The peer's keys (none: a cleartext connection).
    seal: Option<SessionKeys>,
    sink: VecSink,
    control: ControlSender,
    to_control: ControlInput,
    /// Run as a shared port's worker runs a group.
    shared: bool,
    w: WorkerStages,
    st: ConnRxState,
    /// Next path sequence number per path id.
    path_seq: [u32; 4],
    _pool: Arc<CryptoPool>,
}

impl Harness {
    /// A PSK connection with established keys.
    fn sealed() -> Harness {
        let (seal, open) = crate::plane::testing::session_keys();
        let crypto = ConnCrypto::new(Psk::from_bytes([9; 32]));
        crypto.install_current(open, None, Instant::now());
        Harness::new(Some(crypto), Some(seal))
    }

    /// A connection without a key.
    fn cleartext() -> Harness {
        Harness::new(None, None)
    }

    fn new(crypto: Option<ConnCrypto>, seal: Option<SessionKeys>) -> Harness {
        let cfg = crate::config::parse(
            r#"
[tunnel]
ipv4 = "192.168.1.1/24"
[[connection]]
name = "peer"
peer_ipv4 = "192.168.1.2"
[[connection.path]]
name = "p"
local = "127.0.0.1"
remote = "10.0.0.2"
"#,
            "t",
        )
        .unwrap();
        let conn = Arc::new(ConnShared::new(
            0,
            "peer".to_owned(),
            CONN_ID,
            Instant::now(),
            PathTable::new(Vec::new()),
            crypto,
            crate::plane::route::SourceFilter::for_connection(&cfg.connections[0]),
            Resequencer::new(64, 1500, Duration::from_millis(25)),
            Duration::from_millis(25),
            Some(crate::io::udp::Waker::new().unwrap()),
            TxWakes(Arc::new(Vec::new())),
        ));
        // Long enough that no gap times out while a test runs, unless
        // the test moves the clock on.
        conn.timing
            .update(|plan| plan.reorder_timeout = Duration::from_secs(10));
        let pool = Arc::new(CryptoPool::start(0, 4, Duration::ZERO).unwrap());
        let sink = VecSink::default();
        let (control, to_control) =
            crate::plane::control_queues(16, 16, Arc::new(crate::plane::TxStats::default()));
        Harness {
            w: WorkerStages::new(&sink, pool.submitter()),
            st: ConnRxState::new(&conn),
            conn,
            seal,
            sink,
            control,
            to_control,
            shared: false,
            path_seq: [1; 4],
            _pool: pool,
        }
    }

    /// A datagram of `msg_type` with sequence number `seq` on path
    /// `path` (the path's next path sequence number), carrying `payload`;
    /// sealed when the connection has keys.
    fn datagram(
        &mut self,
        msg_type: MsgType,
        flags: Flags,
        path: u16,
        seq: u64,
        payload: &[u8],
    ) -> Vec<u8> {
        let path_seq = self.path_seq[usize::from(path)];
        self.path_seq[usize::from(path)] += 1;
        let header = Header {
            msg_type,
            flags: match self.seal {
                Some(_) => flags.with(Flags::SEALED),
                None => flags,
            },
            path_id: path,
            conn_id: CONN_ID,
            seq,
            path_seq,
            timestamp_us: 0,
        };
        let mut b = vec![0u8; HEADER_LEN + payload.len() + TAG_LEN];
        header.emit(&mut b).unwrap();
        b[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
        let len = match &self.seal {
            Some(k) => k.seal_datagram(&mut b, payload.len()).unwrap(),
            None => HEADER_LEN + payload.len(),
        };
        b.truncate(len);
        b
    }

    /// Data datagram `seq` on `path`, its packet tagged `seq`.
    fn data(&mut self, path: u16, seq: u64) -> Vec<u8> {
        self.datagram(MsgType::Data, Flags::NONE, path, seq, &packet(seq as u16))
    }

    /// A probe (keepalive body).
    fn probe(&mut self, path: u16, seq: u64) -> Vec<u8> {
        let mut body = [0u8; Keepalive::LEN];
        Keepalive::default().emit(&mut body).unwrap();
        self.datagram(MsgType::Probe, Flags::NONE, path, seq, &body)
    }

    /// A redundancy copy (a Repair with COPY) of data `original`, with
    /// its own sequence number `own`.
    fn copy_of(&mut self, path: u16, own: u64, original: u64) -> Vec<u8> {
        let packet = packet(original as u16);
        let mut body = vec![0u8; REPAIR_PREFIX_LEN + packet.len()];
        Repair::emit_prefix(original, &mut body).unwrap();
        body[REPAIR_PREFIX_LEN..].copy_from_slice(&packet);
        self.datagram(MsgType::Repair, Flags::COPY, path, own, &body)
    }

    /// Receives `dgrams` on path `pi`, one message each, from the peer.
    fn receive(&mut self, pi: usize, dgrams: Vec<Vec<u8>>) {
        let meta: Vec<RecvMeta> = dgrams.iter().map(|d| message(d.len())).collect();
        self.receive_messages(pi, dgrams, &meta, None);
    }

    /// Receives messages on path `pi`; `cleartext_peer` stands for the
    /// path's configured remote (the harness has no path socket).
    fn receive_messages(
        &mut self,
        pi: usize,
        mut bufs: Vec<Vec<u8>>,
        meta: &[RecvMeta],
        cleartext_peer: Option<SocketAddr>,
    ) {
        let rx = Rx {
            conn: &self.conn,
            tun: &self.sink,
            control: &self.control,
            shared: self.shared,
        };
        self.w.opener.refresh(&self.conn);
        let batch = Batch {
            pi,
            path: None,
            bufs: &mut bufs,
            meta,
        };
        let mut plan = Plan::read(&self.conn, pi, None, &mut self.st.stages.holes);
        if plan.cleartext_peer.is_some() {
            plan.cleartext_peer = Some(cleartext_peer);
        }
        rx.run(batch, &plan, &mut self.w, &mut self.st.stages);
        self.st.stages.holes.send(&self.conn, &self.st.table);
        self.w.staging.flush(&self.sink, &self.conn.drops.tun_write);
    }

    /// Runs the timeouts as if it were `later` from now.
    fn timeouts_after(&mut self, later: Duration) {
        let rx = Rx {
            conn: &self.conn,
            tun: &self.sink,
            control: &self.control,
            shared: false,
        };
        let now = Instant::now() + later;
        rx.timeouts(
            &mut self.st.stages,
            &self.st.table,
            &mut self.w.staging,
            now,
        );
        self.w.staging.flush(&self.sink, &self.conn.drops.tun_write);
    }

    /// The tags of the packets written so far, in order.
    fn delivered(&self) -> Vec<u16> {
        self.sink
            .frames
            .borrow()
            .iter()
            .map(|f| tag_of(f))
            .collect()
    }

    /// The connection's drop counters that are not zero, by name.
    fn drops(&self) -> Vec<(&'static str, u64)> {
        let d = &self.conn.drops;
        [
            ("too_short", &d.too_short),
            ("bad_version", &d.bad_version),
            ("malformed", &d.malformed),
            ("unknown_connection", &d.unknown_connection),
            ("auth", &d.auth),
            ("replay", &d.replay),
            ("unsupported", &d.unsupported),
            ("no_path", &d.no_path),
            ("control_queue_full", &d.control_queue_full),
            ("tun_write", &d.tun_write),
            ("wrong_source", &d.wrong_source),
            ("unauthenticated_control", &d.unauthenticated_control),
            ("inner_source", &d.inner_source),
        ]
        .into_iter()
        .map(|(n, c)| (n, c.get()))
        .filter(|&(_, v)| v != 0)
        .collect()
    }
}

/// What the kernel says of a message of `len` bytes from the peer.
fn message(len: usize) -> RecvMeta {
    RecvMeta {
        len,
        from: Some(peer()),
        ..RecvMeta::default()
    }
}

#[test]
fn data_in_order_reaches_the_sink_in_order() {
    let mut h = Harness::sealed();
    let dgrams = (1..=3).map(|seq| h.data(0, seq)).collect();
    h.receive(0, dgrams);
    let more = vec![h.data(0, 4)];
    h.receive(0, more);
    assert_eq!(h.delivered(), [1, 2, 3, 4]);
    assert_eq!(h.drops(), []);
    assert!(
        h.to_control.try_recv().is_none(),
        "nothing for the control loop"
    );
    assert_eq!(h.conn.reseq_deadline_ns.load(Relaxed), 0, "nothing held");
}

#[test]
fn a_reordered_pair_leaves_in_order() {
    let mut h = Harness::sealed();
    // Path 1 carries traffic, so its order cannot prove 2 lost when 3
    // comes first on path 0: 3 waits for 2.
    let first = vec![h.data(1, 1)];
    h.receive(1, first);
    let early = vec![h.data(0, 3)];
    h.receive(0, early);
    assert_eq!(h.delivered(), [1], "3 waits for 2");
    assert_ne!(h.conn.reseq_deadline_ns.load(Relaxed), 0, "a gap is held");
    let late = vec![h.data(1, 2)];
    h.receive(1, late);
    assert_eq!(h.delivered(), [1, 2, 3]);
    assert_eq!(h.drops(), []);
    assert_eq!(h.conn.reseq_deadline_ns.load(Relaxed), 0);
}

#[test]
fn a_duplicate_is_dropped_and_counted() {
    let mut h = Harness::sealed();
    // Twice in one batch: the crypto stage opens both, the replay window
    // takes the first only.
    let one = h.data(0, 1);
    h.receive(0, vec![one.clone(), one]);
    // Again in a later batch: not even opened.
    let two = h.data(0, 2);
    h.receive(0, vec![two.clone()]);
    h.receive(0, vec![two]);
    assert_eq!(h.delivered(), [1, 2]);
    assert_eq!(h.drops(), [("replay", 2)]);
}

#[test]
fn a_redundancy_copy_first_delivers_and_its_original_counts_as_a_copy() {
    let mut h = Harness::sealed();
    let one = h.data(0, 1);
    // The copy of 3 (own number 2) overtakes its original.
    let copy = h.copy_of(1, 2, 3);
    let original = h.datagram(MsgType::Data, Flags::COPY, 0, 3, &packet(3));
    h.receive(0, vec![one]);
    h.receive(1, vec![copy]);
    h.receive(0, vec![original]);
    assert_eq!(h.delivered(), [1, 3]);
    assert_eq!(h.conn.copies.first.get(), 1);
    assert_eq!(h.conn.copies.duplicates.get(), 1);
    assert_eq!(h.drops(), []);
}

#[test]
fn cleartext_from_anywhere_but_the_configured_remote_is_dropped() {
    let mut h = Harness::cleartext();
    let good = h.data(0, 1);
    let other_port = h.data(0, 2);
    let nobody = h.data(0, 3);
    // Two datagrams of one GRO message, from another host: both counted.
    let (a, b) = (h.data(0, 4), h.data(0, 5));
    let mut gro = a.clone();
    gro.extend_from_slice(&b);
    let meta = [
        message(good.len()),
        RecvMeta {
            from: Some("10.0.0.2:65023".parse().unwrap()),
            ..message(other_port.len())
        },
        RecvMeta {
            from: None,
            ..message(nobody.len())
        },
        RecvMeta {
            from: Some("10.0.0.3:65022".parse().unwrap()),
            segment: Some(a.len()),
            ..message(gro.len())
        },
    ];
    h.receive_messages(0, vec![good, other_port, nobody, gro], &meta, Some(peer()));
    assert_eq!(h.delivered(), [1]);
    assert_eq!(h.drops(), [("wrong_source", 4)]);
    // Without a configured remote, nothing is taken.
    let six = h.data(0, 6);
    let meta = [message(six.len())];
    h.receive_messages(0, vec![six], &meta, None);
    assert_eq!(h.delivered(), [1]);
    assert_eq!(h.drops(), [("wrong_source", 5)]);
}

#[test]
fn a_gap_is_given_up_after_the_timeout() {
    let mut h = Harness::sealed();
    h.conn
        .timing
        .update(|plan| plan.reorder_timeout = Duration::from_secs(2));
    let first = vec![h.data(1, 1)];
    h.receive(1, first);
    let early = vec![h.data(0, 3)];
    h.receive(0, early);
    assert_eq!(h.delivered(), [1]);
    h.timeouts_after(Duration::ZERO);
    assert_eq!(h.delivered(), [1], "not yet");
    h.timeouts_after(Duration::from_secs(5));
    assert_eq!(h.delivered(), [1, 3], "2 given up");
    assert_eq!(h.conn.reseq_deadline_ns.load(Relaxed), 0);
    // 2 arrives late after all: delivered at once.
    let late = vec![h.data(1, 2)];
    h.receive(1, late);
    assert_eq!(h.delivered(), [1, 3, 2]);
    assert_eq!(h.drops(), []);
}

#[test]
fn a_probe_goes_to_the_control_queue_and_its_number_is_done() {
    let mut h = Harness::sealed();
    let dgrams = vec![h.data(0, 1), h.probe(0, 2), h.data(0, 3)];
    h.receive(0, dgrams);
    // The probe's number does not hold 3 up.
    assert_eq!(h.delivered(), [1, 3]);
    let msg = h.to_control.try_recv().expect("the probe");
    assert_eq!((msg.conn, msg.path, msg.from), (0, 0, Some(peer())));
    assert_eq!(msg.len, HEADER_LEN + Keepalive::LEN, "opened, tag cut off");
    let (header, _) = Header::parse(&msg.bytes[..msg.len]).unwrap();
    assert_eq!((header.msg_type, header.seq), (MsgType::Probe, 2));
    assert!(!header.flags.contains(Flags::SEALED), "SEALED cleared");
    assert!(h.to_control.try_recv().is_none());
    assert_eq!(h.drops(), []);
}

#[test]
fn malformed_datagrams_are_counted_by_reason_and_nothing_breaks() {
    let mut h = Harness::sealed();
    let one = h.data(0, 1);
    // Refused before their sequence numbers are trusted (sent on path 3
    // so path 0's sequence has no holes).
    let mut bad_version = h.data(3, 101);
    bad_version[0] = 0x20 | (bad_version[0] & 0x0f);
    let mut unknown_type = h.data(3, 102);
    unknown_type[0] = (unknown_type[0] & 0xf0) | 0x0f;
    let mut other_conn = h.data(3, 103);
    other_conn[4..8].copy_from_slice(&99u32.to_be_bytes());
    let mut forged = h.data(3, 104);
    forged[HEADER_LEN + 3] ^= 1;
    let mut unsealed = h.data(3, 105);
    unsealed[1] &= !Flags::SEALED.bits();
    // Authentic, but the inner packet is not one, or not the peer's, or
    // the probe is short: their numbers are done all the same.
    let not_ip = h.datagram(MsgType::Data, Flags::NONE, 0, 2, &[0x45, 0, 0]);
    let spoofed = h.datagram(
        MsgType::Data,
        Flags::NONE,
        0,
        3,
        &packet_from([8, 8, 8, 8], 3),
    );
    let probe_short = h.datagram(MsgType::Probe, Flags::NONE, 0, 4, &[0; 3]);
    let five = h.data(0, 5);
    let mut bufs = vec![
        one,
        Vec::new(),
        vec![0x10; 10],
        bad_version,
        unknown_type,
        other_conn,
        forged,
        unsealed,
        not_ip,
        spoofed,
        probe_short,
        five,
    ];
    let mut meta: Vec<RecvMeta> = bufs.iter().map(|d| message(d.len())).collect();
    bufs.push(vec![0xff; 100]);
    meta.push(RecvMeta {
        truncated: true,
        ..message(100)
    });
    h.receive_messages(0, bufs, &meta, None);
    let mut drops = h.drops();
    drops.sort_unstable();
    assert_eq!(
        drops,
        [
            ("auth", 2),
            ("bad_version", 1),
            ("inner_source", 1),
            // Unknown type, bad inner packet, short probe, truncated.
            ("malformed", 4),
            ("too_short", 2),
            ("unknown_connection", 1),
        ]
    );
    assert_eq!(h.delivered(), [1, 5], "2 to 4 are done, not awaited");
    assert!(h.to_control.try_recv().is_none());
}

#[test]
fn on_a_shared_port_the_header_names_the_path_and_a_new_one_is_noticed() {
    let mut h = Harness::sealed();
    h.shared = true;
    // A group of path 1 with a datagram naming path 0.
    let misplaced = vec![h.data(0, 1)];
    h.receive(1, misplaced);
    assert!(h.delivered().is_empty());
    assert_eq!(h.drops(), [("no_path", 1)]);
    assert!(h.to_control.try_recv().is_none());
    // Authentic datagrams of a path the connection does not have: the
    // control loop is told where they came from (a message without
    // bytes), after the batch.
    let fine = vec![h.data(1, 1)];
    h.receive(1, fine);
    assert_eq!(h.delivered(), [1]);
    let notice = h.to_control.try_recv().expect("a path notice");
    assert_eq!((notice.path, notice.len, notice.from), (1, 0, Some(peer())));
    assert!(h.to_control.try_recv().is_none());
}
