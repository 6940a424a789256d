//! `mpt`: the command line of the multipath tunnel. This file parses
//! arguments, maps errors to exit codes (0 ok, 1 runtime failure, 2 usage or
//! configuration error) and prints; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use mpt_api::status::Status;
use mpt_api::{PathState, Request, Response};
use mpt_cli::ctl::{self, remote::Endpoint};
use mpt_emu::profile::{self, ConfigError, LinkSpec, Profile};
use mpt_emu::{selftest, signal, units, wire};

const EXIT_RUNTIME: u8 = 1;
const EXIT_USAGE: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "mpt",
    version,
    about = "mpt multipath tunnel: control client, link emulator, benchmarks",
    after_help = CLI_HELP
)]
struct Cli {
    /// Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug
    /// [default: info; warn for bench, whose progress goes to stdout].
    #[arg(long, global = true)]
    log: Option<String>,
    /// mptd's control socket (status, path, reload).
    #[arg(long, global = true, env = "MPT_SOCKET", value_name = "PATH",
          default_value = ctl::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Manage a remote mptd over its command port ([daemon] cmd_port)
    /// instead of the local socket (status, path, reload; give it before
    /// the command). Needs --remote-conn and --key.
    #[arg(long, value_name = "HOST:PORT", value_parser = ctl::remote::parse_target,
          requires_all = ["remote_conn", "key"])]
    remote: Option<String>,
    /// With --remote: the connection, as the remote mptd names it, whose
    /// pre-shared key --key holds; the key manages that connection only.
    #[arg(long, value_name = "NAME", requires = "remote")]
    remote_conn: Option<String>,
    /// With --remote: that connection's key file (as written by `mpt
    /// genkey`, mode 0600).
    #[arg(long, value_name = "FILE", requires = "remote")]
    key: Option<PathBuf>,
    /// With --remote: UDP (one datagram each way) instead of TCP.
    #[arg(long, requires = "remote")]
    udp: bool,
    #[command(subcommand)]
    cmd: Command,
}

impl Cli {
    /// Where status, path and reload go: --remote, else the socket.
    fn endpoint(&self) -> Endpoint {
        let (Some(target), Some(conn), Some(key_file)) =
            (&self.remote, &self.remote_conn, &self.key)
        else {
            return Endpoint::Local(self.socket.clone());
        };
        if !matches!(
            self.cmd,
            Command::Status(_) | Command::Path(_) | Command::Reload
        ) {
            Cli::command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "--remote only applies to status, path and reload",
                )
                .exit()
        }
        Endpoint::Remote(ctl::remote::Remote {
            target: target.clone(),
            conn: conn.clone(),
            key_file: key_file.clone(),
            udp: self.udp,
        })
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show connections and paths: state, addresses, weights, RTT, loss, traffic.
    #[command(after_help = STATUS_HELP)]
    Status(StatusArgs),
    /// Change a path at run time: up, down, backup, weights, add, remove.
    #[command(after_help = PATH_HELP, args_conflicts_with_subcommands = true,
              subcommand_negates_reqs = true)]
    Path(PathArgs),
    /// Make mptd re-read its config file and apply what can change at run time.
    #[command(after_help = RELOAD_HELP)]
    Reload,
    /// Print a shell completion script.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Real-time link emulator between two interfaces (netem replacement).
    Emu {
        #[command(subcommand)]
        cmd: EmuCommand,
    },
    /// Benchmark the tunnel on an emulated testbed (needs root, iperf3, mptd).
    #[command(after_help = BENCH_HELP)]
    Bench(BenchArgs),
    /// Write a new pre-shared key (32 random bytes, base64) for `key_file`.
    #[command(after_help = GENKEY_HELP)]
    Genkey {
        /// Write the key to this new file (mode 0600) instead of stdout.
        file: Option<PathBuf>,
    },
    /// Write a new X25519 private key to FILE (mode 0600) and print its public key.
    #[command(after_help = KEYPAIR_HELP)]
    Keypair {
        /// The new private key file ([daemon] private_key_file).
        file: PathBuf,
        /// Replace FILE if it exists (the old key is lost).
        #[arg(long)]
        force: bool,
    },
    /// Print the public key (base64) of a private key file.
    #[command(after_help = PUBKEY_HELP)]
    Pubkey {
        /// A private key file written by `mpt keypair`.
        file: PathBuf,
    },
    /// Configuration files.
    Config {
        #[command(subcommand)]
        cmd: ConfigCommand,
    },
}

const CLI_HELP: &str = "\
Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error.

Examples:
  mpt status
  mpt path add site-b lte2 --local 10.0.3.1 --remote 10.0.3.2
  mpt path remove site-b lte
  mpt --remote 198.51.100.7:7022 --remote-conn site-a --key /etc/mpt/site-a.key status
  sudo mpt bench ethernet --paths 1,2,4";

