//! What operators touch: the unix control socket, the remote command
//! port, Prometheus metrics and systemd readiness (the notification itself
//! is in [`crate::io::notify`]). These read the shared state in
//! [`crate::plane`] through one [`source::StatusSource`] and send commands
//! to [`crate::control`]; the control socket and the command port answer
//! `status` with the document [`status`] builds.

pub mod cmd_port;
pub mod control_socket;
pub mod metrics;
pub mod source;
pub mod status;
#[cfg(test)]
pub(crate) mod testing;
