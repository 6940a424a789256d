//! `mpt bench clients`: one server, many clients (issue 14).
//!
//! Two namespaces, `mptemu-<pid>-clients-s` (the server) and
//! `mptemu-<pid>-clients-c` (every client), joined by one veth pair per
//! client path (`c<k>` <-> `s<k>`, subnet 10.(100+k).0.0/16, server at
//! 10.(100+k).0.1). Client `i` has address 10.(100+k).(1+i/250).(1+i%250)
//! on veth `k`, its own mptd (tun `mptc<i>`, control socket, key pair), the
//! tunnel address 172.17.x.y/32 and one route through its tunnel: to its
//! "target" 172.18.x.y, an address the server namespace answers as its own
//! (`ip route add local 172.18.0.0/16 dev lo`), so every client reaches the
//! server over its own tunnel from one namespace. The server's tun has
//! 172.17.255.254/16: replies to a client's tunnel address leave through it
//! and mptd picks the connection by that address.
//!
//! Every connection uses the public-key handshake. The server config comes
//! in two modes behind [`server_config`]: per-connection ports (each client
//! connection on the server has its own port, 20000 + i, and its paths) and
//! the shared port (client connections without paths on port 65022, told
//! apart by the Noise session index, paths learnt from the client).
//!
//! Measured: time until every client is up (server status: session
//! established, every path up), the server's threads and memory
//! (/proc/PID/status), single-stream TCP of one client alone and of K
//! clients at once (iperf3 bound to the clients' tunnel addresses), with
//! `--flood` a thread sending forged Noise initiations from spoofed
//! addresses to the server ports as fast as it can, first alone (the
//! server's memory over it, with no traffic) and then in rounds beside the
//! same K senders: quiet, flooded, flooded at a closed port (the control:
//! what the flooding thread's CPU costs on a shared machine) and paced at
//! half rate, quiet and flooded (see [`measure_flood`]); and with `--rekey-after` one client alone whose keys are renewed
//! every few seconds (TCP retransmits against client 0 without rekeys).
//! Both rekey runs are paced at half the single client's rate: at full
//! speed on two cores TCP overflows a socket buffer now and then with or
//! without rekeys (hundreds of retransmits in one run, none in the next),
//! which would hide what rekeying itself costs.
//!
//! Processes are stopped and namespaces deleted on every exit path (guards;
//! SIGINT/SIGTERM only set the stop flag every wait polls).

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;

use super::iperf::{self, Measurement};
use super::process::{cpu_time, Proc};
use super::stats::median_run;
use super::stop::{check_stop, sleep};
use super::testbed::mptd_status;
use mpt_emu::netns::{ip, Netns, PREFIX};

/// Most clients: the server's connection limit.
pub const MAX_CLIENTS: usize = mptd::config::MAX_CONNECTIONS;
/// Most paths per client (one veth pair each).
pub const MAX_PATHS_PER_CLIENT: usize = 8;
/// The shared port of the shared-port mode (mptd's default port).
pub const SHARED_PORT: u16 = 65022;
/// First server port of the per-connection-port mode.
pub const PORT_BASE: u16 = 20000;
/// The clients' own UDP port (each client has its own addresses).
const CLIENT_PORT: u16 = 65022;
/// Tunnel MTU (outer IPv4 + UDP + header fit the veths' 1500).
const MTU: u32 = 1400;

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
    /// Output directory.
    pub out: PathBuf,
    /// The mptd binary.
    pub mptd: PathBuf,
}

impl Options {
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
        Ok(())
    }

    fn mode(&self) -> &'static str {
        if self.shared_port {
            "shared-port"
        } else {
            "per-connection-port"
        }
    }
}

// ---------------------------------------------------------------------------
// Addresses and configs

/// The server's address on path `k`.
pub fn server_ip(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 100 + k as u8, 0, 1)
}

/// Client `i`'s address on path `k`.
pub fn client_ip(i: usize, k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 100 + k as u8, 1 + (i / 250) as u8, 1 + (i % 250) as u8)
}

/// Client `i`'s tunnel address.
pub fn client_tun_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(172, 17, (i / 250) as u8, 1 + (i % 250) as u8)
}

/// The server-side address client `i` sends its measurement traffic to.
pub fn target_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(172, 18, (i / 250) as u8, 1 + (i % 250) as u8)
}

/// The server's tunnel address (the /16 holds every client's).
const SERVER_TUN: &str = "172.17.255.254/16";
/// Answered as local in the server namespace (every client's target).
const TARGETS: &str = "172.18.0.0/16";

/// Client `i`'s connection name on the server.
pub fn client_name(i: usize) -> String {
    format!("client-{i:03}")
}

/// The server's UDP port for client `i`.
pub fn server_port(i: usize, shared: bool) -> u16 {
    if shared {
        SHARED_PORT
    } else {
        PORT_BASE + i as u16
    }
}

/// The server's config. `client_keys[i]` is client `i`'s public key.
/// Per-connection ports: each client connection has its own port and one
/// path per veth with the client's address. Shared port: client
/// connections on port 65022 without any `[[connection.path]]` (learnt
/// from the client's authenticated packets).
pub fn server_config(
    control: &Path,
    private_key: &Path,
    client_keys: &[String],
    paths: usize,
    shared: bool,
) -> String {
    let mut s = format!(
        "# generated by mpt bench clients ({} mode)\n[daemon]\ncontrol = \"{}\"\n\
         private_key_file = \"{}\"\nlog = \"info\"\n\n[tunnel]\nname = \"mpts0\"\nmtu = {MTU}\n\
         ipv4 = \"{SERVER_TUN}\"\n",
        if shared {
            "shared-port"
        } else {
            "per-connection-port"
        },
        control.display(),
        private_key.display()
    );
    for (i, key) in client_keys.iter().enumerate() {
        let _ = write!(
            s,
            "\n[[connection]]\nname = \"{}\"\nid = {}\npeer_ipv4 = \"{}\"\nport = {}\n\
             public_key = \"{key}\"\n",
            client_name(i),
            i + 1,
            client_tun_ip(i),
            server_port(i, shared),
        );
        if shared {
            // Paths and the client's ports are learnt.
            continue;
        }
        let _ = writeln!(s, "remote_port = {CLIENT_PORT}");
        for k in 0..paths {
            let _ = write!(
                s,
                "[[connection.path]]\nname = \"p{k}\"\nlocal = \"{}\"\nremote = \"{}\"\n",
                server_ip(k),
                client_ip(i, k)
            );
        }
    }
    s
}

