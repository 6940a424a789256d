//! The control client: `mpt status`, `mpt path`, `mpt reload`.
//!
//! mptd listens on a unix socket (default [`DEFAULT_SOCKET`]) speaking JSON
//! lines: one request object per line, one response object per line, every
//! one carrying `"version": 1`. A response is either
//! `{"version":1,"ok":true,...}` or `{"version":1,"ok":false,"error":"..."}`.
//! The protocol itself (requests, responses, the status document) is
//! typed once, in [`mpt_api`], which the daemon uses too.
//!
//! - [`request`] names the requests ([`mpt_api::Request`], the exact bytes
//!   the CLI sends),
//! - [`client`] talks to the socket with 5 s timeouts and turns `ok:false`
//!   into [`client::CtlError::Daemon`],
//! - [`remote`] sends the same requests, signed, to a remote daemon's
//!   command port,
//! - [`status`] renders the status document ([`mpt_api::Status`]) as an
//!   80-column table; every field of the document is optional, so a daemon
//!   with fewer (or more) fields still prints, with `-` for what is
//!   missing (its cells are laid out by `table` and `format`).

pub mod client;
mod format;
pub mod remote;
pub mod request;
pub mod routing;
pub mod status;
mod table;

/// Where mptd listens unless `--socket` or `MPT_SOCKET` says otherwise
/// (the daemon's `[daemon] control` default).
pub const DEFAULT_SOCKET: &str = "/run/mpt/mptd.sock";

/// Version of the control protocol this client speaks (mpt-api's).
pub use mpt_api::CONTROL_VERSION;
