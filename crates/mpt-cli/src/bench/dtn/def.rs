//! The `[dtn]` table of a scenario file (bundle size and lifetime, the
//! satellite hop's contact plan, the wired hop), resolved into
//! [`DtnParams`].

use std::time::Duration;

use serde::Deserialize;

use crate::bench::scenario::error::{invalid, ScenarioError};
use crate::bench::scenario::link::{resolve_link, Link, LinkDef};
use mpt_emu::schedule::Periodic;
use mpt_emu::units;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtnQuick {
    pub contacts: Option<String>,
    pub lifetime: Option<String>,
    pub bundle_size: Option<String>,
}

/// The `[dtn]` table of a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DtnDef {
    /// Bundle size, e.g. "1MB".
    pub bundle_size: Option<String>,
    /// A bundle not acknowledged within this time is not delivered.
    pub lifetime: Option<String>,
    /// Satellite-hop contact plan UP/DOWN (e.g. "20s/10s"), or "always".
    pub contacts: Option<String>,
    /// The wired hop A - relay.
    pub wired: LinkDef,
    #[serde(default)]
    pub quick: DtnQuick,
}

#[derive(Debug, Clone)]
pub struct DtnParams {
    pub bundle_size: usize,
    pub lifetime: Duration,
    pub contacts: Option<Periodic>,
    pub wired: Link,
}

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
        if !(1..=1 << 30).contains(&size) {
            return Err(invalid(origin, "dtn.bundle_size must be 1 B..1 GB"));
        }
        let lifetime = match pick(&self.quick.lifetime, &self.lifetime) {
            Some(s) => units::parse_duration(&s)
                .map_err(|e| invalid(origin, format!("dtn.lifetime: {e}")))?,
            None => Duration::from_secs(60),
        };
        let contacts = match pick(&self.quick.contacts, &self.contacts).as_deref() {
            None | Some("always") => None,
            Some(s) => Some(
                Periodic::parse(s).map_err(|e| invalid(origin, format!("dtn.contacts: {e}")))?,
            ),
        };
        let wired = resolve_link(origin, &self.wired, None, None)?;
        if !matches!(wired, Link::Emu { .. }) {
            return Err(invalid(origin, "dtn.wired must use shaper = \"emu\""));
        }
        Ok(DtnParams {
            bundle_size: size as usize,
            lifetime,
            contacts,
            wired,
        })
    }
}
