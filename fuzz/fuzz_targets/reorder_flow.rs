//! The resequencer driven by arbitrary calls never panics, never delivers
//! a packet twice or one it was not given, and loses none it accepted.
//!
//! The input is a program: two header bytes (slot count 2..=64, slot
//! length 8..=39), then one-byte opcodes, each followed by its operands
//! (missing bytes read as zero, so every input is a program):
//!
//! | op & 7 | action                                                          |
//! |--------|-----------------------------------------------------------------|
//! | 0..=2  | `insert_after`: sequence number, predecessor, path, length      |
//! | 3      | `insert` (global order): sequence number, path, length          |
//! | 4      | `skip`: sequence number, path                                   |
//! | 5      | advance time by a u16 in µs (bit 3: in ms), `handle_timeout`    |
//! | 6      | `set_timeout` to a u16 in µs                                    |
//! | 7      | `forget_path`                                                   |
//!
//! A sequence number is a signed 16-bit step from the last one, or (bit 4
//! of the opcode) a full u64, so the fuzzer both stays within the window
//! and jumps anywhere. A predecessor is none, a step back from the
//! sequence number, or (bit 5) a full u64.
//!
//! Checked besides "no panic": every packet handed out carries the id of
//! an insertion, no id comes out twice, and by the end exactly the
//! insertions not refused as duplicates have come out (a final timeout far ahead releases what is
//! held); at most the window is held; after `handle_timeout(now)` the next
//! deadline is after `now` (the daemon would spin otherwise).

#![no_main]

use std::collections::HashSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use mpt_proto::reorder::{Outcome, Resequencer};

/// Path ids used: a few beyond the resequencer's table too.
const PATHS: u8 = 70;

/// A fixed base instant: the same input replays the same way.
fn t0() -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now)
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
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
    fn u64(&mut self) -> u64 {
        (u64::from(self.u16()) << 48)
            | (u64::from(self.u16()) << 32)
            | (u64::from(self.u16()) << 16)
            | u64::from(self.u16())
    }
}

/// Delivered packets: each carries its insertion id in its first 8 bytes.
struct Sink {
    delivered: HashSet<u64>,
    /// Ids handed out so far.
    issued: u64,
}

impl Sink {
    fn take(&mut self, packet: &[u8]) {
        let id = u64::from_be_bytes(packet[..8].try_into().expect("8-byte id"));
        assert!(id < self.issued, "packet {id} was never inserted");
        assert!(self.delivered.insert(id), "packet {id} delivered twice");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let slots = 2 + usize::from(input.u8() % 63);
    let slot_len = 8 + usize::from(input.u8() % 32);
    let mut r = Resequencer::new(slots, slot_len, Duration::from_millis(10));
    let mut now = t0();
    let mut seq = 0u64;
    let mut accepted = HashSet::new();
    let mut sink = Sink {
        delivered: HashSet::new(),
        issued: 0,
    };
    let mut packet = [0u8; 64];
    while !input.0.is_empty() {
        let op = input.u8();
        if matches!(op & 7, 0..=4) {
            seq = if op & 0x10 != 0 {
                input.u64()
            } else {
                seq.wrapping_add_signed(i64::from(input.u16() as i16))
            };
        }
        match op & 7 {
            0..=3 => {
                let prev = if op & 7 == 3 {
                    None
                } else if op & 0x20 != 0 {
                    Some(input.u64())
                } else {
                    match input.u8() {
                        0 => None,
                        back => seq.checked_sub(u64::from(back)),
                    }
                };
                let path = usize::from(input.u8() % PATHS);
                let len = 8 + usize::from(input.u8() % 48);
                let id = sink.issued;
                sink.issued += 1;
                packet[..8].copy_from_slice(&id.to_be_bytes());
                let p = &packet[..len];
                let outcome = if op & 7 == 3 {
                    r.insert(seq, path, p, now, |d| sink.take(d))
                } else {
                    r.insert_after(seq, prev, path, p, now, |d| sink.take(d))
                };
                if outcome != Outcome::Duplicate {
                    accepted.insert(id);
                }
            }
            4 => {
                let path = usize::from(input.u8() % PATHS);
                r.skip(seq, path, now, |d| sink.take(d));
            }
            5 => {
                let step = u64::from(input.u16());
                now += if op & 8 != 0 {
                    Duration::from_millis(step)
                } else {
                    Duration::from_micros(step)
                };
                r.handle_timeout(now, |d| sink.take(d));
                if let Some(t) = r.poll_timeout() {
                    assert!(t > now, "deadline {t:?} still due after handle_timeout");
                }
            }
            6 => r.set_timeout(Duration::from_micros(u64::from(input.u16()))),
            _ => r.forget_path(usize::from(input.u8() % PATHS)),
        }
        assert!(r.held() <= slots.next_power_of_two());
    }
    r.handle_timeout(now + Duration::from_secs(3600), |d| sink.take(d));
    assert_eq!(r.held(), 0, "a timeout far ahead releases everything");
    assert_eq!(r.poll_timeout(), None);
    assert_eq!(sink.delivered, accepted, "an accepted packet was lost");
});
