//! Two sessions joined by simulated links, in virtual time.

use super::*;
use crate::error::DecodeError;
use crate::path::{PathState, SUSPECT_MIN};
use crate::sched::{PickInput, SchedPath, Scheduler, Weighted};
use crate::wire::{ControlBody, Refusal};

/// The timing plan in this world (see `timing.rs`).
mod timing;

const MS: Duration = Duration::from_millis(1);

#[allow(clippy::disallowed_methods)]
fn t0() -> Instant {
    Instant::now()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    A,
    B,
}

#[derive(Clone, Copy)]
struct Link {
    delay: Duration,
    loss: f64,
    up_ab: bool,
    up_ba: bool,
}

struct InFlight {
    at: Instant,
    to: Side,
    path: usize,
    bytes: Vec<u8>,
}

/// A deterministic world: two sessions, one link per path, a seeded RNG.
struct Pair {
    start: Instant,
    now: Instant,
    a: Session,
    b: Session,
    links: Vec<Link>,
    in_flight: Vec<InFlight>,
    rng: u64,
    seq: [u64; 2],
    path_seq: [Vec<u32>; 2],
    events: Vec<(Duration, Side, Event)>,
    /// Time of the last datagram delivered on each path, per receiver.
    last_delivery: [Vec<Option<Instant>>; 2],
    /// Data from A to B: one packet every `data_interval` if set.
    data_interval: Option<Duration>,
    next_data: Instant,
    sched: Weighted,
    data_sent: Vec<u64>,
    data_received: Vec<u64>,
    /// Datagrams that arrived for a path the receiver had removed.
    unknown_path_drops: u64,
}

fn params(admin: AdminStatus) -> PathParams {
    PathParams {
        keepalive: Duration::from_secs(2),
        dead_timer: Duration::from_secs(5),
        weight_out: 1,
        weight_in: 1,
        window: 1,
        admin,
    }
}

impl Pair {
    fn new(paths: Vec<PathParams>, delay: Duration) -> Pair {
        let start = t0();
        let n = paths.len();
        let cfg = SessionConfig {
            conn_id: 7,
            paths,
            first_control_id: 1,
        };
        Pair {
            start,
            now: start,
            a: Session::new(cfg.clone(), start).unwrap(),
            b: Session::new(cfg, start).unwrap(),
            links: vec![
                Link {
                    delay,
                    loss: 0.0,
                    up_ab: true,
                    up_ba: true
                };
                n
            ],
            in_flight: Vec::new(),
            rng: 0x9e37_79b9_7f4a_7c15,
            seq: [0, 0],
            path_seq: [vec![0; n], vec![0; n]],
            events: Vec::new(),
            last_delivery: [vec![None; n], vec![None; n]],
            data_interval: None,
            next_data: start,
            sched: Weighted::new(),
            data_sent: vec![0; n],
            data_received: vec![0; n],
            unknown_path_drops: 0,
        }
    }

    fn random(&mut self) -> f64 {
        // xorshift64*: deterministic and good enough for loss draws.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn session(&mut self, side: Side) -> &mut Session {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    fn send(&mut self, from: Side, path: usize, bytes: Vec<u8>) {
        let link = self.links[path];
        let up = match from {
            Side::A => link.up_ab,
            Side::B => link.up_ba,
        };
        if !up || self.random() < link.loss {
            return;
        }
        let to = match from {
            Side::A => Side::B,
            Side::B => Side::A,
        };
        self.in_flight.push(InFlight {
            at: self.now + link.delay,
            to,
            path,
            bytes,
        });
    }

    fn next_seqs(&mut self, side: Side, path: usize) -> (u64, u32) {
        let s = side as usize;
        self.seq[s] += 1;
        self.path_seq[s][path] = self.path_seq[s][path].wrapping_add(1);
        (self.seq[s], self.path_seq[s][path])
    }

