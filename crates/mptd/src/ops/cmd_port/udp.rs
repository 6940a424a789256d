//! The UDP side: one datagram in, at most one out. Refusals are never
//! larger than the datagram that caused them and are rate-limited, so the
//! port cannot amplify; counters are logged now and then when they changed.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::ops::cmd_port::handler::{count, Reply, Shared};
use crate::sync::lock_unpoisoned;

/// Largest answer sent in one UDP datagram; a larger one (a big status
/// document) is replaced by an error that says to use TCP.
pub const MAX_UDP_RESPONSE: usize = 60_000;
/// How often the counters are logged when they changed.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Serves UDP requests until shutdown (the socket's read timeout lets it
/// look at the flag).
pub(super) fn serve_udp(socket: UdpSocket, shared: &Shared, shutdown: &AtomicBool) {
    let mut buf = vec![0u8; 65536];
    let mut last_log = Instant::now();
    let mut logged = 0;
    while !shutdown.load(Relaxed) {
        if last_log.elapsed() >= LOG_EVERY {
            last_log = Instant::now();
            let sum = shared.stats.sum();
            if sum != logged {
                logged = sum;
                shared.stats.log("remote command port");
            }
        }
        let (n, peer) = match socket.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let request = buf.get(..n).unwrap_or_default();
        let reply = shared.handle(request, peer, Some(MAX_UDP_RESPONSE));
        let (text, plain) = match reply {
            Reply::Answer(text) => (text, None),
            Reply::Refusal(text) => (text, Some(false)),
            Reply::Plain(text) => (text, Some(true)),
        };
        let text = match plain {
            None => text,
            // Refusals are rate-limited, and one of a request that could
            // not be authenticated is never larger than the request: no
            // amplification, and a flood costs little. (A signed refusal
            // needs a captured authentic request, is about as large as it,
            // and shares the rate.)
            Some(plain) => {
                let allowed = (!plain || text.len() <= n) && {
                    lock_unpoisoned(&shared.refusals).allow(Instant::now())
                };
                if !allowed {
                    count(&shared.stats.unanswered);
                    continue;
                }
                text
            }
        };
        let _ = socket.send_to(text.as_bytes(), peer);
    }
}
