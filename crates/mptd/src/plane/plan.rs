//! The receive side's timing plan as the control loop last published it.
//!
//! Each control round computes a typed
//! [`TimingPlan`](mpt_proto::session::timing::TimingPlan) per connection
//! (gap timeout, per-path waits, delay spread, equalisation targets). It
//! reaches the workers, the status and the metrics as one immutable
//! snapshot behind an [`ArcSwap`]: the control loop stores a new `Arc`
//! each round (one small allocation per connection per tick), a reader
//! loads it once per batch without a lock and sees one consistent plan,
//! never half of one round and half of the next.
//!
//! The snapshot holds the plan to the microsecond, as the daemon always
//! used it (the atomics this replaces held µs): publishing truncates every
//! duration to whole µs, and a path wait to at most `u32::MAX - 1` µs.
//!
//! The resequencer takes new path waits only when they changed (setting a
//! wait is not free, and it takes them under its lock): the snapshot
//! carries a generation that moves when the waits differ from the last
//! published ones, and the receive side remembers the generation it last
//! applied.

use arc_swap::{ArcSwap, Guard};
use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::MAX_PATHS;
use mpt_proto::session::timing::TimingPlan;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// One published plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanSnapshot {
    /// The plan, in whole µs.
    pub plan: TimingPlan,
    /// Moves whenever `plan.path_waits` differs from the previous plan's.
    pub path_waits_gen: u64,
}

impl PlanSnapshot {
    /// The resequencer's gap timeout in µs.
    pub fn reorder_timeout_us(&self) -> u64 {
        self.plan.reorder_timeout.as_micros() as u64
    }

    /// The delay spread of the paths bringing data in µs (`None`: fewer
    /// than two such paths).
    pub fn rx_spread_us(&self) -> Option<u64> {
        self.plan.rx_delay_spread.map(|d| d.as_micros() as u64)
    }

    /// How long short datagrams are held at most (µs; 0 = no hold).
    pub fn equalize_spread_us(&self) -> u64 {
        self.plan.equalize.map_or(0, |t| u64::from(t.spread_us))
    }

    /// How long full-size datagrams and TCP SYNs are held at most (µs;
    /// 0 = no hold).
    pub fn equalize_bulk_spread_us(&self) -> u64 {
        self.plan
            .equalize_bulk
            .map_or(0, |t| u64::from(t.spread_us))
    }
}

/// A connection's published timing plan, and the path-wait generation its
/// resequencer last applied.
#[derive(Debug)]
pub struct PublishedPlan {
    current: ArcSwap<PlanSnapshot>,
    /// `PlanSnapshot::path_waits_gen` the resequencer last took (under
    /// its lock).
    path_waits_applied: AtomicU64,
}

impl PublishedPlan {
    /// The plan before the first control round: gap timeout
    /// `reorder_timeout`, no path waits, no spread, no equalisation.
    pub fn new(reorder_timeout: Duration) -> PublishedPlan {
        let plan = TimingPlan {
            reorder_timeout,
            path_waits: [None; MAX_PATHS],
            rx_delay_spread: None,
            equalize: None,
            equalize_bulk: None,
        };
        PublishedPlan {
            current: ArcSwap::from_pointee(PlanSnapshot {
                plan: whole_micros(plan),
                path_waits_gen: 0,
            }),
            path_waits_applied: AtomicU64::new(0),
        }
    }

    /// The plan published last (load once per batch, not per packet).
    pub fn load(&self) -> Guard<Arc<PlanSnapshot>> {
        self.current.load()
    }

    /// The plan published last, to keep for a batch.
    pub fn load_full(&self) -> Arc<PlanSnapshot> {
        self.current.load_full()
    }

    /// Publishes this round's plan (control loop only: the one writer).
    pub fn publish(&self, plan: TimingPlan) {
        let plan = whole_micros(plan);
        let last = self.current.load();
        let path_waits_gen = if plan.path_waits == last.plan.path_waits {
            last.path_waits_gen
        } else {
            last.path_waits_gen.wrapping_add(1)
        };
        self.current.store(Arc::new(PlanSnapshot {
            plan,
            path_waits_gen,
        }));
    }

    /// Publishes the last plan changed by `change` (tests: stand in for
    /// a control round).
    #[cfg(test)]
    pub fn update(&self, change: impl FnOnce(&mut TimingPlan)) {
        let mut plan = self.load().plan;
        change(&mut plan);
        self.publish(plan);
    }

