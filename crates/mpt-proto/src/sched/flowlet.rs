//! Flowlets: a flow's packets stay on one path while that costs nothing.
//!
//! Striping one flow packet by packet over paths reorders it whenever the
//! paths' delays differ by more than the packets' spacing; the receiver
//! then holds packets in its resequencer. Many flows at once need no
//! striping of each one: the scheduler can balance the paths by flow and
//! keep each flow in order. A single big flow, though, must be striped, or
//! it gets one path's capacity.
//!
//! The rule serves both: a packet goes on the path its flow's previous
//! packet took if that path could take it (eligible, within the
//! resequencer's horizon), has nothing queued in the scheduler's model
//! and ranks at most [`STICK_SLACK_NS`] behind the path the scheduler
//! would pick anyway; a path with a queue keeps it only while it ranks at
//! most [`RUN_SLACK_NS`] behind (tens of microseconds: runs that fill a
//! GSO send on fast paths, single packets on slow ones). A flow that pauses for longer than the paths' delay
//! spread starts a new flowlet: it can change path without overtaking
//! itself. A flow that loads its path is striped packet by packet, as
//! without flowlets. (Kept in runs, big flows leave the paths' queues a run
//! apart and lose several percent of the capacity to the resequencing;
//! measured: docs/results/2026-11-26-like-paths-level-queues.md.)
//!
//! Memory is fixed: one entry per flow bucket of [`FLOW_BUCKETS`].

use crate::flow::{FlowTable, FLOW_BUCKETS};

/// How far behind the best path (in the scheduler's rank, ns) a flow's
/// current path may be and still keep the flow.
pub const STICK_SLACK_NS: u64 = 1_000_000;

/// How far behind the best path a flow's current path may rank and still
/// keep the flow while the path *has* something queued in the model: the
/// flow then goes in runs of about this much transmission time, on paths
/// where a packet takes less than this. At 100 Mbit/s one full-size
/// packet takes 112 us, so slow paths are still striped packet by packet
/// and their queues stay level; a path modelled
/// at several Gbit/s takes a few dozen packets of a burst in a row, which
/// its sender passes to the kernel as one GSO send and the receiver
/// takes in as one coalesced message. Packet by packet, a burst over two
/// idle fast paths alternated, every GSO send carried half as much and
/// the receiver held half of the flow's packets until it had read the
/// other path's socket.
pub const RUN_SLACK_NS: u64 = 50_000;

/// A pause this much longer than the paths' delay spread ends a flowlet.
pub const FLOWLET_GAP_MARGIN_NS: u64 = 1_000_000;

/// Per flow bucket: the path of the last packet and when it was sent.
#[derive(Debug, Clone)]
pub struct Flowlets {
    last: Box<[(u64, u8); FLOW_BUCKETS]>,
}

/// No path recorded.
const NONE: u8 = u8::MAX;

impl Default for Flowlets {
    fn default() -> Self {
        Flowlets::new()
    }
}

impl Flowlets {
    /// A table where every flow starts a new flowlet.
    pub fn new() -> Flowlets {
        Flowlets {
            last: Box::new([(0, NONE); FLOW_BUCKETS]),
        }
    }

    /// The path of the flow hashed to `hash` if its last packet left less
    /// than `gap_ns` before `now_ns` (the flowlet goes on).
    pub fn current(&self, hash: u32, now_ns: u64, gap_ns: u64) -> Option<usize> {
        let (at, path) = self.last[FlowTable::bucket(hash)];
        (path != NONE && now_ns.saturating_sub(at) < gap_ns).then_some(usize::from(path))
    }

    /// Records that the flow hashed to `hash` sent a packet on `path` at
    /// `now_ns`.
    pub fn record(&mut self, hash: u32, path: usize, now_ns: u64) {
        let path = u8::try_from(path).unwrap_or(NONE);
        self.last[FlowTable::bucket(hash)] = (now_ns, path);
    }

    /// The pause that ends a flowlet over paths whose one-way delays above
    /// the fastest are `owd_ns`: the largest, plus a margin.
    pub fn gap_for(owd_ns: impl IntoIterator<Item = u64>) -> u64 {
        owd_ns
            .into_iter()
            .max()
            .unwrap_or(0)
            .saturating_add(FLOWLET_GAP_MARGIN_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flowlet_lasts_while_packets_come_closer_than_the_gap() {
        let mut f = Flowlets::new();
        assert_eq!(f.current(7, 0, 5), None, "nothing recorded");
        f.record(7, 3, 100);
        assert_eq!(f.current(7, 104, 5), Some(3));
        assert_eq!(f.current(7, 105, 5), None, "paused as long as the gap");
        assert_eq!(f.current(8, 101, 5), None, "another flow");
        f.record(7, 300, 200); // not representable: forgotten
        assert_eq!(f.current(7, 201, 5), None);
        assert_eq!(Flowlets::gap_for([0, 30, 5]), 30 + FLOWLET_GAP_MARGIN_NS);
        assert_eq!(Flowlets::gap_for([]), FLOWLET_GAP_MARGIN_NS);
    }
}
