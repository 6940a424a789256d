//! `mpt bench`: the benchmark harness (spec section 6).
//!
//! For every case of a [`scenario::Scenario`] it builds a [`testbed::Testbed`]
//! (namespaces A and B, one shaped or emulated link per path, mptd on both
//! sides), measures with iperf3 ([`iperf`]) — raw baselines over path 0 and
//! UDP/TCP through the tunnel, with mptd CPU use from /proc — tears it down,
//! and finally writes [`report`]s. SIGINT/SIGTERM set a flag that every wait
//! polls; the testbed guards then clean up and the partial results are
//! written.

//!
//! Layout: the scenario families `lte` (lte-gateway, handover), `dtn`
//! (dtn-relay) and `unlike` each have their table, runner, results and
//! report formats in their own module; [`report`] collects the rows and
//! depends on the families' result types. `clients` is `mpt bench
//! clients`, a testbed of its own, and `soak` (`mpt bench soak`) runs
//! scheduled faults on that testbed. Below them: [`scenario`] (files and
//! presets), [`testbed`], the traffic tools ([`iperf`], [`http`],
//! [`voip`], [`stall`]), [`hold`] and the leaves
//! ([`options`], [`progress`](mod@progress), [`process`], [`stop`], [`stats`],
//! [`text`], [`link_trace`], [`chart`], [`csv_rows`]).

pub mod chart;
pub mod clients;
pub mod csv_rows;
pub mod dtn;
pub mod endhosts;
pub mod hold;
pub mod http;
pub mod iperf;
mod iperf_json;
pub mod link_trace;
pub mod lte;
pub mod mptcp;
pub mod objects;
pub mod options;
pub mod process;
pub mod progress;
pub mod report;
pub mod scenario;
pub mod soak;
pub mod stall;
pub mod stats;
pub mod stop;
pub mod testbed;
pub mod text;
pub mod unlike;
pub mod voip;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use process::cpu_time;
use progress::progress;
use report::row::{mean_path_rtt, Row};
use report::Report;
use scenario::case::{Case, TestKind};
use scenario::expanded::Scenario;
use scenario::link::Link;
use stop::check_stop;
use testbed::Testbed;

pub use options::Options;
pub use stop::Interrupted;

/// Finds mptd: `MPTD_BIN`, next to the running executable, then PATH.
pub fn find_mptd() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("MPTD_BIN") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("MPTD_BIN={} is not a file", p.display());
    }
    let mut tried = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            // Next to mpt; for test binaries (target/*/deps) one level up.
            for d in [Some(dir), dir.parent()].into_iter().flatten() {
                let p = d.join("mptd");
                if p.is_file() {
                    return Ok(p);
                }
                tried.push(p.display().to_string());
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let p = d.join("mptd");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    bail!(
        "mptd not found (tried MPTD_BIN, {} and PATH); build it with \
         `cargo build --release -p mptd` or set MPTD_BIN",
        tried.join(", ")
    )
}

fn have(program: &str, arg: &str) -> bool {
    std::process::Command::new(program)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// Checks root and tools before building anything.
pub fn preflight(s: &Scenario) -> anyhow::Result<()> {
    if !mpt_emu::sys::is_root() {
        bail!("mpt bench needs root (network namespaces, veths, qdiscs)");
    }
    if !have("ip", "-V") {
        bail!("`ip` (iproute2) not found");
    }
    if !have("iperf3", "--version") {
        bail!("iperf3 not found: install it, e.g. apt-get install -y iperf3");
    }
    let tbf = s
        .cases
        .iter()
        .any(|c| c.links.iter().any(|l| matches!(l, Link::Tbf { .. })));
    if tbf && !have("tc", "-V") {
        bail!("`tc` (iproute2) not found; it shapes the tbf links");
    }
    Ok(())
}

/// Whether the accelerated variant runs (`--accel auto|on|off`): where
/// the suite has one (`unlike`, or a scenario whose `tests` list
/// `accel-tcp`, as `satellite`), `auto` turns it on except with `--quick`.
/// It needs `nft` (mptd installs a tproxy rule).
pub fn accel_choice(arg: &str, quick: bool, s: &Scenario) -> anyhow::Result<bool> {
    let supported = s.unlike.is_some() || s.tests.contains(&TestKind::AccelTcp);
    let want = match arg {
        "off" => false,
        "on" if !supported => bail!(
            "--accel on: the {} suite has no accelerated variant (unlike, and scenarios whose \
             tests list \"accel-tcp\", have one)",
            s.name
        ),
        "on" => true,
        _ => supported && !quick,
    };
    if want && !have("nft", "--version") {
        if arg == "on" {
            bail!("--accel on: nft not found (apt-get install -y nftables)");
        }
        println!("==> no accelerated variant: nft not found (apt-get install -y nftables)");
        return Ok(false);
    }
    Ok(want)
}

/// Default output directory: `./bench-out/<scenario>-<UTC timestamp>`.
pub fn default_out(scenario: &str) -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from("bench-out").join(format!("{scenario}-{}", utc_stamp(secs)))
}

