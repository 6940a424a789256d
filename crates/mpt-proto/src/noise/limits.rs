//! The token buckets in front of the responder's Diffie-Hellman work:
//! one per source address (after the cookie check, so the address is
//! proven under load) and one for the whole responder, in WireGuard's
//! shape. Kept apart from the handshake itself because the daemon sizes
//! them from its config (`[daemon] handshake_*`) and also asks them
//! before checking a Noise response.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::NoiseError;
use crate::crypto::{RateLimiter, SourceLimiter};

/// The token buckets that bound the responder's Diffie-Hellman work
/// (WireGuard's shape: per source address after the cookie check, plus a
/// responder-wide bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeLimits {
    /// Handshake messages per second from one source address (default 20).
    pub per_source_per_sec: u32,
    /// Burst per source address (default 10: a NAT with a few clients
    /// behind it restarting at once).
    pub per_source_burst: u32,
    /// Source addresses tracked (default 4096, ~100 bytes each; the least
    /// recently used goes when full, so a million sources hold no more).
    pub source_table: usize,
    /// Handshake messages per second for the whole responder (default
    /// 500: each costs two to four X25519 operations, ~25-50 us each, so
    /// at most ~10 % of a core).
    pub global_per_sec: u32,
    /// Burst of the whole responder (default 250).
    pub global_burst: u32,
}

impl Default for HandshakeLimits {
    fn default() -> Self {
        HandshakeLimits {
            per_source_per_sec: 20,
            per_source_burst: 10,
            source_table: 4096,
            global_per_sec: 500,
            global_burst: 250,
        }
    }
}

/// A source address as the limiter keys it: the IPv4 address, or the
/// IPv6 /64 (one host can use a whole /64); never the port, which a
/// sender rotates at will.
pub fn source_key(src: &SocketAddr) -> IpAddr {
    match src.ip() {
        IpAddr::V6(a) => {
            let o = a.octets();
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&o[..8]);
            IpAddr::V6(k.into())
        }
        v4 => v4,
    }
}

/// The per-source and global buckets (see [`HandshakeLimits`]).
#[derive(Debug, Clone)]
pub struct HandshakeLimiter {
    sources: SourceLimiter<IpAddr>,
    global: RateLimiter,
}

impl HandshakeLimiter {
    /// Full buckets for `limits`.
    pub fn new(limits: HandshakeLimits) -> HandshakeLimiter {
        HandshakeLimiter {
            sources: SourceLimiter::new(
                limits.per_source_per_sec,
                limits.per_source_burst,
                limits.source_table,
            ),
            global: RateLimiter::new(limits.global_per_sec, limits.global_burst),
        }
    }

    /// Takes a token from `src`'s bucket, then from the global one (a
    /// source over its limit spends nothing of the global budget).
    pub fn admit(&mut self, src: &SocketAddr, now: Instant) -> Result<(), NoiseError> {
        if !self.sources.allow(source_key(src), now) {
            return Err(NoiseError::SourceLimited);
        }
        if !self.global.allow(now) {
            return Err(NoiseError::Overloaded);
        }
        Ok(())
    }

    /// Source addresses in the table.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }
}
