//! systemd readiness notification (`Type=notify`).
//!
//! mptd reports `READY=1` once the tunnel can carry traffic: the tun device
//! and sockets exist and every connection has a usable path, or after a
//! bounded wait (a peer that is down must not fail the service start); the
//! `STATUS=` line says which. Without `NOTIFY_SOCKET` (not started by
//! systemd) nothing is sent.

/// Sends `READY=1` and a status line to systemd, if it asked.
pub fn ready(status: &str) {
    tracing::info!(status, "ready");
    send(&format!("READY=1\nSTATUS={status}"));
}

/// Sends `STOPPING=1` to systemd, if it asked.
pub fn stopping() {
    send("STOPPING=1");
}

fn send(message: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sock = match std::os::unix::net::UnixDatagram::unbound() {
        Ok(s) => s,
        Err(_) => return,
    };
    let bytes = path.as_encoded_bytes();
    let result = if let Some(abstract_name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name)
            .and_then(|a| sock.send_to_addr(message.as_bytes(), &a))
    } else {
        sock.send_to(message.as_bytes(), &path)
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, "sd_notify failed");
    }
}
