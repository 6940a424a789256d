//! Hooks: the operator's program, run when the tunnel, a connection or a
//! path changes (`[daemon] hook`).
//!
//! Sites use hooks to add routes or firewall rules once the tunnel is up,
//! to notify someone when a branch loses its last path, or to feed a
//! monitoring system. The program is run directly (no shell: the config
//! gives its argv), with the event in environment variables (`MPT_EVENT`,
//! `MPT_TUN`, `MPT_CONN`, `MPT_PATH`, `MPT_STATE`, ...), one event at a
//! time and in order, on a thread of its own. Two rules keep a slow or
//! broken hook from hurting the tunnel:
//!
//! - The control loop only queues events ([`Hooks::send`] never waits); a
//!   full queue drops the event and counts it.
//! - A run that outlives `hook_timeout` is killed with its whole process
//!   group (the hook runs as a group leader, so what it started goes too)
//!   and counted; a run that exits non-zero is logged with its status and
//!   counted.
//!
//! At shutdown the queue is dropped (counted) and only the last event,
//! `tunnel-down`, is run, under the same timeout.

use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sync::Counter;

/// Events waiting for the hook; more are dropped (and counted).
pub const HOOK_QUEUE: usize = 256;

/// How often a running hook is checked for its exit.
const POLL: Duration = Duration::from_millis(5);

/// What the hook is told: the event's name (`MPT_EVENT`) and its other
/// variables (`MPT_CONN`, `MPT_PATH`, ...), in a stable order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEvent {
    /// `tunnel-up`, `tunnel-down`, `connection-up`, `connection-down` or
    /// `path-change`.
    pub name: &'static str,
    /// The event's variables, without `MPT_EVENT` and `MPT_TUN`.
    pub vars: BTreeMap<&'static str, String>,
}

impl HookEvent {
    /// An event without variables.
    pub fn new(name: &'static str) -> HookEvent {
        HookEvent {
            name,
            vars: BTreeMap::new(),
        }
    }

    /// The event with variable `key` set to `value`.
    pub fn with(mut self, key: &'static str, value: impl ToString) -> HookEvent {
        self.vars.insert(key, value.to_string());
        self
    }
}

/// How the hook's runs ended, for the status.
#[derive(Debug, Default)]
pub struct HookStats {
    /// Runs that exited with status 0.
    pub ok: Counter,
    /// Runs that exited non-zero, died of a signal, or could not start.
    pub failed: Counter,
    /// Runs killed at `hook_timeout`.
    pub timed_out: Counter,
    /// Events dropped: the queue was full, or the daemon was stopping.
    pub dropped: Counter,
}

/// The program and its time limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    /// Program and arguments (never through a shell).
    pub argv: Vec<String>,
    /// A run is killed after this long.
    pub timeout: Duration,
}

/// What the runner thread receives.
enum Message {
    Event(HookEvent),
    /// The last event: run it, then end.
    Last(HookEvent),
}

/// The sending side: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Hooks {
    queue: SyncSender<Message>,
    stopping: Arc<AtomicBool>,
    /// How the runs ended.
    pub stats: Arc<HookStats>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").field("stats", &self.stats).finish()
    }
}

/// The runner thread, joined by [`Hooks::finish`].
pub struct HookRunner {
    thread: JoinHandle<()>,
}

