//! `mpt bench`: the arguments checked and turned into the harness's
//! options (`mpt_cli::bench`), the run, and its summary.

use std::time::Duration;

use anyhow::Context;
use mpt_emu::signal;

use crate::cli::bench::BenchArgs;
use crate::exit::{runtime, usage, Failure};

/// `mpt bench SCENARIO`: the scenario's cases on an emulated testbed.
pub(crate) fn bench(args: BenchArgs) -> Result<u8, Failure> {
    use mpt_cli::bench::{self, scenario};
    if let Some(tool) = args.tool {
        return super::bench_tools::run(tool);
    }
    let Some(name) = args.scenario.clone() else {
        return Err(usage(anyhow::anyhow!("a SCENARIO is needed")));
    };
    if name == "clients" {
        return bench_clients(args);
    }
    if name == "soak" {
        return super::bench_soak::bench_soak(args);
    }
    let clients_only = [
        ("--clients", args.clients.is_some()),
        ("--paths-per-client", args.paths_per_client.is_some()),
        ("--senders", args.senders.is_some()),
        ("--port-per-client", args.port_per_client),
        ("--flood", args.flood),
        ("--rekey-after", args.rekey_after.is_some()),
        ("--nofile", args.nofile.is_some()),
        ("--recover-within", args.recover_within.is_some()),
    ];

    if let Some((flag, _)) = clients_only.iter().find(|(_, set)| *set) {
        return Err(usage(anyhow::anyhow!(
            "{flag} applies to `mpt bench clients` and `mpt bench soak` only"
        )));
    }
    let combos = args
        .combos
        .as_deref()
        .map(|c| scenario::parse_combos(&[c.to_string()]))
        .transpose()
        .map_err(|m| usage(anyhow::anyhow!("--combos: {m}")))?;
    let ov = scenario::Overrides {
        paths: args
            .paths
            .map(|p| p.into_iter().map(|n| n as usize).collect()),
        duration: args.duration,
        combos,
        quick: args.quick,
        scheduler: args.scheduler,
    };
    let sc = scenario::load(&name, &ov).map_err(usage)?;
    if args.dtnd.is_some() && sc.dtn.is_none() {
        return Err(usage(anyhow::anyhow!(
            "--dtnd applies to dtn-relay scenarios only"
        )));
    }
    let mptd = match args.mptd {
        Some(p) if p.is_file() => p,
        Some(p) => {
            return Err(usage(anyhow::anyhow!(
                "--mptd {}: no such file",
                p.display()
            )))
        }
        None => bench::find_mptd().map_err(runtime)?,
    };
    let choice = match args.baseline.as_str() {
        "mptcp" => bench::mptcp::Choice::Mptcp,
        "none" => bench::mptcp::Choice::None,
        _ => bench::mptcp::Choice::Auto,
    };
    // unlike, and handover variants with a bulk stream across a silent
    // WiFi outage, measure kernel MPTCP beside the tunnel.
    let lte_baseline = sc.lte.as_ref().is_some_and(bench::lte::mptcp::any_applies);
    let mptcp = if sc.unlike.is_some() || lte_baseline {
        bench::mptcp::resolve(choice).map_err(runtime)?
    } else if choice == bench::mptcp::Choice::Mptcp {
        return Err(usage(anyhow::anyhow!(
            "--baseline mptcp applies to `mpt bench unlike`, `mpt bench handover` (variants with a \
             bulk stream across a silent WiFi) and scenario files of their kind only"
        )));
    } else {
        false
    };
    let accel = bench::accel_choice(args.accel.as_str(), args.quick, &sc).map_err(usage)?;
    let out = args.out.unwrap_or_else(|| bench::default_out(&sc.name));
    let stop = signal::install()
        .context("installing signal handlers")
        .map_err(runtime)?;
    let opts = bench::Options {
        scenario: sc,
        out,
        mptd,
        mptcp,
        accel,
        accel_legs: args.accel_legs,
        dtnd: args.dtnd,
    };
    match bench::run(&opts, stop) {
        Ok(report) => {
            println!();
            print!("{}", report.table());
            println!(
                "wall time {:.1} s; results in {}",
                report.wall_s,
                opts.out.display()
            );
            Ok(0)
        }
        Err(e) if e.is::<bench::Interrupted>() => {
            eprintln!(
                "interrupted; testbed removed, partial results in {}",
                opts.out.display()
            );
            Ok(130)
        }
        Err(e) => Err(runtime(e.context(format!(
            "mpt bench failed (partial results and logs in {})",
            opts.out.display()
        )))),
    }
}

