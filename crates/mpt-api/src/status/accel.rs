//! The `accel` section: TCP acceleration's flows, bytes and legs
//! (docs/ACCELERATION.md). Absent when `[tunnel] accel_port` is not set.

use serde::{Deserialize, Serialize};

/// TCP acceleration's counters, for both ends of this daemon (flows it
/// intercepted and flows it opened for its peers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccelStats {
    /// Bytes from the destinations towards the clients.
    pub bytes_down: u64,
    /// Bytes from the clients towards the destinations.
    pub bytes_up: u64,
    /// Leg messages that were not frames, or legs from no peer's address.
    pub bad_frames: u64,
    /// Intercepted flows refused for want of a leg, or over the limit.
    pub dropped: u64,
    /// Flows since start.
    pub flows: u64,
    /// Flows in progress.
    pub flows_active: u64,
    /// Leg connects that failed.
    pub leg_failures: u64,
    /// Legs carrying a flow now.
    pub legs_busy: u64,
    /// Legs idle now (warm, waiting for a flow).
    pub legs_idle: u64,
    /// Legs opened since start.
    pub legs_opened: u64,
    /// Flows whose destination refused, was unreachable or silent.
    pub refused: u64,
    /// Data bytes this daemon sent on pinned legs, by path (the paths
    /// that carried anything, in id order): how the leg sets spread the
    /// flows over the paths, in this daemon's sending direction.
    pub path_bytes: Vec<AccelPathBytes>,
    /// Flows aborted by a reset.
    pub resets: u64,
}

/// One path's share of the pinned legs' bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccelPathBytes {
    /// The path's id: its place among its connection's paths in the
    /// config, from 0 (the same at both ends).
    pub path: u8,
    /// Bytes sent on legs pinned to it.
    pub bytes: u64,
}
