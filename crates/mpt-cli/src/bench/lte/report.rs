//! `lte-gateway` results as a table and results.csv (the charts are
//! [`super::charts`]).

use serde::Serialize;

use crate::bench::csv_rows::{self, f1, f3, f4, opt3, CsvError};
use crate::bench::report::row::Row;
use crate::bench::text::opt;

pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<44} {:>6} {:>6} {:>6} {:>8} {:>7} {:>7} {:>6} {:>8} {:>6}\n",
        "variant", "p50", "p99", "max", "lost", "silent", "mptd", "back", "bulk", "stall"
    );
    let mut checks = String::new();
    for row in rows {
        let Some(l) = &row.lte else { continue };
        s += &format!(
            "{:<44} {:>6} {:>6} {:>6} {:>8} {:>7.0} {:>7} {:>6} {:>8} {:>6}\n",
            l.variant,
            opt(l.voip.delay_p50_ms, 1),
            opt(l.voip.delay_p99_ms, 1),
            opt(l.voip.delay_max_ms, 1),
            format!("{}/{}", l.voip.sent - l.voip.received, l.voip.sent),
            l.voip.longest_silence_ms,
            opt(l.handover_gap_ms, 0),
            opt(l.path_back_ms, 0),
            opt(l.bulk.as_ref().map(|m| m.mbps), 2),
            opt(l.stall.as_ref().map(|st| st.longest_stall_ms), 0),
        );
        if let (Some(t), Some(p)) = (&l.target, l.pass) {
            checks += &format!(
                "  {}: {t}: {}\n",
                l.variant,
                if p { "PASS" } else { "FAIL" }
            );
        }
    }
    if let Some(l) = rows.iter().find_map(|row| row.lte.as_ref()) {
        s += &format!(
            "WiFi {:.0} Mbit/s, LTE {:.1} Mbit/s one-way {:.0} ms; WiFi fails at {:.1} s (for {:.1} s unless addr-change)\n",
            l.wifi_mbps, l.lte_mbps, l.lte_owd_ms, l.handover_at_s, l.handover_len_s
        );
    }
    s += "VoIP one-way delay ms (p50, p99, max); lost = VoIP packets lost/sent; silent = longest time without a VoIP packet \
          arriving, ms; mptd = A's last handover gap (last packet heard on WiFi to first data on LTE), ms; back = WiFi \
          carries data again after the link came back / the new address, ms; bulk = TCP goodput Mbit/s; stall = longest \
          time without TCP data arriving, ms\n";
    if !checks.is_empty() {
        s += "targets:\n";
        s += &checks;
    }
    s
}

/// One results.csv row of `lte-gateway`.
#[derive(Debug, Default, Serialize)]
struct CsvRow<'a> {
    variant: &'a str,
    event: &'a str,
    dscp: u8,
    lte_backup: bool,
    #[serde(serialize_with = "f3")]
    wifi_mbps: f64,
    #[serde(serialize_with = "f3")]
    lte_mbps: f64,
    #[serde(serialize_with = "f3")]
    lte_owd_ms: f64,
    #[serde(serialize_with = "f4")]
    gtp_factor: f64,
    voip_sent: u64,
    voip_received: u64,
    #[serde(serialize_with = "f3")]
    voip_loss_pct: f64,
    #[serde(serialize_with = "opt3")]
    voip_p50_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    voip_p99_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    voip_max_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    excess_max_ms: Option<f64>,
    lost_in_outage: u64,
    #[serde(serialize_with = "f1")]
    longest_gap_ms: f64,
    #[serde(serialize_with = "f1")]
    longest_silence_ms: f64,
    #[serde(serialize_with = "opt3")]
    switch_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    switch_back_ms: Option<f64>,
    handovers: u64,
    #[serde(serialize_with = "opt3")]
    handover_gap_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    path_back_ms: Option<f64>,
    #[serde(serialize_with = "f3")]
    handover_at_s: f64,
    #[serde(serialize_with = "f3")]
    handover_len_s: f64,
    #[serde(serialize_with = "opt3")]
    bulk_mbps: Option<f64>,
    bulk_retransmits: Option<u64>,
    bulk_cc: &'a str,
    #[serde(serialize_with = "opt3")]
    longest_stall_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    cpu_a_pct: Option<f64>,
    #[serde(serialize_with = "opt3")]
    cpu_b_pct: Option<f64>,
    target: &'a str,
    pass: Option<bool>,
}

/// results.csv: one row per variant.
pub fn csv(rows: &[Row]) -> Result<String, CsvError> {
    let rows: Vec<CsvRow> = rows
        .iter()
        .filter_map(|row| row.lte.as_ref().map(|l| (row, l)))
        .map(|(row, l)| CsvRow {
            variant: &l.variant,
            event: l.event,
            dscp: l.dscp,
            lte_backup: l.lte_backup,
            wifi_mbps: l.wifi_mbps,
            lte_mbps: l.lte_mbps,
            lte_owd_ms: l.lte_owd_ms,
            gtp_factor: l.gtp_factor,
            voip_sent: l.voip.sent,
            voip_received: l.voip.received,
            voip_loss_pct: l.voip.loss_pct,
            voip_p50_ms: l.voip.delay_p50_ms,
            voip_p99_ms: l.voip.delay_p99_ms,
            voip_max_ms: l.voip.delay_max_ms,
            excess_max_ms: l.excess_max_ms,
            lost_in_outage: l.voip.lost_in_outage,
            longest_gap_ms: l.voip.longest_gap_ms,
            longest_silence_ms: l.voip.longest_silence_ms,
            switch_ms: l.voip.switch_ms,
            switch_back_ms: l.voip.switch_back_ms,
            handovers: l.handovers,
            handover_gap_ms: l.handover_gap_ms,
            path_back_ms: l.path_back_ms,
            handover_at_s: l.handover_at_s,
            handover_len_s: l.handover_len_s,
            bulk_mbps: l.bulk.as_ref().map(|m| m.mbps),
            bulk_retransmits: l.bulk.as_ref().and_then(|m| m.retransmits),
            bulk_cc: l.stall.as_ref().map_or("", |st| st.cc.as_str()),
            longest_stall_ms: l.stall.as_ref().map(|st| st.longest_stall_ms),
            cpu_a_pct: row.cpu_a_pct,
            cpu_b_pct: row.cpu_b_pct,
            target: l.target.as_deref().unwrap_or(""),
            pass: l.pass,
        })
        .collect();
    csv_rows::to_string(&rows)
}