/// `mpt bench clients`: one server, many clients.
pub(crate) fn mptd_arg(p: Option<std::path::PathBuf>) -> Result<std::path::PathBuf, Failure> {
    match p {
        Some(p) if p.is_file() => Ok(p),
        Some(p) => Err(usage(anyhow::anyhow!(
            "--mptd {}: no such file",
            p.display()
        ))),
        None => mpt_cli::bench::find_mptd().map_err(runtime),
    }
}

fn bench_clients(args: BenchArgs) -> Result<u8, Failure> {
    use mpt_cli::bench::{self, clients};
    if args.paths.is_some() || args.combos.is_some() || args.scheduler.is_some() {
        return Err(usage(anyhow::anyhow!(
            "--paths, --combos and --scheduler do not apply to `mpt bench clients` \
             (see --clients, --paths-per-client)"
        )));
    }
    if args.recover_within.is_some() {
        return Err(usage(anyhow::anyhow!(
            "--recover-within applies to `mpt bench soak` only"
        )));
    }
    let mptd = match args.mptd {
        Some(p) if p.is_file() => p,
        Some(p) => {
            return Err(usage(anyhow::anyhow!(
                "--mptd {}: no such file",
                p.display()
            )))
        }
        None => bench::find_mptd().map_err(runtime)?,
    };
    let out = args.out.unwrap_or_else(|| bench::default_out("clients"));
    let mut o = clients::Options::new(out, mptd);
    if args.quick {
        o.clients = 8;
        o.senders = 2;
        o.duration = Duration::from_secs(3);
    }
    if let Some(n) = args.clients {
        o.clients = n;
    }
    if let Some(n) = args.paths_per_client {
        o.paths_per_client = n;
    }
    if let Some(k) = args.senders {
        o.senders = k;
    } else {
        o.senders = o.senders.min(o.clients);
    }
    if let Some(d) = args.duration {
        o.duration = Duration::from_secs_f64(d.round().max(1.0));
    }
    o.shared_port = !args.port_per_client;
    o.flood = args.flood;
    o.nofile = args.nofile;
    if let Some(r) = args.rekey_after {
        o.rekey_after = (r > 0).then(|| Duration::from_secs(r));
    }
    o.check().map_err(|m| usage(anyhow::anyhow!(m)))?;
    let out = o.out.clone();
    run_suite(
        "clients",
        &out,
        |stop| clients::run(&o, stop),
        |report| {
            print!("{}", report.table());
            0
        },
    )
}

/// Runs a many-daemon suite (`clients`, `soak`) under the signal handlers
/// and turns its outcome into an exit code: `finish`'s after printing the
/// report, 130 on Ctrl-C (the testbed is gone, partial results kept), a
/// runtime failure naming the results folder otherwise.
pub(super) fn run_suite<R>(
    name: &str,
    out: &std::path::Path,
    run: impl FnOnce(&'static std::sync::atomic::AtomicBool) -> anyhow::Result<R>,
    finish: impl FnOnce(R) -> u8,
) -> Result<u8, Failure> {
    let stop = signal::install()
        .context("installing signal handlers")
        .map_err(runtime)?;
    match run(stop) {
        Ok(report) => {
            println!();
            let code = finish(report);
            println!("results in {}", out.display());
            Ok(code)
        }
        Err(e) if e.is::<mpt_cli::bench::Interrupted>() => {
            eprintln!(
                "interrupted; testbed removed, partial results in {}",
                out.display()
            );
            Ok(130)
        }
        Err(e) => Err(runtime(e.context(format!(
            "mpt bench {name} failed (partial results and logs in {})",
            out.display()
        )))),
    }
}