const STATUS_HELP: &str = "\
Asks mptd over its control socket. The table fits 80 columns: per
connection the session and the non-zero drop counters, then per path its
state, local -> remote address, weights out/in, time since the last
packet received and since the last state change, smoothed/minimum RTT,
loss, packets and bit rates. Rates come from two samples 0.5 s apart
(--once: one sample, byte totals instead). A missing figure shows as '-'.

With more than 8 connections (a server with many clients) the table has
one line per connection instead: its state (up: a path is up; keying:
no session keys yet; waiting: no path yet; else the best path state),
paths up/total, the peer's address (of the first up path; +N: more
addresses), tx/rx bit rates (or bytes with --once) summed over its paths,
and LAST HS, the time since its last handshake (or rekey).
`mpt status CONNECTION` shows one connection in full; --full and --brief
force either layout. An unknown CONNECTION is an error that suggests
close names.

--json prints the daemon's status document (the stable contract for
scripts, see SPEC section 4; with CONNECTION, that connection only) and
takes one sample.

Exit codes: 0 ok, 1 mptd not reachable or answered an error, 2 usage.

Examples:
  mpt status
  mpt status client-017
  mpt --socket /run/mpt/other.sock status --once
  mpt status --json | jq '.connections[].paths[] | {name, state, rtt_ms}'";

#[derive(Args, Debug)]
struct StatusArgs {
    /// Only this connection, in full detail.
    #[arg(value_name = "CONNECTION")]
    conn: Option<String>,
    /// Print the daemon's status document as JSON (for scripts).
    #[arg(long)]
    json: bool,
    /// One sample: byte totals instead of rates (no 0.5 s wait).
    #[arg(long)]
    once: bool,
    /// Every connection in full detail, however many there are.
    #[arg(long, conflicts_with = "brief")]
    full: bool,
    /// One line per connection, however few there are.
    #[arg(long)]
    brief: bool,
}

/// Time between the two status samples that rates are computed from.
const RATE_INTERVAL: Duration = Duration::from_millis(500);

const PATH_HELP: &str = "\
State: up carries traffic, backup carries traffic only while no up path
of the connection is alive, down carries nothing. Weights: OUT is this
side's share of outgoing traffic (1..=1000000), IN the share asked of the
peer (1..=65535, unchanged if not given). The change lasts until mptd
restarts or reloads a config that sets the path otherwise.

