//! The status document (`status` on the control socket and the remote
//! command port, `mpt status --json`), built as [`mpt_api::Status`].
//!
//! The document's types live in mpt-api, which the CLI reads it with, so
//! the daemon and its clients describe it once. The daemon fills every
//! field (`Some`, with `Some(None)` for its `null`s) from the shared
//! state the data plane and the control loop publish ([`StatusSource`]),
//! one part per file: the daemon-wide fields here, a connection in
//! `connection`, its paths in `path`, its resequencer in `reorder`, its
//! keys and the public-key handshake in `session`. Counter groups are
//! matched to the API's fields by name (`fields`), so that a counter
//! added to a group without a field in the API shows up in the tests
//! rather than going missing.
//!
//! The bytes are those the daemon wrote when it built the document as
//! `serde_json` maps: the API declares its fields in key order.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use mpt_api::status::{HandshakeStats, HookStats, NetlinkStats, SharedPortStats};
use mpt_api::Status;

use crate::control::noise::NoiseDaemonStats;
use crate::ops::source::StatusSource;
use crate::ops::status::connection::connection;
use crate::ops::status::fields::counters_as;
use crate::ops::status::session::handshake_stats;
use crate::sync::lock_unpoisoned;

mod connection;
mod fields;
mod path;
mod reorder;
mod routing;
mod session;

/// The status document (the `mpt status --json` contract).
pub fn status(source: &StatusSource) -> Status {
    status_of(source, None)
}

/// The status document with connection `only` alone (`None`: all).
pub fn status_of(source: &StatusSource, only: Option<&str>) -> Status {
    status_at(source, only, Instant::now())
}

/// [`status_of`] as of `now` (times and ages are counted to it).
pub(crate) fn status_at(source: &StatusSource, only: Option<&str>, now: Instant) -> Status {
    let connections = source
        .conns
        .list()
        .iter()
        .filter(|c| !c.removed.load(Relaxed))
        .filter(|c| only.is_none_or(|n| c.name == n))
        .map(|c| connection(c, now))
        .collect();
    Status {
        accel: source.accel.as_deref().map(accel),
        cmd_port: None,
        connections: Some(connections),
        drops: Some(counters_as([], source.tx.each())),
        netlink: Some(source.netlink.as_deref().map(netlink)),
        noise: Some(source.noise.as_deref().map(daemon_noise)),
        routing: Some(routing::routing(&crate::sync::read_unpoisoned(
            &source.routing,
        ))),
        shared_port: Some(source.shared.as_deref().map(shared_port)),
        hooks: source.hooks.as_deref().map(|h| HookStats {
            ok: h.ok.get(),
            failed: h.failed.get(),
            timed_out: h.timed_out.get(),
            dropped: h.dropped.get(),
        }),
        tunnel: Some(source.tun_name.clone()),
        uptime_s: Some(now.saturating_duration_since(source.started).as_secs()),
        other: Default::default(),
    }
}

/// TCP acceleration's counters.
fn accel(a: &mpt_accel::Stats) -> mpt_api::status::AccelStats {
    let s = a.snapshot();
    mpt_api::status::AccelStats {
        bytes_down: s.bytes_down,
        bytes_up: s.bytes_up,
        bad_frames: s.bad_frames,
        dropped: s.dropped,
        flows: s.flows,
        flows_active: s.flows_active,
        leg_failures: s.leg_failures,
        legs_busy: s.legs_busy,
        legs_idle: s.legs_idle,
        legs_opened: s.legs_opened,
        path_bytes: s
            .path_bytes
            .into_iter()
            .map(|(path, bytes)| mpt_api::status::AccelPathBytes { path, bytes })
            .collect(),
        refused: s.refused,
        resets: s.resets,
    }
}

/// The netlink listener's counters.
fn netlink(n: &crate::io::netlink::NetlinkStats) -> NetlinkStats {
    NetlinkStats {
        errors: Some(n.errors.get()),
        events: Some(n.events.get()),
        malformed: Some(n.malformed.get()),
        overruns: Some(n.overruns.get()),
        other: Default::default(),
    }
}

/// The public-key responder's counters, with the refusals only the daemon
/// counts.
fn daemon_noise(n: &NoiseDaemonStats) -> HandshakeStats {
    let mut stats = handshake_stats(&lock_unpoisoned(&n.responder));
    if let Some(refused) = &mut stats.refused {
        refused.entropy = Some(n.refusals.entropy.get());
        refused.lost_race = Some(n.refusals.lost_race.get());
        refused.wrong_connection = Some(n.refusals.wrong_connection.get());
    }
    stats
}

/// What the shared ports refused before knowing the connection.
fn shared_port(s: &crate::plane::shared_port::SharedStats) -> SharedPortStats {
    SharedPortStats {
        bad_mac1: Some(s.bad_mac1.get()),
        initiations: Some(s.initiations.get()),
        malformed: Some(s.malformed.get()),
        queue_full: Some(s.queue_full.get()),
        lane_drops: Some(s.lane_drops.get()),
        tun_write_errors: Some(s.tun_write.get()),
        unknown_session: Some(s.unknown_session.get()),
        other: Default::default(),
    }
}

#[cfg(test)]
mod tests;
