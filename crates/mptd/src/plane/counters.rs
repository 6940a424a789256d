//! Counters of the data plane, declared once: drops by reason, copies,
//! equalisation holds, repair. Workers add to them once per batch; status
//! and metrics read them.
//!
//! Each group is declared with [`counter_group!`], which writes the struct
//! and an `each()` that lists every counter with its external name, so a
//! counter's name is written once: the field name is the status JSON key
//! and the metrics label value (`as "name"` keeps an external name that
//! differs from the field's). Adding a counter to a group adds it to the
//! status and the metrics that iterate the group.

/// Declares a group of [`crate::sync::Counter`]s: the struct (with
/// `Debug` and `Default`), its docs, and `each()`, which returns every
/// counter as `(external name, value)` in declaration order. The external
/// name is the field's own, or the string after `as`:
///
/// ```text
/// counter_group! {
///     /// Daemon-wide counters of the transmit stage.
///     pub struct TxStats {
///         /// Tun packets whose destination matches no connection.
///         no_route,
///         /// Tun read errors.
///         tun_errors as "tun_read_errors",
///     }
/// }
/// ```
macro_rules! counter_group {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field:ident $(as $external:literal)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $name {
            $(
                $(#[$field_meta])*
                pub $field: $crate::sync::Counter,
            )*
        }

        impl $name {
            /// Every counter of the group as (external name, current
            /// value), in declaration order: the status JSON keys and the
            /// metrics label values.
            pub fn each(&self) -> [(&'static str, u64); $crate::plane::counters::counter_group!(@count $($field)*)] {
                [$(($crate::plane::counters::counter_group!(@name $field $($external)?), self.$field.get())),*]
            }
        }
    };
    (@name $field:ident) => { stringify!($field) };
    (@name $field:ident $external:literal) => { $external };
    (@count) => { 0usize };
    (@count $head:ident $($rest:ident)*) => { 1usize + $crate::plane::counters::counter_group!(@count $($rest)*) };
}
pub(crate) use counter_group;

counter_group! {
    /// Why datagrams or packets were dropped, per connection.
    pub struct Drops {
        /// Shorter than the header.
        too_short,
        /// Unknown protocol version.
        bad_version,
        /// Anything else that did not decode (type, flags, body, inner packet).
        malformed,
        /// Header names another connection.
        unknown_connection,
        /// Failed authentication (sealed messages we cannot open).
        auth,
        /// Replayed sequence numbers.
        replay,
        /// Message types this version does not handle.
        unsupported,
        /// Tun packets with no usable path.
        no_path,
        /// Tun packets for a path whose remote address is not known yet.
        no_remote,
        /// Datagrams the kernel refused to send.
        send_error,
        /// Control datagrams dropped because the control loop was busy.
        control_queue_full,
        /// Tun packets dropped because no session keys are established yet.
        no_session,
        /// Handshake messages refused by the rate limiter.
        handshake_rate_limited,
        /// Failed tun writes of received data.
        tun_write,
        /// Cleartext datagrams from another address or port than the path's
        /// configured remote (a cleartext path trusts nothing else).
        wrong_source,
        /// Control messages on a connection without a key: nobody can be told
        /// from an impostor there, so they are never obeyed.
        unauthenticated_control,
        /// Inner packets whose source address is none of the peer's tunnel
        /// addresses or `networks` (one peer posing as another).
        inner_source,
        /// Authentic handshake messages carrying our own instance id (our own
        /// messages sent back to us).
        handshake_reflected,
        /// Authentic Inits that were not provably fresh (after a restart, a
        /// replay, a peer clock behind): answered with a Challenge, no keys.
        handshake_challenged,
        /// Noise initiations on the connection's own port whose mac1 was
        /// not made for our public key: dropped by the receive worker,
        /// never queued for the control loop.
        bad_mac1,
    }
}

counter_group! {
    /// Redundancy counters of a connection: second copies of real-time
    /// packets on another path. (The status and the metrics name these
    /// differently, `copies_sent` and `sent`: they list them by name.)
    pub struct CopyCounters {
        /// Copies sent.
        sent,
        /// Their bytes (UDP payload): the price of redundancy.
        sent_bytes,
        /// Copies that arrived before their original (the original was late
        /// or lost): what redundancy saved.
        first,
        /// Second arrivals of a copied packet, dropped as expected.
        duplicates,
    }
}

counter_group! {
    /// Delay equalisation counters of a connection (see `crate::dataplane::equalize`):
    /// data held before the resequencer until the slowest path's delay.
    /// (Shown converted, µs to ms or s: the status and the metrics list
    /// them by name.)
    pub struct EqualizeCounters {
        /// Data datagrams held (for at least `equalize::MIN_HOLD`).
        held,
        /// Their holds summed, µs.
        held_us,
    }
}

counter_group! {
    /// Loss repair counters of a connection (see `repair`).
    pub struct RepairCounters {
        /// Requests sent for holes judged random.
        requested,
        /// Datagrams those requests named.
        requested_datagrams,
        /// Holes while a queue stood: left to TCP.
        congestion_holes,
        /// Holes not asked for (request budget spent, run too long).
        unrequested,
        /// Holes that filled within the path's reorder window (overtaken
        /// datagrams, not losses).
        reordered_holes,
        /// Datagrams that arrived after their repair was asked for.
        needless,
        /// The peer's requests received.
        peer_requests,
        /// Copies sent in answer.
        sent,
        /// Requested datagrams no longer (or never) kept.
        missed,
        /// Copies received and delivered.
        received,
        /// Copies of datagrams that had arrived after all.
        duplicates,
    }
}

counter_group! {
    /// What the transmit stage did to the TCP segments of a connection.
    pub struct TcpCounters {
        /// SYNs (and SYN-ACKs) read from tun whose MSS option was lowered to
        /// fit the tunnel MTU (`[tunnel] mss_clamp`).
        mss_clamped,
    }
}

counter_group! {
    /// Daemon-wide counters of the transmit stage (shown as drops of no
    /// connection).
    pub struct TxStats {
        /// Tun packets whose destination matches no connection.
        no_route,
        /// Tun read errors.
        tun_errors as "tun_read_errors",
        /// Handshake messages dropped because the control loop's
        /// handshake queue was full (a flood; see `plane/queue.rs`).
        handshake_queue_full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lists_every_counter_by_its_external_name() {
        let tx = TxStats::default();
        tx.no_route.add(2);
        tx.tun_errors.add(5);
        assert_eq!(
            tx.each(),
            [
                ("no_route", 2),
                ("tun_read_errors", 5),
                ("handshake_queue_full", 0)
            ]
        );
        let d = Drops::default();
        d.handshake_challenged.add(7);
        let each = d.each();
        assert_eq!(each.len(), 20);
        assert_eq!(each[0], ("too_short", 0));
        assert_eq!(each[18], ("handshake_challenged", 7));
        assert_eq!(RepairCounters::default().each().len(), 11);
    }
}
