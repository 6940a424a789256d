//! Counters of the data plane, declared once: drops by reason, copies,
//! equalisation holds, repair. Workers add to them once per batch; status
//! and metrics read them.

use crate::sync::Counter;
/// Why datagrams or packets were dropped, per connection.
#[derive(Debug, Default)]
pub struct Drops {
    /// Shorter than the header.
    pub too_short: Counter,
    /// Unknown protocol version.
    pub bad_version: Counter,
    /// Anything else that did not decode (type, flags, body, inner packet).
    pub malformed: Counter,
    /// Header names another connection.
    pub unknown_connection: Counter,
    /// Failed authentication (sealed messages we cannot open).
    pub auth: Counter,
    /// Replayed sequence numbers.
    pub replay: Counter,
    /// Message types this version does not handle.
    pub unsupported: Counter,
    /// Tun packets with no usable path.
    pub no_path: Counter,
    /// Tun packets for a path whose remote address is not known yet.
    pub no_remote: Counter,
    /// Datagrams the kernel refused to send.
    pub send_error: Counter,
    /// Control datagrams dropped because the control loop was busy.
    pub control_queue_full: Counter,
    /// Tun packets dropped because no session keys are established yet.
    pub no_session: Counter,
    /// Handshake messages refused by the rate limiter.
    pub handshake_rate_limited: Counter,
    /// Failed tun writes of received data.
    pub tun_write: Counter,
    /// Cleartext datagrams from another address or port than the path's
    /// configured remote (a cleartext path trusts nothing else).
    pub wrong_source: Counter,
    /// Control messages on a connection without a key: nobody can be told
    /// from an impostor there, so they are never obeyed.
    pub unauthenticated_control: Counter,
    /// Inner packets whose source address is none of the peer's tunnel
    /// addresses or `networks` (one peer posing as another).
    pub inner_source: Counter,
    /// Authentic handshake messages carrying our own instance id (our own
    /// messages sent back to us).
    pub handshake_reflected: Counter,
    /// Authentic Inits that were not provably fresh (after a restart, a
    /// replay, a peer clock behind): answered with a Challenge, no keys.
    pub handshake_challenged: Counter,
}

/// Redundancy counters of a connection: second copies of real-time
/// packets on another path.
#[derive(Debug, Default)]
pub struct CopyCounters {
    /// Copies sent.
    pub sent: Counter,
    /// Their bytes (UDP payload): the price of redundancy.
    pub sent_bytes: Counter,
    /// Copies that arrived before their original (the original was late
    /// or lost): what redundancy saved.
    pub first: Counter,
    /// Second arrivals of a copied packet, dropped as expected.
    pub duplicates: Counter,
}

/// Delay equalisation counters of a connection (see `crate::dataplane::equalize`):
/// data held before the resequencer until the slowest path's delay.
#[derive(Debug, Default)]
pub struct EqualizeCounters {
    /// Data datagrams held (for at least `equalize::MIN_HOLD`).
    pub held: Counter,
    /// Their holds summed, µs.
    pub held_us: Counter,
}

/// Loss repair counters of a connection (see `repair`).
#[derive(Debug, Default)]
pub struct RepairCounters {
    /// Requests sent for holes judged random.
    pub requested: Counter,
    /// Datagrams those requests named.
    pub requested_datagrams: Counter,
    /// Holes while a queue stood: left to TCP.
    pub congestion_holes: Counter,
    /// Holes not asked for (request budget spent, run too long).
    pub unrequested: Counter,
    /// Holes that filled within the path's reorder window (overtaken
    /// datagrams, not losses).
    pub reordered_holes: Counter,
    /// Datagrams that arrived after their repair was asked for.
    pub needless: Counter,
    /// The peer's requests received.
    pub peer_requests: Counter,
    /// Copies sent in answer.
    pub sent: Counter,
    /// Requested datagrams no longer (or never) kept.
    pub missed: Counter,
    /// Copies received and delivered.
    pub received: Counter,
    /// Copies of datagrams that had arrived after all.
    pub duplicates: Counter,
}

/// Daemon-wide counters of the transmit stage.
#[derive(Debug, Default)]
pub struct TxStats {
    /// Tun packets whose destination matches no connection.
    pub no_route: Counter,
    /// Tun read errors.
    pub tun_errors: Counter,
}
