//! `mpt emu`'s arguments: the link flags of `mpt emu run` (each parsed by
//! the same rules as a profile key), `selftest` and `profiles`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use mpt_emu::profile::{ConfigError, LinkSpec};
use mpt_emu::{units, wire};

#[derive(Subcommand, Debug)]
pub(crate) enum EmuCommand {
    /// Emulate a link between interfaces A and B until Ctrl-C, SIGTERM or --duration.
    #[command(after_help = RUN_HELP)]
    Run(Box<RunArgs>),
    /// Measure the emulator's accuracy in throw-away namespaces (needs root).
    #[command(after_help = SELFTEST_HELP)]
    Selftest(SelftestArgs),
    /// List the link profile presets, or print one.
    #[command(after_help = "Examples:\n  mpt emu profiles\n  mpt emu profiles lte > my-lte.toml")]
    Profiles {
        /// Preset to print as TOML.
        name: Option<String>,
    },
}

const RUN_HELP: &str = "\
Frames arriving on --a leave on --b after the a->b impairments, and the
other way round. Run it inside the namespace that holds both interfaces
(or pass --netns). Rates count whole Ethernet frames (14-byte header + IP
packet) as the packet socket sees them.

Direction-specific settings: the link flags (--rate, --delay, ...) apply to
both directions; --ab KEY=VALUE and --ba KEY=VALUE override one direction,
with the keys of a profile's [link] table: rate, delay, jitter, jitter_dist,
reorder, loss, ge, queue, outage, periodic, relay, trace, trace_format.
Layers, later
wins: profile [link], profile [a_to_b]/[b_to_a], link flags, --ab/--ba.
Profile presets: geo-sat, lte, wifi, ethernet-100m, dtn-hop (see
`mpt emu profiles`).

Examples:
  mpt emu run --netns mid --a veth-a --b veth-b --rate 10mbit --delay 300ms
  mpt emu run --a eth1 --b eth2 --profile lte --ab rate=2mbit --duration 60
  mpt emu run --a m0 --b m1 --rate 10mbit --outage 10s+5s --relay 20MB
  mpt emu run --a m0 --b m1 --loss 1% --ge 0.01,0.3 --seed 7 --report-json out.json
  mpt emu run --a m0 --b m1 --trace lte.trace --periodic 20s/2s
  mpt emu run --a m0 --b m1 --trace-format mahimahi --ab trace=lte.up --ba trace=lte.down

Trace file (--trace-format mpt, the default): lines `TIME RATE [DELAY]`
(bare numbers: s, bit/s, ms; '-' keeps the configured value; rate 0 = no
capacity, an outage), e.g. `1.5s 8mbit 35ms`. --trace-format mahimahi: one
delivery opportunity of a full-size packet per line, the millisecond it
occurs at; the file loops; packets wait in the queue between opportunities.";

const SELFTEST_HELP: &str = "\
Builds namespaces mptemu-<pid>-st-{a,b,m} (removed on every exit path),
runs UDP traffic through the real wire and checks what this machine can
verify. First the capacity of the path itself (full-size frames flat out,
nothing shaped, 1 s); then the rates 1, 10, 100 Mbit/s ... up to half that
capacity rounded down to one significant digit (the top rate), achieved
within +-1 % up to 100 Mbit/s and +-5 % above; a Mahimahi trace of known
mean within +-2 %; mean delay error < 0.1 ms at 300 ms over >= 1000
packets; loss within the 99 % binomial interval of the PER; outage edges
within 5 ms; relay custody delivering everything in order. Exit code 0
only if every bounded figure passes. About 20 s.

Examples:
  sudo mpt emu selftest
  sudo mpt emu selftest --json | jq '.checks[] | select(.pass == false)'";