    fn flush(&mut self, side: Side) {
        while let Some(t) = self.session(side).poll_transmit() {
            let (seq, pseq) = self.next_seqs(side, t.path);
            let mut buf = vec![0xa5; Transmit::MAX_LEN];
            let len = t.emit(seq, pseq, &mut buf).unwrap();
            buf.truncate(len);
            self.send(side, t.path, buf);
        }
        while let Some(e) = self.session(side).poll_event() {
            self.events.push((self.now - self.start, side, e));
            if let Event::PeerControl { via, msg } = e {
                self.apply_peer_control(side, via, msg);
            }
        }
        // Answers queued by apply_peer_control.
        while let Some(t) = self.session(side).poll_transmit() {
            let (seq, pseq) = self.next_seqs(side, t.path);
            let mut buf = vec![0xa5; Transmit::MAX_LEN];
            let len = t.emit(seq, pseq, &mut buf).unwrap();
            buf.truncate(len);
            self.send(side, t.path, buf);
        }
    }

    /// The driver's part of a peer's control message: add or remove the
    /// path and answer.
    fn apply_peer_control(&mut self, side: Side, via: usize, msg: ControlMsg) {
        let now = self.now;
        let id = usize::from(msg.path_id);
        let result = match msg.body {
            ControlBody::PathAdd(add) => {
                let mut p = params(AdminStatus::Up);
                p.weight_out = u32::from(add.weight_in);
                self.session(side)
                    .add_path(id, p, now)
                    .map_err(|_| Refusal::IdInUse)
            }
            ControlBody::PathRemove { .. } => self
                .session(side)
                .remove_path(id)
                .map(|_| ())
                .map_err(|_| Refusal::UnknownPath),
            ControlBody::Ack(_) => panic!("acks are not peer requests"),
        };
        self.session(side).answer_control(via, &msg, result, now);
    }

    fn send_data(&mut self) {
        let mut weights = vec![
            SchedPath {
                weight: 0,
                window: 1
            };
            self.links.len()
        ];
        for (i, p) in self.a.paths() {
            weights[i] = SchedPath {
                weight: p.params().weight_out,
                window: p.params().window,
            };
        }
        let mask = self.a.eligibility().active();
        let Some(path) = self.sched.pick(&PickInput::weighted(&weights, mask)) else {
            return;
        };
        self.data_sent[path] += 1;
        let now = self.now;
        self.a.on_data_sent(path, now);
        let (seq, path_seq) = self.next_seqs(Side::A, path);
        let header = Header {
            msg_type: MsgType::Data,
            flags: Flags::NONE,
            path_id: path as u16,
            conn_id: 7,
            seq,
            path_seq,
            timestamp_us: timestamp_us(self.a.epoch(), self.now),
        };
        let mut buf = vec![0u8; HEADER_LEN + 20];
        header.emit(&mut buf).unwrap();
        self.send(Side::A, path, buf);
    }

    /// Advances virtual time to `until`, processing every event in order.
    fn run_until(&mut self, until: Instant) {
        loop {
            let mut next = until;
            for s in [&self.a, &self.b] {
                if let Some(t) = s.poll_timeout() {
                    next = next.min(t.at);
                }
            }
            if let Some(f) = self.in_flight.iter().map(|f| f.at).min() {
                next = next.min(f);
            }
            if self.data_interval.is_some() {
                next = next.min(self.next_data);
            }
            if next > until {
                break;
            }
            self.now = next.max(self.now);
            // Deliver everything due.
            let due: Vec<InFlight> = {
                let (due, rest) = std::mem::take(&mut self.in_flight)
                    .into_iter()
                    .partition(|f| f.at <= self.now);
                self.in_flight = rest;
                due
            };
            for f in due {
                let (header, payload) = Header::parse(&f.bytes).unwrap();
                let now = self.now;
                self.last_delivery[f.to as usize][f.path] = Some(now);
                match self
                    .session(f.to)
                    .handle_datagram(f.path, &header, payload, now)
                {
                    Ok(Received::Data(_)) => self.data_received[f.path] += 1,
                    Ok(_) => {}
                    // A path removed on the receiving side.
                    Err(DropReason::UnknownPath(_)) => self.unknown_path_drops += 1,
                    Err(e) => panic!("{e:?}"),
                }
            }
            if let Some(iv) = self.data_interval {
                if self.now >= self.next_data {
                    self.send_data();
                    self.next_data = self.now + iv;
                }
            }
            let now = self.now;
            self.a.handle_timeout(now);
            self.b.handle_timeout(now);
            self.flush(Side::A);
            self.flush(Side::B);
            if self.now >= until {
                break;
            }
        }
        self.now = until;
    }

