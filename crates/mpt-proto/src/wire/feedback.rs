//! Body of feedback messages: what a receiver saw of one path's data.
//!
//! Probes come every `keepalive` (seconds); a scheduler that follows a
//! link whose capacity moves, and a failure detector that reacts within a
//! few round trips, need to hear about a busy path far more often. So while
//! data arrives on a path, the receiver sends a feedback message on it at a
//! cadence tied to the path's RTT (see `Session`), carrying cumulative
//! counters. The sender derives from two consecutive feedbacks the delivery
//! rate (bytes over the receiver's own clock, so the return path's jitter
//! does not enter), the loss (datagrams over path sequence advance), an RTT
//! sample (the echoed timestamp of the newest datagram, minus the time the
//! receiver held it) and the one-way delay up to a constant offset (the
//! receiver's clock minus the sender's timestamp: comparing paths, the
//! offset cancels).
//!
//! ```text
//! offset  size  field
//!      0     4  rx_packets            datagrams received on this path
//!      4     4  rx_highest_path_seq   highest path_seq received
//!      8     8  rx_bytes              data bytes received (wire datagram sizes)
//!     16     4  last_rx_us            receiver clock (µs, wrapping) at the newest arrival
//!     20     4  echo_timestamp_us     sender timestamp of the newest datagram
//!     24     4  echo_delay_us         time from that arrival to this feedback
//!     28     4  owd_us                lowest receiver clock - sender timestamp since the last feedback
//!     32     2  weight_in             share the reporter wants to receive here
//!     34     1  flags                 0x01 hears_you, 0x02 owd valid
//!     35     1  reserved              zero
//! ```
//!
//! Like every message but handshakes, it is sealed on a connection with a
//! key, so a third party cannot make a sender believe a path is fast, slow
//! or lossy.

use crate::wire::error::{DecodeError, EncodeError};
use crate::wire::keepalive::PathReport;

const FLAG_HEARS_YOU: u8 = 0x01;
const FLAG_OWD: u8 = 0x02;

/// The body of a [`super::MsgType::Feedback`] message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Feedback {
    /// Packet counters and liveness, as in a probe.
    pub report: PathReport,
    /// Data bytes received on this path so far (wrapping).
    pub rx_bytes: u64,
    /// The receiver's clock in µs when the newest datagram arrived.
    pub last_rx_us: u32,
    /// The sender's timestamp of that datagram.
    pub echo_timestamp_us: u32,
    /// How long after its arrival this feedback left, in µs.
    pub echo_delay_us: u32,
    /// Lowest `receiver clock − sender timestamp` (µs, wrapping) over the
    /// datagrams since the previous feedback, if any was measured.
    pub owd_us: Option<u32>,
}

impl Feedback {
    /// Encoded length in bytes.
    pub const LEN: usize = 36;

    /// Writes the body into the first [`Feedback::LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), EncodeError> {
        let Some(out) = buf.get_mut(..Self::LEN) else {
            return Err(EncodeError::BufferTooSmall {
                needed: Self::LEN,
                have: buf.len(),
            });
        };
        out[0..4].copy_from_slice(&self.report.rx_packets.to_be_bytes());
        out[4..8].copy_from_slice(&self.report.rx_highest_path_seq.to_be_bytes());
        out[8..16].copy_from_slice(&self.rx_bytes.to_be_bytes());
        out[16..20].copy_from_slice(&self.last_rx_us.to_be_bytes());
        out[20..24].copy_from_slice(&self.echo_timestamp_us.to_be_bytes());
        out[24..28].copy_from_slice(&self.echo_delay_us.to_be_bytes());
        out[28..32].copy_from_slice(&self.owd_us.unwrap_or(0).to_be_bytes());
        out[32..34].copy_from_slice(&self.report.weight_in.to_be_bytes());
        let mut flags = 0;
        if self.report.hears_you {
            flags |= FLAG_HEARS_YOU;
        }
        if self.owd_us.is_some() {
            flags |= FLAG_OWD;
        }
        out[34] = flags;
        out[35] = 0;
        Ok(())
    }

    /// Parses a body; the payload must be exactly [`Feedback::LEN`] bytes.
    pub fn parse(payload: &[u8]) -> Result<Feedback, DecodeError> {
        let b: &[u8; Self::LEN] = payload.try_into().map_err(|_| DecodeError::BadBodyLength {
            len: payload.len(),
            expected: Self::LEN,
        })?;
        let flags = b[34];
        if flags & !(FLAG_HEARS_YOU | FLAG_OWD) != 0 || b[35] != 0 {
            return Err(DecodeError::UnknownFlags { bits: flags });
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&b[8..16]);
        Ok(Feedback {
            report: PathReport {
                rx_packets: u32_at(0),
                rx_highest_path_seq: u32_at(4),
                weight_in: u16::from_be_bytes([b[32], b[33]]),
                hears_you: flags & FLAG_HEARS_YOU != 0,
            },
            rx_bytes: u64::from_be_bytes(bytes),
            last_rx_us: u32_at(16),
            echo_timestamp_us: u32_at(20),
            echo_delay_us: u32_at(24),
            owd_us: (flags & FLAG_OWD != 0).then(|| u32_at(28)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Feedback {
        Feedback {
            report: PathReport {
                rx_packets: 0x0102_0304,
                rx_highest_path_seq: 0x0506_0708,
                weight_in: 0x090a,
                hears_you: true,
            },
            rx_bytes: 0x1112_1314_1516_1718,
            last_rx_us: 0x2122_2324,
            echo_timestamp_us: 0x3132_3334,
            echo_delay_us: 0x4142_4344,
            owd_us: Some(0x5152_5354),
        }
    }

    #[test]
    fn layout_is_as_documented() {
        let mut buf = [0xffu8; Feedback::LEN];
        sample().emit(&mut buf).unwrap();
        assert_eq!(
            buf,
            [
                1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22,
                0x23, 0x24, 0x31, 0x32, 0x33, 0x34, 0x41, 0x42, 0x43, 0x44, 0x51, 0x52, 0x53, 0x54,
                0x09, 0x0a, 0x03, 0
            ]
        );
        assert_eq!(Feedback::parse(&buf).unwrap(), sample());
    }

    #[test]
    fn owd_absent_round_trips() {
        let f = Feedback {
            owd_us: None,
            ..sample()
        };
        let mut buf = [0u8; Feedback::LEN];
        f.emit(&mut buf).unwrap();
        assert_eq!(buf[28..32], [0, 0, 0, 0]);
        assert_eq!(Feedback::parse(&buf).unwrap(), f);
    }

    #[test]
    fn bad_input_is_refused() {
        let mut buf = [0u8; Feedback::LEN];
        sample().emit(&mut buf).unwrap();
        assert!(Feedback::parse(&buf[..35]).is_err());
        let mut long = buf.to_vec();
        long.push(0);
        assert!(Feedback::parse(&long).is_err());
        let mut bad = buf;
        bad[34] |= 0x80;
        assert!(Feedback::parse(&bad).is_err());
        let mut bad = buf;
        bad[35] = 1;
        assert!(Feedback::parse(&bad).is_err());
        assert!(sample().emit(&mut [0u8; 35]).is_err());
    }
}
