//! Mahimahi's link traces read as capacity traces, so that the cellular
//! recordings published for `mm-link` (and for Pantheon and Cellsim) drive
//! our links without conversion.
//!
//! The format: each line is one integer, a millisecond from the start of
//! the trace; each line is one opportunity to deliver one MTU-sized packet,
//! and a millisecond with room for several packets is repeated on several
//! lines. Timestamps never decrease. When the trace ends it starts again:
//! its period is the last timestamp, so a file holding just `1` is one
//! packet per millisecond for ever.
//!
//! How it maps onto our model: the opportunities of each millisecond of the
//! period become one 1 ms step of a looping [`Trace`], at a rate of
//! [`BITS_PER_OPPORTUNITY`] per opportunity per millisecond; a millisecond
//! without any is a zero-rate step that packets wait out in the queue (the
//! link is not down, as in `mm-link`). An opportunity carries one full-size
//! packet: 1500 bytes of IP packet, which our rates count as its 1514-byte
//! Ethernet frame. So a `1` trace delivers 1000 full-size packets a second,
//! as `mm-link` does: 12 Mbit/s of IP packets, 12.112 Mbit/s in the
//! emulator's whole-frame accounting. Smaller packets share an opportunity
//! by bytes, as in `mm-link`. Unlike `mm-link`, a packet that starts in a
//! millisecond with capacity finishes at that millisecond's rate even if
//! the next has none; over a run the mean is the trace's.

use std::time::Duration;

use super::trace::{Trace, TraceError, TracePoint};

/// Frame bytes one opportunity carries: a 1500-byte IP packet in Ethernet.
pub const OPPORTUNITY_BYTES: u64 = 1514;
/// The rate of one opportunity per millisecond, bit/s.
pub const BITS_PER_OPPORTUNITY: u64 = OPPORTUNITY_BYTES * 8 * 1000;
/// Longest period accepted: a day of opportunities is far beyond any
/// published trace, and bounds the work a bad file can cause.
const MAX_PERIOD_MS: u64 = 86_400_000;

