//! The `PACKET_MMAP` receive ring (TPACKET_V2) of the wire's ingress
//! sockets: the kernel copies each frame into memory shared with the wire
//! thread, which then makes no system call per received frame.
//!
//! Why: reading from the ring costs the wire thread about a quarter of what
//! `recvmmsg` does per frame (msghdr copies, timestamp control messages),
//! and that cost capped the wire near 3 Gbit/s of MTU-sized TCP (measured:
//! docs/results/2026-11-26-link-emulator.md).
//!
//! How: the kernel's receive path (`tpacket_rcv`) copies each frame into
//! the next free slot, with the vnet header right before the Ethernet
//! header and the receive timestamp (CLOCK_REALTIME, always taken) in the
//! slot header, then hands the slot over (`TP_STATUS_USER`) and wakes a
//! poller. The reader takes slots in ring order and gives them back
//! (`TP_STATUS_KERNEL`). Only this status word is shared both ways; it is
//! read with acquire and written with release ordering.
//!
//! Why TPACKET_V2 and not V3: V3 hands over whole blocks, only when a block
//! is full or its retire timer (`tp_retire_blk_tov`, milliseconds, at jiffy
//! granularity) expires (kernel commit f6fb8f100b80 "TPACKET_V3 flexible
//! buffer implementation": "Read/poll is at a block-level (as opposed to
//! packet-level)"; libpcap users report a timeout's worth of added delivery
//! delay). At low packet rates every frame would wait for that timer, and
//! the wire's delay error would grow from microseconds to milliseconds. V2
//! hands over, and wakes the poller for, every frame (`tpacket_rcv` sets the
//! slot status, then calls `sk_data_ready`).
//!
//! Slots are [`FRAME_SIZE`] bytes, room for an Ethernet frame of up to 1972
//! bytes (MTU 1958 untagged). Larger frames (64 KiB GSO aggregates when the
//! endpoints keep their offloads on, jumbo frames) are never corrupted
//! silently: the socket has `PACKET_COPY_THRESH` set, so the kernel puts the
//! truncated frame in the ring flagged `TP_STATUS_COPY` *and* queues the
//! whole frame on the socket's ordinary receive queue (within its receive
//! buffer), where the reader fetches it with `recvmsg`, in ring order. If
//! the kernel could not queue the copy (receive buffer full), the slot is
//! truncated without the flag ([`RxFrame::truncated`]) and the caller counts
//! a drop. Such frames cost what they cost before the ring, plus a slot.
//!
//! Memory, per direction: [`RX_FRAMES`] slots of 2 KiB, 16 MiB, allocated
//! by the kernel at setup, mapped once and unmapped on drop: some 8000
//! full-size frames, 25 ms at 5 Gbit/s and 100 ms at 1 Gbit/s, as many as
//! the 16 MiB socket buffer held before. The socket's receive buffer (16
//! MiB) still bounds the large frames waiting beside it.
//!
//! Setup order matters to the kernel: `PACKET_VERSION` and
//! `PACKET_VNET_HDR` are refused (`EBUSY`) once a ring exists, and the
//! socket is bound (starts receiving) only after its ring is in place, so no
//! frame can wait on the receive queue without a `TP_STATUS_COPY` slot.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::sys::{self, PacketSocket, Role, VNET_HDR_LEN};

/// Bytes per ring slot: slot header + `sockaddr_ll` + vnet header + frame.
/// The kernel puts the Ethernet header at offset 76 (`tpacket_rcv`:
/// 32-byte header and 20-byte `sockaddr_ll` plus a 16-byte minimum link
/// header, aligned to 16, plus the vnet header, minus the 14-byte link
/// header), leaving 1972 bytes for the frame. A power of two, so a block
/// holds a whole number of slots.
pub const FRAME_SIZE: usize = 2048;

/// Ring memory is allocated by the kernel in blocks of this size (64
/// slots), physically contiguous if it can (order-5 pages), else vmalloc'ed.
const BLOCK_SIZE: usize = 128 << 10;

