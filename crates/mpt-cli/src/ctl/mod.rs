//! The control client: `mpt status`, `mpt path`, `mpt reload`.
//!
//! mptd listens on a unix socket (default [`DEFAULT_SOCKET`]) speaking JSON
//! lines: one request object per line, one response object per line, every
//! one carrying `"version": 1`. A response is either
//! `{"version":1,"ok":true,...}` or `{"version":1,"ok":false,"error":"..."}`.
//!
//! - [`request`] builds the request objects (the exact bytes the CLI sends),
//! - [`client`] talks to the socket with 5 s timeouts and turns `ok:false`
//!   into [`client::CtlError::Daemon`],
//! - [`status`] renders the status document as an 80-column table; it reads
//!   the document as untyped JSON so that a daemon with fewer (or more)
//!   fields still prints, with `-` for what is missing.

pub mod client;
pub mod remote;
pub mod request;
pub mod status;

/// Where mptd listens unless `--socket` or `MPT_SOCKET` says otherwise
/// (the daemon's `[daemon] control` default).
pub const DEFAULT_SOCKET: &str = "/run/mpt/mptd.sock";

/// Version of the control protocol this client speaks.
pub const CONTROL_VERSION: u64 = 1;
