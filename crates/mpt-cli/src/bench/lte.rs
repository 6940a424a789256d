//! `lte-gateway` (spec section 6; Masek et al., papers/002; handover,
//! papers/004): a WiFi path and an LTE path, a VoIP-like flow (160 B every
//! 20 ms) beside bulk TCP (iperf3), and a handover: the WiFi link goes dark
//! for `handover_len` in the middle of the run.
//!
//! Mapping onto the testbed: path 0 is the WiFi link (`[link]`), path 1 the
//! LTE link (`[extra_link]`), both through emulator wires in M; mptd weights
//! are proportional to the nominal link rates. The LTE link's capacity
//! follows a trace (`trace`, rate steps over time), scaled by
//! L / (L + gtp_overhead) with L = 1466 B, the Ethernet frame of a full-size
//! tunnel packet: the emulator charges whole frames at the link rate, so the
//! 40 B of GTP-U/UDP/IP encapsulation per packet become a lower effective
//! rate (exact for full-size packets; small VoIP packets pay 40 B each in a
//! real network, about 16 % more than modelled here). The handover is an
//! outage window on both directions of the WiFi wire, so mptd only learns of
//! it from missing keepalives (as with a radio that silently disappears):
//! `event = "silent"`, the default. With `event = "link-down"` the wire
//! stays as it is and A's WiFi interface itself goes down for the same
//! window (`ip link set va0 down`, then up): mptd in A learns of it from
//! netlink at once; B, whose own interface stays up, learns nothing. With
//! `event = "addr-change"` A's WiFi path names only its interface (no
//! `local`; both sides get a key and B learns A's address), and at the
//! handover A's WiFi interface trades its address for another of the same
//! subnet for good (a DHCP renew, a new network): A's path moves to it and
//! B learns it from A's authenticated datagrams.
//!
//! Timeline: the wires start (epoch), the testbed comes up, the measurement
//! starts at epoch + [`SETUP_ALLOWANCE`] (or at once if setup took longer),
//! and the WiFi outage begins `handover_at` after that.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::iperf::{self, Measurement};
use super::plot::{Chart, Series};
use super::report::{Report, Row};
use super::scenario::{invalid, Case, Link, Scenario, ScenarioError};
use super::stall::{self, StallStats};
use super::testbed::{self, check_stop, Testbed};
use super::voip::{self, VoipStats};
use super::{progress, Options};
use mpt_emu::schedule::{Schedule, Window};
use mpt_emu::trace::{Trace, TracePoint};
use mpt_emu::units;

/// Time from the wires' start to the start of the measurement, so that the
/// outage (scheduled on the wire's clock) lands at `handover_at`.
pub const SETUP_ALLOWANCE: Duration = Duration::from_secs(4);
/// UDP port of the VoIP receiver in B.
pub const VOIP_PORT: u16 = 5004;
/// Frame of a full-size tunnel packet: 1400 inner + 20 IP + 8 UDP + 24 mpt
/// + 14 Ethernet.
const FULL_FRAME: f64 = 1466.0;
/// The shipped LTE capacity trace, compiled in for the preset.
const BUILTIN_TRACE: (&str, &str) = (
    "lte-capacity.trace",
    include_str!("../../../../conf/links/lte-capacity.trace"),
);

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LteQuick {
    pub handover_at: Option<f64>,
    pub handover_len: Option<f64>,
    /// Run only the first this many variants.
    pub variants: Option<usize>,
}

/// The `[lte]` table of a scenario file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LteDef {
    /// Seconds from the start of the measurement to the WiFi outage.
    pub handover_at: f64,
    /// Seconds the WiFi link stays dark.
    pub handover_len: f64,
    /// VoIP packet interval, e.g. "20ms".
    pub voip_interval: Option<String>,
    /// VoIP UDP payload bytes.
    pub voip_size: Option<usize>,
    /// Per-packet GTP-U overhead on the LTE link, bytes.
    pub gtp_overhead: Option<u32>,
    /// LTE capacity trace: a file (relative to the working directory or
    /// conf/links/), or the name of the shipped one.
    pub trace: Option<String>,
    /// How the WiFi link fails when no `[[lte.variant]]` is given.
    pub event: Option<String>,
    /// mptd as a new user runs it: its default scheduler, keepalive and
    /// dead timer, equal weights (otherwise the bench's faster timers,
    /// `weighted` with weights proportional to the link rates).
    #[serde(default)]
    pub mptd_defaults: bool,
    /// One case each; without any, one from `event` and `tests`.
    #[serde(default, rename = "variant")]
    pub variants: Vec<VariantDef>,
    #[serde(default)]
    pub quick: LteQuick,
}

/// One `[[lte.variant]]`: how WiFi fails, how the VoIP flow is marked,
/// LTE's role and the bulk traffic beside.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantDef {
    /// "silent" (default), "link-down" or "addr-change".
    pub event: Option<String>,
    /// DSCP of the VoIP packets: "none" (default), "ef", or 0..=63.
    pub dscp: Option<toml::Value>,
    /// LTE path status: "up" (default) or "backup".
    pub lte: Option<String>,
    /// Bulk TCP beside the VoIP flow: "none", "iperf3" (default when the
    /// scenario's tests hold "tcp"), or one stream of our own with the
    /// given congestion control ("cubic", "bbr", "default") whose longest
    /// stall is measured.
    pub bulk: Option<String>,
}

