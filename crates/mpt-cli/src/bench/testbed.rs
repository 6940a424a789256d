//! One case's testbed: namespaces A and B joined by the case's paths
//! (tbf-shaped veth pairs, or veths through emulator wires in a middle
//! namespace M), `mptd` on both sides and an HTTP server in B (each iperf3
//! measurement starts its own server, see [`super::iperf`]).
//!
//! Everything is a guard: processes are stopped (SIGTERM, then SIGKILL) and
//! namespaces deleted (which also removes their veths and qdiscs) when the
//! [`Testbed`] drops — on success, on error, on panic unwinding, and on
//! SIGINT/SIGTERM, which only set the stop flag that every wait polls.
//! Names are `mptemu-<pid>-bench<k>-{a,b,m}`, so `mpt emu selftest`'s stale
//! sweep also removes what a SIGKILLed run left.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mpt_api::{ResponseError, Status};

use super::process::Proc;
use super::scenario::{Case, Combo, Link};
use super::stop::check_stop;
use mpt_emu::netns::{ip, Netns, PREFIX};
use mpt_emu::sys;
use mpt_emu::wire::{Wire, WireConfig};

/// Tunnel MTU over an IPv4 underlay; leaves room for outer IPv4 (20) + UDP
/// (8) + mpt header (24) inside the veths' 1500.
const MTU_OUTER4: u32 = 1400;
/// Over IPv6 the outer header is 20 bytes larger.
const MTU_OUTER6: u32 = 1380;
/// How long mptd may take to bring up the tunnel (first keepalives).
const TUNNEL_UP_TIMEOUT: Duration = Duration::from_secs(20);

/// Writes a fresh pre-shared key (32 random bytes, base64) to `path`,
/// mode 0600.
fn write_key(path: &Path) -> anyhow::Result<()> {
    use ring::rand::SecureRandom;
    use std::os::unix::fs::OpenOptionsExt;
    let mut key = [0u8; mptd::keys::KEY_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| anyhow::anyhow!("the system random generator failed"))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    writeln!(f, "{}", mptd::keys::encode(&key))?;
    Ok(())
}

/// Addresses of a case.
#[derive(Debug, Clone)]
pub struct Plan {
    pub combo: Combo,
    pub mtu: u32,
    /// mptd weight of path i (weight_out and weight_in); 100 if absent.
    pub weights: Vec<u32>,
    /// `scheduler` in the mptd configs; `None` leaves mptd's default.
    pub scheduler: Option<String>,
    /// Key file of both sides (`None`: cleartext).
    pub key_file: Option<PathBuf>,
    /// A's path 0 is interface-only (`interface = "va0"`, no `local`) and
    /// B's path 0 has no `remote` (learnt): needs `key_file`.
    pub roaming_path0: bool,
    /// Leave keepalive and dead timer at mptd's defaults.
    pub default_timers: bool,
    /// Paths with `status = "backup"`.
    pub backup_paths: Vec<usize>,
    /// Networks behind A that B routes into the tunnel (B's `networks`).
    pub networks_b: Vec<String>,
    /// Networks behind B that A routes into the tunnel (A's `networks`).
    pub networks_a: Vec<String>,
    /// TCP acceleration (`[tunnel] accel_port` at both ends) and A's
    /// `accelerate` prefixes; `None`: off, nothing of it in the configs.
    pub accel: Option<AccelPlan>,
}

/// TCP acceleration in the mptd configs (docs/ACCELERATION.md).
#[derive(Debug, Clone)]
pub struct AccelPlan {
    pub port: u16,
    /// A's `accelerate` entries, e.g. "10.79.0.0/24".
    pub accelerate: Vec<String>,
    /// Path i's own leg congestion control (`accel_congestion`), at both
    /// ends.
    pub path_congestion: Vec<Option<String>>,
    /// `accel_legs` at both ends ("": mptd's default).
    pub legs: String,
}

/// What a suite adds to a case's testbed beyond the case itself.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// End hosts C behind A and S behind B ([`super::endhosts`]), and TCP
    /// acceleration of every TCP flow from C's subnet to S's.
    pub accel: bool,
    /// Path i's own acceleration leg congestion control (`accel_congestion`).
    pub accel_congestion: Vec<Option<String>>,
    /// `accel_legs` ("": mptd's default).
    pub accel_legs: String,
}

