//! The protocol's version, which every request and response carries.

/// Version of the request/response protocol: every request and response
/// carries it as `"version"`, and either side refuses another.
pub const CONTROL_VERSION: u64 = 1;
