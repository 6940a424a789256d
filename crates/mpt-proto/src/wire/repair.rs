//! Bodies of loss-repair messages: a receiver's request for datagrams a
//! path lost ([`Nack`]), and the sender's copy of one ([`Repair`]).
//!
//! Why repair in the tunnel at all: TCP reads every loss as congestion. On
//! a link that drops packets at random (a fading WiFi, a radio edge) a
//! CUBIC flow through the tunnel shrinks its window for losses that say
//! nothing about the load, and a striped flow suffers from the worst of
//! its paths. The tunnel sees such a loss a round trip earlier than TCP
//! does (a hole in one path's `path_seq` while the path's queue is empty)
//! and on the path with the shortest delay it can fetch the missing
//! datagram again before TCP notices anything: TCP then sees a packet that
//! came a little late, not a loss. Losses while a queue stands are left
//! alone, so TCP still hears about congestion.
//!
//! A repair is a new datagram with its own `seq` (the AEAD nonce is the
//! sequence number, so a copy may never reuse the original's), which the
//! receiver marks done like a probe's; its payload names the original
//! `seq` the inner packet is delivered under.
//!
//! Nack body (sent on the path that lost the datagrams, about that path):
//!
//! ```text
//! offset  size  field
//!      0     4  first_path_seq   first path_seq missing
//!      4     2  count            how many consecutive path_seqs from there (1..=MAX_NACK_RUN)
//!      6     2  reserved         zero
//! ```
//!
//! Repair body (on any path):
//!
//! ```text
//! offset  size  field
//!      0     8  original_seq     the seq the lost datagram carried
//!      8     …  the original payload (flow prefix if FLOW is set, then the IP packet)
//! ```

use crate::wire::error::{DecodeError, EncodeError};

/// The longest run of lost datagrams one request names: a longer hole is
/// an outage or a queue overflow, not a random loss.
pub const MAX_NACK_RUN: u16 = 16;

/// Length of the prefix a [`super::MsgType::Repair`] payload starts with.
pub const REPAIR_PREFIX_LEN: usize = 8;

/// The body of a [`super::MsgType::Nack`] message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Nack {
    /// First path sequence number missing.
    pub first_path_seq: u32,
    /// Consecutive path sequence numbers missing from there.
    pub count: u16,
}

impl Nack {
    /// Encoded length in bytes.
    pub const LEN: usize = 8;

    /// Writes the body into the first [`Nack::LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), EncodeError> {
        let have = buf.len();
        let Some(out) = buf.first_chunk_mut::<{ Self::LEN }>() else {
            return Err(EncodeError::BufferTooSmall {
                needed: Self::LEN,
                have,
            });
        };
        out[0..4].copy_from_slice(&self.first_path_seq.to_be_bytes());
        out[4..6].copy_from_slice(&self.count.to_be_bytes());
        out[6..8].copy_from_slice(&[0, 0]);
        Ok(())
    }

    /// Parses a body of exactly [`Nack::LEN`] bytes whose count is
    /// 1..=[`MAX_NACK_RUN`].
    pub fn parse(body: &[u8]) -> Result<Nack, DecodeError> {
        let Ok(b) = <&[u8; Self::LEN]>::try_from(body) else {
            return Err(DecodeError::BadBodyLength {
                len: body.len(),
                expected: Self::LEN,
            });
        };
        let count = u16::from_be_bytes([b[4], b[5]]);
        if count == 0 || count > MAX_NACK_RUN {
            return Err(DecodeError::BadField { field: "count" });
        }
        Ok(Nack {
            first_path_seq: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            count,
        })
    }

    /// Whether `path_seq` is one of the requested (wrapping arithmetic).
    pub fn covers(&self, path_seq: u32) -> bool {
        path_seq.wrapping_sub(self.first_path_seq) < u32::from(self.count)
    }
}

/// A parsed [`super::MsgType::Repair`] payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repair<'a> {
    /// The sequence number the lost datagram carried.
    pub original_seq: u64,
    /// Its payload as it was (flow prefix if the header has FLOW, then
    /// the IP packet), unchecked.
    pub payload: &'a [u8],
}

impl<'a> Repair<'a> {
    /// Splits a repair payload; shorter than the prefix is `BadBodyLength`.
    pub fn parse(payload: &'a [u8]) -> Result<Repair<'a>, DecodeError> {
        match payload.split_first_chunk::<REPAIR_PREFIX_LEN>() {
            Some((seq, rest)) => Ok(Repair {
                original_seq: u64::from_be_bytes(*seq),
                payload: rest,
            }),
            None => Err(DecodeError::BadBodyLength {
                len: payload.len(),
                expected: REPAIR_PREFIX_LEN,
            }),
        }
    }

    /// Writes the prefix naming `original_seq` into the first
    /// [`REPAIR_PREFIX_LEN`] bytes of `buf` (the original payload goes
    /// right after it).
    pub fn emit_prefix(original_seq: u64, buf: &mut [u8]) -> Result<(), EncodeError> {
        let have = buf.len();
        let Some(out) = buf.first_chunk_mut::<REPAIR_PREFIX_LEN>() else {
            return Err(EncodeError::BufferTooSmall {
                needed: REPAIR_PREFIX_LEN,
                have,
            });
        };
        *out = original_seq.to_be_bytes();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nack_round_trips_and_rejects_bad_bodies() {
        let n = Nack {
            first_path_seq: u32::MAX - 1,
            count: 3,
        };
        let mut buf = [0xffu8; Nack::LEN];
        n.emit(&mut buf).unwrap();
        assert_eq!(&buf[6..], &[0, 0]);
        assert_eq!(Nack::parse(&buf), Ok(n));
        // Wrapping: covers MAX-1, MAX, 0; not 1 nor MAX-2.
        assert!(n.covers(u32::MAX - 1) && n.covers(u32::MAX) && n.covers(0));
        assert!(!n.covers(1) && !n.covers(u32::MAX - 2));
        assert!(Nack::parse(&buf[..7]).is_err());
        let mut long = [0u8; 9];
        long[..8].copy_from_slice(&buf);
        assert!(Nack::parse(&long).is_err());
        for bad in [0u16, MAX_NACK_RUN + 1, u16::MAX] {
            buf[4..6].copy_from_slice(&bad.to_be_bytes());
            assert_eq!(
                Nack::parse(&buf),
                Err(DecodeError::BadField { field: "count" })
            );
        }
        assert!(n.emit(&mut [0u8; 7]).is_err());
    }

    #[test]
    fn repair_prefix_round_trips() {
        let mut buf = [0u8; 12];
        Repair::emit_prefix(0x0102_0304_0506_0708, &mut buf).unwrap();
        buf[8..].copy_from_slice(&[9, 9, 9, 9]);
        let r = Repair::parse(&buf).unwrap();
        assert_eq!(r.original_seq, 0x0102_0304_0506_0708);
        assert_eq!(r.payload, &[9, 9, 9, 9]);
        assert!(Repair::parse(&buf[..7]).is_err());
        assert_eq!(Repair::parse(&buf[..8]).unwrap().payload, &[] as &[u8]);
        assert!(Repair::emit_prefix(1, &mut [0u8; 7]).is_err());
    }
}
