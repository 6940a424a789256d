//! Stage 4 of the receive path: deliver. Data goes through the delay line
//! (`crate::dataplane::equalize`), then the resequencer, then the staging
//! that coalesces it into tun writes (`crate::dataplane::rx::sink`).
//!
//! Every datagram with a trusted sequence number enters the delay line
//! behind what its path holds, data or not (see `equalize::Kind`): a
//! sequence number marked done in the resequencer moves its path's mark
//! in the loss proof, which must not pass data still held. Data is held
//! until the slowest path's delay ([`EqualizeTargets`], [`hold`]); the
//! rest passes at once unless its path holds something.

use mpt_proto::seq::seq_excess;
use std::time::{Duration, Instant};

use mpt_proto::flow::is_tcp_syn;
use mpt_proto::reorder::Resequencer;

use crate::dataplane::equalize::{DelayLine, Kind, Meta, MAX_HOLD, MIN_HOLD};
use crate::dataplane::rx::sink::{PacketSink, Staging};
use crate::plane::{Counter, PlanSnapshot};

/// The one-way delays (µs, wrapping, receive clock − sender timestamp) a
/// batch's data is held to, as the control loop last published them
/// (read once per batch).
#[derive(Debug, Clone, Copy)]
pub struct EqualizeTargets {
    /// Short datagrams: the slowest path carrying data.
    to: Option<u32>,
    /// Full-size datagrams and TCP SYNs: with far paths counted whether
    /// they carry data or not.
    bulk_to: Option<u32>,
}

impl EqualizeTargets {
    /// The targets of a published plan.
    pub fn of(timing: &PlanSnapshot) -> EqualizeTargets {
        EqualizeTargets {
            to: timing.plan.equalize.map(|t| t.owd_us),
            bulk_to: timing.plan.equalize_bulk.map(|t| t.owd_us),
        }
    }

    /// The delay a data datagram (`plain_len` bytes of plaintext, carrying
    /// `packet`) is held to. Full-size datagrams and TCP SYNs are held
    /// with far paths counted whether they carry data or not; short ones
    /// only with those that do (see `mpt_proto::session::timing::equalize_target`).
    #[inline]
    pub fn for_data(&self, plain_len: usize, packet: &[u8]) -> Option<u32> {
        if plain_len >= mpt_proto::sched::SMALL_PACKET || is_tcp_syn(packet) {
            self.bulk_to
        } else {
            self.to
        }
    }
}

/// How long to hold a data datagram that arrived with one-way delay
/// `owd_us` to reach `target`: nothing without a target, or for real-time
/// packets sent twice (`copied`): they are there for their delay, and
/// leave at once unless the path holds data ahead of them. (TCP ACKs are
/// held too: let through at once, they cost a BBR flow over WiFi + LTE
/// most of its rate; measured: docs/results/2026-11-26-four-paths-vs-one.md.)
/// Not yet capped at [`MAX_HOLD`].
#[inline]
pub fn hold(target: Option<u32>, owd_us: u32, copied: bool) -> Duration {
    let hold_us = match target {
        Some(d) if !copied => seq_excess(d, owd_us),
        _ => 0,
    };
    Duration::from_micros(u64::from(hold_us))
}

/// The end of the line for one batch (or one round of timeouts): the
/// connection's resequencer, locked, and where what it releases goes.
pub struct Resequence<'r, S: PacketSink> {
    reseq: &'r mut Resequencer,
    staging: &'r mut Staging,
    sink: &'r S,
    /// Failed tun writes.
    errors: &'r Counter,
    now: Instant,
}

impl<S: PacketSink> Resequence<'_, S> {
    /// Hands a datagram's packet (or, for [`Kind::Skip`], its sequence
    /// number) to the resequencer.
    fn take(&mut self, m: Meta, packet: &[u8]) {
        let (staging, sink, errors) = (&mut *self.staging, self.sink, self.errors);
        let deliver = |p: &[u8]| staging.push(p, sink, errors);
        let (reseq, now) = (&mut *self.reseq, self.now);
        match m.kind {
            Kind::Data => {}
            Kind::Repair => reseq.repair_arrived(m.seq),
            Kind::Skip => {
                reseq.skip(m.seq, m.path, now, deliver);
                return;
            }
        }
        match m.flow {
            Some(prev) => {
                reseq.insert_after(m.seq, prev, m.path, packet, now, deliver);
            }
            None => {
                reseq.insert(m.seq, m.path, packet, now, deliver);
            }
        }
    }
}

