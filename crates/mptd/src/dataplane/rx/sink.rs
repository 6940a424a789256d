//! The end of the receive path: packets released in order are staged,
//! coalesced and written to the tun device.
//!
//! The device is behind a small trait, [`PacketSink`], so the stages can
//! be run against a buffer in unit tests (no root, no tun). Everything
//! that writes is generic over it and monomorphised: the daemon's writes
//! are direct calls on `tun_rs::SyncDevice`, as before, with no dynamic
//! dispatch on the hot path.

use std::io;

use tun_rs::SyncDevice;

use crate::io::tun_write::Coalescer;
use crate::sync::Counter;

/// Where received packets are written: a tun queue in the daemon, a
/// buffer in tests.
pub trait PacketSink {
    /// Frames carry a virtio-net header, and TCP segments may be joined
    /// into GSO super-packets.
    fn takes_vnet(&self) -> bool;
    /// UDP datagrams of one flow may be joined too.
    fn takes_udp_gso(&self) -> bool;
    /// Writes one frame.
    fn write_frame(&self, frame: &[u8]) -> io::Result<usize>;
}

impl PacketSink for SyncDevice {
    #[inline]
    fn takes_vnet(&self) -> bool {
        self.tcp_gso()
    }

    #[inline]
    fn takes_udp_gso(&self) -> bool {
        self.udp_gso()
    }

    #[inline]
    fn write_frame(&self, frame: &[u8]) -> io::Result<usize> {
        self.send(frame)
    }
}

/// Packets released in order, waiting to be written to tun.
pub struct Staging {
    coalescer: Coalescer,
    errors_logged: u32,
}

impl Staging {
    /// Staging for writes to `sink`.
    pub fn new(sink: &impl PacketSink) -> Staging {
        Staging {
            coalescer: Coalescer::new(sink.takes_vnet(), sink.takes_udp_gso()),
            errors_logged: 0,
        }
    }

    /// Takes one packet; writes what it completes.
    pub fn push<S: PacketSink>(&mut self, packet: &[u8], sink: &S, errors: &Counter) {
        let mut logged = self.errors_logged;
        let r = self
            .coalescer
            .push(packet, &mut |f| write_tun(sink, f, errors, &mut logged));
        self.errors_logged = logged;
        debug_assert!(r.is_ok());
    }

    /// Writes everything staged.
    pub fn flush<S: PacketSink>(&mut self, sink: &S, errors: &Counter) {
        if self.coalescer.is_empty() {
            return;
        }
        let mut logged = self.errors_logged;
        let r = self
            .coalescer
            .flush(&mut |f| write_tun(sink, f, errors, &mut logged));
        self.errors_logged = logged;
        debug_assert!(r.is_ok());
    }
}

/// One write to tun (a frame with its virtio header when the device takes
/// one); a failure is counted, logged ten times at most, and fatal only if
/// the device is gone. Never fails: a packet tun refuses is dropped.
fn write_tun<S: PacketSink>(
    tun: &S,
    frame: &[u8],
    errors: &Counter,
    logged: &mut u32,
) -> io::Result<()> {
    if let Err(e) = tun.write_frame(frame) {
        errors.add(1);
        if crate::io::fatal::tun_is_gone(&e) {
            crate::io::fatal::fatal(format!("tun device unusable (write: {e}); was it deleted?"));
        }
        if *logged < 10 {
            *logged += 1;
            tracing::warn!(error = %e, "tun write failed");
        }
    }
    Ok(())
}