/// How the WiFi link fails in the handover window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LteEvent {
    /// The emulated link goes dark: only missing packets tell.
    Silent,
    /// A's WiFi interface goes down (a netlink event in A).
    LinkDown,
    /// A's WiFi interface gets a new address (netlink events in A, roaming
    /// for B).
    AddrChange,
}

impl LteEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            LteEvent::Silent => "silent",
            LteEvent::LinkDown => "link-down",
            LteEvent::AddrChange => "addr-change",
        }
    }

    fn parse(origin: &str, v: Option<&str>) -> Result<LteEvent, ScenarioError> {
        match v {
            None | Some("silent") => Ok(LteEvent::Silent),
            Some("link-down") => Ok(LteEvent::LinkDown),
            Some("addr-change") => Ok(LteEvent::AddrChange),
            Some(other) => Err(invalid(
                origin,
                format!("lte.event: `{other}` is not \"silent\", \"link-down\" or \"addr-change\""),
            )),
        }
    }
}

/// Bulk traffic beside the VoIP flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bulk {
    None,
    /// iperf3 (goodput and retransmits).
    Iperf3,
    /// One stream of our own (see [`super::stall`]); empty: the system's
    /// default congestion control.
    Stream(String),
}

/// One resolved variant.
#[derive(Debug, Clone)]
pub struct LteVariant {
    pub event: LteEvent,
    /// DSCP of the VoIP packets (0: unmarked).
    pub dscp: u8,
    pub lte_backup: bool,
    pub bulk: Bulk,
}

/// DSCP Expedited Forwarding (RFC 3246), what VoIP media is marked with.
pub const DSCP_EF: u8 = 46;

impl LteVariant {
    /// "silent, EF, LTE backup, bulk cubic".
    pub fn label(&self) -> String {
        let mut l = format!("WiFi {}", self.event.as_str());
        match self.dscp {
            0 => l += ", VoIP unmarked",
            DSCP_EF => l += ", VoIP EF",
            d => l += &format!(", VoIP DSCP {d}"),
        }
        if self.lte_backup {
            l += ", LTE backup";
        }
        match &self.bulk {
            Bulk::None => {}
            Bulk::Iperf3 => l += ", bulk iperf3",
            Bulk::Stream(cc) if cc.is_empty() => l += ", bulk TCP",
            Bulk::Stream(cc) => l += &format!(", bulk {cc}"),
        }
        l
    }
}

impl VariantDef {
    fn resolve(&self, origin: &str, tcp_test: bool) -> Result<LteVariant, ScenarioError> {
        let dscp = match &self.dscp {
            None => 0,
            Some(toml::Value::String(s)) if s == "none" => 0,
            Some(toml::Value::String(s)) if s.eq_ignore_ascii_case("ef") => DSCP_EF,
            Some(toml::Value::Integer(n)) if (0..=63).contains(n) => *n as u8,
            Some(v) => {
                return Err(invalid(
                    origin,
                    format!("lte.variant.dscp: {v} is not \"none\", \"ef\" or 0..=63"),
                ))
            }
        };
        let lte_backup = match self.lte.as_deref() {
            None | Some("up") => false,
            Some("backup") => true,
            Some(o) => {
                return Err(invalid(
                    origin,
                    format!("lte.variant.lte: `{o}` is not \"up\" or \"backup\""),
                ))
            }
        };
        let bulk = match self.bulk.as_deref() {
            None if tcp_test => Bulk::Iperf3,
            None | Some("none") => Bulk::None,
            Some("iperf3") => Bulk::Iperf3,
            Some("default") => Bulk::Stream(String::new()),
            Some(cc) if !cc.is_empty() && cc.len() < 16 && cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                Bulk::Stream(cc.to_string())
            }
            Some(o) => {
                return Err(invalid(
                    origin,
                    format!("lte.variant.bulk: `{o}` is not \"none\", \"iperf3\", \"default\" or a congestion control name"),
                ))
            }
        };
        Ok(LteVariant {
            event: LteEvent::parse(origin, self.event.as_deref())?,
            dscp,
            lte_backup,
            bulk,
        })
    }
}

/// Resolved `[lte]` settings.
#[derive(Debug, Clone)]
pub struct LteParams {
    pub handover_at: Duration,
    pub handover_len: Duration,
    pub voip_interval: Duration,
    pub voip_size: usize,
    pub gtp_overhead: u32,
    pub trace: Option<(String, Trace)>,
    pub mptd_defaults: bool,
    pub variants: Vec<LteVariant>,
}

