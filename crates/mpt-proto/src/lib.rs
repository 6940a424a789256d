//! # mpt-proto: the mpt wire format and protocol state machines
//!
//! This crate is sans-IO: it owns no sockets, no tun device, no threads and
//! never reads the clock. Every function that depends on time takes
//! `now: Instant`, which makes the protocol deterministic and testable in
//! virtual time (see the simulation tests in `session/tests.rs`).
//!
//! * [`wire`]: the 24-byte header and message bodies; parse/emit into
//!   caller-owned buffers, no allocation, never panics on input.
//! * [`flow`]: inner flow classification (5-tuple hash, DSCP) and the
//!   sender's per-bucket table that links each data packet to the previous
//!   one of its flow, so the receiver can resequence per flow.
//! * [`reorder`]: the receiver's fixed resequencing window, per flow or in
//!   global order.
//! * [`path`]: liveness (probing / up / down), keepalive and dead timer,
//!   RTT and loss estimation of one path.
//! * [`sched`]: per-packet path choice behind one [`sched::Scheduler`]
//!   trait ([`sched::Weighted`], [`sched::Adaptive`]); one instance per
//!   data-plane worker, so no lock is taken per packet.
//! * [`session`]: the per-connection state machine tying paths together;
//!   the daemon's control loop drives it through `handle_*` (input) and
//!   `poll_*` (output), as documented on [`Session`], and takes its
//!   receive timing from [`session::timing`].

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

pub mod control;
pub mod crypto;
pub mod error;
pub mod flow;
pub mod noise;
pub mod path;
pub mod reorder;
pub mod repair;
pub mod sched;
pub mod session;
pub mod timer;
pub mod wire;

pub use error::{DecodeError, EncodeError};
pub use session::{
    timestamp_us, DataSummary, DropReason, Event, Payload, Received, Session, SessionConfig,
    SessionError, Transmit,
};