/// Client `i`'s config: its own tun, control socket and key; one
/// connection to the server whose `networks` route its target through the
/// tunnel; `rekey_after` renews its keys that often.
pub fn client_config(
    i: usize,
    control: &Path,
    private_key: &Path,
    server_key: &str,
    paths: usize,
    shared: bool,
    rekey_after: Option<Duration>,
) -> String {
    let mut s = format!(
        "# generated by mpt bench clients\n[daemon]\ncontrol = \"{}\"\nprivate_key_file = \"{}\"\n\
         threads = 1\nlog = \"warn\"\n\n[tunnel]\nname = \"mptc{i}\"\nmtu = {MTU}\nipv4 = \"{}/32\"\n\n\
         [[connection]]\nname = \"server\"\nid = {}\npeer_ipv4 = \"{}\"\nnetworks = [\"{}/32\"]\n\
         port = {CLIENT_PORT}\nremote_port = {}\npublic_key = \"{server_key}\"\n",
        control.display(),
        private_key.display(),
        client_tun_ip(i),
        i + 1,
        target_ip(i),
        target_ip(i),
        server_port(i, shared),
    );
    if let Some(r) = rekey_after {
        let _ = writeln!(s, "rekey_after = \"{}s\"", r.as_secs());
    }
    for k in 0..paths {
        let _ = write!(
            s,
            "[[connection.path]]\nname = \"p{k}\"\nlocal = \"{}\"\nremote = \"{}\"\n",
            client_ip(i, k),
            server_ip(k)
        );
    }
    s
}

/// A new X25519 key pair: the private key in `file` (0600), the public key
/// (base64) returned — what `mpt keypair FILE` does.
pub fn keypair(file: &Path) -> anyhow::Result<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("the system random generator failed"))?;
    let secret = mpt_proto::noise::StaticSecret::from_bytes(bytes);
    mptd::keys::write_private(file, &secret, true)
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(mptd::keys::encode_public(&secret.public_key()))
}

// ---------------------------------------------------------------------------
// Results

/// Threads and memory of a process, from /proc/PID/status.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProcMem {
    pub threads: u64,
    /// Resident set, KiB.
    pub rss_kib: u64,
    /// Peak resident set, KiB.
    pub hwm_kib: u64,
}

/// Reads [`ProcMem`] of `pid`.
pub fn proc_mem(pid: u32) -> Option<ProcMem> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_proc_status(&text)
}

fn parse_proc_status(text: &str) -> Option<ProcMem> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    Some(ProcMem {
        threads: field("Threads:")?,
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

/// K clients at once.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Aggregate {
    /// The clients that sent.
    pub clients: Vec<String>,
    /// Each sender's TCP goodput.
    pub per_sender: Vec<Measurement>,
    /// Their sum, Mbit/s.
    pub mbps: f64,
    /// Sum of the senders' retransmits.
    pub retransmits: u64,
    /// CPU of the server mptd over the measurement, percent of one core.
    pub server_cpu_pct: Option<f64>,
}

/// The same senders under a flood of forged initiations (see
/// [`measure_flood`] for the runs and why).
#[derive(Debug, Clone, Default, Serialize)]
pub struct FloodResult {
    /// The flooded run with the median throughput.
    pub senders: Aggregate,
    pub rounds: usize,
    /// Each round's aggregate, Mbit/s: quiet, under the flood, under the
    /// flood aimed at a closed port (the control), paced quiet and paced
    /// under the flood.
    pub quiet_mbps: Vec<f64>,
    pub flooded_mbps: Vec<f64>,
    pub control_mbps: Vec<f64>,
    pub paced_quiet_mbps: Vec<f64>,
    pub paced_flooded_mbps: Vec<f64>,
    /// iperf3 -b of each sender in the paced runs: half the first quiet
    /// aggregate, shared out.
    pub paced_mbps_per_sender: u64,
    /// Forged initiations sent to the server ports, and their rate.
    pub datagrams: u64,
    pub per_second: f64,
    /// Rate of the control flood.
    pub control_per_second: f64,
    /// CPU of this process (the flooding thread, mostly) over the floods
    /// at the server, percent of one core: it competes with the tunnels
    /// for the cores.
    pub flood_cpu_pct: Option<f64>,
    /// Medians: 1 - flooded / quiet, percent.
    pub drop_pct: f64,
    /// 1 - control / quiet: what the flooding process and the kernel
    /// cost the senders with mptd out of it.
    pub control_drop_pct: f64,
    /// 1 - flooded / control: what the server's handling of the flood
    /// costs them (target < 20 %).
    pub server_drop_pct: f64,
    /// 1 - paced flooded / paced quiet (target < 20 %).
    pub paced_drop_pct: f64,
    /// Datagrams the server namespace's kernel dropped on full socket
    /// queues over the rounds (`Udp: RcvbufErrors`).
    pub udp_rcvbuf_errors: Option<u64>,
    /// Server memory before and after the rounds.
    pub server_before: ProcMem,
    pub server_after: ProcMem,
    /// The same flood with no traffic, before the rounds (after every
    /// traffic phase, so the buffers traffic grows have grown already):
    /// server memory before and after it, and its rate. What the flood
    /// alone does to memory.
    pub alone_before: ProcMem,
    pub alone_after: ProcMem,
    pub alone_per_second: f64,
    /// The server mptd's CPU over the flood alone, percent of one core:
    /// what handling the forged datagrams costs it.
    pub alone_server_cpu_pct: Option<f64>,
    /// Server connections still up after the flood.
    pub up_after: usize,
    /// The server's `noise` status counters after the flood.
    pub server_noise: Value,
}

/// One client alone with rekeys against one client alone without.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RekeyResult {
    pub client: String,
    pub rekey_after_s: u64,
    /// Rekeys the client made during its measurement.
    pub rekeys: u64,
    /// Pacing of both runs (iperf3 -b), half the single client's rate.
    pub paced_mbps: u64,
    pub with_rekeys: Measurement,
    /// The baseline: client 0 alone, no rekeys, paced the same.
    pub without_rekeys: Measurement,
}

/// results.json of `mpt bench clients`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub scenario: String,
    pub mode: String,
    pub clients: usize,
    pub paths_per_client: usize,
    pub senders: usize,
    pub duration_s: f64,
    pub started_unix: u64,
    pub wall_s: f64,
    pub cores: usize,
    pub kernel: String,
    /// Every step done.
    pub complete: bool,
    /// Every client up (session established, every path up) in time.
    pub all_up: bool,
    /// Seconds from the first client start until all were up.
    pub up_s: Option<f64>,
    /// Clients up at the end of the wait.
    pub up_count: usize,
    /// Server mptd once all were up (idle), and at the end.
    pub server_idle: Option<ProcMem>,
    pub server_end: Option<ProcMem>,
    /// One client alone (client 0).
    pub single: Option<Measurement>,
    /// K clients at once.
    pub aggregate: Option<Aggregate>,
    /// aggregate / single (target >= 0.8).
    pub aggregate_ratio: Option<f64>,
    pub flood: Option<FloodResult>,
    pub rekey: Option<RekeyResult>,
}

