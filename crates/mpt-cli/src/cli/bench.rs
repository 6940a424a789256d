//! `mpt bench`'s arguments: the scenario, what to sweep, and the flags of
//! `mpt bench clients`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

pub(crate) const BENCH_HELP: &str = "\
SCENARIO is a preset (ethernet, satellite, lte-gateway, handover, dtn-relay,
unlike, demo, clients, soak) or a
scenario TOML file (see conf/scenarios/). Each case builds namespaces mptemu-<pid>-bench<k>-{a,b[,m]}
joined by the case's paths (tbf-shaped veths, or veths through the link
emulator in a middle namespace), runs mptd on both sides and measures with
iperf3: raw UDP/TCP over path 0 (baseline), then UDP (offered a bit above
the ideal rate) and single-stream TCP through the tunnel, with the CPU use
of both mptd processes. Namespaces, processes and qdiscs are removed on
every exit path, Ctrl-C included (partial results are still written).

Output in --out (default ./bench-out/<scenario>-<UTC time>): results.json
(with `meta`: the mpt commit and profile, kernel, CPU, load, congestion
control, sysctls, the scenario's SHA-256, seeds), results.csv, plot.svg and
the suite's other charts, index.html (all charts with the table), and
work/ with the mptd configs and logs and the iperf3 JSON. mptd is taken
from MPTD_BIN, next to `mpt`, or PATH.

`mpt bench compare OLD.json NEW.json` sets two runs side by side (see its
--help); `mpt bench replot DIR` redraws a folder's charts and index.html.

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

`soak` (issue 34's chaos soak) builds the same testbed (namespaces
mptemu-<pid>-soak-{s,c,m,f}; --clients default 50, 2 paths, path 0 through
an emulator wire, every client's server entry a file in clients.d/,
every client rekeying every --rekey-after seconds) and runs faults one
after the other for --duration seconds (default 600, --quick 60): path 0
silent, a client killed and restarted, a client removed and added back by
reload, the server restarted, path 1 down, a handshake flood from a
separate namespace. Four clients send known bytes over TCP all along
(SHA-256 checked at the far end). After each fault every client must be
up in the server's status and answer a probe within --recover-within
seconds; the server's RSS and fds must not grow, no daemon may exit on
its own, no unknown_session streak may outlast the limit. Output:
results.json, plot.svg (faults and recovery times), resources.svg (RSS,
fds), work/. Exit code 1 when the verdict is FAIL.

Exit codes: 0 done, 1 runtime failure, 2 usage error, 130 interrupted.

Examples:
  sudo mpt bench ethernet
  sudo mpt bench ethernet --paths 1,2,4,8,12 --duration 10
  sudo mpt bench ethernet --quick --out /tmp/bench
  sudo mpt bench ethernet --paths 4 --combos all
  sudo mpt bench satellite --quick
  sudo mpt bench unlike --quick     # unlike paths, CUBIC and BBR, raw paths, tunnel, kernel MPTCP
  sudo mpt bench unlike             # ... and the accelerated tunnel, 1 MB objects on GEO + DSL
  sudo mpt bench handover           # WiFi fails silently, link down, new address: VoIP and TCP
  sudo mpt bench dtn-relay --quick  # bundles through a real BPv7 relay (dtnd) vs end-to-end TCP
  sudo mpt bench conf/scenarios/ethernet.toml --paths 16,32
  sudo mpt bench clients --clients 200 --senders 4 --flood
  sudo mpt bench soak --quick --clients 50
  sudo mpt bench clients --clients 150 --nofile 256 --quick
  mpt bench compare bench-out/unlike-A/results.json bench-out/unlike-B/results.json
  mpt bench replot bench-out/unlike-B";

/// `--accel`: whether the accelerated variant runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccelArg {
    Auto,
    On,
    Off,
}

