//! The remote command port client: `mpt --remote HOST:PORT --remote-conn
//! NAME --key FILE [--udp] status|path|reload`.
//!
//! The same request objects as the unix socket ([`mpt_api::Request`]), sent
//! to mptd's `[daemon] cmd_port` over TCP (default; one line each way, the
//! connection is kept for several requests) or UDP (`--udp`; one datagram
//! each way, a lost one is retried with a fresh request). Every request is
//! signed with the command key derived from the connection's pre-shared
//! key, and only a signed answer that echoes the request's nonce is
//! believed; the envelope and its checks are in `mptd::ops::cmd_port` and
//! `mpt_proto::crypto::cmdauth`, the wire format in docs/PROTOCOL.md
//! ("Remote command port"). The request's timestamp is this host's clock:
//! it must be within 30 s of the daemon's.
//!
//! [`Endpoint`] lets the commands talk to either the local socket or a
//! remote port through one interface.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mpt_api::{Request, Response};
use mpt_proto::crypto::cmdauth::{CmdKey, NONCE_LEN};
use mpt_proto::crypto::Psk;
use mptd::ops::cmd_port::{open_answer, seal_request, unix_ms, Answer, MAX_REQUEST};
use ring::rand::{SecureRandom, SystemRandom};

use super::client::{decode, parse_response, Client, CtlError};

/// TCP: connect timeout, and how long to wait for an answer (a path
/// change may take the daemon up to 5 s).
pub const TCP_TIMEOUT: Duration = Duration::from_secs(10);
/// UDP: how long to wait for the answer to one attempt.
pub const UDP_ATTEMPT: Duration = Duration::from_secs(2);
/// UDP: attempts, each a fresh request (a new nonce).
pub const UDP_ATTEMPTS: u32 = 3;
/// Longest answer accepted (a status document is about 1 KiB per path).
const MAX_ANSWER: u64 = 16 << 20;

/// Where and as whom to manage a remote daemon.
#[derive(Debug, Clone)]
pub struct Remote {
    /// `HOST:PORT` of the daemon's command port.
    pub target: String,
    /// The connection (as the remote daemon names it) whose key we hold.
    pub conn: String,
    /// That connection's key file (what `mpt genkey` wrote).
    pub key_file: PathBuf,
    /// UDP instead of TCP.
    pub udp: bool,
}

/// Checks a `--remote` value: `HOST:PORT` or `[IPv6]:PORT`, port 1..65535.
pub fn parse_target(s: &str) -> Result<String, String> {
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("expected HOST:PORT, got {s:?}"));
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || (host.contains(':') && !s.starts_with('[')) {
        return Err(format!(
            "expected HOST:PORT (an IPv6 address in brackets: [::1]:65020), got {s:?}"
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p != 0 => Ok(s.to_string()),
        _ => Err(format!(
            "expected a port 1..65535 after the last ':', got {s:?}"
        )),
    }
}

/// Why a remote request failed. All are runtime failures (exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The key file could not be used (the message names the file).
    #[error("--key: {0}")]
    Key(String),
    /// The key could not be derived (connection name too long).
    #[error("--remote-conn {conn:?}: {msg}")]
    Derive {
        /// The connection.
        conn: String,
        /// Why.
        msg: String,
    },
    /// The host name did not resolve.
    #[error("--remote {target}: cannot resolve the address: {error}")]
    Resolve {
        /// HOST:PORT.
        target: String,
        /// Cause.
        error: std::io::Error,
    },
    /// Connecting failed (TCP), or the host said nothing listens (UDP).
    #[error("cannot reach {target} over {transport}: {error} (is cmd_port set on that mptd, and the port reachable?)")]
    Connect {
        /// HOST:PORT.
        target: String,
        /// `TCP` or `UDP`.
        transport: &'static str,
        /// Cause.
        error: std::io::Error,
    },
    /// Reading or writing failed.
    #[error("{target}: {what}: {error}")]
    Io {
        /// HOST:PORT.
        target: String,
        /// Which step.
        what: &'static str,
        /// Cause.
        error: std::io::Error,
    },
    /// No answer in time.
    #[error("no answer from {target} over {transport} within {secs} s (is cmd_port set on that mptd, and the port reachable?)")]
    Timeout {
        /// HOST:PORT.
        target: String,
        /// `TCP` or `UDP`.
        transport: &'static str,
        /// How long we waited.
        secs: u64,
    },
    /// The daemon closed the TCP connection without answering.
    #[error("{target}: mptd closed the connection without answering")]
    Closed {
        /// HOST:PORT.
        target: String,
    },
    /// The daemon refused the request without signing the refusal (it
    /// could not authenticate the request).
    #[error("mptd at {target} refused the request: {msg}")]
    Refused {
        /// HOST:PORT.
        target: String,
        /// Its error text.
        msg: String,
    },
    /// The answer is not what the protocol says, or fails authentication.
    #[error("bad answer from {target}: {msg}")]
    BadAnswer {
        /// HOST:PORT.
        target: String,
        /// What is wrong.
        msg: String,
    },
    /// The daemon answered (signed) with `ok: false`.
    #[error("mptd at {target}: {msg}")]
    Daemon {
        /// HOST:PORT.
        target: String,
        /// Its error text.
        msg: String,
    },
    /// The system random generator failed.
    #[error("no random nonce available from the system")]
    Random,
}

