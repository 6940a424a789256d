//! # mpt-proto: the mpt wire format and protocol state machines
//!
//! This crate is sans-IO: it owns no sockets, no tun device, no threads and
//! never reads the clock. Every function that depends on time takes
//! `now: Instant`, which makes the protocol deterministic and testable in
//! virtual time (see the simulation tests in `session/tests.rs`).
//!
//! Modules, from the bytes up:
//!
//! * [`wire`]: the 24-byte header and message bodies; parse/emit into
//!   caller-owned buffers, no allocation, never panics on input. The
//!   header's byte offsets live only there: [`wire::HeaderView`] and
//!   [`wire::HeaderViewMut`] read and write single fields in place, and
//!   [`wire::DecodeError`] / [`wire::EncodeError`] are the codec's errors.
//! * [`error`]: the former home of those two errors, kept as re-exports so
//!   `mpt_proto::error::*` paths still work.
//! * [`seq`]: wrap-around comparison of 32-bit sequence numbers, timestamps
//!   and one-way delays, one definition for every such test.
//! * [`crypto`]: the PSK handshake, session keys, AEAD-sealed datagrams,
//!   the replay window, rate limits, and the remote command port's
//!   authentication ([`crypto::cmdauth`]).
//! * [`noise`]: the public-key handshake (Noise IK) with mac1/mac2 cookies
//!   and key rotation.
//! * [`control`]: reliable delivery of control messages (path add/remove)
//!   between two sessions.
//! * [`flow`]: inner flow classification (5-tuple hash, DSCP) and the
//!   sender's per-bucket table that links each data packet to the previous
//!   one of its flow, so the receiver can resequence per flow.
//! * [`reorder`]: the receiver's fixed resequencing window, per flow or in
//!   global order, with loss proven by the paths' order.
//! * [`repair`]: which holes a receiver asks to be repaired, and the
//!   sender's copies to answer from.
//! * [`path`]: one path's liveness, keepalive and dead timer, RTT, loss,
//!   delivery rate and one-way delay. Liveness is [`path::Liveness`]:
//!   `Probing` until the path is heard, `Up`, `Suspect` when a path
//!   carrying data falls silent for a few RTTs (no new data, probed fast),
//!   and `Down` after the dead timer or when its link goes; operators see
//!   [`path::PathState`], which adds `Backup` for a live path held in
//!   reserve.
//! * [`sched`]: per-packet path choice behind one [`sched::Scheduler`]
//!   trait: [`sched::Weighted`] (fixed
//!   shares), [`sched::Adaptive`] (each packet where it arrives, or for
//!   full-size ones leaves, first, by measured capacity and delay),
//!   [`sched::Flowlets`] (a flow stays on its path while that costs
//!   nothing) and [`sched::Redundancy`] (real-time packets also on a second
//!   path). One instance per data-plane worker, so no lock is taken per
//!   packet.
//! * [`timer`]: the session's timer kinds: every wake-up has a reason.
//! * [`session`]: the per-connection state machine tying paths together;
//!   the daemon's control loop drives it through `handle_*` (input) and
//!   `poll_*` (output), as documented on [`Session`], and takes its
//!   receive timing from [`session::timing`].

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

pub mod checksum;
pub mod control;
pub mod crypto;
pub mod error;
pub mod flow;
pub mod mss;
pub mod noise;
pub mod path;
pub mod reorder;
pub mod repair;
pub mod sched;
pub mod seq;
pub mod session;
#[cfg(test)]
mod test_clock;
pub mod timer;
pub mod wire;

pub use session::{
    timestamp_us, DataSummary, DropReason, Event, Payload, Received, Session, SessionConfig,
    SessionError, Transmit,
};
pub use wire::{DecodeError, EncodeError};
