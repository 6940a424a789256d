//! What `mpt bench soak` runs: how many clients for how long, the fault
//! rhythm, the rekey interval and the limits the verdict uses.

use std::path::PathBuf;
use std::time::Duration;

use crate::bench::clients::options::{MAX_CLIENTS, MAX_PATHS_PER_CLIENT};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub clients: usize,
    /// Paths of each client (path 0 can go silent, path 1 down: 2 or more).
    pub paths_per_client: usize,
    /// The fault schedule's length.
    pub duration: Duration,
    /// How long a lasting fault (silence, link down, flood) lasts.
    pub hold: Duration,
    /// Between one fault's end and the next one's start.
    pub gap: Duration,
    /// Every client's `rekey_after`.
    pub rekey_after: Duration,
    /// Every client back within this long of each fault's end.
    pub recover_within: Duration,
    /// Clients that carry the background transfers.
    pub senders: usize,
    /// Bytes per background transfer.
    pub transfer_bytes: usize,
    /// The concentrator's RLIMIT_NOFILE (`ulimit -n`).
    pub nofile: Option<u64>,
    pub out: PathBuf,
    pub mptd: PathBuf,
}

impl Options {
    /// The 10-minute defaults: 50 clients, 2 paths, a fault every 15 s
    /// (5 s held), rekeys every 5 s, back within 15 s.
    pub fn new(out: PathBuf, mptd: PathBuf) -> Options {
        Options {
            clients: 50,
            paths_per_client: 2,
            duration: Duration::from_secs(600),
            hold: Duration::from_secs(5),
            gap: Duration::from_secs(10),
            rekey_after: Duration::from_secs(5),
            recover_within: Duration::from_secs(15),
            senders: 4,
            transfer_bytes: 1 << 20,
            nofile: None,
            out,
            mptd,
        }
    }

    /// `--quick`: 60 s, a fault every 8 s (3 s held): each kind once.
    pub fn quick(&mut self) {
        self.duration = Duration::from_secs(60);
        self.hold = Duration::from_secs(3);
        self.gap = Duration::from_secs(5);
    }

    pub fn check(&self) -> Result<(), String> {
        if !(self.senders + 1..=MAX_CLIENTS).contains(&self.clients) {
            return Err(format!(
                "--clients {}: {}..={MAX_CLIENTS} (more than the {} senders)",
                self.clients,
                self.senders + 1,
                self.senders
            ));
        }
        if !(2..=MAX_PATHS_PER_CLIENT).contains(&self.paths_per_client) {
            return Err(format!(
                "--paths-per-client {}: 2..={MAX_PATHS_PER_CLIENT} (one goes silent, one down)",
                self.paths_per_client
            ));
        }
        if !(2..=120).contains(&self.rekey_after.as_secs()) {
            return Err(format!(
                "--rekey-after {}: 2..=120 s",
                self.rekey_after.as_secs()
            ));
        }
        if !(1..=300).contains(&self.recover_within.as_secs()) {
            return Err(format!(
                "--recover-within {}: 1..=300 s",
                self.recover_within.as_secs()
            ));
        }
        if let Some(n) = self.nofile {
            if !(32..=1 << 20).contains(&n) {
                return Err(format!("--nofile {n}: 32..=1048576"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let mut o = Options::new(PathBuf::from("/tmp/x"), PathBuf::from("mptd"));
        assert!(o.check().is_ok());
        o.quick();
        assert_eq!(o.duration, Duration::from_secs(60));
        o.clients = 4;
        assert!(o.check().unwrap_err().contains("--clients"));
        o.clients = 5;
        o.paths_per_client = 1;
        assert!(o.check().unwrap_err().contains("--paths-per-client"));
        o.paths_per_client = 2;
        o.nofile = Some(8);
        assert!(o.check().unwrap_err().contains("--nofile"));
        o.nofile = Some(256);
        o.rekey_after = Duration::from_secs(1);
        assert!(o.check().unwrap_err().contains("--rekey-after"));
    }
}