    fn at(&self, secs: f64) -> Instant {
        self.start + Duration::from_secs_f64(secs)
    }

    fn state(&self, side: Side, path: usize) -> PathState {
        match side {
            Side::A => self.a.path(path).unwrap().state(),
            Side::B => self.b.path(path).unwrap().state(),
        }
    }

    fn first_change_to(
        &self,
        side: Side,
        path: usize,
        to: PathState,
        after: Duration,
    ) -> Option<Duration> {
        self.events.iter().find_map(|(t, s, e)| match e {
            Event::PathStateChanged {
                path: p, to: st, ..
            } if *s == side && *p == path && *st == to && *t >= after => Some(*t),
            _ => None,
        })
    }
}

#[test]
fn paths_come_up_within_one_round_trip_and_measure_rtt() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 3], 10 * MS);
    w.run_until(w.at(0.1));
    for side in [Side::A, Side::B] {
        for p in 0..3 {
            assert_eq!(w.state(side, p), PathState::Up, "{side:?} path {p}");
            let up_at = w
                .first_change_to(side, p, PathState::Up, Duration::ZERO)
                .unwrap();
            assert!(up_at <= 20 * MS, "{side:?} path {p} up at {up_at:?}");
        }
    }
    let rtt = w.a.path(0).unwrap().rtt().smoothed().unwrap();
    assert_eq!(rtt, 20 * MS);
    assert_eq!(w.a.eligibility().active(), 0b111);
}

#[test]
fn silent_path_is_down_no_later_than_dead_timer_after_last_packet_and_comes_back() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 5 * MS);
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(10.0));
    assert_eq!(w.state(Side::A, 1), PathState::Up);
    // Cut path 1 in both directions.
    w.links[1].up_ab = false;
    w.links[1].up_ba = false;
    let cut = w.now - w.start;
    w.run_until(w.at(30.0));
    for side in [Side::A, Side::B] {
        let last = w.last_delivery[side as usize][1].unwrap() - w.start;
        let down_at = w
            .first_change_to(side, 1, PathState::Down, cut)
            .unwrap_or_else(|| panic!("{side:?} never declared path 1 down"));
        assert_eq!(down_at, last + Duration::from_secs(5), "{side:?}");
        assert_eq!(w.state(side, 0), PathState::Up, "path 0 unaffected");
    }
    // While down, data goes only on path 0.
    let before = w.data_received[1];
    w.run_until(w.at(40.0));
    assert_eq!(w.data_received[1], before);
    // Restore: back up within one keepalive plus the delay.
    w.links[1].up_ab = true;
    w.links[1].up_ba = true;
    let restored = w.now - w.start;
    w.run_until(w.at(45.0));
    for side in [Side::A, Side::B] {
        let up_at = w
            .first_change_to(side, 1, PathState::Up, restored)
            .unwrap_or_else(|| panic!("{side:?} path 1 did not come back"));
        assert!(
            up_at - restored <= Duration::from_secs(2) + 10 * MS,
            "{side:?} back after {:?}",
            up_at - restored
        );
    }
    let before = w.data_received[1];
    w.run_until(w.at(50.0));
    assert!(w.data_received[1] > before, "path 1 carries data again");
}

#[test]
fn one_way_failure_stops_data_on_that_path() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 5 * MS);
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(5.0));
    w.links[1].up_ab = false; // A's packets on path 1 vanish; B's still arrive.
    w.run_until(w.at(20.0));
    assert_eq!(w.state(Side::B, 1), PathState::Down);
    assert_eq!(
        w.state(Side::A, 1),
        PathState::Probing,
        "A hears B but B does not hear A"
    );
    assert_eq!(w.a.eligibility().active(), 0b01);
    let sent_on_1 = w.data_sent[1];
    w.run_until(w.at(30.0));
    assert_eq!(
        w.data_sent[1], sent_on_1,
        "A must not send data into the hole"
    );
}

#[test]
fn loss_estimate_tracks_link_loss() {
    let mut w = Pair::new(vec![params(AdminStatus::Up)], 5 * MS);
    w.data_interval = Some(5 * MS);
    w.links[0].loss = 0.10;
    w.run_until(w.at(120.0));
    let est = w.a.path(0).unwrap().loss().loss_pct().unwrap();
    assert!((est - 10.0).abs() < 4.0, "estimated {est} %");
    assert_eq!(w.state(Side::A, 0), PathState::Up);
}

