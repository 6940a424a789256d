//! The adaptive scheduler's shared view of a path.
//!
//! The control loop owns the estimates (in the connection's `Session`) and
//! publishes, every round, what the transmit workers need to model a path:
//! its cost per byte, one-way delay, queue cap, lossiness, whether its rate
//! is only a lower bound, and its probing phase
//! ([`mpt_proto::sched::PathModel`]). Workers read it once per batch.
//!
//! The path's virtual clock (when its bottleneck will have drained what
//! was sent) must be shared: two workers each believing they own a path's
//! whole capacity would offer it twice as much. Each worker schedules a
//! batch on its own copy and then adds what it charged to the shared clock
//! with one atomic update per path and batch, never per packet.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use mpt_proto::sched::{probe_gain, PathModel};

/// One path's model, written by the control loop, read by the workers.
#[derive(Debug, Default)]
pub struct SharedModel {
    ps_per_byte: AtomicU64,
    owd_ns: AtomicU64,
    cap_ns: AtomicU64,
    phase_ns: AtomicU64,
    lossy: AtomicBool,
    lower_bound: AtomicBool,
    /// Virtual clock: ns since the connection epoch.
    busy_until_ns: AtomicU64,
}

impl SharedModel {
    /// Publishes a new model (control loop).
    pub fn publish(&self, model: PathModel, phase: Duration) {
        self.ps_per_byte.store(model.ps_per_byte, Relaxed);
        self.owd_ns.store(model.owd_ns, Relaxed);
        self.cap_ns.store(model.cap_ns, Relaxed);
        self.phase_ns.store(phase.as_nanos() as u64, Relaxed);
        self.lossy.store(model.lossy, Relaxed);
        self.lower_bound.store(model.lower_bound, Relaxed);
    }

    /// The model to schedule a batch at `now_ns` with, probing gain
    /// applied for path `id`.
    pub fn load(&self, id: usize, now_ns: u64) -> PathModel {
        let ps = self.ps_per_byte.load(Relaxed);
        PathModel {
            ps_per_byte: probe_gain(ps, now_ns, self.phase_ns.load(Relaxed), id),
            owd_ns: self.owd_ns.load(Relaxed),
            cap_ns: self.cap_ns.load(Relaxed),
            lossy: self.lossy.load(Relaxed),
            lower_bound: self.lower_bound.load(Relaxed),
        }
    }

    /// The shared virtual clock.
    pub fn busy_until(&self) -> u64 {
        self.busy_until_ns.load(Relaxed)
    }

    /// Adds `charged_ns` of transmission time sent at `now_ns` to the
    /// virtual clock, which never runs more than `limit_ns` ahead of now.
    pub fn charge(&self, now_ns: u64, charged_ns: u64, limit_ns: u64) {
        let _always_some = self.busy_until_ns.fetch_update(Relaxed, Relaxed, |old| {
            Some(
                old.max(now_ns)
                    .saturating_add(charged_ns)
                    .min(now_ns.saturating_add(limit_ns)),
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_proto::sched::ps_per_byte;

    #[test]
    fn two_workers_add_up_on_one_clock() {
        let m = SharedModel::default();
        m.publish(
            PathModel {
                ps_per_byte: ps_per_byte(8_000_000),
                owd_ns: 5,
                cap_ns: 50_000_000,
                lossy: true,
                lower_bound: true,
            },
            Duration::ZERO,
        );
        let got = m.load(3, 1_000);
        assert_eq!(
            (got.ps_per_byte, got.owd_ns, got.lossy, got.lower_bound),
            (1_000_000, 5, true, true)
        );
        // Two workers each send 1000 bytes (1 ms at 8 Mbit/s) at t = 10 ms.
        m.charge(10_000_000, 1_000_000, 100_000_000);
        m.charge(10_000_000, 1_000_000, 100_000_000);
        assert_eq!(m.busy_until(), 12_000_000);
        // An idle path's clock restarts from now; it never runs away.
        m.charge(50_000_000, 1_000_000, 100_000_000);
        assert_eq!(m.busy_until(), 51_000_000);
        m.charge(50_000_000, u64::MAX, 100_000_000);
        assert_eq!(m.busy_until(), 150_000_000);
    }
}
