//! `lte-gateway` results as a table, results.csv and plot.svg (VoIP delay
//! over time with the WiFi outage shaded).

use crate::bench::chart::line::{Chart, Series};
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

pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "variant,event,dscp,lte_backup,wifi_mbps,lte_mbps,lte_owd_ms,gtp_factor,voip_sent,voip_received,voip_loss_pct,\
         voip_p50_ms,voip_p99_ms,voip_max_ms,excess_max_ms,lost_in_outage,longest_gap_ms,longest_silence_ms,\
         switch_ms,switch_back_ms,handovers,handover_gap_ms,path_back_ms,handover_at_s,handover_len_s,\
         bulk_mbps,bulk_retransmits,bulk_cc,longest_stall_ms,cpu_a_pct,cpu_b_pct,target,pass\n",
    );
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
    for row in rows {
        let Some(l) = &row.lte else { continue };
        s += &format!(
            "\"{}\",{},{},{},{:.3},{:.3},{:.3},{:.4},{},{},{:.3},{},{},{},{},{},{:.1},{:.1},{},{},{},{},{},{:.3},{:.3},{},{},{},{},{},{},\"{}\",{}\n",
            l.variant,
            l.event,
            l.dscp,
            l.lte_backup,
            l.wifi_mbps,
            l.lte_mbps,
            l.lte_owd_ms,
            l.gtp_factor,
            l.voip.sent,
            l.voip.received,
            l.voip.loss_pct,
            o(l.voip.delay_p50_ms),
            o(l.voip.delay_p99_ms),
            o(l.voip.delay_max_ms),
            o(l.excess_max_ms),
            l.voip.lost_in_outage,
            l.voip.longest_gap_ms,
            l.voip.longest_silence_ms,
            o(l.voip.switch_ms),
            o(l.voip.switch_back_ms),
            l.handovers,
            o(l.handover_gap_ms),
            o(l.path_back_ms),
            l.handover_at_s,
            l.handover_len_s,
            o(l.bulk.as_ref().map(|m| m.mbps)),
            l.bulk
                .as_ref()
                .and_then(|m| m.retransmits)
                .map_or(String::new(), |v| v.to_string()),
            l.stall.as_ref().map_or("", |st| st.cc.as_str()),
            o(l.stall.as_ref().map(|st| st.longest_stall_ms)),
            o(row.cpu_a_pct),
            o(row.cpu_b_pct),
            l.target.as_deref().unwrap_or(""),
            l.pass.map_or(String::new(), |p| p.to_string()),
        );
    }
    s
}

/// VoIP one-way delay over time (dots), lost packets at the bottom, the
/// WiFi outage shaded.
pub fn svg(scenario: &str, rows: &[Row]) -> String {
    let mut c = Chart {
        title: format!("mpt bench {}: VoIP one-way delay over time", scenario),
        xlabel: "time since start (s)".into(),
        ylabel: "one-way delay (ms)".into(),
        ..Chart::default()
    };
    for row in rows {
        let Some(l) = &row.lte else { continue };
        c.series.push(Series {
            label: format!("{}: VoIP delay", l.variant),
            points: l
                .timeline
                .iter()
                .filter_map(|(t, d)| d.map(|d| (*t, d)))
                .collect(),
            dots: true,
            ..Series::default()
        });
        c.series.push(Series {
            label: format!("{}: VoIP lost", l.variant),
            points: l
                .timeline
                .iter()
                .filter(|(_, d)| d.is_none())
                .map(|(t, _)| (*t, 0.0))
                .collect(),
            dots: true,
            ..Series::default()
        });
        c.shade.push((
            l.handover_at_s,
            l.handover_at_s + l.handover_len_s,
            "WiFi outage".into(),
        ));
    }
    c.render()
}