`mpt path add` opens a socket on --local (the connection's port) and
tells the peer, which opens its end (on the --remote address, or where
its routing towards --local leads) and answers; the command waits up to
3 s for that answer. A refusal takes the path out again (exit code 1).
The new path carries data once probes went both ways (about one
keepalive). `mpt path remove` stops sending on the path at once, keeps
receiving on it for a few seconds (packets in flight), and tells the
peer. It refuses to remove the only usable path unless --force.
Vertical handover without loss: add the new path, wait until `mpt status`
shows it up, then remove the old one. Run these on one side only.

Examples:
  mpt path site-b lte0 backup
  mpt path site-b eth1 up
  mpt path site-b eth1 weight 200
  mpt path site-b eth1 weight 200 50
  mpt path add site-b wifi0 --local 192.0.2.10 --remote 198.51.100.7 --weight 50
  mpt path remove site-b wifi0";

#[derive(Args, Debug)]
struct PathArgs {
    #[command(subcommand)]
    cmd: Option<PathCommand>,
    /// Connection name.
    #[arg(required = true)]
    conn: Option<String>,
    /// Path name.
    #[arg(required = true)]
    path: Option<String>,
    /// What to do with the path.
    #[arg(required = true, value_enum)]
    action: Option<PathAction>,
    /// weight: the new weight_out.
    #[arg(value_name = "OUT",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(mptd::config::MAX_WEIGHT)))]
    weight_out: Option<u32>,
    /// weight: the new weight_in (default: unchanged).
    #[arg(value_name = "IN", value_parser = clap::value_parser!(u16).range(1..))]
    weight_in: Option<u16>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum PathAction {
    /// Carry traffic.
    Up,
    /// Carry nothing.
    Down,
    /// Carry traffic only while no up path is alive.
    Backup,
    /// Set the weights: OUT [IN].
    Weight,
}

#[derive(Subcommand, Debug)]
enum PathCommand {
    /// Add a path to a running connection; the peer is told.
    #[command(after_help = "Example:\n  \
        mpt path add site-b wifi0 --local 192.0.2.10 --remote 198.51.100.7 --weight 50")]
    Add(PathAddArgs),
    /// Remove a path from a running connection; the peer is told.
    #[command(after_help = "Example:\n  mpt path remove site-b wifi0")]
    Remove {
        /// Connection name.
        conn: String,
        /// Path name.
        path: String,
        /// Remove it even if it is the connection's only usable path.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args, Debug)]
struct PathAddArgs {
    /// Connection name.
    conn: String,
    /// Name of the new path.
    name: String,
    /// Local address to send from.
    #[arg(long, value_name = "IP")]
    local: std::net::IpAddr,
    /// Remote address (learnt from the peer if not given).
    #[arg(long, value_name = "IP")]
    remote: Option<std::net::IpAddr>,
    /// Bind to this network device.
    #[arg(long, value_name = "IF")]
    interface: Option<String>,
    /// weight_out and weight_in of the new path [default: 1].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(mptd::config::MAX_WEIGHT)))]
    weight: Option<u32>,
}

const RELOAD_HELP: &str = "\
mptd re-reads the config file it was started with and applies what can
change at run time (path weights, status, timers); it lists what changed
and what needs a restart. Same as sending SIGHUP, but with the answer.

Example:
  mpt reload";

const COMPLETIONS_HELP: &str = "\
Generated copies are in conf/completions/ (mpt.bash, _mpt, mpt.fish).

Examples:
  mpt completions bash > /etc/bash_completion.d/mpt
  mpt completions zsh > /usr/local/share/zsh/site-functions/_mpt
  mpt completions fish > ~/.config/fish/completions/mpt.fish";

#[derive(ValueEnum, Clone, Copy, Debug)]
enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

const GENKEY_HELP: &str = "\
Both ends of a connection need the same key file. The key comes from the
system's CSPRNG. When stdout is a file, its mode is set to 0600; mptd
refuses key files that group or others can read.

Examples:
  mpt genkey > /etc/mpt/site-b.key
  mpt genkey /etc/mpt/site-b.key";

const KEYPAIR_HELP: &str = "\
Each daemon has one key pair. The private key stays on its host, in FILE
(mode 0600; mptd refuses a key file that group or others can read); the
public key printed on stdout goes into the peer's config, as that
connection's `public_key`. The key comes from the system's CSPRNG. FILE is
written atomically and never overwritten without --force.

Examples:
  mpt keypair /etc/mpt/private.key        # then, in mptd.toml:
                                          # [daemon] private_key_file = \"/etc/mpt/private.key\"
  mpt pubkey /etc/mpt/private.key         # the public key again, for the peer";

const PUBKEY_HELP: &str = "\
Reads a private key file written by `mpt keypair` (it must not be readable
by group or others) and prints its public key in base64: the value the
peer's config needs as this host's `public_key`.

Example:
  mpt pubkey /etc/mpt/private.key";

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Validate an mptd config file without starting anything (exit 0 valid, 2 invalid).
    #[command(after_help = "Example:\n  mpt config check /etc/mpt/mptd.toml")]
    Check {
        /// The config file.
        file: PathBuf,
    },
}

const BENCH_HELP: &str = "\
SCENARIO is a preset (ethernet, satellite, lte-gateway, handover, dtn-relay,
unlike, clients) or a
scenario TOML file (see conf/scenarios/). Each case builds namespaces mptemu-<pid>-bench<k>-{a,b[,m]}
joined by the case's paths (tbf-shaped veths, or veths through the link
emulator in a middle namespace), runs mptd on both sides and measures with
iperf3: raw UDP/TCP over path 0 (baseline), then UDP (offered a bit above
the ideal rate) and single-stream TCP through the tunnel, with the CPU use
of both mptd processes. Namespaces, processes and qdiscs are removed on
every exit path, Ctrl-C included (partial results are still written).

Output in --out (default ./bench-out/<scenario>-<UTC time>): results.json,
results.csv, plot.svg, and work/ with the mptd configs and logs and the
iperf3 JSON. mptd is taken from MPTD_BIN, next to `mpt`, or PATH.

`clients` (one server, many clients) is different: namespaces
mptemu-<pid>-clients-{s,c}, one server mptd and --clients client mptds
(each with its own tun, control socket, key pair and addresses, all in
the client namespace, --paths-per-client veth paths each), every
connection with the public-key handshake. It reports the time until every
client is up (server status: session established, all paths up), the
server's threads and memory (/proc/PID/status: Threads, VmRSS, VmHWM),
single-stream TCP of one client alone and of --senders clients at once
(iperf3 bound to each client's tunnel address; target: their sum at least
0.8 of one client alone), the last client alone with its keys renewed
every --rekey-after seconds (TCP retransmits against client 0), and with
--flood the senders again while a thread sends forged Noise initiations
from spoofed addresses to the server ports as fast as it can (target:
less than 20 % lost, server memory not growing). Output: results.json,
results.csv and work/ (configs, keys, logs, iperf3 JSON).

Exit codes: 0 done, 1 runtime failure, 2 usage error, 130 interrupted.

Examples:
  sudo mpt bench ethernet
  sudo mpt bench ethernet --paths 1,2,4,8,12 --duration 10
  sudo mpt bench ethernet --quick --out /tmp/bench
  sudo mpt bench ethernet --paths 4 --combos all
  sudo mpt bench satellite --quick
  sudo mpt bench unlike --quick     # unlike paths, CUBIC and BBR, raw paths vs tunnel
  sudo mpt bench handover           # WiFi fails silently, link down, new address: VoIP and TCP
  sudo mpt bench conf/scenarios/ethernet.toml --paths 16,32
  sudo mpt bench clients --clients 200 --senders 4 --flood";

