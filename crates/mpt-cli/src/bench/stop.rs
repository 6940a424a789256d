//! Stopping a run: SIGINT/SIGTERM only set a flag (see
//! `mpt_emu::signal`), and every wait of the bench polls it through
//! [`check_stop`] or [`sleep`], which end the run with [`Interrupted`]; the
//! guards then tear the testbed down on the way out. A leaf module, so that
//! every part of the bench can wait without importing the testbed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Marker error: the run was interrupted by SIGINT/SIGTERM.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// `Err(Interrupted)` once the stop flag is set.
pub fn check_stop(stop: &AtomicBool) -> anyhow::Result<()> {
    if stop.load(Ordering::Relaxed) {
        Err(Interrupted.into())
    } else {
        Ok(())
    }
}

/// Sleeps `d` in small steps, returning early with [`Interrupted`].
pub fn sleep(d: Duration, stop: &AtomicBool) -> anyhow::Result<()> {
    let end = Instant::now() + d;
    loop {
        check_stop(stop)?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}
