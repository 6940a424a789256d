//! Child processes of the bench (mptd, iperf3), started inside a network
//! namespace and stopped when their guard drops, and the CPU time of any
//! process from /proc. Used by the testbed, the iperf3 runner and `mpt
//! bench clients` alike.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use tracing::{debug, warn};

/// Grace period between SIGTERM and SIGKILL when stopping a process.
const TERM_GRACE: Duration = Duration::from_secs(3);

/// A child process stopped on drop.
pub struct Proc {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// Spawns `ip netns exec NS PROGRAM ARGS...` (ip execs the program, so
    /// the child's pid is the program's), output to `log`.
    pub fn spawn_in(
        ns: &str,
        name: &str,
        program: &Path,
        args: &[&str],
        log: PathBuf,
    ) -> anyhow::Result<Proc> {
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating a log file handle")?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {} in {ns}", program.display()))?;
        debug!(name, pid = child.id(), "started");
        Ok(Proc {
            name: name.to_string(),
            child,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` if the process has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// user + system CPU time so far.
    pub fn cpu_time(&self) -> Option<Duration> {
        cpu_time(self.pid())
    }

    /// The last lines of the log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    /// SIGTERM, then SIGKILL after a grace period; waits for the exit.
    pub fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        if let Err(e) = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM) {
            debug!(name = %self.name, error = %e, "SIGTERM failed");
        }
        let end = Instant::now() + TERM_GRACE;
        while Instant::now() < end {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        warn!(name = %self.name, "did not stop on SIGTERM; killing");
        if let Err(e) = self.child.kill() {
            warn!(name = %self.name, error = %e, "kill failed");
        }
        if let Err(e) = self.child.wait() {
            warn!(name = %self.name, error = %e, "wait failed");
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// user + system CPU time of `pid` from /proc/PID/stat.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); rest starts at field 3.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    Some(Duration::from_secs_f64(ticks as f64 / hz))
}
