//! The per-packet VoIP log of a case (work/voip-K.csv), for plots of
//! one's own: sequence number, send time since the first packet, one-way
//! delay (empty: lost).

use serde::Serialize;

use crate::bench::csv_rows::{self, f4, opt3, CsvError};

/// One packet of the log.
#[derive(Debug, Default, Serialize)]
struct LogRow {
    seq: usize,
    #[serde(serialize_with = "f4")]
    send_s: f64,
    #[serde(serialize_with = "opt3")]
    delay_ms: Option<f64>,
}

/// The log of `sent` (send times, CLOCK_MONOTONIC ns) against the
/// analysed `timeline` (delay per packet, in the same order).
pub fn voip_log(sent: &[u64], timeline: &[(f64, Option<f64>)]) -> Result<String, CsvError> {
    let t0 = sent.first().copied().unwrap_or(0);
    let rows: Vec<LogRow> = sent
        .iter()
        .zip(timeline.iter().map(|x| x.1))
        .enumerate()
        .map(|(seq, (t, delay_ms))| LogRow {
            seq,
            send_s: t.saturating_sub(t0) as f64 / 1e9,
            delay_ms,
        })
        .collect();
    csv_rows::to_string(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_have_the_old_columns_and_precision() {
        let sent = [1_000_000_000, 1_020_000_000, 1_040_000_000];
        let timeline = [(0.0, Some(30.1234)), (0.02, None), (0.04, Some(31.0))];
        assert_eq!(
            voip_log(&sent, &timeline).expect("csv"),
            "seq,send_s,delay_ms\n0,0.0000,30.123\n1,0.0200,\n2,0.0400,31.000\n"
        );
        assert_eq!(voip_log(&[], &[]).expect("csv"), "seq,send_s,delay_ms\n");
    }
}