impl LteDef {
    /// `tcp_test`: the scenario's `tests` hold "tcp" (bulk iperf3 beside
    /// VoIP unless a variant says otherwise).
    pub fn resolve(
        &self,
        origin: &str,
        quick: bool,
        tcp_test: bool,
    ) -> Result<LteParams, ScenarioError> {
        let (mut at, mut len) = (self.handover_at, self.handover_len);
        if quick {
            at = self.quick.handover_at.unwrap_or(at);
            len = self.quick.handover_len.unwrap_or(len);
        }
        if !(at.is_finite() && at >= 0.0 && len.is_finite() && len > 0.0) {
            return Err(invalid(
                origin,
                "lte: handover_at >= 0 and handover_len > 0",
            ));
        }
        let voip_interval = match &self.voip_interval {
            Some(s) => units::parse_duration(s)
                .map_err(|e| invalid(origin, format!("lte.voip_interval: {e}")))?,
            None => Duration::from_millis(20),
        };
        if voip_interval < Duration::from_millis(1) {
            return Err(invalid(origin, "lte.voip_interval must be >= 1ms"));
        }
        let voip_size = self.voip_size.unwrap_or(160);
        if !(12..=1200).contains(&voip_size) {
            return Err(invalid(origin, "lte.voip_size must be 12..=1200 bytes"));
        }
        let trace = self
            .trace
            .as_deref()
            .map(|t| load_trace(t).map(|tr| (t.to_string(), tr)))
            .transpose()
            .map_err(|e| invalid(origin, e))?;
        if self.event.is_some() && !self.variants.is_empty() {
            return Err(invalid(
                origin,
                "lte: give either `event` or [[lte.variant]] tables, not both",
            ));
        }
        let mut variants = if self.variants.is_empty() {
            vec![VariantDef {
                event: self.event.clone(),
                ..VariantDef::default()
            }
            .resolve(origin, tcp_test)?]
        } else {
            self.variants
                .iter()
                .map(|v| v.resolve(origin, tcp_test))
                .collect::<Result<Vec<_>, _>>()?
        };
        if quick {
            if let Some(n) = self.quick.variants {
                variants.truncate(n.max(1));
            }
        }
        Ok(LteParams {
            handover_at: Duration::from_secs_f64(at),
            handover_len: Duration::from_secs_f64(len),
            voip_interval,
            voip_size,
            gtp_overhead: self.gtp_overhead.unwrap_or(40),
            trace,
            mptd_defaults: self.mptd_defaults,
            variants,
        })
    }
}

pub(crate) fn load_trace(name: &str) -> Result<Trace, String> {
    for p in [PathBuf::from(name), Path::new("conf/links").join(name)] {
        if p.is_file() {
            return Trace::load(&p);
        }
    }
    if name == BUILTIN_TRACE.0 {
        return Trace::parse(BUILTIN_TRACE.1).map_err(|e| format!("{name}: {e}"));
    }
    Err(format!("trace {name:?}: no such file"))
}

/// Scales a trace's rates by `f` (GTP overhead as a lower effective rate).
fn scale_trace(t: &Trace, f: f64) -> Trace {
    let pts = t
        .points()
        .iter()
        .map(|p| TracePoint {
            rate: p.rate.map(|r| (r as f64 * f) as u64),
            ..*p
        })
        .collect();
    Trace::from_points(pts).unwrap_or_else(|_| t.clone())
}

/// Results of one `lte-gateway` case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LteResult {
    /// The variant, as in the progress lines.
    pub variant: String,
    pub voip: VoipStats,
    /// DSCP the VoIP packets carried (0: unmarked).
    pub dscp: u8,
    /// The LTE path was a backup.
    pub lte_backup: bool,
    /// Bulk TCP through the tunnel over the same time.
    pub bulk: Option<Measurement>,
    /// Bulk TCP of our own: goodput and the longest stall.
    pub stall: Option<StallStats>,
    /// Seconds from the measurement start to the WiFi outage (as it happened).
    pub handover_at_s: f64,
    pub handover_len_s: f64,
    pub wifi_mbps: f64,
    pub lte_mbps: f64,
    pub gtp_factor: f64,
    /// The LTE link's configured one-way delay (A to B), ms.
    pub lte_owd_ms: f64,
    /// Highest VoIP one-way delay above the LTE link's, ms: the longest
    /// any packet waited beyond the slower path.
    pub excess_max_ms: Option<f64>,
    /// mptd A's handovers and the latest one's gap (its status).
    pub handovers: u64,
    pub handover_gap_ms: Option<f64>,
    /// link-down: from the link coming back, addr-change: from the new
    /// address, until the WiFi path carries data again (A sends on it and
    /// B receives; addr-change: B from A's new address), ms.
    pub path_back_ms: Option<f64>,
    /// How the WiFi link failed: "silent", "link-down" or "addr-change".
    pub event: &'static str,
    /// The issue's target for this variant and whether it was met.
    pub target: Option<String>,
    pub pass: Option<bool>,
    /// VoIP per-packet timeline: (s since start, one-way delay ms; null = lost).
    pub timeline: Vec<(f64, Option<f64>)>,
}

/// TCP port of our own bulk stream in B.
const STALL_PORT: u16 = 5005;

/// How often the WiFi path's return is polled.
const BACK_POLL: Duration = Duration::from_millis(20);
/// Longest wait for the WiFi path to carry data again.
const BACK_TIMEOUT: Duration = Duration::from_secs(8);

