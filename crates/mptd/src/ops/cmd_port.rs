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
//! `cmd_port`); a request naming another connection (`"conn"`) is refused;
//! `reload` (re-reading the local config file) is allowed.
//!
//! The server runs on its own threads (one for UDP, one accepting TCP, one
//! per TCP client up to [`MAX_TCP_CLIENTS`]), polls the daemon's shutdown
//! flag, and only talks to the daemon through the same path as the control
//! socket ([`crate::ops::control_socket::respond`]), so it never touches the data plane.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use base64::Engine;
use mpt_proto::crypto::cmdauth::{
    CmdAuthError, CmdKey, CmdVerifier, RequestFields, ResponseFields, MAC_LEN, NONCE_LEN,
};
use mpt_proto::crypto::{Psk, RateLimiter};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::Config;
use crate::ops::control_socket::{self, StatusSource, CONTROL_VERSION};

/// Version of the envelope.
pub const ENVELOPE_VERSION: u64 = 1;
/// Longest request accepted (a TCP line or a datagram). Real requests are
/// a few hundred bytes.
pub const MAX_REQUEST: usize = 16 * 1024;
/// Largest answer sent in one UDP datagram; a larger one (a big status
/// document) is replaced by an error that says to use TCP.
pub const MAX_UDP_RESPONSE: usize = 60_000;
/// TCP clients served at once; more are refused.
pub const MAX_TCP_CLIENTS: usize = 8;
/// A TCP client that sends no complete request for this long is closed.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// How often the threads look at the shutdown flag.
const POLL: Duration = Duration::from_millis(250);
/// Refusals per second (and burst) answered over UDP, over all sources.
const REFUSALS_PER_SEC: u32 = 20;
/// How often the counters are logged when they changed.
const LOG_EVERY: Duration = Duration::from_secs(60);

fn b64() -> &'static base64::engine::GeneralPurpose {
    &base64::engine::general_purpose::STANDARD
}

/// The wall clock in Unix milliseconds (0 before 1970).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

// ---------------------------------------------------------------------------
// The envelope (shared with `mpt --remote`)

/// A request envelope as received.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestEnvelope {
    version: u64,
    connection: String,
    timestamp_ms: u64,
    nonce: String,
    request: String,
    mac: String,
}

/// Builds a signed request line (without the newline) for `body`, the
/// exact request text of the control socket.
pub fn seal_request(
    key: &CmdKey,
    body: &str,
    timestamp_ms: u64,
    nonce: &[u8; NONCE_LEN],
) -> Result<String, CmdAuthError> {
    let mac = key.sign_request(&RequestFields {
        connection: key.connection(),
        timestamp_ms,
        nonce,
        body: body.as_bytes(),
    })?;
    Ok(json!({
        "version": ENVELOPE_VERSION,
        "connection": key.connection(),
        "timestamp_ms": timestamp_ms,
        "nonce": b64().encode(nonce),
        "request": body,
        "mac": b64().encode(mac),
    })
    .to_string())
}

fn seal_response(key: &CmdKey, nonce: &[u8; NONCE_LEN], body: &str) -> Option<String> {
    let mac = key
        .sign_response(&ResponseFields {
            connection: key.connection(),
            nonce,
            body: body.as_bytes(),
        })
        .ok()?;
    Some(
        json!({
            "version": ENVELOPE_VERSION,
            "connection": key.connection(),
            "nonce": b64().encode(nonce),
            "response": body,
            "mac": b64().encode(mac),
        })
        .to_string(),
    )
}

/// What came back for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A signed answer to the request with this nonce: the control
    /// socket's response text, authenticated.
    Signed {
        /// The nonce it answers.
        nonce: [u8; NONCE_LEN],
        /// The response text (a control socket response object).
        response: String,
    },
    /// A refusal the daemon could not sign (it could not authenticate the
    /// request): its error text. Unauthenticated.
    Refused(String),
}

/// Why an answer was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// Not an envelope.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// The MAC does not match.
    #[error("the answer failed authentication (wrong key, or altered on the way)")]
    BadMac,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponseEnvelope {
    version: u64,
    connection: String,
    nonce: String,
    response: String,
    mac: String,
}

