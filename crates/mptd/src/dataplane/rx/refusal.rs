//! Why the receive path refused a datagram, and the counter each reason
//! goes to.
//!
//! The stages that judge a datagram (open, check) say why they refuse it
//! and count nothing themselves; the driver counts each refusal once, on
//! the connection's counter for it, so every reason has one place where
//! it is counted and a test can see both the reason and the counter.

use crate::plane::ConnShared;
use crate::sync::Counter;

/// Why a datagram (or a whole received message) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than the header.
    TooShort,
    /// Unknown protocol version.
    BadVersion,
    /// Did not decode: truncated message, type, flags, length, body or
    /// inner packet.
    Malformed,
    /// The header names another connection.
    UnknownConnection,
    /// On a shared port: the header names another path than the group's.
    NoPath,
    /// A message type this connection does not take here.
    Unsupported,
    /// Sealed when it must not be, or not when it must, or no key opens it.
    Auth,
    /// A sequence number already accepted.
    Replay,
    /// A second arrival of a datagram sent twice (redundancy): expected,
    /// not an attack.
    CopyDuplicate,
    /// A repair of a datagram that arrived after all.
    RepairDuplicate,
    /// Cleartext, and not from the path's configured remote.
    WrongSource,
    /// An inner packet from an address the peer is not routed for.
    InnerSource,
    /// A control message on a connection without a key (never obeyed).
    UnauthenticatedControl,
    /// A queue (to the control loop, of repair answers) was full.
    QueueFull,
    /// A Noise initiation whose mac1 was not made for our public key.
    BadMac1,
}

impl Refusal {
    /// The connection's counter of this reason.
    pub fn counter(self, conn: &ConnShared) -> &Counter {
        let d = &conn.drops;
        match self {
            Refusal::TooShort => &d.too_short,
            Refusal::BadVersion => &d.bad_version,
            Refusal::Malformed => &d.malformed,
            Refusal::UnknownConnection => &d.unknown_connection,
            Refusal::NoPath => &d.no_path,
            Refusal::Unsupported => &d.unsupported,
            Refusal::Auth => &d.auth,
            Refusal::Replay => &d.replay,
            Refusal::CopyDuplicate => &conn.copies.duplicates,
            Refusal::RepairDuplicate => &conn.repairs.duplicates,
            Refusal::WrongSource => &d.wrong_source,
            Refusal::InnerSource => &d.inner_source,
            Refusal::UnauthenticatedControl => &d.unauthenticated_control,
            Refusal::QueueFull => &d.control_queue_full,
            Refusal::BadMac1 => &d.bad_mac1,
        }
    }

    /// Counts `n` datagrams refused for this reason.
    #[inline]
    pub fn count(self, conn: &ConnShared, n: u64) {
        self.counter(conn).add(n);
    }
}
