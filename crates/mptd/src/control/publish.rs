//! What the control loop publishes each round, per connection, for the
//! workers and the status to read: the session's own datagrams (probes,
//! replies, control) sealed and sent; which paths the schedulers may use
//! and which are silent; the schedulers' path models; the receive timing
//! plan (resequencer timeout, path waits, equalisation targets; the policy
//! is `mpt_proto::session::timing`); and each path's view for status and
//! metrics (rates, delays, smoothed shares of the data).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::crypto::{SessionKeys, TAG_LEN};
use mpt_proto::path::Liveness;
use mpt_proto::sched::PathModel;
use mpt_proto::seq::seq_before;
use mpt_proto::session::timing::{
    owd_bounds, share_idle, share_weight, smoothed_share, TimingInput, TimingPlan,
};
use mpt_proto::wire::{Flags, HeaderViewMut, HEADER_LEN};
use mpt_proto::Session;

use super::conn_keys::ConnKeys;
use super::control_loop::OUT_LEN;
use super::initiate::{index_in_use, initiate, noise_initiate};
use super::noise::NoiseDaemon;
use super::transmit::send;
use crate::plane::{ConnShared, PathTable, PathView};
use crate::sync::lock_unpoisoned;

/// How the session's own datagrams go out: `None` in clear; `Some(None)`
/// encrypted but without keys yet (nothing the peer would accept can be
/// sent); `Some(Some((keys, id)))` sealed with `keys`, addressed to the
/// peer's session index `id`.
pub(super) type Sealing = Option<Option<(Arc<SessionKeys>, u32)>>;

/// Drives connection `conn`'s key exchange one step (a PSK handshake's
/// retry, a Noise rekey or initiation) and says how its datagrams are
/// sealed now.
pub(super) fn poll_keys(
    conn: &ConnShared,
    session: &Session,
    keys: Option<&mut ConnKeys>,
    noise: Option<&mut NoiseDaemon>,
    conns: &[Arc<ConnShared>],
    now: Instant,
    buf: &mut [u8; OUT_LEN],
) -> Sealing {
    match (&conn.crypto, keys) {
        (Some(crypto), Some(ConnKeys::Psk(exchange))) => {
            crypto.expire(now);
            let keys = crypto.keys();
            let all_down = session.paths().all(|(_, p)| p.liveness() == Liveness::Down);
            if let Some(attempt) = exchange.poll_initiate(keys.is_none() || all_down, now) {
                initiate(conn, exchange, attempt, now, buf);
            }
            Some(keys.map(|k| (k, conn.conn_id)))
        }
        (Some(crypto), keys) => {
            if let (Some(ConnKeys::Noise(nc)), Some(nd)) = (keys, noise) {
                let all_down = session.paths().all(|(_, p)| p.liveness() == Liveness::Down);
                let seq = conn.seq.load(Relaxed);
                let no_session = conn.drops.no_session.get();
                if nc.poll(crypto, seq, no_session, all_down, now) {
                    noise_initiate(conn, nc, nd, |i| index_in_use(conns, i), now, buf);
                }
                nc.publish(crypto);
            }
            Some(crypto.sealing(conn.conn_id))
        }
        _ => None,
    }
}

/// Sends what the session wants sent (probes, replies, control messages),
/// each numbered on its path and sealed as `sealing` says.
pub(super) fn transmit(
    conn: &ConnShared,
    session: &mut Session,
    table: &PathTable,
    sealing: &Sealing,
    buf: &mut [u8; OUT_LEN],
) {
    while let Some(t) = session.poll_transmit() {
        let Some(path) = table.get(t.path) else {
            continue;
        };
        let Some((remote, _)) = path.remote() else {
            continue;
        };
        let seq = conn.seq.fetch_add(1, Relaxed);
        let pseq = path.path_seq.fetch_add(1, Relaxed);
        let Ok(mut len) = t.emit(seq, pseq, buf) else {
            continue;
        };
        match sealing {
            None => {}
            // Encrypted connection without a session yet: nothing
            // can be sent that the peer would accept.
            Some(None) => continue,
            Some(Some((k, conn_id))) => {
                // The peer's session index on a public-key
                // connection (else the connection id again).
                let Ok(mut h) = HeaderViewMut::check_len(buf) else {
                    continue;
                };
                h.set_conn_id(*conn_id);
                h.insert_flags(Flags::SEALED);
                match k.seal_datagram(&mut buf[..len + TAG_LEN], len - HEADER_LEN) {
                    Ok(n) => len = n,
                    Err(_) => continue,
                }
            }
        }
        send(conn, path, &buf[..len], remote);
    }
}

