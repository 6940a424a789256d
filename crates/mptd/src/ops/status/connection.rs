//! A connection's part of the status document: its identity, what each
//! subsystem did (equalisation, redundancy, handovers, repair, drops, MSS
//! clamping), its
//! resequencer, session and paths.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use mpt_api::status::{Connection, Equalize, Handover, LastHandover, Redundancy, Repair};
use serde_json::Value;

use crate::ops::status::fields::{counters_as, ms, us_as_ms};
use crate::ops::status::path::path_status;
use crate::ops::status::reorder::reorder;
use crate::ops::status::session::session;
use crate::plane::ConnShared;

/// Connection `c` as of `now`, with its paths (those being removed are
/// left out).
pub(super) fn connection(c: &ConnShared, now: Instant) -> Connection {
    let paths = c
        .paths()
        .iter()
        .filter(|p| !p.is_removed())
        .map(|p| path_status(p, now))
        .collect();
    Connection {
        drops: Some(counters_as([], c.drops.each())),
        equalize: Some(equalize(c)),
        handover: Some(handover(c, now)),
        id: Some(c.conn_id),
        name: Some(c.name.clone()),
        paths: Some(paths),
        redundancy: Some(redundancy(c)),
        reorder: Some(reorder(c, now)),
        repair: Some(repair(c)),
        session: Some(session(c, now)),
        tcp: Some(counters_as([], c.tcp.each())),
        other: Default::default(),
    }
}

/// Delay equalisation: what data is held to now, and what it held.
fn equalize(c: &ConnShared) -> Equalize {
    let timing = c.timing.load();
    Equalize {
        bulk_hold_ms: Some(us_as_ms(timing.equalize_bulk_spread_us())),
        held: Some(c.equalized.held.get()),
        held_ms: Some(us_as_ms(c.equalized.held_us.get())),
        hold_ms: Some(us_as_ms(timing.equalize_spread_us())),
        other: Default::default(),
    }
}

/// Redundancy: the mode and what the copies did.
fn redundancy(c: &ConnShared) -> Redundancy {
    let mode = match c.redundancy() {
        mpt_proto::sched::Redundancy::Auto => "auto",
        mpt_proto::sched::Redundancy::Off => "off",
        mpt_proto::sched::Redundancy::All => "all",
    };
    Redundancy {
        copies_first: Some(c.copies.first.get()),
        copies_sent: Some(c.copies.sent.get()),
        copy_bytes: Some(c.copies.sent_bytes.get()),
        duplicates: Some(c.copies.duplicates.get()),
        mode: Some(mode.to_string()),
        other: Default::default(),
    }
}

/// Handovers: how many, and the latest as of `now`.
fn handover(c: &ConnShared, now: Instant) -> Handover {
    let last = c.handovers.last().map(|h| LastHandover {
        from: Some(h.from),
        gap_ms: Some(ms(h.gap)),
        ms_ago: Some(ms(now.saturating_duration_since(h.at))),
        to: Some(h.to),
        other: Default::default(),
    });
    Handover {
        count: Some(c.handovers.count.get()),
        last: Some(last),
        other: Default::default(),
    }
}

/// Loss repair: whether it is on, and its counters.
fn repair(c: &ConnShared) -> Repair {
    counters_as(
        [("enabled", Value::Bool(c.repair.load(Relaxed)))],
        c.repairs.each(),
    )
}
