//! The HTTP side of the metrics endpoint: `GET /metrics` answers the
//! page; another path gets 404, another method on `/metrics` 405, a
//! request that does not parse 400. One client at a time, each connection
//! closed after its answer (`Connection: close`), as Prometheus expects of
//! a simple target.
//!
//! Why not an HTTP server crate: the daemon has no async runtime, and the
//! small synchronous servers (`tiny_http`) read each connection on a
//! thread of their own, started on demand without limit, and set no read
//! or write timeout on it: every client that connects and sends nothing
//! would pin a thread for good. Here the request head is parsed with
//! `httparse` (the parser `hyper` uses), and the whole exchange is bounded
//! in time: [`READ_TIME`] to send the request head, [`WRITE_TIME`] to
//! take the answer; a slow client is cut off and the next one served.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Time a client has to send its request head.
pub const READ_TIME: Duration = Duration::from_secs(2);
/// Time a client has to take the whole answer.
pub const WRITE_TIME: Duration = Duration::from_secs(10);
/// Longest request head read; a longer one gets 431.
const MAX_HEAD: usize = 8 * 1024;
/// Headers parsed at most; more get 431.
const MAX_HEADERS: usize = 32;
/// The media type of the OpenMetrics text format, as Prometheus asks for it.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The one path served.
pub const PATH: &str = "/metrics";

/// Serves `page()` until `shutdown` is set: the daemon then connects once
/// to wake the blocking `accept`.
pub fn serve(listener: TcpListener, shutdown: &AtomicBool, page: impl Fn() -> String) {
    for stream in listener.incoming() {
        if shutdown.load(Relaxed) {
            break;
        }
        let Ok(stream) = stream else { continue };
        answer(stream, &page);
    }
}

/// An answer: status, its reason phrase, content type, extra header lines
/// and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Reason phrase.
    pub reason: &'static str,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Further header lines (`Allow: GET`), without line ends.
    pub headers: Vec<&'static str>,
    /// The body.
    pub body: String,
}

impl Response {
    fn text(status: u16, reason: &'static str, body: &str) -> Response {
        Response {
            status,
            reason,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: format!("{body}\n"),
        }
    }
}

/// Reads one request from `stream`, answers it and closes.
fn answer(mut stream: TcpStream, page: &dyn Fn() -> String) {
    let start = Instant::now();
    let (minor, response) = match read_head(&mut stream, start + READ_TIME) {
        Ok(Head {
            method,
            path,
            minor,
        }) => (minor, route(&method, &path, page)),
        Err(HeadError::Closed) => return,
        Err(HeadError::TimedOut) => (1, Response::text(408, "Request Timeout", "request timeout")),
        Err(HeadError::TooLarge) => (
            1,
            Response::text(
                431,
                "Request Header Fields Too Large",
                "request head too large",
            ),
        ),
        Err(HeadError::Malformed) => (1, Response::text(400, "Bad Request", "bad request")),
    };
    let _ = write_response(&mut stream, minor, &response, Instant::now() + WRITE_TIME);
}

/// The answer to `method path`.
pub fn route(method: &str, path: &str, page: &dyn Fn() -> String) -> Response {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    if path != PATH {
        return Response::text(404, "Not Found", "not found: the metrics are at /metrics");
    }
    if method != "GET" {
        let mut r = Response::text(405, "Method Not Allowed", "method not allowed: use GET");
        r.headers.push("Allow: GET");
        return r;
    }
    Response {
        status: 200,
        reason: "OK",
        content_type: OPENMETRICS,
        headers: Vec::new(),
        body: page(),
    }
}

/// What the answer needs of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The method.
    pub method: String,
    /// The request target.
    pub path: String,
    /// HTTP/1.x's minor version, which the answer repeats.
    pub minor: u8,
}

/// Why no request head was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// The client closed (or reset) before a whole head came.
    Closed,
    /// The head did not come in time.
    TimedOut,
    /// Longer than `MAX_HEAD`, or more than `MAX_HEADERS` headers.
    TooLarge,
    /// Not an HTTP/1.x request.
    Malformed,
}

/// Reads a request head from `stream` by `deadline`. A body, if any, is
/// left unread: the connection closes after the answer.
pub fn read_head(stream: &mut TcpStream, deadline: Instant) -> Result<Head, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                return Ok(Head {
                    method: request.method.unwrap_or_default().to_string(),
                    path: request.path.unwrap_or_default().to_string(),
                    minor: request.version.unwrap_or(1),
                })
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
            Err(_) => return Err(HeadError::Malformed),
        }
        if buf.len() >= MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::TimedOut);
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|_| HeadError::Closed)?;
        match stream.read(&mut chunk) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::TimedOut)
            }
            Err(_) => return Err(HeadError::Closed),
        }
    }
}

/// Writes `response` by `deadline`, in chunks, each write given the time
/// left.
fn write_response(
    stream: &mut TcpStream,
    minor: u8,
    response: &Response,
    deadline: Instant,
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.{minor} {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        response.reason,
        response.content_type,
        response.body.len()
    );
    for h in &response.headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    for part in [head.as_bytes(), response.body.as_bytes()] {
        for chunk in part.chunks(64 * 1024) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            stream.set_write_timeout(Some(left))?;
            stream.write_all(chunk)?;
        }
    }
    stream.flush()
}
