//! Bundle traffic through the agents: a collector thread in the
//! destination's namespace that takes every bundle dtnd hands to the
//! `incoming` endpoint (polling `GET /endpoint`) and checks its payload
//! ([`super::payload`]), and submission of bundles at the source (`POST
//! /send`) from a thread in the source's namespace, either kept at a
//! window of W undelivered bundles (goodput) or in timed batches (contact
//! gap). Delivery is observed by the bench at the destination, not
//! reported back over the GEO hop: the window is a backlog, not a
//! round-trip-clocked handshake.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::agent::{ENDPOINT, WEB_PORT};
use super::goodput::Delivery;
use super::http;
use super::payload::{self, Parsed};
use mpt_emu::sys;

/// Poll period of the collector when nothing is waiting.
const POLL: Duration = Duration::from_millis(20);
/// Timeout of one HTTP request to a local agent.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Lifetime of the bundles (the relay keeps them this long at most).
pub const LIFETIME: &str = "30m";

fn local() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], WEB_PORT))
}

/// What the collector has seen; shared with the submitters.
#[derive(Default)]
pub struct Seen {
    pub deliveries: Mutex<Vec<Delivery>>,
    /// Distinct bundles delivered intact so far (what the window counts).
    pub intact: AtomicUsize,
    /// Ids delivered intact in this phase (a second copy is not counted).
    ids: Mutex<std::collections::HashSet<u64>>,
    /// Bundles that were not ours (no header).
    pub foreign: AtomicUsize,
}

/// The destination's collector; stops on drop.
pub struct Collector {
    pub seen: Arc<Seen>,
    t0: Arc<Mutex<Instant>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    /// Starts polling the agent in namespace `ns`.
    pub fn start(ns: &str) -> Collector {
        let seen = Arc::new(Seen::default());
        let t0 = Arc::new(Mutex::new(Instant::now()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, s2, t2, st) = (ns.to_string(), seen.clone(), t0.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            if let Err(e) = sys::enter_netns(&ns) {
                tracing::warn!(error = %e, "collector cannot enter the destination namespace");
                return;
            }
            let path = format!("/endpoint?{ENDPOINT}");
            while !st.load(Ordering::Relaxed) {
                let got = match http::request(local(), "GET", &path, &[], HTTP_TIMEOUT) {
                    Ok((200, body)) if body != b"Nothing to receive" => body,
                    _ => {
                        std::thread::sleep(POLL);
                        continue;
                    }
                };
                let now = Instant::now();
                let base = *t2.lock().unwrap_or_else(|e| e.into_inner());
                let t_s = now.saturating_duration_since(base).as_secs_f64();
                let d = match payload::parse(&got) {
                    Parsed::Good { id, len } => Delivery {
                        id,
                        t_s,
                        bytes: len,
                        intact: true,
                    },
                    Parsed::Corrupt { id } => Delivery {
                        id,
                        t_s,
                        bytes: 0,
                        intact: false,
                    },
                    Parsed::Foreign => {
                        s2.foreign.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                if d.intact
                    && s2
                        .ids
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(d.id)
                {
                    s2.intact.fetch_add(1, Ordering::Relaxed);
                }
                s2.deliveries
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(d);
            }
        });
        Collector {
            seen,
            t0,
            stop,
            thread: Some(thread),
        }
    }

    /// Starts a new phase at `t0`: times count from there, the record is
    /// emptied.
    pub fn reset(&self, t0: Instant) {
        *self.t0.lock().unwrap_or_else(|e| e.into_inner()) = t0;
        self.seen
            .deliveries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.seen
            .ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.seen.intact.store(0, Ordering::Relaxed);
    }

    /// The deliveries of the phase so far.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.seen
            .deliveries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits until `ids` are all delivered intact, or `until`, or stop.
    pub fn wait_for(&self, ids: &[u64], until: Instant, stop: &AtomicBool) -> bool {
        loop {
            let done = {
                let d = self
                    .seen
                    .deliveries
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                ids.iter()
                    .all(|id| d.iter().any(|x| x.intact && x.id == *id))
            };
            if done {
                return true;
            }
            if Instant::now() >= until || stop.load(Ordering::Relaxed) {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Submits one bundle to the local agent (caller in its namespace).
fn submit(dst: &str, id: u64, size: usize) -> anyhow::Result<()> {
    let path = format!("/send?dst=dtn://{dst}/{ENDPOINT}&lifetime={LIFETIME}");
    let (code, body) = http::request(
        local(),
        "POST",
        &path,
        &payload::make(id, size),
        HTTP_TIMEOUT,
    )
    .context("POST /send to the source agent")?;
    if code != 200 {
        bail!(
            "the source agent refused bundle {id}: HTTP {code} {}",
            String::from_utf8_lossy(&body).trim()
        );
    }
    Ok(())
}

/// Waits until the agent in the caller's namespace answers on its HTTP
/// interface.
fn wait_ready(until: Instant) -> anyhow::Result<()> {
    loop {
        match http::request(local(), "GET", "/status/nodeid", &[], HTTP_TIMEOUT) {
            Ok((200, _)) => return Ok(()),
            r if Instant::now() >= until => bail!("dtnd's HTTP interface did not answer: {r:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Waits until the agent in namespace `ns` answers (up to `timeout`).
pub fn agent_ready(ns: &str, timeout: Duration) -> anyhow::Result<()> {
    let ns2 = ns.to_string();
    std::thread::spawn(move || {
        sys::enter_netns(&ns2)?;
        wait_ready(Instant::now() + timeout)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("agent readiness thread panicked"))?
    .with_context(|| format!("dtnd in {ns}"))
}

/// What to submit from the source.
pub enum Plan {
    /// Keep `window` bundles undelivered until `until`; ids from `first`.
    Window {
        first: u64,
        window: usize,
        until: Instant,
    },
    /// Batches: (when, ids) in time order.
    Batches(Vec<(Instant, Vec<u64>)>),
}

/// Runs `plan` in a thread in the source namespace `ns` and waits for it;
/// returns the ids submitted with their submission times (seconds from
/// `t0`).
pub fn run_source(
    ns: &str,
    dst: &str,
    size: usize,
    plan: Plan,
    seen: &Seen,
    t0: Instant,
    stop: &AtomicBool,
) -> anyhow::Result<Vec<(u64, f64)>> {
    let body = move || -> anyhow::Result<Vec<(u64, f64)>> {
        sys::enter_netns(ns).context("entering the source namespace")?;
        let mut out = Vec::new();
        let stamp = |id| (id, t0.elapsed().as_secs_f64());
        match plan {
            Plan::Window {
                first,
                window,
                until,
            } => {
                let mut next = first;
                while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    let open = out.len() - seen.intact.load(Ordering::Relaxed).min(out.len());
                    if open >= window {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    submit(dst, next, size)?;
                    out.push(stamp(next));
                    next += 1;
                }
            }
            Plan::Batches(batches) => {
                for (when, ids) in batches {
                    while Instant::now() < when {
                        if stop.load(Ordering::Relaxed) {
                            return Ok(out);
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    for id in ids {
                        submit(dst, id, size)?;
                        out.push(stamp(id));
                    }
                }
            }
        }
        Ok(out)
    };
    std::thread::scope(|sc| match sc.spawn(body).join() {
        Ok(r) => r,
        Err(_) => bail!("the bundle source thread panicked"),
    })
}
