//! Stage 1 of the receive path: open. Sealed datagrams are opened in
//! place with the connection's keys, and each key set's replay window
//! says which sequence numbers it still takes.
//!
//! A connection has up to three key sets at once (current, pending,
//! previous; see `crate::plane::ConnCrypto`), tried in that order, each
//! with its own replay window, kept as long as the same keys stay
//! whatever their role. The worker copies them when their generation
//! changes ([`Opener::refresh`], once per batch).
//!
//! Opening is cut in two so that a large batch is opened on several cores
//! and still judged in order. Before the batch ([`Opener::open_batch`])
//! every sealed datagram is noted with the key slots whose windows, as
//! they stand before the batch, would take its sequence number, and the
//! crypto stage (`crate::dataplane::crypto_pool`) opens them in place, in
//! parallel chunks. Then, datagram by datagram in batch order, the check
//! stage asks [`Opener::open`] for the verdict: the window of the key that
//! opened it is checked and updated only then, so a datagram that arrived
//! twice in one batch is accepted once. A datagram the crypto stage did
//! not take (beyond [`MAX_OPENS`], or moved since) is opened inline.

use std::sync::Arc;
use std::time::Instant;

use mpt_proto::crypto::{ReplayWindow, SessionKeys, TAG_LEN};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};

use crate::dataplane::crypto_pool::Submitter;
use crate::dataplane::rx::batch::{RECV_LEN, RECV_MESSAGES};
use crate::dataplane::rx::refusal::Refusal;
use crate::io::udp::RecvMeta;
use crate::plane::ConnShared;

/// Which of the connection's key sets (see `ConnCrypto`) a receive slot
/// holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyRole {
    /// Seals; opens first.
    Current,
    /// Answered handshake awaiting confirmation: the first datagram it
    /// opens makes it current.
    Pending,
    /// Before the last switch: opens stragglers for a while.
    Previous,
}

/// One key set as the worker holds it, with its own replay window.
struct RxKey {
    role: KeyRole,
    keys: Arc<SessionKeys>,
    replay: ReplayWindow,
}

/// The key sets a worker last saw, in the order they are tried, each with
/// its replay window. A shared worker swaps in the slots of the connection
/// whose datagrams it handles (see `ConnRxState`): a pointer swap.
pub struct KeySlots {
    slots: Box<[Option<RxKey>; 3]>,
    /// `ConnCrypto::generation` of `slots`.
    generation: u64,
    /// The peer was seen sealing with the current keys.
    peer_on_current: bool,
}

impl KeySlots {
    /// No keys yet.
    pub fn new() -> KeySlots {
        KeySlots {
            slots: Box::new([None, None, None]),
            generation: 0,
            peer_on_current: false,
        }
    }
}

/// A datagram of a batch as the crypto stage opens it: where it is, which
/// key slots may open it, which did. Filled in batch order before the
/// parallel part, read in the same order after it.
#[derive(Debug, Clone, Copy)]
pub struct OpenItem {
    /// The datagram, inside one of the worker's receive buffers.
    ptr: *mut u8,
    len: usize,
    /// Slots (bit i: `KeySlots::slots[i]`) whose replay window accepted
    /// the sequence number before the batch; 0: not for the crypto stage
    /// (not sealed, not ours, or no slot may take it): opened, or refused,
    /// inline as before.
    candidates: u8,
    /// Some slot's window refused it before the batch.
    replayed: bool,
    /// The slot whose keys opened it, or [`NOT_OPENED`].
    opened: u8,
}

/// `OpenItem::opened` of a datagram no candidate key opened.
const NOT_OPENED: u8 = u8::MAX;

// SAFETY: `ptr` points into a receive buffer the worker owns and lends to
// the crypto stage only for the duration of `Submitter::run`; each item's
// bytes are disjoint from every other item's.
unsafe impl Send for OpenItem {}

/// Most datagrams one batch hands to the crypto stage: UDP GRO coalesces
/// at most 64 datagrams per message (UDP_GRO_CNT_MAX); beyond this
/// (never, in practice) the rest are opened inline.
pub const MAX_OPENS: usize = RECV_MESSAGES * 64;

/// The open stage of a worker: the key slots in use, and what the crypto
/// stage made of the current batch.
pub struct Opener {
    keys: KeySlots,
    /// A copy of the datagram being opened when more than one key set may
    /// be tried (a failed open leaves the buffer garbled). Allocated once.
    scratch: Vec<u8>,
    /// The batch's datagrams as handed to the crypto stage, one per
    /// datagram in batch order (allocated once).
    opens: Vec<OpenItem>,
    /// This worker's way into the crypto stage.
    submitter: Submitter,
}

impl Opener {
    /// An open stage without keys, using the crypto stage through
    /// `submitter`.
    pub fn new(submitter: Submitter) -> Opener {
        Opener {
            keys: KeySlots::new(),
            scratch: Vec::with_capacity(RECV_LEN),
            opens: Vec::with_capacity(MAX_OPENS),
            submitter,
        }
    }

