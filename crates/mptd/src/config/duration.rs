//! Durations as the config writes them ("2s", "250ms", "1.5s", "100us",
//! "1m"), and [`Dur`], their serde form, so that a bad duration is
//! reported at its own position.

use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::Deserialize;

/// Parses "2s", "250ms", "1.5s", "100us", "1m".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("duration `{s}` needs a unit: us, ms, s or m (e.g. \"2s\")"))?;
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("duration `{s}`: `{num}` is not a number"))?;
    let secs = match unit {
        "us" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        _ => {
            return Err(format!(
                "duration `{s}`: unknown unit `{unit}` (use us, ms, s or m)"
            ))
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("duration `{s}` is out of range"))
}

/// A duration key's value, parsed by [`parse_duration`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Dur(pub(super) Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map(Dur).map_err(de::Error::custom)
    }
}