/// Opens an answer line or datagram: a signed envelope is checked with
/// `key`; a plain `{"ok":false,"error":...}` object becomes
/// [`Answer::Refused`].
pub fn open_answer(key: &CmdKey, data: &[u8]) -> Result<Answer, AnswerError> {
    let malformed = |m: &str| AnswerError::Malformed(m.to_string());
    let v: Value = serde_json::from_slice(data)
        .map_err(|e| AnswerError::Malformed(format!("not JSON ({e})")))?;
    if v.get("mac").is_none() {
        if v.get("ok") == Some(&Value::Bool(false)) {
            let msg = v.get("error").and_then(Value::as_str).unwrap_or("refused");
            return Ok(Answer::Refused(msg.to_string()));
        }
        return Err(malformed("neither a signed answer nor an error"));
    }
    let env: ResponseEnvelope =
        serde_json::from_value(v).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    if env.version != ENVELOPE_VERSION {
        return Err(AnswerError::Malformed(format!(
            "envelope version {}, this client speaks {ENVELOPE_VERSION}",
            env.version
        )));
    }
    let nonce = decode_fixed::<NONCE_LEN>(&env.nonce).ok_or_else(|| malformed("bad nonce"))?;
    let mac = b64()
        .decode(&env.mac)
        .map_err(|_| malformed("mac is not base64"))?;
    key.verify_response(
        &ResponseFields {
            connection: &env.connection,
            nonce: &nonce,
            body: env.response.as_bytes(),
        },
        &mac,
    )
    .map_err(|_| AnswerError::BadMac)?;
    Ok(Answer::Signed {
        nonce,
        response: env.response,
    })
}

fn decode_fixed<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = b64().decode(text).ok()?;
    <[u8; N]>::try_from(bytes.as_slice()).ok()
}

// ---------------------------------------------------------------------------
// Counters

/// What the port has seen since start.
#[derive(Debug, Default)]
pub struct Stats {
    /// Authenticated requests executed.
    pub accepted: AtomicU64,
    /// Not an envelope / bad field.
    pub malformed: AtomicU64,
    /// Longer than [`MAX_REQUEST`].
    pub oversized: AtomicU64,
    /// Names no configured connection.
    pub unknown_connection: AtomicU64,
    /// Names a connection without `key_file`.
    pub no_key: AtomicU64,
    /// Bad MAC.
    pub auth: AtomicU64,
    /// Timestamp out of the window.
    pub stale: AtomicU64,
    /// Nonce seen before.
    pub replay: AtomicU64,
    /// Replay set full.
    pub replay_full: AtomicU64,
    /// Authenticated, but the request is outside the key's scope.
    pub forbidden: AtomicU64,
    /// UDP answers replaced by "use TCP".
    pub udp_too_large: AtomicU64,
    /// Refusals not sent (UDP: larger than the request, or over the rate).
    pub unanswered: AtomicU64,
    /// TCP clients turned away (too many at once).
    pub tcp_busy: AtomicU64,
}

impl Stats {
    /// The counters as JSON.
    pub fn to_json(&self) -> Value {
        let g = |c: &AtomicU64| c.load(Relaxed);
        json!({
            "accepted": g(&self.accepted),
            "refused": {
                "malformed": g(&self.malformed),
                "oversized": g(&self.oversized),
                "unknown_connection": g(&self.unknown_connection),
                "no_key": g(&self.no_key),
                "auth": g(&self.auth),
                "stale": g(&self.stale),
                "replay": g(&self.replay),
                "replay_full": g(&self.replay_full),
                "forbidden": g(&self.forbidden),
            },
            "udp_too_large": g(&self.udp_too_large),
            "unanswered": g(&self.unanswered),
            "tcp_busy": g(&self.tcp_busy),
        })
    }

    fn log(&self, what: &str) {
        let g = |c: &AtomicU64| c.load(Relaxed);
        tracing::info!(
            accepted = g(&self.accepted),
            malformed = g(&self.malformed),
            oversized = g(&self.oversized),
            unknown_connection = g(&self.unknown_connection),
            no_key = g(&self.no_key),
            auth = g(&self.auth),
            stale = g(&self.stale),
            replay = g(&self.replay),
            replay_full = g(&self.replay_full),
            forbidden = g(&self.forbidden),
            udp_too_large = g(&self.udp_too_large),
            unanswered = g(&self.unanswered),
            tcp_busy = g(&self.tcp_busy),
            "{what}"
        );
    }

