//! The `[dtn]` table of a scenario file (bundle size and window, the
//! terrestrial hop and its competing flows, the contact gap), resolved into
//! [`DtnParams`]. Pure: parsing and range checks only, unit-tested.

use std::time::Duration;

use serde::Deserialize;

use crate::bench::scenario::error::{invalid, ScenarioError};
use crate::bench::scenario::link::{resolve_link, Link, LinkDef};
use mpt_emu::units;

/// `[dtn.quick]`: what `--quick` changes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtnQuick {
    pub bundle_size: Option<String>,
    pub gap: Option<String>,
    pub gap_bundles: Option<u32>,
}

/// The `[dtn]` table of a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtnDef {
    /// Bundle payload size, e.g. "1MB".
    pub bundle_size: Option<String>,
    /// Bundles submitted and not yet delivered at most (DTNperf's window W).
    pub window: Option<u32>,
    /// Competing TCP flows on the terrestrial hop (iperf3 -P), 0 = none.
    pub competing_flows: Option<u32>,
    /// Congestion control of every TCP flow in S, A and B (the end-to-end
    /// flow, the competing flows, the agents' TCPCL sessions), set as the
    /// namespaces' default; without it they inherit the machine's, which
    /// makes runs on two machines measure different things.
    pub cc: Option<String>,
    /// Congestion control of the relay's GEO hop ("cubic", "bbr", ...);
    /// default: `cc`, else the kernel's.
    pub sat_cc: Option<String>,
    /// How long the GEO hop is down in the contact-gap phase; "0s" = no
    /// gap phase.
    pub gap: Option<String>,
    /// Bundles submitted before the gap, and as many again during it.
    pub gap_bundles: Option<u32>,
    /// The terrestrial hop source -> relay (emulated).
    pub terrestrial: LinkDef,
    #[serde(default)]
    pub quick: DtnQuick,
}

/// A resolved `[dtn]` table.
#[derive(Debug, Clone)]
pub struct DtnParams {
    pub bundle_size: usize,
    pub window: u32,
    pub competing_flows: u32,
    pub cc: Option<String>,
    pub sat_cc: Option<String>,
    pub gap: Duration,
    pub gap_bundles: u32,
    pub terrestrial: Link,
}

/// Bundles larger than this do not pass dtnd's HTTP body limit.
const MAX_BUNDLE: u64 = 2_000_000;