    /// Lends the key slots to `keys` and takes theirs (called again with
    /// the same `keys`, gives them back).
    pub fn swap_keys(&mut self, keys: &mut KeySlots) {
        std::mem::swap(&mut self.keys, keys);
    }

    /// Picks up changed key sets (checked once per batch); keys new to the
    /// worker start a new replay window.
    pub fn refresh(&mut self, conn: &ConnShared) {
        let Some(c) = &conn.crypto else { return };
        let generation = c.generation();
        let keys = &mut self.keys;
        if generation == keys.generation {
            return;
        }
        keys.generation = generation;
        let set = c.key_set();
        keys.peer_on_current = set.peer_on_current;
        let mut old = std::mem::take(&mut *keys.slots);
        let wanted = [
            (KeyRole::Current, set.current),
            (KeyRole::Pending, set.pending),
            (KeyRole::Previous, set.previous),
        ];
        for (slot, (role, k)) in keys.slots.iter_mut().zip(wanted) {
            let Some(k) = k else { continue };
            let replay = old
                .iter_mut()
                .find(|o| o.as_ref().is_some_and(|o| Arc::ptr_eq(&o.keys, &k)))
                .and_then(Option::take)
                .map_or_else(ReplayWindow::new, |o| o.replay);
            *slot = Some(RxKey {
                role,
                keys: k,
                replay,
            });
        }
    }

    /// The crypto stage's part of a batch: finds the sealed datagrams
    /// (in batch order, one [`OpenItem`] per datagram) and which key slots
    /// may open them (replay windows as they stand before the batch), then
    /// has them opened in place, in parallel for large batches. Nothing
    /// else is decided here: [`Opener::open`] is asked in batch order
    /// afterwards and updates the windows. Without a key, nothing to do.
    pub fn open_batch(&mut self, conn: &ConnShared, bufs: &mut [Vec<u8>], meta: &[RecvMeta]) {
        let Opener {
            keys,
            opens,
            submitter,
            ..
        } = self;
        opens.clear();
        if conn.crypto.is_none() {
            return;
        }
        let slots = &keys.slots;
        let present = slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .fold(0u8, |m, (i, _)| m | 1 << i);
        let mut sealed = 0usize;
        'batch: for (buf, m) in bufs.iter_mut().zip(meta) {
            if m.truncated {
                continue;
            }
            for dgram in m.datagrams_mut(buf) {
                if opens.len() == opens.capacity() {
                    break 'batch;
                }
                let mut item = OpenItem {
                    ptr: dgram.as_mut_ptr(),
                    len: dgram.len(),
                    candidates: 0,
                    replayed: false,
                    opened: NOT_OPENED,
                };
                if let Ok((h, _)) = Header::parse(dgram) {
                    if h.conn_id == conn.conn_id
                        && h.flags.contains(Flags::SEALED)
                        && dgram.len() >= HEADER_LEN + TAG_LEN
                        && !matches!(
                            h.msg_type,
                            MsgType::HandshakeInit
                                | MsgType::HandshakeResponse
                                | MsgType::HandshakeChallenge
                        )
                    {
                        for (i, slot) in slots.iter().enumerate() {
                            if let Some(k) = slot {
                                if k.replay.check(h.seq).is_ok() {
                                    item.candidates |= 1 << i;
                                }
                            }
                        }
                        item.replayed = present & !item.candidates != 0;
                        sealed += usize::from(item.candidates != 0);
                    }
                }
                opens.push(item);
            }
        }
        if sealed == 0 {
            return;
        }
        let keys: [Option<&SessionKeys>; 3] =
            [0, 1, 2].map(|i| slots.get(i).and_then(Option::as_ref).map(|k| &*k.keys));
        submitter.run(
            opens.as_mut_slice(),
            &|chunk: &mut [OpenItem], scratch: &mut Vec<u8>| open_items(chunk, &keys, scratch),
        );
    }

    /// What the crypto stage did with datagram `index` of the batch (in
    /// the order [`Opener::open_batch`] counted), if it tried it.
    #[inline]
    pub fn pre_opened(&self, index: usize) -> Option<OpenItem> {
        self.opens.get(index).copied().filter(|o| o.candidates != 0)
    }

    /// Opens a sealed datagram with `header`, in place: takes the crypto
    /// stage's verdict on it (`pre`), or opens it now. Returns the slot of
    /// the key set that opened it, its replay window updated.
    pub fn open(
        &mut self,
        conn: &ConnShared,
        dgram: &mut [u8],
        header: &Header,
        pre: Option<OpenItem>,
        now: Instant,
    ) -> Result<usize, Refusal> {
        let copied = header.flags.contains(Flags::COPY);
        match pre {
            Some(p) if p.len == dgram.len() => self.take_opened(conn, p, header.seq, copied, now),
            _ => self.open_sealed(conn, dgram, header.seq, copied, now),
        }
    }

    /// Takes the sequence number `original` of the data a repair carries
    /// into the replay window of the keys that opened the repair (slot
    /// `opened_by`). False if that data arrived before (or the repair is a
    /// replay); true without keys.
    pub fn take_original(&mut self, opened_by: Option<usize>, original: u64) -> bool {
        match opened_by
            .and_then(|i| self.keys.slots.get_mut(i))
            .and_then(Option::as_mut)
        {
            Some(k) => k.replay.check(original).is_ok() && k.replay.update(original).is_ok(),
            None => true,
        }
    }

    /// Opens a sealed datagram in place with the first key set that takes
    /// it (current, pending, previous), checking and then updating that
    /// set's replay window. Confirms pending keys that open it.
    fn open_sealed(
        &mut self,
        conn: &ConnShared,
        dgram: &mut [u8],
        seq: u64,
        copied: bool,
        now: Instant,
    ) -> Result<usize, Refusal> {
        let slots = &mut self.keys.slots;
        let candidates = slots.iter().flatten().count();
        let (mut tried, mut replayed) = (0usize, false);
        for i in 0..slots.len() {
            let Some(k) = &mut slots[i] else {
                continue;
            };
            if k.replay.check(seq).is_err() {
                replayed = true;
                continue;
            }
            if tried == 0 && candidates > 1 {
                self.scratch.clear();
                self.scratch.extend_from_slice(dgram);
            } else if tried > 0 {
                dgram.copy_from_slice(&self.scratch);
            }
            tried += 1;
            if k.keys.open_datagram(dgram).is_err() {
                continue;
            }
            if k.replay.update(seq).is_err() {
                return Err(Refusal::Replay);
            }
            return Ok(self.opened_with(conn, i, now));
        }
        Err(unopened(replayed, copied))
    }

    /// Takes the verdict of the crypto stage on a sealed datagram: opened
    /// by slot `pre.opened` (then its replay window is checked and updated
    /// now, in batch order: the authoritative decision, so a datagram that
    /// arrived twice in one batch is accepted once), or by none.
    fn take_opened(
        &mut self,
        conn: &ConnShared,
        pre: OpenItem,
        seq: u64,
        copied: bool,
        now: Instant,
    ) -> Result<usize, Refusal> {
        let i = usize::from(pre.opened);
        let Some(k) = self.keys.slots.get_mut(i).and_then(Option::as_mut) else {
            return Err(unopened(pre.replayed, copied));
        };
        if k.replay.update(seq).is_err() {
            // Accepted earlier in this batch: a copy or a replay.
            return Err(unopened(true, copied));
        }
        Ok(self.opened_with(conn, i, now))
    }

    /// A datagram opened with slot `i` (its window updated): notes that
    /// the peer uses the current keys, or confirms pending ones.
    fn opened_with(&mut self, conn: &ConnShared, i: usize, now: Instant) -> usize {
        let Some(c) = &conn.crypto else {
            return i;
        };
        let keys = &mut self.keys;
        if let Some(k) = keys.slots.get(i).and_then(Option::as_ref) {
            match k.role {
                KeyRole::Current => {
                    if !keys.peer_on_current {
                        keys.peer_on_current = true;
                        c.peer_uses(&k.keys, now);
                    }
                }
                KeyRole::Pending => {
                    if c.confirm(&k.keys, now) {
                        tracing::info!(conn = %conn.name, "session keys established (confirmed by the peer)");
                    }
                }
                KeyRole::Previous => {}
            }
        }
        i
    }
}

