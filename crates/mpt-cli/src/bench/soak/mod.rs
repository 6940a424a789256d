//! `mpt bench soak`: many clients on one concentrator for a long time
//! under scheduled faults, with invariants checked all along (issue 34
//! item 8).
//!
//! Why: one concentrator carries hundreds of clients, so whatever one
//! client, one path or one attacker does must not become everyone's
//! outage, and nothing may leak over hours. A benchmark that measures one
//! thing at a time does not show that; this run throws the faults mpt
//! claims to survive at a live concentrator one after the other and checks
//! after each that every client came back.
//!
//! The testbed is `mpt bench clients`'s ([`crate::bench::clients::bed`]):
//! namespaces `mptemu-<pid>-soak-{s,c,m}` plus `-f` for the flood, the
//! clients on the shared port with the public-key handshake, each
//! client's server entry a file in an include folder (`mpt client add`'s
//! layout), every client rekeying every `--rekey-after` seconds, path 0
//! through an emulator wire. The faults ([`plan`]): path 0 silent (the
//! wire restarted with an outage), a client killed and restarted, a
//! client's file removed and reloaded, added back and reloaded, the
//! concentrator restarted, path 1's link down and up, and forged
//! handshake initiations from the flood namespace. Throughout, a few
//! clients send known bytes over TCP and the far end's SHA-256 must match
//! ([`data`]), and a sampler reads the concentrator's RSS, fds and
//! `unknown_session` counter every second ([`sampler`]).
//!
//! After each fault every client must be up in the concentrator's status
//! and answer a byte-exact probe within `--recover-within` seconds; the
//! verdict ([`verdict`]) also wants no daemon exit of its own, no RSS or
//! fd growth per server process, no long `unknown_session` streak and no
//! altered transfer. Everything is stopped and every namespace deleted on
//! every exit path (guards; SIGINT/SIGTERM set the stop flag every wait
//! polls), and partial results are written.

pub mod data;
pub(crate) mod faults;
pub mod options;
pub mod plan;
pub mod report;
pub mod sampler;
pub mod verdict;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use crate::bench::clients::bed::{build, wait_all_up, Bed};
use crate::bench::clients::config::client_name;
use crate::bench::clients::options::Options as BedOptions;
use crate::bench::stop::{check_stop, sleep};
use crate::bench::testbed::mptd_status;
use faults::Runner;
use mpt_emu::netns::{ip, Netns, PREFIX};
use report::{FaultResult, RecoveryStats, Report, Traffic};
use sampler::{Sampler, Target};
use verdict::{failures, longest_streak, trends, Limits, Observed};

pub use options::Options;

/// Seconds of each server process's start left out of its reported
/// trends.
const WARMUP_S: f64 = 10.0;
/// ... and of the RSS trend the verdict judges: in its first minute a
/// concentrator's heap grows with its clients' sessions, rekeys and the
/// first flood's queues (200 clients: about 40 to 160 MiB), then stays.
const RSS_WARMUP_S: f64 = 60.0;

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn limits(o: &Options) -> Limits {
    Limits {
        recover_within_s: o.recover_within.as_secs_f64(),
        rss_growth_mib: 16.0,
        rss_min_span_s: 120.0,
        fd_growth: 2.0,
        streak_s: o.recover_within.as_secs_f64(),
    }
}

/// Runs the soak; writes results.json and the charts (partial ones too,
/// on error or interrupt) and returns the report (`pass` says the
/// verdict) or the first error.
pub fn run(o: &Options, stop: &AtomicBool) -> anyhow::Result<Report> {
    o.check().map_err(anyhow::Error::msg)?;
    if !mpt_emu::sys::is_root() {
        bail!("mpt bench soak needs root (network namespaces, veths, tun devices)");
    }
    let work = o.out.join("work");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let started = Instant::now();
    let mut report = Report {
        scenario: "soak".into(),
        clients: o.clients,
        paths_per_client: o.paths_per_client,
        duration_s: o.duration.as_secs_f64(),
        hold_s: o.hold.as_secs_f64(),
        gap_s: o.gap.as_secs_f64(),
        rekey_after_s: o.rekey_after.as_secs(),
        nofile: o.nofile,
        limits: Some(limits(o)),
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        loadavg_start: loadavg(),
        ..Report::default()
    };
    println!(
        "==> mpt bench soak: {} clients x {} paths, {} s of faults (every {} s, held {} s), \
         rekeys every {} s, back within {} s{}, output {}",
        o.clients,
        o.paths_per_client,
        o.duration.as_secs(),
        (o.hold + o.gap).as_secs(),
        o.hold.as_secs(),
        o.rekey_after.as_secs(),
        o.recover_within.as_secs(),
        o.nofile
            .map_or(String::new(), |n| format!(", server under ulimit -n {n}")),
        o.out.display()
    );
    let result = soak(o, &work, &mut report, stop);
    report.wall_s = started.elapsed().as_secs_f64();
    report.complete = result.is_ok();
    report.loadavg_end = loadavg();
    report.write(&o.out)?;
    result.map(|()| report)
}