/// The accel port the bench gives both mptds.
pub const ACCEL_PORT: u16 = 7411;

impl Plan {
    pub fn new(combo: Combo) -> Plan {
        Plan {
            combo,
            mtu: if combo.outer == 4 {
                MTU_OUTER4
            } else {
                MTU_OUTER6
            },
            weights: Vec::new(),
            scheduler: Some("weighted".into()),
            key_file: None,
            roaming_path0: false,
            default_timers: false,
            backup_paths: Vec::new(),
            networks_b: Vec::new(),
            networks_a: Vec::new(),
            accel: None,
        }
    }

    /// Outer address of side (1 = A, 2 = B) on path i, without prefix length.
    pub fn outer(&self, i: usize, side: u8) -> String {
        if self.combo.outer == 4 {
            format!("10.77.{i}.{side}")
        } else {
            format!("fd00:77:{i:x}::{side}")
        }
    }

    pub fn outer_prefix(&self) -> u8 {
        if self.combo.outer == 4 {
            24
        } else {
            64
        }
    }

    /// Socket address of `port` at side B's tunnel address.
    pub fn inner_sockaddr(&self, port: u16) -> anyhow::Result<SocketAddr> {
        let host = if self.combo.inner == 4 {
            self.inner(2)
        } else {
            format!("[{}]", self.inner(2))
        };
        format!("{host}:{port}").parse().context("tunnel address")
    }

    /// Tunnel (inner) address of a side.
    pub fn inner(&self, side: u8) -> String {
        if self.combo.inner == 4 {
            format!("192.168.77.{side}")
        } else {
            format!("fd00:77:ff::{side}")
        }
    }

    /// Largest UDP payload that fits in one tunnel packet.
    pub fn udp_payload(&self) -> u32 {
        self.mtu - if self.combo.inner == 4 { 20 } else { 40 } - 8
    }

    /// Largest raw UDP payload on a path (veth MTU 1500).
    pub fn raw_udp_payload(&self) -> u32 {
        1500 - if self.combo.outer == 4 { 20 } else { 40 } - 8
    }

    /// mptd configuration of one side.
    pub fn mptd_config(&self, side: u8, n: usize, control: &Path) -> String {
        let peer = 3 - side;
        let quoted = |v: &[String]| {
            v.iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let networks = quoted(if side == 2 {
            &self.networks_b
        } else {
            &self.networks_a
        });
        let accel_port = self.accel.as_ref().map_or(String::new(), |a| {
            let legs = if a.legs.is_empty() {
                String::new()
            } else {
                format!("accel_legs = \"{}\"\n", a.legs)
            };
            format!("accel_port = {}\n{legs}", a.port)
        });
        let mut s = format!(
            "# generated by mpt bench\n[daemon]\ncontrol = \"{}\"\nlog = \"info\"\n\n\
             [tunnel]\nname = \"mpt0\"\nmtu = {}\nipv4 = \"192.168.77.{side}/24\"\nipv6 = \"fd00:77:ff::{side}/64\"\n{accel_port}\n\
             [[connection]]\nname = \"peer\"\npeer_ipv4 = \"192.168.77.{peer}\"\npeer_ipv6 = \"fd00:77:ff::{peer}\"\n\
             networks = [{networks}]\nport = 65022\nremote_port = 65022\n",
            control.display(),
            self.mtu
        );
        if let (1, Some(a)) = (side, &self.accel) {
            s += &format!("accelerate = [{}]\n", quoted(&a.accelerate));
        }
        if !self.default_timers {
            s += "keepalive = \"500ms\"\ndead_timer = \"3s\"\n";
        }
        if let Some(sched) = &self.scheduler {
            s += &format!("scheduler = \"{sched}\"\n");
        }
        if let Some(key) = &self.key_file {
            s += &format!("key_file = \"{}\"\n", key.display());
        }
        for i in 0..n {
            let w = self.weights.get(i).copied().unwrap_or(100);
            let roaming = self.roaming_path0 && i == 0;
            let local = if roaming && side == 1 {
                format!("interface = \"va{i}\"\n")
            } else {
                format!("local = \"{}\"\n", self.outer(i, side))
            };
            let remote = if roaming && side == 2 {
                String::new()
            } else {
                format!("remote = \"{}\"\n", self.outer(i, peer))
            };
            s += &format!(
                "\n[[connection.path]]\nname = \"p{i}\"\n{local}{remote}\
                 weight_out = {w}\nweight_in = {w}\nwindow = 1\nstatus = \"{status}\"\n{leg_cc}",
                leg_cc = self
                    .accel
                    .as_ref()
                    .and_then(|a| a.path_congestion.get(i).cloned().flatten())
                    .map_or(String::new(), |cc| format!("accel_congestion = \"{cc}\"\n")),
                status = if self.backup_paths.contains(&i) {
                    "backup"
                } else {
                    "up"
                },
            );
        }
        s
    }
}

/// Writes a sysctl under /proc/sys/net in the caller thread's namespace; a
/// missing key (IPv6 compiled out) is not an error.
fn sysctl_net(key: &str, value: &str) -> io::Result<()> {
    let path = format!("/proc/sys/net/{key}");
    match std::fs::write(&path, value) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}"))),
    }
}