impl DtnDef {
    pub fn resolve(&self, origin: &str, quick: bool) -> Result<DtnParams, ScenarioError> {
        let pick = |q: &Option<String>, f: &Option<String>| {
            if quick && q.is_some() {
                q.clone()
            } else {
                f.clone()
            }
        };
        let size = match pick(&self.quick.bundle_size, &self.bundle_size) {
            Some(s) => units::parse_bytes(&s)
                .map_err(|e| invalid(origin, format!("dtn.bundle_size: {e}")))?,
            None => 1_000_000,
        };
        if !(1024..=MAX_BUNDLE).contains(&size) {
            return Err(invalid(
                origin,
                format!("dtn.bundle_size must be 1 kB..{MAX_BUNDLE} B"),
            ));
        }
        let window = self.window.unwrap_or(4);
        if !(1..=64).contains(&window) {
            return Err(invalid(origin, "dtn.window must be 1..64 bundles"));
        }
        let competing_flows = self.competing_flows.unwrap_or(5);
        if competing_flows > 32 {
            return Err(invalid(origin, "dtn.competing_flows must be 0..32"));
        }
        for (key, cc) in [("cc", &self.cc), ("sat_cc", &self.sat_cc)] {
            if let Some(cc) = cc {
                if cc.is_empty() || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(invalid(origin, format!("dtn.{key} {cc:?}: not a name")));
                }
            }
        }
        let gap = match pick(&self.quick.gap, &self.gap) {
            Some(s) => {
                units::parse_duration(&s).map_err(|e| invalid(origin, format!("dtn.gap: {e}")))?
            }
            None => Duration::from_secs(10),
        };
        if gap > Duration::from_secs(600) {
            return Err(invalid(origin, "dtn.gap must be at most 600 s"));
        }
        let gap_bundles = match (quick, self.quick.gap_bundles) {
            (true, Some(n)) => n,
            _ => self.gap_bundles.unwrap_or(5),
        };
        if !(1..=100).contains(&gap_bundles) {
            return Err(invalid(origin, "dtn.gap_bundles must be 1..100"));
        }
        let terrestrial = resolve_link(origin, &self.terrestrial, None, None)?;
        if !matches!(terrestrial, Link::Emu { .. }) {
            return Err(invalid(origin, "dtn.terrestrial must use shaper = \"emu\""));
        }
        Ok(DtnParams {
            bundle_size: size as usize,
            window,
            competing_flows,
            cc: self.cc.clone(),
            sat_cc: self.sat_cc.clone(),
            gap,
            gap_bundles,
            terrestrial,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(text: &str) -> DtnDef {
        toml::from_str(text).expect("valid [dtn] table")
    }

    const TERR: &str =
        "[terrestrial]\nshaper = \"emu\"\nemu = { rate = \"10mbit\", delay = \"12500us\" }\n";

    #[test]
    fn defaults_and_quick_overrides() {
        let d = def(&format!(
            "gap = \"10s\"\n[quick]\ngap = \"4s\"\nbundle_size = \"200kB\"\ngap_bundles = 2\n{TERR}"
        ));
        let full = d.resolve("t", false).unwrap();
        assert_eq!(full.bundle_size, 1_000_000);
        assert_eq!(full.window, 4);
        assert_eq!(full.competing_flows, 5);
        assert_eq!(full.gap, Duration::from_secs(10));
        assert_eq!(full.gap_bundles, 5);
        let q = d.resolve("t", true).unwrap();
        assert_eq!(q.bundle_size, 200_000);
        assert_eq!(q.gap, Duration::from_secs(4));
        assert_eq!(q.gap_bundles, 2);
    }

    #[test]
    fn the_preset_sweeps_rtt_and_loss_and_quick_keeps_the_ends() {
        use crate::bench::scenario::{load, Overrides};
        let full = load("dtn-relay", &Overrides::default()).unwrap();
        let sweep: Vec<(Option<f64>, Option<f64>)> =
            full.cases.iter().map(|c| (c.rtt_ms, c.loss)).collect();
        assert_eq!(sweep.len(), 8);
        for rtt in [200.0, 400.0, 600.0, 800.0] {
            for loss in [0.0, 0.01] {
                assert!(sweep.contains(&(Some(rtt), Some(loss))), "{rtt} {loss}");
            }
        }
        assert!(full.cases.iter().all(|c| c.links.len() == 1));
        let p = full.dtn.as_ref().unwrap();
        assert_eq!((p.bundle_size, p.competing_flows), (1_000_000, 5));
        assert_eq!(p.cc.as_deref(), Some("reno"));
        assert_eq!(p.sat_cc.as_deref(), Some("bbr"));
        let quick = Overrides {
            quick: true,
            ..Overrides::default()
        };
        // `dtn` is an alias of the preset.
        let q = load("dtn", &quick).unwrap();
        assert_eq!(q.name, "dtn-relay");
        let rtts: Vec<Option<f64>> = q.cases.iter().map(|c| c.rtt_ms).collect();
        assert_eq!(rtts, vec![Some(200.0), Some(800.0)]);
        assert_eq!(q.dtn.as_ref().unwrap().bundle_size, 250_000);
    }

    #[test]
    fn bad_values_are_errors() {
        for bad in [
            "bundle_size = \"10MB\"\n",
            "window = 0\n",
            "competing_flows = 99\n",
            "sat_cc = \"bbr; rm\"\n",
            "cc = \"\"\n",
            "gap = \"20m\"\n",
            "gap_bundles = 0\n",
        ] {
            let d = def(&format!("{bad}{TERR}"));
            assert!(d.resolve("t", false).is_err(), "{bad}");
        }
        let tbf = def("[terrestrial]\nshaper = \"tbf\"\nrate = \"10mbit\"\n");
        assert!(tbf.resolve("t", false).is_err());
    }
}
