//! `mpt client add|list|remove`: the grammar of the branch commands run on
//! a concentrator (the work is in `crate::commands::client` and the
//! library's `branch`).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use mptd::config::Prefix;

#[derive(Subcommand, Debug)]
pub(crate) enum ClientCommand {
    /// Add a branch: its key pair, a free tunnel address, the server's
    /// client file; print the branch's config.
    #[command(after_help = ADD_HELP)]
    Add(Box<AddArgs>),
    /// List the server's clients (and whether each is connected, if mptd answers).
    #[command(after_help = LIST_HELP)]
    List {
        /// The server's config file.
        #[arg(long, value_name = "SERVER.toml")]
        config: PathBuf,
    },
    /// Delete a client's file; `mpt reload` then cuts the client off.
    #[command(after_help = REMOVE_HELP)]
    Remove {
        /// The client's name.
        name: String,
        /// The server's config file.
        #[arg(long, value_name = "SERVER.toml")]
        config: PathBuf,
    },
}

#[derive(Args, Debug)]
pub(crate) struct AddArgs {
    /// The branch's name: its file name in the include folder and its
    /// connection name (letters, digits, '-', '_', '.').
    pub(crate) name: String,
    /// The server's config file (its [daemon] include names the client folder).
    #[arg(long, value_name = "SERVER.toml")]
    pub(crate) config: PathBuf,
    /// The concentrator's address as the branch reaches it, and its port
    /// if not the shared port (e.g. a NAT's forwarded port).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub(crate) endpoint: String,
    /// Write the branch's new private key here (mode 0600).
    #[arg(long, value_name = "FILE")]
    pub(crate) key_out: PathBuf,
    /// Replace --key-out if it exists (never a client file).
    #[arg(long)]
    pub(crate) force: bool,
    /// A branch interface to reach the concentrator by: one path each,
    /// following that interface's address (at least one).
    #[arg(long = "uplink", value_name = "IFACE", required = true)]
    pub(crate) uplinks: Vec<String>,
    /// A network behind the branch, routed to it by the server (repeat).
    #[arg(long = "network", value_name = "CIDR")]
    pub(crate) networks: Vec<Prefix>,
    /// What the branch routes into the tunnel (repeat) [default: the
    /// server's tunnel prefixes].
    #[arg(long = "route", value_name = "CIDR")]
    pub(crate) routes: Vec<Prefix>,
    /// The branch's tunnel IPv4 address instead of the next free one.
    #[arg(long, value_name = "IP")]
    pub(crate) ipv4: Option<std::net::IpAddr>,
    /// The branch's tunnel IPv6 address instead of the next free one.
    #[arg(long, value_name = "IP")]
    pub(crate) ipv6: Option<std::net::IpAddr>,
    /// Where the branch will keep its private key (the printed config's
    /// private_key_file) [default: /etc/mpt/NAME.key].
    #[arg(long, value_name = "PATH")]
    pub(crate) key_path: Option<PathBuf>,
}

const ADD_HELP: &str = "\
Run on the concentrator. Reads the server config with mptd's parser, takes
the lowest free address of each [tunnel] prefix (IPv4 and IPv6 if the
server has both; never the server's, another client's or one inside a
client's networks), makes the branch's X25519 key pair (private key to
--key-out: mode 0600, written atomically, never overwritten without
--force), writes the server's client file (the [daemon] include pattern
with NAME for its `*`, e.g. clients.d/NAME.toml: public_key, peer_ipv4 /
peer_ipv6, networks, port) and prints the branch's whole config on stdout:
the server's public key, one path per --uplink (by interface, remote =
the endpoint, port = the shared port), the branch's tunnel address,
private_key_file = --key-path, and networks = --route (default: the
tunnel prefixes, so branches reach each other through the concentrator).

A running server takes the new client with `mpt reload`, also the first
one (a server with include and private_key_file starts with no client and
opens the default shared port 65022). Refused
(exit 2): a name or address in use, a name that is no safe file name, a
server config without include or private_key_file.

Example:
  mpt client add lyon --config /etc/mpt/mptd.toml --endpoint 203.0.113.7 \\
      --key-out lyon.key --uplink eth0 --uplink wwan0 --network 192.168.20.0/24 > lyon.toml
  mpt reload
  # on the branch: lyon.toml as /etc/mpt/mptd.toml, lyon.key as /etc/mpt/lyon.key";

const LIST_HELP: &str = "\
One line per client connection of the server config (its include files
included): name, tunnel address(es), public key, networks, and its state
if mptd answers on the config's control socket (--socket overrides):
up, keying, waiting (no path yet), down, or `not loaded` (added to the
files but not yet reloaded).

Example:
  mpt client list --config /etc/mpt/mptd.toml";

const REMOVE_HELP: &str = "\
Deletes the client's file from the include folder (only a file holding
that one client; clients in the main config are edited by hand). The
running server keeps serving the client until `mpt reload`, which cuts it
off at once: its sessions, keys and routes are dropped.

Example:
  mpt client remove lyon --config /etc/mpt/mptd.toml && mpt reload";