enum Transport {
    Tcp {
        reader: BufReader<TcpStream>,
        writer: TcpStream,
    },
    Udp(UdpSocket),
}

/// A client of one remote command port.
pub struct RemoteClient {
    target: String,
    key: CmdKey,
    rng: SystemRandom,
    transport: Transport,
}

impl std::fmt::Debug for RemoteClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteClient")
            .field("target", &self.target)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl RemoteClient {
    /// Reads the key, resolves the target and connects (TCP) or binds a
    /// socket to it (UDP).
    pub fn connect(remote: &Remote) -> Result<RemoteClient, RemoteError> {
        let psk =
            mptd::keys::load(&remote.key_file).map_err(|e| RemoteError::Key(e.to_string()))?;
        let key = CmdKey::derive(&Psk::from_bytes(*psk), &remote.conn).map_err(|e| {
            RemoteError::Derive {
                conn: remote.conn.clone(),
                msg: e.to_string(),
            }
        })?;
        let target = remote.target.clone();
        let addrs: Vec<SocketAddr> = target
            .to_socket_addrs()
            .map_err(|error| RemoteError::Resolve {
                target: target.clone(),
                error,
            })?
            .collect();
        let transport = if remote.udp {
            udp_connect(&target, &addrs)?
        } else {
            tcp_connect(&target, &addrs)?
        };
        Ok(RemoteClient {
            target,
            key,
            rng: SystemRandom::new(),
            transport,
        })
    }

    /// Sends one request and returns the `ok: true` answer.
    pub fn call(&mut self, req: &Request) -> Result<Response, RemoteError> {
        let body = req.to_line();
        let response = match self.transport {
            Transport::Tcp { .. } => self.call_tcp(&body)?,
            Transport::Udp(_) => self.call_udp(&body)?,
        };
        parse_response(response.as_bytes())
            .and_then(decode)
            .map_err(|e| match e {
                CtlError::Daemon(msg) => RemoteError::Daemon {
                    target: self.target.clone(),
                    msg,
                },
                other => self.bad(other.to_string()),
            })
    }

    fn bad(&self, msg: String) -> RemoteError {
        RemoteError::BadAnswer {
            target: self.target.clone(),
            msg,
        }
    }

    fn io(&self, what: &'static str, source: std::io::Error) -> RemoteError {
        if matches!(
            source.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            let (transport, secs) = match self.transport {
                Transport::Tcp { .. } => ("TCP", TCP_TIMEOUT.as_secs()),
                Transport::Udp(_) => ("UDP", (UDP_ATTEMPT * UDP_ATTEMPTS).as_secs()),
            };
            return RemoteError::Timeout {
                target: self.target.clone(),
                transport,
                secs,
            };
        }
        RemoteError::Io {
            target: self.target.clone(),
            what,
            error: source,
        }
    }

    /// A signed request line (no newline) and its nonce.
    fn seal(&self, body: &str) -> Result<(String, [u8; NONCE_LEN]), RemoteError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| RemoteError::Random)?;
        let line = seal_request(&self.key, body, unix_ms(), &nonce)
            .map_err(|e| self.bad(format!("cannot sign the request: {e}")))?;
        if line.len() > MAX_REQUEST {
            return Err(self.bad(format!(
                "request of {} bytes is over the daemon's limit of {MAX_REQUEST}",
                line.len()
            )));
        }
        Ok((line, nonce))
    }

    /// Checks an answer: a signed answer to `nonce` gives its response
    /// text; an unsigned refusal is [`RemoteError::Refused`].
    fn open(&self, data: &[u8], nonce: &[u8; NONCE_LEN]) -> Result<Option<String>, RemoteError> {
        match open_answer(&self.key, data).map_err(|e| self.bad(e.to_string()))? {
            Answer::Signed {
                nonce: answered,
                response,
            } => Ok((answered == *nonce).then_some(response)),
            Answer::Refused(msg) => Err(RemoteError::Refused {
                target: self.target.clone(),
                msg,
            }),
        }
    }

    fn call_tcp(&mut self, body: &str) -> Result<String, RemoteError> {
        let (mut line, nonce) = self.seal(body)?;
        line.push('\n');
        let Transport::Tcp { reader, writer } = &mut self.transport else {
            return Err(self.bad("not a TCP client".into()));
        };
        let sent = writer
            .write_all(line.as_bytes())
            .and_then(|_| writer.flush());
        let mut buf = Vec::new();
        let read = sent.and_then(|_| {
            reader
                .by_ref()
                .take(MAX_ANSWER + 1)
                .read_until(b'\n', &mut buf)
        });
        let n = match read {
            Ok(n) => n,
            Err(e) => return Err(self.io("sending the request or reading the answer", e)),
        };
        if n == 0 {
            return Err(RemoteError::Closed {
                target: self.target.clone(),
            });
        }
        if buf.len() as u64 > MAX_ANSWER {
            return Err(self.bad(format!("answer longer than {MAX_ANSWER} bytes")));
        }
        self.open(&buf, &nonce)?
            .ok_or_else(|| self.bad("the answer is for another request (nonce differs)".into()))
    }

    fn call_udp(&mut self, body: &str) -> Result<String, RemoteError> {
        let mut buf = vec![0u8; 65536];
        let mut sent = Vec::new();
        for _ in 0..UDP_ATTEMPTS {
            let (line, nonce) = self.seal(body)?;
            sent.push(nonce);
            let Transport::Udp(socket) = &self.transport else {
                return Err(self.bad("not a UDP client".into()));
            };
            if let Err(e) = socket.send(line.as_bytes()) {
                return Err(self.io("sending the request", e));
            }
            let deadline = Instant::now() + UDP_ATTEMPT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let Transport::Udp(socket) = &self.transport else {
                    return Err(self.bad("not a UDP client".into()));
                };
                let _ = socket.set_read_timeout(Some(left));
                match socket.recv(&mut buf) {
                    Ok(n) => {
                        let data = buf.get(..n).unwrap_or_default();
                        // An answer to an earlier attempt is as good:
                        // the daemon ran that request.
                        match open_answer(&self.key, data) {
                            Ok(Answer::Signed {
                                nonce: got,
                                response,
                            }) if sent.contains(&got) => return Ok(response),
                            Ok(Answer::Signed { .. }) => continue,
                            Ok(Answer::Refused(msg)) => {
                                return Err(RemoteError::Refused {
                                    target: self.target.clone(),
                                    msg,
                                })
                            }
                            Err(e) => return Err(self.bad(e.to_string())),
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        return Err(RemoteError::Connect {
                            target: self.target.clone(),
                            transport: "UDP",
                            error: e,
                        })
                    }
                    Err(e) => return Err(self.io("reading the answer", e)),
                }
            }
        }
        Err(RemoteError::Timeout {
            target: self.target.clone(),
            transport: "UDP",
            secs: (UDP_ATTEMPT * UDP_ATTEMPTS).as_secs(),
        })
    }
}