    fn sum(&self) -> u64 {
        [
            &self.accepted,
            &self.malformed,
            &self.oversized,
            &self.unknown_connection,
            &self.no_key,
            &self.auth,
            &self.stale,
            &self.replay,
            &self.replay_full,
            &self.forbidden,
            &self.udp_too_large,
            &self.unanswered,
            &self.tcp_busy,
        ]
        .iter()
        .map(|c| c.load(Relaxed))
        .fold(0u64, u64::wrapping_add)
    }
}

// ---------------------------------------------------------------------------
// Handling one request (transport independent)

struct Conn {
    name: String,
    /// `None`: the connection has no `key_file`.
    verifier: Option<Mutex<CmdVerifier>>,
}

struct Shared {
    conns: Vec<Conn>,
    source: StatusSource,
    stats: Stats,
    refusals: Mutex<RateLimiter>,
}

/// The outcome of one request.
enum Reply {
    /// The signed answer of an executed request (authentic, fresh, new).
    Answer(String),
    /// A signed refusal of an authentic request (stale, replayed, out of
    /// scope, answer too large for UDP).
    Refusal(String),
    /// A plain refusal of a request that could not be authenticated.
    Plain(String),
}

fn plain(msg: &str) -> Reply {
    Reply::Plain(json!({"version": CONTROL_VERSION, "ok": false, "error": msg}).to_string())
}

