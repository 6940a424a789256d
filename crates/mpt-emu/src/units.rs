//! Parsing of the human units used in flags, profiles and trace files.
//!
//! std has no parser for "10mbit" or "300ms", so these few functions exist.
//! Every unit is spelled out in the error, so a user who wrote `10M` learns
//! what would have been accepted. Rates and sizes use SI prefixes (k = 1000),
//! like tc and iperf3 do for rates; `KiB`/`MiB`/`GiB` are the binary sizes.

use std::time::Duration;

/// A value that did not parse; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {input:?}: {expected}")]
pub struct UnitError {
    what: &'static str,
    input: String,
    expected: &'static str,
}

const RATE_EXPECTED: &str =
    "expected a number with bit, kbit, mbit or gbit (or bps, kbps, mbps, gbps), e.g. 10mbit";
const BYTES_EXPECTED: &str =
    "expected a number of bytes with B, kB, MB, GB, KiB, MiB or GiB, e.g. 100kB";
const DURATION_EXPECTED: &str = "expected a number with ns, us, ms, s, m or h, e.g. 300ms";

/// Splits "12.5mbit" into (12.5, "mbit"); `_` separators are allowed.
fn split_number(input: &str) -> Option<(f64, &str)> {
    let s = input.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let value: f64 = num.parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    Some((value, unit.trim()))
}

/// Parses a rate into bit/s. A bare number is bit/s.
pub fn parse_rate(input: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        what: "rate",
        input: input.to_string(),
        expected: RATE_EXPECTED,
    };
    let (value, unit) = split_number(input).ok_or_else(err)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" | "b/s" => 1.0,
        "kbit" | "kbps" | "kb/s" => 1e3,
        "mbit" | "mbps" | "mb/s" => 1e6,
        "gbit" | "gbps" | "gb/s" => 1e9,
        _ => return Err(err()),
    };
    let bits = (value * mult).round();
    if !(1.0..=1e12).contains(&bits) {
        return Err(err());
    }
    Ok(bits as u64)
}

/// Parses a size into bytes. A bare number is bytes.
pub fn parse_bytes(input: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        what: "size",
        input: input.to_string(),
        expected: BYTES_EXPECTED,
    };
    let (value, unit) = split_number(input).ok_or_else(err)?;
    let mult = match unit {
        "" | "B" | "b" => 1.0,
        "k" | "kB" | "KB" | "kb" => 1e3,
        "M" | "MB" | "mB" | "mb" => 1e6,
        "G" | "GB" | "gB" | "gb" => 1e9,
        "KiB" | "kiB" | "Ki" => 1024.0,
        "MiB" | "Mi" => 1024.0 * 1024.0,
        "GiB" | "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err()),
    };
    let bytes = (value * mult).round();
    if bytes > 1e15 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// Parses a duration. A unit is required: a bare "300" is ambiguous.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let err = || UnitError {
        what: "duration",
        input: input.to_string(),
        expected: DURATION_EXPECTED,
    };
    let (value, unit) = split_number(input).ok_or_else(err)?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "ns" => value * 1e-9,
        "us" | "µs" => value * 1e-6,
        "ms" => value * 1e-3,
        "s" | "sec" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        // "0" needs no unit: it is zero in every unit.
        "" if value == 0.0 => 0.0,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| err())
}

/// Parses a probability in [0, 1]; "1%" style is accepted too.
pub fn parse_probability(input: &str) -> Result<f64, UnitError> {
    let err = || UnitError {
        what: "probability",
        input: input.to_string(),
        expected: "expected a number in [0, 1] or a percentage, e.g. 0.01 or 1%",
    };
    let s = input.trim();
    let value = match s.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map_err(|_| err())? / 100.0,
        None => s.parse::<f64>().map_err(|_| err())?,
    };
    if !(0.0..=1.0).contains(&value) {
        return Err(err());
    }
    Ok(value)
}

/// Formats bit/s for tables: "10.000 Mbit/s".
pub fn format_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3} Mbit/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.3} kbit/s", bps / 1e3)
    } else {
        format!("{bps:.0} bit/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("64kbps"), Ok(64_000));
        assert_eq!(parse_rate("9600"), Ok(9600));
        assert!(parse_rate("10M").is_err());
        assert!(parse_rate("-1mbit").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("100kB"), Ok(100_000));
        assert_eq!(parse_bytes("1MiB"), Ok(1_048_576));
        assert_eq!(parse_bytes("1500"), Ok(1500));
        assert!(parse_bytes("1xB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("300").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("0.25"), Ok(0.25));
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert!(parse_probability("1.5").is_err());
        assert!(parse_probability("x").is_err());
    }
}
