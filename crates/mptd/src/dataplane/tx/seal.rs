//! The seal stage: a batch's datagrams handed to the crypto stage as one
//! job (split over its helpers when large enough), each sealed in place in
//! its own buffer.

use mpt_proto::crypto::SessionKeys;

use super::batch::TxBatch;
use crate::dataplane::crypto_pool::Submitter;

/// A datagram to seal, as handed to the crypto stage: the buffer holds
/// header, payload and room for the tag.
#[derive(Debug, Clone, Copy)]
pub(super) struct SealItem {
    pub(super) buf: *mut u8,
    pub(super) cap: usize,
    pub(super) payload_len: usize,
    pub(super) keys: *const SessionKeys,
    /// Index of the buffer in the batch.
    pub(super) index: usize,
    pub(super) ok: bool,
}

// SAFETY: `buf` points at one of the worker's transmit buffers (a
// different one for each item) and `keys` at keys a `Prepared` of the same
// batch keeps alive; both are lent to the crypto stage only for the
// duration of `Submitter::run`.
unsafe impl Send for SealItem {}

/// Seals a chunk of a batch's datagrams in place (run by the crypto stage,
/// on any thread).
pub(super) fn seal_items(chunk: &mut [SealItem]) {
    for it in chunk {
        // SAFETY: see `SealItem`.
        let (buf, keys) = unsafe { (std::slice::from_raw_parts_mut(it.buf, it.cap), &*it.keys) };
        it.ok = keys.seal_datagram(buf, it.payload_len).is_ok();
    }
}

/// Seals every datagram the heading queued (one job for the crypto stage,
/// split over its helpers when the batch is large enough); one that fails
/// no longer counts as sent.
pub(super) fn seal_batch(batch: &mut TxBatch, submitter: &mut Submitter) {
    if batch.seals.is_empty() {
        return;
    }
    submitter.run(
        batch.seals.as_mut_slice(),
        &|chunk: &mut [SealItem], _: &mut Vec<u8>| seal_items(chunk),
    );
    for it in &batch.seals {
        if !it.ok {
            batch.counted[it.index] = false;
        }
    }
}
