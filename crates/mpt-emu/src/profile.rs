//! Link profiles: TOML files (and compiled-in presets) that describe both
//! directions of a link, plus the layering with command-line flags.
//!
//! ```toml
//! description = "what this link is"
//! seed = 1                 # optional; loss and jitter repeat from it
//!
//! [link]                   # both directions
//! rate = "10mbit"          # or "unlimited"
//! delay = "300ms"
//! jitter = "2ms"
//! jitter_dist = "normal"   # uniform | normal
//! reorder = false
//! loss = 0.01              # Bernoulli packet error rate (or "1%")
//! ge = "0.01,0.3,0,1"      # Gilbert-Elliott p,r[,h[,k]]
//! queue = "750kB"          # tail-drop limit of the transmit backlog
//! outage = ["10s+2s"]      # down windows START+LEN from the start
//! periodic = "20s/10s"     # up/down cycle
//! relay = "50MB"           # store-and-forward custody store, or "off"
//! trace = "lte.trace"      # rate/delay trace, relative to this file
//! trace_format = "mpt"     # mpt (TIME RATE [DELAY]) | mahimahi (opportunities)
//!
//! [a_to_b]                 # overrides for a -> b only (same keys)
//! [b_to_a]
//! ```
//!
//! Layers, later wins: profile `[link]`, profile `[a_to_b]`/`[b_to_a]`, the
//! flags that apply to both directions (`--rate` ...), the per-direction
//! flags (`--ab KEY=VALUE`, `--ba KEY=VALUE`). Unknown keys are errors, and
//! errors from a file carry its name, line and column.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::loss::{GeParams, LossConfig};
use super::model::{JitterDist, LinkConfig, DEFAULT_QUEUE_BYTES};
use super::schedule::{Periodic, Schedule, Window};
use super::trace::{Trace, TraceFormat};
use super::units;

/// Presets shipped in `conf/links/` and compiled in, so `--profile lte` works
/// from any directory.
pub const PRESETS: &[(&str, &str)] = &[
    ("geo-sat", include_str!("../../../conf/links/geo-sat.toml")),
    ("lte", include_str!("../../../conf/links/lte.toml")),
    ("wifi", include_str!("../../../conf/links/wifi.toml")),
    (
        "ethernet-100m",
        include_str!("../../../conf/links/ethernet-100m.toml"),
    ),
    ("dtn-hop", include_str!("../../../conf/links/dtn-hop.toml")),
];

/// Configuration errors; all of them are usage errors (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {error}")]
    Toml {
        file: String,
        error: toml::de::Error,
    },
    #[error("cannot read {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("unknown profile {name:?}: not a preset ({presets}) and no such file")]
    UnknownProfile { name: String, presets: String },
    #[error("invalid --{flag} {input:?}: expected KEY=VALUE, e.g. rate=10mbit")]
    BadOverride { flag: &'static str, input: String },
    #[error("invalid --{flag} {input:?}: {msg}")]
    Override {
        flag: &'static str,
        input: String,
        msg: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// Accepts a TOML string, integer, float, boolean or array of strings and
/// hands it on as one string, so files and `--ab KEY=VALUE` share parsers.
struct ScalarVisitor;

impl<'de> serde::de::Visitor<'de> for ScalarVisitor {
    type Value = String;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string, number or boolean")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<String>()? {
            items.push(item);
        }
        Ok(items.join(","))
    }
}

macro_rules! field_parser {
    ($name:ident, $ty:ty, $parse:expr) => {
        fn $name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
            let s = d.deserialize_any(ScalarVisitor)?;
            let parse: fn(&str) -> Result<$ty, String> = $parse;
            parse(&s).map(Some).map_err(serde::de::Error::custom)
        }
    };
}

fn opt_off<T>(
    s: &str,
    off: &[&str],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    if off.contains(&s.trim().to_ascii_lowercase().as_str()) {
        Ok(None)
    } else {
        parse(s).map(Some)
    }
}

field_parser!(de_rate, Option<u64>, |s| opt_off(
    s,
    &["unlimited", "none", "off"],
    |s| { units::parse_rate(s).map_err(|e| e.to_string()) }
));
field_parser!(de_duration, Duration, |s| units::parse_duration(s)
    .map_err(|e| e.to_string()));
field_parser!(de_prob, f64, |s| units::parse_probability(s)
    .map_err(|e| e.to_string()));
field_parser!(de_bytes, u64, |s| units::parse_bytes(s)
    .map_err(|e| e.to_string()));
field_parser!(de_relay, Option<u64>, |s| opt_off(
    s,
    &["off", "none", "false"],
    |s| { units::parse_bytes(s).map_err(|e| e.to_string()) }
));
field_parser!(de_ge, Option<GeParams>, |s| opt_off(
    s,
    &["off", "none"],
    GeParams::parse
));
field_parser!(de_windows, Vec<Window>, Window::parse_list);
field_parser!(de_periodic, Option<Periodic>, |s| opt_off(
    s,
    &["off", "none"],
    Periodic::parse
));
field_parser!(de_dist, JitterDist, |s| s.parse());
field_parser!(de_bool, bool, |s| s
    .trim()
    .parse::<bool>()
    .map_err(|_| format!("invalid boolean {s:?}: expected true or false")));