fn tcp_connect(target: &str, addrs: &[SocketAddr]) -> Result<Transport, RemoteError> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for addr in addrs {
        match TcpStream::connect_timeout(addr, TCP_TIMEOUT) {
            Ok(stream) => {
                let io = |what, error| RemoteError::Io {
                    target: target.to_string(),
                    what,
                    error,
                };
                stream
                    .set_read_timeout(Some(TCP_TIMEOUT))
                    .map_err(|e| io("setting the read timeout", e))?;
                stream
                    .set_write_timeout(Some(TCP_TIMEOUT))
                    .map_err(|e| io("setting the write timeout", e))?;
                let writer = stream
                    .try_clone()
                    .map_err(|e| io("cloning the socket", e))?;
                return Ok(Transport::Tcp {
                    reader: BufReader::new(stream),
                    writer,
                });
            }
            Err(e) => last = e,
        }
    }
    Err(RemoteError::Connect {
        target: target.to_string(),
        transport: "TCP",
        error: last,
    })
}

fn udp_connect(target: &str, addrs: &[SocketAddr]) -> Result<Transport, RemoteError> {
    let io = |what, error| RemoteError::Io {
        target: target.to_string(),
        what,
        error,
    };
    let addr = addrs.first().ok_or_else(|| RemoteError::Resolve {
        target: target.to_string(),
        error: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
    })?;
    let local: SocketAddr = if addr.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).map_err(|e| io("binding a UDP socket", e))?;
    socket
        .connect(addr)
        .map_err(|e| io("setting the UDP destination", e))?;
    Ok(Transport::Udp(socket))
}

