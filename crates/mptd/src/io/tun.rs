//! The tun device: one multi-queue interface, one queue per worker.
//!
//! Offload is on (IFF_VNET_HDR + TUNSETOFFLOAD): the kernel hands us TCP
//! super-packets of up to 64 KB, which tun-rs splits into MTU-sized
//! segments in one read, and on the way back tun-rs coalesces consecutive
//! TCP segments of a flow into one write. That moves far fewer, larger
//! units through the tun system calls than one packet per call.
//!
//! With several queues the kernel spreads flows over them by hash, so each
//! queue must be read by some worker: a queue nobody reads strands the
//! flows hashed to it. Receive workers therefore write through the same
//! queues the transmit workers read (writes may go to any queue).

use std::io;
use std::sync::Arc;

use tun_rs::{DeviceBuilder, SyncDevice};

use crate::config::TunnelConfig;

/// An open tun interface.
pub struct Tun {
    /// The queues, one per transmit worker.
    pub queues: Vec<Arc<SyncDevice>>,
    /// Interface name.
    pub name: String,
}

/// Creates the interface with its addresses and MTU, and `queues` queues.
pub fn open(cfg: &TunnelConfig, queues: usize) -> io::Result<Tun> {
    let queues = queues.max(1);
    let mut b = DeviceBuilder::new()
        .name(&cfg.name)
        .mtu(cfg.mtu)
        .offload(true)
        .multi_queue(queues > 1);
    if let Some(p) = cfg.ipv4 {
        b = b.ipv4(p.addr, p.len, None);
    }
    if let Some(p) = cfg.ipv6 {
        b = b.ipv6(p.addr, p.len);
    }
    let first = b.build_sync()?;
    let mut all = Vec::with_capacity(queues);
    for _ in 1..queues {
        all.push(first.try_clone()?);
    }
    all.insert(0, first);
    for q in &all {
        q.set_nonblocking(true)?;
    }
    Ok(Tun {
        queues: all.into_iter().map(Arc::new).collect(),
        name: cfg.name.clone(),
    })
}