#[derive(Args, Debug)]
struct BenchArgs {
    /// Scenario preset (ethernet, satellite, lte-gateway, handover, dtn-relay, unlike, clients) or TOML file.
    scenario: String,
    /// Path counts to sweep, e.g. 1,2,4,8,12 (each 1..32).
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=32))]
    paths: Option<Vec<u32>>,
    /// Seconds per measurement (1..3600).
    #[arg(long, value_name = "SECONDS", value_parser = p_bench_seconds)]
    duration: Option<f64>,
    /// Inner-in-outer IP versions: 4in4, 6in4, 4in6, 6in6 (comma-separated) or all.
    #[arg(long, value_name = "LIST")]
    combos: Option<String>,
    /// Output directory (default ./bench-out/<scenario>-<timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Short run for CI: the scenario's [quick] settings (ethernet: 2 paths, 3 s).
    #[arg(long)]
    quick: bool,
    /// mptd binary (default: MPTD_BIN, next to mpt, then PATH).
    #[arg(long, value_name = "FILE")]
    mptd: Option<PathBuf>,
    /// mptd's scheduler in every case (default: the scenario's; `unlike`
    /// leaves mptd's default, the others ask for weighted).
    #[arg(long, value_parser = ["adaptive", "weighted"])]
    scheduler: Option<String>,
    /// clients: client mptds on one server [default: 200; --quick: 8].
    #[arg(long, value_name = "N", help_heading = "mpt bench clients")]
    clients: Option<usize>,
    /// clients: paths of each client [default: 2].
    #[arg(long, value_name = "N", help_heading = "mpt bench clients")]
    paths_per_client: Option<usize>,
    /// clients: clients sending TCP at once [default: 4; --quick: 2].
    #[arg(long, value_name = "K", help_heading = "mpt bench clients")]
    senders: Option<usize>,
    /// clients: give every client connection on the server its own port
    /// and configured paths, as before the shared port [default: all
    /// clients on the server's one port 65022, their paths learnt].
    #[arg(long, help_heading = "mpt bench clients")]
    port_per_client: bool,
    /// clients: a flood of forged handshake initiations from spoofed
    /// addresses, alone (server memory), then 3 rounds of the senders
    /// quiet / flooded / flooded at a closed port (the flooder's own CPU
    /// cost) / paced at half rate, quiet and flooded.
    #[arg(long, help_heading = "mpt bench clients")]
    flood: bool,
    /// clients: the last client renews its keys this often; it is measured
    /// alone against client 0 without rekeys, both paced at half the single
    /// client's rate (TCP retransmits); 0 = off [default: 2].
    #[arg(long, value_name = "SECONDS", help_heading = "mpt bench clients")]
    rekey_after: Option<u64>,
}

fn p_bench_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (1.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("expected seconds 1..3600, got {s:?}")),
    }
}

