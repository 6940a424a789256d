//! The soak's invariants as pure functions over what was recorded:
//! resource trends of the concentrator, `unknown_session` streaks,
//! recovery statistics, and the verdict that lists every broken
//! invariant. Kept apart from the runner so each rule is unit-tested on
//! made-up series without root.

use serde::Serialize;

/// One sample of the concentrator, taken about once a second.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the run's start.
    pub t: f64,
    /// Which server process (0, then one more per restart).
    pub incarnation: usize,
    pub rss_kib: Option<u64>,
    pub fds: Option<u64>,
    /// The shared port's `unknown_session` counter (per process).
    pub unknown_session: Option<u64>,
    /// Client connections up (session and every path).
    pub up: Option<usize>,
}

/// How a value moved over one server process's life, after its warm-up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trend {
    pub incarnation: usize,
    pub samples: usize,
    pub span_s: f64,
    pub min: f64,
    pub max: f64,
    /// Least-squares slope, per minute.
    pub slope_per_min: f64,
    /// Median of the last third minus median of the first third: growth
    /// that spikes (a flood's buffers) do not fake.
    pub growth: f64,
}

/// Least-squares slope of `pts` (x in seconds), per minute.
pub fn slope_per_min(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return 0.0;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        0.0
    } else {
        60.0 * sxy / sxx
    }
}

/// The median (upper middle), `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Trends of `value` per server process, leaving out each process's first
/// `warmup_s` seconds; processes with fewer than 3 samples are left out.
pub fn trends(
    samples: &[Sample],
    warmup_s: f64,
    value: impl Fn(&Sample) -> Option<f64>,
) -> Vec<Trend> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < samples.len() {
        let inc = samples[i].incarnation;
        let j = samples[i..]
            .iter()
            .position(|s| s.incarnation != inc)
            .map_or(samples.len(), |p| i + p);
        let t0 = samples[i].t;
        let pts: Vec<(f64, f64)> = samples[i..j]
            .iter()
            .filter(|s| s.t - t0 >= warmup_s)
            .filter_map(|s| Some((s.t, value(s)?)))
            .collect();
        if pts.len() >= 3 {
            let third = pts.len() / 3;
            let ys = |r: &[(f64, f64)]| r.iter().map(|p| p.1).collect::<Vec<_>>();
            let first = median(&ys(&pts[..third.max(1)])).unwrap_or(0.0);
            let last = median(&ys(&pts[pts.len() - third.max(1)..])).unwrap_or(0.0);
            out.push(Trend {
                incarnation: inc,
                samples: pts.len(),
                span_s: pts[pts.len() - 1].0 - pts[0].0,
                min: pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min),
                max: pts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max),
                slope_per_min: slope_per_min(&pts),
                growth: last - first,
            });
        }
        i = j;
    }
    out
}

/// A run of consecutive samples in which `unknown_session` grew.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Streak {
    pub start_s: f64,
    pub len_s: f64,
    /// Datagrams counted over it.
    pub count: u64,
}

/// The longest streak of `unknown_session` growth. A counter that goes
/// back (a new server process) starts from its new value.
pub fn longest_streak(samples: &[Sample]) -> Option<Streak> {
    let mut best: Option<Streak> = None;
    let mut cur: Option<Streak> = None;
    let mut prev: Option<(f64, usize, u64)> = None;
    for s in samples {
        let Some(v) = s.unknown_session else {
            continue;
        };
        let grew = match prev {
            Some((_, inc, p)) if inc == s.incarnation && v >= p => v - p,
            Some(_) => v,
            None => 0,
        };
        if grew > 0 {
            let (pt, _, _) = prev.expect("grew needs a previous sample");
            let c = cur.get_or_insert(Streak {
                start_s: pt,
                len_s: 0.0,
                count: 0,
            });
            c.len_s = s.t - c.start_s;
            c.count += grew;
            if best.is_none_or(|b| c.len_s > b.len_s) {
                best = Some(*c);
            }
        } else {
            cur = None;
        }
        prev = Some((s.t, s.incarnation, v));
    }
    best
}

