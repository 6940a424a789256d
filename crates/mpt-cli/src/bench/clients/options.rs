//! What `mpt bench clients` runs: clients, paths, senders, the flood and
//! rekey measurements, and the limits they are checked against.

use std::path::PathBuf;
use std::time::Duration;

/// Most clients: the server's connection limit.
pub const MAX_CLIENTS: usize = mptd::config::MAX_CONNECTIONS;
/// Most paths per client (one veth pair each).
pub const MAX_PATHS_PER_CLIENT: usize = 8;
/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Client mptds.
    pub clients: usize,
    /// Paths of each client.
    pub paths_per_client: usize,
    /// Clients sending at once.
    pub senders: usize,
    /// Seconds per TCP measurement.
    pub duration: Duration,
    /// Shared-port mode (else a port per client connection).
    pub shared_port: bool,
    /// Also measure under a flood of forged handshake initiations.
    pub flood: bool,
    /// Rekey interval of the last client (`None`: no rekey measurement).
    pub rekey_after: Option<Duration>,
    /// Every client renews its keys this often (`mpt bench soak`; the
    /// field above is the one measured client's).
    pub rekey_all: Option<Duration>,
    /// The server's connections one per file in `work/clients.d`, read
    /// through `include` as `mpt client add` writes them (so a reload can
    /// add and remove clients).
    pub clients_d: bool,
    /// Path 0 through an emulator wire in a middle namespace (so it can go
    /// silent without a link event).
    pub emu_path0: bool,
    /// The server mptd's RLIMIT_NOFILE, soft and hard (`ulimit -n`).
    pub nofile: Option<u64>,
    /// Namespace tag: `mptemu-<pid>-<tag>-{s,c[,m]}`.
    pub tag: &'static str,
    /// Output directory.
    pub out: PathBuf,
    /// The mptd binary.
    pub mptd: PathBuf,
}

impl Options {
    /// The settings that shape the measurements, as a line for the record
    /// (`RunMeta`; their hash stands in for a scenario file's).
    pub fn settings(&self) -> String {
        format!(
            "clients={} paths_per_client={} senders={} duration_s={} shared_port={} flood={} rekey_after_s={}",
            self.clients,
            self.paths_per_client,
            self.senders,
            self.duration.as_secs_f64(),
            self.shared_port,
            self.flood,
            self.rekey_after.map_or(0.0, |d| d.as_secs_f64()),
        )
    }

    /// The defaults of `mpt bench clients` (200 clients, 2 paths, 4
    /// senders, 10 s, the shared port, no flood, rekeys every 2 s).
    pub fn new(out: PathBuf, mptd: PathBuf) -> Options {
        Options {
            clients: 200,
            paths_per_client: 2,
            senders: 4,
            duration: Duration::from_secs(10),
            shared_port: true,
            flood: false,
            rekey_after: Some(Duration::from_secs(2)),
            rekey_all: None,
            clients_d: false,
            emu_path0: false,
            nofile: None,
            tag: "clients",
            out,
            mptd,
        }
    }

    /// Checks the numbers against each other and the limits.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            return Err(format!("--clients {}: 1..={MAX_CLIENTS}", self.clients));
        }
        if !(1..=MAX_PATHS_PER_CLIENT).contains(&self.paths_per_client) {
            return Err(format!(
                "--paths-per-client {}: 1..={MAX_PATHS_PER_CLIENT}",
                self.paths_per_client
            ));
        }
        if self.senders == 0 || self.senders > self.clients {
            return Err(format!(
                "--senders {}: 1..=--clients ({})",
                self.senders, self.clients
            ));
        }
        if let Some(r) = self.rekey_after {
            if !(2..=120).contains(&r.as_secs()) {
                return Err(format!("--rekey-after {}: 2..=120 s (0: off)", r.as_secs()));
            }
        }
        if let Some(n) = self.nofile {
            if !(32..=1 << 20).contains(&n) {
                return Err(format!("--nofile {n}: 32..=1048576"));
            }
        }
        Ok(())
    }

    pub(crate) fn mode(&self) -> &'static str {
        if self.shared_port {
            "shared-port"
        } else {
            "per-connection-port"
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let mut o = Options::new(PathBuf::from("/tmp/x"), PathBuf::from("mptd"));
        assert!(o.check().is_ok());
        o.senders = 201;
        assert!(o.check().unwrap_err().contains("--senders"));
        o.senders = 4;
        o.clients = MAX_CLIENTS + 1;
        assert!(o.check().unwrap_err().contains("--clients"));
        o.clients = 10;
        o.rekey_after = Some(Duration::from_secs(1));
        assert!(o.check().unwrap_err().contains("--rekey-after"));
    }
}