#[test]
fn lossless_link_reports_zero_loss_with_probes_only() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 5 * MS);
    w.run_until(w.at(60.0));
    for side_paths in [w.a.paths(), w.b.paths()] {
        for (_, p) in side_paths {
            assert_eq!(p.loss().loss_pct(), Some(0.0));
        }
    }
}

#[test]
fn backup_carries_traffic_only_when_primaries_are_dead() {
    let mut w = Pair::new(
        vec![params(AdminStatus::Up), params(AdminStatus::Backup)],
        5 * MS,
    );
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(3.0));
    assert_eq!(w.state(Side::A, 1), PathState::Backup);
    assert_eq!(w.a.eligibility().active(), 0b01);
    assert_eq!(w.data_sent[1], 0);
    w.links[0].up_ab = false;
    w.links[0].up_ba = false;
    w.run_until(w.at(12.0));
    assert_eq!(w.a.eligibility().active(), 0b10);
    assert!(w.data_received[1] > 0, "backup took over");
    w.links[0].up_ab = true;
    w.links[0].up_ba = true;
    w.run_until(w.at(16.0));
    assert_eq!(w.a.eligibility().active(), 0b01, "primary is back");
}

#[test]
fn peer_learns_weight_in() {
    let mut p = params(AdminStatus::Up);
    p.weight_in = 42;
    let mut w = Pair::new(vec![p], 5 * MS);
    w.run_until(w.at(0.5));
    assert_eq!(w.b.path(0).unwrap().peer_weight_in(), Some(42));
}

fn header(t: MsgType, conn_id: u32) -> Header {
    Header {
        msg_type: t,
        flags: Flags::NONE,
        path_id: 0,
        conn_id,
        seq: 1,
        path_seq: 1,
        timestamp_us: 0,
    }
}

#[test]
fn rejects_foreign_unknown_and_unsupported() {
    let now = t0();
    let mut s = Session::new(
        SessionConfig {
            conn_id: 7,
            paths: vec![params(AdminStatus::Up)],
            first_control_id: 1,
        },
        now,
    )
    .unwrap();
    let h = header(MsgType::Data, 8);
    assert_eq!(
        s.handle_datagram(0, &h, b"", now),
        Err(DropReason::UnknownConnection(8))
    );
    let h = header(MsgType::Data, 7);
    assert_eq!(
        s.handle_datagram(1, &h, b"", now),
        Err(DropReason::UnknownPath(1))
    );
    let h = header(MsgType::HandshakeInit, 7);
    assert_eq!(
        s.handle_datagram(0, &h, b"", now),
        Err(DropReason::Unsupported(MsgType::HandshakeInit))
    );
    let h = header(MsgType::Control, 7);
    assert_eq!(
        s.handle_datagram(0, &h, b"", now),
        Err(DropReason::Malformed(DecodeError::BadControl))
    );
    let mut h = header(MsgType::Data, 7);
    h.flags = Flags::SEALED;
    assert_eq!(s.handle_datagram(0, &h, b"", now), Err(DropReason::Sealed));
    let h = header(MsgType::Probe, 7);
    assert!(matches!(
        s.handle_datagram(0, &h, &[0u8; 3], now),
        Err(DropReason::Malformed(_))
    ));
    // None of the rejected datagrams counted as life on the path.
    assert_eq!(s.path(0).unwrap().state(), PathState::Probing);
    assert!(s.path(0).unwrap().last_rx().is_none());
}

#[test]
fn probe_flood_cannot_grow_the_transmit_queue() {
    let now = t0();
    let mut s = Session::new(
        SessionConfig {
            conn_id: 7,
            paths: vec![params(AdminStatus::Up)],
            first_control_id: 1,
        },
        now,
    )
    .unwrap();
    let mut body = [0u8; Keepalive::LEN];
    Keepalive::default().emit(&mut body).unwrap();
    let h = header(MsgType::Probe, 7);
    for _ in 0..10_000 {
        s.handle_datagram(0, &h, &body, now).unwrap();
    }
    assert_eq!(s.transmits.len(), MAX_QUEUED_TRANSMITS);
    assert_eq!(s.dropped_transmits(), 10_000 - MAX_QUEUED_TRANSMITS as u64);
}

