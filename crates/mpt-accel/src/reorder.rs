//! The bounded reorder buffer of one direction of a pinned leg set.
//!
//! Each leg of the set has a reader thread that pushes the chunks it
//! reads; one consumer (the flow's copy towards its socket) pops them in
//! sequence order. The buffer holds at most `window` chunks: a reader
//! whose chunk is `window` or more ahead of the next one due **blocks**
//! until the consumer catches up. It then stops reading its leg, the
//! leg's TCP window closes, and the sending gateway's scheduler stops
//! feeding that leg: backpressure end to end, with at most `window`
//! chunks ([`crate::chunk::CHUNK`] bytes each) held here. The chunk that
//! is due next is always admitted, so a full buffer never waits for
//! itself: whichever leg carries the next chunk, its reader can deliver
//! it.
//!
//! A sequence number behind the next one due (a duplicate or a replay),
//! one already held, or one implausibly far ahead is refused: the peer
//! broke the protocol, the caller counts it and kills the set.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};

use crate::chunk::Msg;

/// A chunk further ahead than this is not a reordering but garbage.
pub const HORIZON: u32 = 1 << 24;

/// Why a chunk was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The buffer was closed (the set is dead).
    #[error("leg set closed")]
    Closed,
    /// Behind the next chunk due, already held, or beyond [`HORIZON`].
    #[error("chunk {0} out of the window")]
    BadSeq(u32),
}

#[derive(Debug, Default)]
struct State {
    next: u32,
    held: HashMap<u32, Msg>,
    closed: bool,
}

/// Chunks of one direction, put back in order.
#[derive(Debug)]
pub struct Reorder {
    state: Mutex<State>,
    cv: Condvar,
    window: u32,
}

impl Reorder {
    /// An empty buffer expecting sequence number 0, holding at most
    /// `window` (at least 1) chunks.
    pub fn new(window: u32) -> Self {
        Reorder {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            window: window.max(1),
        }
    }

    /// Adds chunk `seq`, blocking while it is `window` or more ahead of
    /// the next chunk due.
    pub fn push(&self, seq: u32, msg: Msg) -> Result<(), PushError> {
        let mut st = crate::lock(&self.state);
        loop {
            if st.closed {
                return Err(PushError::Closed);
            }
            let ahead = seq.wrapping_sub(st.next);
            if ahead >= HORIZON || st.held.contains_key(&seq) {
                return Err(PushError::BadSeq(seq));
            }
            if ahead < self.window {
                st.held.insert(seq, msg);
                self.cv.notify_all();
                return Ok(());
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The next chunk in order, blocking until it is there; `None` once
    /// the buffer is closed and the next chunk is not held.
    pub fn pop(&self) -> Option<Msg> {
        let mut st = crate::lock(&self.state);
        loop {
            let next = st.next;
            if let Some(m) = st.held.remove(&next) {
                st.next = next.wrapping_add(1);
                self.cv.notify_all();
                return Some(m);
            }
            if st.closed {
                return None;
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Closes the buffer: blocked pushes fail, pops return what is due
    /// and then `None`.
    pub fn close(&self) {
        crate::lock(&self.state).closed = true;
        self.cv.notify_all();
    }

    /// Whether [`Reorder::close`] was called.
    pub fn is_closed(&self) -> bool {
        crate::lock(&self.state).closed
    }

    /// Chunks held now.
    pub fn held(&self) -> usize {
        crate::lock(&self.state).held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn d(b: u8) -> Msg {
        Msg::Data(vec![b])
    }

    #[test]
    fn out_of_order_comes_out_in_order() {
        let r = Reorder::new(8);
        for s in [2u32, 0, 3, 1] {
            r.push(s, d(s as u8)).unwrap();
        }
        for s in 0..4u8 {
            assert_eq!(r.pop(), Some(d(s)));
        }
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn duplicates_stale_and_far_chunks_are_refused() {
        let r = Reorder::new(8);
        r.push(1, d(1)).unwrap();
        assert_eq!(r.push(1, d(1)), Err(PushError::BadSeq(1)));
        r.push(0, d(0)).unwrap();
        assert_eq!(r.pop(), Some(d(0)));
        // Behind the next one due (a replay): refused, never a wait.
        assert_eq!(r.push(0, d(0)), Err(PushError::BadSeq(0)));
        assert_eq!(
            r.push(HORIZON + 1, d(9)),
            Err(PushError::BadSeq(HORIZON + 1))
        );
        assert_eq!(r.push(u32::MAX, d(9)), Err(PushError::BadSeq(u32::MAX)));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let r = Reorder::new(4);
        crate::lock(&r.state).next = u32::MAX - 1;
        r.push(0, d(2)).unwrap();
        r.push(u32::MAX, d(1)).unwrap();
        r.push(u32::MAX - 1, d(0)).unwrap();
        for b in 0..3 {
            assert_eq!(r.pop(), Some(d(b)));
        }
    }

    #[test]
    fn a_full_window_blocks_the_reader_until_the_consumer_catches_up() {
        let r = Arc::new(Reorder::new(2));
        // 1 is held; 2 is outside the window [0, 2) and must wait.
        r.push(1, d(1)).unwrap();
        let r2 = r.clone();
        let far = std::thread::spawn(move || r2.push(2, d(2)));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!far.is_finished(), "a push beyond the window did not wait");
        assert_eq!(r.held(), 1);
        // The chunk due next is always admitted, whatever is held.
        r.push(0, d(0)).unwrap();
        assert_eq!(r.pop(), Some(d(0)));
        far.join().unwrap().unwrap();
        assert_eq!(r.pop(), Some(d(1)));
        assert_eq!(r.pop(), Some(d(2)));
    }

    #[test]
    fn close_wakes_readers_and_the_consumer() {
        let r = Arc::new(Reorder::new(1));
        let (a, b) = (r.clone(), r.clone());
        let blocked_push = std::thread::spawn(move || a.push(5, d(5)));
        let blocked_pop = std::thread::spawn(move || b.pop());
        std::thread::sleep(Duration::from_millis(30));
        r.close();
        assert_eq!(blocked_push.join().unwrap(), Err(PushError::Closed));
        assert_eq!(blocked_pop.join().unwrap(), None);
        assert!(r.is_closed());
        assert_eq!(r.push(0, d(0)), Err(PushError::Closed));
    }

    #[test]
    fn what_is_due_still_comes_out_after_close() {
        let r = Reorder::new(4);
        r.push(0, Msg::Fin).unwrap();
        r.push(2, d(2)).unwrap();
        r.close();
        assert_eq!(r.pop(), Some(Msg::Fin));
        assert_eq!(r.pop(), None);
    }
}
