//! iperf3 clients run in namespace A against a server in B, with JSON
//! output parsed into a [`Measurement`].
//!
//! Every measurement starts its own one-off server (`iperf3 -s -1`) on a
//! port of its own and waits until it listens. A server shared between
//! measurements raced: a client exits as soon as it has the results, while
//! the server is still finishing that test (it waits for the client's
//! IPERF_DONE, which on a lossy 600 ms path can take a retransmission or
//! two); a client that connected in that window, e.g. the tunnel test right
//! after the raw one over a faster path, got "the server is busy running a
//! test" (seen in `mpt bench satellite`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use super::iperf_json::Report;
use super::process::Proc;
use super::stop::check_stop;

/// Slack beyond the test duration before a client is declared hung.
const CLIENT_SLACK: Duration = Duration::from_secs(30);
/// Ports of the one-off servers: 5301, 5302, ... (5201, iperf3's default,
/// and the HTTP server's 8080 stay clear), wrapping after
/// [`SERVER_PORTS`]; a server is stopped before its measurement returns.
const SERVER_PORT_BASE: u16 = 5301;
const SERVER_PORTS: u16 = 500;
/// How long a fresh server may take to listen (it is up in milliseconds).
const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(5);
/// Ports tried before giving up when a server cannot bind.
const SERVER_ATTEMPTS: usize = 3;

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// What one iperf3 run measured.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Measurement {
    /// Goodput at the receiver, Mbit/s (UDP: delivered datagrams x payload).
    pub mbps: f64,
    /// UDP: offered rate at the sender, Mbit/s.
    pub sent_mbps: Option<f64>,
    /// UDP: lost datagrams, percent.
    pub loss_pct: Option<f64>,
    /// TCP: sender retransmissions.
    pub retransmits: Option<u64>,
    pub seconds: f64,
}

/// A UDP (`udp_rate` = Some(bit/s), `len` = payload) or TCP test.
pub struct Run<'a> {
    /// Namespace of the client (the sender).
    pub ns: &'a str,
    /// Namespace of the server (the receiver); it must reach `target`.
    pub server_ns: &'a str,
    pub target: &'a str,
    pub duration: Duration,
    pub udp: Option<(u64, u32)>,
    pub json_out: &'a Path,
    /// TCP congestion control of both ends (`-C`), e.g. "bbr".
    pub cc: Option<&'a str>,
    /// Seconds at the start left out of the result (`-O`, whole seconds,
    /// run in addition to `duration`): the ramp-up of a long-RTT path.
    pub omit: Duration,
    /// Parallel streams (`-P`); the measurement is their sum.
    pub streams: u32,
    /// Client and server under `mptcpize run`: their TCP sockets are
    /// MPTCP sockets (the kernel MPTCP baseline, [`super::mptcp`]).
    pub mptcp: bool,
}

/// A one-off `iperf3 -s -1` listening in a namespace; stopped on drop.
pub struct Server {
    _proc: Proc,
    pub port: u16,
}

fn next_port() -> u16 {
    SERVER_PORT_BASE + NEXT_PORT.fetch_add(1, Ordering::Relaxed) % SERVER_PORTS
}

impl Server {
    /// Starts a server in `ns` on a fresh port and returns once it listens
    /// (under `mptcpize run` if `mptcp`).
    pub fn start(ns: &str, log: &Path, mptcp: bool, stop: &AtomicBool) -> anyhow::Result<Server> {
        let mut failures = Vec::new();
        for _ in 0..SERVER_ATTEMPTS {
            let port = next_port();
            let port_s = port.to_string();
            let (program, args) = command(mptcp, &["-s", "-1", "-p", &port_s]);
            let mut p = Proc::spawn_in(ns, "iperf3 -s -1", program, &args, log.to_path_buf())?;
            let end = Instant::now() + SERVER_READY_TIMEOUT;
            loop {
                check_stop(stop)?;
                if let Some(st) = p.exited() {
                    // Most likely the port was taken: try the next one.
                    failures.push(format!("port {port}: exited ({st}): {}", p.log_tail()));
                    break;
                }
                if server_listening(p.pid(), port) {
                    return Ok(Server { _proc: p, port });
                }
                if Instant::now() > end {
                    bail!(
                        "iperf3 -s -1 -p {port} in {ns} did not listen within {} s",
                        SERVER_READY_TIMEOUT.as_secs()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        bail!(
            "no iperf3 server could start in {ns}: {}",
            failures.join("; ")
        )
    }
}

/// iperf3 with `args`, or `mptcpize run iperf3 args` (which execs iperf3
/// with MPTCP sockets, so the process is still called iperf3).
fn command<'a>(mptcp: bool, args: &[&'a str]) -> (&'static Path, Vec<&'a str>) {
    if mptcp {
        let mut v = vec!["run", "iperf3"];
        v.extend_from_slice(args);
        (Path::new("mptcpize"), v)
    } else {
        (Path::new("iperf3"), args.to_vec())
    }
}

/// Does process `pid` (an iperf3 started through `ip netns exec`) listen on
/// TCP `port`? Read from /proc/PID/net, which shows the namespace of that
/// process, once `ip` has exec'ed iperf3 (before that it is the caller's).
fn server_listening(pid: u32, port: u16) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() != "iperf3" {
        return false;
    }
    ["tcp6", "tcp"].iter().any(|t| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{t}"))
            .is_ok_and(|text| listens_on(&text, port))
    })
}

/// Is there a socket in state LISTEN (0A) on local `port` in a
/// /proc/net/tcp{,6} table?
pub(crate) fn listens_on(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() > 3
            && f[3] == "0A"
            && f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
                == Some(port)
    })
}

