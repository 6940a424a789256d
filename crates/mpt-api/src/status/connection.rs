//! A connection's part of the status document: its identity, session,
//! counters by subsystem and paths.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::field::nullable;
use crate::status::handshake::HandshakeStats;
use crate::status::path::PathStatus;

/// One connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Connection {
    /// Datagrams and packets dropped, by reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops: Option<ConnectionDrops>,
    /// Delay equalisation: data held back before the resequencer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equalize: Option<Equalize>,
    /// Handovers of our traffic off failed paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handover: Option<Handover>,
    /// The connection id on the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// The configured name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The paths, in the configuration's order (paths being removed are
    /// not listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<PathStatus>>,
    /// What redundancy (second copies) did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redundancy: Option<Redundancy>,
    /// The resequencer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder: Option<Reorder>,
    /// Loss repair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
    /// Encryption and keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<Session>,
    /// What the transmit side did to TCP segments (MSS clamping).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<Tcp>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Connection {
    /// The paths (none when the document has no list).
    pub fn paths(&self) -> &[PathStatus] {
        self.paths.as_deref().unwrap_or_default()
    }
}

/// A connection's drops, by reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnectionDrops {
    /// Failed authentication (sealed messages we cannot open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<u64>,
    /// Noise initiations on the connection's own port whose mac1 was not
    /// made for our public key (dropped before the control loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_mac1: Option<u64>,
    /// Unknown protocol version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_version: Option<u64>,
    /// Control datagrams dropped because the control loop was busy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_queue_full: Option<u64>,
    /// Authentic Inits that were not provably fresh: answered with a
    /// Challenge, no keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake_challenged: Option<u64>,
    /// Handshake messages refused by the rate limiter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake_rate_limited: Option<u64>,
    /// Authentic handshake messages carrying our own instance id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake_reflected: Option<u64>,
    /// Inner packets whose source address is none of the peer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner_source: Option<u64>,
    /// Anything else that did not decode (type, flags, body, inner packet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<u64>,
    /// Tun packets with no usable path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_path: Option<u64>,
    /// Tun packets for a path whose remote address is not known yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_remote: Option<u64>,
    /// Tun packets dropped because no session keys are established yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_session: Option<u64>,
    /// Replayed sequence numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<u64>,
    /// Datagrams the kernel refused to send.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_error: Option<u64>,
    /// Shorter than the header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub too_short: Option<u64>,
    /// Failed tun writes of received data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tun_write: Option<u64>,
    /// Control messages on a connection without a key (never obeyed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unauthenticated_control: Option<u64>,
    /// Header names another connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_connection: Option<u64>,
    /// Message types this version does not handle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<u64>,
    /// Cleartext datagrams from another address or port than the path's
    /// configured remote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrong_source: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Delay equalisation: data of fast paths held until the slowest path's
/// delay, so that it reaches the resequencer in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Equalize {
    /// What full-size datagrams are held to, above the fastest path (ms;
    /// every usable far path counted, whether it brings data or not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulk_hold_ms: Option<f64>,
    /// Data datagrams held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<u64>,
    /// Their holds summed, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_ms: Option<f64>,
    /// What data is held to, above the fastest path (ms; 0: no hold).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_ms: Option<f64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Handovers of our traffic off failed paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Handover {
    /// Handovers completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The latest (`null`: none yet).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub last: Option<Option<LastHandover>>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The latest handover, with path names as they were then.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LastHandover {
    /// The path that left service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Time without a path carrying data, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_ms: Option<f64>,
    /// How long ago it ended, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms_ago: Option<f64>,
    /// The path that carried data next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Redundancy: second copies of packets on another path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Redundancy {
    /// Copies that arrived before their original (what redundancy saved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies_first: Option<u64>,
    /// Copies sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies_sent: Option<u64>,
    /// Their bytes (UDP payload): the price of redundancy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_bytes: Option<u64>,
    /// Second arrivals of a copied packet, dropped as expected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    /// `auto`, `off` or `all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The resequencer, which puts data from several paths back in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Reorder {
    /// Duplicates dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    /// Packets delivered ahead of missing lower sequence numbers, because
    /// their flow did not wait for those.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_bypass: Option<u64>,
    /// Gaps given up by timeout or window overflow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gaps_skipped: Option<u64>,
    /// How long a gap is waited for at least, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<f64>,
    /// Packets held and delivered later.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<u64>,
    /// Packets held at this moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_now: Option<u64>,
    /// How long the packets counted in `held` were held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldTimes>,
    /// Packets delivered in order on arrival.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_order: Option<u64>,
    /// Packets that came after their gap was given up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<u64>,
    /// How long the oldest packet held now has waited, ms (0: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_hold_ms: Option<f64>,
    /// Window resets (peer restart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resets: Option<u64>,
    /// Spread of the one-way delays of the paths that bring data, slowest
    /// less fastest, ms (`null`: fewer than two such paths).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub spread_ms: Option<Option<f64>>,
    /// The gap timeout, set from the paths' RTTs, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// The resequencer's hold histogram: `counts[k]` packets were held less
/// than `le_ms[k]` and at least the previous limit; the last limit is
/// `null` (no limit).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HoldTimes {
    /// Packets per bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<Vec<u64>>,
    /// Each bucket's upper limit, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub le_ms: Option<Vec<Option<u64>>>,
    /// The longest hold, ms (to the microsecond).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<f64>,
    /// All holds added up, ms (to the microsecond).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_ms: Option<f64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Loss repair: holes asked for again, and the peer's requests answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Repair {
    /// Holes while a queue stood: left to TCP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_holes: Option<u64>,
    /// Copies of datagrams that had arrived after all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    /// Loss repair is on (`repair` in the config).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Requested datagrams no longer (or never) kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
    /// Datagrams that arrived after their repair was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needless: Option<u64>,
    /// The peer's requests received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_requests: Option<u64>,
    /// Copies received and delivered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// Holes that filled within the path's reorder window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered_holes: Option<u64>,
    /// Requests sent for holes judged random.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested: Option<u64>,
    /// Datagrams those requests named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_datagrams: Option<u64>,
    /// Copies sent in answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<u64>,
    /// Holes not asked for (request budget spent, run too long).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unrequested: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// What the transmit side did to the TCP segments it read from tun.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tcp {
    /// SYNs (and SYN-ACKs) whose MSS option was lowered to fit the tunnel
    /// MTU (`[tunnel] mss_clamp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mss_clamped: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Encryption and keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Session {
    /// The AEAD's name (`null`: no key).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub cipher: Option<Option<String>>,
    /// The connection has a key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Session keys are in place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub established: Option<bool>,
    /// `none`, `psk` or `noise_ik` (the public-key handshake).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake: Option<String>,
    /// Handshakes completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshakes: Option<u64>,
    /// Age of the current keys, s (`null`: none).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub key_age_s: Option<Option<f64>>,
    /// The public-key handshake's counters (`null`: not `noise_ik`).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub noise: Option<Option<HandshakeStats>>,
    /// Keys renewed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rekeys: Option<u64>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}
