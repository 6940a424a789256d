//! The flow prefix: 4 bytes in front of a data datagram's IP packet, set
//! when the header carries [`Flags::FLOW`](super::Flags::FLOW). They tell
//! the receiver which earlier datagram of the same flow this one follows,
//! so it can release each flow in its own order instead of holding every
//! flow behind the global sequence (see `docs/PROTOCOL.md`, "Data with the FLOW flag").

use crate::wire::error::{DecodeError, EncodeError};

/// Length of the flow prefix that starts a data payload with
/// [`Flags::FLOW`](super::Flags::FLOW).
pub const FLOW_PREFIX_LEN: usize = 4;

/// Splits a [`Flags::FLOW`](super::Flags::FLOW) data payload into its
/// `flow_gap` and the IP packet after it.
///
/// `flow_gap` is this datagram's `seq` minus the `seq` of the previous data
/// datagram its sender sent in the same flow bucket; 0 means no known
/// predecessor (deliver at once). The receiver turns it into the sequence
/// number to wait for with [`flow_predecessor`]. The packet is returned
/// unchecked: run [`check_ip_packet`](super::check_ip_packet) on it as on
/// any data payload. A payload shorter than the prefix is `BadBodyLength`.
#[inline]
pub fn split_flow_prefix(payload: &[u8]) -> Result<(u32, &[u8]), DecodeError> {
    match payload.split_first_chunk::<FLOW_PREFIX_LEN>() {
        Some((gap, packet)) => Ok((u32::from_be_bytes(*gap), packet)),
        None => Err(DecodeError::BadBodyLength {
            len: payload.len(),
            expected: FLOW_PREFIX_LEN,
        }),
    }
}

/// Writes the flow prefix carrying `flow_gap` into the first
/// [`FLOW_PREFIX_LEN`] bytes of `buf` (the IP packet goes right after it).
#[inline]
pub fn emit_flow_prefix(flow_gap: u32, buf: &mut [u8]) -> Result<(), EncodeError> {
    let have = buf.len();
    let Some(out) = buf.first_chunk_mut::<FLOW_PREFIX_LEN>() else {
        return Err(EncodeError::BufferTooSmall {
            needed: FLOW_PREFIX_LEN,
            have,
        });
    };
    *out = flow_gap.to_be_bytes();
    Ok(())
}

/// The sequence number a flow-prefixed datagram `seq` waits for: `None`
/// when `flow_gap` is 0 (it depends on nothing) or points below 0 (a
/// broken or hostile sender; it then waits for nothing either, which is no
/// worse than a gap of 0).
#[inline]
pub fn flow_predecessor(seq: u64, flow_gap: u32) -> Option<u64> {
    if flow_gap == 0 {
        return None;
    }
    seq.checked_sub(u64::from(flow_gap))
}