field_parser!(de_path, PathBuf, |s| Ok(PathBuf::from(s)));

/// One direction's settings before defaults; every field optional so that
/// layers can be merged.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    #[serde(default, deserialize_with = "de_rate")]
    pub rate: Option<Option<u64>>,
    #[serde(default, deserialize_with = "de_duration")]
    pub delay: Option<Duration>,
    #[serde(default, deserialize_with = "de_duration")]
    pub jitter: Option<Duration>,
    #[serde(default, deserialize_with = "de_dist")]
    pub jitter_dist: Option<JitterDist>,
    #[serde(default, deserialize_with = "de_bool")]
    pub reorder: Option<bool>,
    #[serde(default, deserialize_with = "de_prob")]
    pub loss: Option<f64>,
    #[serde(default, deserialize_with = "de_ge")]
    pub ge: Option<Option<GeParams>>,
    #[serde(default, deserialize_with = "de_bytes")]
    pub queue: Option<u64>,
    #[serde(default, deserialize_with = "de_windows")]
    pub outage: Option<Vec<Window>>,
    #[serde(default, deserialize_with = "de_periodic")]
    pub periodic: Option<Option<Periodic>>,
    #[serde(default, deserialize_with = "de_relay")]
    pub relay: Option<Option<u64>>,
    /// Resolved against `base_dir` when the config is built.
    #[serde(default, deserialize_with = "de_path")]
    pub trace: Option<PathBuf>,
    /// How `trace` is read (default: our own format).
    #[serde(default)]
    pub trace_format: Option<TraceFormat>,
    /// Directory that a relative `trace` is resolved against.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

impl LinkSpec {
    /// Overlays `other` on `self`: set fields of `other` win.
    pub fn overlay(&mut self, other: &LinkSpec) {
        macro_rules! take {
            ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f.clone(); } )* };
        }
        take!(
            rate,
            delay,
            jitter,
            jitter_dist,
            reorder,
            loss,
            ge,
            queue,
            outage,
            periodic,
            relay,
            trace_format
        );
        if other.trace.is_some() {
            self.trace = other.trace.clone();
            self.base_dir = other.base_dir.clone();
        }
    }

    /// Parses one `KEY=VALUE` override with the same rules as a file.
    pub fn parse_override(flag: &'static str, input: &str) -> Result<LinkSpec, ConfigError> {
        let bad = || ConfigError::BadOverride {
            flag,
            input: input.to_string(),
        };
        let (key, value) = input.split_once('=').ok_or_else(bad)?;
        let key = key.trim().replace('-', "_");
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad());
        }
        let doc = format!("{key} = {}", toml::Value::String(value.trim().to_string()));
        let mut spec: LinkSpec = toml::from_str(&doc).map_err(|e| ConfigError::Override {
            flag,
            input: input.to_string(),
            msg: e.message().trim().to_string(),
        })?;
        if spec.trace.is_some() {
            spec.base_dir = std::env::current_dir().ok();
        }
        Ok(spec)
    }

    /// Applies defaults, loads the trace and validates.
    pub fn build(&self) -> Result<LinkConfig, ConfigError> {
        let trace = match &self.trace {
            Some(path) => {
                let full = match &self.base_dir {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path.clone(),
                };
                let format = self.trace_format.unwrap_or_default();
                Some(Trace::load_as(&full, format).map_err(ConfigError::Invalid)?)
            }
            None => None,
        };
        let cfg = LinkConfig {
            rate: self.rate.flatten(),
            delay: self.delay.unwrap_or(Duration::ZERO),
            jitter: self.jitter.unwrap_or(Duration::ZERO),
            jitter_dist: self.jitter_dist.unwrap_or_default(),
            reorder: self.reorder.unwrap_or(false),
            loss: LossConfig {
                per: self.loss.unwrap_or(0.0),
                gilbert_elliott: self.ge.flatten(),
            },
            queue: self.queue.unwrap_or(DEFAULT_QUEUE_BYTES),
            schedule: Schedule::new(
                self.outage.clone().unwrap_or_default(),
                self.periodic.flatten(),
            ),
            relay: self.relay.flatten(),
            trace,
        };
        if cfg.queue < 1514 {
            return Err(ConfigError::Invalid(format!(
                "queue {} B cannot hold one full-size frame (1514 B)",
                cfg.queue
            )));
        }
        if matches!(cfg.relay, Some(r) if r < 1514) {
            return Err(ConfigError::Invalid(
                "relay store cannot hold one full-size frame (1514 B)".into(),
            ));
        }
        Ok(cfg)
    }
}

