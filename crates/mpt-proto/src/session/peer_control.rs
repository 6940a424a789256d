//! Control messages between the two sessions of a connection: telling
//! the peer about paths added or removed here, answering its requests,
//! and resending ours until acknowledged (see [`crate::control`]).

use std::time::{Duration, Instant};

use crate::control::{Due, Incoming};
use crate::path::AdminStatus;
use crate::session::error::SessionError;
use crate::session::event::Event;
use crate::session::transmit::{timestamp_us, Payload, Transmit};
use crate::session::Session;
use crate::wire::{ControlBody, ControlMsg, MsgType, Refusal};

/// Paths a control message is sent on at once (the usable ones, fastest
/// first): enough to get through when one of them is failing.
const CONTROL_FANOUT: usize = 3;

impl Session {
    pub(super) fn on_control(&mut self, via: usize, msg: ControlMsg, now: Instant) {
        if let ControlBody::Ack(result) = msg.body {
            if let Some(ours) = self.control.on_ack(msg.id) {
                self.events
                    .push_back(Event::ControlAnswered { msg: ours, result });
            }
            return;
        }
        match self.control.on_request(msg.id) {
            Incoming::New => self.events.push_back(Event::PeerControl { via, msg }),
            Incoming::Repeat(result) => self.queue_ack(via, &msg, result, now),
            Incoming::Stale => self.queue_ack(via, &msg, Err(Refusal::Refused), now),
        }
    }

    fn queue_ack(
        &mut self,
        via: usize,
        msg: &ControlMsg,
        result: Result<(), Refusal>,
        now: Instant,
    ) {
        let ack = ControlMsg {
            id: msg.id,
            path_id: msg.path_id,
            body: ControlBody::Ack(result),
        };
        self.queue_transmit(Transmit {
            path: via,
            msg_type: MsgType::Control,
            conn_id: self.conn_id,
            timestamp_us: timestamp_us(self.epoch, now),
            body: Payload::Control(ack),
        });
    }

    /// Answers a request the driver got as [`Event::PeerControl`]; the ack
    /// goes back on the path it came on. Repeats of the request are
    /// answered the same way without another event.
    pub fn answer_control(
        &mut self,
        via: usize,
        msg: &ControlMsg,
        result: Result<(), Refusal>,
        now: Instant,
    ) {
        self.control.record_answer(msg.id, result);
        self.queue_ack(via, msg, result, now);
    }

    /// Tells the peer about path `path_id` (added or removed here). The
    /// session repeats the message until the peer answers; the answer
    /// arrives as [`Event::ControlAnswered`] (or [`Event::ControlGaveUp`]).
    /// Returns the message id.
    pub fn send_control(
        &mut self,
        path_id: u16,
        body: ControlBody,
        now: Instant,
    ) -> Result<u64, SessionError> {
        let id = self.control.send(path_id, body, now)?;
        self.flush_control(now);
        Ok(id)
    }

    /// Sends the control messages due at `now` on the best paths: the
    /// usable ones by smoothed RTT, or every path not switched off when
    /// none is usable yet.
    pub(super) fn flush_control(&mut self, now: Instant) {
        while let Some(due) = self.control.poll_due(now) {
            let msg = match due {
                Due::Send(m) => m,
                Due::GaveUp(msg) => {
                    self.events.push_back(Event::ControlGaveUp { msg });
                    continue;
                }
            };
            let mut via: Vec<(Duration, usize)> = self
                .paths()
                .filter(|(_, p)| p.usable())
                .map(|(i, p)| (p.rtt().smoothed().unwrap_or(Duration::MAX), i))
                .collect();
            if via.is_empty() {
                via = self
                    .paths()
                    .filter(|(_, p)| p.params().admin != AdminStatus::Down)
                    .map(|(i, _)| (Duration::MAX, i))
                    .collect();
            }
            via.sort_unstable();
            for &(_, path) in via.iter().take(CONTROL_FANOUT) {
                self.queue_transmit(Transmit {
                    path,
                    msg_type: MsgType::Control,
                    conn_id: self.conn_id,
                    timestamp_us: timestamp_us(self.epoch, now),
                    body: Payload::Control(msg),
                });
            }
        }
    }
}
