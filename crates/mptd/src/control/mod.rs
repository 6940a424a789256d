//! The control plane: one loop that owns every connection's sans-IO
//! [`mpt_proto::Session`] and key exchange, and applies path changes from
//! the kernel, the peer and the operator.
//!
//! It never imports the data plane: it learns what the workers saw from
//! the counters and queues in [`crate::plane`], and publishes what they
//! need there.

mod apply;
pub mod auth_warning;
pub mod clients;
pub mod command;
pub mod conn_keys;
pub mod control_loop;
pub mod handshake;
mod hook_events;
mod initiate;
pub mod keys;
pub mod links;
pub mod names;
pub mod net_table;
pub mod noise;
pub mod pathset;
pub mod peer;
mod publish;
pub mod routing;
pub mod routing_plan;
mod transmit;
