//! What operators touch: the unix control socket, the remote command
//! port, Prometheus metrics and systemd readiness (the notification itself is in [`crate::io::notify`]). These read the shared
//! state in [`crate::plane`] and send commands to [`crate::control`].

pub mod cmd_port;
pub mod control_socket;
pub mod metrics;
