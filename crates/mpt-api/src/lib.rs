//! mpt's control API, typed once for both ends.
//!
//! mptd answers on its control socket (and, signed, on its remote command
//! port) in JSON lines: one request object per line, one response object
//! per line. The daemon produces the requests' answers and the status
//! document; `mpt` (`mpt status`, `mpt path`, `mpt reload`) and the
//! benchmark harness read them. Each side used to describe the protocol on
//! its own (two request types, two `CONTROL_VERSION`s, a status document
//! built from untyped JSON and read back by field name), so nothing but
//! the tests kept them in step. This crate is the one description both
//! sides use:
//!
//! - [`CONTROL_VERSION`], the version every request and response carries;
//! - [`request`]: [`Request`], what a client asks, with the exact object
//!   it sends ([`Request::to_json`]) and the daemon's parser of it
//!   ([`Request::parse`], with the daemon's error messages);
//! - [`response`]: [`Response`], the envelope of every answer, and its
//!   checks;
//! - [`status`]: [`Status`], the status document (`mpt status --json`).
//!
//! The JSON stays exactly what the daemon wrote before the types existed,
//! so that old and new daemons and clients keep talking to each other and
//! scripts reading `mpt status --json` see no change: the same keys, the
//! same nesting, `null` where the daemon had no value, and even the same
//! bytes (the daemon built `serde_json` maps, which sort their keys, so
//! every struct here declares its fields in alphabetical order). The
//! status document is read as leniently as the untyped reader read it: a
//! field an older daemon does not send is `None`, a field a newer daemon
//! adds is kept (see [`status`]).
//!
//! The crate depends on serde alone: the daemon, the command line and any
//! tool can use it without linking the daemon or the protocol crate.

mod field;
pub mod request;
pub mod response;
pub mod status;
mod version;

pub use request::{PathState, Request, RequestError};
pub use response::{Response, ResponseError};
pub use status::Status;
pub use version::CONTROL_VERSION;