impl Report {
    /// The figures as `key,value` lines.
    pub fn csv(&self) -> String {
        let mut s = String::from("key,value\n");
        let mut put = |k: &str, v: String| {
            let _ = writeln!(s, "{k},{v}");
        };
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        put("mode", self.mode.clone());
        put("clients", self.clients.to_string());
        put("paths_per_client", self.paths_per_client.to_string());
        put("senders", self.senders.to_string());
        put("duration_s", format!("{}", self.duration_s));
        put("complete", self.complete.to_string());
        put("all_up", self.all_up.to_string());
        put("up_count", self.up_count.to_string());
        put("up_s", opt(self.up_s));
        for (tag, m) in [("idle", self.server_idle), ("end", self.server_end)] {
            if let Some(m) = m {
                put(&format!("server_threads_{tag}"), m.threads.to_string());
                put(&format!("server_rss_kib_{tag}"), m.rss_kib.to_string());
                put(&format!("server_hwm_kib_{tag}"), m.hwm_kib.to_string());
            }
        }
        put("single_mbps", opt(self.single.as_ref().map(|m| m.mbps)));
        put(
            "aggregate_mbps",
            opt(self.aggregate.as_ref().map(|a| a.mbps)),
        );
        put("aggregate_ratio", opt(self.aggregate_ratio));
        if let Some(f) = &self.flood {
            put("flood_mbps", format!("{:.3}", f.senders.mbps));
            put("flood_drop_pct", format!("{:.3}", f.drop_pct));
            put(
                "flood_control_drop_pct",
                format!("{:.3}", f.control_drop_pct),
            );
            put("flood_server_drop_pct", format!("{:.3}", f.server_drop_pct));
            put("flood_paced_drop_pct", format!("{:.3}", f.paced_drop_pct));
            put(
                "flood_paced_mbps_per_sender",
                f.paced_mbps_per_sender.to_string(),
            );
            put(
                "flood_udp_rcvbuf_errors",
                f.udp_rcvbuf_errors.map_or(String::new(), |n| n.to_string()),
            );
            put("flood_datagrams_per_s", format!("{:.0}", f.per_second));
            put(
                "flood_cpu_pct",
                f.flood_cpu_pct.map_or(String::new(), |p| format!("{p:.1}")),
            );
            put("flood_rss_kib_before", f.server_before.rss_kib.to_string());
            put("flood_rss_kib_after", f.server_after.rss_kib.to_string());
            put(
                "flood_alone_rss_kib_before",
                f.alone_before.rss_kib.to_string(),
            );
            put(
                "flood_alone_rss_kib_after",
                f.alone_after.rss_kib.to_string(),
            );
            put(
                "flood_alone_per_second",
                format!("{:.0}", f.alone_per_second),
            );
            put(
                "flood_alone_server_cpu_pct",
                f.alone_server_cpu_pct
                    .map_or(String::new(), |p| format!("{p:.1}")),
            );
            put("flood_up_after", f.up_after.to_string());
        }
        if let Some(r) = &self.rekey {
            put("rekey_after_s", r.rekey_after_s.to_string());
            put("rekeys", r.rekeys.to_string());
            put("rekey_paced_mbps", r.paced_mbps.to_string());
            put("rekey_mbps", format!("{:.3}", r.with_rekeys.mbps));
            put(
                "rekey_retransmits",
                r.with_rekeys.retransmits.unwrap_or(0).to_string(),
            );
            put(
                "norekey_retransmits",
                r.without_rekeys.retransmits.unwrap_or(0).to_string(),
            );
        }
        s
    }

