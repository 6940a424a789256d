//! A receive batch: one `recvmmsg` on one socket, and the buffers it is
//! read into.
//!
//! The buffers are allocated once per worker and reused for every batch;
//! each stage works on the datagrams where the kernel put them (opened in
//! place, checked and handed on as slices of them), so nothing on the
//! receive path copies a datagram before the delay line or the
//! resequencer stores it, and nothing allocates.

use crate::io::udp::RecvMeta;
use crate::plane::PathShared;

/// Length of a receive buffer: with UDP GRO the kernel coalesces up to
/// 64 KB of datagrams into one message.
pub const RECV_LEN: usize = 65536;

/// Messages per `recvmmsg`: 32 coalesced messages of up to 64 KB (2 MB of
/// buffers per connection) drain a busy socket in one call.
pub const RECV_MESSAGES: usize = 32;

/// A worker's receive buffers, one per message of a batch.
pub fn buffers() -> Vec<Vec<u8>> {
    (0..RECV_MESSAGES).map(|_| vec![0u8; RECV_LEN]).collect()
}

/// One batch of one connection's datagrams of one path, as the stages
/// take it.
#[derive(Debug)]
pub struct Batch<'b> {
    /// The path id: the socket's path, or on a shared port the path the
    /// headers name (the whole group is one path).
    pub pi: usize,
    /// The path, if the connection has it (a shared port hears paths of a
    /// client before the control loop adds them).
    pub path: Option<&'b PathShared>,
    /// The messages' buffers.
    pub bufs: &'b mut [Vec<u8>],
    /// What the kernel said of each message.
    pub meta: &'b [RecvMeta],
}