#[test]
fn too_many_paths_rejected() {
    let r = Session::new(
        SessionConfig {
            conn_id: 1,
            paths: vec![params(AdminStatus::Up); MAX_PATHS + 1],
            first_control_id: 1,
        },
        t0(),
    );
    assert_eq!(r.err(), Some(SessionError::TooManyPaths(MAX_PATHS + 1)));
}

#[test]
fn data_summary_counts_like_datagrams() {
    let now = t0();
    let cfg = SessionConfig {
        conn_id: 7,
        paths: vec![params(AdminStatus::Up)],
        first_control_id: 1,
    };
    let mut s = Session::new(cfg, now).unwrap();
    s.handle_data_summary(
        0,
        DataSummary {
            packets: 5,
            highest_path_seq: 9,
            bytes: 5000,
            last_rx: now + MS,
            last_timestamp_us: 0,
            owd_min_us: None,
        },
    )
    .unwrap();
    let r = s.path(0).unwrap().report();
    assert_eq!(
        (r.rx_packets, r.rx_highest_path_seq, r.hears_you),
        (5, 9, true)
    );
    assert_eq!(s.path(0).unwrap().last_rx(), Some(now + MS));
    assert!(s
        .handle_data_summary(
            3,
            DataSummary {
                packets: 1,
                highest_path_seq: 1,
                bytes: 1000,
                last_rx: now,
                last_timestamp_us: 0,
                owd_min_us: None,
            }
        )
        .is_err());
}

fn path_add(name: &str, weight: u16) -> ControlBody {
    ControlBody::PathAdd(crate::wire::PathAdd {
        name: crate::wire::PathName::new(name).unwrap(),
        sender_local: "10.0.9.1:65022".parse().unwrap(),
        sender_remote: Some("10.0.9.2:65022".parse().unwrap()),
        weight_out: u32::from(weight),
        weight_in: weight,
        window: 1,
        backup: false,
    })
}

fn path_remove(name: &str) -> ControlBody {
    ControlBody::PathRemove {
        name: crate::wire::PathName::new(name).unwrap(),
    }
}

/// Two links, but each session starts with path 0 only (path 1 is the
/// uplink a mobile node will bring up later).
fn one_of_two(delay: Duration) -> Pair {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], delay);
    let now = w.now;
    w.a.remove_path(1).unwrap();
    w.b.remove_path(1).unwrap();
    assert!(w.a.path(1).is_none());
    assert_eq!(w.a.free_path_id(), Some(1));
    let _ = now;
    w
}

fn answers(w: &Pair, side: Side) -> Vec<(u64, Result<(), Refusal>)> {
    w.events
        .iter()
        .filter(|(_, s, _)| *s == side)
        .filter_map(|(_, _, e)| match e {
            Event::ControlAnswered { msg, result } => Some((msg.id, *result)),
            _ => None,
        })
        .collect()
}

fn peer_requests(w: &Pair, side: Side) -> usize {
    w.events
        .iter()
        .filter(|(_, s, e)| *s == side && matches!(e, Event::PeerControl { .. }))
        .count()
}

