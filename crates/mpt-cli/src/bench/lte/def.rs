//! The `[lte]` table of a scenario file and its `[[lte.variant]]`s: how
//! WiFi fails, how the VoIP flow is marked, LTE's role and the bulk traffic
//! beside, resolved into [`LteParams`].

use std::time::Duration;

use serde::Deserialize;

use crate::bench::link_trace::load_trace;
use crate::bench::scenario::error::{invalid, ScenarioError};
use mpt_emu::trace::{Trace, TraceFormat};
use mpt_emu::units;

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
    /// How `trace` is read: "mpt" (default) or "mahimahi".
    pub trace_format: Option<TraceFormat>,
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
    /// One stream of our own (see [`crate::bench::stall`]); empty: the system's
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
            .map(|t| load_trace(t, self.trace_format).map(|tr| (t.to_string(), tr)))
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
