//! Carrying out the faults on the clients testbed, and waiting for every
//! client to be back: up in the concentrator's status (session and every
//! path) and answering a byte-exact TCP probe through its tunnel.
//!
//! The runner also owns what a fault changes for the checks: the client a
//! reload removed (not expected back until it is added), the server's pid
//! and process number (for the sampler), and the processes it stopped on
//! purpose, so that any other exit counts against the run.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::data::{probe_all, Probed};
use super::plan::{Fault, FaultKind};
use super::report::{FaultResult, Slowest};
use super::sampler::Target;
use crate::bench::clients::bed::{count_up, Bed};
use crate::bench::clients::config::{client_name, SHARED_PORT};
use crate::bench::clients::flood::Flood;
use crate::bench::stop::{check_stop, sleep};
use crate::bench::testbed::mptd_status;
use mpt_emu::netns::ip;

/// Sends `reload` to the control socket; an error unless it was applied.
pub fn reload(control: &Path) -> anyhow::Result<String> {
    let mut s = UnixStream::connect(control)
        .with_context(|| format!("connecting to {}", control.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(b"{\"version\":1,\"request\":\"reload\"}\n")?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    let v: serde_json::Value = serde_json::from_str(&line)
        .with_context(|| format!("the reload answer is no JSON: {}", line.trim()))?;
    if v.get("ok").and_then(|o| o.as_bool()) == Some(false) || v.get("error").is_some() {
        bail!("reload refused: {}", line.trim());
    }
    Ok(line.trim().to_string())
}

/// The faults' side of the run.
pub(crate) struct Runner<'a> {
    pub bed: &'a mut Bed,
    /// The namespace the flood comes from.
    pub flood_ns: String,
    pub target: Arc<Target>,
    /// The client a reload removed and not yet added back.
    pub removed: Option<usize>,
    /// Daemons that exited on their own, in words.
    pub exits: Vec<String>,
    pub recover_within: Duration,
    pub t0: Instant,
    pub probe_mismatches: u64,
    restarts: usize,
}

impl<'a> Runner<'a> {
    pub fn new(
        bed: &'a mut Bed,
        flood_ns: String,
        target: Arc<Target>,
        recover_within: Duration,
        t0: Instant,
    ) -> Runner<'a> {
        Runner {
            bed,
            flood_ns,
            target,
            removed: None,
            exits: Vec::new(),
            recover_within,
            t0,
            probe_mismatches: 0,
            restarts: 0,
        }
    }

    fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Restarts every daemon that exited on its own and records it.
    pub fn check_exits(&mut self) -> anyhow::Result<()> {
        if let Some(st) = self.bed.server.exited() {
            self.exits.push(format!(
                "the server at {:.1} s ({st}): {}",
                self.now_s(),
                self.bed.server.log_tail()
            ));
            self.restart_server()?;
        }
        for i in 0..self.bed.clients.len() {
            if Some(i) == self.removed {
                // Stopped on purpose while its file is gone.
                continue;
            }
            if let Some(st) = self.bed.clients[i].exited() {
                self.exits
                    .push(format!("client {i} at {:.1} s ({st})", self.now_s()));
                self.restarts += 1;
                self.bed.clients[i] = self.bed.spawn_client(i, self.restarts)?;
            }
        }
        Ok(())
    }

    fn restart_server(&mut self) -> anyhow::Result<()> {
        self.restarts += 1;
        // SIGTERM, then wait (SIGKILL after 3 s): the port and the tun
        // must be free for the new process.
        self.bed.server.stop();
        self.bed.server = self.bed.spawn_server(self.restarts)?;
        self.target
            .pid
            .store(self.bed.server.pid(), Ordering::Relaxed);
        self.target.incarnation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Carries out `f` (lasting faults for their hold), then waits for
    /// every client to be back.
    pub fn run(&mut self, f: &Fault, stop: &AtomicBool) -> anyhow::Result<FaultResult> {
        let at_s = self.now_s();
        let mut flood_pps = None;
        let client = f.client;
        match f.kind {
            FaultKind::PathSilent => {
                self.bed.silence_path0(f.hold)?;
                sleep(f.hold, stop)?;
            }
            FaultKind::LinkDown => {
                let ns = self.bed.c.name().to_string();
                ip(&["-n", &ns, "link", "set", "dev", "c1", "down"])?;
                let r = sleep(f.hold, stop);
                ip(&["-n", &ns, "link", "set", "dev", "c1", "up"])?;
                r?;
            }
            FaultKind::ClientRestart => {
                let i = client.context("a client restart names its client")?;
                // A crash, not a clean stop: the server still holds the
                // old session when the new one arrives.
                let pid = nix::unistd::Pid::from_raw(self.bed.clients[i].pid() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                let end = Instant::now() + Duration::from_secs(5);
                while self.bed.clients[i].exited().is_none() && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(10));
                }
                self.restarts += 1;
                self.bed.clients[i] = self.bed.spawn_client(i, self.restarts)?;
            }
            FaultKind::ReloadRemove => {
                let i = client.context("a reload names its client")?;
                let file = self.bed.client_file(i).context("no include folder")?;
                std::fs::remove_file(&file)
                    .with_context(|| format!("removing {}", file.display()))?;
                reload(&self.bed.server_control)?;
                // The branch is gone: a removed client that kept sending
                // on its old session would count as unknown_session for
                // as long as it stays removed.
                self.bed.clients[i].stop();
                self.removed = Some(i);
            }
            FaultKind::ReloadAdd => {
                let i = client.context("a reload names its client")?;
                self.bed.write_client_file(i)?;
                reload(&self.bed.server_control)?;
                self.restarts += 1;
                self.bed.clients[i] = self.bed.spawn_client(i, self.restarts)?;
                self.removed = None;
            }
            FaultKind::ServerRestart => self.restart_server()?,
            FaultKind::Flood => {
                let flood = Flood::start(&self.flood_ns, vec![SHARED_PORT]);
                let r = sleep(f.hold, stop);
                let (_, pps) = flood.finish()?;
                r?;
                flood_pps = Some(pps);
            }
        }
        let end_s = self.now_s();
        let back = self.wait_back(stop)?;
        let (slowest, probe_retried) = slowest(&back, self.t0, end_s);
        Ok(FaultResult {
            n: f.n,
            kind: f.kind,
            client: client.map(client_name),
            at_s,
            end_s,
            recovery_s: back.all_at.map(|r| r - end_s),
            missing: back.missing.into_iter().map(client_name).collect(),
            slowest,
            probe_retried,
            flood_pps,
        })
    }

    /// The clients expected up: all but a removed one.
    fn expected(&self) -> Vec<usize> {
        (0..self.bed.clients.len())
            .filter(|&i| Some(i) != self.removed)
            .collect()
    }

    /// Waits up to twice the limit for every expected client to have
    /// been up in the status since the fault's end (session and every
    /// path; a removed one gone from it) and to answer a probe. Gives the
    /// time (since the run's start) when all were back, or the clients
    /// still missing, and when each was seen up and how its probe went.
    /// "Has been up" rather than "all up at one instant": with 200
    /// clients on a loaded machine some path of some client is always
    /// briefly `suspect`.
    pub fn wait_back(&mut self, stop: &AtomicBool) -> anyhow::Result<Back> {
        let deadline = Instant::now() + 2 * self.recover_within;
        let expected = self.expected();
        let removed = self.removed.map(client_name);
        let paths = self.paths();
        let mut seen: Vec<Option<Instant>> = vec![None; self.bed.clients.len()];
        loop {
            check_stop(stop)?;
            self.check_exits()?;
            if let Ok(s) = mptd_status(&self.bed.server_control) {
                let listed_removed = removed.as_ref().is_some_and(|r| {
                    s.connections
                        .as_deref()
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.name.as_deref() == Some(r.as_str()))
                });
                let now = Instant::now();
                for i in up_clients(&s, paths) {
                    if let Some(v @ None) = seen.get_mut(i) {
                        *v = Some(now);
                    }
                }
                if !listed_removed && expected.iter().all(|&i| seen[i].is_some()) {
                    break;
                }
            }
            if Instant::now() > deadline {
                let missing = expected
                    .iter()
                    .copied()
                    .filter(|&i| seen[i].is_none())
                    .collect();
                return Ok(Back {
                    all_at: None,
                    missing,
                    seen,
                    probes: Vec::new(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let (probes, altered) = probe_all(self.bed.c.name(), expected, deadline)?;
        self.probe_mismatches += altered;
        let missing: Vec<usize> = probes
            .iter()
            .filter(|p| p.verified.is_none())
            .map(|p| p.client)
            .collect();
        Ok(Back {
            all_at: missing.is_empty().then(|| self.now_s()),
            missing,
            seen,
            probes,
        })
    }

    fn paths(&self) -> usize {
        self.bed.paths()
    }
}

/// What [`Runner::wait_back`] saw.
pub struct Back {
    /// When every client was back, s since the run's start.
    pub all_at: Option<f64>,
    /// Clients not back at the deadline.
    pub missing: Vec<usize>,
    /// When each client was first seen up in the status (by index).
    pub seen: Vec<Option<Instant>>,
    /// How each client's probe went (empty if the status never showed all).
    pub probes: Vec<Probed>,
}

/// The client that came back last among those that did, and how many
/// needed more than one probe. A client is back when it was seen up if
/// its first probe verified (it was only waiting for the others to be up
/// before being probed), else when a probe verified.
pub fn slowest(back: &Back, t0: Instant, end_s: f64) -> (Option<Slowest>, usize) {
    let since_end = |t: Instant| t.duration_since(t0).as_secs_f64() - end_s;
    let retried = back.probes.iter().filter(|p| p.failed > 0).count();
    let worst = back
        .probes
        .iter()
        .filter_map(|p| {
            let up = back.seen.get(p.client).copied().flatten()?;
            let at = if p.failed == 0 { up } else { p.verified? };
            Some((at, p, up))
        })
        .max_by_key(|(at, _, _)| *at);
    let slowest = worst.map(|(at, p, up)| Slowest {
        client: client_name(p.client),
        back_s: since_end(at),
        up_s: since_end(up),
        probed_s: p.verified.map(since_end),
        failed_probes: p.failed,
        last_error: p.last_error.clone(),
    });
    (slowest, retried)
}

/// The clients (by index, from their connection names) whose session is
/// established with at least `paths` paths up.
pub fn up_clients(status: &mpt_api::Status, paths: usize) -> Vec<usize> {
    status
        .connections
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter_map(|c| {
            let i = c.name.as_deref()?.strip_prefix("client-")?.parse().ok()?;
            let one = mpt_api::Status {
                connections: Some(vec![c.clone()]),
                ..mpt_api::Status::default()
            };
            (count_up(&one, paths) == 1).then_some(i)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_slowest_client_is_the_last_back() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        // Fault ended at 10 s. Client 0: up at 11 s, first probe fine
        // (verified at 13 s only because the round started then);
        // client 1: up at 10.5 s, two probes failed, verified at 12 s;
        // client 2: up at 12.5 s, first probe fine.
        let probe = |client, verified: f64, failed| Probed {
            client,
            verified: Some(at(verified)),
            failed,
            last_error: (failed > 0).then(|| "connect: timed out".to_string()),
        };
        let back = Back {
            all_at: Some(13.0),
            missing: vec![],
            seen: vec![Some(at(11.0)), Some(at(10.5)), Some(at(12.5))],
            probes: vec![probe(0, 13.0, 0), probe(1, 12.0, 2), probe(2, 12.6, 0)],
        };
        let (w, retried) = slowest(&back, t0, 10.0);
        let w = w.expect("a slowest client");
        assert_eq!(retried, 1);
        assert_eq!(w.client, "client-002");
        assert!((w.back_s - 2.5).abs() < 1e-6 && (w.up_s - 2.5).abs() < 1e-6);
        // A client whose probe kept failing is back when it verified.
        let mut back = back;
        back.probes[1] = probe(1, 14.0, 3);
        let (w, _) = slowest(&back, t0, 10.0);
        let w = w.expect("a slowest client");
        assert_eq!((w.client.as_str(), w.failed_probes), ("client-001", 3));
        assert!((w.back_s - 4.0).abs() < 1e-6 && (w.up_s - 0.5).abs() < 1e-6);
        assert!(w.line().contains("after 3 failed: connect: timed out"));
        // Nobody probed (the status never showed all): none.
        back.probes.clear();
        assert!(slowest(&back, t0, 10.0).0.is_none());
    }

    #[test]
    fn up_clients_are_named_by_index() {
        let status: mpt_api::Status = serde_json::from_value(json!({"connections": [
            {"name": "client-000", "session": {"established": true},
             "paths": [{"state": "up"}, {"state": "up"}]},
            {"name": "client-001", "session": {"established": true},
             "paths": [{"state": "up"}, {"state": "suspect"}]},
            {"name": "client-120", "session": {"established": true},
             "paths": [{"state": "up"}, {"state": "up"}]},
            {"name": "other", "session": {"established": true},
             "paths": [{"state": "up"}, {"state": "up"}]},
        ]}))
        .expect("status");
        assert_eq!(up_clients(&status, 2), [0, 120]);
        assert_eq!(up_clients(&status, 1), [0, 1, 120]);
    }
}
