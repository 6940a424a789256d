//! The remote command port (`[daemon] cmd_port = N`): the control socket's
//! requests over TCP and UDP, for clients that prove they hold a
//! connection's pre-shared key.
//!
//! Every message is one JSON object: one line on TCP, one datagram on UDP.
//! A request wraps the exact request text the unix control socket takes
//! (see [`crate::ops::control_socket`]) in an envelope the client signs with the
//! connection's command key (`mpt_proto::crypto::cmdauth`):
//!
//! ```text
//! {"version":1,"connection":"site-b","timestamp_ms":1700000000123,
//!  "nonce":"<base64, 16 bytes>","request":"{\"version\":1,\"request\":\"status\"}",
//!  "mac":"<base64, 32 bytes>"}
//! ```
//!
//! The answer to an authenticated request is signed the same way and
//! carries the request's nonce:
//!
//! ```text
//! {"version":1,"connection":"site-b","nonce":"<the request's>",
//!  "response":"{\"version\":1,\"ok\":true,...}","mac":"<base64>"}
//! ```
//!
//! A request that cannot be authenticated (malformed, oversized, unknown
//! connection, connection without `key_file`, bad MAC) gets the control
//! socket's plain error object `{"version":1,"ok":false,"error":"..."}`.
//! On UDP no refusal is ever larger than the datagram that caused it and
//! refusals are rate-limited, so the port cannot be used as an amplifier;
//! a refusal that would be larger, or over the rate, is not sent (counted
//! as `unanswered`). On TCP the connection is closed after a refusal.
//!
//! Scope: a key manages its own connection. `status` shows only that
//! connection (plus the daemon-wide fields and this port's counters under
//! `cmd_port`); a request naming another connection (`"conn"`) is refused.
//! By default a key may read the status and set its own paths' state and
//! weights, nothing more: `reload` (which applies whatever the server's
//! config file says, for every connection) and `path add`/`remove` (the
//! server would bind and send where the client says) need `[daemon]
//! cmd_port_admin = true`, meant for a server whose keys are all held by
//! its operators. A connection removed by a reload is not served, whatever
//! key it had.
//!
//! The server runs on its own threads (one for UDP, one accepting TCP, one
//! per TCP client up to [`MAX_TCP_CLIENTS`]), polls the daemon's shutdown
//! flag, and only talks to the daemon through the same path as the control
//! socket ([`crate::ops::control_socket::respond`]), so it never touches the data plane.
//!
//! Files: `envelope` seals and opens messages (shared with the client),
//! `handler` answers one request whatever the transport, `udp` and
//! `tcp` serve the two transports, `sockets` binds them, `stats`
//! counts.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use mpt_proto::crypto::cmdauth::{CmdKey, CmdVerifier};
use mpt_proto::crypto::{Psk, RateLimiter};

use crate::config::Config;
use crate::ops::source::StatusSource;

mod envelope;
mod handler;
mod sockets;
mod stats;
mod tcp;
mod udp;

pub use envelope::{
    open_answer, seal_request, unix_ms, Answer, AnswerError, ENVELOPE_VERSION, MAX_REQUEST,
};
pub use sockets::bind;
pub use stats::Stats;
pub use tcp::MAX_TCP_CLIENTS;
pub use udp::MAX_UDP_RESPONSE;

/// Refusals per second (and burst) answered over UDP, over all sources.
const REFUSALS_PER_SEC: u32 = 20;

/// The running server.
pub struct CmdPort {
    threads: Vec<JoinHandle<()>>,
    shared: Arc<handler::Shared>,
    /// Where it listens (TCP and UDP share the port).
    pub local: SocketAddr,
}

impl CmdPort {
    /// Waits for the threads (after the shutdown flag was set) and logs the
    /// counters.
    pub fn join(self) {
        for t in self.threads {
            if t.join().is_err() {
                tracing::error!("a remote command port thread panicked");
            }
        }
        self.shared.stats.log("remote command port stopped");
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }
}

/// Starts the server if `[daemon] cmd_port` is set; `Ok(None)` if it is 0.
/// Keys are read from the connections' `key_file`s (a reload does not
/// re-read them).
pub fn start(
    config: &Config,
    source: StatusSource,
    shutdown: Arc<AtomicBool>,
) -> Result<Option<CmdPort>> {
    let port = config.daemon.cmd_port;
    if port == 0 {
        return Ok(None);
    }
    let mut conns = Vec::new();
    for c in &config.connections {
        let verifier = match &c.key_file {
            Some(file) => {
                let psk =
                    crate::keys::load(file).with_context(|| format!("connection {}", c.name))?;
                let key = CmdKey::derive(&Psk::from_bytes(*psk), &c.name)
                    .map_err(|e| anyhow::anyhow!("connection {}: {e}", c.name))?;
                Some(Mutex::new(CmdVerifier::new(key)))
            }
            None => {
                tracing::warn!(conn = %c.name, "no key_file: this connection cannot be managed over the remote command port");
                None
            }
        };
        conns.push(handler::Conn {
            name: c.name.clone(),
            verifier,
        });
    }
    let (tcp, udp) = bind(port).with_context(|| format!("binding TCP and UDP port {port}"))?;
    let local = tcp.local_addr().context("local address")?;
    let shared = Arc::new(handler::Shared {
        conns,
        admin: config.daemon.cmd_port_admin,
        source,
        stats: Stats::default(),
        refusals: Mutex::new(RateLimiter::new(REFUSALS_PER_SEC, REFUSALS_PER_SEC)),
    });
    let mut threads = Vec::new();
    let (sh, stop) = (shared.clone(), shutdown.clone());
    threads.push(
        std::thread::Builder::new()
            .name("cmd-udp".into())
            .spawn(move || udp::serve_udp(udp, &sh, &stop))
            .context("starting thread cmd-udp")?,
    );
    let (sh, stop) = (shared.clone(), shutdown);
    threads.push(
        std::thread::Builder::new()
            .name("cmd-tcp".into())
            .spawn(move || tcp::serve_tcp(tcp, sh, stop))
            .context("starting thread cmd-tcp")?,
    );
    let keyed: Vec<&str> = shared
        .conns
        .iter()
        .filter(|c| c.verifier.is_some())
        .map(|c| c.name.as_str())
        .collect();
    tracing::info!(
        cmd_port = %local,
        connections = ?keyed,
        "remote command port listening (TCP and UDP)"
    );
    Ok(Some(CmdPort {
        threads,
        shared,
        local,
    }))
}
