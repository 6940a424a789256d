//! What the data plane and the control loop share.
//!
//! The workers and the control loop never call each other: the control
//! loop publishes (path tables, eligible paths, models, timing) and the
//! workers read once per batch; the workers count and queue control
//! datagrams, and the control loop reads. Everything they meet on is
//! declared here, so neither side needs to import the other.
//!
//! The hot path never takes a lock per packet. Workers read what they need
//! once per batch (eligible-path mask, weights, remote address) and add to
//! counters once per batch. Only the control loop writes liveness-derived
//! state; only a path's receive worker writes its receive summary.

pub mod conn;
pub mod counters;
pub mod crypto;
pub mod leg_pin;
pub mod model;
pub mod path;
pub mod plan;
pub mod queue;
pub mod route;
pub mod routing;
pub mod shared_port;
pub mod tx_order;

#[cfg(test)]
pub(crate) mod testing;

pub use crate::sync::Counter;
pub use conn::{
    ConnSet, ConnShared, ConnsAndRouter, HandoverRecord, LastHandover, TxWakes,
    DEFAULT_REORDER_TIMEOUT, REORDER_SLOTS,
};
pub use counters::{CopyCounters, Drops, EqualizeCounters, RepairCounters, TcpCounters, TxStats};
pub use crypto::{ConnCrypto, KeySet, NoiseIds, OLD_KEYS_GRACE, OLD_KEYS_MAX};
pub use path::{PathShared, PathTable, PathView, Remote, NO_OWD};
pub use plan::{PlanSnapshot, PublishedPlan};
pub use queue::{
    control_queues, ControlDatagram, ControlInput, ControlSender, CONTROL_DATAGRAM_MAX,
    CONTROL_QUEUE, HANDSHAKES_PER_ROUND, HANDSHAKE_QUEUE, HANDSHAKE_WAKE, SHARED_INITIATION,
};
