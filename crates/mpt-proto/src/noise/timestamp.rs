//! The initiation's TAI64N timestamp: what lets a responder refuse a
//! replayed initiation without keeping state per handshake.
//!
//! 12 bytes, big-endian: seconds as a TAI64 label (2^62 + seconds since
//! the Unix epoch; leap seconds are ignored, as only the order matters)
//! and nanoseconds. Big-endian makes byte order the numeric order, so
//! comparing two timestamps is comparing their bytes.

use std::time::Duration;

use super::messages::TIMESTAMP_LEN;

/// TAI64 label of the Unix epoch.
const TAI64_EPOCH: u64 = 1 << 62;

/// A TAI64N timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tai64n([u8; TIMESTAMP_LEN]);

impl Tai64n {
    /// The timestamp of a wall-clock time, given as the time since the
    /// Unix epoch (the daemon passes
    /// `SystemTime::now().duration_since(UNIX_EPOCH)`).
    pub fn from_unix(since_epoch: Duration) -> Tai64n {
        let mut b = [0u8; TIMESTAMP_LEN];
        b[..8].copy_from_slice(
            &TAI64_EPOCH
                .saturating_add(since_epoch.as_secs())
                .to_be_bytes(),
        );
        b[8..].copy_from_slice(&since_epoch.subsec_nanos().to_be_bytes());
        Tai64n(b)
    }

    /// The raw bytes, as carried in an initiation.
    pub const fn to_bytes(self) -> [u8; TIMESTAMP_LEN] {
        self.0
    }

    /// From the raw bytes of a decrypted initiation.
    pub const fn from_bytes(bytes: [u8; TIMESTAMP_LEN]) -> Tai64n {
        Tai64n(bytes)
    }

    /// The next representable timestamp (one nanosecond later, carrying
    /// into the seconds): what an initiator sends when its clock has not
    /// moved since its previous initiation.
    pub fn successor(self) -> Tai64n {
        let mut n = u128::from_be_bytes({
            let mut w = [0u8; 16];
            w[4..].copy_from_slice(&self.0);
            w
        });
        // Nanoseconds stay below 10^9 in timestamps we build; carry at it.
        let nanos = (n & 0xffff_ffff) as u32;
        if nanos >= 999_999_999 {
            n = (n >> 32).saturating_add(1) << 32;
        } else {
            n += 1;
        }
        let w = n.to_be_bytes();
        let mut out = [0u8; TIMESTAMP_LEN];
        out.copy_from_slice(&w[4..]);
        Tai64n(out)
    }
}