#[test]
fn handover_by_control_messages_moves_traffic_without_losing_any() {
    let mut w = one_of_two(5 * MS);
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(5.0));
    assert_eq!(w.state(Side::A, 0), PathState::Up);
    // The new uplink appears on A only; B learns of it from A.
    let now = w.now;
    w.a.add_path(1, params(AdminStatus::Up), now).unwrap();
    let id = w.a.send_control(1, path_add("lte", 1), now).unwrap();
    w.flush(Side::A);
    w.run_until(w.at(5.1));
    assert_eq!(answers(&w, Side::A), vec![(id, Ok(()))]);
    assert!(w.b.path(1).is_some(), "B added the path");
    // Both ends of the new path come up within a keepalive.
    w.run_until(w.at(8.0));
    assert_eq!(w.state(Side::A, 1), PathState::Up);
    assert_eq!(w.state(Side::B, 1), PathState::Up);
    let before = w.data_received[1];
    w.run_until(w.at(10.0));
    assert!(
        w.data_received[1] > before + 50,
        "the new path carries data"
    );
    // Then the old uplink goes away.
    let now = w.now;
    w.a.remove_path(0).unwrap();
    let id2 = w.a.send_control(0, path_remove("dsl"), now).unwrap();
    w.flush(Side::A);
    w.run_until(w.at(11.5));
    w.data_interval = None;
    w.run_until(w.at(12.0));
    assert_eq!(answers(&w, Side::A), vec![(id, Ok(())), (id2, Ok(()))]);
    assert!(w.b.path(0).is_none(), "B removed the path");
    assert_eq!(w.b.eligibility().active(), 0b10);
    let sent: u64 = w.data_sent.iter().sum();
    let received: u64 = w.data_received.iter().sum();
    assert_eq!(sent, received, "no data lost over the handover");
    // Only B's probes on the old path, sent before B learnt of the
    // removal, found no path at A (the daemon keeps a removed path's socket
    // open for a grace period for these and for data in flight).
    assert!(w.unknown_path_drops <= 4, "{}", w.unknown_path_drops);
    assert_eq!(w.a.control_outstanding(), 0);
}

#[test]
fn control_messages_get_through_heavy_loss_and_act_once() {
    let mut w = one_of_two(20 * MS);
    for l in &mut w.links {
        l.loss = 0.6;
    }
    w.run_until(w.at(10.0));
    let now = w.now;
    w.a.add_path(1, params(AdminStatus::Up), now).unwrap();
    let id = w.a.send_control(1, path_add("lte", 1), now).unwrap();
    w.flush(Side::A);
    w.run_until(w.at(40.0));
    assert_eq!(answers(&w, Side::A), vec![(id, Ok(()))]);
    // Repeats were answered without acting again.
    assert_eq!(peer_requests(&w, Side::B), 1);
    assert!(w.b.path(1).is_some());
}

#[test]
fn a_refusal_comes_back_to_the_sender() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 5 * MS);
    w.run_until(w.at(3.0));
    // B already has a path 1: adding it again is refused.
    let now = w.now;
    let id = w.a.send_control(1, path_add("lte", 1), now).unwrap();
    w.flush(Side::A);
    w.run_until(w.at(4.0));
    assert_eq!(answers(&w, Side::A), vec![(id, Err(Refusal::IdInUse))]);
}

#[test]
fn an_unreachable_peer_makes_the_sender_give_up() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 1], 5 * MS);
    w.run_until(w.at(2.0));
    w.links[0].up_ab = false;
    let now = w.now;
    let id = w.a.send_control(0, path_remove("dsl"), now).unwrap();
    w.flush(Side::A);
    w.run_until(w.at(20.0));
    assert_eq!(w.a.control_outstanding(), 1, "still trying at 18 s");
    w.run_until(w.at(30.0));
    assert_eq!(w.a.control_outstanding(), 0);
    let gave_up: Vec<u64> = w
        .events
        .iter()
        .filter_map(|(_, _, e)| match e {
            Event::ControlGaveUp { msg } => Some(msg.id),
            _ => None,
        })
        .collect();
    assert_eq!(gave_up, vec![id]);
    assert_eq!(peer_requests(&w, Side::B), 0);
}

#[test]
fn path_slots_are_reused_and_bounded() {
    let now = t0();
    let mut s = Session::new(
        SessionConfig {
            conn_id: 7,
            paths: vec![params(AdminStatus::Up); 3],
            first_control_id: 1,
        },
        now,
    )
    .unwrap();
    assert_eq!(
        s.add_path(1, params(AdminStatus::Up), now),
        Err(SessionError::PathExists(1))
    );
    s.remove_path(1).unwrap();
    assert_eq!(s.remove_path(1).unwrap_err(), SessionError::UnknownPath(1));
    assert_eq!(s.free_path_id(), Some(1));
    assert_eq!(s.paths().map(|(i, _)| i).collect::<Vec<_>>(), vec![0, 2]);
    s.add_path(1, params(AdminStatus::Up), now).unwrap();
    assert_eq!(
        s.add_path(MAX_PATHS, params(AdminStatus::Up), now),
        Err(SessionError::TooManyPaths(MAX_PATHS + 1))
    );
    s.add_path(MAX_PATHS - 1, params(AdminStatus::Up), now)
        .unwrap();
    assert_eq!(s.paths().count(), 4);
    // A removed path takes its timers with it.
    for i in [0, 1, 2, MAX_PATHS - 1] {
        s.remove_path(i).unwrap();
    }
    assert_eq!(s.poll_timeout(), None);
    assert_eq!(s.eligibility().active(), 0);
}