pub fn run_case(
    k: usize,
    case: &Case,
    s: &Scenario,
    p: &LteParams,
    opts: &Options,
    work: &Path,
    stop: &AtomicBool,
) -> anyhow::Result<Row> {
    let total = s.cases.len();
    check_stop(stop)?;
    if case.links.len() < 2 {
        bail!("lte-gateway needs a WiFi [link] and an LTE [extra_link] (extra = [true])");
    }
    let v = p
        .variants
        .get(case.lte_variant)
        .context("lte-gateway: no such variant")?
        .clone();
    let mut case = case.clone();
    case.roaming_path0 = v.event == LteEvent::AddrChange;
    let start_at = SETUP_ALLOWANCE + p.handover_at;
    // WiFi (path 0): dark in both directions for handover_len (silent), or
    // left alone while A's interface goes down (link-down, below).
    if let Some(Link::Emu { a_to_b, b_to_a, .. }) = case.links.first_mut() {
        let dark = if v.event == LteEvent::Silent {
            vec![a_to_b, b_to_a]
        } else {
            Vec::new()
        };
        for d in dark {
            let mut w = d.schedule.windows().to_vec();
            w.push(Window {
                start: start_at,
                len: p.handover_len,
            });
            d.schedule = Schedule::new(w, d.schedule.periodic());
        }
    } else {
        bail!("lte-gateway: the WiFi [link] must use shaper = \"emu\"");
    }
    let factor = FULL_FRAME / (FULL_FRAME + f64::from(p.gtp_overhead));
    let last = case.links.len() - 1;
    let lte_owd_ms = if let Some(Link::Emu { a_to_b, b_to_a, .. }) = case.links.get_mut(last) {
        let owd = a_to_b.delay.as_secs_f64() * 1e3;
        for d in [a_to_b, b_to_a] {
            d.rate = d.rate.map(|r| (r as f64 * factor) as u64);
            if let Some((_, t)) = &p.trace {
                d.trace = Some(scale_trace(t, factor));
            }
        }
        owd
    } else {
        bail!("lte-gateway: the LTE [extra_link] must use shaper = \"emu\"");
    };
    let rates: Vec<u64> = case
        .links
        .iter()
        .map(|l| l.rate_bps().unwrap_or(100_000_000))
        .collect();
    if p.mptd_defaults {
        case.default_timers = true;
        case.daemon_scheduler = true;
        case.weights = Vec::new();
    } else {
        case.weights = rates
            .iter()
            .map(|r| ((r / 1_000_000) as u32).clamp(1, 1000))
            .collect();
    }
    if v.lte_backup {
        case.backup_paths = vec![last];
    }
    progress(
        k,
        total,
        &case,
        &format!(
            "building testbed (WiFi {:.0} Mbit/s + LTE {:.1} Mbit/s after GTP overhead{}; mptd {})",
            rates[0] as f64 / 1e6,
            rates[last] as f64 / 1e6,
            p.trace
                .as_ref()
                .map_or(String::new(), |(n, _)| format!(", capacity trace {n}")),
            if p.mptd_defaults {
                "defaults"
            } else {
                "weighted, keepalive 500 ms, dead timer 3 s"
            }
        ),
    );
    let mut tb = Testbed::build(k, &case, work, &opts.mptd, stop)
        .with_context(|| format!("case {}: building the testbed", k + 1))?;
    let epoch = *tb
        .wire_epochs()
        .first()
        .context("lte-gateway: no emulator wire")?;
    let outage_start = epoch + start_at;
    let now = Instant::now();
    if now + Duration::from_secs(1) > outage_start {
        bail!(
            "the testbed took {:.1} s to come up; the handover at {:.1} s is too early \
             (raise handover_at)",
            (now - epoch).as_secs_f64(),
            start_at.as_secs_f64()
        );
    }
    testbed::sleep(
        (epoch + SETUP_ALLOWANCE).saturating_duration_since(now),
        stop,
    )?;
    let t_start = Instant::now();
    let until = t_start + s.duration;
    let handover_at_s = (outage_start - t_start).as_secs_f64();
    let bulk_label = match &v.bulk {
        Bulk::None => String::new(),
        Bulk::Iperf3 => " + bulk TCP (iperf3)".into(),
        Bulk::Stream(cc) => format!(
            " + bulk TCP ({})",
            if cc.is_empty() { "default cc" } else { cc }
        ),
    };
    progress(
        k,
        total,
        &case,
        &format!(
            "VoIP {} B every {} ms{bulk_label} for {} s; WiFi {} at {:.1} s{}",
            p.voip_size,
            p.voip_interval.as_millis(),
            s.duration.as_secs(),
            v.event.as_str(),
            handover_at_s,
            if v.event == LteEvent::AddrChange {
                String::new()
            } else {
                format!(" for {} s", p.handover_len.as_secs_f64())
            }
        ),
    );
    let plan = tb.plan.clone();
    let target = plan.inner_sockaddr(VOIP_PORT)?;
    let any = |port: u16| -> anyhow::Result<SocketAddr> {
        Ok(if target.is_ipv4() {
            format!("0.0.0.0:{port}").parse()?
        } else {
            format!("[::]:{port}").parse()?
        })
    };
    let receiver = voip::Receiver::start(tb.b.name(), any(VOIP_PORT)?)?;
    // link-down: A's WiFi interface (path 0's veth in A) down for the
    // outage window, then up again. addr-change: its address replaced by
    // another of the same subnet at the start of the window, for good.
    // Either way, then watch for the path to carry data again.
    let link_flap = (v.event != LteEvent::Silent).then(|| {
        let ns = tb.a.name().to_string();
        let len = p.handover_len;
        let event = v.event;
        let len_bits = plan.outer_prefix();
        let (old, new) = (plan.outer(0, 1), plan.outer(0, 111));
        let (control_a, control_b) = (tb.control_a.clone(), tb.control_b.clone());
        std::thread::spawn(move || -> anyhow::Result<Option<Duration>> {
            let ip = |args: &[&str]| mpt_emu::netns::ip(args);
            std::thread::sleep(outage_start.saturating_duration_since(Instant::now()));
            if event == LteEvent::AddrChange {
                let (old, new_cidr) = (format!("{old}/{len_bits}"), format!("{new}/{len_bits}"));
                let base = wifi_counters(&control_a, &control_b);
                ip(&["-n", &ns, "addr", "del", &old, "dev", "va0"])
                    .context("removing A's WiFi address")?;
                let changed = Instant::now();
                // nodad: an IPv6 address usable at once, like the testbed's.
                let mut add = vec!["-n", &ns, "addr", "add", &new_cidr, "dev", "va0"];
                if new_cidr.contains(':') {
                    add.push("nodad");
                }
                ip(&add).context("giving A's WiFi interface a new address")?;
                return Ok(wait_wifi_back(
                    &control_a,
                    &control_b,
                    base,
                    Some(&new),
                    changed,
                ));
            }
            ip(&["-n", &ns, "link", "set", "dev", "va0", "down"])
                .context("taking A's WiFi interface down")?;
            std::thread::sleep(len);
            let base = wifi_counters(&control_a, &control_b);
            ip(&["-n", &ns, "link", "set", "dev", "va0", "up"])
                .context("bringing A's WiFi interface up")?;
            Ok(wait_wifi_back(
                &control_a,
                &control_b,
                base,
                None,
                Instant::now(),
            ))
        })
    });
    let sender_stop = Arc::new(AtomicBool::new(false));
    let sender = voip::spawn_sender(
        tb.a.name(),
        target,
        p.voip_size,
        p.voip_interval,
        v.dscp,
        until,
        sender_stop.clone(),
    );
    let stop_sender = |sender: std::thread::JoinHandle<_>| {
        sender_stop.store(true, Ordering::Relaxed);
        let _ = sender.join();
    };
    let c0 = (tb.mptd_a.cpu_time(), tb.mptd_b.cpu_time(), Instant::now());
    let self0 = testbed::cpu_time(std::process::id());
    let tun_target = plan.inner(2);
    let mut stall = None;
    let bulk_m = match &v.bulk {
        Bulk::Iperf3 => {
            let json = work.join(format!("iperf3-{k}-bulk.json"));
            let r = iperf::run(
                &iperf::Run {
                    ns: tb.a.name(),
                    server_ns: tb.b.name(),
                    target: &tun_target,
                    duration: s.duration,
                    udp: None,
                    json_out: &json,
                    cc: None,
                    omit: Duration::ZERO,
                    streams: 1,
                },
                stop,
            );
            match r {
                Ok(m) => Some(m),
                Err(e) => {
                    stop_sender(sender);
                    return Err(e.context(format!("case {}: bulk TCP", k + 1)));
                }
            }
        }
        Bulk::Stream(cc) => {
            let r = (|| -> anyhow::Result<StallStats> {
                let sink = stall::Sink::start(tb.b.name(), any(STALL_PORT)?)?;
                let to = plan.inner_sockaddr(STALL_PORT)?;
                let source = stall::spawn_source(tb.a.name(), to, cc, until, sender_stop.clone());
                let sent = match source.join() {
                    Ok(r) => r.context("bulk TCP source")?,
                    Err(_) => bail!("bulk TCP source panicked"),
                };
                let st = sink.finish(if cc.is_empty() { "default" } else { cc })?;
                if sent == 0 {
                    bail!("bulk TCP source sent nothing");
                }
                Ok(st)
            })();
            match r {
                Ok(st) => {
                    let m = Measurement {
                        mbps: st.mbps,
                        seconds: s.duration.as_secs_f64(),
                        ..Measurement::default()
                    };
                    stall = Some(st);
                    Some(m)
                }
                Err(e) => {
                    stop_sender(sender);
                    return Err(e.context(format!("case {}: bulk TCP", k + 1)));
                }
            }
        }
        Bulk::None => {
            while Instant::now() < until {
                if let Err(e) = testbed::sleep(Duration::from_millis(200), stop) {
                    stop_sender(sender);
                    return Err(e);
                }
            }
            None
        }
    };
    // Wait for the sender, then for late packets (queues drain).
    while !sender.is_finished() {
        if stop.load(Ordering::Relaxed) {
            sender_stop.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = match sender.join() {
        Ok(r) => r.context("VoIP sender")?,
        Err(_) => bail!("VoIP sender thread panicked"),
    };
    testbed::sleep(Duration::from_secs(1), stop)?;
    let rx = receiver.finish()?;
    let path_back = match link_flap.map(std::thread::JoinHandle::join) {
        None => None,
        Some(Ok(r)) => r?,
        Some(Err(_)) => bail!("the link-down thread panicked"),
    };
    let (cpu_a, cpu_b) = {
        let wall = c0.2.elapsed().as_secs_f64().max(1e-9);
        let pct = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
            (Some(a), Some(b)) => Some(100.0 * (b - a).as_secs_f64() / wall),
            _ => None,
        };
        (
            pct(c0.0, tb.mptd_a.cpu_time()),
            pct(c0.1, tb.mptd_b.cpu_time()),
        )
    };
    let o0 = voip::instant_to_mono_ns(outage_start);
    let o1 = o0 + p.handover_len.as_nanos() as u64;
    let (st, timeline) = voip::analyse(&sent, &rx, Some((o0, o1)));
    // The per-packet log, for plots of one's own.
    let mut log = String::from("seq,send_s,delay_ms\n");
    let t0 = sent.first().copied().unwrap_or(0);
    for (i, (t, d)) in sent.iter().zip(timeline.iter().map(|x| x.1)).enumerate() {
        log += &format!(
            "{i},{:.4},{}\n",
            t.saturating_sub(t0) as f64 / 1e9,
            d.map_or(String::new(), |d| format!("{d:.3}"))
        );
    }
    let log_path = work.join(format!("voip-{k}.csv"));
    std::fs::write(&log_path, log).with_context(|| format!("writing {}", log_path.display()))?;
    for p in [&mut tb.mptd_a, &mut tb.mptd_b] {
        if let Some(st) = p.exited() {
            bail!(
                "{} died during the measurements ({st}):\n{}",
                p.name,
                p.log_tail()
            );
        }
    }
    let mut row = Row {
        combo: case.combo.label(),
        n: case.n,
        paths: case.links.len(),
        extra: case.extra,
        ideal_mbps: rates.iter().sum::<u64>() as f64 / 1e6,
        tcp: bulk_m.clone(),
        cpu_a_pct: cpu_a,
        cpu_b_pct: cpu_b,
        emu_cpu_pct: super::report::self_cpu_pct(
            self0,
            testbed::cpu_time(std::process::id()),
            c0.2.elapsed(),
        ),
        ..Row::default()
    };
    row.mptd_status_a = testbed::mptd_status(&tb.control_a).ok();
    row.tunnel_rtt_ms = super::report::mean_path_rtt(row.mptd_status_a.as_ref());
    let handover = row
        .mptd_status_a
        .as_ref()
        .map(|s| s["connections"][0]["handover"].clone())
        .unwrap_or_default();
    row.wires = tb.stop_wires();
    let mut result = LteResult {
        variant: v.label(),
        excess_max_ms: st.delay_max_ms.map(|d| (d - lte_owd_ms).max(0.0)),
        voip: st,
        dscp: v.dscp,
        lte_backup: v.lte_backup,
        bulk: bulk_m,
        stall,
        handover_at_s,
        handover_len_s: p.handover_len.as_secs_f64(),
        wifi_mbps: rates[0] as f64 / 1e6,
        lte_mbps: rates[last] as f64 / 1e6,
        gtp_factor: factor,
        lte_owd_ms,
        handovers: handover["count"].as_u64().unwrap_or(0),
        handover_gap_ms: handover["last"]["gap_ms"].as_f64(),
        path_back_ms: path_back.map(|d| d.as_secs_f64() * 1e3),
        event: v.event.as_str(),
        target: None,
        pass: None,
        timeline,
    };
    if let Some((target, pass)) = check_target(&v, &result) {
        result.target = Some(target);
        result.pass = Some(pass);
    }
    println!("    {}", summary(&result));
    row.lte = Some(result);
    row.finish();
    progress(k, total, &case, "tearing down");
    drop(tb);
    Ok(row)
}

/// One line of what a case measured.
fn summary(l: &LteResult) -> String {
    let mut s = format!(
        "WiFi {}: VoIP delay p50 {} ms, p99 {} ms, max {} ms (LTE {:.0} ms); lost {} of {}; \
         longest silence {:.0} ms",
        l.event,
        fmt(l.voip.delay_p50_ms, 1),
        fmt(l.voip.delay_p99_ms, 1),
        fmt(l.voip.delay_max_ms, 1),
        l.lte_owd_ms,
        l.voip.sent - l.voip.received,
        l.voip.sent,
        l.voip.longest_silence_ms,
    );
    if let Some(g) = l.handover_gap_ms {
        s += &format!("; mptd handover gap {g:.0} ms ({} handovers)", l.handovers);
    }
    if let Some(b) = l.path_back_ms {
        s += &format!("; WiFi carries data again after {b:.0} ms");
    } else if l.event != "silent" {
        s += "; WiFi did not carry data again";
    }
    if let Some(m) = &l.bulk {
        s += &format!("; bulk {:.2} Mbit/s", m.mbps);
    }
    if let Some(st) = &l.stall {
        s += &format!(" ({}, longest stall {:.0} ms)", st.cc, st.longest_stall_ms);
    }
    if let (Some(t), Some(p)) = (&l.target, l.pass) {
        s += &format!("; target {t}: {}", if p { "PASS" } else { "FAIL" });
    }
    s
}

/// The targets of the failover work (VoIP alone, except the stall of a
/// bulk stream), as text, and whether `l` meets its variant's.
fn check_target(v: &LteVariant, l: &LteResult) -> Option<(String, bool)> {
    let lost = l.voip.sent - l.voip.received;
    match &v.bulk {
        Bulk::Stream(_) => {
            let stall = l.stall.as_ref()?.longest_stall_ms;
            return Some(("TCP stall <= 500 ms".into(), stall <= 500.0));
        }
        Bulk::Iperf3 => return None,
        Bulk::None => {}
    }
    Some(match (v.event, v.lte_backup, v.dscp) {
        (LteEvent::Silent, true, _) => (
            "longest silence <= 300 ms".into(),
            l.voip.longest_silence_ms <= 300.0,
        ),
        (LteEvent::Silent, false, DSCP_EF) => {
            let limit = l.lte_owd_ms + 20.0;
            (
                format!("0 lost, p99 <= {limit:.0} ms"),
                lost == 0 && l.voip.delay_p99_ms.is_some_and(|d| d <= limit),
            )
        }
        (LteEvent::Silent, false, _) => (
            "<= 5 lost, none held > 100 ms".into(),
            lost <= 5 && l.excess_max_ms.is_some_and(|e| e <= 100.0),
        ),
        (LteEvent::LinkDown, _, _) => (
            "<= 2 lost, WiFi back <= 1 s".into(),
            lost <= 2 && l.path_back_ms.is_some_and(|b| b <= 1000.0),
        ),
        (LteEvent::AddrChange, _, _) => (
            "<= 5 lost, WiFi back from its new address".into(),
            lost <= 5 && l.path_back_ms.is_some(),
        ),
    })
}

/// A's data sent and B's data received on the WiFi path (`p0`), and B's
/// remote address for it, from the daemons' status.
#[derive(Debug, Clone, Default)]
struct WifiCounters {
    a_tx: u64,
    b_rx: u64,
    a_up: bool,
    b_remote: Option<String>,
}

fn wifi_counters(control_a: &Path, control_b: &Path) -> WifiCounters {
    let path = |control: &Path| -> Option<serde_json::Value> {
        let st = testbed::mptd_status(control).ok()?;
        st["connections"][0]["paths"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == "p0")
            .cloned()
    };
    let (a, b) = (path(control_a), path(control_b));
    WifiCounters {
        a_tx: a
            .as_ref()
            .and_then(|p| p["tx_data_packets"].as_u64())
            .unwrap_or(0),
        a_up: a.as_ref().is_some_and(|p| p["state"] == "up"),
        b_rx: b
            .as_ref()
            .and_then(|p| p["rx_data_packets"].as_u64())
            .unwrap_or(0),
        b_remote: b.and_then(|p| p["remote"].as_str().map(str::to_owned)),
    }
}

/// Polls until the WiFi path is up in A, A sent data on it and B received
/// data on it since `base` (and, with `new_addr`, B sends to that address);
/// the time from `since`, or `None` after [`BACK_TIMEOUT`].
fn wait_wifi_back(
    control_a: &Path,
    control_b: &Path,
    base: WifiCounters,
    new_addr: Option<&str>,
    since: Instant,
) -> Option<Duration> {
    while since.elapsed() < BACK_TIMEOUT {
        let now = wifi_counters(control_a, control_b);
        let moved = new_addr.is_none_or(|a| {
            now.b_remote
                .as_deref()
                .is_some_and(|r| r.trim_start_matches('[').starts_with(a))
        });
        if now.a_up && now.a_tx > base.a_tx && now.b_rx > base.b_rx && moved {
            return Some(since.elapsed());
        }
        std::thread::sleep(BACK_POLL);
    }
    None
}

fn fmt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}