/// The deliver stage over one batch: delay line, resequencer, staging.
pub struct Deliver<'r, S: PacketSink> {
    delay: &'r mut DelayLine,
    onward: Resequence<'r, S>,
    /// Data datagrams held by the delay line in this batch.
    held: u64,
    /// Their holds, µs.
    held_us: u64,
}

impl<'r, S: PacketSink> Deliver<'r, S> {
    /// The stage at `now`, releasing into `reseq` (locked by the caller)
    /// and on to `staging` and `sink`; failed writes count in `errors`.
    pub fn new(
        delay: &'r mut DelayLine,
        reseq: &'r mut Resequencer,
        staging: &'r mut Staging,
        sink: &'r S,
        errors: &'r Counter,
        now: Instant,
    ) -> Self {
        Deliver {
            delay,
            onward: Resequence {
                reseq,
                staging,
                sink,
                errors,
                now,
            },
            held: 0,
            held_us: 0,
        }
    }

    /// The resequencer (for the holes stage).
    #[inline]
    pub fn resequencer(&mut self) -> &mut Resequencer {
        self.onward.reseq
    }

    /// Data (`m`: its sequence number, flow predecessor and path; its
    /// IP packet `packet`) to hold for `hold` (see [`hold`]).
    #[inline]
    pub fn data(&mut self, m: Meta, packet: &[u8], hold: Duration) {
        let now = self.onward.now;
        let release = if hold >= MIN_HOLD {
            self.held += 1;
            self.held_us += hold.min(MAX_HOLD).as_micros() as u64;
            now + hold.min(MAX_HOLD)
        } else {
            now
        };
        let onward = &mut self.onward;
        self.delay
            .push(release, m, packet, now, |m, p| onward.take(m, p));
    }

    /// A repair received on path `m.path` with its own sequence number
    /// `own`: that number is done; the copy's data (`m`, `packet`) goes
    /// where the original would have. Both queue behind what the path
    /// holds.
    #[inline]
    pub fn repair(&mut self, own: u64, m: Meta, packet: &[u8]) {
        let now = self.onward.now;
        let onward = &mut self.onward;
        let own = Meta {
            seq: own,
            flow: None,
            path: m.path,
            kind: Kind::Skip,
        };
        self.delay
            .push(now, own, &[], now, |m, p| onward.take(m, p));
        self.delay
            .push(now, m, packet, now, |m, p| onward.take(m, p));
    }

    /// A sequence number without data, received on path `pi`.
    #[inline]
    pub fn skip(&mut self, seq: u64, pi: usize) {
        let now = self.onward.now;
        let onward = &mut self.onward;
        let m = Meta {
            seq,
            flow: None,
            path: pi,
            kind: Kind::Skip,
        };
        self.delay.push(now, m, &[], now, |m, p| onward.take(m, p));
    }

    /// Releases what the delay line holds that is due.
    pub fn release_due(&mut self) {
        let onward = &mut self.onward;
        self.delay.release_due(onward.now, |m, p| onward.take(m, p));
    }

    /// Gives the delay line's storage back if it was idle long enough.
    pub fn release_idle(&mut self) {
        self.delay.release_idle(self.onward.now);
    }

    /// Gives up the resequencer's gaps that timed out, delivering what
    /// waited behind them.
    pub fn give_up_gaps(&mut self) {
        let Resequence {
            reseq,
            staging,
            sink,
            errors,
            now,
        } = &mut self.onward;
        reseq.handle_timeout(*now, |p| staging.push(p, *sink, errors));
    }

    /// Data datagrams held in this batch, and their holds summed (µs).
    pub fn held(&self) -> (u64, u64) {
        (self.held, self.held_us)
    }
}
