//! `lte-gateway` results as a table and results.csv (the charts are
//! [`super::charts`]).

use serde::Serialize;

use crate::bench::csv_rows::{self, f1, f3, f4, opt3, CsvError};
use crate::bench::mptcp;
use crate::bench::report::row::Row;
use crate::bench::stall::StallStats;
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
    s += &mptcp_table(rows);
    s
}

/// "before/during/after" goodput around the outage, Mbit/s.
fn around(st: &StallStats) -> String {
    st.around.map_or("-".into(), |a| {
        format!(
            "{}/{}/{}",
            opt(a.before_mbps, 1),
            opt(a.during_mbps, 1),
            opt(a.after_mbps, 1)
        )
    })
}

/// The kernel MPTCP baseline beside the tunnel, one line per bulk variant
/// that has one; empty without any.
fn mptcp_table(rows: &[Row]) -> String {
    let mut s = String::new();
    for l in rows.iter().filter_map(|r| r.lte.as_ref()) {
        let (Some(b), Some(st)) = (&l.mptcp, &l.stall) else {
            continue;
        };
        if s.is_empty() {
            s += &format!(
                "\nkernel MPTCP, the same stream over the same paths and outage:\n{:<40} {:>7} {:>7} {:>7} {:>16} {:>16} {:>6} {:>6} {:>7}  {}\n",
                "variant",
                "mpt",
                "MPTCP",
                "mpt/MP",
                "mpt b/d/a",
                "MPTCP b/d/a",
                "stall",
                "MPstl",
                "resume",
                "MPTCP bytes per path"
            );
        }
        let resumed = b.stall.around.and_then(|a| a.resumed_after_ms);
        s += &format!(
            "{:<40} {:>7.2} {:>7.2} {:>7} {:>16} {:>16} {:>6.0} {:>6.0} {:>7}  {}\n",
            l.variant,
            st.mbps,
            b.stall.mbps,
            opt(b.mpt_over_mptcp, 2),
            around(st),
            around(&b.stall),
            st.longest_stall_ms,
            b.stall.longest_stall_ms,
            opt(resumed, 0),
            b.paths.label(&["wifi".into(), "lte".into()])
                + if b.paths.all_paths_used {
                    ""
                } else {
                    " ONE PATH"
                }
                + &format!("; load {}/{}", opt(b.load_mpt, 1), opt(b.load_mptcp, 1)),
        );
    }
    if !s.is_empty() {
        s += &format!(
            "Mbit/s; b/d/a = goodput before / during / after the WiFi outage; stall, MPstl = longest \
             time without data, mpt and MPTCP, ms; resume = MPTCP's data flowing again, ms after the \
             outage's start; MPTCP runs right after the tunnel on the same testbed (IPPROTO_MPTCP \
             sockets, B's LTE address announced, a path under {:.0} % of the bytes = ONE PATH, no ratio); \
             load = 1-min load average after the tunnel's run / after MPTCP's\n",
            mptcp::MIN_SHARE * 100.0
        );
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
    bulk_before_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    bulk_during_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    bulk_after_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    bulk_outage_stall_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    mptcp_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    mptcp_longest_stall_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    mptcp_before_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    mptcp_during_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    mptcp_after_mbps: Option<f64>,
    #[serde(serialize_with = "opt3")]
    mptcp_outage_stall_ms: Option<f64>,
    #[serde(serialize_with = "opt3")]
    mptcp_resumed_after_ms: Option<f64>,
    /// Bytes B received per path over the MPTCP run, "wifi/lte".
    mptcp_path_bytes: String,
    mptcp_all_paths_used: Option<bool>,
    #[serde(serialize_with = "opt3")]
    mpt_over_mptcp: Option<f64>,
    #[serde(serialize_with = "opt3")]
    load_after_mpt: Option<f64>,
    #[serde(serialize_with = "opt3")]
    load_after_mptcp: Option<f64>,
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
        .map(|(row, l)| {
            let bulk_around = l.stall.as_ref().and_then(|st| st.around);
            let mp_around = l.mptcp.as_ref().and_then(|b| b.stall.around);
            (row, l, bulk_around, mp_around)
        })
        .map(|(row, l, bulk_around, mp_around)| CsvRow {
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
            bulk_before_mbps: bulk_around.and_then(|a| a.before_mbps),
            bulk_during_mbps: bulk_around.and_then(|a| a.during_mbps),
            bulk_after_mbps: bulk_around.and_then(|a| a.after_mbps),
            bulk_outage_stall_ms: bulk_around.map(|a| a.outage_stall_ms),
            mptcp_mbps: l.mptcp.as_ref().map(|b| b.stall.mbps),
            mptcp_longest_stall_ms: l.mptcp.as_ref().map(|b| b.stall.longest_stall_ms),
            mptcp_before_mbps: mp_around.and_then(|a| a.before_mbps),
            mptcp_during_mbps: mp_around.and_then(|a| a.during_mbps),
            mptcp_after_mbps: mp_around.and_then(|a| a.after_mbps),
            mptcp_outage_stall_ms: mp_around.map(|a| a.outage_stall_ms),
            mptcp_resumed_after_ms: mp_around.and_then(|a| a.resumed_after_ms),
            mptcp_path_bytes: l.mptcp.as_ref().map_or(String::new(), |b| {
                b.paths
                    .bytes
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("/")
            }),
            mptcp_all_paths_used: l.mptcp.as_ref().map(|b| b.paths.all_paths_used),
            mpt_over_mptcp: l.mptcp.as_ref().and_then(|b| b.mpt_over_mptcp),
            load_after_mpt: l.mptcp.as_ref().and_then(|b| b.load_mpt),
            load_after_mptcp: l.mptcp.as_ref().and_then(|b| b.load_mptcp),
            cpu_a_pct: row.cpu_a_pct,
            cpu_b_pct: row.cpu_b_pct,
            target: l.target.as_deref().unwrap_or(""),
            pass: l.pass,
        })
        .collect();
    csv_rows::to_string(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::lte::mptcp::HandoverMptcp;
    use crate::bench::lte::result::LteResult;
    use crate::bench::mptcp::PathUse;
    use crate::bench::stall::AroundOutage;

    fn stream(mbps: f64, stall_ms: f64) -> StallStats {
        StallStats {
            cc: "cubic".into(),
            mbps,
            longest_stall_ms: stall_ms,
            around: Some(AroundOutage {
                before_mbps: Some(40.0),
                during_mbps: Some(15.0),
                after_mbps: Some(38.0),
                outage_stall_ms: stall_ms,
                resumed_after_ms: Some(stall_ms),
            }),
            ..StallStats::default()
        }
    }

    #[test]
    fn mptcp_baseline_in_table_and_csv() {
        let row = |mptcp: Option<HandoverMptcp>| Row {
            lte: Some(LteResult {
                // No comma: the test splits the CSV naively.
                variant: "WiFi silent bulk cubic".into(),
                stall: Some(stream(30.0, 125.0)),
                mptcp,
                ..LteResult::default()
            }),
            ..Row::default()
        };
        let b = HandoverMptcp {
            stall: stream(25.0, 900.0),
            paths: PathUse::between(&[0, 0], &[60, 40]),
            mpt_over_mptcp: Some(1.2),
            ..HandoverMptcp::default()
        };
        let rows = [row(Some(b)), row(None)];
        let t = table(&rows);
        assert!(t.contains("kernel MPTCP, the same stream"), "{t}");
        assert!(t.contains("40.0/15.0/38.0"), "{t}");
        assert!(t.contains("wifi 60 % + lte 40 %"), "{t}");
        assert_eq!(t.matches(" 1.20 ").count(), 1, "{t}");
        let c = csv(&rows).expect("csv");
        let mut lines = c.lines();
        let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
        let first: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
        assert_eq!(first[col("mptcp_mbps")], "25.000");
        assert_eq!(first[col("mpt_over_mptcp")], "1.200");
        assert_eq!(first[col("mptcp_path_bytes")], "60/40");
        assert_eq!(first[col("bulk_during_mbps")], "15.000");
        let second: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
        assert_eq!(second[col("mptcp_mbps")], "");
        // No baseline anywhere: the table has no MPTCP block.
        assert!(!table(&rows[1..]).contains("kernel MPTCP"));
    }

    #[test]
    fn results_of_older_builds_load_without_the_baseline() {
        let old = r#"{"variant":"WiFi silent, bulk bbr","event":"silent",
            "stall":{"cc":"bbr","bytes":5,"mbps":20.0,"longest_stall_ms":219.0}}"#;
        let l: LteResult = serde_json::from_str(old).expect("old lte result");
        assert!(l.mptcp.is_none());
        assert!(l.stall.is_some_and(|st| st.around.is_none()));
        // And what this build writes reads back.
        let new = LteResult {
            mptcp: Some(HandoverMptcp::default()),
            stall: Some(stream(1.0, 2.0)),
            ..LteResult::default()
        };
        let text = serde_json::to_string(&new).expect("json");
        let back: LteResult = serde_json::from_str(&text).expect("reads back");
        assert!(back.mptcp.is_some());
        assert_eq!(
            back.stall.and_then(|s| s.around),
            new.stall.and_then(|s| s.around)
        );
    }
}