/// Slots of an RX ring: 16 MiB.
pub const RX_FRAMES: usize = 8192;

/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: the slot header; no frame
/// data starts before it.
const HDR_LEN: usize = 32;

// tpacket2_hdr field offsets (linux/if_packet.h).
const OFF_LEN: usize = 4;
const OFF_SNAPLEN: usize = 8;
const OFF_MAC: usize = 12;
const OFF_SEC: usize = 16;
const OFF_NSEC: usize = 20;
/// `sll_pkttype` of the `sockaddr_ll` that follows the RX slot header.
const OFF_PKTTYPE: usize = HDR_LEN + 10;

/// A ring's memory, mapped from the socket; unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; the ring
// that owns it is used by one thread at a time (moved, never shared).
unsafe impl Send for Mapping {}

impl Mapping {
    /// Asks the kernel for a ring of `frames` slots (`opt`:
    /// `PACKET_RX_RING`) on `fd` and maps it.
    fn new(fd: RawFd, opt: libc::c_int, frames: usize) -> io::Result<Mapping> {
        let per_block = BLOCK_SIZE / FRAME_SIZE;
        let blocks = frames.div_ceil(per_block).max(1);
        let req = libc::tpacket_req {
            tp_block_size: BLOCK_SIZE as libc::c_uint,
            tp_block_nr: blocks as libc::c_uint,
            tp_frame_size: FRAME_SIZE as libc::c_uint,
            tp_frame_nr: (blocks * per_block) as libc::c_uint,
        };
        sys::setsockopt(fd, libc::SOL_PACKET, opt, &req)?;
        let len = blocks * BLOCK_SIZE;
        // SAFETY: a fresh shared mapping of the socket's ring, of the size
        // the kernel just allocated; no Rust object aliases it yet.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        Ok(Mapping { ptr, len })
    }

    /// Number of slots: the blocks are mapped back to back and hold a whole
    /// number of slots each, so slot `i` starts at `i * FRAME_SIZE`.
    fn frames(&self) -> usize {
        self.len / FRAME_SIZE
    }