/// A's local link of path 1 goes down (both directions dead, as when a
/// cable or WiFi goes): down at once, no data and no probes on it, while
/// path 0 carries everything; the link comes back: probing at once, fast
/// probes past a first lost one, usable again within a few hundred ms
/// although the keepalive is 2 s.
#[test]
fn link_events_take_a_path_down_at_once_and_bring_it_back_fast() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 5 * MS);
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(3.0));
    assert_eq!(w.state(Side::A, 1), PathState::Up);
    w.links[1].up_ab = false;
    w.links[1].up_ba = false;
    let now = w.now;
    assert_eq!(w.a.set_path_link(1, false, now), Ok(true));
    assert_eq!(
        w.a.set_path_link(1, false, now),
        Ok(false),
        "no change twice"
    );
    assert_eq!(w.state(Side::A, 1), PathState::Down);
    assert_eq!(w.a.eligibility().active(), 0b01);
    let down = w.now - w.start;
    w.flush(Side::A);
    assert_eq!(
        w.first_change_to(Side::A, 1, PathState::Down, down),
        Some(down),
        "the transition is one event, at once"
    );
    let (sent, probes) = (w.data_sent[1], w.path_seq[0][1]);
    w.run_until(w.at(13.0));
    assert_eq!(w.data_sent[1], sent, "no data into a dead link");
    assert_eq!(w.path_seq[0][1], probes, "no probes into a dead link");
    assert_eq!(w.state(Side::A, 1), PathState::Down, "not up while down");
    assert_eq!(w.a.path(1).map(Path::link_down), Some(true));

    // The link comes back, but the first probe is lost (link settling).
    let back = w.now - w.start;
    let now = w.now;
    assert_eq!(w.a.set_path_link(1, true, now), Ok(true));
    assert_eq!(w.state(Side::A, 1), PathState::Probing);
    w.run_until(w.at(13.05));
    w.links[1].up_ab = true;
    w.links[1].up_ba = true;
    w.run_until(w.at(15.0));
    let up = w
        .first_change_to(Side::A, 1, PathState::Up, back)
        .expect("A's path 1 back up");
    assert!(up - back <= 200 * MS, "A back after {:?}", up - back);
    let b_up = w
        .first_change_to(Side::B, 1, PathState::Up, back)
        .expect("B's path 1 back up");
    assert!(b_up - back <= 300 * MS, "B back after {:?}", b_up - back);
    let before = w.data_received[1];
    w.run_until(w.at(16.0));
    assert!(w.data_received[1] > before, "path 1 carries data again");
    assert_eq!(
        w.a.set_path_link(9, true, now),
        Err(SessionError::UnknownPath(9))
    );
}

fn handovers(w: &Pair) -> Vec<(Duration, Handover)> {
    w.events
        .iter()
        .filter_map(|(t, s, e)| match e {
            Event::Handover(h) if *s == Side::A => Some((*t, *h)),
            _ => None,
        })
        .collect()
}

#[test]
fn silent_striped_path_hands_over_within_a_few_rtts() {
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 5 * MS);
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(5.0));
    assert!(handovers(&w).is_empty(), "none while healthy");
    w.links[0].up_ab = false;
    w.links[0].up_ba = false;
    let cut = w.now - w.start;
    w.run_until(w.at(8.0));
    let hs = handovers(&w);
    assert_eq!(hs.len(), 1, "{hs:?}");
    let (t, h) = hs[0];
    assert_eq!((h.from, h.to), (0, 1));
    // Heard last just before the cut; moved once suspect (3 srtt + 4
    // rttvar + feedback, at least 60 ms) plus a data interval.
    assert!(h.gap >= SUSPECT_MIN, "gap {:?}", h.gap);
    assert!(h.gap <= 120 * MS, "gap {:?}", h.gap);
    assert!(t >= cut && t <= cut + 150 * MS, "at {t:?}, cut {cut:?}");
    assert_eq!(w.a.handovers(), 1);
    assert_eq!(w.a.last_handover(), Some(h));
    // The dead timer later adds no second handover.
    w.run_until(w.at(15.0));
    assert_eq!(handovers(&w).len(), 1);
}