/// The server's log next to the client's JSON.
fn server_log(json_out: &Path) -> PathBuf {
    let mut name = json_out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "iperf3".into());
    name += "-server.log";
    json_out.with_file_name(name)
}

pub fn run(r: &Run<'_>, stop: &AtomicBool) -> anyhow::Result<Measurement> {
    let server = Server::start(r.server_ns, &server_log(r.json_out), r.mptcp, stop)?;
    let secs = r.duration.as_secs().max(1).to_string();
    let mut args: Vec<String> = vec![
        "-c".into(),
        r.target.into(),
        "-p".into(),
        server.port.to_string(),
        "-t".into(),
        secs,
        "-J".into(),
        "--connect-timeout".into(),
        "5000".into(),
    ];
    if let Some(cc) = r.cc {
        args.extend(["-C".into(), cc.into()]);
    }
    if r.streams > 1 {
        args.extend(["-P".into(), r.streams.to_string()]);
    }
    let omit = r.omit.as_secs();
    if omit > 0 {
        args.extend(["-O".into(), omit.to_string()]);
    }
    if let Some((rate, len)) = r.udp {
        args.extend([
            "-u".into(),
            "-b".into(),
            rate.to_string(),
            "-l".into(),
            len.to_string(),
        ]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (program, argv) = command(r.mptcp, &argv);
    let mut p = Proc::spawn_in(
        r.ns,
        "iperf3 client",
        program,
        &argv,
        r.json_out.to_path_buf(),
    )?;
    let deadline = Instant::now() + r.duration + Duration::from_secs(omit) + CLIENT_SLACK;
    loop {
        check_stop(stop)?;
        if p.exited().is_some() {
            break;
        }
        if Instant::now() > deadline {
            bail!("iperf3 -c {} did not finish in time", r.target);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(p);
    drop(server);
    let text = std::fs::read_to_string(r.json_out)
        .with_context(|| format!("reading {}", r.json_out.display()))?;
    parse(&text, r.udp.map(|(_, len)| len)).with_context(|| {
        format!(
            "iperf3 -c {} (output in {})",
            r.target,
            r.json_out.display()
        )
    })
}

/// Parses iperf3 -J output; `udp_len` is the UDP payload size.
pub fn parse(text: &str, udp_len: Option<u32>) -> anyhow::Result<Measurement> {
    // iperf3 may print a line before the JSON on some errors.
    let start = text.find('{').context("no JSON in iperf3 output")?;
    let report: Report = serde_json::from_str(&text[start..]).context("parsing iperf3 JSON")?;
    if let Some(e) = report.error {
        bail!("iperf3: {e}");
    }
    let end = report.end.context("iperf3 JSON without \"end\"")?;
    match udp_len {
        Some(len) => {
            let sum = end
                .sum_received
                .as_ref()
                .or(end.sum.as_ref())
                .context("iperf3 UDP JSON without a sum")?;
            let seconds = sum.seconds.unwrap_or(0.0);
            let packets = sum.packets.unwrap_or(0.0);
            let lost = sum.lost_packets.unwrap_or(0.0).max(0.0);
            let delivered = (packets - lost).max(0.0);
            let mbps = if seconds > 0.0 {
                delivered * f64::from(len) * 8.0 / seconds / 1e6
            } else {
                0.0
            };
            let sent = end.sum_sent.as_ref().or(end.sum.as_ref());
            Ok(Measurement {
                mbps,
                sent_mbps: sent.and_then(|s| s.bits_per_second).map(|b| b / 1e6),
                loss_pct: sum.lost_percent,
                retransmits: None,
                seconds,
            })
        }
        None => {
            let recv = end
                .sum_received
                .as_ref()
                .context("iperf3 TCP JSON without sum_received")?;
            Ok(Measurement {
                mbps: recv.bits_per_second.unwrap_or(0.0) / 1e6,
                sent_mbps: None,
                loss_pct: None,
                retransmits: end.sum_sent.as_ref().and_then(|s| s.retransmits),
                seconds: recv.seconds.unwrap_or(0.0),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_udp_and_tcp() {
        let udp = r#"{"end":{"sum_sent":{"bits_per_second":2e8},
            "sum_received":{"seconds":2.0,"packets":1000,"lost_packets":100,"lost_percent":10}}}"#;
        let m = parse(udp, Some(1000)).ok();
        assert_eq!(m.as_ref().map(|m| m.mbps), Some(900.0 * 8000.0 / 2.0 / 1e6));
        assert_eq!(m.and_then(|m| m.sent_mbps), Some(200.0));
        let tcp = r#"{"end":{"sum_sent":{"retransmits":3},
            "sum_received":{"seconds":1.0,"bits_per_second":9.4e7}}}"#;
        let m = parse(tcp, None).ok();
        assert_eq!(m.as_ref().map(|m| m.mbps), Some(94.0));
        assert_eq!(m.and_then(|m| m.retransmits), Some(3));
        assert!(parse(r#"{"error":"unable to connect"}"#, None).is_err());
        assert!(parse("garbage", None).is_err());
    }

    #[test]
    fn finds_listening_sockets() {
        let tcp6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:14B5 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:14B6 0000000000000000FFFF00000100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
";
        assert!(listens_on(tcp6, 5301));
        // Established, not listening.
        assert!(!listens_on(tcp6, 5302));
        assert!(!listens_on(tcp6, 5201));
        assert!(!listens_on("", 5301));
        let p = server_log(Path::new("/w/iperf3-0-cubic-raw0.json"));
        assert_eq!(p, Path::new("/w/iperf3-0-cubic-raw0-server.log"));
    }
}
