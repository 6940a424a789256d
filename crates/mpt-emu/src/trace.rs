//! Rate/delay traces for time-varying links (LTE capacity, satellite
//! handovers).
//!
//! A trace is a step function of time. Text format, one step per line:
//!
//! ```text
//! # time   rate     delay      (whitespace or commas; '#' starts a comment)
//! 0s       10mbit   40ms
//! 1.5      8000000  35         bare numbers: seconds, bit/s, milliseconds
//! 3s       0        -          rate 0 = no capacity (like an outage); '-' = keep configured
//! ```
//!
//! Times are offsets from the emulator's start and must increase. The last
//! step holds until the end of the run. Before the first step, and in a `-`
//! column, the configured rate/delay apply. The pacer charges a packet at
//! the rate in force when its transmission starts.
//!
//! A step of rate 0 in this format is an outage: a plain link drops what
//! arrives during it (a relay holds it). The other format, Mahimahi's
//! delivery opportunities ([`super::mahimahi`]), becomes a trace of 1 ms
//! steps that loops and whose zero-rate steps are gaps between
//! opportunities: packets wait in the queue for the next one, as in
//! `mm-link`. [`TraceFormat`] names the two; nothing guesses between them.

use std::path::Path;
use std::time::Duration;

use super::units::{parse_duration, parse_rate};

/// How a trace file is read: chosen by the user (`--trace-format`, the
/// `trace_format` key), never guessed from the name or the contents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// `TIME RATE [DELAY]` steps (this module).
    #[default]
    Mpt,
    /// One delivery opportunity per line, in ms; the file loops.
    Mahimahi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TracePoint {
    #[serde(with = "super::serde_duration")]
    pub at: Duration,
    /// bit/s; `Some(0)` = no capacity; `None` = the configured rate.
    pub rate: Option<u64>,
    /// `None` = the configured delay.
    #[serde(with = "super::serde_opt_duration")]
    pub delay: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace line {line}: {msg}")]
pub struct TraceError {
    pub line: usize,
    pub msg: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Trace {
    points: Vec<TracePoint>,
    /// The trace repeats with this period (Mahimahi); `None`: the last step
    /// holds for ever.
    #[serde(with = "super::serde_opt_duration")]
    period: Option<Duration>,
    /// Zero-rate steps are gaps that packets wait out in the queue
    /// (Mahimahi), not outages that drop them.
    gaps_queue: bool,
}

fn number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0)
}

impl Trace {
    pub fn from_points(points: Vec<TracePoint>) -> Result<Trace, TraceError> {
        for (i, pair) in points.windows(2).enumerate() {
            if pair[1].at <= pair[0].at {
                return Err(TraceError {
                    line: i + 2,
                    msg: "times must increase".into(),
                });
            }
        }
        Ok(Trace {
            points,
            ..Trace::default()
        })
    }

