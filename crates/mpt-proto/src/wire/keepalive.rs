//! Body of probe and probe-reply messages.
//!
//! Both carry the same 20 bytes, so a reply is never larger than the probe
//! that caused it (no amplification). A probe leaves the echo fields zero;
//! a reply copies the probe's timestamp and path sequence into them.
//!
//! ```text
//! offset  size  field
//!      0     4  echo_timestamp_us    probe's timestamp (reply only)
//!      4     4  echo_path_seq        probe's path_seq (reply only)
//!      8     4  rx_packets           datagrams received on this path
//!     12     4  rx_highest_path_seq  highest path_seq received
//!     16     2  weight_in            share the sender wants to receive here
//!     18     1  flags                0x01 = hears_you; other bits zero
//!     19     1  reserved             zero
//! ```

use crate::wire::error::{DecodeError, EncodeError};

/// What one side has received on a path, told to the other side so it can
/// estimate the loss of the direction it sends in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PathReport {
    /// Datagrams received on this path so far (wrapping).
    pub rx_packets: u32,
    /// Highest path sequence number received on this path (wrapping).
    pub rx_highest_path_seq: u32,
    /// The share of traffic the reporter wants to receive on this path
    /// (its `weight_in`).
    pub weight_in: u16,
    /// The reporter currently hears us on this path (its liveness for this
    /// path is up). Lets a sender notice a path that fails in one direction.
    pub hears_you: bool,
}

/// The body of [`super::MsgType::Probe`] and [`super::MsgType::ProbeReply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Keepalive {
    /// In a reply: the probe's `timestamp_us`. Zero in a probe.
    pub echo_timestamp_us: u32,
    /// In a reply: the probe's `path_seq`. Zero in a probe.
    pub echo_path_seq: u32,
    /// The sender's receive report for this path.
    pub report: PathReport,
}

const FLAG_HEARS_YOU: u8 = 0x01;

impl Keepalive {
    /// Encoded length in bytes.
    pub const LEN: usize = 20;

    /// Writes the body into the first [`Keepalive::LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), EncodeError> {
        let Some(out) = buf.get_mut(..Self::LEN) else {
            return Err(EncodeError::BufferTooSmall {
                needed: Self::LEN,
                have: buf.len(),
            });
        };
        out[0..4].copy_from_slice(&self.echo_timestamp_us.to_be_bytes());
        out[4..8].copy_from_slice(&self.echo_path_seq.to_be_bytes());
        out[8..12].copy_from_slice(&self.report.rx_packets.to_be_bytes());
        out[12..16].copy_from_slice(&self.report.rx_highest_path_seq.to_be_bytes());
        out[16..18].copy_from_slice(&self.report.weight_in.to_be_bytes());
        out[18] = if self.report.hears_you {
            FLAG_HEARS_YOU
        } else {
            0
        };
        out[19] = 0;
        Ok(())
    }

    /// Parses a body; the payload must be exactly [`Keepalive::LEN`] bytes.
    pub fn parse(payload: &[u8]) -> Result<Keepalive, DecodeError> {
        let b: &[u8; Self::LEN] = payload.try_into().map_err(|_| DecodeError::BadBodyLength {
            len: payload.len(),
            expected: Self::LEN,
        })?;
        if b[18] & !FLAG_HEARS_YOU != 0 || b[19] != 0 {
            return Err(DecodeError::UnknownFlags { bits: b[18] });
        }
        Ok(Keepalive {
            echo_timestamp_us: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            echo_path_seq: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            report: PathReport {
                rx_packets: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
                rx_highest_path_seq: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
                weight_in: u16::from_be_bytes([b[16], b[17]]),
                hears_you: b[18] & FLAG_HEARS_YOU != 0,
            },
        })
    }
}