pub fn table(r: &Report) -> String {
    let mut s = format!(
        "{:<44} {:>6} {:>6} {:>6} {:>8} {:>7} {:>7} {:>6} {:>8} {:>6}\n",
        "variant", "p50", "p99", "max", "lost", "silent", "mptd", "back", "bulk", "stall"
    );
    let mut checks = String::new();
    for row in &r.rows {
        let Some(l) = &row.lte else { continue };
        s += &format!(
            "{:<44} {:>6} {:>6} {:>6} {:>8} {:>7.0} {:>7} {:>6} {:>8} {:>6}\n",
            l.variant,
            fmt(l.voip.delay_p50_ms, 1),
            fmt(l.voip.delay_p99_ms, 1),
            fmt(l.voip.delay_max_ms, 1),
            format!("{}/{}", l.voip.sent - l.voip.received, l.voip.sent),
            l.voip.longest_silence_ms,
            fmt(l.handover_gap_ms, 0),
            fmt(l.path_back_ms, 0),
            fmt(l.bulk.as_ref().map(|m| m.mbps), 2),
            fmt(l.stall.as_ref().map(|st| st.longest_stall_ms), 0),
        );
        if let (Some(t), Some(p)) = (&l.target, l.pass) {
            checks += &format!(
                "  {}: {t}: {}\n",
                l.variant,
                if p { "PASS" } else { "FAIL" }
            );
        }
    }
    if let Some(l) = r.rows.iter().find_map(|row| row.lte.as_ref()) {
        s += &format!(
            "WiFi {:.0} Mbit/s, LTE {:.1} Mbit/s one-way {:.0} ms; WiFi fails at {:.1} s (for {:.1} s unless addr-change)\n",
            l.wifi_mbps, l.lte_mbps, l.lte_owd_ms, l.handover_at_s, l.handover_len_s
        );
    }
    s += "VoIP one-way delay ms (p50, p99, max); lost = VoIP packets lost/sent; silent = longest time without a VoIP packet \
          arriving, ms; mptd = A's last handover gap (last packet heard on WiFi to first data on LTE), ms; back = WiFi \
          carries data again after the link came back / the new address, ms; bulk = TCP goodput Mbit/s; stall = longest \
          time without TCP data arriving, ms\n";
    if !checks.is_empty() {
        s += "targets:\n";
        s += &checks;
    }
    s
}

