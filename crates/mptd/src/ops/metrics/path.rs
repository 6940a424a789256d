//! The path families (`mpt_path_*`, labels `conn`, `path`): state, the
//! adaptive scheduler's estimates, weights and traffic counters.

use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use prometheus_client::encoding::DescriptorEncoder;

use crate::ops::metrics::families::{counters, gauges, Labels};
use crate::plane::{ConnShared, PathShared, PathView};

/// The states `mpt_path_state` has a sample for, per path.
const STATES: [&str; 5] = ["up", "down", "backup", "probing", "suspect"];

/// One path as the page shows it: its view taken once per scrape.
struct Row<'a> {
    conn: &'a str,
    path: &'a PathShared,
    view: PathView,
}

impl<'a> Row<'a> {
    fn labels(&self) -> Labels<'a> {
        Labels::conn(self.conn).with("path", &self.path.name)
    }
}

/// The path families of the connections `live`.
pub fn encode(encoder: &mut DescriptorEncoder, live: &[&ConnShared]) -> fmt::Result {
    let tables: Vec<_> = live.iter().map(|c| (c.name.as_str(), c.paths())).collect();
    let rows: Vec<Row> = tables
        .iter()
        .flat_map(|(conn, table)| table.iter().map(move |p| (*conn, p)))
        .filter(|(_, p)| !p.is_removed())
        .map(|(conn, p)| Row {
            conn,
            path: Arc::as_ref(p),
            view: p.view(),
        })
        .collect();
    state(encoder, &rows)?;
    estimates(encoder, &rows)?;
    traffic(encoder, &rows)
}

fn flag(on: bool) -> i64 {
    i64::from(on)
}

/// `mpt_path_up`, `mpt_path_state`.
fn state(encoder: &mut DescriptorEncoder, rows: &[Row]) -> fmt::Result {
    gauges(
        encoder,
        "mpt_path_up",
        "1 when the path carries (or may carry, as backup) traffic.",
        rows.iter().map(|r| {
            let up = r.view.state == "up" || r.view.state == "backup";
            (r.labels(), flag(up))
        }),
    )?;
    gauges(
        encoder,
        "mpt_path_state",
        "1 for the path's current state.",
        rows.iter().flat_map(|r| {
            STATES
                .iter()
                .map(move |&s| (r.labels().with("state", s), flag(r.view.state == s)))
        }),
    )
}

/// What the adaptive scheduler measures and uses, and the weight.
fn estimates(encoder: &mut DescriptorEncoder, rows: &[Row]) -> fmt::Result {
    let optional = |value: fn(&PathView) -> Option<f64>| {
        rows.iter()
            .filter_map(move |r| value(&r.view).map(|v| (r.labels(), v)))
    };
    gauges(
        encoder,
        "mpt_path_rtt_seconds",
        "Smoothed round-trip time from probe replies.",
        optional(|v| v.rtt_ms.map(|ms| ms / 1e3)),
    )?;
    gauges(
        encoder,
        "mpt_path_loss_ratio",
        "Estimated loss of the direction we send in (0..1).",
        optional(|v| v.loss_pct.map(|pct| pct / 100.0)),
    )?;
    gauges(
        encoder,
        "mpt_path_rate_bits_per_second",
        "Estimated capacity of the direction we send in (adaptive scheduler's model).",
        optional(|v| v.rate_bps.map(|bps| bps as f64)),
    )?;
    gauges(
        encoder,
        "mpt_path_rate_confirmed",
        "1 when the rate was measured with a standing queue, 0 when it is a lower bound.",
        rows.iter()
            .map(|r| (r.labels(), flag(r.view.rate_confirmed))),
    )?;
    gauges(
        encoder,
        "mpt_path_relative_owd_seconds",
        "One-way delay above the connection's fastest path.",
        optional(|v| v.owd_ms.map(|ms| ms / 1e3)),
    )?;
    gauges(
        encoder,
        "mpt_path_queue_delay_seconds",
        "Queueing delay the peer last measured on the path.",
        optional(|v| v.queue_ms.map(|ms| ms / 1e3)),
    )?;
    gauges(
        encoder,
        "mpt_path_lossy",
        "1 when the adaptive scheduler counts the path as lossy.",
        rows.iter().map(|r| (r.labels(), flag(r.view.lossy))),
    )?;
    gauges(
        encoder,
        "mpt_path_share_ratio",
        "Recent share of the connection's sent data bytes (0..1, smoothed).",
        rows.iter().map(|r| (r.labels(), r.view.share)),
    )?;
    gauges(
        encoder,
        "mpt_path_weight_out",
        "Configured outgoing share.",
        rows.iter()
            .map(|r| (r.labels(), i64::from(r.path.weight_out.load(Relaxed)))),
    )
}

/// State changes and the traffic counters.
fn traffic(encoder: &mut DescriptorEncoder, rows: &[Row]) -> fmt::Result {
    let counted =
        |counter: fn(&PathShared) -> u64| rows.iter().map(move |r| (r.labels(), counter(r.path)));
    counters(
        encoder,
        "mpt_path_state_changes_total",
        "Changes of the path's reported state.",
        counted(|p| p.state_changes.get()),
    )?;
    counters(
        encoder,
        "mpt_path_tx_packets_total",
        "Datagrams sent on the path.",
        counted(|p| p.tx_packets.get()),
    )?;
    counters(
        encoder,
        "mpt_path_rx_packets_total",
        "Datagrams received and accepted on the path.",
        counted(|p| p.rx_packets.get()),
    )?;
    counters(
        encoder,
        "mpt_path_tx_bytes_total",
        "UDP payload bytes sent on the path.",
        counted(|p| p.tx_bytes.get()),
    )?;
    counters(
        encoder,
        "mpt_path_rx_bytes_total",
        "UDP payload bytes received on the path.",
        counted(|p| p.rx_bytes.get()),
    )
}
