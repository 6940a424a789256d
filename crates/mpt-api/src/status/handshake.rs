//! The public-key (Noise IK) handshake's counters: per connection in its
//! `session`, and for the daemon's responder at the top of the document.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What the public-key handshake did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandshakeStats {
    /// Handshakes that produced keys, on either side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<u64>,
    /// Authentic cookie replies received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookies_received: Option<u64>,
    /// Cookie replies built (responder under load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookies_sent: Option<u64>,
    /// Key pairs given up at their hard limit (time or messages) before a
    /// new handshake replaced them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expired: Option<u64>,
    /// Initiations that passed mac1 (and, under load, mac2) and so reached
    /// the Noise layer: the only ones that cost Diffie-Hellman work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initiations_processed: Option<u64>,
    /// Initiations built and sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initiations_sent: Option<u64>,
    /// Refusals, by reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<HandshakeRefusals>,
    /// Key pairs that replaced a previous one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rekeys: Option<u64>,
    /// Authentic responses received (each completes a handshake).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub responses_received: Option<u64>,
    /// Responses built (one per accepted initiation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub responses_sent: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Refused handshake messages, by reason. The daemon-wide object (the
/// document's `noise`) has three reasons more than a connection's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HandshakeRefusals {
    /// Cookie replies that did not decrypt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_cookie_reply: Option<u64>,
    /// The Noise layer refused the message (wrong keys or PSK, altered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decrypt: Option<u64>,
    /// Daemon-wide only: the OS random generator failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entropy: Option<u64>,
    /// Daemon-wide only: initiations ignored because our own, to the same
    /// peer, was in flight and wins the tie-break.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_race: Option<u64>,
    /// mac1 did not verify: the sender does not know our public key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac1: Option<u64>,
    /// Wrong length, header, type or flags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<u64>,
    /// Handshake messages over the responder-wide rate (after mac1 and
    /// mac2, before Diffie-Hellman).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overloaded: Option<u64>,
    /// Initiations from one peer faster than accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limited: Option<u64>,
    /// Initiation timestamp not newer than the last accepted one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<u64>,
    /// Handshake messages over their source address's rate (after mac1
    /// and mac2, before Diffie-Hellman).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_limited: Option<u64>,
    /// Under load, mac2 present but not valid (a stale cookie, or another
    /// source address); answered with a new cookie.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_mac2: Option<u64>,
    /// Responses or cookie replies to no pending handshake.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_index: Option<u64>,
    /// Authentic initiations from a key no connection names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_peer: Option<u64>,
    /// Daemon-wide only: authentic initiations whose key names another
    /// connection than the one whose socket received them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrong_connection: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}
