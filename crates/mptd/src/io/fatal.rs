//! Ending the daemon when it can no longer do its job.
//!
//! Some failures cannot be worked around from inside: the tun device was
//! deleted (`ip link del`, a network manager) and every read and write on
//! it now fails at once. Carrying on would spin a worker at full speed and
//! keep a daemon alive that forwards nothing, where systemd cannot see
//! anything wrong. A worker that meets such a failure calls [`fatal`]: the
//! cause is logged once and kept, SIGTERM is sent to the process so the
//! main thread (waiting for signals) shuts everything down as usual, and
//! [`cause`] then makes `mptd` exit with status 1, so `Restart=on-failure`
//! brings it back.

use std::io;
use std::sync::OnceLock;

static CAUSE: OnceLock<String> = OnceLock::new();

/// Ends the daemon: logs `cause` (the first one only), records it for the
/// exit status and asks the main thread to shut down.
pub fn fatal(cause: String) {
    if CAUSE.set(cause.clone()).is_ok() {
        tracing::error!(cause = %cause, "fatal: shutting down");
        if let Err(e) = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::SIGTERM) {
            // Cannot happen for our own pid; say so rather than hang.
            tracing::error!(error = %e, "cannot signal the main thread");
        }
    }
}

/// Why the daemon is ending, if a worker called [`fatal`].
pub fn cause() -> Option<&'static str> {
    CAUSE.get().map(String::as_str)
}

/// Whether a tun read or write error means the device is gone for good
/// (deleted or detached), rather than a passing condition.
pub fn tun_is_gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EBADFD | libc::ENODEV | libc::ENXIO | libc::EBADF | libc::EIO)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_versus_passing_errors() {
        assert!(tun_is_gone(&io::Error::from_raw_os_error(libc::EBADFD)));
        assert!(tun_is_gone(&io::Error::from_raw_os_error(libc::ENODEV)));
        assert!(!tun_is_gone(&io::Error::from_raw_os_error(libc::EAGAIN)));
        assert!(!tun_is_gone(&io::Error::from_raw_os_error(libc::EINTR)));
        assert!(!tun_is_gone(&io::Error::from_raw_os_error(libc::ENOBUFS)));
        assert!(!tun_is_gone(&io::Error::other("no os error")));
    }
}