pub fn csv(r: &Report) -> String {
    let mut s = String::from(
        "variant,event,dscp,lte_backup,wifi_mbps,lte_mbps,lte_owd_ms,gtp_factor,voip_sent,voip_received,voip_loss_pct,\
         voip_p50_ms,voip_p99_ms,voip_max_ms,excess_max_ms,lost_in_outage,longest_gap_ms,longest_silence_ms,\
         switch_ms,switch_back_ms,handovers,handover_gap_ms,path_back_ms,handover_at_s,handover_len_s,\
         bulk_mbps,bulk_retransmits,bulk_cc,longest_stall_ms,cpu_a_pct,cpu_b_pct,target,pass\n",
    );
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
    for row in &r.rows {
        let Some(l) = &row.lte else { continue };
        s += &format!(
            "\"{}\",{},{},{},{:.3},{:.3},{:.3},{:.4},{},{},{:.3},{},{},{},{},{},{:.1},{:.1},{},{},{},{},{},{:.3},{:.3},{},{},{},{},{},{},\"{}\",{}\n",
            l.variant,
            l.event,
            l.dscp,
            l.lte_backup,
            l.wifi_mbps,
            l.lte_mbps,
            l.lte_owd_ms,
            l.gtp_factor,
            l.voip.sent,
            l.voip.received,
            l.voip.loss_pct,
            o(l.voip.delay_p50_ms),
            o(l.voip.delay_p99_ms),
            o(l.voip.delay_max_ms),
            o(l.excess_max_ms),
            l.voip.lost_in_outage,
            l.voip.longest_gap_ms,
            l.voip.longest_silence_ms,
            o(l.voip.switch_ms),
            o(l.voip.switch_back_ms),
            l.handovers,
            o(l.handover_gap_ms),
            o(l.path_back_ms),
            l.handover_at_s,
            l.handover_len_s,
            o(l.bulk.as_ref().map(|m| m.mbps)),
            l.bulk
                .as_ref()
                .and_then(|m| m.retransmits)
                .map_or(String::new(), |v| v.to_string()),
            l.stall.as_ref().map_or("", |st| st.cc.as_str()),
            o(l.stall.as_ref().map(|st| st.longest_stall_ms)),
            o(row.cpu_a_pct),
            o(row.cpu_b_pct),
            l.target.as_deref().unwrap_or(""),
            l.pass.map_or(String::new(), |p| p.to_string()),
        );
    }
    s
}

