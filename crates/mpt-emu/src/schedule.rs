//! Outage schedules ("contact plans"): when the link is down.
//!
//! Times are offsets from the emulator's epoch (its start). A schedule is a
//! list of explicit down windows, a periodic up/down cycle, or both (down if
//! either says down). The model asks two things: is the link up at `t`, and
//! if not, when does it come back ([`Schedule::down_until`]); nothing here
//! reads a clock.

use std::time::Duration;

use super::units::parse_duration;

/// The link is down in `[start, start + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Window {
    #[serde(with = "super::serde_duration")]
    pub start: Duration,
    #[serde(with = "super::serde_duration")]
    pub len: Duration,
}

impl Window {
    pub fn end(&self) -> Duration {
        self.start + self.len
    }

    /// Parses a comma-separated list of `START+LEN`, e.g. "5s+2s,20s+500ms".
    pub fn parse_list(input: &str) -> Result<Vec<Window>, String> {
        let mut out = Vec::new();
        for item in input.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (start, len) = item.split_once('+').ok_or_else(|| {
                format!("invalid outage {item:?}: expected START+LEN, e.g. 5s+2s")
            })?;
            let start = parse_duration(start).map_err(|e| e.to_string())?;
            let len = parse_duration(len).map_err(|e| e.to_string())?;
            out.push(Window { start, len });
        }
        Ok(out)
    }
}

/// Up for `up`, then down for `down`, repeated from the epoch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Periodic {
    #[serde(with = "super::serde_duration")]
    pub up: Duration,
    #[serde(with = "super::serde_duration")]
    pub down: Duration,
}

impl Periodic {
    /// Parses `UP/DOWN`, e.g. "10s/2s". `UP` must be positive.
    pub fn parse(input: &str) -> Result<Periodic, String> {
        let (up, down) = input
            .split_once('/')
            .ok_or_else(|| format!("invalid periodic {input:?}: expected UP/DOWN, e.g. 10s/2s"))?;
        let up = parse_duration(up).map_err(|e| e.to_string())?;
        let down = parse_duration(down).map_err(|e| e.to_string())?;
        if up.is_zero() {
            return Err(format!(
                "invalid periodic {input:?}: the up time must be positive"
            ));
        }
        Ok(Periodic { up, down })
    }
}

/// All down time of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Schedule {
    windows: Vec<Window>,
    periodic: Option<Periodic>,
}

impl Schedule {
    pub fn new(mut windows: Vec<Window>, periodic: Option<Periodic>) -> Self {
        windows.retain(|w| !w.len.is_zero());
        windows.sort_by_key(|w| w.start);
        let periodic = periodic.filter(|p| !p.down.is_zero());
        Schedule { windows, periodic }
    }

    pub fn is_always_up(&self) -> bool {
        self.windows.is_empty() && self.periodic.is_none()
    }

    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    pub fn periodic(&self) -> Option<Periodic> {
        self.periodic
    }

    /// If the link is down at `t`, the end of the down stretch that contains
    /// `t` according to one source (a window or the cycle); `None` if up.
    /// Callers loop until `None` because sources may overlap.
    pub fn down_until(&self, t: Duration) -> Option<Duration> {
        // Windows are sorted by start; the ones that can contain t start <= t.
        let n = self.windows.partition_point(|w| w.start <= t);
        let window_end = self.windows[..n]
            .iter()
            .filter(|w| t < w.end())
            .map(Window::end)
            .max();
        let periodic_end = self.periodic.and_then(|p| {
            let cycle = p.up + p.down;
            let cycle_ns = cycle.as_nanos();
            let phase = t.as_nanos() % cycle_ns;
            if phase >= p.up.as_nanos() {
                let cycle_start = t.as_nanos() - phase;
                Some(Duration::from_nanos(
                    u64::try_from(cycle_start + cycle_ns).unwrap_or(u64::MAX),
                ))
            } else {
                None
            }
        });
        window_end.max(periodic_end)
    }

    pub fn is_up(&self, t: Duration) -> bool {
        self.down_until(t).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn windows_edges_are_half_open() {
        let s = Schedule::new(
            Window::parse_list("100ms+50ms, 10ms+5ms").unwrap_or_default(),
            None,
        );
        assert_eq!(s.windows().len(), 2);
        assert!(s.is_up(ms(9)));
        assert_eq!(s.down_until(ms(10)), Some(ms(15)));
        assert!(s.is_up(ms(15)));
        assert!(s.is_up(ms(99)));
        assert_eq!(s.down_until(ms(100)), Some(ms(150)));
        assert_eq!(s.down_until(ms(149)), Some(ms(150)));
        assert!(s.is_up(ms(150)));
    }

    #[test]
    fn overlapping_windows_report_the_longest() {
        let s = Schedule::new(
            vec![
                Window {
                    start: ms(0),
                    len: ms(100),
                },
                Window {
                    start: ms(10),
                    len: ms(20),
                },
            ],
            None,
        );
        assert_eq!(s.down_until(ms(20)), Some(ms(100)));
    }

    #[test]
    fn periodic_cycle() {
        let p = Periodic::parse("300ms/100ms").ok();
        let s = Schedule::new(vec![], p);
        for cycle in 0..5u64 {
            let base = cycle * 400;
            assert!(s.is_up(ms(base)));
            assert!(s.is_up(ms(base + 299)));
            assert_eq!(s.down_until(ms(base + 300)), Some(ms(base + 400)));
            assert_eq!(s.down_until(ms(base + 399)), Some(ms(base + 400)));
        }
        // Fraction of time down over many cycles is down / (up + down).
        let down = (0..40_000).filter(|&i| !s.is_up(ms(i))).count();
        assert_eq!(down, 10_000);
    }

    #[test]
    fn parse_errors() {
        assert!(Window::parse_list("5s").is_err());
        assert!(Window::parse_list("5s+x").is_err());
        assert!(Periodic::parse("0s/1s").is_err());
        assert!(Periodic::parse("1s").is_err());
    }
}
