//! A path's part of the status document: addresses, weights, what the
//! daemon measured and believes of it, and its traffic.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::field::nullable;

/// One path of a connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PathStatus {
    /// The path id on the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Time since the state last changed, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_change_ms_ago: Option<f64>,
    /// Time since anything was last received, ms (`null`: nothing yet).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub last_rx_ms_ago: Option<Option<f64>>,
    /// Local address and port (of a learnt path of a shared port: the
    /// address its client sends to).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// Loss of the direction we send in, % (`null`: not measured yet).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<Option<f64>>,
    /// Counted as lossy by the adaptive scheduler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossy: Option<bool>,
    /// The configured (or added) name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// One-way delay above the connection's fastest path, ms.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub owd_ms: Option<Option<f64>>,
    /// The weight the peer asks for.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub peer_weight_in: Option<Option<u16>>,
    /// Queueing delay the peer last measured on the path, ms.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub queue_ms: Option<Option<f64>>,
    /// Estimated capacity of the direction we send in, bit/s.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<Option<u64>>,
    /// The estimate was measured with a standing queue (else it is a
    /// lower bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_confirmed: Option<bool>,
    /// Remote address and port (`null`: not learnt yet).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub remote: Option<Option<String>>,
    /// The host name `remote` was resolved from (absent: an address was
    /// configured, or learnt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_name: Option<String>,
    /// Why `remote_name` did not resolve at its last lookup (absent: it
    /// did). A path whose name never resolved is `down`; one that had an
    /// address keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolve_error: Option<String>,
    /// Minimum RTT, ms.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub rtt_min_ms: Option<Option<f64>>,
    /// Smoothed RTT, ms.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<Option<f64>>,
    /// Bytes received and accepted (UDP payload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    /// Bytes of data and repair datagrams received and accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_data_bytes: Option<u64>,
    /// Data datagrams received and accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_data_packets: Option<u64>,
    /// The lowest recent one-way delay from the peer on this path, above
    /// the lowest of the connection's paths, ms.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Option::is_none")]
    pub rx_owd_ms: Option<Option<f64>>,
    /// Datagrams received and accepted (all types).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_packets: Option<u64>,
    /// Share of the connection's received data bytes recently (0 to 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_share: Option<f64>,
    /// Share of the connection's sent data bytes recently (0 to 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// `up`, `down`, `backup`, `probing` or `suspect`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Changes of the state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_changes: Option<u64>,
    /// Bytes sent (UDP payload).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    /// Bytes of data and repair datagrams sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_data_bytes: Option<u64>,
    /// Data datagrams sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_data_packets: Option<u64>,
    /// Datagrams sent (all types).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_packets: Option<u64>,
    /// `weight_in`: the share asked of the peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight_in: Option<u32>,
    /// `weight_out`: this side's share of outgoing traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight_out: Option<u32>,
    /// `window`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}