fn count(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

impl Shared {
    fn handle(&self, input: &[u8], peer: SocketAddr, max_answer: Option<usize>) -> Reply {
        let s = &self.stats;
        let refuse = |counter: &AtomicU64, msg: &str| {
            count(counter);
            tracing::debug!(%peer, reason = msg, "remote command refused");
            plain(msg)
        };
        if input.len() > MAX_REQUEST {
            return refuse(&s.oversized, "request too long");
        }
        let env: RequestEnvelope = match serde_json::from_slice(input) {
            Ok(e) => e,
            Err(_) => return refuse(&s.malformed, "malformed request"),
        };
        if env.version != ENVELOPE_VERSION {
            return refuse(&s.malformed, "unsupported envelope version");
        }
        let (Some(nonce), Ok(mac)) = (
            decode_fixed::<NONCE_LEN>(&env.nonce),
            b64().decode(&env.mac),
        ) else {
            return refuse(&s.malformed, "malformed nonce or mac");
        };
        if mac.len() != MAC_LEN {
            return refuse(&s.malformed, "malformed nonce or mac");
        }
        let Some(conn) = self.conns.iter().find(|c| c.name == env.connection) else {
            return refuse(&s.unknown_connection, "unknown connection");
        };
        let Some(verifier) = &conn.verifier else {
            return refuse(
                &s.no_key,
                "connection has no key_file: it cannot be managed remotely",
            );
        };
        let fields = RequestFields {
            connection: &env.connection,
            timestamp_ms: env.timestamp_ms,
            nonce: &nonce,
            body: env.request.as_bytes(),
        };
        let now = unix_ms();
        let (key, checked) = {
            let mut v = match verifier.lock() {
                Ok(v) => v,
                Err(poisoned) => poisoned.into_inner(),
            };
            (v.key().clone(), v.accept(&fields, &mac, now))
        };
        let signed = |text: String, answer: bool| match seal_response(&key, &nonce, &text) {
            Some(text) if answer => Reply::Answer(text),
            Some(text) => Reply::Refusal(text),
            None => plain("internal error signing the answer"),
        };
        let error =
            |msg: &str| json!({"version": CONTROL_VERSION, "ok": false, "error": msg}).to_string();
        match checked {
            Ok(()) => {}
            Err(CmdAuthError::BadMac) | Err(CmdAuthError::WrongConnection) => {
                return refuse(&s.auth, "authentication failed");
            }
            Err(e) => {
                let counter = match e {
                    CmdAuthError::Stale { .. } => &s.stale,
                    CmdAuthError::Replayed => &s.replay,
                    CmdAuthError::ReplayCacheFull => &s.replay_full,
                    _ => &s.malformed,
                };
                count(counter);
                let msg = match e {
                    CmdAuthError::Stale {
                        timestamp_ms,
                        now_ms,
                    } => format!(
                        "stale request: clocks differ by {:.1} s (max {} s)",
                        timestamp_ms.abs_diff(now_ms) as f64 / 1e3,
                        mpt_proto::crypto::cmdauth::MAX_SKEW_MS / 1000
                    ),
                    other => other.to_string(),
                };
                tracing::debug!(%peer, conn = %conn.name, reason = %msg, "remote command refused");
                return signed(error(&msg), false);
            }
        }
        // Authentic, fresh and new: check the scope, then run it.
        let inner: Value = serde_json::from_str(&env.request).unwrap_or(Value::Null);
        let name = inner.get("request").and_then(Value::as_str).unwrap_or("");
        if let Err(msg) = scope(&conn.name, &inner) {
            count(&s.forbidden);
            tracing::info!(%peer, conn = %conn.name, request = name, reason = %msg, "remote command refused");
            return signed(error(&msg), false);
        }
        count(&s.accepted);
        if name == "status" {
            tracing::debug!(%peer, conn = %conn.name, request = name, "remote command");
        } else {
            tracing::info!(%peer, conn = %conn.name, request = name, "remote command");
        }
        let mut response = control_socket::respond(env.request.as_bytes(), &self.source);
        if name == "status" {
            if let Some(status) = response.get_mut("status").and_then(Value::as_object_mut) {
                if let Some(Value::Array(conns)) = status.get_mut("connections") {
                    conns.retain(|c| c.get("name").and_then(Value::as_str) == Some(&conn.name));
                }
                status.insert("cmd_port".into(), s.to_json());
            }
        }
        let reply = signed(response.to_string(), true);
        match (reply, max_answer) {
            (Reply::Answer(text), Some(max)) if text.len() > max => {
                count(&s.udp_too_large);
                signed(
                    error(&format!(
                        "the answer ({} bytes) is too large for a UDP datagram; use TCP (leave out --udp)",
                        text.len()
                    )),
                    false,
                )
            }
            (reply, _) => reply,
        }
    }
}

/// Whether a key for connection `conn` may make request `inner`.
fn scope(conn: &str, inner: &Value) -> Result<(), String> {
    let name = inner.get("request").and_then(Value::as_str).unwrap_or("");
    match inner.get("conn") {
        None => {}
        Some(Value::String(c)) if c == conn => {}
        Some(other) => {
            return Err(format!(
                "this key manages connection {conn:?} only; the request names {other}"
            ))
        }
    }
    match name {
        // Anything else the control socket understands goes through
        // `respond`, which answers malformed or unknown requests.
        "status" | "reload" | "path_state" | "path_weight" | "path_add" | "path_remove" => Ok(()),
        // Not JSON, no "request": let `respond` say what is wrong.
        "" => Ok(()),
        other => Err(format!(
            "request {other:?} is not available over the remote command port"
        )),
    }
}

// ---------------------------------------------------------------------------
// Sockets and threads

/// The running server.
pub struct CmdPort {
    threads: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
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

/// Binds TCP and UDP on `[::]:port` (dual stack), or `0.0.0.0:port` when
/// IPv6 is not available.
pub fn bind(port: u16) -> io::Result<(TcpListener, UdpSocket)> {
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
    match bind_both(v6) {
        Ok(pair) => Ok(pair),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(e),
        Err(e6) => {
            let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
            let pair = bind_both(v4)?;
            tracing::info!(error = %e6, "remote command port: IPv6 unavailable, listening on IPv4 only");
            Ok(pair)
        }
    }
}

fn bind_both(addr: SocketAddr) -> io::Result<(TcpListener, UdpSocket)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let domain = Domain::for_address(addr);
    let tcp = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    let udp = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        tcp.set_only_v6(false)?;
        udp.set_only_v6(false)?;
    }
    tcp.set_reuse_address(true)?;
    tcp.bind(&addr.into())?;
    tcp.listen(16)?;
    // With port 0 (tests) UDP takes the port TCP got.
    let port = tcp
        .local_addr()?
        .as_socket()
        .map_or(addr.port(), |a| a.port());
    udp.bind(&SocketAddr::new(addr.ip(), port).into())?;
    tcp.set_nonblocking(true)?;
    udp.set_read_timeout(Some(POLL))?;
    Ok((tcp.into(), udp.into()))
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
                let key = CmdKey::derive(&Psk::from_bytes(psk), &c.name)
                    .map_err(|e| anyhow::anyhow!("connection {}: {e}", c.name))?;
                Some(Mutex::new(CmdVerifier::new(key)))
            }
            None => {
                tracing::warn!(conn = %c.name, "no key_file: this connection cannot be managed over the remote command port");
                None
            }
        };
        conns.push(Conn {
            name: c.name.clone(),
            verifier,
        });
    }
    let (tcp, udp) = bind(port).with_context(|| format!("binding TCP and UDP port {port}"))?;
    let local = tcp.local_addr().context("local address")?;
    let shared = Arc::new(Shared {
        conns,
        source,
        stats: Stats::default(),
        refusals: Mutex::new(RateLimiter::new(REFUSALS_PER_SEC, REFUSALS_PER_SEC)),
    });
    let mut threads = Vec::new();
    let (sh, stop) = (shared.clone(), shutdown.clone());
    threads.push(
        std::thread::Builder::new()
            .name("cmd-udp".into())
            .spawn(move || serve_udp(udp, &sh, &stop))
            .context("starting thread cmd-udp")?,
    );
    let (sh, stop) = (shared.clone(), shutdown);
    threads.push(
        std::thread::Builder::new()
            .name("cmd-tcp".into())
            .spawn(move || serve_tcp(tcp, sh, stop))
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

fn serve_udp(socket: UdpSocket, shared: &Shared, shutdown: &AtomicBool) {
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
                    let mut limiter = match shared.refusals.lock() {
                        Ok(l) => l,
                        Err(p) => p.into_inner(),
                    };
                    limiter.allow(Instant::now())
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

fn serve_tcp(listener: TcpListener, shared: Arc<Shared>, shutdown: Arc<AtomicBool>) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    let timeout = PollTimeout::try_from(POLL).unwrap_or(PollTimeout::NONE);
    while !shutdown.load(Relaxed) {
        clients.retain(|c| !c.is_finished());
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(_) => {
                std::thread::sleep(POLL);
                continue;
            }
        }
        let (mut stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(_) => continue,
        };
        if clients.len() >= MAX_TCP_CLIENTS {
            count(&shared.stats.tcp_busy);
            let _ = stream.set_nonblocking(true);
            let _ = writeln!(
                stream,
                "{}",
                json!({"version": CONTROL_VERSION, "ok": false, "error": "too many clients; try again"})
            );
            continue;
        }
        let (sh, stop) = (shared.clone(), shutdown.clone());
        match std::thread::Builder::new()
            .name("cmd-tcp-client".into())
            .spawn(move || serve_tcp_client(stream, peer, &sh, &stop))
        {
            Ok(h) => clients.push(h),
            Err(e) => {
                tracing::warn!(error = %e, "remote command port: cannot start a client thread")
            }
        }
    }
    for c in clients {
        let _ = c.join();
    }
}