/// Publishes which paths the schedulers may use, which are silent (the
/// receive side stops waiting for them), and the schedulers' path models.
pub(super) fn publish_liveness(
    conn: &ConnShared,
    session: &Session,
    table: &PathTable,
    models: &mut Vec<(PathModel, Duration)>,
    now: Instant,
) {
    conn.eligible.store(session.eligibility().active(), Relaxed);
    let silent = session
        .paths()
        .filter(|(id, p)| *id < 64 && matches!(p.liveness(), Liveness::Suspect | Liveness::Down))
        .fold(0u64, |m, (id, _)| m | (1 << id));
    conn.silent_paths.store(silent, Relaxed);
    session.path_models(now, models);
    for (id, (model, phase)) in models.iter().enumerate() {
        if let Some(shared) = table.get(id) {
            shared.model.publish(*model, *phase);
        }
    }
}

/// Publishes the receive side's timing plan: the resequencer's timeout,
/// each path's wait for holes, the delay spread and the equalisation
/// targets.
pub(super) fn publish_timing(
    conn: &ConnShared,
    session: &Session,
    table: &PathTable,
    now: Instant,
) {
    // The receiver's waits and holds (see `mpt_proto::session::timing`).
    let mut timing = TimingInput::default();
    for (id, _) in session.paths() {
        if let (Some(p), Some(share)) = (table.get(id), timing.rx_share.get_mut(id)) {
            *share = lock_unpoisoned(&p.view).rx_share;
        }
    }
    timing.last_repair_request = {
        let requested = conn.repairs.requested_datagrams.get();
        let mut seen = lock_unpoisoned(&conn.random_loss_seen);
        if requested > seen.0 {
            *seen = (requested, Some(now));
        }
        seen.1
    };
    let plan = session.timing_plan(now, &timing);
    log_timeout_change(conn, session, &plan, now);
    conn.timing.publish(plan);
}

/// A change of the resequencer's timeout by [`TIMEOUT_LOG_STEP`] or more
/// is logged (debug) with the paths' RTT estimates it was built from: a
/// timeout far above the paths' delays holds every flow that long after
/// the next loss of a path (issue 32: a backup path's late first probe
/// reply made it 1.5 s).
const TIMEOUT_LOG_STEP: Duration = Duration::from_millis(10);

