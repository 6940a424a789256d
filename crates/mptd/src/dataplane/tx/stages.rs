//! What the transmit stages (plan, number, charge, head, send) read, apart
//! from the tun queue the worker reads its batches from: the connections,
//! the router, the counters, the MTU and whether TCP SYNs get their MSS
//! clamped. Kept in their own struct so that
//! the stages can be driven without a tun device (which needs root), as
//! the unit tests do; the worker owns one and hands it every batch.

use std::sync::Arc;

use crate::plane::route::Router;
use crate::plane::{ConnShared, TxStats};

/// The state the transmit stages are methods of.
pub struct TxStages {
    /// All connections, by index.
    pub conns: Arc<Vec<Arc<ConnShared>>>,
    /// Destination → connection.
    pub router: Arc<Router>,
    /// Daemon-wide counters.
    pub stats: Arc<TxStats>,
    /// Tun MTU, to size buffers and clamp MSS options to.
    pub mtu: usize,
    /// Lower the MSS option of TCP SYNs to what fits `mtu` (`[tunnel]
    /// mss_clamp`; see the plan stage).
    pub mss_clamp: bool,
}
