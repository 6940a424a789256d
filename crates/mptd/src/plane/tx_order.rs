//! Keeps every path of a connection FIFO when several transmit workers
//! send on it.
//!
//! The peer relies on each path delivering in the order numbers were
//! given out: its resequencer declares a gap lost once every active path
//! has delivered a connection sequence number above it, and its loss
//! detector asks for repair of a hole in a path's own sequence. Each
//! transmit worker (one per tun queue) numbers a whole batch at once and
//! sends it later, after heading and sealing. With two workers carrying
//! flows of one connection, worker B could number its batch after worker
//! A and still reach a path's socket first: the peer then saw numbers
//! going backwards on one path, took A's datagrams for lost (skipped the
//! gap, asked for repairs of datagrams still on their way) and delivered
//! them late, which TCP reads as loss (measured:
//! docs/results/2026-11-26-like-paths-transmit-order.md).
//!
//! The fix keeps numbering and sending in one order without putting the
//! sealing under a lock: numbers are handed out together with a *ticket*
//! under a mutex ([`TxOrder::allocate`]), and a worker sends its batch's
//! datagrams of the connection only when the connection's turn has come to
//! its ticket ([`TxOrder::wait_turn`], then [`TxOrder::done`]). Heading
//! and sealing, the costly part, still run in parallel. A worker always
//! ends each ticket it took, sending or not. Workers take the turns of
//! several connections in ascending connection order, so no two wait for
//! each other.

use crate::sync::lock_unpoisoned;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Spins before a waiting worker starts yielding the CPU: the worker ahead
/// is usually in the middle of its sends, a few microseconds.
const SPINS_BEFORE_YIELD: u32 = 64;

/// Send order of one connection's transmit batches.
#[derive(Debug, Default)]
pub struct TxOrder {
    /// The next ticket to hand out.
    next_ticket: Mutex<u64>,
    /// The ticket whose batch may send now.
    turn: AtomicU64,
}

impl TxOrder {
    /// A connection with nothing sent yet.
    pub fn new() -> TxOrder {
        TxOrder::default()
    }

    /// Runs `number` (which hands out the batch's sequence numbers) and
    /// takes a ticket, both under one lock, so tickets follow the numbers.
    pub fn allocate<R>(&self, number: impl FnOnce() -> R) -> (u64, R) {
        let mut next = lock_unpoisoned(&self.next_ticket);
        let numbered = number();
        let ticket = *next;
        *next = next.wrapping_add(1);
        (ticket, numbered)
    }

    /// Waits until the batch with `ticket` may send.
    pub fn wait_turn(&self, ticket: u64) {
        let mut spins = 0u32;
        while self.turn.load(Ordering::Acquire) != ticket {
            if spins < SPINS_BEFORE_YIELD {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Ends the turn of `ticket` (after its sends, or instead of them).
    pub fn done(&self, ticket: u64) {
        self.turn.store(ticket.wrapping_add(1), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::{Arc, Mutex};

    #[test]
    fn tickets_follow_the_numbers_and_turns_follow_the_tickets() {
        let order = TxOrder::new();
        let seq = AtomicU64::new(100);
        let (t0, s0) = order.allocate(|| seq.fetch_add(5, Ordering::Relaxed));
        let (t1, s1) = order.allocate(|| seq.fetch_add(3, Ordering::Relaxed));
        assert_eq!((t0, s0, t1, s1), (0, 100, 1, 105));
        order.wait_turn(t0); // first: no wait
        order.done(t0);
        order.wait_turn(t1);
        order.done(t1);
        let (t2, _) = order.allocate(|| ());
        assert_eq!(t2, 2);
        order.wait_turn(t2);
    }

    /// Several threads number batches and "send" them (append the
    /// numbers to one log, as datagrams reach one path's socket): the log
    /// must come out in numbering order whatever the threads' timing.
    /// Without the turns (numbering, then sending at once) the log comes
    /// out of order within a few thousand batches.
    #[test]
    fn concurrent_senders_keep_the_numbering_order() {
        let order = Arc::new(TxOrder::new());
        let seq = Arc::new(AtomicU64::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..4)
            .map(|w| {
                let (order, seq, log) = (order.clone(), seq.clone(), log.clone());
                std::thread::spawn(move || {
                    for b in 0..2000u64 {
                        let n = 1 + (b + w) % 7;
                        let (ticket, first) =
                            order.allocate(|| seq.fetch_add(n, Ordering::Relaxed));
                        // Heading and sealing: work of varying length.
                        let mut x = first;
                        for _ in 0..(b * 31 + w * 17) % 200 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                        std::hint::black_box(x);
                        order.wait_turn(ticket);
                        log.lock().unwrap().extend(first..first + n);
                        order.done(ticket);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let log = log.lock().unwrap();
        assert_eq!(log.len() as u64, seq.load(Ordering::Relaxed));
        assert!(
            log.windows(2).all(|w| w[1] == w[0] + 1),
            "sent out of numbering order"
        );
    }
}
