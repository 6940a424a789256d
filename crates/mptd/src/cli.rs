//! `mptd`'s command line as clap derives it. It lives in the library, not
//! in `main.rs`, so that `mpt generate man` can render the daemon's man
//! page from the same definition the binary parses (one source for
//! `--help` and `mptd(8)`).

use std::path::PathBuf;

use clap::Parser;

/// The mpt multipath UDP tunnel daemon.
///
/// Creates a tun interface and stripes every IP packet read from it over
/// the UDP paths of its connections, one scheduling decision per packet.
/// Runs in the foreground; stop it with SIGTERM or Ctrl-C.
///
/// Examples:
///   mptd --config /etc/mpt/mptd.toml
///   mptd --check /etc/mpt/mptd.toml
#[derive(Debug, Parser)]
#[command(name = "mptd", version, verbatim_doc_comment)]
pub struct Args {
    /// Run with this configuration file.
    #[arg(long, short = 'c', value_name = "FILE", conflicts_with = "check")]
    pub config: Option<PathBuf>,
    /// Validate this configuration file and exit (0 valid, 2 invalid).
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
}