/// A profile file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub description: Option<String>,
    pub seed: Option<u64>,
    #[serde(default)]
    pub link: LinkSpec,
    #[serde(default)]
    pub a_to_b: LinkSpec,
    #[serde(default)]
    pub b_to_a: LinkSpec,
}

impl Profile {
    /// Parses profile text; `origin` names it in errors, `base_dir` anchors
    /// a relative trace path.
    pub fn parse(
        text: &str,
        origin: &str,
        base_dir: Option<&Path>,
    ) -> Result<Profile, ConfigError> {
        let mut p: Profile = toml::from_str(text).map_err(|error| ConfigError::Toml {
            file: origin.to_string(),
            error,
        })?;
        for spec in [&mut p.link, &mut p.a_to_b, &mut p.b_to_a] {
            spec.base_dir = base_dir.map(Path::to_path_buf);
        }
        Ok(p)
    }

    /// A preset name or a file path.
    pub fn load(name_or_path: &str) -> Result<Profile, ConfigError> {
        if let Some((name, text)) = PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::parse(text, &format!("preset {name}"), None);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Err(ConfigError::UnknownProfile {
                name: name_or_path.to_string(),
                presets: preset_names().join(", "),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Profile::parse(&text, &path.display().to_string(), path.parent())
    }
}

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// Both directions after layering; see the module docs for the order.
pub fn resolve(
    profile: Option<&Profile>,
    both: &LinkSpec,
    ab: &LinkSpec,
    ba: &LinkSpec,
) -> Result<(LinkConfig, LinkConfig), ConfigError> {
    let build = |dir_profile: Option<&LinkSpec>, dir_cli: &LinkSpec| {
        let mut spec = LinkSpec::default();
        if let Some(p) = profile {
            spec.overlay(&p.link);
        }
        if let Some(d) = dir_profile {
            spec.overlay(d);
        }
        spec.overlay(both);
        spec.overlay(dir_cli);
        spec.build()
    };
    Ok((
        build(profile.map(|p| &p.a_to_b), ab)?,
        build(profile.map(|p| &p.b_to_a), ba)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_builds() {
        for (name, text) in PRESETS {
            let p = Profile::parse(text, name, None);
            assert!(p.is_ok(), "{name}: {:?}", p.err());
            let p = p.ok();
            assert!(
                p.as_ref().and_then(|p| p.description.as_ref()).is_some(),
                "{name}"
            );
            let r = resolve(
                p.as_ref(),
                &LinkSpec::default(),
                &LinkSpec::default(),
                &LinkSpec::default(),
            );
            assert!(r.is_ok(), "{name}: {:?}", r.err());
        }
    }

    #[test]
    fn layers_apply_in_order() {
        let text = r#"
            [link]
            rate = "10mbit"
            delay = "300ms"
            loss = 0.01
            [a_to_b]
            rate = "2mbit"
        "#;
        let p = Profile::parse(text, "t", None).ok();
        let both = LinkSpec::parse_override("x", "delay=100ms").unwrap_or_default();
        let ba = LinkSpec::parse_override("ba", "rate=unlimited").unwrap_or_default();
        let (ab, ba) =
            resolve(p.as_ref(), &both, &LinkSpec::default(), &ba).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ab.rate, Some(2_000_000));
        assert_eq!(ba.rate, None);
        assert_eq!(ab.delay, Duration::from_millis(100));
        assert_eq!(ba.delay, Duration::from_millis(100));
        assert_eq!(ab.loss.per, 0.01);
    }

    #[test]
    fn errors_carry_position_and_key() {
        let e = Profile::parse("[link]\nrate = \"fast\"\n", "f.toml", None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("f.toml") && e.contains("line 2") && e.contains("rate"),
            "{e}"
        );
        let e = Profile::parse("[link]\nspeed = 1\n", "f.toml", None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("speed") && e.contains("line 2"), "{e}");
        assert!(LinkSpec::parse_override("ab", "rate").is_err());
        assert!(LinkSpec::parse_override("ab", "colour=red").is_err());
        assert!(LinkSpec::parse_override("ab", "loss=2").is_err());
    }

    #[test]
    fn outage_list_and_string_are_equivalent() {
        let a = Profile::parse("[link]\noutage = [\"1s+2s\", \"5s+1s\"]\n", "t", None)
            .ok()
            .and_then(|p| p.link.outage)
            .unwrap_or_default();
        let b = Profile::parse("[link]\noutage = \"1s+2s,5s+1s\"\n", "t", None)
            .ok()
            .and_then(|p| p.link.outage)
            .unwrap_or_default();
        assert_eq!(a.len(), 2);
        assert_eq!(a, b);
    }

    #[test]
    fn small_queue_is_rejected() {
        let spec = LinkSpec::parse_override("ab", "queue=100").unwrap_or_default();
        assert!(spec.build().is_err());
    }
}