fn bed_options(o: &Options) -> BedOptions {
    let mut b = BedOptions::new(o.out.clone(), o.mptd.clone());
    b.clients = o.clients;
    b.paths_per_client = o.paths_per_client;
    b.senders = o.senders;
    b.rekey_after = None;
    b.rekey_all = Some(o.rekey_after);
    b.clients_d = true;
    b.emu_path0 = true;
    b.nofile = o.nofile;
    b.tag = "soak";
    b
}

/// The flood's namespace: a veth into the server namespace
/// (10.99.0.2 -> 10.99.0.1), routed to the server's path addresses.
fn flood_netns(bed: &Bed) -> anyhow::Result<Netns> {
    let f = Netns::create(&format!("{PREFIX}{}-soak-f", std::process::id()))
        .context("creating the flood namespace")?;
    let (fname, sname) = (f.name().to_string(), bed.s.name().to_string());
    ip(&[
        "-n", &fname, "link", "add", "f0", "type", "veth", "peer", "name", "sf0", "netns", &sname,
    ])
    .context("the flood veth")?;
    for (ns, cmd) in [
        (&fname, "addr add 10.99.0.2/30 dev f0"),
        (&fname, "link set dev f0 up"),
        (&fname, "link set dev lo up"),
        (&fname, "route add 10.100.0.0/16 via 10.99.0.1"),
        (&sname, "addr add 10.99.0.1/30 dev sf0"),
        (&sname, "link set dev sf0 up"),
    ] {
        let mut args = vec!["-n", ns.as_str()];
        args.extend(cmd.split(' '));
        ip(&args).with_context(|| format!("ip -n {ns} {cmd}"))?;
    }
    Ok(f)
}

fn soak(o: &Options, work: &Path, report: &mut Report, stop: &AtomicBool) -> anyhow::Result<()> {
    let bo = bed_options(o);
    println!("==> soak: building the testbed");
    let mut t_start = None;
    let mut bed = build(&bo, work, stop, &mut t_start)?;
    let flood_ns = flood_netns(&bed)?;
    let t_up = t_start.unwrap_or_else(Instant::now);
    let timeout = Duration::from_secs(30) + Duration::from_millis(200) * o.clients as u32;
    let (up, up_s) = wait_all_up(&mut bed, &bo, t_up, timeout, stop)?;
    report.up_s = up_s;
    if up_s.is_none() {
        bail!(
            "only {up} of {} clients came up within {} s (logs in {})",
            o.clients,
            timeout.as_secs(),
            work.display()
        );
    }
    println!(
        "    {up}/{} clients up after {:.1} s",
        o.clients,
        up_s.unwrap_or(0.0)
    );

    let _checksum = data::Server::start(bed.s.name())?;
    let senders: Vec<usize> = (0..o.senders).collect();
    let background = data::Background::start(bed.c.name(), &senders, o.transfer_bytes);
    let t0 = Instant::now();
    let target = Arc::new(Target::default());
    target.pid.store(bed.server.pid(), Ordering::Relaxed);
    let mut sampler = Sampler::start(
        target.clone(),
        bed.server_control.clone(),
        o.paths_per_client,
        t0,
    );
    let schedule = plan::plan(o.duration, o.clients, o.senders, o.hold, o.gap);
    println!(
        "==> soak: {} faults; background: {} clients sending {} KiB transfers",
        schedule.len(),
        o.senders,
        o.transfer_bytes / 1024
    );
    let mut runner = Runner::new(
        &mut bed,
        flood_ns.name().to_string(),
        target,
        o.recover_within,
        t0,
    );
    let outcome = run_schedule(&mut runner, &schedule, &sampler, &background, report, stop);
    // Final figures, whatever happened.
    let rekeys: u64 = runner
        .bed
        .client_controls
        .iter()
        .filter_map(|c| mptd_status(c).ok())
        .filter_map(|s| s.connections?.first()?.session.as_ref()?.rekeys)
        .sum();
    let exits = std::mem::take(&mut runner.exits);
    let probe_mismatches = runner.probe_mismatches;
    drop(runner);
    sampler.halt();
    let tally = background.finish();
    report.rekeys = rekeys;
    report.exits = exits;
    report.samples = sampler.snapshot();
    report.traffic = Traffic {
        senders: senders.iter().map(|&i| client_name(i)).collect(),
        transfer_bytes: o.transfer_bytes,
        verified: tally.verified.load(Ordering::Relaxed),
        mismatches: tally.mismatches.load(Ordering::Relaxed),
        failed: tally.failed.load(Ordering::Relaxed),
        mib_verified: tally.bytes.load(Ordering::Relaxed) as f64 / (1024.0 * 1024.0),
        probe_mismatches,
    };
    conclude(o, report);
    outcome?;
    println!("==> soak: tearing down");
    drop(bed);
    drop(flood_ns);
    Ok(())
}