    /// Gives the resequencer (locked by the caller) the waits of
    /// `snapshot` if they changed since it got them (receive worker, once
    /// per batch).
    pub fn apply_path_waits(&self, snapshot: &PlanSnapshot, reseq: &mut Resequencer) {
        let gen = snapshot.path_waits_gen;
        if self.path_waits_applied.swap(gen, Relaxed) == gen {
            return;
        }
        for (id, wait) in snapshot.plan.path_waits.iter().enumerate() {
            reseq.set_path_wait(id, *wait);
        }
    }
}

/// `plan` with its durations truncated to whole µs, path waits capped at
/// `u32::MAX - 1` µs: the values the daemon has always used.
fn whole_micros(plan: TimingPlan) -> TimingPlan {
    let micros = |d: Duration| Duration::from_micros(d.as_micros() as u64);
    TimingPlan {
        reorder_timeout: micros(plan.reorder_timeout),
        path_waits: plan.path_waits.map(|w| {
            w.map(|d| {
                let us = d.as_micros().min(u128::from(u32::MAX - 1));
                Duration::from_micros(us as u64)
            })
        }),
        rx_delay_spread: plan.rx_delay_spread.map(micros),
        equalize: plan.equalize,
        equalize_bulk: plan.equalize_bulk,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_proto::session::timing::EqualizeTarget;

    #[test]
    fn initial_plan_holds_nothing() {
        let p = PublishedPlan::new(Duration::from_millis(25));
        let s = p.load();
        assert_eq!(s.reorder_timeout_us(), 25_000);
        assert_eq!(s.rx_spread_us(), None);
        assert_eq!(s.plan.equalize, None);
        assert_eq!(s.equalize_spread_us(), 0);
        assert_eq!(s.equalize_bulk_spread_us(), 0);
        assert_eq!(s.plan.path_waits, [None; MAX_PATHS]);
        assert_eq!(s.path_waits_gen, 0);
    }

    #[test]
    fn publish_truncates_to_micros_and_moves_generation_on_change_only() {
        let p = PublishedPlan::new(Duration::from_millis(25));
        let mut plan = p.load().plan;
        plan.reorder_timeout = Duration::from_nanos(30_000_999);
        plan.rx_delay_spread = Some(Duration::from_nanos(3_750_500));
        plan.equalize = Some(EqualizeTarget {
            owd_us: 7,
            spread_us: 3_600,
        });
        p.publish(plan);
        let s = p.load();
        assert_eq!(s.plan.reorder_timeout, Duration::from_micros(30_000));
        assert_eq!(s.rx_spread_us(), Some(3_750));
        assert_eq!(s.equalize_spread_us(), 3_600);
        assert_eq!(s.path_waits_gen, 0, "waits unchanged");

        plan.path_waits[1] = Some(Duration::from_nanos(5_000_400));
        p.publish(plan);
        assert_eq!(p.load().path_waits_gen, 1);
        assert_eq!(
            p.load().plan.path_waits[1],
            Some(Duration::from_micros(5_000))
        );
        // Sub-µs differences are no change.
        plan.path_waits[1] = Some(Duration::from_nanos(5_000_900));
        p.publish(plan);
        assert_eq!(p.load().path_waits_gen, 1);
        plan.path_waits[1] = Some(Duration::from_secs(1 << 40));
        p.publish(plan);
        assert_eq!(p.load().path_waits_gen, 2);
        assert_eq!(
            p.load().plan.path_waits[1],
            Some(Duration::from_micros(u64::from(u32::MAX - 1)))
        );
    }

    #[test]
    fn resequencer_takes_waits_once_per_change() {
        let p = PublishedPlan::new(Duration::from_millis(25));
        let mut reseq = Resequencer::new(16, 1500, Duration::from_millis(25));
        // Nothing published yet: generation 0 counts as applied.
        let s = **p.load();
        p.apply_path_waits(&s, &mut reseq);
        assert_eq!(p.path_waits_applied.load(Relaxed), 0);
        let mut plan = s.plan;
        plan.path_waits[0] = Some(Duration::from_millis(3));
        p.publish(plan);
        let s = **p.load();
        p.apply_path_waits(&s, &mut reseq);
        assert_eq!(p.path_waits_applied.load(Relaxed), 1);
        // The same generation again: not taken twice.
        p.path_waits_applied.store(7, Relaxed);
        p.apply_path_waits(&s, &mut reseq);
        assert_eq!(p.path_waits_applied.load(Relaxed), 1);
    }
}
