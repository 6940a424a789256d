//! Handshake counters: plain numbers the daemon adds up and puts in
//! `mpt status` and the metrics.
//!
//! Each `Initiator`, `Responder` (both in `handshake.rs`) and `Keyring`
//! (`timers.rs`) counts what it did; [`HandshakeCounters::add`] sums
//! them per connection or per daemon. Every refusal is counted by reason,
//! so that a flood, a misconfigured peer and an attack look different.

use super::NoiseError;

/// What the public-key handshake did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandshakeCounters {
    /// Initiations built and handed to the caller to send.
    pub initiations_sent: u64,
    /// Initiations that passed mac1 (and, under load, mac2) and so reached
    /// the Noise layer: the only ones that cost Diffie-Hellman work or
    /// created handshake state.
    pub initiations_processed: u64,
    /// Responses built (one per accepted initiation).
    pub responses_sent: u64,
    /// Authentic responses received (each completes a handshake).
    pub responses_received: u64,
    /// Handshakes that produced keys, on either side.
    pub completed: u64,
    /// Key pairs that replaced a previous one (rekeys), counted by the
    /// `Keyring`.
    pub rekeys: u64,
    /// Key pairs given up at their hard limit (time or messages) before a
    /// new handshake replaced them.
    pub expired: u64,
    /// Cookie replies built (responder under load).
    pub cookies_sent: u64,
    /// Authentic cookie replies received.
    pub cookies_received: u64,
    /// Refusals, by reason.
    pub refused: RefusedCounters,
}

/// Refused handshake messages, by reason (see [`NoiseError`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefusedCounters {
    /// Wrong length, header, type or flags.
    pub malformed: u64,
    /// mac1 did not verify: the sender does not know our public key.
    pub mac1: u64,
    /// Under load, mac2 was present but not valid (a stale cookie, or
    /// another source address); answered with a new cookie.
    pub stale_mac2: u64,
    /// The Noise layer refused the message (wrong keys or PSK, altered).
    pub decrypt: u64,
    /// Authentic initiation from a key no connection names.
    pub unknown_peer: u64,
    /// Initiation timestamp not newer than the last accepted one.
    pub replay: u64,
    /// Initiations from one peer faster than accepted.
    pub rate_limited: u64,
    /// Handshake messages over their source address's rate (after mac1
    /// and mac2, before Diffie-Hellman).
    pub source_limited: u64,
    /// Handshake messages over the responder-wide rate.
    pub overloaded: u64,
    /// Response or cookie reply to no pending handshake.
    pub unknown_index: u64,
    /// Cookie reply that did not decrypt.
    pub bad_cookie_reply: u64,
}

impl HandshakeCounters {
    /// Counts a refusal under its reason. Errors that are not about the
    /// received message (the caller's buffer, the crypto library) count
    /// nowhere here: they are the caller's to report.
    pub fn refuse(&mut self, e: &NoiseError) {
        let r = &mut self.refused;
        match e {
            NoiseError::BadLength { .. }
            | NoiseError::Malformed(_)
            | NoiseError::UnexpectedHeader { .. } => r.malformed += 1,
            NoiseError::Mac1 => r.mac1 += 1,
            NoiseError::Decrypt => r.decrypt += 1,
            NoiseError::UnknownPeer => r.unknown_peer += 1,
            NoiseError::Replay => r.replay += 1,
            NoiseError::RateLimited => r.rate_limited += 1,
            NoiseError::SourceLimited => r.source_limited += 1,
            NoiseError::Overloaded => r.overloaded += 1,
            NoiseError::UnknownIndex { .. } => r.unknown_index += 1,
            NoiseError::BadCookieReply => r.bad_cookie_reply += 1,
            NoiseError::Encode(_) | NoiseError::Crypto => {}
        }
    }

    /// Adds `other` into `self` (summing per-object counters).
    pub fn add(&mut self, other: &HandshakeCounters) {
        self.initiations_sent += other.initiations_sent;
        self.initiations_processed += other.initiations_processed;
        self.responses_sent += other.responses_sent;
        self.responses_received += other.responses_received;
        self.completed += other.completed;
        self.rekeys += other.rekeys;
        self.expired += other.expired;
        self.cookies_sent += other.cookies_sent;
        self.cookies_received += other.cookies_received;
        let (r, o) = (&mut self.refused, &other.refused);
        r.malformed += o.malformed;
        r.mac1 += o.mac1;
        r.stale_mac2 += o.stale_mac2;
        r.decrypt += o.decrypt;
        r.unknown_peer += o.unknown_peer;
        r.replay += o.replay;
        r.rate_limited += o.rate_limited;
        r.source_limited += o.source_limited;
        r.overloaded += o.overloaded;
        r.unknown_index += o.unknown_index;
        r.bad_cookie_reply += o.bad_cookie_reply;
    }
}