fn log_timeout_change(conn: &ConnShared, session: &Session, plan: &TimingPlan, now: Instant) {
    let before = Duration::from_micros(conn.timing.load().reorder_timeout_us());
    if plan.reorder_timeout.abs_diff(before) < TIMEOUT_LOG_STEP
        || !tracing::enabled!(tracing::Level::DEBUG)
    {
        return;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (id, p) in session.paths() {
        tracing::debug!(
            conn = %conn.name,
            path = id,
            state = p.state().as_str(),
            usable = p.usable(),
            srtt_ms = p.rtt().smoothed().map(ms),
            rttvar_ms = ms(p.rtt().variation()),
            min_rtt_ms = p.rtt().min().map(ms),
            owd_age_ms = p.rx_owd().map(|(_, at)| ms(now.saturating_duration_since(at))),
            "path delays behind the reorder timeout"
        );
    }
    tracing::debug!(
        conn = %conn.name,
        from_ms = ms(before),
        to_ms = ms(plan.reorder_timeout),
        "reorder timeout changed"
    );
}

/// Publishes each path's view for status and metrics, with its smoothed
/// shares of the data sent and received since the last round.
pub(super) fn publish_views(
    conn: &ConnShared,
    session: &Session,
    table: &PathTable,
    models: &[(PathModel, Duration)],
    now: Instant,
) {
    // Each path's share of the data sent since the last round.
    let mut sent = [0u64; mpt_proto::sched::MAX_PATHS];
    for (id, _) in session.paths() {
        if let Some(shared) = table.get(id) {
            let before = lock_unpoisoned(&shared.view).share_tx_bytes;
            sent[id] = shared.tx_data_bytes.get().saturating_sub(before);
        }
    }
    let total: u64 = sent.iter().sum();
    // The same for what arrived.
    let mut got = [0u64; mpt_proto::sched::MAX_PATHS];
    for (id, _) in session.paths() {
        if let Some(shared) = table.get(id) {
            let before = lock_unpoisoned(&shared.view).share_rx_bytes;
            got[id] = shared.rx_data_bytes.get().saturating_sub(before);
        }
    }
    let got_total: u64 = got.iter().sum();
    let standing = |p: &mpt_proto::path::Path| p.rx_owd_standing(now).map(|(o, _)| o);
    let conn_ns = now.saturating_duration_since(conn.epoch).as_nanos() as u64;
    let rx_owd_lo =
        owd_bounds(session.paths().filter_map(|(_, p)| standing(p))).map(|(lo, _, _)| lo);
    for (id, p) in session.paths() {
        let Some(shared) = table.get(id) else {
            continue;
        };
        let (model, _) = models.get(id).copied().unwrap_or_default();
        let (old, old_rx, share_at) = {
            let g = lock_unpoisoned(&shared.view);
            (
                (g.share, g.share_tx_bytes),
                (g.rx_share, g.share_rx_bytes),
                g.share_at,
            )
        };
        // Smoothed over time: the weight of this round's sample
        // grows with the time it covers.
        let alpha = share_weight(share_at, now);
        let (rx_share, share_rx_bytes) = if got_total > 0 {
            (
                smoothed_share(old_rx.0, got[id], got_total, alpha),
                old_rx.1 + got[id],
            )
        } else {
            old_rx
        };
        // A path that brought no data lately carries nothing,
        // whatever its share was when data last came.
        let last_data_ns = shared.rx_summary_last_ns.load(Relaxed);
        let rx_share = if share_idle(last_data_ns, conn_ns) {
            0.0
        } else {
            rx_share
        };
        let (share, share_tx_bytes) = if total > 0 {
            (
                smoothed_share(old.0, sent[id], total, alpha),
                old.1 + sent[id],
            )
        } else {
            old
        };
        let d = p.delivery();
        let view = PathView {
            rate_bps: d.rate_bps(),
            rate_confirmed: d.confirmed(),
            owd_ms: (d.owd_min_us().is_some() || p.rtt().min().is_some())
                .then(|| model.owd_ns as f64 / 1e6),
            queue_ms: d.queueing_delay().map(|q| q.as_secs_f64() * 1e3),
            rx_owd_ms: match (standing(p), rx_owd_lo) {
                (Some(o), Some(lo)) if !seq_before(o, lo) => {
                    Some(f64::from(o.wrapping_sub(lo)) / 1e3)
                }
                _ => None,
            },
            lossy: model.lossy,
            share,
            share_tx_bytes,
            rx_share,
            share_rx_bytes,
            share_at: Some(now),
            state: p.state().as_str(),
            rtt_ms: p.rtt().smoothed().map(|d| d.as_secs_f64() * 1e3),
            rtt_min_ms: p.rtt().min().map(|d| d.as_secs_f64() * 1e3),
            loss_pct: p.loss().loss_pct(),
            last_change: p.last_change(),
            last_rx: p.last_rx(),
            peer_weight_in: p.peer_weight_in(),
        };
        *lock_unpoisoned(&shared.view) = view;
    }
}
