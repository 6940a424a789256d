//! A transmit worker's batch: its buffers, allocated once per worker and
//! reused for every batch (nothing on the hot path allocates), the plan
//! that orders its packets by connection and path, and the groups headed
//! for sealing and sending.

use std::sync::Arc;

use mpt_proto::crypto::SessionKeys;
use mpt_proto::wire::{FLOW_PREFIX_LEN, HEADER_LEN};
use tun_rs::{IDEAL_BATCH_SIZE, VIRTIO_NET_HDR_LEN};

use crate::plane::{PathShared, Remote};

/// Where the IP packet starts in a transmit buffer: our header and the
/// flow prefix go in front of it, so the datagram is built in place
/// without a copy.
pub(super) const PACKET_OFFSET: usize = HEADER_LEN + FLOW_PREFIX_LEN;

/// Most datagrams in one GSO send (the kernel's UDP_MAX_SEGMENTS is 64
/// on older kernels, 128 on newer ones).
pub(super) const MAX_GSO_SEGMENTS: usize = crate::io::udp::MAX_GSO_PARTS;

/// Most bytes in one GSO send: the UDP payload of one IP packet, less room
/// for IPv6 extension headers.
pub(super) const MAX_GSO_BYTES: usize = 65000;

/// Packets one transmit batch holds. The first (blocking) read of a batch
/// may split a TCP super-packet into up to [`IDEAL_BATCH_SIZE`] segments;
/// while at least that many buffers are left, further reads that do not
/// wait add whatever else the tun queue holds. Without them a packet that
/// comes alone (UDP, QUIC, voice, ACKs: no super-packets) was a batch of
/// one: one route, one seal and one send per packet, where a batch shares
/// the sends per path (GSO) and the crypto stage's work.
pub(super) const TX_BATCH: usize = 2 * IDEAL_BATCH_SIZE;

/// Tun reads failing in a row (with errors not known to mean the device is
/// gone) before the daemon gives up instead of spinning on them.
pub(super) const MAX_READ_ERRORS: u32 = 10_000;

/// One packet's place in a batch, packed so that sorting groups packets by
/// connection and path while keeping their tun order:
/// connection (8 bits) | path (8) | rank within the connection (24) |
/// buffer index (24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct PlanEntry(u64);

impl PlanEntry {
    pub(super) fn new(conn: usize, path: usize, rank: u32, buf: usize) -> PlanEntry {
        PlanEntry(
            ((conn as u64 & 0xff) << 56)
                | ((path as u64 & 0xff) << 48)
                | ((u64::from(rank) & 0xff_ffff) << 24)
                | (buf as u64 & 0xff_ffff),
        )
    }
    pub(super) fn conn(self) -> usize {
        (self.0 >> 56) as usize
    }
    pub(super) fn path(self) -> usize {
        ((self.0 >> 48) & 0xff) as usize
    }
    /// Connection and path: the send group.
    pub(super) fn group(self) -> u64 {
        self.0 >> 48
    }
    pub(super) fn rank(self) -> u32 {
        ((self.0 >> 24) & 0xff_ffff) as u32
    }
    pub(super) fn buf(self) -> usize {
        (self.0 & 0xff_ffff) as usize
    }
}

/// A group (one connection, one path) of a batch, headed and ready to be
/// sealed and sent.
pub(super) struct Prepared {
    /// The group's entries: `plan[start..end]`.
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) path: Arc<PathShared>,
    /// Where to, and from which local address (a learnt client path).
    pub(super) remote: Remote,
    /// The keys its datagrams are sealed with (kept alive for the seal
    /// items that point at them).
    pub(super) keys: Option<Arc<SessionKeys>>,
    pub(super) conn_ns: u64,
}

/// `copy_to` entry of a packet without a redundancy copy.
pub(super) const NO_COPY: u8 = u8::MAX;

/// Everything one batch uses, indexed by buffer (`i`: the packet's place
/// in the tun reads) unless said otherwise.
pub(super) struct TxBatch {
    /// The tun read's super-packet before it is split into `bufs`.
    pub original: Vec<u8>,
    /// One datagram each: room for our header and flow prefix
    /// ([`PACKET_OFFSET`]), the packet, and the AEAD tag.
    pub bufs: Vec<Vec<u8>>,
    /// Each packet's length.
    pub sizes: Vec<usize>,
    /// The batch's packets that go somewhere, sorted by connection, path
    /// and rank before heading.
    pub plan: Vec<PlanEntry>,
    /// The connections this batch routes to (by index).
    pub touched: Vec<usize>,
    /// Counts batches: a connection was touched by this one when its
    /// `TxConn::stamp` equals it.
    pub batch_no: u64,
    /// The path a packet's redundancy copy goes on, or [`NO_COPY`].
    pub copy_to: Vec<u8>,
    /// Where a redundancy copy is sealed.
    pub copy_buf: Vec<u8>,
    /// Each packet's flow hash.
    pub hashes: Vec<u32>,
    /// Each packet's distance to its flow predecessor (the flow prefix).
    pub gaps: Vec<u32>,
    /// The headed groups, in plan order.
    pub prepared: Vec<Prepared>,
    /// The datagrams the crypto stage seals.
    pub seals: Vec<super::seal::SealItem>,
    /// Whether a packet's datagram counts as sent (headed and, with keys,
    /// sealed).
    pub counted: Vec<bool>,
}

impl TxBatch {
    /// Buffers for packets of up to `mtu` bytes, sized for `conns`
    /// connections.
    pub fn new(mtu: usize, conns: usize) -> TxBatch {
        let seg_len = PACKET_OFFSET + mtu + 64;
        TxBatch {
            original: vec![0u8; VIRTIO_NET_HDR_LEN + 65535],
            bufs: (0..TX_BATCH).map(|_| vec![0u8; seg_len]).collect(),
            sizes: vec![0usize; TX_BATCH],
            plan: Vec::with_capacity(TX_BATCH),
            touched: Vec::with_capacity(conns.min(TX_BATCH)),
            batch_no: 0,
            copy_to: vec![NO_COPY; TX_BATCH],
            copy_buf: vec![0u8; mpt_proto::wire::MAX_DATAGRAM],
            hashes: vec![0u32; TX_BATCH],
            gaps: vec![0u32; TX_BATCH],
            prepared: Vec::with_capacity(TX_BATCH),
            seals: Vec::with_capacity(TX_BATCH),
            counted: vec![false; TX_BATCH],
        }
    }
}