    /// Start of slot `i` (< `frames()`).
    fn slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.frames());
        // SAFETY: i < frames(), so the offset stays inside the mapping.
        unsafe { self.ptr.as_ptr().add(i * FRAME_SIZE) }
    }

    /// The status word of slot `i`, shared with the kernel.
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first u32 of the slot, which is 2048-byte
        // aligned inside a page-aligned mapping that lives as long as
        // `self`; the kernel accesses it concurrently, hence atomic.
        unsafe { AtomicU32::from_ptr(self.slot(i).cast::<u32>()) }
    }

    /// Reads a header field of slot `i` at `off`.
    fn read<T: Copy>(&self, i: usize, off: usize) -> T {
        // SAFETY: header fields lie in the first 32 bytes of the slot,
        // naturally aligned; volatile since the memory is the kernel's too.
        unsafe { std::ptr::read_volatile(self.slot(i).add(off).cast::<T>()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped; no borrow of it
        // outlives the ring (all accessors borrow `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A TPACKET_V2 receive ring on a packet socket.
pub struct RxRing {
    map: Mapping,
    head: usize,
}

/// One received frame, borrowed from its slot until [`RxRing::release`].
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The slot's vnet header and (possibly truncated) Ethernet frame.
    /// Empty if the slot's offsets do not add up (never seen; the caller
    /// counts it as truncated).
    pub data: &'a [u8],
    /// Length of the whole Ethernet frame as received (`tp_len`).
    pub len: usize,
    /// The frame did not fit the slot and the kernel queued a whole copy
    /// on the socket's receive queue (`TP_STATUS_COPY`): read it with
    /// `recvmsg` before the next slot.
    pub copy: bool,
    /// The frame did not fit and no copy was queued: cannot be forwarded.
    pub truncated: bool,
    /// Kernel receive timestamp (CLOCK_REALTIME).
    pub kernel_time: Option<SystemTime>,
    /// The host's own sending (should not happen with
    /// `PACKET_IGNORE_OUTGOING`, checked anyway).
    pub outgoing: bool,
}

impl RxRing {
    /// Sets up and maps a receive ring of `frames` slots on `fd`, which must
    /// have its version and vnet header option set already.
    pub fn new(fd: RawFd, frames: usize) -> io::Result<RxRing> {
        Ok(RxRing {
            map: Mapping::new(fd, libc::PACKET_RX_RING, frames)?,
            head: 0,
        })
    }

    /// The oldest frame the kernel has handed over, if any. It stays in its
    /// slot (and the next one is not looked at) until [`RxRing::release`].
    pub fn peek(&self) -> Option<RxFrame<'_>> {
        let i = self.head;
        let status = self.map.status(i).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let len = self.map.read::<u32>(i, OFF_LEN) as usize;
        let snaplen = self.map.read::<u32>(i, OFF_SNAPLEN) as usize;
        let mac = usize::from(self.map.read::<u16>(i, OFF_MAC));
        let sec = self.map.read::<u32>(i, OFF_SEC);
        let nsec = self.map.read::<u32>(i, OFF_NSEC);
        let pkttype = self.map.read::<u8>(i, OFF_PKTTYPE);
        let start = mac.checked_sub(VNET_HDR_LEN).filter(|&s| s >= HDR_LEN);
        let data = match start {
            Some(start) if mac + snaplen <= FRAME_SIZE => {
                // SAFETY: start..mac + snaplen lies inside slot i (checked
                // above); the slot is ours (TP_STATUS_USER, acquired) and
                // the kernel does not write it until we release it, which
                // needs `&mut self`, so the borrow ends first.
                unsafe {
                    std::slice::from_raw_parts(self.map.slot(i).add(start), mac + snaplen - start)
                }
            }
            _ => &[],
        };
        let copy = status & libc::TP_STATUS_COPY != 0;
        Some(RxFrame {
            data,
            len,
            copy,
            truncated: !copy && (data.is_empty() || snaplen < len),
            kernel_time: UNIX_EPOCH
                .checked_add(Duration::new(u64::from(sec), nsec.min(999_999_999))),
            outgoing: pkttype == libc::PACKET_OUTGOING,
        })
    }

    /// Gives the oldest frame's slot back to the kernel (after [`peek`]
    /// returned it) and moves on to the next.
    ///
    /// [`peek`]: RxRing::peek
    pub fn release(&mut self) {
        self.map
            .status(self.head)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.head = (self.head + 1) % self.map.frames();
    }
}

/// Opens an ingress socket on `ifname` with a TPACKET_V2 receive ring of
/// `frames` slots. Frames larger than a slot are also queued whole on the
/// socket (`PACKET_COPY_THRESH`), for [`PacketSocket::recv`].
pub fn open_rx_ring(ifname: &str, frames: usize) -> io::Result<(PacketSocket, RxRing)> {
    PacketSocket::open_with(ifname, Role::Ingress, |fd| {
        set_tpacket_v2(fd)?;
        sys::setsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_COPY_THRESH,
            &1 as &libc::c_int,
        )
        .map_err(|e| io::Error::new(e.kind(), format!("PACKET_COPY_THRESH: {e}")))?;
        RxRing::new(fd, frames)
            .map_err(|e| io::Error::new(e.kind(), format!("PACKET_RX_RING: {e}")))
    })
}

/// Selects the TPACKET_V2 ring layout (`PACKET_VERSION`); see the module
/// docs for why not V3.
fn set_tpacket_v2(fd: RawFd) -> io::Result<()> {
    let v = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
    sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &v)
        .map_err(|e| io::Error::new(e.kind(), format!("PACKET_VERSION: {e}")))
}

/// Frames the kernel dropped for want of ring room since the last call
/// (`PACKET_STATISTICS`, cleared on read): (received, dropped).
pub fn take_stats(fd: RawFd) -> io::Result<(u32, u32)> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` is a live tpacket_stats of the size passed in `len`.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.tp_packets, st.tp_drops))
}
