//! Whether and when the WiFi path carries data again after a link-down or
//! an address change, from both daemons' status.

use std::path::Path;
use std::time::{Duration, Instant};

use mpt_api::status::PathStatus;

use crate::bench::testbed;

/// How often the WiFi path's return is polled.
const BACK_POLL: Duration = Duration::from_millis(20);
/// Longest wait for the WiFi path to carry data again.
const BACK_TIMEOUT: Duration = Duration::from_secs(8);

/// A's data sent and B's data received on the WiFi path (`p0`), and B's
/// remote address for it, from the daemons' status.
#[derive(Debug, Clone, Default)]
pub(crate) struct WifiCounters {
    a_tx: u64,
    b_rx: u64,
    a_up: bool,
    b_remote: Option<String>,
}

/// Reads [`WifiCounters`] from both daemons (zero/false where one does
/// not answer).
pub(crate) fn wifi_counters(control_a: &Path, control_b: &Path) -> WifiCounters {
    let path = |control: &Path| -> Option<PathStatus> {
        let st = testbed::mptd_status(control).ok()?;
        st.connections
            .as_deref()?
            .first()?
            .paths
            .as_deref()?
            .iter()
            .find(|p| p.name.as_deref() == Some("p0"))
            .cloned()
    };
    let (a, b) = (path(control_a), path(control_b));
    WifiCounters {
        a_tx: a.as_ref().and_then(|p| p.tx_data_packets).unwrap_or(0),
        a_up: a.as_ref().is_some_and(|p| p.state.as_deref() == Some("up")),
        b_rx: b.as_ref().and_then(|p| p.rx_data_packets).unwrap_or(0),
        b_remote: b.and_then(|p| p.remote.flatten()),
    }
}

/// Polls until the WiFi path is up in A, A sent data on it and B received
/// data on it since `base` (and, with `new_addr`, B sends to that address);
/// the time from `since`, or `None` after [`BACK_TIMEOUT`].
pub(crate) fn wait_wifi_back(
    control_a: &Path,
    control_b: &Path,
    base: WifiCounters,
    new_addr: Option<&str>,
    since: Instant,
) -> Option<Duration> {
    while since.elapsed() < BACK_TIMEOUT {
        let now = wifi_counters(control_a, control_b);
        let moved = new_addr.is_none_or(|a| {
            now.b_remote
                .as_deref()
                .is_some_and(|r| r.trim_start_matches('[').starts_with(a))
        });
        if now.a_up && now.a_tx > base.a_tx && now.b_rx > base.b_rx && moved {
            return Some(since.elapsed());
        }
        std::thread::sleep(BACK_POLL);
    }
    None
}