/// Why a sealed datagram no key set opened was refused.
fn unopened(replayed: bool, copied: bool) -> Refusal {
    if replayed && copied {
        // A redundancy copy got here first: expected, not an attack.
        Refusal::CopyDuplicate
    } else if replayed {
        Refusal::Replay
    } else {
        Refusal::Auth
    }
}

/// Opens a chunk of a batch's datagrams in place (run by the crypto
/// stage, on any thread): each with the first of its candidate key slots
/// that takes it, recording which. With more than one candidate the
/// datagram is kept in `scratch` to try the next (a failed open garbles
/// it).
fn open_items(chunk: &mut [OpenItem], keys: &[Option<&SessionKeys>; 3], scratch: &mut Vec<u8>) {
    for it in chunk {
        if it.candidates == 0 {
            continue;
        }
        // SAFETY: see `OpenItem`: the bytes are the worker's, lent to
        // this chunk alone while the batch is in the crypto stage.
        let dgram = unsafe { std::slice::from_raw_parts_mut(it.ptr, it.len) };
        let several = it.candidates.count_ones() > 1;
        if several {
            scratch.clear();
            scratch.extend_from_slice(dgram);
        }
        let mut tried = 0;
        for (i, k) in keys.iter().enumerate() {
            let Some(k) = k.filter(|_| it.candidates & (1 << i) != 0) else {
                continue;
            };
            if tried > 0 {
                dgram.copy_from_slice(scratch);
            }
            tried += 1;
            if k.open_datagram(dgram).is_ok() {
                it.opened = i as u8;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests;
