//! A two-path session driven by arbitrary input never panics, and keeps the
//! driving contract of `mpt_proto::Session`.
//!
//! The input is a program of one-byte opcodes, each followed by its
//! operands (missing bytes read as zero, so every input is a program):
//!
//! | op & 7 | action                                                          |
//! |--------|-----------------------------------------------------------------|
//! | 0, 1   | datagram: path byte, length byte, that many bytes, parsed with  |
//! |        | `Header::parse` and fed to `handle_datagram` (bit 3 forces the  |
//! |        | session's conn_id so the fuzzer need not guess it)              |
//! | 2      | advance time by a u16 in ms (bit 3) or µs, then handle_timeout  |
//! | 3      | jump to the next timer (`poll_timeout`) and handle_timeout      |
//! | 4      | drain `poll_transmit`; bit 3 loops every transmit back as if    |
//! |        | the peer had echoed it (lets probes and replies meet themselves) |
//! | 5      | drain `poll_event`, answering the peer's control requests with  |
//! |        | a fuzzed result                                                 |
//! | 6      | change a path's parameters (status, weights, window, timers);   |
//! |        | bit 3: add or remove a path instead                             |
//! | 7      | handle_data_summary with fuzzed counts; bit 3: send a control   |
//! |        | message (path add/remove) instead                               |
//!
//! Checked besides "no panic": every transmit emits into
//! `Transmit::MAX_LEN` bytes and parses back to what was queued; the
//! transmit queue and the control queue stay
//! bounded; after `handle_timeout(now)` no timer is due at or before `now`
//! (the daemon would spin otherwise); an accepted data datagram hands back
//! exactly its payload.

#![no_main]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use mpt_proto::path::{AdminStatus, PathParams};
use mpt_proto::wire::{ControlBody, ControlMsg, Header, Keepalive, MsgType, PathName, Refusal};
use mpt_proto::{DataSummary, Event, Payload, Received, Session, SessionConfig, Transmit};

const CONN_ID: u32 = 0x6d70_7401;
/// Path ids the program uses: two configured, two more to add.
const PATHS: usize = 4;
/// Transmits one drain takes at most; the session bounds its queue well
/// below this, so a full drain always ends before it.
const MAX_DRAIN: usize = 1024;

/// A fixed base instant: the same input replays the same way.
fn t0() -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now)
}

struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (b, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        b
    }
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

/// Parameters an operator could configure: timers of at least a
/// millisecond, the dead timer longer than the keepalive.
fn fuzzed_params(input: &mut Input) -> PathParams {
    let admin = match input.u8() % 3 {
        0 => AdminStatus::Up,
        1 => AdminStatus::Backup,
        _ => AdminStatus::Down,
    };
    let keepalive = Duration::from_millis(1 + u64::from(input.u16()));
    let dead_timer = keepalive * (2 + u32::from(input.u8() % 8));
    PathParams {
        keepalive,
        dead_timer,
        weight_out: u32::from(input.u8()),
        weight_in: u16::from(input.u8()),
        window: u32::from(input.u8() % 16),
        admin,
    }
}

fn check_timers(s: &Session, now: Instant) {
    if let Some(t) = s.poll_timeout() {
        assert!(
            t.at > now,
            "timer {t:?} still due after handle_timeout({now:?})"
        );
    }
}

/// A path just added probes now at the earliest and has no deadline in the
/// past (other paths' timers may be due: the driver runs `handle_timeout`
/// after any change).
fn check_new_path_timers(s: &Session, path: usize, now: Instant) {
    let p = s.path(path).expect("the path was just added");
    if let Some((at, kind)) = p.next_timer() {
        assert!(at >= now, "new path's {kind:?} timer {at:?} before {now:?}");
    }
}