    /// A short text summary for stdout.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "mpt bench clients ({} mode): {} clients x {} paths, {} senders, {} s per measurement",
            self.mode, self.clients, self.paths_per_client, self.senders, self.duration_s
        );
        let _ = writeln!(
            s,
            "  all up:            {} ({} of {}{})",
            if self.all_up { "yes" } else { "NO" },
            self.up_count,
            self.clients,
            self.up_s
                .map_or(String::new(), |t| format!(", after {t:.1} s"))
        );
        for (tag, m) in [("idle", self.server_idle), ("end", self.server_end)] {
            if let Some(m) = m {
                let _ = writeln!(
                    s,
                    "  server ({tag:<4}):   {} threads, RSS {:.1} MiB, peak {:.1} MiB",
                    m.threads,
                    m.rss_kib as f64 / 1024.0,
                    m.hwm_kib as f64 / 1024.0
                );
            }
        }
        if let Some(m) = &self.single {
            let _ = writeln!(s, "  one client:        {:.1} Mbit/s TCP", m.mbps);
        }
        if let Some(a) = &self.aggregate {
            let _ = writeln!(
                s,
                "  {:<18} {:.1} Mbit/s TCP in all (ratio to one client {})",
                format!("{} at once:", a.clients.len()),
                a.mbps,
                self.aggregate_ratio
                    .map_or("-".to_string(), |r| format!("{r:.2}, target >= 0.8"))
            );
        }
        if let Some(f) = &self.flood {
            let list = |v: &[f64]| {
                v.iter()
                    .map(|x| format!("{x:.0}"))
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            let verdict = |d: f64| if d < 20.0 { "PASS" } else { "FAIL" };
            let _ = writeln!(
                s,
                "  under flood:       {:.0} forged initiations/s (the flooding thread used {} of a core); \
                 medians of {} rounds, Mbit/s in all:",
                f.per_second,
                f.flood_cpu_pct
                    .map_or("-".to_string(), |p| format!("{p:.0} %")),
                f.rounds
            );
            let _ = writeln!(
                s,
                "    quiet {} | flooded {} | flood at a closed port {}",
                list(&f.quiet_mbps),
                list(&f.flooded_mbps),
                list(&f.control_mbps)
            );
            let _ = writeln!(
                s,
                "    flooded vs quiet {:.1} % less (flood at a closed port vs quiet: {:.1} %: the testbed's share)",
                f.drop_pct, f.control_drop_pct
            );
            let _ = writeln!(
                s,
                "    flooded vs flood at a closed port {:.1} % less (the server's handling; target < 20 %): {}",
                f.server_drop_pct,
                verdict(f.server_drop_pct)
            );
            let _ = writeln!(
                s,
                "    paced at {} Mbit/s each: quiet {} | flooded {}: {:.1} % less (target < 20 %): {}",
                f.paced_mbps_per_sender,
                list(&f.paced_quiet_mbps),
                list(&f.paced_flooded_mbps),
                f.paced_drop_pct,
                verdict(f.paced_drop_pct)
            );
            let _ = writeln!(
                s,
                "    server RSS {:.1} -> {:.1} MiB, {} up after, {} datagrams dropped on full socket queues",
                f.server_before.rss_kib as f64 / 1024.0,
                f.server_after.rss_kib as f64 / 1024.0,
                f.up_after,
                f.udp_rcvbuf_errors
                    .map_or("-".to_string(), |n| n.to_string())
            );
            let _ = writeln!(
                s,
                "  flood alone:       {:.0} forged initiations/s, no traffic: server RSS {:.1} -> {:.1} MiB, server CPU {}",
                f.alone_per_second,
                f.alone_before.rss_kib as f64 / 1024.0,
                f.alone_after.rss_kib as f64 / 1024.0,
                f.alone_server_cpu_pct
                    .map_or("-".to_string(), |p| format!("{p:.1} % of a core")),
            );
        }
        if let Some(r) = &self.rekey {
            let _ = writeln!(
                s,
                "  rekeys:            {} in {} s (every {} s, paced at {} Mbit/s): {:.1} Mbit/s, {} retransmits; client 0 without: {:.1} Mbit/s, {} retransmits",
                r.rekeys,
                self.duration_s,
                r.rekey_after_s,
                r.paced_mbps,
                r.with_rekeys.mbps,
                r.with_rekeys.retransmits.unwrap_or(0),
                r.without_rekeys.mbps,
                r.without_rekeys.retransmits.unwrap_or(0)
            );
        }
        s
    }

    fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self).context("serializing results")?;
        for (name, text) in [("results.json", json + "\n"), ("results.csv", self.csv())] {
            let p = dir.join(name);
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The testbed

/// Namespaces, daemons and addresses; everything stopped or deleted on
/// drop, processes first (fields drop in order).
struct Bed {
    clients: Vec<Proc>,
    server: Proc,
    server_control: PathBuf,
    client_controls: Vec<PathBuf>,
    c: Netns,
    s: Netns,
}

impl Drop for Bed {
    fn drop(&mut self) {
        // SIGTERM to every client first, so they stop in parallel; each
        // guard then only waits for its own.
        for p in &mut self.clients {
            if p.exited().is_none() {
                let pid = nix::unistd::Pid::from_raw(p.pid() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
        }
        self.clients.clear();
    }
}

fn run_ip_batch(ns: &str, lines: &[String], work: &Path, tag: &str) -> anyhow::Result<()> {
    let file = work.join(format!("ip-{tag}.batch"));
    std::fs::write(&file, lines.join("\n") + "\n")
        .with_context(|| format!("writing {}", file.display()))?;
    let path = file.to_string_lossy().into_owned();
    ip(&["-n", ns, "-batch", &path]).with_context(|| format!("ip -batch {path} in {ns}"))?;
    Ok(())
}

fn sysctl_in(ns: &Netns, settings: &'static [(&'static str, &'static str)]) -> anyhow::Result<()> {
    ns.run(move || {
        for (key, value) in settings {
            let path = format!("/proc/sys/net/{key}");
            match std::fs::write(&path, value) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                r => r.map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?,
            }
        }
        Ok(())
    })
    .with_context(|| format!("sysctls in {}", ns.name()))
}

const SYSCTLS: &[(&str, &str)] = &[
    ("ipv4/conf/all/rp_filter", "0"),
    ("ipv4/conf/default/rp_filter", "0"),
    ("ipv6/conf/all/disable_ipv6", "1"),
    ("ipv6/conf/default/disable_ipv6", "1"),
];

/// Whether every server connection is up: session established and
/// `paths` paths up. Gives the number up.
fn count_up(status: &Value, paths: usize) -> usize {
    status
        .get("connections")
        .and_then(Value::as_array)
        .map_or(0, |conns| {
            conns
                .iter()
                .filter(|c| {
                    let established = c
                        .pointer("/session/established")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    let up = c.get("paths").and_then(Value::as_array).map_or(0, |ps| {
                        ps.iter()
                            .filter(|p| p.get("state").and_then(Value::as_str) == Some("up"))
                            .count()
                    });
                    established && up >= paths
                })
                .count()
        })
}

fn build(
    o: &Options,
    work: &Path,
    stop: &AtomicBool,
    t_start: &mut Option<Instant>,
) -> anyhow::Result<Bed> {
    let base = format!("{PREFIX}{}-clients", std::process::id());
    let s = Netns::create(&format!("{base}-s")).context("creating the server namespace")?;
    let c = Netns::create(&format!("{base}-c")).context("creating the client namespace")?;
    sysctl_in(&s, SYSCTLS)?;
    sysctl_in(&c, SYSCTLS)?;
    let (sn, cn) = (s.name().to_string(), c.name().to_string());
    let mut s_cmds = vec![
        "link set dev lo up".to_string(),
        format!("route add local {TARGETS} dev lo"),
    ];
    let mut c_cmds = vec!["link set dev lo up".to_string()];
    for k in 0..o.paths_per_client {
        ip(&[
            "-n",
            &cn,
            "link",
            "add",
            &format!("c{k}"),
            "type",
            "veth",
            "peer",
            "name",
            &format!("s{k}"),
            "netns",
            &sn,
        ])
        .with_context(|| format!("veth pair {k}"))?;
        s_cmds.push(format!("addr add {}/16 dev s{k}", server_ip(k)));
        s_cmds.push(format!("link set dev s{k} up"));
        for i in 0..o.clients {
            c_cmds.push(format!("addr add {}/16 dev c{k}", client_ip(i, k)));
        }
        c_cmds.push(format!("link set dev c{k} up"));
    }
    run_ip_batch(&sn, &s_cmds, work, "server")?;
    run_ip_batch(&cn, &c_cmds, work, "clients")?;
    check_stop(stop)?;

    println!("==> clients: writing keys and configs");
    let server_key = work.join("server.key");
    let server_public = keypair(&server_key)?;
    let mut client_publics = Vec::with_capacity(o.clients);
    let mut client_controls = Vec::with_capacity(o.clients);
    let mut client_cfgs = Vec::with_capacity(o.clients);
    for i in 0..o.clients {
        let key = work.join(format!("client-{i}.key"));
        client_publics.push(keypair(&key)?);
        let control = work.join(format!("client-{i}.sock"));
        let rekey = o
            .rekey_after
            .filter(|_| o.clients >= 2 && i == o.clients - 1);
        let cfg = client_config(
            i,
            &control,
            &key,
            &server_public,
            o.paths_per_client,
            o.shared_port,
            rekey,
        );
        let file = work.join(format!("client-{i}.toml"));
        std::fs::write(&file, cfg).with_context(|| format!("writing {}", file.display()))?;
        client_cfgs.push(file);
        client_controls.push(control);
    }
    let server_control = work.join("server.sock");
    let server_cfg = work.join("server.toml");
    std::fs::write(
        &server_cfg,
        server_config(
            &server_control,
            &server_key,
            &client_publics,
            o.paths_per_client,
            o.shared_port,
        ),
    )
    .with_context(|| format!("writing {}", server_cfg.display()))?;

    println!("==> clients: starting the server mptd");
    let cfg = server_cfg.to_string_lossy().into_owned();
    let server = Proc::spawn_in(
        &sn,
        "mptd server",
        &o.mptd,
        &["--config", &cfg],
        work.join("server.log"),
    )?;
    let mut bed = Bed {
        clients: Vec::with_capacity(o.clients),
        server,
        server_control,
        client_controls,
        c,
        s,
    };
    // The server listens once its control socket answers.
    let end = Instant::now() + Duration::from_secs(20);
    while mptd_status(&bed.server_control).is_err() {
        check_stop(stop)?;
        if let Some(st) = bed.server.exited() {
            bail!("the server mptd exited ({st}):\n{}", bed.server.log_tail());
        }
        if Instant::now() > end {
            bail!("the server mptd did not answer on its control socket within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("==> clients: starting {} client mptds", o.clients);
    *t_start = Some(Instant::now());
    for (i, file) in client_cfgs.iter().enumerate() {
        check_stop(stop)?;
        let cfg = file.to_string_lossy().into_owned();
        let p = Proc::spawn_in(
            bed.c.name(),
            &format!("mptd client {i}"),
            &o.mptd,
            &["--config", &cfg],
            work.join(format!("client-{i}.log")),
        )?;
        bed.clients.push(p);
    }
    Ok(bed)
}

/// Polls the server status until every client is up or `timeout`; prints
/// progress. Gives (up count, seconds since `t0` when all were up).
fn wait_all_up(
    bed: &mut Bed,
    o: &Options,
    t0: Instant,
    timeout: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<(usize, Option<f64>)> {
    let mut last_print = Instant::now();
    let mut up = 0;
    loop {
        check_stop(stop)?;
        if let Some(st) = bed.server.exited() {
            bail!("the server mptd exited ({st}):\n{}", bed.server.log_tail());
        }
        if let Ok(status) = mptd_status(&bed.server_control) {
            up = count_up(&status, o.paths_per_client);
            if up == o.clients {
                return Ok((up, Some(t0.elapsed().as_secs_f64())));
            }
        }
        if last_print.elapsed() >= Duration::from_secs(2) {
            println!(
                "    {up}/{} clients up after {:.1} s",
                o.clients,
                t0.elapsed().as_secs_f64()
            );
            last_print = Instant::now();
        }
        if t0.elapsed() > timeout {
            for (i, p) in bed.clients.iter_mut().enumerate() {
                if let Some(st) = p.exited() {
                    bail!("client {i}'s mptd exited ({st}):\n{}", p.log_tail());
                }
            }
            return Ok((up, None));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Single-stream TCP from each of `senders` (client indexes) at once, each
/// to its own iperf3 server in the server namespace.
fn tcp_at_once(
    bed: &Bed,
    senders: &[usize],
    o: &Options,
    work: &Path,
    tag: &str,
    rate_mbps: Option<u64>,
    stop: &AtomicBool,
) -> anyhow::Result<Aggregate> {
    let mut servers = Vec::new();
    for &i in senders {
        let log = work.join(format!("iperf3-{tag}-{i}-server.log"));
        servers.push(iperf::Server::start(bed.s.name(), &log, stop)?);
    }
    let secs = o.duration.as_secs().max(1).to_string();
    let cpu0 = (bed.server.cpu_time(), Instant::now());
    let mut procs = Vec::new();
    let mut outs = Vec::new();
    for (&i, server) in senders.iter().zip(&servers) {
        let json = work.join(format!("iperf3-{tag}-{i}.json"));
        let (target, bind, port) = (
            target_ip(i).to_string(),
            client_tun_ip(i).to_string(),
            server.port.to_string(),
        );
        let rate = rate_mbps.map(|r| format!("{r}M"));
        let mut args = vec![
            "-c",
            &target,
            "-B",
            &bind,
            "-p",
            &port,
            "-t",
            &secs,
            "-J",
            "--connect-timeout",
            "5000",
        ];
        if let Some(r) = &rate {
            args.extend(["-b", r.as_str()]);
        }
        procs.push(Proc::spawn_in(
            bed.c.name(),
            &format!("iperf3 client {i}"),
            Path::new("iperf3"),
            &args,
            json.clone(),
        )?);
        outs.push(json);
    }
    let deadline = Instant::now() + o.duration + Duration::from_secs(30);
    while procs.iter_mut().any(|p| p.exited().is_none()) {
        check_stop(stop)?;
        if Instant::now() > deadline {
            bail!("iperf3 clients ({tag}) did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let server_cpu_pct = match (cpu0.0, bed.server.cpu_time()) {
        (Some(a), Some(b)) => Some(100.0 * (b - a).as_secs_f64() / cpu0.1.elapsed().as_secs_f64()),
        _ => None,
    };
    drop(procs);
    drop(servers);
    let mut agg = Aggregate {
        server_cpu_pct,
        ..Aggregate::default()
    };
    for (&i, json) in senders.iter().zip(&outs) {
        let text =
            std::fs::read_to_string(json).with_context(|| format!("reading {}", json.display()))?;
        let m = iperf::parse(&text, None)
            .with_context(|| format!("client {i} ({tag}), output in {}", json.display()))?;
        agg.mbps += m.mbps;
        agg.retransmits += m.retransmits.unwrap_or(0);
        agg.clients.push(client_name(i));
        agg.per_sender.push(m);
    }
    Ok(agg)
}

/// `k` clients spread over `0..n` (client 0 first), leaving out `skip`.
pub fn pick_senders(n: usize, k: usize, skip: Option<usize>) -> Vec<usize> {
    let pool: Vec<usize> = (0..n).filter(|&i| Some(i) != skip).collect();
    let pool = if pool.len() >= k {
        pool
    } else {
        (0..n).collect()
    };
    (0..k.min(pool.len()))
        .map(|j| pool[j * pool.len() / k])
        .collect()
}

// ---------------------------------------------------------------------------
// The flood

/// Forged Noise initiations from spoofed sources, sent from a thread in
/// the client namespace until stopped.
struct Flood {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    started: Instant,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Flood {
    fn start(ns: &str, ports: Vec<u16>) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (st, se, name) = (stop.clone(), sent.clone(), ns.to_string());
        let thread = std::thread::spawn(move || {
            mpt_emu::sys::enter_netns(&name)?;
            flood_loop(&ports, &st, &se)
        });
        Flood {
            stop,
            sent,
            started: Instant::now(),
            thread: Some(thread),
        }
    }

    /// Stops the thread; gives (datagrams sent, per second).
    fn finish(mut self) -> anyhow::Result<(u64, f64)> {
        self.stop.store(true, Ordering::Relaxed);
        let secs = self.started.elapsed().as_secs_f64();
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| anyhow::anyhow!("the flood thread panicked"))?
                .context("the flood thread")?;
        }
        let n = self.sent.load(Ordering::Relaxed);
        Ok((n, n as f64 / secs.max(1e-9)))
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A small xorshift generator: the flood needs volume, not secrecy.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// One forged datagram: IPv4 header (checksum, length and id left to the
/// kernel), UDP header (no checksum), then an initiation-sized message with
/// our header (type NoiseInitiation, conn_id 0) and a random body.
pub fn forged_initiation(
    rng_bytes: &mut dyn FnMut() -> u64,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    port: u16,
) -> Vec<u8> {
    use mpt_proto::noise::INITIATION_LEN;
    use mpt_proto::wire::{Flags, Header, MsgType};
    let udp_len = 8 + INITIATION_LEN;
    let mut p = vec![0u8; 20 + udp_len];
    p[0] = 0x45;
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let sport = 1024 + (rng_bytes() % 60000) as u16;
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&port.to_be_bytes());
    p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let msg = &mut p[28..];
    for chunk in msg.chunks_mut(8) {
        let r = rng_bytes().to_le_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    let header = Header {
        msg_type: MsgType::NoiseInitiation,
        flags: Flags::NONE,
        path_id: 0,
        conn_id: 0,
        seq: 0,
        path_seq: 0,
        timestamp_us: 0,
    };
    // The buffer is INITIATION_LEN long, more than a header.
    let _ = header.emit(msg);
    p
}

fn flood_loop(ports: &[u16], stop: &AtomicBool, sent: &AtomicU64) -> std::io::Result<()> {
    // SAFETY: plain socket(2); the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut rng = XorShift(seed);
    let dst = server_ip(0);
    let mut n: u64 = 0;
    let mut result = Ok(());
    while !stop.load(Ordering::Relaxed) {
        // Spoofed sources in path 0's subnet, away from the clients'.
        let r = rng.next();
        let src = Ipv4Addr::new(10, 100, 200 + (r % 2) as u8, 1 + ((r >> 8) % 254) as u8);
        let port = ports[(n as usize) % ports.len()];
        let pkt = forged_initiation(&mut || rng.next(), src, dst, port);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(dst.octets()),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: pkt and addr outlive the call; lengths are theirs.
        let rc = unsafe {
            libc::sendto(
                fd,
                pkt.as_ptr().cast(),
                pkt.len(),
                0,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // Queue full or the neighbour not resolved yet: go on.
                Some(libc::ENOBUFS | libc::EAGAIN | libc::EHOSTUNREACH) => continue,
                _ => {
                    result = Err(e);
                    break;
                }
            }
        }
        n += 1;
        if n % 256 == 0 {
            sent.store(n, Ordering::Relaxed);
        }
    }
    sent.store(n, Ordering::Relaxed);
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    result
}

/// A port of the server namespace nothing listens on: the control flood
/// goes there (the kernel drops it after the socket lookup; mptd never
/// sees it).
pub const CLOSED_PORT: u16 = 64022;

/// Rounds of the flood measurement: each runs the senders quiet, under
/// the flood, under the flood aimed at [`CLOSED_PORT`], and paced, quiet
/// and under the flood, one after the other; the medians are compared.
pub const FLOOD_ROUNDS: usize = 3;

/// The median of `v` (the lower middle one for an even count); 0 if empty.
fn median(v: &[f64]) -> f64 {
    median_run(v).map_or(0.0, |i| v[i])
}

/// 100 * (1 - x / base), or 0 without a base.
fn drop_pct(x: f64, base: f64) -> f64 {
    if base > 0.0 {
        100.0 * (1.0 - x / base)
    } else {
        0.0
    }
}

/// `Udp: RcvbufErrors` of namespace `ns` (datagrams the kernel dropped
/// because a socket's receive queue was full).
fn udp_rcvbuf_errors(ns: &str) -> Option<u64> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let col = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(col)?.parse().ok()
}

/// The flood alone (memory), then [`FLOOD_ROUNDS`] rounds of the senders
/// quiet / flooded / flooded at a closed port / paced quiet / paced
/// flooded.
///
/// Why the control and the paced runs: every process of this testbed,
/// the flooding thread included, shares the machine's cores, and the
/// senders alone keep them busy, so any CPU the flooder takes comes off
/// the tunnels' throughput whether or not mptd ever sees a forged
/// datagram. The control flood (the same packets, same rate, to a port
/// nothing listens on) measures that cost of the testbed; flooded against
/// control is what handling the flood costs the server. The paced runs
/// offer half the quiet throughput, as clients below the server's
/// capacity do: they lose only if the server falls behind.
#[allow(clippy::too_many_arguments)]
fn measure_flood(
    bed: &Bed,
    senders: &[usize],
    o: &Options,
    work: &Path,
    ports: Vec<u16>,
    first_quiet_mbps: f64,
    server_pid: u32,
    stop: &AtomicBool,
) -> anyhow::Result<FloodResult> {
    println!(
        "==> clients: the flood alone, no traffic ({} s)",
        o.duration.as_secs()
    );
    let alone_before = proc_mem(server_pid).unwrap_or_default();
    let server_cpu0 = (bed.server.cpu_time(), Instant::now());
    let flood = Flood::start(bed.c.name(), ports.clone());
    sleep(o.duration, stop)?;
    let (_, alone_per_second) = flood.finish()?;
    let alone_server_cpu_pct = match (server_cpu0.0, bed.server.cpu_time()) {
        (Some(a), Some(b)) => {
            Some(100.0 * b.saturating_sub(a).as_secs_f64() / server_cpu0.1.elapsed().as_secs_f64())
        }
        _ => None,
    };
    sleep(Duration::from_secs(2), stop)?;
    let alone_after = proc_mem(server_pid).unwrap_or_default();
    println!(
        "    {alone_per_second:.0} forged initiations/s, server RSS {} -> {} KiB, server CPU {}",
        alone_before.rss_kib,
        alone_after.rss_kib,
        alone_server_cpu_pct.map_or("-".to_string(), |p| format!("{p:.1} % of a core"))
    );
    let paced_each = ((first_quiet_mbps / 2.0) / senders.len().max(1) as f64).max(1.0) as u64;
    let mut f = FloodResult {
        rounds: FLOOD_ROUNDS,
        paced_mbps_per_sender: paced_each,
        alone_before,
        alone_after,
        alone_per_second,
        alone_server_cpu_pct,
        server_before: proc_mem(server_pid).unwrap_or_default(),
        ..FloodResult::default()
    };
    let mut flooded_aggs = Vec::new();
    let (mut flood_secs, mut flood_cpu_secs, mut control_datagrams, mut control_secs) =
        (0.0, 0.0, 0u64, 0.0);
    let rcvbuf0 = udp_rcvbuf_errors(bed.s.name());
    for round in 1..=FLOOD_ROUNDS {
        for (kind, flood_ports, pace) in [
            ("quiet", None, None),
            ("flood", Some(&ports), None),
            ("control", Some(&vec![CLOSED_PORT]), None),
            ("paced-quiet", None, Some(paced_each)),
            ("paced-flood", Some(&ports), Some(paced_each)),
        ] {
            check_stop(stop)?;
            let tag = format!("{kind}-{round}");
            println!(
                "==> clients: flood round {round}/{FLOOD_ROUNDS}: {} clients, {kind}{} ({} s)",
                senders.len(),
                pace.map_or(String::new(), |r| format!(", each paced at {r} Mbit/s")),
                o.duration.as_secs()
            );
            let cpu0 = (cpu_time(std::process::id()), Instant::now());
            let flood = flood_ports.map(|p| Flood::start(bed.c.name(), p.clone()));
            if flood.is_some() {
                sleep(Duration::from_millis(500), stop)?;
            }
            let agg = tcp_at_once(bed, senders, o, work, &tag, pace, stop);
            let sent = flood.map(Flood::finish).transpose()?;
            let secs = cpu0.1.elapsed().as_secs_f64();
            let agg = agg?;
            let mut line = format!("    {:.1} Mbit/s in all", agg.mbps);
            if let Some((n, rate)) = sent {
                let _ = write!(line, ", {rate:.0} forged initiations/s");
                if kind == "control" {
                    control_datagrams += n;
                    control_secs += secs;
                } else {
                    f.datagrams += n;
                    flood_secs += secs;
                    if let (Some(a), Some(b)) = (cpu0.0, cpu_time(std::process::id())) {
                        flood_cpu_secs += b.saturating_sub(a).as_secs_f64();
                    }
                }
            }
            println!("{line}");
            match kind {
                "quiet" => f.quiet_mbps.push(agg.mbps),
                "flood" => {
                    f.flooded_mbps.push(agg.mbps);
                    flooded_aggs.push(agg);
                }
                "control" => f.control_mbps.push(agg.mbps),
                "paced-quiet" => f.paced_quiet_mbps.push(agg.mbps),
                _ => f.paced_flooded_mbps.push(agg.mbps),
            }
        }
    }
    f.udp_rcvbuf_errors = match (rcvbuf0, udp_rcvbuf_errors(bed.s.name())) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    // Half-done handshakes and cookies time out within seconds.
    sleep(Duration::from_secs(2), stop)?;
    let status = mptd_status(&bed.server_control).unwrap_or(Value::Null);
    f.server_after = proc_mem(server_pid).unwrap_or_default();
    f.up_after = count_up(&status, o.paths_per_client);
    f.server_noise = status.get("noise").cloned().unwrap_or(Value::Null);
    f.per_second = f.datagrams as f64 / flood_secs.max(1e-9);
    f.control_per_second = control_datagrams as f64 / control_secs.max(1e-9);
    f.flood_cpu_pct = (flood_cpu_secs > 0.0).then(|| 100.0 * flood_cpu_secs / flood_secs.max(1e-9));
    let quiet = median(&f.quiet_mbps);
    let flooded = median(&f.flooded_mbps);
    let control = median(&f.control_mbps);
    f.drop_pct = drop_pct(flooded, quiet);
    f.control_drop_pct = drop_pct(control, quiet);
    f.server_drop_pct = drop_pct(flooded, control);
    f.paced_drop_pct = drop_pct(median(&f.paced_flooded_mbps), median(&f.paced_quiet_mbps));
    if let Some(i) = median_run(&f.flooded_mbps) {
        f.senders = flooded_aggs.swap_remove(i);
    }
    println!(
        "    medians: quiet {quiet:.1}, flooded {flooded:.1} ({:.1} % less), control {control:.1} ({:.1} % less); \
         flooded vs control {:.1} % less; paced {:.1} % less",
        f.drop_pct, f.control_drop_pct, f.server_drop_pct, f.paced_drop_pct
    );
    Ok(f)
}

// ---------------------------------------------------------------------------
// The run

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Runs the scenario; writes results.json/csv (partial ones too, on error
/// or interrupt) and returns the report or the first error.
pub fn run(o: &Options, stop: &AtomicBool) -> anyhow::Result<Report> {
    o.check().map_err(anyhow::Error::msg)?;
    if !mpt_emu::sys::is_root() {
        bail!("mpt bench clients needs root (network namespaces, veths, tun devices)");
    }
    let work = o.out.join("work");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let started = Instant::now();
    let mut report = Report {
        scenario: "clients".into(),
        mode: o.mode().into(),
        clients: o.clients,
        paths_per_client: o.paths_per_client,
        senders: o.senders,
        duration_s: o.duration.as_secs_f64(),
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: kernel(),
        ..Report::default()
    };
    println!(
        "==> mpt bench clients ({} mode): {} clients x {} paths, {} senders, {} s per measurement, output {}",
        o.mode(),
        o.clients,
        o.paths_per_client,
        o.senders,
        o.duration.as_secs(),
        o.out.display()
    );
    let result = measure(o, &work, &mut report, stop);
    report.wall_s = started.elapsed().as_secs_f64();
    report.complete = result.is_ok();
    report.write(&o.out)?;
    result.map(|()| report)
}

fn measure(o: &Options, work: &Path, report: &mut Report, stop: &AtomicBool) -> anyhow::Result<()> {
    println!(
        "==> clients: building the testbed (server and client namespaces, {} veth pair(s))",
        o.paths_per_client
    );
    let mut t_start = None;
    let mut bed = build(o, work, stop, &mut t_start)?;
    let t0 = t_start.unwrap_or_else(Instant::now);
    let timeout = Duration::from_secs(30) + Duration::from_millis(200) * o.clients as u32;
    let (up, up_s) = wait_all_up(&mut bed, o, t0, timeout, stop)?;
    report.up_count = up;
    report.up_s = up_s;
    report.all_up = up_s.is_some();
    println!(
        "    {up}/{} clients up{}",
        o.clients,
        up_s.map_or(" (timed out)".to_string(), |t| format!(" after {t:.1} s"))
    );
    let server_pid = bed.server.pid();
    report.server_idle = proc_mem(server_pid);
    if !report.all_up {
        bail!(
            "only {up} of {} clients came up within {} s (logs in {})",
            o.clients,
            timeout.as_secs(),
            work.display()
        );
    }
    // Let the handshakes' and probes' first burst settle.
    sleep(Duration::from_secs(1), stop)?;

    let rekey_client = o
        .rekey_after
        .filter(|_| o.clients >= 2)
        .map(|_| o.clients - 1);
    println!(
        "==> clients: one client alone, TCP ({} s)",
        o.duration.as_secs()
    );
    let single = tcp_at_once(&bed, &[0], o, work, "single", None, stop)?;
    let single_m = single.per_sender[0].clone();
    println!("    {:.1} Mbit/s", single_m.mbps);
    report.single = Some(single_m.clone());

    if let (Some(i), Some(every)) = (rekey_client, o.rekey_after) {
        println!(
            "==> clients: client {i} alone, keys renewed every {} s ({} s)",
            every.as_secs(),
            o.duration.as_secs()
        );
        let rekeys = |bed: &Bed| {
            mptd_status(&bed.client_controls[i])
                .ok()
                .and_then(|s| s.pointer("/connections/0/session/rekeys")?.as_u64())
                .unwrap_or(0)
        };
        let paced = ((single_m.mbps / 2.0) as u64).max(10);
        let r0 = rekeys(&bed);
        let m = tcp_at_once(&bed, &[i], o, work, "rekey", Some(paced), stop)?;
        let with_rekeys = m.per_sender[0].clone();
        let rekeys_made = rekeys(&bed).saturating_sub(r0);
        println!(
            "    {:.1} Mbit/s paced at {paced}, {} retransmits, {rekeys_made} rekeys",
            with_rekeys.mbps,
            with_rekeys.retransmits.unwrap_or(0),
        );
        println!(
            "==> clients: client 0 alone, no rekeys, paced the same ({} s)",
            o.duration.as_secs()
        );
        let base = tcp_at_once(&bed, &[0], o, work, "norekey", Some(paced), stop)?;
        let r = RekeyResult {
            client: client_name(i),
            rekey_after_s: every.as_secs(),
            rekeys: rekeys_made,
            paced_mbps: paced,
            with_rekeys,
            without_rekeys: base.per_sender[0].clone(),
        };
        println!(
            "    {:.1} Mbit/s, {} retransmits",
            r.without_rekeys.mbps,
            r.without_rekeys.retransmits.unwrap_or(0)
        );
        report.rekey = Some(r);
    }

    let senders = pick_senders(o.clients, o.senders, rekey_client);
    println!(
        "==> clients: {} clients at once, TCP ({} s)",
        senders.len(),
        o.duration.as_secs()
    );
    let agg = tcp_at_once(&bed, &senders, o, work, "aggregate", None, stop)?;
    println!("    {:.1} Mbit/s in all", agg.mbps);
    report.aggregate_ratio = (single_m.mbps > 0.0).then(|| agg.mbps / single_m.mbps);
    let quiet_mbps = agg.mbps;
    report.aggregate = Some(agg);

    if o.flood {
        let ports: Vec<u16> = if o.shared_port {
            vec![SHARED_PORT]
        } else {
            (0..o.clients).map(|i| server_port(i, false)).collect()
        };
        report.flood = Some(measure_flood(
            &bed, &senders, o, work, ports, quiet_mbps, server_pid, stop,
        )?);
    }
    report.server_end = proc_mem(server_pid);
    if let Some(st) = bed.server.exited() {
        bail!("the server mptd died ({st}):\n{}", bed.server.log_tail());
    }
    println!("==> clients: tearing down");
    drop(bed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("mpt-bench-clients-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn keys(d: &Path, n: usize) -> (String, Vec<String>) {
        let server = keypair(&d.join("server.key")).unwrap();
        let clients = (0..n)
            .map(|i| keypair(&d.join(format!("client-{i}.key"))).unwrap())
            .collect();
        (server, clients)
    }

    #[test]
    fn per_connection_port_configs_are_valid_and_agree() {
        let d = tempdir("port");
        let (server_pub, client_pubs) = keys(&d, 3);
        let server = server_config(
            &d.join("s.sock"),
            &d.join("server.key"),
            &client_pubs,
            2,
            false,
        );
        let s = mptd::config::parse(&server, "server.toml").expect("server config valid");
        assert_eq!(s.connections.len(), 3);
        for (i, c) in s.connections.iter().enumerate() {
            assert_eq!(c.port, PORT_BASE + i as u16);
            assert_eq!(c.paths.len(), 2);
            assert_eq!(c.paths[1].remote, Some(client_ip(i, 1).into()));
            assert_eq!(c.peer_ipv4, Some(client_tun_ip(i).into()));
        }
        for i in 0..3 {
            let text = client_config(
                i,
                &d.join("c.sock"),
                &d.join(format!("client-{i}.key")),
                &server_pub,
                2,
                false,
                (i == 2).then_some(Duration::from_secs(2)),
            );
            let c = mptd::config::parse(&text, "client.toml").expect("client config valid");
            let conn = &c.connections[0];
            assert_eq!(conn.remote_port, PORT_BASE + i as u16);
            assert_eq!(conn.id, s.connections[i].id, "both sides agree on the id");
            assert_eq!(conn.public_key, s.daemon.public_key);
            assert_eq!(s.connections[i].public_key, c.daemon.public_key);
            assert_eq!(conn.networks[0].to_string(), format!("{}/32", target_ip(i)));
            assert_eq!(conn.rekey_after.is_some(), i == 2);
            assert_eq!(c.tunnel.name, format!("mptc{i}"));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn shared_port_configs_have_pathless_clients_on_one_port() {
        let d = tempdir("shared");
        let (server_pub, client_pubs) = keys(&d, 4);
        let server = server_config(
            &d.join("s.sock"),
            &d.join("server.key"),
            &client_pubs,
            2,
            true,
        );
        let v: toml::Value = toml::from_str(&server).expect("TOML");
        let conns = v["connection"].as_array().expect("connections");
        assert_eq!(conns.len(), 4);
        for (i, c) in conns.iter().enumerate() {
            assert_eq!(c["port"].as_integer(), Some(i64::from(SHARED_PORT)));
            assert!(c.get("path").is_none(), "no [[connection.path]]: {c:?}");
            assert_eq!(c["public_key"].as_str(), Some(client_pubs[i].as_str()));
            assert_eq!(c["id"].as_integer(), Some(i as i64 + 1));
        }
        let client = client_config(
            1,
            &d.join("c.sock"),
            &d.join("client-1.key"),
            &server_pub,
            2,
            true,
            None,
        );
        // A client config is valid today in either mode.
        let c = mptd::config::parse(&client, "client.toml").expect("client config valid");
        let conn = &c.connections[0];
        assert_eq!(conn.remote_port, SHARED_PORT);
        assert_eq!(conn.paths.len(), 2);
        assert_eq!(conn.paths[0].remote, Some(server_ip(0).into()));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn addresses_are_distinct_for_every_client_and_path() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..MAX_CLIENTS {
            assert!(seen.insert(client_tun_ip(i)));
            assert!(seen.insert(target_ip(i)));
            for k in 0..MAX_PATHS_PER_CLIENT {
                let a = client_ip(i, k);
                assert!(seen.insert(a), "{a} twice");
                assert_ne!(a, server_ip(k));
                // Not in the flood's spoofed range.
                assert!(!(k == 0 && a.octets()[2] >= 200));
            }
        }
        assert!(!seen.contains(&Ipv4Addr::new(172, 17, 255, 254)));
    }

    #[test]
    fn forged_initiations_have_the_right_shape() {
        let mut x = XorShift(7);
        let p = forged_initiation(
            &mut || x.next(),
            Ipv4Addr::new(10, 100, 200, 9),
            server_ip(0),
            20001,
        );
        let msg = &p[28..];
        assert_eq!(msg.len(), mpt_proto::noise::INITIATION_LEN);
        let (h, _) = mpt_proto::wire::Header::parse(msg).expect("our header");
        assert_eq!(h.msg_type, mpt_proto::wire::MsgType::NoiseInitiation);
        assert_eq!(h.conn_id, 0);
        assert_eq!(&p[12..16], &[10, 100, 200, 9]);
        assert_eq!(u16::from_be_bytes([p[22], p[23]]), 20001);
        assert_eq!(
            usize::from(u16::from_be_bytes([p[24], p[25]])),
            8 + msg.len()
        );
        // It parses as an initiation (the responder then refuses its MAC).
        assert!(mpt_proto::noise::parse_initiation(msg).is_ok());
    }

    #[test]
    fn senders_spread_and_skip_the_rekey_client() {
        assert_eq!(pick_senders(200, 4, Some(199)), [0, 49, 99, 149]);
        assert_eq!(pick_senders(4, 2, Some(3)), [0, 1]);
        assert_eq!(pick_senders(2, 2, Some(1)), [0, 1]);
        assert_eq!(pick_senders(1, 1, None), [0]);
    }

    #[test]
    fn proc_status_fields() {
        let text = "Name:\tmptd\nVmHWM:\t   12345 kB\nVmRSS:\t   10000 kB\nThreads:\t7\n";
        let m = parse_proc_status(text).unwrap();
        assert_eq!((m.threads, m.rss_kib, m.hwm_kib), (7, 10000, 12345));
        assert!(parse_proc_status("Name: x\n").is_none());
        let me = proc_mem(std::process::id()).expect("own status");
        assert!(me.threads >= 1 && me.rss_kib > 0);
    }

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
