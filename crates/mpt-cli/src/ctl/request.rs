//! Requests to mptd: [`mpt_api`]'s typed requests, which the daemon
//! parses with the same crate, under the path this crate's callers use.

pub use mpt_api::request::{PathState, Request};
