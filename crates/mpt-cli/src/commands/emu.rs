//! `mpt emu`: run the link emulator, measure it, list its profiles.

use anyhow::Context;
use mpt_emu::profile::{self, ConfigError, LinkSpec, Profile};
use mpt_emu::{selftest, signal, wire};

use crate::cli::emu::{RunArgs, SelftestArgs};
use crate::exit::{runtime, usage, Failure, EXIT_RUNTIME};

/// `mpt emu run`: the link flags and profile resolved per direction, the
/// wire run until stopped, its report printed (and written as JSON).
pub(crate) fn emu_run(args: RunArgs) -> Result<u8, Failure> {
    let profile = args
        .profile
        .as_deref()
        .map(Profile::load)
        .transpose()
        .map_err(usage)?;
    let mut both = LinkSpec::default();
    for s in [
        &args.rate,
        &args.delay,
        &args.jitter,
        &args.jitter_dist,
        &args.loss,
        &args.ge,
        &args.queue,
        &args.outage,
        &args.periodic,
        &args.relay,
        &args.trace,
        &args.trace_format,
    ]
    .into_iter()
    .flatten()
    {
        both.overlay(s);
    }
    if args.reorder {
        both.reorder = Some(true);
    }
    let fold = |v: &[LinkSpec]| {
        let mut s = LinkSpec::default();
        v.iter().for_each(|o| s.overlay(o));
        s
    };
    let (a_to_b, b_to_a) =
        profile::resolve(profile.as_ref(), &both, &fold(&args.ab), &fold(&args.ba))
            .map_err(usage)?;
    let seed = args
        .seed
        .or(profile.as_ref().and_then(|p| p.seed))
        .unwrap_or(1);
    let stop = signal::install()
        .context("installing signal handlers")
        .map_err(runtime)?;
    let cfg = wire::WireConfig {
        a: args.a,
        b: args.b,
        netns: args.netns,
        a_to_b,
        b_to_a,
        seed,
        disable_offloads: !args.keep_offloads,
        realtime_priority: (args.rt_priority > 0).then_some(args.rt_priority),
    };
    let config_json = serde_json::json!({
        "a": cfg.a, "b": cfg.b, "netns": cfg.netns, "seed": seed,
        "a_to_b": cfg.a_to_b, "b_to_a": cfg.b_to_a,
    });
    tracing::info!(seed, profile = ?args.profile, "starting wire; Ctrl-C stops and prints the report");
    let report = wire::run(cfg, stop, args.duration).map_err(|e| match &e {
        wire::WireError::Setup { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
            usage(e)
        }
        _ => runtime(e),
    })?;
    print!("{}", report.render());
    if let Some(path) = args.report_json {
        let doc = serde_json::json!({"config": config_json, "report": report});
        let text = serde_json::to_string_pretty(&doc).map_err(runtime)?;
        std::fs::write(&path, text + "\n")
            .with_context(|| format!("writing {}", path.display()))
            .map_err(runtime)?;
    }
    Ok(0)
}

/// `mpt emu selftest`: the emulator measured in throw-away namespaces.
pub(crate) fn emu_selftest(args: &SelftestArgs) -> Result<u8, Failure> {
    if !mpt_emu::sys::is_root() {
        return Err(runtime(anyhow::anyhow!(
            "mpt emu selftest needs root (it creates network namespaces and packet sockets)"
        )));
    }
    let stop = signal::install()
        .context("installing signal handlers")
        .map_err(runtime)?;
    let report = selftest::run(stop).map_err(runtime)?;
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(runtime)?;
        println!("{text}");
    } else {
        print!("{}", report.render());
    }
    Ok(if report.passed { 0 } else { EXIT_RUNTIME })
}

/// `mpt emu profiles [NAME]`: the presets listed, or one printed.
pub(crate) fn emu_profiles(name: Option<&str>) -> Result<u8, Failure> {
    match name {
        Some(name) => {
            let text = profile::PRESETS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| *t)
                .ok_or_else(|| {
                    usage(ConfigError::UnknownProfile {
                        name: name.to_string(),
                        presets: profile::preset_names().join(", "),
                    })
                })?;
            print!("{text}");
        }
        None => {
            for (n, text) in profile::PRESETS {
                let desc = Profile::parse(text, n, None)
                    .ok()
                    .and_then(|p| p.description)
                    .unwrap_or_default();
                println!("{n:<14} {desc}");
            }
        }
    }
    Ok(0)
}