/// VoIP one-way delay over time (dots), lost packets at the bottom, the
/// WiFi outage shaded.
pub fn svg(r: &Report) -> String {
    let mut c = Chart {
        title: format!("mpt bench {}: VoIP one-way delay over time", r.scenario),
        xlabel: "time since start (s)".into(),
        ylabel: "one-way delay (ms)".into(),
        ..Chart::default()
    };
    for row in &r.rows {
        let Some(l) = &row.lte else { continue };
        c.series.push(Series {
            label: format!("{}: VoIP delay", l.variant),
            points: l
                .timeline
                .iter()
                .filter_map(|(t, d)| d.map(|d| (*t, d)))
                .collect(),
            dots: true,
            ..Series::default()
        });
        c.series.push(Series {
            label: format!("{}: VoIP lost", l.variant),
            points: l
                .timeline
                .iter()
                .filter(|(_, d)| d.is_none())
                .map(|(t, _)| (*t, 0.0))
                .collect(),
            dots: true,
            ..Series::default()
        });
        c.shade.push((
            l.handover_at_s,
            l.handover_at_s + l.handover_len_s,
            "WiFi outage".into(),
        ));
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_defaults_to_silent_and_rejects_unknown_values() {
        let def = |event: Option<&str>| LteDef {
            handover_at: 3.0,
            handover_len: 4.0,
            event: event.map(str::to_owned),
            ..LteDef::default()
        };
        let ev = |e| {
            def(e)
                .resolve("test", false, false)
                .map(|p| p.variants[0].event)
        };
        assert_eq!(ev(None).ok(), Some(LteEvent::Silent));
        assert_eq!(ev(Some("silent")).ok(), Some(LteEvent::Silent));
        assert_eq!(ev(Some("link-down")).ok(), Some(LteEvent::LinkDown));
        assert_eq!(ev(Some("addr-change")).ok(), Some(LteEvent::AddrChange));
        let e = ev(Some("unplugged")).err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|m| m.contains("lte.event")),
            "{e:?}"
        );
    }

    #[test]
    fn variants_resolve_and_bad_values_are_named() {
        let text = r#"
            handover_at = 3
            handover_len = 4
            mptd_defaults = true
            [[variant]]
            event = "silent"
            dscp = "ef"
            [[variant]]
            lte = "backup"
            [[variant]]
            event = "link-down"
            dscp = 34
            bulk = "cubic"
            [quick]
            variants = 2
        "#;
        let def: LteDef = toml::from_str(text).expect("parses");
        let p = def.resolve("test", false, true).expect("resolves");
        assert!(p.mptd_defaults);
        assert_eq!(p.variants.len(), 3);
        assert_eq!(p.variants[0].dscp, DSCP_EF);
        assert_eq!(p.variants[0].bulk, Bulk::Iperf3, "tests = [\"tcp\"]");
        assert!(p.variants[1].lte_backup);
        assert_eq!(p.variants[1].event, LteEvent::Silent);
        assert_eq!(p.variants[2].dscp, 34);
        assert_eq!(p.variants[2].bulk, Bulk::Stream("cubic".into()));
        assert_eq!(
            p.variants[2].label(),
            "WiFi link-down, VoIP DSCP 34, bulk cubic"
        );
        assert_eq!(def.resolve("test", true, false).unwrap().variants.len(), 2);
        let p = def.resolve("test", false, false).unwrap();
        assert_eq!(p.variants[0].bulk, Bulk::None);
        for (bad, key) in [
            ("dscp = 64", "dscp"),
            ("dscp = \"af99\"", "dscp"),
            ("lte = \"primary\"", "lte.variant.lte"),
            ("bulk = \"no such cc!\"", "bulk"),
            ("event = \"unplugged\"", "lte.event"),
        ] {
            let text = format!("handover_at = 3\nhandover_len = 4\n[[variant]]\n{bad}\n");
            let def: LteDef = toml::from_str(&text).expect("parses");
            let e = def
                .resolve("test", false, false)
                .err()
                .map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|m| m.contains(key)),
                "{bad}: {e:?}"
            );
        }
        // `event` and variants together are ambiguous.
        let text = "handover_at = 3\nhandover_len = 4\nevent = \"silent\"\n[[variant]]\n";
        let def: LteDef = toml::from_str(text).expect("parses");
        assert!(def.resolve("test", false, false).is_err());
    }
}
