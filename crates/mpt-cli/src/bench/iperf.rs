//! iperf3 clients run in namespace A against the server in B, with JSON
//! output parsed into a [`Measurement`].

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;

use super::testbed::{check_stop, Proc};

/// Slack beyond the test duration before a client is declared hung.
const CLIENT_SLACK: Duration = Duration::from_secs(30);

/// What one iperf3 run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurement {
    /// Goodput at the receiver, Mbit/s (UDP: delivered datagrams x payload).
    pub mbps: f64,
    /// UDP: offered rate at the sender, Mbit/s.
    pub sent_mbps: Option<f64>,
    /// UDP: lost datagrams, percent.
    pub loss_pct: Option<f64>,
    /// TCP: sender retransmissions.
    pub retransmits: Option<u64>,
    pub seconds: f64,
}

/// A UDP (`udp_rate` = Some(bit/s), `len` = payload) or TCP test.
pub struct Run<'a> {
    pub ns: &'a str,
    pub target: &'a str,
    pub duration: Duration,
    pub udp: Option<(u64, u32)>,
    pub json_out: &'a Path,
}

pub fn run(r: &Run<'_>, stop: &AtomicBool) -> anyhow::Result<Measurement> {
    let secs = r.duration.as_secs().max(1).to_string();
    let mut args: Vec<String> = vec![
        "-c".into(),
        r.target.into(),
        "-t".into(),
        secs,
        "-J".into(),
        "--connect-timeout".into(),
        "5000".into(),
    ];
    if let Some((rate, len)) = r.udp {
        args.extend([
            "-u".into(),
            "-b".into(),
            rate.to_string(),
            "-l".into(),
            len.to_string(),
        ]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut p = Proc::spawn_in(
        r.ns,
        "iperf3 client",
        Path::new("iperf3"),
        &argv,
        r.json_out.to_path_buf(),
    )?;
    let deadline = Instant::now() + r.duration + CLIENT_SLACK;
    loop {
        check_stop(stop)?;
        if p.exited().is_some() {
            break;
        }
        if Instant::now() > deadline {
            bail!("iperf3 -c {} did not finish in time", r.target);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(p);
    let text = std::fs::read_to_string(r.json_out)
        .with_context(|| format!("reading {}", r.json_out.display()))?;
    parse(&text, r.udp.map(|(_, len)| len)).with_context(|| {
        format!(
            "iperf3 -c {} (output in {})",
            r.target,
            r.json_out.display()
        )
    })
}

fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

/// Parses iperf3 -J output; `udp_len` is the UDP payload size.
pub fn parse(text: &str, udp_len: Option<u32>) -> anyhow::Result<Measurement> {
    // iperf3 may print a line before the JSON on some errors.
    let start = text.find('{').context("no JSON in iperf3 output")?;
    let v: Value = serde_json::from_str(&text[start..]).context("parsing iperf3 JSON")?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        bail!("iperf3: {e}");
    }
    let end = v.get("end").context("iperf3 JSON without \"end\"")?;
    match udp_len {
        Some(len) => {
            let sum = end
                .get("sum_received")
                .or_else(|| end.get("sum"))
                .context("iperf3 UDP JSON without a sum")?;
            let seconds = f(sum, "seconds").unwrap_or(0.0);
            let packets = f(sum, "packets").unwrap_or(0.0);
            let lost = f(sum, "lost_packets").unwrap_or(0.0).max(0.0);
            let delivered = (packets - lost).max(0.0);
            let mbps = if seconds > 0.0 {
                delivered * f64::from(len) * 8.0 / seconds / 1e6
            } else {
                0.0
            };
            let sent = end.get("sum_sent").or_else(|| end.get("sum"));
            Ok(Measurement {
                mbps,
                sent_mbps: sent.and_then(|s| f(s, "bits_per_second")).map(|b| b / 1e6),
                loss_pct: f(sum, "lost_percent"),
                retransmits: None,
                seconds,
            })
        }
        None => {
            let recv = end
                .get("sum_received")
                .context("iperf3 TCP JSON without sum_received")?;
            Ok(Measurement {
                mbps: f(recv, "bits_per_second").unwrap_or(0.0) / 1e6,
                sent_mbps: None,
                loss_pct: None,
                retransmits: end
                    .get("sum_sent")
                    .and_then(|s| s.get("retransmits"))
                    .and_then(Value::as_u64),
                seconds: f(recv, "seconds").unwrap_or(0.0),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_udp_and_tcp() {
        let udp = r#"{"end":{"sum_sent":{"bits_per_second":2e8},
            "sum_received":{"seconds":2.0,"packets":1000,"lost_packets":100,"lost_percent":10}}}"#;
        let m = parse(udp, Some(1000)).ok();
        assert_eq!(m.as_ref().map(|m| m.mbps), Some(900.0 * 8000.0 / 2.0 / 1e6));
        assert_eq!(m.and_then(|m| m.sent_mbps), Some(200.0));
        let tcp = r#"{"end":{"sum_sent":{"retransmits":3},
            "sum_received":{"seconds":1.0,"bits_per_second":9.4e7}}}"#;
        let m = parse(tcp, None).ok();
        assert_eq!(m.as_ref().map(|m| m.mbps), Some(94.0));
        assert_eq!(m.and_then(|m| m.retransmits), Some(3));
        assert!(parse(r#"{"error":"unable to connect"}"#, None).is_err());
        assert!(parse("garbage", None).is_err());
    }
}