fn tc(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("tc")
        .args(args)
        .output()
        .context("cannot run tc (iproute2)")?;
    if !out.status.success() {
        bail!(
            "tc {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

pub(crate) fn disable_offloads_in(ns: &Netns, ifs: Vec<String>) -> anyhow::Result<()> {
    ns.run(move || ifs.iter().try_for_each(|i| sys::disable_offloads(i)))
        .with_context(|| format!("turning off offloads in {}", ns.name()))
}

/// A running testbed. Field order is drop order: processes, wires, then
/// namespaces.
pub struct Testbed {
    pub mptd_a: Proc,
    pub mptd_b: Proc,
    _http: super::http::Server,
    wires: Vec<Wire>,
    /// What each wire in `wires` was started with (for restarts).
    wire_cfgs: Vec<WireConfig>,
    /// Reports of wires stopped by [`Testbed::restart_traced_wires`].
    retired: Vec<serde_json::Value>,
    pub plan: Plan,
    pub control_a: PathBuf,
    pub control_b: PathBuf,
    pub a: Netns,
    pub b: Netns,
    m: Option<Netns>,
    /// End hosts C and S ([`Extras::accel`]).
    pub hosts: Option<super::endhosts::EndHosts>,
}

impl Testbed {
    /// Builds namespaces and links for `case`, starts the wires, mptd on
    /// both sides and the HTTP server in B, and waits for the tunnel to
    /// carry TCP.
    pub fn build(
        k: usize,
        case: &Case,
        work: &Path,
        mptd: &Path,
        stop: &AtomicBool,
    ) -> anyhow::Result<Testbed> {
        Self::build_with(k, case, work, mptd, stop, Extras::default())
    }

    /// [`Testbed::build`] with what a suite adds ([`Extras`]).
    pub fn build_with(
        k: usize,
        case: &Case,
        work: &Path,
        mptd: &Path,
        stop: &AtomicBool,
        extras: Extras,
    ) -> anyhow::Result<Testbed> {
        let base = format!("{PREFIX}{}-bench{k}", std::process::id());
        let a = Netns::create(&format!("{base}-a")).context("creating namespace A")?;
        let b = Netns::create(&format!("{base}-b")).context("creating namespace B")?;
        let needs_m = case.links.iter().any(|l| matches!(l, Link::Emu { .. }));
        let m = if needs_m {
            Some(Netns::create(&format!("{base}-m")).context("creating namespace M")?)
        } else {
            None
        };
        for ns in [&a, &b] {
            ns.run(|| {
                // No duplicate address detection: addresses usable at once.
                sysctl_net("ipv6/conf/all/accept_dad", "0")?;
                sysctl_net("ipv6/conf/default/accept_dad", "0")
            })
            .with_context(|| format!("sysctls in {}", ns.name()))?;
            ip(&["-n", ns.name(), "link", "set", "dev", "lo", "up"])?;
        }
        if let Some(m) = &m {
            // The middle is a wire, not a host: no IPv6 chatter of its own.
            m.run(|| {
                sysctl_net("ipv6/conf/all/disable_ipv6", "1")?;
                sysctl_net("ipv6/conf/default/disable_ipv6", "1")
            })
            .context("sysctls in M")?;
        }
        let mut plan = Plan::new(case.combo);
        plan.weights = case.weights.clone();
        plan.default_timers = case.default_timers;
        plan.backup_paths = case.backup_paths.clone();
        plan.networks_b = case.networks_b.clone();
        if case.daemon_scheduler {
            plan.scheduler = None;
        }
        if case.roaming_path0 {
            let key = work.join(format!("bench-{k}.key"));
            write_key(&key).with_context(|| format!("writing {}", key.display()))?;
            plan.key_file = Some(key);
            plan.roaming_path0 = true;
        }
        if let Some(sched) = &case.scheduler {
            plan.scheduler = Some(sched.clone());
        }
        let hosts = if extras.accel {
            use super::endhosts::{EndHosts, C_SUBNET, S_SUBNET};
            plan.networks_a.push(S_SUBNET.into());
            plan.networks_b.push(C_SUBNET.into());
            plan.accel = Some(AccelPlan {
                port: ACCEL_PORT,
                accelerate: vec![S_SUBNET.into()],
                path_congestion: extras.accel_congestion.clone(),
                legs: extras.accel_legs.clone(),
            });
            Some(EndHosts::build(&base, a.name(), b.name())?)
        } else {
            None
        };
        let (an, bn) = (a.name().to_string(), b.name().to_string());
        let mut wires = Vec::new();
        let mut wire_cfgs = Vec::new();
        let (mut a_ifs, mut b_ifs, mut m_ifs) = (Vec::new(), Vec::new(), Vec::new());
        for (i, link) in case.links.iter().enumerate() {
            let (va, vb) = (format!("va{i}"), format!("vb{i}"));
            match link {
                Link::Tbf { .. } => {
                    ip(&[
                        "link", "add", &va, "netns", &an, "type", "veth", "peer", "name", &vb,
                        "netns", &bn,
                    ])?;
                }
                Link::Emu { .. } => {
                    let mn = m.as_ref().map(|m| m.name().to_string()).unwrap_or_default();
                    let (ma, mb) = (format!("ma{i}"), format!("mb{i}"));
                    ip(&[
                        "link", "add", &va, "netns", &an, "type", "veth", "peer", "name", &ma,
                        "netns", &mn,
                    ])?;
                    ip(&[
                        "link", "add", &vb, "netns", &bn, "type", "veth", "peer", "name", &mb,
                        "netns", &mn,
                    ])?;
                    ip(&["-n", &mn, "link", "set", "dev", &ma, "up"])?;
                    ip(&["-n", &mn, "link", "set", "dev", &mb, "up"])?;
                    m_ifs.push(ma);
                    m_ifs.push(mb);
                }
            }
            for (ns, ifname, side) in [(&an, &va, 1u8), (&bn, &vb, 2u8)] {
                let addr = format!("{}/{}", plan.outer(i, side), plan.outer_prefix());
                let mut args = vec!["-n", ns, "addr", "add", &addr, "dev", ifname];
                if case.combo.outer == 6 {
                    args.push("nodad");
                }
                ip(&args)?;
                ip(&["-n", ns, "link", "set", "dev", ifname, "up"])?;
            }
            a_ifs.push(va);
            b_ifs.push(vb);
        }
        disable_offloads_in(&a, a_ifs.clone())?;
        disable_offloads_in(&b, b_ifs.clone())?;
        if let Some(m) = &m {
            disable_offloads_in(m, m_ifs)?;
        }
        for (i, link) in case.links.iter().enumerate() {
            match link {
                Link::Tbf {
                    rate,
                    burst,
                    latency,
                    ..
                } => {
                    for (ns, ifname) in [(&an, &a_ifs[i]), (&bn, &b_ifs[i])] {
                        tc(&[
                            "-n", ns, "qdisc", "add", "dev", ifname, "root", "tbf", "rate", rate,
                            "burst", burst, "latency", latency,
                        ])?;
                    }
                }
                Link::Emu { a_to_b, b_to_a, .. } => {
                    let cfg = WireConfig {
                        a: format!("ma{i}"),
                        b: format!("mb{i}"),
                        netns: m.as_ref().map(|m| m.name().to_string()),
                        a_to_b: (**a_to_b).clone(),
                        b_to_a: (**b_to_a).clone(),
                        seed: 1 + i as u64,
                        disable_offloads: false,
                        // Normal scheduling: on 2 cores, real-time wire
                        // threads would starve mptd and iperf3.
                        realtime_priority: None,
                    };
                    wire_cfgs.push(cfg.clone());
                    wires.push(
                        Wire::start(cfg)
                            .with_context(|| format!("starting emulator on path {i}"))?,
                    );
                }
            }
        }
        check_stop(stop)?;

        let n = case.links.len();
        let control_a = work.join(format!("mptd-a-{k}.sock"));
        let control_b = work.join(format!("mptd-b-{k}.sock"));
        let conf_a = work.join(format!("mptd-a-{k}.toml"));
        let conf_b = work.join(format!("mptd-b-{k}.toml"));
        std::fs::write(&conf_a, plan.mptd_config(1, n, &control_a))
            .with_context(|| format!("writing {}", conf_a.display()))?;
        std::fs::write(&conf_b, plan.mptd_config(2, n, &control_b))
            .with_context(|| format!("writing {}", conf_b.display()))?;
        let ca = conf_a.to_string_lossy().into_owned();
        let cb = conf_b.to_string_lossy().into_owned();
        let mut mptd_a = Proc::spawn_in(
            &an,
            "mptd A",
            mptd,
            &["--config", &ca],
            work.join(format!("mptd-a-{k}.log")),
        )?;
        let mut mptd_b = Proc::spawn_in(
            &bn,
            "mptd B",
            mptd,
            &["--config", &cb],
            work.join(format!("mptd-b-{k}.log")),
        )?;
        let http = super::http::Server::start(&bn)?;

        // Wait until a TCP connection through the tunnel reaches the HTTP
        // server (it drops a connection that sends no request).
        let target = plan.inner_sockaddr(super::http::PORT)?;
        // A probe must outlast the SYN/SYN-ACK round trip of the slowest path.
        let max_rtt = case
            .links
            .iter()
            .map(|l| match l {
                Link::Emu { rtt, .. } => *rtt,
                Link::Tbf { .. } => Duration::ZERO,
            })
            .max()
            .unwrap_or(Duration::ZERO);
        let probe = Duration::from_millis(500) + 3 * max_rtt;
        let end = Instant::now() + TUNNEL_UP_TIMEOUT + 3 * probe;
        loop {
            check_stop(stop)?;
            for p in [&mut mptd_a, &mut mptd_b] {
                if let Some(st) = p.exited() {
                    bail!(
                        "{} exited during start-up ({st}); log {}:\n{}",
                        p.name,
                        p.log.display(),
                        p.log_tail()
                    );
                }
            }
            let ok = a
                .run(move || Ok(TcpStream::connect_timeout(&target, probe).is_ok()))
                .unwrap_or(false);
            if ok {
                break;
            }
            if Instant::now() >= end {
                bail!(
                    "no TCP connection through the tunnel to {target} within {} s; mptd A log:\n{}",
                    TUNNEL_UP_TIMEOUT.as_secs(),
                    mptd_a.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(Testbed {
            mptd_a,
            mptd_b,
            _http: http,
            wires,
            wire_cfgs,
            retired: Vec::new(),
            plan,
            control_a,
            control_b,
            a,
            b,
            m,
            hosts,
        })
    }

    /// Has a wire thread ended on an error?
    pub fn wire_failed(&self) -> bool {
        self.wires.iter().any(|w| w.is_finished())
    }

    /// Stops the wires and returns their reports as JSON (those of wires
    /// restarted earlier first).
    pub fn stop_wires(&mut self) -> Vec<serde_json::Value> {
        let mut out = std::mem::take(&mut self.retired);
        out.extend(self.wires.drain(..).map(wire_report));
        self.wire_cfgs.clear();
        out
    }

    /// Restarts every wire whose link follows a trace or an outage
    /// schedule, so that trace and schedule start again from their
    /// beginning: measurements taken one after the other then see the same
    /// capacity over time and the same outage at the same second. The other
    /// wires run on.
    /// Frames in flight on a restarted wire are lost (call it between
    /// measurements; mptd only misses a keepalive or two).
    pub fn restart_traced_wires(&mut self) -> anyhow::Result<()> {
        for i in 0..self.wires.len() {
            let cfg = &self.wire_cfgs[i];
            let timed =
                |d: &mpt_emu::model::LinkConfig| d.trace.is_some() || !d.schedule.is_always_up();
            if !timed(&cfg.a_to_b) && !timed(&cfg.b_to_a) {
                continue;
            }
            let cfg = cfg.clone();
            let old = self.wires.remove(i);
            self.retired.push(wire_report(old));
            let new = Wire::start(cfg)
                .with_context(|| format!("restarting emulator wire {i} (timed link)"))?;
            self.wires.insert(i, new);
        }
        Ok(())
    }

    /// Restarts wire `i` with its configuration changed by `change` (e.g.
    /// an outage window from the new start on). Frames in flight on it are
    /// lost, as in [`Testbed::restart_traced_wires`].
    pub fn restart_wire_with(
        &mut self,
        i: usize,
        change: impl FnOnce(&mut WireConfig),
    ) -> anyhow::Result<()> {
        let Some(cfg) = self.wire_cfgs.get(i) else {
            bail!("no emulator wire {i}");
        };
        let mut cfg = cfg.clone();
        change(&mut cfg);
        let old = self.wires.remove(i);
        self.retired.push(wire_report(old));
        let new =
            Wire::start(cfg.clone()).with_context(|| format!("restarting emulator wire {i}"))?;
        self.wires.insert(i, new);
        self.wire_cfgs[i] = cfg;
        Ok(())
    }

    /// Time zero of each wire's schedules and traces, in start order.
    pub fn wire_epochs(&self) -> Vec<Instant> {
        self.wires.iter().map(Wire::epoch).collect()
    }

    pub fn m_name(&self) -> Option<&str> {
        self.m.as_ref().map(|m| m.name())
    }
}

fn wire_report(w: Wire) -> serde_json::Value {
    match w.stop() {
        Ok(r) => serde_json::to_value(&r).unwrap_or(serde_json::Value::Null),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    }
}

/// Asks an mptd for its status over the control socket.
pub fn mptd_status(control: &Path) -> anyhow::Result<Status> {
    let mut s = UnixStream::connect(control)
        .with_context(|| format!("connecting to {}", control.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(b"{\"version\":1,\"request\":\"status\"}\n")?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    match Status::from_response(&line) {
        Ok(status) => Ok(status),
        // Not JSON, or a document whose fields are not what mpt-api says.
        Err(e @ (ResponseError::NotJson(_) | ResponseError::Decode(_))) => {
            Err(anyhow::Error::new(e).context("parsing mptd status"))
        }
        // Refused, or not an answer to `status`.
        Err(_) => bail!("mptd status failed: {}", line.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accel_configs_are_what_mptd_accepts() {
        let mut plan = Plan::new(Combo { inner: 4, outer: 4 });
        plan.networks_a = vec!["10.79.0.0/24".into()];
        plan.networks_b = vec!["10.78.0.0/24".into()];
        plan.accel = Some(AccelPlan {
            port: ACCEL_PORT,
            accelerate: vec!["10.79.0.0/24".into()],
            path_congestion: vec![Some("cubic".into())],
            legs: "direct".into(),
        });
        let ctl = Path::new("/run/x.sock");
        let a = mptd::config::parse(&plan.mptd_config(1, 2, ctl), "a.toml").expect("A's config");
        let b = mptd::config::parse(&plan.mptd_config(2, 2, ctl), "b.toml").expect("B's config");
        assert_eq!(a.tunnel.accel.port, ACCEL_PORT);
        assert_eq!(a.tunnel.accel.legs, mptd::config::accel::LegMode::Direct);
        assert_eq!(b.tunnel.accel.legs, mptd::config::accel::LegMode::Direct);
        assert_eq!(b.tunnel.accel.port, ACCEL_PORT);
        assert_eq!(a.connections[0].accelerate.len(), 1);
        assert!(b.connections[0].accelerate.is_empty());
        assert_eq!(a.connections[0].networks.len(), 1);
        assert_eq!(b.connections[0].networks.len(), 1);
        for c in [&a, &b] {
            let paths = &c.connections[0].paths;
            assert_eq!(paths[0].accel_congestion.as_deref(), Some("cubic"));
            assert_eq!(paths[1].accel_congestion, None);
        }
        // Without acceleration nothing of it is written, as before.
        let plain = Plan::new(Combo { inner: 4, outer: 4 }).mptd_config(1, 2, ctl);
        assert!(!plain.contains("accel"), "{plain}");
        assert!(plain.contains("networks = []"), "{plain}");
    }
}