#[derive(Subcommand, Debug)]
enum EmuCommand {
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
reorder, loss, ge, queue, outage, periodic, relay, trace. Layers, later
wins: profile [link], profile [a_to_b]/[b_to_a], link flags, --ab/--ba.
Profile presets: geo-sat, lte, wifi, ethernet-100m, dtn-hop (see
`mpt emu profiles`).

Examples:
  mpt emu run --netns mid --a veth-a --b veth-b --rate 10mbit --delay 300ms
  mpt emu run --a eth1 --b eth2 --profile lte --ab rate=2mbit --duration 60
  mpt emu run --a m0 --b m1 --rate 10mbit --outage 10s+5s --relay 20MB
  mpt emu run --a m0 --b m1 --loss 1% --ge 0.01,0.3 --seed 7 --report-json out.json
  mpt emu run --a m0 --b m1 --trace lte.trace --periodic 20s/2s

Trace file: lines `TIME RATE [DELAY]` (bare numbers: s, bit/s, ms; '-' keeps
the configured value; rate 0 = no capacity), e.g. `1.5s 8mbit 35ms`.";

const SELFTEST_HELP: &str = "\
Builds namespaces mptemu-<pid>-st-{a,b,m} (removed on every exit path),
runs UDP traffic through the real wire and checks: achieved rate within
+-1 % at 1, 10, 100 Mbit/s (1 Gbit/s reported only), mean delay error
< 0.1 ms at 300 ms over >= 1000 packets, loss within the 99 % binomial
interval of the PER, outage edges within 5 ms, relay custody delivering
everything in order. Exit code 0 only if every bounded figure passes.

Examples:
  sudo mpt emu selftest
  sudo mpt emu selftest --json | jq '.checks[] | select(.pass == false)'";

#[derive(Args, Debug)]
struct SelftestArgs {
    /// Print the results as JSON (for scripts) instead of a table.
    #[arg(long)]
    json: bool,
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
struct RunArgs {
    /// Interface of side a.
    #[arg(long = "a", value_name = "IF")]
    a: String,
    /// Interface of side b.
    #[arg(long = "b", value_name = "IF")]
    b: String,
    /// Network namespace (ip netns) holding both interfaces.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Link profile: a preset name or a TOML file.
    #[arg(long, value_name = "NAME|FILE")]
    profile: Option<String>,
    /// Rate on whole Ethernet frames, e.g. 10mbit, 1gbit, unlimited.
    #[arg(long, value_name = "RATE", value_parser = p_rate)]
    rate: Option<LinkSpec>,
    /// Fixed one-way delay, e.g. 300ms.
    #[arg(long, value_name = "DURATION", value_parser = p_delay)]
    delay: Option<LinkSpec>,
    /// Jitter: half-width (uniform) or standard deviation (normal), e.g. 5ms.
    #[arg(long, value_name = "DURATION", value_parser = p_jitter)]
    jitter: Option<LinkSpec>,
    /// Jitter distribution: uniform or normal.
    #[arg(long, value_name = "DIST", value_parser = p_dist)]
    jitter_dist: Option<LinkSpec>,
    /// Let jitter reorder packets (default: order preserved).
    #[arg(long)]
    reorder: bool,
    /// Bernoulli packet error rate, e.g. 0.01 or 1%.
    #[arg(long, value_name = "PER", value_parser = p_loss)]
    loss: Option<LinkSpec>,
    /// Gilbert-Elliott bursts p,r[,h[,k]]: p good->bad, r bad->good, h/k delivery probability in bad/good (default 0/1).
    #[arg(long, value_name = "P,R[,H[,K]]", value_parser = p_ge)]
    ge: Option<LinkSpec>,
    /// Tail-drop limit of the transmit backlog, e.g. 100kB (default 1514000 B).
    #[arg(long, value_name = "BYTES", value_parser = p_queue)]
    queue: Option<LinkSpec>,
    /// Down windows from the start, START+LEN[,START+LEN...], e.g. 10s+2s,30s+500ms.
    #[arg(long, value_name = "WINDOWS", value_parser = p_outage)]
    outage: Option<LinkSpec>,
    /// Periodic contacts UP/DOWN, e.g. 20s/10s (starts up).
    #[arg(long, value_name = "UP/DOWN", value_parser = p_periodic)]
    periodic: Option<LinkSpec>,
    /// Store-and-forward custody: hold up to BYTES over outages instead of dropping.
    #[arg(long, value_name = "BYTES", value_parser = p_relay)]
    relay: Option<LinkSpec>,
    /// Rate/delay trace file (TIME RATE [DELAY] per line).
    #[arg(long, value_name = "FILE", value_parser = p_trace)]
    trace: Option<LinkSpec>,
    /// Override for a->b only, KEY=VALUE (repeatable), e.g. --ab rate=2mbit.
    #[arg(long, value_name = "KEY=VALUE", value_parser = p_ab)]
    ab: Vec<LinkSpec>,
    /// Override for b->a only, KEY=VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = p_ba)]
    ba: Vec<LinkSpec>,
    /// Seed for loss and jitter (default: the profile's, else 1).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Stop after this long (seconds, or with a unit), e.g. 60 or 2m.
    #[arg(long, value_name = "S", value_parser = p_seconds)]
    duration: Option<Duration>,
    /// Also write the configuration and report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    report_json: Option<PathBuf>,
    /// Leave TSO/GSO/GRO of the interfaces as they are.
    #[arg(long)]
    keep_offloads: bool,
    /// SCHED_FIFO priority of the wire threads (1-99); 0 = normal scheduling.
    #[arg(long, value_name = "N", default_value_t = wire::DEFAULT_RT_PRIORITY,
          value_parser = clap::value_parser!(i32).range(0..=99))]
    rt_priority: i32,
}

/// An error with the exit code it maps to.
#[derive(Debug)]
struct Failure {
    code: u8,
    err: anyhow::Error,
}

fn usage(err: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: EXIT_USAGE,
        err: err.into(),
    }
}
fn runtime(err: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: EXIT_RUNTIME,
        err: err.into(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log = cli.log.clone().unwrap_or_else(|| {
        match cli.cmd {
            Command::Bench(_) => "warn",
            Command::Status(_)
            | Command::Path(_)
            | Command::Reload
            | Command::Completions { .. } => "warn",
            Command::Emu { .. }
            | Command::Genkey { .. }
            | Command::Keypair { .. }
            | Command::Pubkey { .. }
            | Command::Config { .. } => "info",
        }
        .to_string()
    });
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&log));
    let filter = match filter {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: invalid --log {log:?}: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Colour only for a person at a terminal, never into files or pipes.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let endpoint = cli.endpoint();
    let result = match cli.cmd {
        Command::Status(args) => status(&endpoint, &args),
        Command::Path(args) => path(&endpoint, args),
        Command::Reload => reload(&endpoint),
        Command::Completions { shell } => completions(shell),
        Command::Emu { cmd } => match cmd {
            EmuCommand::Run(args) => emu_run(*args),
            EmuCommand::Selftest(args) => emu_selftest(&args),
            EmuCommand::Profiles { name } => emu_profiles(name.as_deref()),
        },
        Command::Bench(args) => bench(args),
        Command::Genkey { file } => genkey(file),
        Command::Keypair { file, force } => keypair(&file, force).map(print_key),
        Command::Pubkey { file } => pubkey(&file).map(print_key),
        Command::Config {
            cmd: ConfigCommand::Check { file },
        } => config_check(&file),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {:#}", f.err);
            ExitCode::from(f.code)
        }
    }
}