/// Where control requests go: the local socket or a remote command port.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// mptd's unix control socket.
    Local(PathBuf),
    /// A remote mptd's command port.
    Remote(Remote),
}

/// A connection to an [`Endpoint`].
#[derive(Debug)]
pub enum Session {
    /// Over the unix socket.
    Local(Client),
    /// Over the command port.
    Remote(RemoteClient),
}

/// Why a request failed, over either kind of endpoint.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Unix socket.
    #[error(transparent)]
    Local(#[from] CtlError),
    /// Command port.
    #[error(transparent)]
    Remote(#[from] RemoteError),
}

impl Endpoint {
    /// Connects.
    pub fn connect(&self) -> Result<Session, CallError> {
        Ok(match self {
            Endpoint::Local(path) => Session::Local(Client::connect(path)?),
            Endpoint::Remote(r) => Session::Remote(RemoteClient::connect(r)?),
        })
    }

    /// Connects, sends one request, returns the `ok: true` response.
    pub fn call(&self, req: &Request) -> Result<Response, CallError> {
        self.connect()?.call(req)
    }
}

impl Session {
    /// Sends one request; see [`Client::call`].
    pub fn call(&mut self, req: &Request) -> Result<Response, CallError> {
        Ok(match self {
            Session::Local(c) => c.call(req)?,
            Session::Remote(c) => c.call(req)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        for ok in ["host:65020", "10.0.0.2:1", "[::1]:65020", "[fd00::2]:80"] {
            assert_eq!(parse_target(ok).as_deref(), Ok(ok));
        }
        for bad in [
            "host",
            "host:",
            "host:0",
            "host:70000",
            ":80",
            "::1:80",
            "[]:80",
            "h:x",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
