//! `mpt bench soak`: the arguments turned into the soak's options, the
//! run, its summary and the exit code of its verdict (1 on FAIL).

use std::time::Duration;

use super::bench::mptd_arg;
use crate::cli::bench::BenchArgs;
use crate::exit::{usage, Failure};

pub(crate) fn bench_soak(args: BenchArgs) -> Result<u8, Failure> {
    use mpt_cli::bench::{self, soak};
    let unsupported = [
        ("--paths", args.paths.is_some()),
        ("--combos", args.combos.is_some()),
        ("--scheduler", args.scheduler.is_some()),
        ("--port-per-client", args.port_per_client),
        ("--flood", args.flood),
    ];
    if let Some((flag, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(usage(anyhow::anyhow!(
            "{flag} does not apply to `mpt bench soak` (it always floods, on the shared port)"
        )));
    }
    let mptd = mptd_arg(args.mptd)?;
    let out = args.out.unwrap_or_else(|| bench::default_out("soak"));
    let mut o = soak::Options::new(out, mptd);
    if args.quick {
        o.quick();
    }
    if let Some(n) = args.clients {
        o.clients = n;
    }
    if let Some(n) = args.paths_per_client {
        o.paths_per_client = n;
    }
    if let Some(k) = args.senders {
        o.senders = k;
    }
    if let Some(d) = args.duration {
        o.duration = Duration::from_secs_f64(d.round().max(1.0));
    }
    if let Some(r) = args.rekey_after {
        o.rekey_after = Duration::from_secs(r);
    }
    if let Some(r) = args.recover_within {
        o.recover_within = Duration::from_secs(r);
    }
    o.nofile = args.nofile;
    o.check().map_err(|m| usage(anyhow::anyhow!(m)))?;
    let out = o.out.clone();
    super::bench::run_suite(
        "soak",
        &out,
        |stop| soak::run(&o, stop),
        |report| {
            print!("{}", report.summary());
            if report.pass {
                0
            } else {
                1
            }
        },
    )
}
