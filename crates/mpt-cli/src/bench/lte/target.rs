//! The failover targets of an `lte-gateway` variant, and the one-line
//! summary of what a case measured.

use super::def::{Bulk, LteEvent, LteVariant, DSCP_EF};
use super::result::LteResult;
use crate::bench::text::opt;

/// One line of what a case measured.
pub(crate) fn summary(l: &LteResult) -> String {
    let mut s = format!(
        "WiFi {}: VoIP delay p50 {} ms, p99 {} ms, max {} ms (LTE {:.0} ms); lost {} of {}; \
         longest silence {:.0} ms",
        l.event,
        opt(l.voip.delay_p50_ms, 1),
        opt(l.voip.delay_p99_ms, 1),
        opt(l.voip.delay_max_ms, 1),
        l.lte_owd_ms,
        l.voip.sent - l.voip.received,
        l.voip.sent,
        l.voip.longest_silence_ms,
    );
    if let Some(g) = l.handover_gap_ms {
        s += &format!("; mptd handover gap {g:.0} ms ({} handovers)", l.handovers);
    }
    if let Some(b) = l.path_back_ms {
        s += &format!("; WiFi carries data again after {b:.0} ms");
    } else if l.event != "silent" {
        s += "; WiFi did not carry data again";
    }
    if let Some(m) = &l.bulk {
        s += &format!("; bulk {:.2} Mbit/s", m.mbps);
    }
    if let Some(st) = &l.stall {
        s += &format!(" ({}, longest stall {:.0} ms)", st.cc, st.longest_stall_ms);
    }
    if let (Some(t), Some(p)) = (&l.target, l.pass) {
        s += &format!("; target {t}: {}", if p { "PASS" } else { "FAIL" });
    }
    s
}

/// The targets of the failover work (VoIP alone, except the stall of a
/// bulk stream), as text, and whether `l` meets its variant's.
pub(crate) fn check_target(v: &LteVariant, l: &LteResult) -> Option<(String, bool)> {
    let lost = l.voip.sent - l.voip.received;
    match &v.bulk {
        Bulk::Stream(_) => {
            let stall = l.stall.as_ref()?.longest_stall_ms;
            return Some(("TCP stall <= 500 ms".into(), stall <= 500.0));
        }
        Bulk::Iperf3 => return None,
        Bulk::None => {}
    }
    Some(match (v.event, v.lte_backup, v.dscp) {
        (LteEvent::Silent, true, _) => (
            "longest silence <= 300 ms".into(),
            l.voip.longest_silence_ms <= 300.0,
        ),
        (LteEvent::Silent, false, DSCP_EF) => {
            let limit = l.lte_owd_ms + 20.0;
            (
                format!("0 lost, p99 <= {limit:.0} ms"),
                lost == 0 && l.voip.delay_p99_ms.is_some_and(|d| d <= limit),
            )
        }
        (LteEvent::Silent, false, _) => (
            "<= 5 lost, none held > 100 ms".into(),
            lost <= 5 && l.excess_max_ms.is_some_and(|e| e <= 100.0),
        ),
        (LteEvent::LinkDown, _, _) => (
            "<= 2 lost, WiFi back <= 1 s".into(),
            lost <= 2 && l.path_back_ms.is_some_and(|b| b <= 1000.0),
        ),
        (LteEvent::AddrChange, _, _) => (
            "<= 5 lost, WiFi back from its new address".into(),
            lost <= 5 && l.path_back_ms.is_some(),
        ),
    })
}