/// `YYYYmmdd-HHMMSS` in UTC (civil-from-days, Howard Hinnant).
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The emulator's loss seeds (see `testbed`): path i draws from i + 1.
fn seeds(cases: &[Case]) -> Vec<u64> {
    let mut s: Vec<u64> = Vec::new();
    for c in cases {
        s.extend((0..c.links.len() as u64).map(|i| i + 1));
    }
    s.sort_unstable();
    s.dedup();
    s
}

/// Runs every case; writes the results (partial ones too, on error or
/// interrupt) and returns the report or the first error.
pub fn run(opts: &Options, stop: &AtomicBool) -> anyhow::Result<Report> {
    let s = &opts.scenario;
    preflight(s)?;
    let work = opts.out.join("work");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let started = Instant::now();
    let mut report = Report {
        scenario: s.name.clone(),
        description: s.description.clone(),
        duration_s: s.duration.as_secs_f64(),
        omit_s: s.omit.as_secs_f64(),
        streams: s.streams,
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        wall_s: 0.0,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: kernel(),
        complete: false,
        meta: report::meta::RunMeta::begin(
            &s.source,
            &s.source_sha256,
            &s.overrides,
            seeds(&s.cases),
        ),
        rows: Vec::new(),
    };
    println!(
        "==> mpt bench {}: {} case(s), {} s per measurement, output {}",
        s.name,
        s.cases.len(),
        s.duration.as_secs_f64(),
        opts.out.display()
    );
    let dtnd = match &s.dtn {
        Some(_) => Some(dtn::agent::find_or_install(opts.dtnd.as_deref())?),
        None => None,
    };
    let mut result = Ok(());
    for (k, case) in s.cases.iter().enumerate() {
        let r = if let Some(p) = &s.lte {
            lte::run::run_case(k, case, s, p, opts, &work, stop)
        } else if let (Some(p), Some(dtnd)) = (&s.dtn, &dtnd) {
            dtn::run::run_case(k, case, s, p, opts, dtnd, &work, stop)
        } else if let Some(p) = &s.unlike {
            unlike::run::run_case(k, case, s, p, opts, &work, stop)
        } else {
            run_case(k, case, s, opts, &work, stop)
        };
        match r {
            Ok(row) => report.rows.push(row),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    report.wall_s = started.elapsed().as_secs_f64();
    report.complete = result.is_ok();
    let asked = report.asked_ccs();
    report.meta.finish(asked);
    report.write(&opts.out)?;
    result.map(|()| report)
}

fn run_case(
    k: usize,
    case: &Case,
    s: &Scenario,
    opts: &Options,
    work: &Path,
    stop: &AtomicBool,
) -> anyhow::Result<Row> {
    let total = s.cases.len();
    check_stop(stop)?;
    progress(
        k,
        total,
        case,
        &format!("building testbed ({} path(s))", case.links.len()),
    );
    // End hosts and acceleration need IPv4 inside the tunnel.
    let with_accel = opts.accel && case.combo.inner == 4 && s.tests.contains(&TestKind::AccelTcp);
    let extras = testbed::Extras {
        accel: with_accel,
        accel_legs: opts.accel_legs.clone(),
        ..Default::default()
    };
    let mut tb = Testbed::build_with(k, case, work, &opts.mptd, stop, extras)
        .with_context(|| format!("case {}: building the testbed", k + 1))?;
    let ideal_bps: u64 = case.links.iter().filter_map(Link::rate_bps).sum();
    let mut row = Row {
        combo: case.combo.label(),
        n: case.n,
        paths: case.links.len(),
        rtt_ms: case.rtt_ms,
        loss: case.loss,
        extra: case.extra,
        ideal_mbps: ideal_bps as f64 / 1e6,
        ..Row::default()
    };
    let plan = tb.plan.clone();
    let a = tb.a.name().to_string();
    let raw_target = plan.outer(0, 2);
    let tun_target = plan.inner(2);
    let accel_target = endhosts::S_ADDR.to_string();
    let path0_bps = case.links.first().and_then(Link::rate_bps).unwrap_or(0);
    let mut cpu_wall = 0.0;
    let (mut cpu_a, mut cpu_b) = (0.0, 0.0);
    let (mut emu_cpu, mut emu_wall) = (0.0, 0.0);
    let me = std::process::id();
    for &test in &s.tests {
        check_stop(stop)?;
        if tb.wire_failed() {
            bail!("an emulator wire stopped; see the log");
        }
        let (name, target, udp, tunnel) = match test {
            TestKind::RawUdp => (
                "raw UDP over path 0",
                &raw_target,
                Some((
                    (path0_bps as f64 * s.udp_overload) as u64,
                    plan.raw_udp_payload(),
                )),
                false,
            ),
            TestKind::RawTcp => ("raw TCP over path 0", &raw_target, None, false),
            TestKind::Udp => (
                "UDP through the tunnel",
                &tun_target,
                Some((
                    (ideal_bps as f64 * s.udp_overload) as u64,
                    plan.udp_payload(),
                )),
                true,
            ),
            TestKind::Tcp => ("TCP through the tunnel", &tun_target, None, true),
            TestKind::Http => ("HTTP download through the tunnel", &tun_target, None, true),
            TestKind::AccelTcp => (
                "TCP end host to end host, accelerated",
                &accel_target,
                None,
                true,
            ),
        };
        if test == TestKind::AccelTcp && !with_accel {
            continue;
        }
        if let Some((0, _)) = udp {
            progress(
                k,
                total,
                case,
                &format!("{name}: skipped (link has no rate limit)"),
            );
            continue;
        }
        progress(
            k,
            total,
            case,
            &format!(
                "{name} ({} s{}{})",
                s.duration.as_secs(),
                if s.omit.is_zero() || matches!(test, TestKind::Http) {
                    String::new()
                } else {
                    format!(" after {} s ramp-up", s.omit.as_secs())
                },
                udp.map_or(String::new(), |(r, _)| format!(
                    ", offered {:.0} Mbit/s",
                    r as f64 / 1e6
                ))
            ),
        );
        let json = work.join(format!("iperf3-{k}-{test:?}.json").to_lowercase());
        let c0 = (tb.mptd_a.cpu_time(), tb.mptd_b.cpu_time(), Instant::now());
        let self0 = cpu_time(me);
        let m = if test == TestKind::Http {
            // Sized to take about the test duration at the ideal rate.
            let size = if ideal_bps > 0 {
                (ideal_bps as f64 / 8.0 * s.duration.as_secs_f64()) as u64
            } else {
                1 << 30
            };
            http::download(
                &a,
                plan.inner_sockaddr(http::PORT)?,
                size,
                3 * s.duration + Duration::from_secs(20),
                stop,
            )
        } else {
            let (ns, server_ns) = match (&tb.hosts, test) {
                (Some(h), TestKind::AccelTcp) => (h.c.name(), h.s.name()),
                _ => (a.as_str(), tb.b.name()),
            };
            iperf::run(
                &iperf::Run {
                    ns,
                    server_ns,
                    target,
                    duration: s.duration,
                    udp,
                    json_out: &json,
                    cc: None,
                    omit: s.omit,
                    // UDP offers its rate as one stream (-b is per stream).
                    streams: if udp.is_none() { s.streams } else { 1 },
                    mptcp: false,
                },
                stop,
            )
        }
        .with_context(|| format!("case {}: {name}", k + 1))?;
        if tunnel {
            let c1 = (tb.mptd_a.cpu_time(), tb.mptd_b.cpu_time());
            cpu_wall += c0.2.elapsed().as_secs_f64();
            if let (Some(a0), Some(a1)) = (c0.0, c1.0) {
                cpu_a += (a1 - a0).as_secs_f64();
            }
            if let (Some(b0), Some(b1)) = (c0.1, c1.1) {
                cpu_b += (b1 - b0).as_secs_f64();
            }
            // The HTTP server and client run in this process; leave that
            // test out of the emulator's share.
            if test != TestKind::Http {
                if let (Some(s0), Some(s1)) = (self0, cpu_time(me)) {
                    emu_cpu += s1.saturating_sub(s0).as_secs_f64();
                    emu_wall += c0.2.elapsed().as_secs_f64();
                }
            }
        }
        println!(
            "    {:.1} Mbit/s{}",
            m.mbps,
            m.loss_pct
                .map_or(String::new(), |l| format!(", loss {l:.1} %"))
        );
        match test {
            TestKind::RawUdp => row.raw_udp = Some(m),
            TestKind::RawTcp => row.raw_tcp = Some(m),
            TestKind::Udp => row.udp = Some(m),
            TestKind::Tcp => row.tcp = Some(m),
            TestKind::Http => row.http = Some(m),
            TestKind::AccelTcp => row.accel_tcp = Some(m),
        }
    }
    if cpu_wall > 0.0 {
        row.cpu_a_pct = Some(100.0 * cpu_a / cpu_wall);
        row.cpu_b_pct = Some(100.0 * cpu_b / cpu_wall);
    }
    if emu_wall > 0.0 {
        row.emu_cpu_pct = Some(100.0 * emu_cpu / emu_wall);
    }
    for p in [&mut tb.mptd_a, &mut tb.mptd_b] {
        if let Some(st) = p.exited() {
            bail!(
                "{} died during the measurements ({st}):\n{}",
                p.name,
                p.log_tail()
            );
        }
    }
    row.mptd_status_a = match testbed::mptd_status(&tb.control_a) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(error = %e, "no status from mptd A");
            None
        }
    };
    row.mptd_status_b = match testbed::mptd_status(&tb.control_b) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(error = %e, "no status from mptd B");
            None
        }
    };
    row.tunnel_rtt_ms = mean_path_rtt(row.mptd_status_a.as_ref());
    row.wires = tb.stop_wires();
    row.finish();
    progress(k, total, case, "tearing down");
    drop(tb);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamp_is_civil_time() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_700_000_000), "20231114-221320");
    }
}