/// Parses Mahimahi trace text into a looping trace of 1 ms steps.
pub fn parse(text: &str) -> Result<Trace, TraceError> {
    // (millisecond, opportunities), in order.
    let mut slots: Vec<(u64, u64)> = Vec::new();
    let mut last_line = 0;
    for (idx, raw) in text.lines().enumerate() {
        let line = idx + 1;
        let field = raw.trim();
        if field.is_empty() {
            continue;
        }
        let err = |msg: String| TraceError { line, msg };
        let ms: u64 = field.parse().map_err(|_| {
            err(format!(
                "expected a whole number of milliseconds (one delivery opportunity), got {field:?}"
            ))
        })?;
        if ms > MAX_PERIOD_MS {
            return Err(err(format!(
                "{ms} ms is beyond the longest trace accepted ({MAX_PERIOD_MS} ms, a day)"
            )));
        }
        match slots.last_mut() {
            Some((prev, n)) if *prev == ms => *n += 1,
            Some((prev, _)) if *prev > ms => {
                return Err(err(format!(
                    "{ms} ms is before the previous line ({prev} ms); timestamps must not decrease"
                )))
            }
            _ => slots.push((ms, 1)),
        }
        last_line = line;
    }
    let Some(&(period_ms, _)) = slots.last() else {
        return Err(TraceError {
            line: 0,
            msg: "the trace has no delivery opportunities".into(),
        });
    };
    if period_ms == 0 {
        return Err(TraceError {
            line: last_line,
            msg: "the trace must last longer than 0 ms (its last timestamp is its period)".into(),
        });
    }
    // The opportunities at the period itself fall on the next loop's 0.
    if let Some(&(ms, n)) = slots.last().filter(|(ms, _)| *ms == period_ms) {
        slots.pop();
        match slots.first_mut() {
            Some((0, m)) => *m += n,
            _ => slots.insert(0, (ms - period_ms, n)),
        }
    }
    let rate = |n: u64| Some(n.saturating_mul(BITS_PER_OPPORTUNITY));
    let mut points: Vec<TracePoint> = Vec::new();
    let mut push = |at_ms: u64, r: Option<u64>| {
        if points.last().is_some_and(|p| p.rate == r) {
            return;
        }
        points.push(TracePoint {
            at: Duration::from_millis(at_ms),
            rate: r,
            delay: None,
        });
    };
    if slots.first().is_none_or(|&(ms, _)| ms > 0) {
        push(0, Some(0));
    }
    for (i, &(ms, n)) in slots.iter().enumerate() {
        push(ms, rate(n));
        let next = slots.get(i + 1).map_or(period_ms, |s| s.0);
        if next > ms + 1 {
            push(ms + 1, Some(0));
        }
    }
    Trace::looping_gaps(points, Duration::from_millis(period_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn one_line_is_one_packet_per_millisecond_for_ever() {
        let t = parse("1\n").unwrap_or_default();
        assert_eq!(t.period(), Some(ms(1)));
        assert!(t.gaps_queue());
        for at in [0, 1, 7, 123_456] {
            assert_eq!(t.rate_at(ms(at)), Some(BITS_PER_OPPORTUNITY));
        }
        let mean = t.mean_rate(None, ms(0), ms(10_000)).unwrap_or(0.0);
        assert!((mean - 12_112_000.0).abs() < 1.0, "{mean}");
    }

    #[test]
    fn repeated_milliseconds_add_up_and_gaps_are_zero_steps() {
        // 0..10 ms: two opportunities at 2, one at 3, three at 7; period 10.
        let t = parse("2\n2\n3\n7\n7\n7\n10\n").unwrap_or_default();
        let r = |at| t.rate_at(ms(at)).map(|r| r / BITS_PER_OPPORTUNITY);
        assert_eq!(
            (0..10).map(r).collect::<Vec<_>>(),
            [1, 0, 2, 1, 0, 0, 0, 3, 0, 0].map(Some).to_vec(),
            "the opportunity at 10 ms is the next loop's 0 ms"
        );
        // Looping: the same pattern 10 ms later, and gaps end at the next
        // opportunity, across the loop boundary too.
        assert_eq!(r(12), Some(2));
        assert_eq!(r(1_000_007), Some(3));
        assert_eq!(t.zero_rate_until(ms(4)), Some(ms(7)));
        assert_eq!(t.zero_rate_until(ms(8)), Some(ms(10)));
        assert_eq!(t.zero_rate_until(ms(2_008)), Some(ms(2_010)));
        assert_eq!(t.zero_rate_until(ms(3)), None);
    }

    #[test]
    fn mean_rate_of_a_known_trace() {
        // 6 opportunities every 4 ms = 1500 packets/s, over any whole
        // number of loops and (nearly) over a long odd window.
        let t = parse("1\n1\n2\n3\n4\n4\n").unwrap_or_default();
        let want = 1500.0 * OPPORTUNITY_BYTES as f64 * 8.0;
        let whole = t.mean_rate(None, ms(0), ms(4_000)).unwrap_or(0.0);
        assert!((whole / want - 1.0).abs() < 1e-9, "{whole} vs {want}");
        let odd = t.mean_rate(None, ms(3), ms(10_001)).unwrap_or(0.0);
        assert!((odd / want - 1.0).abs() < 1e-3, "{odd} vs {want}");
    }

    #[test]
    fn bad_lines_are_rejected_with_their_numbers() {
        let line = |text: &str| parse(text).err().map(|e| e.line);
        assert_eq!(line("1\n2\nfast\n"), Some(3));
        assert_eq!(line("1\n\n2.5\n"), Some(3));
        assert_eq!(line("5\n-1\n"), Some(2));
        assert_eq!(line("5\n6\n4\n"), Some(3), "timestamps must not decrease");
        assert_eq!(line("1 2\n"), Some(1));
        assert_eq!(line("0\n0\n"), Some(2), "a trace of length 0");
        assert_eq!(line("999999999999\n"), Some(1));
        assert!(parse("").is_err());
        assert!(parse("\n  \n").is_err());
        let msg = parse("3\nx\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn our_format_points_at_mahimahi_for_its_files() {
        let msg = Trace::parse("1\n2\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("mahimahi"), "{msg}");
    }

    #[test]
    fn the_shipped_example_loads_through_a_profile() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conf/links");
        let text = "[link]\ntrace = \"synthetic-cellular.mahimahi\"\ntrace_format = \"mahimahi\"\n";
        let profile = super::super::profile::Profile::parse(text, "test", Some(&dir));
        let cfg = profile.ok().and_then(|p| p.link.build().ok());
        let trace = cfg.and_then(|c| c.trace).unwrap_or_default();
        assert_eq!(trace.period(), Some(ms(10_000)));
        // 11 878 opportunities in 10 s (scripts/gen-mahimahi-trace.py).
        let mean = trace.mean_rate(None, ms(0), ms(10_000)).unwrap_or(0.0);
        assert!(
            (mean - 11_878.0 * OPPORTUNITY_BYTES as f64 * 8.0 / 10.0).abs() < 1.0,
            "{mean}"
        );
        // Its fade at 4.0-4.3 s queues, it is no outage.
        assert_eq!(trace.zero_rate_until(ms(4_100)), Some(ms(4_300)));
        // Read as our own format, it is refused with a pointer to the other.
        let ours = "[link]\ntrace = \"synthetic-cellular.mahimahi\"\n";
        let err = super::super::profile::Profile::parse(ours, "test", Some(&dir))
            .ok()
            .and_then(|p| p.link.build().err())
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("line 1") && err.contains("mahimahi"), "{err}");
        // An unknown format is a configuration error.
        let bad = "[link]\ntrace_format = \"pcap\"\n";
        assert!(super::super::profile::Profile::parse(bad, "test", None).is_err());
    }
}
