//! Reliable delivery of control messages between two sessions.
//!
//! Control messages (path added, path removed) are rare and must arrive
//! exactly once in effect, over paths that lose datagrams. The sender
//! numbers each message and repeats it with exponential back-off until the
//! peer acknowledges it or [`MAX_ATTEMPTS`] went unanswered. The receiver
//! remembers the ids it answered recently and acknowledges a repeat with
//! the answer it gave the first time, without acting on it again, so a
//! delayed copy of "add path 3" can never resurrect a path that was removed
//! since.
//!
//! Ids count up from a start the driver picks (the daemon uses the wall
//! clock in microseconds, so a restarted sender starts above everything it
//! sent before and its peer does not mistake new messages for old ones).
//!
//! Pure bookkeeping: no clock, no sockets; the session (`Session`) wires
//! it to its paths and timers.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::wire::{ControlBody, ControlMsg, Refusal};

/// First repeat interval; it doubles up to [`MAX_INTERVAL`].
pub const FIRST_INTERVAL: Duration = Duration::from_millis(200);

/// Longest repeat interval.
pub const MAX_INTERVAL: Duration = Duration::from_secs(2);

/// Sends of one message before the sender gives up (the last one about
/// 21 s after the first; given up 2 s later).
pub const MAX_ATTEMPTS: u32 = 14;

/// Messages awaiting an ack; more are refused (an operator typing
/// commands never gets near this).
pub const MAX_OUTSTANDING: usize = 64;

/// Answered ids remembered for re-acknowledging repeats.
const REMEMBERED: usize = 64;

/// Why a message could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// [`MAX_OUTSTANDING`] messages are awaiting acks already.
    #[error("{MAX_OUTSTANDING} control messages are awaiting the peer's answer already")]
    QueueFull,
}

/// A message awaiting its ack.
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    msg: ControlMsg,
    next_send: Instant,
    attempts: u32,
}

/// What to do with a received request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incoming {
    /// Not seen before: act on it, then [`ControlChannel::record_answer`].
    New,
    /// A repeat of one already answered: ack it again with this answer.
    Repeat(Result<(), Refusal>),
    /// Older than anything remembered: refuse without acting.
    Stale,
}

/// What a due timer produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Send (again) this message.
    Send(ControlMsg),
    /// Give up on this message: the peer never answered.
    GaveUp(ControlMsg),
}

/// Both directions of one connection's control messages.
#[derive(Debug, Clone)]
pub struct ControlChannel {
    next_id: u64,
    outstanding: VecDeque<Outstanding>,
    answered: VecDeque<(u64, Result<(), Refusal>)>,
    /// Every id at or below this is stale (forgotten).
    floor: u64,
}

impl ControlChannel {
    /// A channel whose first message gets id `first_id` (at least 1).
    pub fn new(first_id: u64) -> ControlChannel {
        ControlChannel {
            next_id: first_id.max(1),
            outstanding: VecDeque::new(),
            answered: VecDeque::with_capacity(REMEMBERED),
            floor: 0,
        }
    }

