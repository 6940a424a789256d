//! One testbed case (its paths, IP versions and mptd settings) and the
//! tests every case runs.

use serde::{Deserialize, Serialize};

use super::link::Link;

/// Tests run in every case, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum TestKind {
    #[serde(rename = "raw-udp")]
    RawUdp,
    #[serde(rename = "raw-tcp")]
    RawTcp,
    #[serde(rename = "udp")]
    Udp,
    #[serde(rename = "tcp")]
    Tcp,
    /// HTTP download of a large file through the tunnel (as with wget).
    #[serde(rename = "http")]
    Http,
    /// One TCP stream from an end host behind A to one behind B, split at
    /// A by mptd's TCP acceleration (`--accel`; skipped when off).
    #[serde(rename = "accel-tcp")]
    AccelTcp,
}

/// Inner (tunnelled) and outer (path) IP versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Combo {
    pub inner: u8,
    pub outer: u8,
}

impl Combo {
    pub const ALL: [Combo; 4] = [
        Combo { inner: 4, outer: 4 },
        Combo { inner: 6, outer: 4 },
        Combo { inner: 4, outer: 6 },
        Combo { inner: 6, outer: 6 },
    ];

    pub fn parse(s: &str) -> Option<Combo> {
        Combo::ALL.into_iter().find(|c| c.label() == s.trim())
    }

    pub fn label(&self) -> String {
        format!("{}in{}", self.inner, self.outer)
    }
}

/// Parses a combo list: "all" or comma-separated labels.
pub fn parse_combos(items: &[String]) -> Result<Vec<Combo>, String> {
    let mut out = Vec::new();
    for item in items.iter().flat_map(|s| s.split(',')) {
        if item.trim() == "all" {
            for c in Combo::ALL {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
            continue;
        }
        let c = Combo::parse(item).ok_or_else(|| {
            format!("unknown IP combination {item:?}: expected 4in4, 6in4, 4in6, 6in6 or all")
        })?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err("no IP combination given".into());
    }
    Ok(out)
}

/// One testbed: a fixed set of paths, measured with every test.
#[derive(Debug, Clone)]
pub struct Case {
    pub combo: Combo,
    /// Paths, the swept ones first, then the extra link if any.
    pub links: Vec<Link>,
    /// Count of the swept (identical) paths.
    pub n: usize,
    pub rtt_ms: Option<f64>,
    pub loss: Option<f64>,
    pub extra: bool,
    /// mptd path weights (default 100 each), e.g. proportional to link rates.
    pub weights: Vec<u32>,
    /// Networks behind A that B routes into the tunnel (`dtn-relay`: the
    /// source's terrestrial subnet).
    pub networks_b: Vec<String>,
    /// A name for progress lines instead of the swept parameters (`unlike`).
    pub label: Option<String>,
    /// Leave `scheduler` out of the mptd configs (mptd's default applies);
    /// otherwise the bench asks for `weighted`.
    pub daemon_scheduler: bool,
    /// `--scheduler`: asked of mptd in every case, whatever the scenario.
    pub scheduler: Option<String>,
    /// A's path 0 names only its interface (follows its address), B learns
    /// A's address on it, and both sides share a fresh key (roaming needs
    /// one): `lte-gateway` with `event = "addr-change"`.
    pub roaming_path0: bool,
    /// mptd's own keepalive and dead timer (not the bench's faster ones).
    pub default_timers: bool,
    /// Paths configured `status = "backup"`.
    pub backup_paths: Vec<usize>,
    /// `lte-gateway`: which of the scenario's variants this case runs.
    pub lte_variant: usize,
}
