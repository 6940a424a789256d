//! SIGINT/SIGTERM as a stop flag.
//!
//! The handler only stores to an atomic (async-signal-safe). Every loop of
//! the emulator and the self-test polls the flag with a bounded wait, so a
//! signal ends the run through the normal return path: reports are printed
//! and namespace guards are dropped. No `SA_RESTART`, so a blocking `ppoll`
//! returns at once.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM and returns the flag.
pub fn install() -> nix::Result<&'static AtomicBool> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only touches an atomic.
        unsafe { sigaction(sig, &action) }?;
    }
    Ok(&STOP)
}

/// The flag, without installing anything (for tests and library callers).
pub fn flag() -> &'static AtomicBool {
    &STOP
}
