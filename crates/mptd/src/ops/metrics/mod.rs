//! Prometheus metrics over HTTP (`[daemon] metrics = "ADDR:PORT"`).
//!
//! The page is the OpenMetrics text format, written by the
//! `prometheus-client` crate (the Prometheus project's Rust client): it
//! gets the format's details right (descriptors, `_total` on counter
//! samples, histogram `_bucket`/`_sum`/`_count`, the closing `# EOF`) so
//! this module only says what to show. Nothing is registered ahead: a
//! [`StatusCollector`] reads the same [`StatusSource`] as the control
//! socket at scrape time, so the page shows connections and paths added
//! or removed by a reload without bookkeeping.
//!
//! Names follow Prometheus conventions: base units (seconds, bytes),
//! `_total` for counters, labels `conn`, `path`, `reason`, `event`. Every
//! sample carries `conn` (`conn=""` for what belongs to no connection),
//! so a server with many clients can be broken down. The families, by
//! group: `path` (`mpt_path_*`), `connection` (drops, repair,
//! redundancy, equalisation, handovers), `session` (keys and the
//! public-key handshake), `reorder` (the resequencer), `accel` (TCP acceleration). `http` serves
//! the page.

mod accel;
mod connection;
mod families;
mod http;
mod path;
mod reorder;
mod session;

use std::fmt;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::ops::source::StatusSource;
use crate::plane::ConnShared;

/// Reads a [`StatusSource`] when scraped and encodes every family.
#[derive(Clone)]
pub struct StatusCollector {
    source: StatusSource,
}

impl StatusCollector {
    /// A collector of `source`.
    pub fn new(source: StatusSource) -> StatusCollector {
        StatusCollector { source }
    }
}

impl fmt::Debug for StatusCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatusCollector")
            .field("tun", &self.source.tun_name)
            .finish_non_exhaustive()
    }
}

impl Collector for StatusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let now = Instant::now();
        let list = self.source.conns.list();
        let live: Vec<&ConnShared> = list
            .iter()
            .filter(|c| !c.removed.load(Relaxed))
            .map(Arc::as_ref)
            .collect();
        path::encode(&mut encoder, &live)?;
        connection::encode(&mut encoder, &live, &self.source.tx)?;
        session::encode(&mut encoder, &live, self.source.noise.as_deref(), now)?;
        reorder::encode(&mut encoder, &live, now)?;
        accel::encode(&mut encoder, self.source.accel.as_deref())
    }
}

/// A registry whose only collector reads `source`.
pub fn registry(source: StatusSource) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(StatusCollector::new(source)));
    registry
}

/// The page of `registry` (ending in `# EOF`).
pub fn encode(registry: &Registry) -> String {
    let mut page = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut page, registry) {
        // Writing to a String fails only if a family's name is wrong.
        tracing::error!(error = %e, "encoding the metrics failed");
    }
    page
}

/// The metrics page of `source`.
pub fn render(source: &StatusSource) -> String {
    encode(&registry(source.clone()))
}

/// Serves the page on `listener` until shutdown (the daemon then connects
/// once to wake `accept`).
pub fn serve(listener: TcpListener, source: StatusSource, shutdown: Arc<AtomicBool>) {
    let registry = registry(source);
    http::serve(listener, &shutdown, || encode(&registry));
}

#[cfg(test)]
mod tests;
