//! Datagrams the session wants sent, and the wire clock they carry.
//!
//! The session only says what to send on which path; the driver allocates
//! the sequence numbers (the data plane shares those counters) and emits
//! the datagram with [`Transmit::emit`].

use std::time::Instant;

use crate::error::EncodeError;
use crate::wire::{ControlMsg, Feedback, Flags, Header, Keepalive, MsgType, HEADER_LEN};

/// The body of a datagram the session wants sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// A probe or probe reply body.
    Keepalive(Keepalive),
    /// A control message.
    Control(ControlMsg),
    /// Feedback on the peer's data.
    Feedback(Feedback),
}

/// A datagram the session wants sent. The caller allocates the sequence
/// numbers (the data plane shares those counters) and emits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Path index to send on.
    pub path: usize,
    /// Probe, probe reply or control.
    pub msg_type: MsgType,
    /// Connection id.
    pub conn_id: u32,
    /// Send timestamp.
    pub timestamp_us: u32,
    /// Body.
    pub body: Payload,
}

impl Transmit {
    /// Encoded length of a probe or probe reply.
    pub const KEEPALIVE_LEN: usize = HEADER_LEN + Keepalive::LEN;

    /// Encoded length of a feedback message.
    pub const FEEDBACK_LEN: usize = HEADER_LEN + Feedback::LEN;

    /// Longest datagram a session asks to send (a control message).
    pub const MAX_LEN: usize = HEADER_LEN + ControlMsg::MAX_LEN;

    /// Writes the datagram into `buf` and returns its length.
    pub fn emit(&self, seq: u64, path_seq: u32, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let header = Header {
            msg_type: self.msg_type,
            flags: Flags::NONE,
            path_id: u16::try_from(self.path).unwrap_or(u16::MAX),
            conn_id: self.conn_id,
            seq,
            path_seq,
            timestamp_us: self.timestamp_us,
        };
        header.emit(buf)?;
        let body = buf.get_mut(HEADER_LEN..).unwrap_or_default();
        let len = match &self.body {
            Payload::Keepalive(k) => {
                k.emit(body)?;
                Keepalive::LEN
            }
            Payload::Control(c) => c.emit(body)?,
            Payload::Feedback(f) => {
                f.emit(body)?;
                Feedback::LEN
            }
        };
        Ok(HEADER_LEN + len)
    }
}

/// Microseconds since `epoch`, wrapping: the wire timestamp.
pub fn timestamp_us(epoch: Instant, now: Instant) -> u32 {
    // Truncation is the point: the timestamp wraps every ~71 minutes and is
    // only ever compared by wrapping subtraction.
    now.saturating_duration_since(epoch).as_micros() as u32
}
