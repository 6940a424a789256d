//! One TCP stream through the emulator against the same testbed without it
//! (issue 15): how much of the machine's TCP rate the wire can carry with
//! MTU-sized frames.
//!
//! ```text
//! sudo cargo bench -p mpt-emu --bench tcp_through -- [--rounds 3] [--secs 5]
//!      [--cc cubic,bbr] [--rates 5gbit,1gbit] [--offloads]
//! ```
//!
//! `--offloads` turns TSO/GSO/GRO back on at the endpoints (`a0`, `b0`,
//! the direct pair): the wire then receives 64 KiB aggregates and cuts them
//! into packets itself (module `gso`).
//!
//! Testbed: the self-test's three namespaces (endpoints `a`, `b`, wire in
//! `m`, offloads off on all four veth ends, so every frame is one packet),
//! plus a direct veth pair between `a` and `b`, also without offloads. Per
//! congestion control and round, in this order:
//!
//! * `direct`: iperf3 over the direct pair (no middle namespace at all);
//! * `bridge`: iperf3 over the same veths as the emulator, forwarded by a
//!   kernel bridge in `m` instead (the path minus the emulator);
//! * `emu RATE`: the bridge removed, the wire started in `m` exactly as
//!   `mpt emu run --netns m --a ma --b mb --rate RATE` starts it (both
//!   directions shaped, default queue, SCHED_FIFO 20, seed 1).
//!
//! Each run is `iperf3 -t SECS -O 1` (first second omitted); the table gives
//! every run, the medians and the ratio of the emulator's median to the
//! higher of the two baselines' medians. It is a benchmark, not a test: the
//! figures depend on the machine and its load, and the runs are interleaved
//! so that a burst of load elsewhere hits all variants alike.
//!
//! Needs root and iperf3. Namespaces are `mptemu-<pid>-tcp-*`, removed on
//! every exit path (Ctrl-C included).

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mpt_emu::netns::{self, ip, Testbed, A_IF, B_IF, B_IP, M_A_IF, M_B_IF};
use mpt_emu::profile::{self, LinkSpec};
use mpt_emu::stats::DirectionReport;
use mpt_emu::units::{format_rate, parse_rate};
use mpt_emu::wire::{Wire, WireConfig, DEFAULT_RT_PRIORITY};
use mpt_emu::{signal, sys};

/// Addresses of the direct pair (its own subnet, so routing picks it).
const DIRECT_A: &str = "10.78.0.1";
const DIRECT_B: &str = "10.78.0.2";
const PORT: &str = "5299";

