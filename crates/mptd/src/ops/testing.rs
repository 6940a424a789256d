//! Test helpers of the operator servers: a [`StatusSource`] with a
//! connection whose counters all differ, built without root (a path
//! socket on the loopback, no tun).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_proto::reorder::Resequencer;
use mpt_proto::sched::SchedPath;

use crate::ops::source::StatusSource;
use crate::plane::{ConnCrypto, ConnSet, ConnShared, PathShared, PathTable, TxStats, TxWakes};

/// A status source with one connection `conn` and one path `p0`, every
/// counter of the groups set to a distinct value.
pub(crate) fn one_connection(conn: &str) -> StatusSource {
    with_crypto(conn, None)
}

/// [`one_connection`] with the connection's keys.
pub(crate) fn with_crypto(conn: &str, crypto: Option<ConnCrypto>) -> StatusSource {
    let now = Instant::now();
    let socket = crate::io::udp::PathSocket::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let remote = Some("127.0.0.2:5000".parse().unwrap());
    let sched = SchedPath {
        weight: 3,
        window: 1,
    };
    let path = PathShared::new(0, "p0".into(), socket, remote, sched, 1, now);
    path.tx_bytes.add(1234);
    let c = ConnShared::new(
        0,
        conn.into(),
        1,
        now,
        PathTable::new([path]),
        crypto,
        crate::plane::route::SourceFilter::default(),
        Resequencer::new(16, 1500, Duration::from_millis(25)),
        Duration::from_millis(25),
        Some(crate::io::udp::Waker::new().unwrap()),
        TxWakes(Arc::new(Vec::new())),
    );
    let mut n = 100;
    let mut next = || {
        n += 1;
        n
    };
    macro_rules! fill {
        ($group:expr, $($field:ident),*) => { $( $group.$field.add(next()); )* };
    }
    fill!(
        c.drops,
        too_short,
        bad_version,
        malformed,
        unknown_connection,
        auth,
        replay,
        unsupported,
        no_path,
        no_remote,
        send_error,
        control_queue_full,
        no_session,
        handshake_rate_limited,
        tun_write,
        wrong_source,
        unauthenticated_control,
        inner_source,
        handshake_reflected,
        handshake_challenged
    );
    fill!(
        c.repairs,
        requested,
        requested_datagrams,
        congestion_holes,
        unrequested,
        reordered_holes,
        needless,
        peer_requests,
        sent,
        missed,
        received,
        duplicates
    );
    fill!(c.copies, sent, sent_bytes, first, duplicates);
    fill!(c.equalized, held, held_us);
    let tx = TxStats::default();
    fill!(tx, no_route, tun_errors);
    fill!(c.tcp, mss_clamped);
    let conns = Arc::new(vec![Arc::new(c)]);
    let (commands, _) = std::sync::mpsc::sync_channel(1);
    StatusSource {
        conns: Arc::new(ConnSet::new(conns, Arc::default())),
        tx: Arc::new(tx),
        tun_name: "mpt0".into(),
        started: now,
        commands,
        netlink: None,
        noise: None,
        shared: None,
        hooks: None,
        routing: Default::default(),
        accel: None,
    }
}