impl AccelArg {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AccelArg::Auto => "auto",
            AccelArg::On => "on",
            AccelArg::Off => "off",
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Tools for results already written (no root needed).
    #[command(subcommand)]
    pub(crate) tool: Option<BenchTool>,
    /// Scenario preset (ethernet, satellite, lte-gateway, handover, dtn-relay, unlike, demo, clients, soak) or TOML file.
    #[arg(required = true)]
    pub(crate) scenario: Option<String>,
    /// Path counts to sweep, e.g. 1,2,4,8,12 (each 1..32).
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=32))]
    pub(crate) paths: Option<Vec<u32>>,
    /// Seconds per measurement (1..3600).
    #[arg(long, value_name = "SECONDS", value_parser = p_bench_seconds)]
    pub(crate) duration: Option<f64>,
    /// Inner-in-outer IP versions: 4in4, 6in4, 4in6, 6in6 (comma-separated) or all.
    #[arg(long, value_name = "LIST")]
    pub(crate) combos: Option<String>,
    /// Output directory (default ./bench-out/<scenario>-<timestamp>).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Short run for CI: the scenario's [quick] settings (ethernet: 2 paths, 3 s).
    #[arg(long)]
    pub(crate) quick: bool,
    /// mptd binary (default: MPTD_BIN, next to mpt, then PATH).
    #[arg(long, value_name = "FILE")]
    pub(crate) mptd: Option<PathBuf>,
    /// dtn-relay: the dtnd binary (dtn7-rs) [default: DTND_BIN, the bench's
    /// install root, ~/.cargo/bin, PATH; installed with cargo when missing].
    #[arg(long, value_name = "FILE")]
    pub(crate) dtnd: Option<PathBuf>,
    /// mptd's scheduler in every case (default: the scenario's; `unlike`
    /// leaves mptd's default, the others ask for weighted).
    #[arg(long, value_parser = ["adaptive", "weighted"])]
    pub(crate) scheduler: Option<String>,
    /// Kernel MPTCP beside the tunnel in `unlike` (iperf3 under `mptcpize
    /// run`) and `handover` (its bulk stream over MPTCP sockets across the
    /// same WiFi outage), one subflow per path, bytes per path checked:
    /// auto = when mptcpize is installed; mptcp = always (installs
    /// mptcpize with apt-get if missing); none = off.
    #[arg(long, value_name = "KIND", value_parser = ["auto", "mptcp", "none"], default_value = "auto")]
    pub(crate) baseline: String,
    /// TCP acceleration beside the tunnel in `unlike` and `satellite` (end
    /// hosts behind the gateways, every TCP flow between them split at the
    /// sending gateway and carried over warm legs, docs/ACCELERATION.md):
    /// auto = on, except with --quick; on; off. Needs nft (nftables).
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = AccelArg::Auto)]
    pub(crate) accel: AccelArg,
    /// The accelerated variant's legs (`[tunnel] accel_legs` at both
    /// gateways): pinned = one leg per path inside the tunnel; direct =
    /// one TCP connection per path beside it, over the path itself.
    #[arg(long, value_name = "KIND", value_parser = ["pinned", "direct"], default_value = "pinned")]
    pub(crate) accel_legs: String,
    /// clients: client mptds on one server [default: 200; --quick: 8].
    #[arg(long, value_name = "N", help_heading = "mpt bench clients")]
    pub(crate) clients: Option<usize>,
    /// clients: paths of each client [default: 2].
    #[arg(long, value_name = "N", help_heading = "mpt bench clients")]
    pub(crate) paths_per_client: Option<usize>,
    /// clients: clients sending TCP at once [default: 4; --quick: 2].
    #[arg(long, value_name = "K", help_heading = "mpt bench clients")]
    pub(crate) senders: Option<usize>,
    /// clients: give every client connection on the server its own port
    /// and configured paths, as before the shared port [default: all
    /// clients on the server's one port 65022, their paths learnt].
    #[arg(long, help_heading = "mpt bench clients")]
    pub(crate) port_per_client: bool,
    /// clients: a flood of forged handshake initiations from spoofed
    /// addresses, alone (server memory), then 3 rounds of the senders
    /// quiet / flooded / flooded at a closed port (the flooder's own CPU
    /// cost) / paced at half rate, quiet and flooded.
    #[arg(long, help_heading = "mpt bench clients")]
    pub(crate) flood: bool,
    /// clients: the last client renews its keys this often; it is measured
    /// alone against client 0 without rekeys, both paced at half the single
    /// client's rate (TCP retransmits); 0 = off [default: 2]. soak: every
    /// client renews its keys this often [default: 5].
    #[arg(long, value_name = "SECONDS", help_heading = "mpt bench clients")]
    pub(crate) rekey_after: Option<u64>,
    /// clients, soak: start the server mptd under this RLIMIT_NOFILE (soft
    /// and hard, as `ulimit -n N`), e.g. 256 for 150 two-path clients.
    #[arg(long, value_name = "N", help_heading = "mpt bench clients")]
    pub(crate) nofile: Option<u64>,
    /// soak: every client must be up and answer within this many seconds
    /// of each fault's end [default: 15].
    #[arg(long, value_name = "SECONDS", help_heading = "mpt bench soak")]
    pub(crate) recover_within: Option<u64>,
}

pub(crate) const COMPARE_HELP: &str = "\
Reads two results.json files of `mpt bench` (any suite; files written
before the run metadata existed too) and prints every figure of every
case side by side: old, new, the change in percent and whether the change
is beyond the measured spread. Where the runs' conditions differ (kernel,
CPU, cores, build profile, congestion control, sysctls, scenario hash,
overrides, load) it warns first: such figures are not like for like.

Spread rule: a change is beyond the spread when the ranges of the runs
(lowest to highest run of each side; `unlike` repeats its tunnel runs
with `repeat`) do not overlap; a single run is a range of width zero.
With one run on both sides there is no spread to judge by (`1 run`).

Exit code 0 whatever changed (1: a file unreadable).

Examples:
  mpt bench compare bench-out/unlike-OLD/results.json bench-out/unlike-NEW/results.json
  mpt bench compare old.json new.json --json | jq '.lines[] | select(.verdict == \"worse\")'";

/// Tools for results already written.
#[derive(Subcommand, Debug)]
pub(crate) enum BenchTool {
    /// Compare two results.json side by side: change and whether it is beyond the runs' spread.
    #[command(after_help = COMPARE_HELP)]
    Compare {
        /// The earlier run's results.json.
        old: PathBuf,
        /// The later run's results.json.
        new: PathBuf,
        /// Machine output: the comparison as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Redraw the charts and index.html of a results folder from its results.json and work/.
    Replot {
        /// A folder `mpt bench` wrote (results.json, work/).
        dir: PathBuf,
    },
}

fn p_bench_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (1.0..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("expected seconds 1..3600, got {s:?}")),
    }
}