struct Options {
    rounds: usize,
    secs: u32,
    ccs: Vec<String>,
    rates: Vec<u64>,
    offloads: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        rounds: 3,
        secs: 5,
        ccs: vec!["cubic".into(), "bbr".into()],
        rates: vec![5_000_000_000, 1_000_000_000],
        offloads: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        // cargo bench passes --bench to every bench binary.
        if a == "--bench" {
            continue;
        }
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--rounds" => o.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--secs" => o.secs = value()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--offloads" => o.offloads = true,
            "--cc" => o.ccs = value()?.split(',').map(str::to_string).collect(),
            "--rates" => {
                o.rates = value()?
                    .split(',')
                    .map(|r| parse_rate(r).map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

/// The iperf3 server in `b`, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One iperf3 run: (received bit/s, sender retransmits).
fn iperf(ns_a: &str, dst: &str, secs: u32, cc: &str) -> Result<(f64, u64), String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", ns_a, "iperf3", "-c", dst, "-p", PORT, "-J", "-O", "1",
        ])
        .args(["-t", &secs.to_string(), "-C", cc])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("iperf3: {e}"))?;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("iperf3 output is not JSON ({e})"))?;
    if let Some(err) = doc.get("error") {
        return Err(format!("iperf3: {err}"));
    }
    let end = &doc["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or("iperf3: no sum_received")?;
    let retr = end["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    Ok((bps, retr))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("tcp_through: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let o = parse_args()?;
    if !sys::is_root() {
        return Err("needs root (namespaces, packet sockets)".into());
    }
    let stop: &'static AtomicBool = signal::install().map_err(|e| e.to_string())?;
    netns::remove_stale();
    let bed = Testbed::build("tcp").map_err(|e| format!("testbed: {e}"))?;
    let (a, b, m) = (bed.a.name(), bed.b.name(), bed.m.name());
    let sh = |args: &[&str]| ip(args).map_err(|e| e.to_string());
    // The direct pair, offloads off like the testbed's.
    sh(&[
        "link", "add", "xa", "netns", a, "type", "veth", "peer", "name", "xb", "netns", b,
    ])?;
    for (ns, ifname, addr) in [(a, "xa", DIRECT_A), (b, "xb", DIRECT_B)] {
        sh(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            ifname,
        ])?;
        sh(&["-n", ns, "link", "set", "dev", ifname, "up"])?;
        let on = o.offloads;
        netns::in_netns(ns, move || sys::set_offloads(ifname, on)).map_err(|e| e.to_string())?;
    }
    if o.offloads {
        for (ns, ifname) in [(a, A_IF), (b, B_IF)] {
            netns::in_netns(ns, move || sys::set_offloads(ifname, true))
                .map_err(|e| e.to_string())?;
        }
    }
    sh(&["-n", m, "link", "add", "mbr", "type", "bridge"])?;
    sh(&["-n", m, "link", "set", "dev", "mbr", "up"])?;
    let _server = Server(
        Command::new("ip")
            .args(["netns", "exec", b, "iperf3", "-s", "-p", PORT])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("iperf3 -s: {e}"))?,
    );
    std::thread::sleep(Duration::from_millis(300));

    let mut names = vec!["direct".to_string(), "bridge".to_string()];
    names.extend(
        o.rates
            .iter()
            .map(|r| format!("emu {}", format_rate(*r as f64))),
    );
    for cc in &o.ccs {
        let mut figures: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        println!(
            "\n== {cc}: one TCP stream, {} s per run, {}",
            o.secs,
            if o.offloads {
                "endpoint offloads on (aggregates, cut by the wire)"
            } else {
                "offloads off (MTU-sized frames)"
            }
        );
        for round in 0..o.rounds {
            let check = || match stop.load(Ordering::Relaxed) {
                true => Err("interrupted".to_string()),
                false => Ok(()),
            };
            check()?;
            let (bps, retr) = iperf(a, DIRECT_B, o.secs, cc)?;
            println!(
                "round {round} direct          {:>14}  retr {retr}",
                format_rate(bps)
            );
            figures[0].push(bps);

            check()?;
            for i in [M_A_IF, M_B_IF] {
                sh(&["-n", m, "link", "set", "dev", i, "master", "mbr"])?;
            }
            let res = iperf(a, B_IP, o.secs, cc);
            for i in [M_A_IF, M_B_IF] {
                sh(&["-n", m, "link", "set", "dev", i, "nomaster"])?;
            }
            let (bps, retr) = res?;
            println!(
                "round {round} bridge          {:>14}  retr {retr}",
                format_rate(bps)
            );
            figures[1].push(bps);

            for (k, &rate) in o.rates.iter().enumerate() {
                check()?;
                let both = LinkSpec {
                    rate: Some(Some(rate)),
                    ..LinkSpec::default()
                };
                let d = LinkSpec::default();
                let (a_to_b, b_to_a) =
                    profile::resolve(None, &both, &d, &d).map_err(|e| e.to_string())?;
                let wire = Wire::start(WireConfig {
                    a: M_A_IF.into(),
                    b: M_B_IF.into(),
                    netns: Some(m.to_string()),
                    a_to_b,
                    b_to_a,
                    seed: 1,
                    disable_offloads: true,
                    realtime_priority: Some(DEFAULT_RT_PRIORITY),
                })
                .map_err(|e| e.to_string())?;
                let res = iperf(a, B_IP, o.secs, cc);
                let report = wire.stop().map_err(|e| e.to_string())?;
                let (bps, retr) = res?;
                println!(
                    "round {round} {:<15} {:>14}  retr {retr}  {}",
                    names[2 + k],
                    format_rate(bps),
                    wire_summary(&report.a_to_b)
                );
                figures[2 + k].push(bps);
            }
        }
        let medians: Vec<f64> = figures.iter().map(|f| median(f)).collect();
        let base = medians[0].max(medians[1]);
        println!("-- {cc}: medians of {} runs", o.rounds);
        for (name, med) in names.iter().zip(&medians) {
            println!(
                "{cc:<6} {name:<15} {:>14}  {:.2} of the better baseline",
                format_rate(*med),
                med / base
            );
        }
    }
    drop(bed);
    Ok(())
}

fn wire_summary(d: &DirectionReport) -> String {
    format!(
        "wire a->b: {} frames, {} gso, drops {} (queue {}, send {}), departure error mean {:.1} us",
        d.tx_frames,
        d.gso_frames,
        d.drops.total(),
        d.drops.queue,
        d.drops.send_error,
        d.delay_error_us.mean
    )
}