fn serve_tcp_client(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    shutdown: &AtomicBool,
) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(POLL)).is_err()
        || stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .is_err()
    {
        return;
    }
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    let mut idle_since = Instant::now();
    loop {
        while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            let line = line.get(..pos).unwrap_or_default();
            let (text, keep_open) = match shared.handle(line, peer, None) {
                Reply::Answer(text) | Reply::Refusal(text) => (text, true),
                Reply::Plain(text) => (text, false),
            };
            let sent = stream
                .write_all(text.as_bytes())
                .and_then(|_| stream.write_all(b"\n"))
                .and_then(|_| stream.flush());
            if sent.is_err() {
                return;
            }
            if !keep_open {
                linger_close(stream);
                return;
            }
            idle_since = Instant::now();
        }
        if pending.len() > MAX_REQUEST {
            if let Reply::Plain(text) = shared.handle(&pending, peer, None) {
                let _ = writeln!(stream, "{text}");
            }
            linger_close(stream);
            return;
        }
        if shutdown.load(Relaxed) || idle_since.elapsed() > TCP_IDLE {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => pending.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e) if is_transient(&e) => {}
            Err(_) => return,
        }
    }
}

/// A read that timed out or was interrupted: try again.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Closes a client after a refusal so that the refusal arrives: closing
/// with unread input would reset the connection and could discard it. So
/// the write side is shut, and input is read and thrown away until the
/// client closes too (bounded in time and bytes).
fn linger_close(mut stream: TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut buf = [0u8; 4096];
    let mut left: usize = 1 << 20;
    while Instant::now() < deadline && left > 0 {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => left = left.saturating_sub(n),
            Err(e) if is_transient(&e) => {}
            Err(_) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(conn: &str, psk: u8) -> CmdKey {
        CmdKey::derive(&Psk::from_bytes([psk; 32]), conn).unwrap()
    }

    #[test]
    fn request_envelope_round_trip() {
        let k = key("site-b", 7);
        let nonce = [3u8; NONCE_LEN];
        let body = r#"{"version":1,"request":"status"}"#;
        let line = seal_request(&k, body, 1234, &nonce).unwrap();
        let env: RequestEnvelope = serde_json::from_str(&line).unwrap();
        assert_eq!(env.request, body);
        assert_eq!(env.connection, "site-b");
        assert_eq!(env.timestamp_ms, 1234);
        let mac = b64().decode(&env.mac).unwrap();
        let mut v = CmdVerifier::new(k.clone());
        let fields = RequestFields {
            connection: &env.connection,
            timestamp_ms: env.timestamp_ms,
            nonce: &decode_fixed(&env.nonce).unwrap(),
            body: env.request.as_bytes(),
        };
        assert_eq!(v.accept(&fields, &mac, 1234), Ok(()));
        // Unknown fields are refused, so nothing unsigned rides along.
        let mut extra: Value = serde_json::from_str(&line).unwrap();
        extra["extra"] = json!(1);
        assert!(serde_json::from_value::<RequestEnvelope>(extra).is_err());
    }

    #[test]
    fn answers_are_checked() {
        let k = key("site-b", 7);
        let nonce = [9u8; NONCE_LEN];
        let text = seal_response(&k, &nonce, r#"{"version":1,"ok":true}"#).unwrap();
        assert_eq!(
            open_answer(&k, text.as_bytes()),
            Ok(Answer::Signed {
                nonce,
                response: r#"{"version":1,"ok":true}"#.into()
            })
        );
        assert_eq!(
            open_answer(&key("site-b", 8), text.as_bytes()),
            Err(AnswerError::BadMac)
        );
        let altered = text.replace("true", "false");
        assert_eq!(
            open_answer(&k, altered.as_bytes()),
            Err(AnswerError::BadMac)
        );
        assert_eq!(
            open_answer(
                &k,
                br#"{"version":1,"ok":false,"error":"authentication failed"}"#
            ),
            Ok(Answer::Refused("authentication failed".into()))
        );
        assert!(matches!(
            open_answer(&k, b"garbage"),
            Err(AnswerError::Malformed(_))
        ));
        assert!(matches!(
            open_answer(&k, br#"{"version":1,"ok":true}"#),
            Err(AnswerError::Malformed(_))
        ));
    }

    #[test]
    fn scope_is_the_key_s_connection() {
        let ok = |v: Value| scope("a", &v);
        assert!(ok(json!({"version":1,"request":"status"})).is_ok());
        assert!(ok(json!({"version":1,"request":"reload"})).is_ok());
        assert!(ok(
            json!({"version":1,"request":"path_state","conn":"a","path":"p0","state":"down"})
        )
        .is_ok());
        assert!(ok(
            json!({"version":1,"request":"path_state","conn":"b","path":"p0","state":"down"})
        )
        .is_err());
        assert!(ok(json!({"version":1,"request":"path_weight","conn":1})).is_err());
        assert!(ok(json!({"version":1,"request":"shutdown"})).is_err());
        assert!(ok(Value::Null).is_ok());
    }

    #[test]
    fn binds_dual_stack_or_v4() {
        let (tcp, udp) = bind(0).unwrap();
        let port = tcp.local_addr().unwrap().port();
        assert_ne!(port, 0);
        assert_eq!(udp.local_addr().unwrap().port(), port);
        // Reachable over IPv4 whichever family it bound.
        let _c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
