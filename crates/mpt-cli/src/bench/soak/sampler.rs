//! Samples the concentrator once a second on a thread of its own: RSS
//! and open fds from /proc (of whichever server process runs now), and
//! from its status the `unknown_session` counter and the clients up. The
//! fault runner tells it the server's pid and process number after a
//! restart.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::verdict::Sample;
use crate::bench::clients::bed::count_up;
use crate::bench::clients::report::proc_mem;
use crate::bench::testbed::mptd_status;

/// Open descriptors of `pid`.
pub fn fd_count(pid: u32) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(dir.count() as u64)
}

/// The server process being sampled, updated on a restart.
#[derive(Debug, Default)]
pub struct Target {
    pub pid: AtomicU32,
    pub incarnation: AtomicUsize,
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    pub samples: Arc<Mutex<Vec<Sample>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    pub fn start(target: Arc<Target>, control: PathBuf, paths: usize, t0: Instant) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (st, out) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                let next = Instant::now() + Duration::from_secs(1);
                let pid = target.pid.load(Ordering::Relaxed);
                let status = mptd_status(&control).ok();
                let s = Sample {
                    t: t0.elapsed().as_secs_f64(),
                    incarnation: target.incarnation.load(Ordering::Relaxed),
                    rss_kib: proc_mem(pid).map(|m| m.rss_kib),
                    fds: fd_count(pid),
                    unknown_session: status
                        .as_ref()
                        .and_then(|s| s.shared_port.clone().flatten()?.unknown_session),
                    up: status.as_ref().map(|s| count_up(s, paths)),
                };
                if let Ok(mut v) = out.lock() {
                    v.push(s);
                }
                while Instant::now() < next && !st.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        });
        Sampler {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    /// The samples so far.
    pub fn snapshot(&self) -> Vec<Sample> {
        self.samples.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// The last sample.
    pub fn last(&self) -> Option<Sample> {
        self.samples.lock().ok()?.last().cloned()
    }
}

impl Sampler {
    /// Stops the thread; the samples stay.
    pub fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_fds_are_counted() {
        assert!(fd_count(std::process::id()).is_some_and(|n| n >= 3));
        assert_eq!(fd_count(0), None);
    }
}
