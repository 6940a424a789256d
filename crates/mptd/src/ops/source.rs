//! What the operator servers read and where they send changes: the one
//! [`StatusSource`] the control socket, the remote command port and the
//! metrics page share.
//!
//! It lives apart from the servers so that each of them, and the status
//! document's builder (`ops::status`), can use it without importing one
//! another.

use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;

use crate::control::command::Request;
use crate::plane::TxStats;

/// What the status request reads.
#[derive(Clone)]
pub struct StatusSource {
    /// Connections (those removed by a reload are not shown).
    pub conns: Arc<crate::plane::ConnSet>,
    /// Transmit-stage counters.
    pub tx: Arc<TxStats>,
    /// Tun interface name.
    pub tun_name: String,
    /// When the daemon started.
    pub started: Instant,
    /// Where runtime changes go (the control loop).
    pub commands: SyncSender<Request>,
    /// The netlink listener's counters (`None`: not listening).
    pub netlink: Option<Arc<crate::io::netlink::NetlinkStats>>,
    /// The public-key handshake's daemon-wide counters (`None`: no
    /// connection uses it).
    pub noise: Option<Arc<crate::control::noise::NoiseDaemonStats>>,
    /// What the shared ports refused before knowing the connection
    /// (`None`: no client connection).
    pub shared: Option<Arc<crate::plane::shared_port::SharedStats>>,
    /// How the hook's runs ended (`None`: no hook).
    pub hooks: Option<Arc<crate::io::hook::HookStats>>,
    /// The uplinks' routing as last applied.
    pub routing: crate::plane::routing::SharedRouting,
    /// TCP acceleration's counters (`None`: not configured).
    pub accel: Option<Arc<mpt_accel::Stats>>,
}
