//! The command line's grammar: every command, flag, help text and value
//! check of `mpt`, as clap derives. Nothing here does any work; the
//! handlers in `crate::commands` take the parsed values.
//!
//! The control commands (status, path, reload) and the small ones (keys,
//! config, completions) are here; `mpt bench` and `mpt emu`, which have
//! many flags each, have their own files.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use mpt_cli::ctl::{self, remote::Endpoint};

pub(crate) mod bench;
pub(crate) mod client;
pub(crate) mod emu;

use bench::BenchArgs;
use client::ClientCommand;
use emu::EmuCommand;

#[derive(Parser, Debug)]
#[command(
    name = "mpt",
    version,
    about = "mpt multipath tunnel: control client, link emulator, benchmarks",
    after_help = CLI_HELP
)]
pub(crate) struct Cli {
    /// Log filter (tracing env-filter syntax; RUST_LOG overrides), e.g. debug
    /// [default: info; warn for bench, whose progress goes to stdout].
    #[arg(long, global = true)]
    pub(crate) log: Option<String>,
    /// mptd's control socket (status, path, reload).
    #[arg(long, global = true, env = "MPT_SOCKET", value_name = "PATH",
          default_value = ctl::DEFAULT_SOCKET)]
    pub(crate) socket: PathBuf,
    /// Manage a remote mptd over its command port ([daemon] cmd_port)
    /// instead of the local socket (status, path, reload; give it before
    /// the command). Needs --remote-conn and --key.
    #[arg(long, value_name = "HOST:PORT", value_parser = ctl::remote::parse_target,
          requires_all = ["remote_conn", "key"])]
    pub(crate) remote: Option<String>,
    /// With --remote: the connection, as the remote mptd names it, whose
    /// pre-shared key --key holds; the key manages that connection only.
    #[arg(long, value_name = "NAME", requires = "remote")]
    pub(crate) remote_conn: Option<String>,
    /// With --remote: that connection's key file (as written by `mpt
    /// genkey`, mode 0600).
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub(crate) key: Option<PathBuf>,
    /// With --remote: UDP (one datagram each way) instead of TCP.
    #[arg(long, requires = "remote")]
    pub(crate) udp: bool,
    #[command(subcommand)]
    pub(crate) cmd: Command,
}

impl Cli {
    /// Where status, path and reload go: --remote, else the socket.
    pub(crate) fn endpoint(&self) -> Endpoint {
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
pub(crate) enum Command {
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
    #[command(
        after_help = bench::BENCH_HELP,
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    Bench(Box<BenchArgs>),
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
    /// Branches of a concentrator: add, list, remove (on the server).
    Client {
        #[command(subcommand)]
        cmd: ClientCommand,
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
pub(crate) struct StatusArgs {
    /// Only this connection, in full detail.
    #[arg(value_name = "CONNECTION")]
    pub(crate) conn: Option<String>,
    /// Print the daemon's status document as JSON (for scripts).
    #[arg(long)]
    pub(crate) json: bool,
    /// One sample: byte totals instead of rates (no 0.5 s wait).
    #[arg(long)]
    pub(crate) once: bool,
    /// Every connection in full detail, however many there are.
    #[arg(long, conflicts_with = "brief")]
    pub(crate) full: bool,
    /// One line per connection, however few there are.
    #[arg(long)]
    pub(crate) brief: bool,
}

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
pub(crate) struct PathArgs {
    #[command(subcommand)]
    pub(crate) cmd: Option<PathCommand>,
    /// Connection name.
    #[arg(required = true)]
    pub(crate) conn: Option<String>,
    /// Path name.
    #[arg(required = true)]
    pub(crate) path: Option<String>,
    /// What to do with the path.
    #[arg(required = true, value_enum)]
    pub(crate) action: Option<PathAction>,
    /// weight: the new weight_out.
    #[arg(value_name = "OUT",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(mptd::config::MAX_WEIGHT)))]
    pub(crate) weight_out: Option<u32>,
    /// weight: the new weight_in (default: unchanged).
    #[arg(value_name = "IN", value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) weight_in: Option<u16>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum PathAction {
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
pub(crate) enum PathCommand {
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
pub(crate) struct PathAddArgs {
    /// Connection name.
    pub(crate) conn: String,
    /// Name of the new path.
    pub(crate) name: String,
    /// Local address to send from.
    #[arg(long, value_name = "IP")]
    pub(crate) local: std::net::IpAddr,
    /// Remote address (learnt from the peer if not given).
    #[arg(long, value_name = "IP")]
    pub(crate) remote: Option<std::net::IpAddr>,
    /// Bind to this network device.
    #[arg(long, value_name = "IF")]
    pub(crate) interface: Option<String>,
    /// weight_out and weight_in of the new path [default: 1].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(mptd::config::MAX_WEIGHT)))]
    pub(crate) weight: Option<u32>,
}

const RELOAD_HELP: &str = "\
mptd re-reads the config file it was started with and applies what can
change at run time (paths, weights, status, timers, and client connections
added or removed, e.g. by `mpt client add` and `mpt client remove`); it
lists what changed and what needs a restart. Same as sending SIGHUP, but
with the answer.

Example:
  mpt reload";

const COMPLETIONS_HELP: &str = "\
Generated copies are in conf/completions/ (mpt.bash, _mpt, mpt.fish).

Examples:
  mpt completions bash > /etc/bash_completion.d/mpt
  mpt completions zsh > /usr/local/share/zsh/site-functions/_mpt
  mpt completions fish > ~/.config/fish/completions/mpt.fish";

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum CompletionShell {
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
pub(crate) enum ConfigCommand {
    /// Validate an mptd config file without starting anything (exit 0 valid, 2 invalid).
    #[command(
        after_help = "Examples:\n  mpt config check /etc/mpt/mptd.toml\n  mpt config check --resolve /etc/mpt/mptd.toml   # also look up remote host names"
    )]
    Check {
        /// Also look up every path's `remote` host name through the
        /// system resolver, as the daemon would at start; a name without
        /// an address of its path's family is an error (exit 2). Without
        /// it, names are not looked up (the daemon starts anyway and
        /// retries them).
        #[arg(long)]
        resolve: bool,
        /// The config file.
        file: PathBuf,
    },
}