/// `mpt status`.
fn status(endpoint: &Endpoint, args: &StatusArgs) -> Result<u8, Failure> {
    use mpt_cli::ctl::status::{only_connection, render_layout, Layout, Traffic, WIDTH};
    let doc = |response: Response| -> Result<Status, Failure> {
        let Some(status) = response.status else {
            return Err(runtime(anyhow::anyhow!(
                "malformed response from mptd: no \"status\" object"
            )));
        };
        // A daemon older than the `conn` field sends every connection.
        match &args.conn {
            None => Ok(status),
            Some(name) => only_connection(status, name).map_err(|e| usage(anyhow::anyhow!(e))),
        }
    };
    let request = match &args.conn {
        None => Request::Status,
        Some(conn) => Request::StatusOf { conn: conn.clone() },
    };
    let layout = match (args.full || args.conn.is_some(), args.brief) {
        (true, _) => Layout::Full,
        (false, true) => Layout::Compact,
        (false, false) => Layout::Auto,
    };
    let mut client = endpoint.connect().map_err(runtime)?;
    let first = doc(client.call(&request).map_err(runtime)?)?;
    let text = if args.json {
        // Through a JSON value, whose keys are sorted at every level: the
        // bytes `mpt status --json` always printed, a newer daemon's
        // fields included.
        let doc = serde_json::to_value(&first).map_err(runtime)?;
        serde_json::to_string_pretty(&doc).map_err(runtime)? + "\n"
    } else if args.once {
        render_layout(&first, Traffic::Totals, WIDTH, layout)
    } else {
        let t0 = Instant::now();
        std::thread::sleep(RATE_INTERVAL);
        let second = doc(client.call(&request).map_err(runtime)?)?;
        let traffic = Traffic::Rates {
            earlier: &first,
            elapsed: t0.elapsed(),
        };
        render_layout(&second, traffic, WIDTH, layout)
    };
    print!("{text}");
    Ok(0)
}

/// `mpt path ...`.
fn path(socket: &Endpoint, args: PathArgs) -> Result<u8, Failure> {
    let req = match args.cmd {
        Some(PathCommand::Add(a)) => Request::PathAdd {
            conn: a.conn,
            name: a.name,
            local: a.local,
            remote: a.remote,
            interface: a.interface,
            weight_out: a.weight,
        },
        Some(PathCommand::Remove { conn, path, force }) => {
            Request::PathRemove { conn, path, force }
        }
        None => {
            let (Some(conn), Some(path), Some(action)) = (args.conn, args.path, args.action) else {
                // clap enforces these (required unless a subcommand is given).
                return Err(usage(anyhow::anyhow!("usage: mpt path CONN PATH ACTION")));
            };
            let state = match action {
                PathAction::Up => PathState::Up,
                PathAction::Down => PathState::Down,
                PathAction::Backup => PathState::Backup,
                PathAction::Weight => {
                    let Some(weight_out) = args.weight_out else {
                        path_usage_error(
                            clap::error::ErrorKind::MissingRequiredArgument,
                            "`mpt path CONN PATH weight` needs OUT (and optionally IN)".into(),
                        )
                    };
                    return path_call(
                        socket,
                        &Request::PathWeight {
                            conn,
                            path,
                            weight_out,
                            weight_in: args.weight_in,
                        },
                    );
                }
            };
            if args.weight_out.is_some() {
                path_usage_error(
                    clap::error::ErrorKind::TooManyValues,
                    format!("`mpt path CONN PATH {}` takes no OUT/IN", state.as_str()),
                )
            }
            Request::PathState { conn, path, state }
        }
    };
    path_call(socket, &req)
}

/// A usage error clap cannot see (values that depend on ACTION): printed
/// with `mpt path`'s usage, exit code 2 like every other usage error.
fn path_usage_error(kind: clap::error::ErrorKind, msg: String) -> ! {
    let mut cmd = Cli::command();
    cmd.build();
    match cmd.find_subcommand_mut("path") {
        Some(path) => path.error(kind, msg).exit(),
        None => cmd.error(kind, msg).exit(),
    }
}