impl Hooks {
    /// Starts the runner thread for `command`; every run gets `MPT_TUN =
    /// tun`.
    pub fn start(command: HookCommand, tun: &str) -> std::io::Result<(Hooks, HookRunner)> {
        let (queue, rx) = sync_channel(HOOK_QUEUE);
        let stats = Arc::new(HookStats::default());
        let stopping = Arc::new(AtomicBool::new(false));
        let runner = Runner {
            command,
            tun: tun.to_owned(),
            stats: stats.clone(),
            stopping: stopping.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("hook".into())
            .spawn(move || runner.run(rx))?;
        Ok((
            Hooks {
                queue,
                stopping,
                stats,
            },
            HookRunner { thread },
        ))
    }

    /// Queues `event`; drops it (counted, logged) when the queue is full.
    pub fn send(&self, event: HookEvent) {
        match self.queue.try_send(Message::Event(event)) {
            Ok(()) => {}
            Err(TrySendError::Full(Message::Event(e) | Message::Last(e))) => {
                self.stats.dropped.add(1);
                tracing::warn!(event = e.name, "hook queue full: event dropped");
            }
            Err(TrySendError::Disconnected(_)) => self.stats.dropped.add(1),
        }
    }

    /// Drops what is still queued, runs `last`, and waits for the runner
    /// (at most about one `hook_timeout`).
    pub fn finish(self, runner: HookRunner, last: HookEvent) {
        self.stopping.store(true, Relaxed);
        // The runner skips queued events now, so there is room soon.
        if self.queue.send(Message::Last(last)).is_ok() {
            let _ = runner.thread.join();
        }
    }
}

/// The runner thread's state.
struct Runner {
    command: HookCommand,
    tun: String,
    stats: Arc<HookStats>,
    stopping: Arc<AtomicBool>,
}

impl Runner {
    fn run(self, rx: Receiver<Message>) {
        loop {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(Message::Event(e)) if self.stopping.load(Relaxed) => {
                    self.stats.dropped.add(1);
                    tracing::debug!(event = e.name, "daemon stopping: hook event dropped");
                }
                Ok(Message::Event(e)) => self.run_one(&e),
                Ok(Message::Last(e)) => {
                    self.run_one(&e);
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Runs the hook for `event` to its end or its timeout.
    fn run_one(&self, event: &HookEvent) {
        let started = Instant::now();
        let child = self.spawn(event);
        let outcome = match child {
            Ok(child) => wait_or_kill(child, self.command.timeout),
            Err(e) => Outcome::NotStarted(e),
        };
        let ms = started.elapsed().as_millis() as u64;
        match outcome {
            Outcome::Exited(s) if s.success() => {
                self.stats.ok.add(1);
                tracing::debug!(event = event.name, ms, "hook ran");
            }
            Outcome::Exited(s) => {
                self.stats.failed.add(1);
                tracing::warn!(event = event.name, ms, status = %describe(s), "hook failed");
            }
            Outcome::TimedOut => {
                self.stats.timed_out.add(1);
                tracing::warn!(
                    event = event.name,
                    timeout_ms = self.command.timeout.as_millis() as u64,
                    "hook timed out: killed with its process group"
                );
            }
            Outcome::NotStarted(e) => {
                self.stats.failed.add(1);
                tracing::warn!(event = event.name, program = %self.command.argv[0], error = %e, "hook could not be started");
            }
        }
    }

    fn spawn(&self, event: &HookEvent) -> std::io::Result<Child> {
        let (program, args) = self
            .command
            .argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("empty hook command"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env("MPT_EVENT", event.name)
            .env("MPT_TUN", &self.tun)
            .envs(event.vars.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            // Its own process group, so a timeout kills what it started.
            .process_group(0);
        cmd.spawn()
    }
}

/// How one run ended.
enum Outcome {
    Exited(ExitStatus),
    TimedOut,
    NotStarted(std::io::Error),
}

/// Waits for `child` up to `timeout`; past it, kills its process group.
fn wait_or_kill(mut child: Child, timeout: Duration) -> Outcome {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Outcome::Exited(status),
            Ok(None) if Instant::now() >= deadline => break,
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => return Outcome::NotStarted(e),
        }
    }
    let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
    let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
    Outcome::TimedOut
}

/// "exit status 3" or "killed by signal 9".
fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(script: &str, timeout_ms: u64) -> HookCommand {
        HookCommand {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    fn wait_for(what: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(10);
        while !what() {
            assert!(Instant::now() < until, "timed out waiting");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn events_reach_the_hook_in_order_with_their_variables() {
        let dir = std::env::temp_dir().join(format!("mpt-hook-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("events");
        let script = format!(
            "echo \"$MPT_EVENT $MPT_TUN $MPT_CONN $MPT_PATH $MPT_STATE\" >> {}",
            out.display()
        );
        let (hooks, runner) = Hooks::start(command(&script, 5000), "mpt9").unwrap();
        hooks.send(HookEvent::new("tunnel-up"));
        hooks.send(
            HookEvent::new("path-change")
                .with("MPT_CONN", "site-b")
                .with("MPT_PATH", "lte")
                .with("MPT_STATE", "up"),
        );
        wait_for(|| hooks.stats.ok.get() == 2);
        hooks.clone().finish(runner, HookEvent::new("tunnel-down"));
        let text = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "tunnel-up mpt9   ",
                "path-change mpt9 site-b lte up",
                "tunnel-down mpt9   "
            ]
        );
        assert_eq!(hooks.stats.ok.get(), 3);
        assert_eq!(hooks.stats.failed.get(), 0);
    }

    #[test]
    fn a_hanging_hook_is_killed_with_what_it_started() {
        let dir = std::env::temp_dir().join(format!("mpt-hook-hang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("child");
        // The hook starts a child that would outlive it, then hangs.
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let (hooks, runner) = Hooks::start(command(&script, 200), "mpt9").unwrap();
        let t = Instant::now();
        hooks.send(HookEvent::new("tunnel-up"));
        wait_for(|| hooks.stats.timed_out.get() == 1);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let child: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed with its group (a zombie reaped by init no longer exists).
        wait_for(|| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            stat.is_empty() || stat.contains(") Z ")
        });
        hooks.clone().finish(runner, HookEvent::new("tunnel-down"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn failures_are_counted_and_a_missing_program_is_one() {
        let (hooks, runner) = Hooks::start(command("exit 3", 5000), "mpt9").unwrap();
        hooks.send(HookEvent::new("tunnel-up"));
        wait_for(|| hooks.stats.failed.get() == 1);
        hooks.clone().finish(runner, HookEvent::new("tunnel-down"));
        assert_eq!(hooks.stats.failed.get(), 2);

        let missing = HookCommand {
            argv: vec!["/nonexistent/mpt-hook".into()],
            timeout: Duration::from_secs(1),
        };
        let (hooks, runner) = Hooks::start(missing, "mpt9").unwrap();
        hooks.clone().finish(runner, HookEvent::new("tunnel-down"));
        assert_eq!(hooks.stats.failed.get(), 1);
        assert_eq!(hooks.stats.ok.get(), 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let (hooks, runner) = Hooks::start(command("sleep 0.3", 5000), "mpt9").unwrap();
        let t = Instant::now();
        for _ in 0..HOOK_QUEUE + 50 {
            hooks.send(HookEvent::new("path-change"));
        }
        assert!(
            t.elapsed() < Duration::from_millis(200),
            "{:?}",
            t.elapsed()
        );
        assert!(
            hooks.stats.dropped.get() >= 49,
            "{}",
            hooks.stats.dropped.get()
        );
        // Stopping drops the rest of the queue and runs only the last.
        hooks.clone().finish(runner, HookEvent::new("tunnel-down"));
        let s = &hooks.stats;
        assert_eq!(s.ok.get() + s.dropped.get(), HOOK_QUEUE as u64 + 50 + 1);
        assert!(s.ok.get() <= 3, "{}", s.ok.get());
    }
}