#[test]
fn backup_handover_gap_is_detection_time_not_dead_timer() {
    let mut w = Pair::new(
        vec![params(AdminStatus::Up), params(AdminStatus::Backup)],
        5 * MS,
    );
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(3.0));
    w.links[0].up_ab = false;
    w.links[0].up_ba = false;
    w.run_until(w.at(6.0));
    let hs = handovers(&w);
    assert_eq!(hs.len(), 1, "{hs:?}");
    let h = hs[0].1;
    assert_eq!((h.from, h.to), (0, 1));
    assert!(h.gap < 150 * MS, "gap {:?}", h.gap);
}

#[test]
fn idle_or_recovering_paths_make_no_handover() {
    // No data: a path going silent hands nothing over.
    let mut w = Pair::new(vec![params(AdminStatus::Up); 2], 5 * MS);
    w.run_until(w.at(3.0));
    w.links[0].up_ab = false;
    w.links[0].up_ba = false;
    w.run_until(w.at(12.0));
    assert_eq!(w.state(Side::A, 0), PathState::Down);
    assert!(handovers(&w).is_empty());
    // A link that goes down and comes back before any data moved.
    let mut w = Pair::new(vec![params(AdminStatus::Up)], 5 * MS);
    w.data_interval = Some(10 * MS);
    w.run_until(w.at(3.0));
    let now = w.now;
    w.a.set_path_link(0, false, now).unwrap();
    w.a.set_path_link(0, true, now + MS).unwrap();
    w.run_until(w.at(6.0));
    assert!(handovers(&w).is_empty(), "{:?}", handovers(&w));
}

#[test]
fn probing_phase_follows_the_min_rtt_within_bounds() {
    // A probe queues up to a quarter of its phase at the bottleneck: on a
    // LAN-like path (RTT 0.2 ms) the phase is the floor, not 20 ms.
    for (one_way, phase) in [
        (Duration::from_micros(100), PROBE_PHASE_MIN),
        (15 * MS, 30 * MS),
        (300 * MS, PROBE_PHASE_MAX),
    ] {
        let mut w = Pair::new(vec![params(AdminStatus::Up); 2], one_way);
        w.run_until(w.at(2.0));
        let mut models = Vec::new();
        w.a.path_models(w.now, &mut models);
        assert_eq!(models.len(), 2);
        for (p, (_, got)) in models.iter().enumerate() {
            assert_eq!(*got, phase, "path {p}, one-way delay {one_way:?}");
        }
    }
}

/// A path whose link comes back late on one side (a veth without carrier
/// yet when the daemon starts): that side learns the path works from the
/// reply to its first probe, whose report said "I do not hear you". It
/// must tell the peer at once, not at its next probe a keepalive (or a
/// relink interval) later, or the peer keeps the path unusable meanwhile.
#[test]
fn the_peer_learns_we_hear_it_one_round_trip_after_we_do() {
    let delay = 5 * MS;
    let mut w = Pair::new(vec![params(AdminStatus::Up)], delay);
    let start = w.now;
    assert_eq!(w.b.set_path_link(0, false, start), Ok(true));
    w.run_until(w.at(1.0));
    assert_ne!(w.state(Side::A, 0), PathState::Up, "B heard nothing yet");
    let back = w.now - w.start;
    let now = w.now;
    assert_eq!(w.b.set_path_link(0, true, now), Ok(true));
    w.run_until(w.at(1.5));
    let b_up = w
        .first_change_to(Side::B, 0, PathState::Up, back)
        .expect("B's path up");
    let a_up = w
        .first_change_to(Side::A, 0, PathState::Up, back)
        .expect("A's path up");
    assert!(
        b_up - back <= 2 * delay + MS,
        "B up after {:?}",
        b_up - back
    );
    assert!(
        a_up <= b_up + delay + MS,
        "A learnt B hears it {:?} after B was up",
        a_up.saturating_sub(b_up)
    );
}