fn path_call(endpoint: &Endpoint, req: &Request) -> Result<u8, Failure> {
    let resp = endpoint.call(req).map_err(runtime)?;
    let peer = resp
        .peer
        .map(|p| format!(" (peer: {p})"))
        .unwrap_or_default();
    match req {
        Request::PathState { conn, path, state } => {
            println!("{conn} {path}: {}", state.as_str());
        }
        Request::PathWeight {
            conn,
            path,
            weight_out,
            weight_in,
        } => match weight_in {
            Some(w) => println!("{conn} {path}: weight_out {weight_out}, weight_in {w}"),
            None => println!("{conn} {path}: weight_out {weight_out}"),
        },
        Request::PathAdd { conn, name, .. } => println!("{conn} {name}: added{peer}"),
        Request::PathRemove { conn, path, .. } => println!("{conn} {path}: removed{peer}"),
        Request::Status | Request::StatusOf { .. } | Request::Reload => {}
    }
    Ok(0)
}

/// `mpt reload`: prints what changed and what needs a restart.
fn reload(endpoint: &Endpoint) -> Result<u8, Failure> {
    let resp = endpoint.call(&Request::Reload).map_err(runtime)?;
    let changes = resp.changes.unwrap_or_default();
    let not_applied = resp.not_applied.unwrap_or_default();
    if changes.is_empty() {
        println!("reloaded: no changes");
    } else {
        println!("reloaded, applied:");
        changes.iter().for_each(|c| println!("  {c}"));
    }
    if !not_applied.is_empty() {
        println!("not applied (restart mptd for these):");
        not_applied.iter().for_each(|c| println!("  {c}"));
    }
    Ok(0)
}

/// `mpt completions SHELL`.
fn completions(shell: CompletionShell) -> Result<u8, Failure> {
    use clap_complete::Shell;
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "mpt", &mut out);
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&out)
        .and_then(|_| stdout.flush())
        .context("writing the completion script")
        .map_err(runtime)?;
    Ok(0)
}

