//! One path's link: as written in a scenario file ([`LinkDef`]: tbf or the
//! emulator, with a profile and settings over it) and resolved
//! ([`Link`]), with an RTT and loss from the sweep applied.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use mpt_emu::model::LinkConfig;
use mpt_emu::profile::{self, LinkSpec, Profile};
use mpt_emu::units;

use super::error::{invalid, ScenarioError};

/// How a path is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shaper {
    /// Kernel tbf on both veth ends (rate only).
    Tbf,
    /// The user-space emulator in a middle namespace.
    Emu,
}

/// One path's link as written in a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDef {
    pub shaper: Shaper,
    /// tbf: rate, e.g. "100mbit".
    pub rate: Option<String>,
    /// tbf: bucket size in tc syntax (default "32kbit").
    pub burst: Option<String>,
    /// tbf: queueing latency bound in tc syntax (default "50ms").
    pub latency: Option<String>,
    /// emu: link profile preset or file.
    pub profile: Option<String>,
    /// emu: settings over the profile (keys of a profile's `[link]`).
    #[serde(default)]
    pub emu: LinkSpec,
}

/// A resolved link of one path.
#[derive(Debug, Clone)]
pub enum Link {
    Tbf {
        rate: String,
        burst: String,
        latency: String,
        rate_bps: u64,
    },
    Emu {
        a_to_b: Box<LinkConfig>,
        b_to_a: Box<LinkConfig>,
        /// Round-trip propagation delay, for reports.
        rtt: Duration,
        loss: f64,
    },
}

impl Link {
    /// The link's nominal rate (bit/s on whole frames), if limited.
    pub fn rate_bps(&self) -> Option<u64> {
        match self {
            Link::Tbf { rate_bps, .. } => Some(*rate_bps),
            Link::Emu { a_to_b, .. } => a_to_b.rate,
        }
    }
}

pub(crate) fn resolve_link(
    origin: &str,
    def: &LinkDef,
    rtt: Option<Duration>,
    loss: Option<f64>,
) -> Result<Link, ScenarioError> {
    match def.shaper {
        Shaper::Tbf => {
            let rate = def
                .rate
                .clone()
                .ok_or_else(|| invalid(origin, "tbf link needs rate"))?;
            let rate_bps = units::parse_rate(&rate)
                .map_err(|e| invalid(origin, format!("rate {rate:?}: {e}")))?;
            if rate_bps == 0 {
                return Err(invalid(origin, "tbf rate must be > 0"));
            }
            Ok(Link::Tbf {
                rate,
                burst: def.burst.clone().unwrap_or_else(|| "32kbit".into()),
                latency: def.latency.clone().unwrap_or_else(|| "50ms".into()),
                rate_bps,
            })
        }
        Shaper::Emu => {
            let prof = def
                .profile
                .as_deref()
                .map(Profile::load)
                .transpose()
                .map_err(|e| invalid(origin, e.to_string()))?;
            let mut both = def.emu.clone();
            if let Some(r) = rtt {
                both.delay = Some(r / 2);
            }
            if let Some(l) = loss {
                both.loss = Some(l);
            }
            let (a_to_b, b_to_a) = profile::resolve(
                prof.as_ref(),
                &both,
                &LinkSpec::default(),
                &LinkSpec::default(),
            )
            .map_err(|e| invalid(origin, e.to_string()))?;
            let rtt = a_to_b.delay + b_to_a.delay;
            Ok(Link::Emu {
                a_to_b: Box::new(a_to_b),
                b_to_a: Box::new(b_to_a),
                rtt,
                loss: loss.unwrap_or(0.0),
            })
        }
    }
}