/// What the verdict is checked against.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Limits {
    /// Every client back within this many seconds of a fault's end.
    pub recover_within_s: f64,
    /// Most RSS growth per server process (last third against first).
    pub rss_growth_mib: f64,
    /// RSS is judged only over a server process watched this long after
    /// its warm-up: in its first minute a concentrator's heap grows with
    /// its clients' traffic and rekeys whether or not anything leaks.
    pub rss_min_span_s: f64,
    /// Most fd growth per server process (last third against first).
    pub fd_growth: f64,
    /// Longest `unknown_session` streak.
    pub streak_s: f64,
}

/// Everything the verdict looks at.
#[derive(Debug, Clone, Default)]
pub struct Observed<'a> {
    /// Per fault: its name and the recovery time (`None`: not back).
    pub recoveries: Vec<(String, Option<f64>)>,
    /// Daemons that exited without being told to.
    pub exits: Vec<String>,
    pub rss_mib: &'a [Trend],
    pub fds: &'a [Trend],
    pub streak: Option<Streak>,
    /// Transfers whose checksum at the far end differed.
    pub mismatches: u64,
    /// Transfers verified byte for byte.
    pub verified: u64,
}

/// Every broken invariant, in words; empty means PASS.
pub fn failures(o: &Observed, l: &Limits) -> Vec<String> {
    let mut f = Vec::new();
    for e in &o.exits {
        f.push(format!("daemon exited: {e}"));
    }
    for (name, r) in &o.recoveries {
        match r {
            None => f.push(format!("{name}: not every client back")),
            Some(s) if *s > l.recover_within_s => f.push(format!(
                "{name}: back after {s:.1} s (limit {} s)",
                l.recover_within_s
            )),
            Some(_) => {}
        }
    }
    for t in o.rss_mib {
        if t.span_s >= l.rss_min_span_s && t.growth > l.rss_growth_mib {
            f.push(format!(
                "server process {}: RSS grew {:.1} MiB (limit {})",
                t.incarnation, t.growth, l.rss_growth_mib
            ));
        }
    }
    for t in o.fds {
        if t.growth > l.fd_growth {
            f.push(format!(
                "server process {}: {} more fds (limit {})",
                t.incarnation, t.growth, l.fd_growth
            ));
        }
    }
    if let Some(s) = o.streak {
        if s.len_s > l.streak_s {
            f.push(format!(
                "unknown_session grew for {:.1} s from {:.1} s ({} datagrams; limit {} s)",
                s.len_s, s.start_s, s.count, l.streak_s
            ));
        }
    }
    if o.mismatches > 0 {
        f.push(format!("{} transfers arrived altered", o.mismatches));
    }
    if o.verified == 0 {
        f.push("no transfer was verified: no traffic flowed".into());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, inc: usize, rss: u64, fds: u64, us: u64) -> Sample {
        Sample {
            t,
            incarnation: inc,
            rss_kib: Some(rss),
            fds: Some(fds),
            unknown_session: Some(us),
            up: Some(1),
        }
    }

    const LIMITS: Limits = Limits {
        recover_within_s: 10.0,
        rss_growth_mib: 4.0,
        rss_min_span_s: 10.0,
        fd_growth: 2.0,
        streak_s: 5.0,
    };

    #[test]
    fn slope_and_median() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 2.0 * i as f64 + 1.0)).collect();
        assert!((slope_per_min(&pts) - 120.0).abs() < 1e-9);
        assert_eq!(slope_per_min(&[(1.0, 5.0)]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn trends_are_per_server_process_after_warmup() {
        let mut v: Vec<Sample> = (0..20).map(|i| s(i as f64, 0, 1000, 20, 0)).collect();
        // The warm-up's large values are left out.
        v[0].rss_kib = Some(99_999);
        // The second process leaks 1 MiB a second.
        v.extend((20..40).map(|i| s(i as f64, 1, 1024 * (i - 20), 30, 0)));
        let t = trends(&v, 2.0, |s| s.rss_kib.map(|k| k as f64 / 1024.0));
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].max, 1000.0 / 1024.0);
        assert_eq!(t[0].growth, 0.0);
        assert!((t[1].slope_per_min - 60.0).abs() < 1e-6);
        assert!(t[1].growth > 10.0);
        let o = Observed {
            rss_mib: &t,
            verified: 1,
            ..Observed::default()
        };
        let f = failures(&o, &LIMITS);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("server process 1"));
        // Watched too briefly to tell a leak from a warm-up: not judged.
        let short = Limits {
            rss_min_span_s: 60.0,
            ..LIMITS
        };
        assert!(failures(&o, &short).is_empty());
    }

    #[test]
    fn a_spike_is_no_growth() {
        let mut v: Vec<Sample> = (0..30).map(|i| s(i as f64, 0, 10_000, 20, 0)).collect();
        v[15].rss_kib = Some(100_000);
        v[16].fds = Some(60);
        let t = trends(&v, 0.0, |s| s.rss_kib.map(|k| k as f64 / 1024.0));
        assert_eq!(t[0].growth, 0.0);
        let fd = trends(&v, 0.0, |s| s.fds.map(|k| k as f64));
        assert_eq!(fd[0].max - fd[0].min, 40.0);
        let o = Observed {
            rss_mib: &t,
            fds: &fd,
            verified: 3,
            ..Observed::default()
        };
        assert!(failures(&o, &LIMITS).is_empty());
    }

    #[test]
    fn streaks_of_unknown_session() {
        let counts = [0, 0, 3, 5, 9, 9, 10, 10];
        let mut v: Vec<Sample> = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| s(i as f64, 0, 1, 1, c))
            .collect();
        let st = longest_streak(&v).expect("a streak");
        assert_eq!((st.start_s, st.len_s, st.count), (1.0, 3.0, 9));
        // A restart: the counter starts again; growth from its new value.
        v.push(s(8.0, 1, 1, 1, 0));
        v.push(s(9.0, 1, 1, 1, 0));
        assert_eq!(longest_streak(&v).unwrap().len_s, 3.0);
        // A missing sample (server restarting) neither breaks nor counts.
        let mut gap = v.clone();
        gap[5].unknown_session = None;
        assert!(longest_streak(&gap).unwrap().len_s >= 3.0);
        assert_eq!(longest_streak(&[s(0.0, 0, 1, 1, 7)]), None);
        let o = Observed {
            streak: Some(Streak {
                start_s: 1.0,
                len_s: 6.0,
                count: 100,
            }),
            verified: 1,
            ..Observed::default()
        };
        assert!(failures(&o, &LIMITS)[0].contains("unknown_session"));
    }

    #[test]
    fn every_broken_invariant_is_named() {
        let o = Observed {
            recoveries: vec![
                ("1 path_silent".into(), Some(2.0)),
                ("2 client_restart".into(), Some(11.0)),
                ("3 server_restart".into(), None),
            ],
            exits: vec!["client 3 (exit status 1)".into()],
            mismatches: 1,
            verified: 0,
            ..Observed::default()
        };
        let f = failures(&o, &LIMITS);
        assert_eq!(f.len(), 5, "{f:?}");
        assert!(f[0].contains("client 3"));
        assert!(f[1].contains("2 client_restart") && f[1].contains("11.0"));
        assert!(f[2].contains("3 server_restart"));
        assert!(f[3].contains("altered"));
        assert!(f[4].contains("no transfer"));
        let ok = Observed {
            recoveries: vec![("1 path_silent".into(), Some(9.9))],
            verified: 10,
            ..Observed::default()
        };
        assert!(failures(&ok, &LIMITS).is_empty());
    }
}