#[derive(Args, Debug)]
pub(crate) struct SelftestArgs {
    /// Print the results as JSON (for scripts) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Parses one link flag through the same rules as a profile key.
fn spec(key: &'static str, value: &str) -> Result<LinkSpec, String> {
    LinkSpec::parse_override(key, &format!("{key}={value}")).map_err(|e| match e {
        ConfigError::Override { msg, .. } => msg,
        other => other.to_string(),
    })
}

macro_rules! spec_parser {
    ($($fn:ident => $key:literal),* $(,)?) => {
        $( fn $fn(s: &str) -> Result<LinkSpec, String> { spec($key, s) } )*
    };
}
spec_parser!(
    p_rate => "rate", p_delay => "delay", p_jitter => "jitter", p_dist => "jitter_dist",
    p_loss => "loss", p_ge => "ge", p_queue => "queue", p_outage => "outage",
    p_periodic => "periodic", p_relay => "relay", p_trace => "trace",
    p_trace_format => "trace_format",
);

fn p_ab(s: &str) -> Result<LinkSpec, String> {
    LinkSpec::parse_override("ab", s).map_err(|e| e.to_string())
}
fn p_ba(s: &str) -> Result<LinkSpec, String> {
    LinkSpec::parse_override("ba", s).map_err(|e| e.to_string())
}
fn p_seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) => Duration::try_from_secs_f64(v).map_err(|e| e.to_string()),
        Err(_) => units::parse_duration(s).map_err(|e| e.to_string()),
    }
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// Interface of side a.
    #[arg(long = "a", value_name = "IF")]
    pub(crate) a: String,
    /// Interface of side b.
    #[arg(long = "b", value_name = "IF")]
    pub(crate) b: String,
    /// Network namespace (ip netns) holding both interfaces.
    #[arg(long, value_name = "NAME")]
    pub(crate) netns: Option<String>,
    /// Link profile: a preset name or a TOML file.
    #[arg(long, value_name = "NAME|FILE")]
    pub(crate) profile: Option<String>,
    /// Rate on whole Ethernet frames, e.g. 10mbit, 1gbit, unlimited.
    #[arg(long, value_name = "RATE", value_parser = p_rate)]
    pub(crate) rate: Option<LinkSpec>,
    /// Fixed one-way delay, e.g. 300ms.
    #[arg(long, value_name = "DURATION", value_parser = p_delay)]
    pub(crate) delay: Option<LinkSpec>,
    /// Jitter: half-width (uniform) or standard deviation (normal), e.g. 5ms.
    #[arg(long, value_name = "DURATION", value_parser = p_jitter)]
    pub(crate) jitter: Option<LinkSpec>,
    /// Jitter distribution: uniform or normal.
    #[arg(long, value_name = "DIST", value_parser = p_dist)]
    pub(crate) jitter_dist: Option<LinkSpec>,
    /// Let jitter reorder packets (default: order preserved).
    #[arg(long)]
    pub(crate) reorder: bool,
    /// Bernoulli packet error rate, e.g. 0.01 or 1%.
    #[arg(long, value_name = "PER", value_parser = p_loss)]
    pub(crate) loss: Option<LinkSpec>,
    /// Gilbert-Elliott bursts p,r[,h[,k]]: p good->bad, r bad->good, h/k delivery probability in bad/good (default 0/1).
    #[arg(long, value_name = "P,R[,H[,K]]", value_parser = p_ge)]
    pub(crate) ge: Option<LinkSpec>,
    /// Tail-drop limit of the transmit backlog, e.g. 100kB (default 1514000 B).
    #[arg(long, value_name = "BYTES", value_parser = p_queue)]
    pub(crate) queue: Option<LinkSpec>,
    /// Down windows from the start, START+LEN[,START+LEN...], e.g. 10s+2s,30s+500ms.
    #[arg(long, value_name = "WINDOWS", value_parser = p_outage)]
    pub(crate) outage: Option<LinkSpec>,
    /// Periodic contacts UP/DOWN, e.g. 20s/10s (starts up).
    #[arg(long, value_name = "UP/DOWN", value_parser = p_periodic)]
    pub(crate) periodic: Option<LinkSpec>,
    /// Store-and-forward custody: hold up to BYTES over outages instead of dropping.
    #[arg(long, value_name = "BYTES", value_parser = p_relay)]
    pub(crate) relay: Option<LinkSpec>,
    /// Rate/delay trace file (TIME RATE [DELAY] per line).
    #[arg(long, value_name = "FILE", value_parser = p_trace)]
    pub(crate) trace: Option<LinkSpec>,
    /// How --trace is read: mpt (TIME RATE [DELAY]) or mahimahi (one delivery opportunity per line, ms).
    #[arg(long, value_name = "FORMAT", value_parser = p_trace_format)]
    pub(crate) trace_format: Option<LinkSpec>,
    /// Override for a->b only, KEY=VALUE (repeatable), e.g. --ab rate=2mbit.
    #[arg(long, value_name = "KEY=VALUE", value_parser = p_ab)]
    pub(crate) ab: Vec<LinkSpec>,
    /// Override for b->a only, KEY=VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = p_ba)]
    pub(crate) ba: Vec<LinkSpec>,
    /// Seed for loss and jitter (default: the profile's, else 1).
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
    /// Stop after this long (seconds, or with a unit), e.g. 60 or 2m.
    #[arg(long, value_name = "S", value_parser = p_seconds)]
    pub(crate) duration: Option<Duration>,
    /// Also write the configuration and report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) report_json: Option<PathBuf>,
    /// Leave TSO/GSO/GRO of the interfaces as they are.
    #[arg(long)]
    pub(crate) keep_offloads: bool,
    /// SCHED_FIFO priority of the wire threads (1-99); 0 = normal scheduling.
    #[arg(long, value_name = "N", default_value_t = wire::DEFAULT_RT_PRIORITY,
          value_parser = clap::value_parser!(i32).range(0..=99))]
    pub(crate) rt_priority: i32,
}