fn emu_run(args: RunArgs) -> Result<u8, Failure> {
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

fn emu_selftest(args: &SelftestArgs) -> Result<u8, Failure> {
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

fn emu_profiles(name: Option<&str>) -> Result<u8, Failure> {
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

fn bench(args: BenchArgs) -> Result<u8, Failure> {
    use mpt_cli::bench::{self, scenario};
    if args.scenario == "clients" {
        return bench_clients(args);
    }
    let clients_only = [
        ("--clients", args.clients.is_some()),
        ("--paths-per-client", args.paths_per_client.is_some()),
        ("--senders", args.senders.is_some()),
        ("--port-per-client", args.port_per_client),
        ("--flood", args.flood),
        ("--rekey-after", args.rekey_after.is_some()),
    ];
    if let Some((flag, _)) = clients_only.iter().find(|(_, set)| *set) {
        return Err(usage(anyhow::anyhow!(
            "{flag} applies to `mpt bench clients` only"
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
    let sc = scenario::load(&args.scenario, &ov).map_err(usage)?;
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
    let out = args.out.unwrap_or_else(|| bench::default_out(&sc.name));
    let stop = signal::install()
        .context("installing signal handlers")
        .map_err(runtime)?;
    let opts = bench::Options {
        scenario: sc,
        out,
        mptd,
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
fn bench_clients(args: BenchArgs) -> Result<u8, Failure> {
    use mpt_cli::bench::{self, clients};
    if args.paths.is_some() || args.combos.is_some() || args.scheduler.is_some() {
        return Err(usage(anyhow::anyhow!(
            "--paths, --combos and --scheduler do not apply to `mpt bench clients` \
             (see --clients, --paths-per-client)"
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
    if let Some(r) = args.rekey_after {
        o.rekey_after = (r > 0).then(|| Duration::from_secs(r));
    }
    o.check().map_err(|m| usage(anyhow::anyhow!(m)))?;
    let stop = signal::install()
        .context("installing signal handlers")
        .map_err(runtime)?;
    match clients::run(&o, stop) {
        Ok(report) => {
            println!();
            print!("{}", report.table());
            println!("results in {}", o.out.display());
            Ok(0)
        }
        Err(e) if e.is::<bench::Interrupted>() => {
            eprintln!(
                "interrupted; testbed removed, partial results in {}",
                o.out.display()
            );
            Ok(130)
        }
        Err(e) => Err(runtime(e.context(format!(
            "mpt bench clients failed (partial results and logs in {})",
            o.out.display()
        )))),
    }
}

/// `mpt genkey`: a fresh key to stdout or a new file, readable by the owner only.
fn genkey(file: Option<PathBuf>) -> Result<u8, Failure> {
    use ring::rand::SecureRandom;
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut key = [0u8; mptd::keys::KEY_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| runtime(anyhow::anyhow!("the system random generator failed")))?;
    let line = format!("{}\n", mptd::keys::encode(&key));
    match file {
        Some(path) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .with_context(|| format!("creating {} (it must not exist yet)", path.display()))
                .map_err(runtime)?;
            f.write_all(line.as_bytes())
                .with_context(|| format!("writing {}", path.display()))
                .map_err(runtime)?;
        }
        None => {
            let stdout = std::io::stdout();
            // `mpt genkey > FILE`: the shell created FILE with the umask;
            // tighten it, since we own it.
            let fd = std::os::fd::AsFd::as_fd(&stdout);
            if let Ok(meta) = nix::sys::stat::fstat(fd) {
                if meta.st_mode & libc::S_IFMT == libc::S_IFREG {
                    let f = std::fs::File::from(fd.try_clone_to_owned().map_err(runtime)?);
                    f.set_permissions(std::fs::Permissions::from_mode(0o600))
                        .context("setting mode 0600 on the output file")
                        .map_err(runtime)?;
                }
            }
            let mut out = stdout.lock();
            out.write_all(line.as_bytes())
                .and_then(|_| out.flush())
                .context("writing the key")
                .map_err(runtime)?;
        }
    }
    Ok(0)
}

/// Prints a base64 public key on its own line; exit code 0.
fn print_key(public: String) -> u8 {
    println!("{public}");
    0
}

/// `mpt keypair FILE`: a new private key in FILE (0600, atomic); returns
/// the public key in base64.
fn keypair(file: &std::path::Path, force: bool) -> Result<String, Failure> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; mpt_proto::noise::KEY_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| runtime(anyhow::anyhow!("the system random generator failed")))?;
    let secret = mpt_proto::noise::StaticSecret::from_bytes(bytes);
    mptd::keys::write_private(file, &secret, force).map_err(|e| match e {
        // The user's choice of FILE, not a failure of the machine.
        mptd::keys::KeyError::Exists { .. } => usage(e),
        _ => runtime(e),
    })?;
    tracing::info!(file = %file.display(), "wrote a new private key");
    Ok(mptd::keys::encode_public(&secret.public_key()))
}

/// `mpt pubkey FILE`: the public key of a private key file, in base64.
fn pubkey(file: &std::path::Path) -> Result<String, Failure> {
    let secret = mptd::keys::load_private(file).map_err(usage)?;
    Ok(mptd::keys::encode_public(&secret.public_key()))
}

/// `mpt config check FILE`: the daemon's own validation.
fn config_check(file: &std::path::Path) -> Result<u8, Failure> {
    match mptd::config::load(file) {
        Ok(c) => {
            for w in c.identity_warnings() {
                eprintln!("warning: {w}");
            }
            println!("{}", c.check_report(file));
            Ok(0)
        }
        Err(e) => Err(Failure {
            code: EXIT_USAGE,
            err: e.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpt-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d); // a leftover from an earlier run
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn keypair_then_pubkey_agree() {
        let d = tempdir("keypair");
        let file = d.join("private.key");
        let cli = Cli::try_parse_from(["mpt", "keypair", file.to_str().unwrap()]).unwrap();
        let Command::Keypair { file: f, force } = cli.cmd else {
            panic!("parsed as {:?}", cli.cmd)
        };
        assert!(!force);
        let printed = keypair(&f, force).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // 32 bytes in base64, and `mpt pubkey` prints the same.
        assert_eq!(
            mptd::keys::decode_public(&printed)
                .unwrap()
                .as_bytes()
                .len(),
            32
        );
        assert_eq!(pubkey(&file).unwrap(), printed);

        // No overwrite without --force (a usage error), a new key with it.
        let e = keypair(&file, false).unwrap_err();
        assert_eq!(e.code, EXIT_USAGE);
        assert!(format!("{:#}", e.err).contains("--force"), "{:#}", e.err);
        assert_eq!(pubkey(&file).unwrap(), printed);
        let cli =
            Cli::try_parse_from(["mpt", "keypair", "--force", file.to_str().unwrap()]).unwrap();
        assert!(matches!(cli.cmd, Command::Keypair { force: true, .. }));
        let replaced = keypair(&file, true).unwrap();
        assert_ne!(replaced, printed);
        assert_eq!(pubkey(&file).unwrap(), replaced);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn pubkey_refuses_bad_files() {
        let d = tempdir("pubkey");
        let err = |path: &std::path::Path| format!("{:#}", pubkey(path).unwrap_err().err);
        assert!(err(&d.join("missing.key")).contains("No such file"));

        let short = d.join("short.key");
        std::fs::write(&short, "AAAA\n").unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = err(&short);
        assert!(
            e.contains("found 3 bytes") && e.contains("mpt keypair"),
            "{e}"
        );

        let open = d.join("open.key");
        std::fs::write(&open, format!("{}\n", mptd::keys::encode(&[7; 32]))).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = err(&open);
        assert!(e.contains("chmod 600"), "{e}");

        // Unreadable: a directory in place of the file.
        let e = err(&d);
        assert!(e.contains("key file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn help_explains_keypair_and_pubkey() {
        let mut cmd = Cli::command();
        let help = cmd
            .find_subcommand_mut("keypair")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            help.contains("public_key") && help.contains("--force"),
            "{help}"
        );
        let help = cmd
            .find_subcommand_mut("pubkey")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("mpt keypair"), "{help}");
        assert!(Cli::try_parse_from(["mpt", "keypair"]).is_err());
    }
}