    /// A looping trace whose zero-rate steps queue packets (Mahimahi).
    /// `points` must start at 0 and lie before `period`.
    pub fn looping_gaps(points: Vec<TracePoint>, period: Duration) -> Result<Trace, TraceError> {
        let mut t = Trace::from_points(points)?;
        if t.points.first().map(|p| p.at) != Some(Duration::ZERO)
            || t.points.last().is_some_and(|p| p.at >= period)
        {
            return Err(TraceError {
                line: 0,
                msg: "a looping trace needs steps from 0 to before its period".into(),
            });
        }
        t.period = Some(period);
        t.gaps_queue = true;
        Ok(t)
    }

    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut points = Vec::new();
        for (idx, raw) in text.lines().enumerate() {
            let line = idx + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let err = |msg: String| TraceError { line, msg };
            let fields: Vec<&str> = content
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|f| !f.is_empty())
                .collect();
            if !(2..=3).contains(&fields.len()) {
                let hint = if fields.len() == 1 && fields[0].parse::<u64>().is_ok() {
                    " (a Mahimahi trace? give trace_format = \"mahimahi\" or --trace-format mahimahi)"
                } else {
                    ""
                };
                return Err(err(format!(
                    "expected `TIME RATE [DELAY]`, got {} fields{hint}",
                    fields.len()
                )));
            }
            let at = match number(fields[0]) {
                Some(secs) => Duration::try_from_secs_f64(secs).map_err(|e| err(e.to_string()))?,
                None => parse_duration(fields[0]).map_err(|e| err(e.to_string()))?,
            };
            let rate = match fields[1] {
                "-" => None,
                "0" => Some(0),
                f => Some(parse_rate(f).map_err(|e| err(e.to_string()))?),
            };
            let delay = match fields.get(2).copied() {
                None | Some("-") => None,
                Some(f) => Some(match number(f) {
                    Some(ms) => {
                        Duration::try_from_secs_f64(ms / 1e3).map_err(|e| err(e.to_string()))?
                    }
                    None => parse_duration(f).map_err(|e| err(e.to_string()))?,
                }),
            };
            if let Some(prev) = points.last().map(|p: &TracePoint| p.at) {
                if at <= prev {
                    return Err(err(format!(
                        "time {at:?} is not after the previous step ({prev:?})"
                    )));
                }
            }
            points.push(TracePoint { at, rate, delay });
        }
        if points.is_empty() {
            return Err(TraceError {
                line: 0,
                msg: "the trace has no steps".into(),
            });
        }
        Ok(Trace {
            points,
            ..Trace::default()
        })
    }

    /// Parses `text` in `format`.
    pub fn parse_as(text: &str, format: TraceFormat) -> Result<Trace, TraceError> {
        match format {
            TraceFormat::Mpt => Trace::parse(text),
            TraceFormat::Mahimahi => super::mahimahi::parse(text),
        }
    }

    pub fn load(path: &Path) -> Result<Trace, String> {
        Trace::load_as(path, TraceFormat::Mpt)
    }

    pub fn load_as(path: &Path, format: TraceFormat) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
        Trace::parse_as(&text, format).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn points(&self) -> &[TracePoint] {
        &self.points
    }

    /// The loop's period, if the trace repeats.
    pub fn period(&self) -> Option<Duration> {
        self.period
    }

    /// Whether zero-rate steps queue packets instead of dropping them.
    pub fn gaps_queue(&self) -> bool {
        self.gaps_queue
    }

    /// The same trace with every rate scaled by `f`.
    pub fn scaled(&self, f: f64) -> Trace {
        let mut t = self.clone();
        for p in &mut t.points {
            p.rate = p.rate.map(|r| (r as f64 * f) as u64);
        }
        t
    }

    /// `t` folded into the first period, and the start of its period.
    fn fold(&self, t: Duration) -> (Duration, Duration) {
        match self.period {
            Some(p) if !p.is_zero() => {
                let n = t.as_nanos() / p.as_nanos();
                let base =
                    Duration::from_nanos(u64::try_from(n * p.as_nanos()).unwrap_or(u64::MAX));
                (t.saturating_sub(base), base)
            }
            _ => (t, Duration::ZERO),
        }
    }

    /// The step in force at `t`, if any.
    fn step_at(&self, t: Duration) -> Option<(usize, &TracePoint)> {
        let (t, _) = self.fold(t);
        let n = self.points.partition_point(|p| p.at <= t);
        n.checked_sub(1).map(|i| (i, &self.points[i]))
    }

    /// Mean rate (bit/s) over `[from, to)` with `configured` where the
    /// trace gives none; `None` if that is unlimited somewhere in it.
    pub fn mean_rate(&self, configured: Option<u64>, from: Duration, to: Duration) -> Option<f64> {
        if to <= from {
            return self.rate_at(from).or(configured).map(|r| r as f64);
        }
        let mut bits = 0.0;
        let mut t = from;
        while t < to {
            let (local, base) = self.fold(t);
            let n = self.points.partition_point(|p| p.at <= local);
            let next_local = match self.points.get(n) {
                Some(p) => p.at,
                None => self.period.unwrap_or(Duration::MAX),
            };
            let end = base.saturating_add(next_local).min(to);
            let rate = self.rate_at(t).or(configured)?;
            bits += rate as f64 * (end - t).as_secs_f64();
            if end <= t {
                break;
            }
            t = end;
        }
        Some(bits / (to - from).as_secs_f64())
    }

    /// The traced rate at `t` (`None`: use the configured one).
    pub fn rate_at(&self, t: Duration) -> Option<u64> {
        self.step_at(t).and_then(|(_, p)| p.rate)
    }

    /// The traced delay at `t` (`None`: use the configured one).
    pub fn delay_at(&self, t: Duration) -> Option<Duration> {
        self.step_at(t).and_then(|(_, p)| p.delay)
    }

    /// If the trace gives zero capacity at `t`: when capacity returns
    /// (`Duration::MAX` if never).
    pub fn zero_rate_until(&self, t: Duration) -> Option<Duration> {
        let (i, p) = self.step_at(t)?;
        if p.rate != Some(0) {
            return None;
        }
        let (_, base) = self.fold(t);
        let nonzero = |q: &&TracePoint| q.rate != Some(0);
        if let Some(q) = self.points[i + 1..].iter().find(nonzero) {
            return Some(base.saturating_add(q.at));
        }
        // Looping: the first non-zero step of the next period.
        match (self.period, self.points.iter().find(nonzero)) {
            (Some(period), Some(q)) => Some(base.saturating_add(period).saturating_add(q.at)),
            _ => Some(Duration::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# lte-like
0s 10mbit 40ms
1.5, 8000000, 35
3s 0 -
4s - 50ms   # back to the configured rate
";

    #[test]
    fn steps() {
        let t = Trace::parse(TEXT).unwrap_or_default();
        assert_eq!(t.points().len(), 4);
        let ms = Duration::from_millis;
        assert_eq!(t.rate_at(ms(0)), Some(10_000_000));
        assert_eq!(t.rate_at(ms(1499)), Some(10_000_000));
        assert_eq!(t.rate_at(ms(1500)), Some(8_000_000));
        assert_eq!(t.delay_at(ms(1500)), Some(ms(35)));
        assert_eq!(t.rate_at(ms(3500)), Some(0));
        assert_eq!(t.delay_at(ms(3500)), None);
        assert_eq!(t.zero_rate_until(ms(3500)), Some(ms(4000)));
        assert_eq!(t.zero_rate_until(ms(2000)), None);
        assert_eq!(t.rate_at(ms(9000)), None);
        assert_eq!(t.delay_at(ms(9000)), Some(ms(50)));
    }

    #[test]
    fn before_first_step_uses_configuration() {
        let t = Trace::parse("2s 1mbit 10ms").unwrap_or_default();
        assert_eq!(t.rate_at(Duration::from_secs(1)), None);
        assert_eq!(t.rate_at(Duration::from_secs(2)), Some(1_000_000));
    }

    #[test]
    fn errors_name_the_line() {
        let e = Trace::parse("0s 1mbit\n0s 2mbit").err();
        assert_eq!(e.map(|e| e.line), Some(2));
        let e = Trace::parse("0s fast").err();
        assert_eq!(e.map(|e| e.line), Some(1));
        assert!(Trace::parse("# nothing").is_err());
        assert!(Trace::parse("1s").is_err());
    }
}