/// Stats, trends and the verdict from what was recorded.
fn conclude(o: &Options, report: &mut Report) {
    report.recovery = RecoveryStats::of(report.faults.iter());
    for kind in plan::CYCLE {
        let r = RecoveryStats::of(report.faults.iter().filter(|f| f.kind == kind));
        if r.faults > 0 {
            report.recovery_by_kind.insert(kind.name(), r);
        }
    }
    report.rss_mib = trends(&report.samples, WARMUP_S, |s| {
        s.rss_kib.map(|k| k as f64 / 1024.0)
    });
    report.rss_mib_judged = trends(&report.samples, RSS_WARMUP_S, |s| {
        s.rss_kib.map(|k| k as f64 / 1024.0)
    });
    report.fds = trends(&report.samples, WARMUP_S, |s| s.fds.map(|n| n as f64));
    report.fds_max = report.samples.iter().filter_map(|s| s.fds).max();
    report.unknown_session_streak = longest_streak(&report.samples);
    let recoveries = report
        .faults
        .iter()
        .map(|f| (format!("fault {} {}", f.n, f.kind.name()), f.recovery_s))
        .collect();
    let observed = Observed {
        recoveries,
        exits: report.exits.clone(),
        rss_mib: &report.rss_mib_judged,
        fds: &report.fds,
        streak: report.unknown_session_streak,
        mismatches: report.traffic.mismatches + report.traffic.probe_mismatches,
        verified: report.traffic.verified,
    };
    report.failures = failures(&observed, &limits(o));
    report.pass = report.failures.is_empty();
}

fn progress(runner: &Runner, sampler: &Sampler, bg: &data::Background) -> String {
    let last = sampler.last().unwrap_or_default();
    format!(
        "RSS {} MiB, {} fds, {} up, {} transfers verified",
        last.rss_kib
            .map_or("-".into(), |k| format!("{:.1}", k as f64 / 1024.0)),
        last.fds.map_or("-".into(), |n| n.to_string()),
        last.up
            .map_or("-".into(), |n| format!("{n}/{}", runner.bed.clients.len())),
        bg.tally.verified.load(Ordering::Relaxed)
    )
}

fn run_schedule(
    runner: &mut Runner,
    schedule: &[plan::Fault],
    sampler: &Sampler,
    bg: &data::Background,
    report: &mut Report,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let t0 = runner.t0;
    for f in schedule {
        // Wait for its slot, watching the daemons.
        while t0.elapsed() < f.at {
            check_stop(stop)?;
            runner.check_exits()?;
            std::thread::sleep(Duration::from_millis(100));
        }
        println!(
            "[{:6.1} s] fault {} {}{}: {}",
            t0.elapsed().as_secs_f64(),
            f.n,
            f.kind.name(),
            f.client
                .map_or(String::new(), |i| format!(" ({})", client_name(i))),
            progress(runner, sampler, bg)
        );
        let r: FaultResult = runner.run(f, stop)?;
        println!(
            "[{:6.1} s]   {}",
            t0.elapsed().as_secs_f64(),
            match r.recovery_s {
                Some(s) => format!("every client back {s:.2} s after the fault's end"),
                None => format!("NOT BACK: {}", r.missing.join(" ")),
            }
        );
        if let Some(w) = &r.slowest {
            println!(
                "           {}; {} probes retried",
                w.line(),
                r.probe_retried
            );
        }
        report.faults.push(r);
    }
    // A last quiet stretch, then everyone must still be there.
    sleep(Duration::from_secs(2), stop)?;
    runner.check_exits()?;
    println!(
        "[{:6.1} s] schedule done: {}",
        t0.elapsed().as_secs_f64(),
        progress(runner, sampler, bg)
    );
    Ok(())
}