    /// Queues a message about `path_id`; it is due at once. Returns its id.
    pub fn send(
        &mut self,
        path_id: u16,
        body: ControlBody,
        now: Instant,
    ) -> Result<u64, ControlError> {
        if self.outstanding.len() >= MAX_OUTSTANDING {
            return Err(ControlError::QueueFull);
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.outstanding.push_back(Outstanding {
            msg: ControlMsg { id, path_id, body },
            next_send: now,
            attempts: 0,
        });
        Ok(id)
    }

    /// Messages awaiting their ack.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// When [`ControlChannel::poll_due`] next has something.
    pub fn next_timer(&self) -> Option<Instant> {
        self.outstanding.iter().map(|o| o.next_send).min()
    }

    /// The next message to send or give up at `now`, if any.
    pub fn poll_due(&mut self, now: Instant) -> Option<Due> {
        let i = self.outstanding.iter().position(|o| o.next_send <= now)?;
        let o = &mut self.outstanding[i];
        if o.attempts >= MAX_ATTEMPTS {
            let msg = o.msg;
            self.outstanding.remove(i);
            return Some(Due::GaveUp(msg));
        }
        let shift = o.attempts.min(16);
        let interval = FIRST_INTERVAL
            .saturating_mul(1u32 << shift)
            .min(MAX_INTERVAL);
        o.attempts += 1;
        o.next_send = now + interval;
        Some(Due::Send(o.msg))
    }

    /// Takes in an ack for message `id`; returns the message it answers, or
    /// `None` for an ack of nothing outstanding (a repeat, or forged).
    pub fn on_ack(&mut self, id: u64) -> Option<ControlMsg> {
        let i = self.outstanding.iter().position(|o| o.msg.id == id)?;
        self.outstanding.remove(i).map(|o| o.msg)
    }

    /// Classifies a received request (anything but an ack).
    pub fn on_request(&self, id: u64) -> Incoming {
        if let Some((_, r)) = self.answered.iter().find(|(i, _)| *i == id) {
            return Incoming::Repeat(*r);
        }
        if id <= self.floor {
            return Incoming::Stale;
        }
        Incoming::New
    }

    /// Remembers the answer given to request `id`.
    pub fn record_answer(&mut self, id: u64, result: Result<(), Refusal>) {
        if self.answered.len() >= REMEMBERED {
            if let Some((old, _)) = self.answered.pop_front() {
                self.floor = self.floor.max(old);
            }
        }
        self.answered.push_back((id, result));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::PathName;

    use crate::test_clock::t0;

    fn remove(name: &str) -> ControlBody {
        ControlBody::PathRemove {
            name: PathName::new(name).unwrap(),
        }
    }

    #[test]
    fn a_message_repeats_with_back_off_until_acked() {
        let t = t0();
        let mut c = ControlChannel::new(100);
        let id = c.send(2, remove("a"), t).unwrap();
        assert_eq!(id, 100);
        let mut sends = Vec::new();
        let mut now = t;
        for _ in 0..5 {
            now = c.next_timer().unwrap();
            match c.poll_due(now) {
                Some(Due::Send(m)) => {
                    assert_eq!(m.id, 100);
                    assert_eq!(m.path_id, 2);
                    sends.push(now - t);
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(c.poll_due(now), None, "one send per due time");
        }
        let ms: Vec<u128> = sends.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, vec![0, 200, 600, 1400, 3000]);
        assert_eq!(c.on_ack(100).map(|m| m.id), Some(100));
        assert_eq!(c.next_timer(), None);
        assert_eq!(c.on_ack(100), None, "a second ack is ignored");
        let _ = now;
    }

    #[test]
    fn an_unanswered_message_is_given_up_after_max_attempts() {
        let t = t0();
        let mut c = ControlChannel::new(1);
        c.send(0, remove("a"), t).unwrap();
        let mut sent = 0;
        loop {
            let now = c.next_timer().unwrap();
            match c.poll_due(now).unwrap() {
                Due::Send(_) => sent += 1,
                Due::GaveUp(m) => {
                    assert_eq!(m.id, 1);
                    // 0.2+0.4+0.8+1.6 then 2 s each.
                    assert!(now - t > Duration::from_secs(15), "{:?}", now - t);
                    assert!(now - t < Duration::from_secs(30), "{:?}", now - t);
                    break;
                }
            }
        }
        assert_eq!(sent, MAX_ATTEMPTS);
        assert_eq!(c.outstanding(), 0);
    }

    #[test]
    fn the_queue_is_bounded() {
        let t = t0();
        let mut c = ControlChannel::new(1);
        for _ in 0..MAX_OUTSTANDING {
            c.send(0, remove("a"), t).unwrap();
        }
        assert_eq!(c.send(0, remove("a"), t), Err(ControlError::QueueFull));
        c.on_ack(1).unwrap();
        assert!(c.send(0, remove("a"), t).is_ok());
    }

    #[test]
    fn repeats_get_the_first_answer_and_old_ids_are_stale() {
        let mut c = ControlChannel::new(1);
        assert_eq!(c.on_request(5), Incoming::New);
        c.record_answer(5, Err(Refusal::CannotBind));
        assert_eq!(c.on_request(5), Incoming::Repeat(Err(Refusal::CannotBind)));
        // Out of order arrival is still new.
        assert_eq!(c.on_request(4), Incoming::New);
        c.record_answer(4, Ok(()));
        for id in 10..10 + REMEMBERED as u64 {
            c.record_answer(id, Ok(()));
        }
        // 4 and 5 were forgotten: stale, never acted on again.
        assert_eq!(c.on_request(4), Incoming::Stale);
        assert_eq!(c.on_request(5), Incoming::Stale);
        assert_eq!(c.on_request(10 + REMEMBERED as u64), Incoming::New);
    }

    #[test]
    fn ids_count_up_from_the_start() {
        let t = t0();
        let mut c = ControlChannel::new(0);
        assert_eq!(c.send(0, remove("a"), t).unwrap(), 1);
        assert_eq!(c.send(0, remove("a"), t).unwrap(), 2);
    }
}