fn feed(s: &mut Session, path: usize, datagram: &[u8], force_conn: bool, now: Instant) {
    let Ok((mut header, payload)) = Header::parse(datagram) else {
        return;
    };
    if force_conn {
        header.conn_id = CONN_ID;
    }
    if let Ok(Received::Data(p)) = s.handle_datagram(path, &header, payload, now) {
        assert_eq!(header.msg_type, MsgType::Data);
        assert_eq!(p, payload, "data payload must be handed back unchanged");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let mut now = t0();
    let config = SessionConfig {
        conn_id: CONN_ID,
        paths: vec![params(AdminStatus::Up), params(AdminStatus::Backup)],
        first_control_id: 1,
    };
    let mut s = Session::new(config, now).expect("two paths are allowed");
    let mut seq = 0u64;
    let mut buf = [0u8; Transmit::MAX_LEN];

    while !input.0.is_empty() {
        let op = input.u8();
        let flag = op & 8 != 0;
        match op & 7 {
            0 | 1 => {
                // Path PATHS is out of range on purpose: it must be refused.
                let path = usize::from(input.u8()) % (PATHS + 1);
                let len = usize::from(input.u8());
                let datagram = input.bytes(len);
                feed(&mut s, path, datagram, flag, now);
            }
            2 => {
                let d = u64::from(input.u16());
                now += if flag {
                    Duration::from_millis(d)
                } else {
                    Duration::from_micros(d)
                };
                s.handle_timeout(now);
                check_timers(&s, now);
            }
            3 => {
                if let Some(t) = s.poll_timeout() {
                    now = now.max(t.at);
                }
                s.handle_timeout(now);
                check_timers(&s, now);
            }
            4 => {
                let mut looped: Vec<(usize, [u8; Transmit::MAX_LEN], usize)> = Vec::new();
                let mut n = 0;
                while let Some(t) = s.poll_transmit() {
                    n += 1;
                    assert!(n <= MAX_DRAIN, "transmit queue not bounded");
                    assert!(t.path < PATHS);
                    seq += 1;
                    let path_seq = input.u32();
                    let len = t.emit(seq, path_seq, &mut buf).expect("fits Transmit::MAX_LEN");
                    let (h, body) = Header::parse(&buf[..len]).expect("own header parses");
                    assert_eq!(h.msg_type, t.msg_type);
                    assert_eq!(h.conn_id, t.conn_id);
                    assert_eq!((h.seq, h.path_seq), (seq, path_seq));
                    assert_eq!(usize::from(h.path_id), t.path);
                    match t.body {
                        Payload::Keepalive(k) => {
                            assert!(matches!(t.msg_type, MsgType::Probe | MsgType::ProbeReply));
                            assert_eq!(len, Transmit::KEEPALIVE_LEN);
                            assert_eq!(Keepalive::parse(body), Ok(k));
                        }
                        Payload::Control(c) => {
                            assert_eq!(t.msg_type, MsgType::Control);
                            assert_eq!(body.len(), c.len());
                            assert_eq!(ControlMsg::parse(body), Ok(c));
                        }
                    }
                    if flag {
                        looped.push((t.path, buf, len));
                    }
                }
                // Echo after draining, so replies to echoed probes wait for
                // the next drain like a real peer's would.
                for (path, d, len) in looped {
                    feed(&mut s, path, &d[..len], false, now);
                }
            }
            5 => {
                while let Some(e) = s.poll_event() {
                    if let Event::PeerControl { via, msg } = e {
                        let result = match input.u8() % 3 {
                            0 => Ok(()),
                            1 => Err(Refusal::CannotBind),
                            _ => Err(Refusal::IdInUse),
                        };
                        s.answer_control(via, &msg, result, now);
                    }
                }
                let e = s.eligibility();
                assert_eq!(e.primary & e.backup, 0, "a path is primary and backup");
                assert_eq!(
                    (e.primary | e.backup) >> PATHS,
                    0,
                    "eligible path out of range"
                );
            }
            6 if flag => {
                let path = usize::from(input.u8()) % PATHS;
                let existed = s.path(path).is_some();
                if existed {
                    assert!(s.remove_path(path).is_ok());
                    assert!(s.path(path).is_none());
                    assert_eq!(s.eligibility().active() & (1 << path), 0);
                } else {
                    let p = fuzzed_params(&mut input);
                    assert!(s.add_path(path, p, now).is_ok());
                    check_new_path_timers(&s, path, now);
                }
            }
            6 => {
                let path = usize::from(input.u8()) % (PATHS + 1);
                let p = fuzzed_params(&mut input);
                let exists = s.path(path).is_some();
                let r = s.set_path_params(path, p, now);
                assert_eq!(r.is_ok(), exists);
            }
            7 if flag => {
                let path = input.u8() % PATHS as u8;
                let name = PathName::new("p").expect("name");
                let body = if input.u8() & 1 == 0 {
                    ControlBody::PathRemove { name }
                } else {
                    ControlBody::PathAdd(mpt_proto::wire::PathAdd {
                        name,
                        sender_local: "10.0.0.1:1".parse().expect("addr"),
                        sender_remote: None,
                        weight_out: 1,
                        weight_in: 1,
                        window: 1,
                        backup: false,
                    })
                };
                let before = s.control_outstanding();
                match s.send_control(u16::from(path), body, now) {
                    Ok(_) => assert_eq!(s.control_outstanding(), before + 1),
                    Err(_) => assert_eq!(before, mpt_proto::control::MAX_OUTSTANDING),
                }
            }
            _ => {
                let path = usize::from(input.u8()) % (PATHS + 1);
                let packets = input.u32();
                let highest_path_seq = input.u32();
                let summary = DataSummary {
                    packets,
                    highest_path_seq,
                    last_rx: now,
                };
                let exists = s.path(path).is_some();
                let r = s.handle_data_summary(path, summary);
                assert_eq!(r.is_ok(), exists);
            }
        }
    }
});
