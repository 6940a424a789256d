//! A connection to mptd's control socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpt_api::response::{parse_checked, ResponseError};
use mpt_api::{Request, Response};
use serde_json::Value;

/// Read and write timeout on the socket: the daemon answers from memory
/// (a reload reads one config file), so 5 s means it is wedged.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Longest response line accepted. A status document is about 1 KiB per
/// path; 16 MiB is far above any real daemon and bounds a broken one.
const MAX_RESPONSE: u64 = 16 << 20;

/// Why a request failed. Every variant is a runtime failure (exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Nothing listens on the socket.
    #[error("is mptd running? socket {}", path.display())]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// What connect(2) said.
        source: std::io::Error,
    },
    /// Reading or writing failed (timeouts included).
    #[error("socket {}: {what}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// Which step failed.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The daemon closed the connection before answering.
    #[error("socket {}: mptd closed the connection without answering", path.display())]
    Closed {
        /// The socket path.
        path: PathBuf,
    },
    /// The answer is not a version-1 response object, or not what the
    /// request asked for.
    #[error("malformed response from mptd: {0}")]
    Malformed(String),
    /// The daemon answered `ok: false`.
    #[error("mptd: {0}")]
    Daemon(String),
}

/// One connection; several requests may go over it in turn.
#[derive(Debug)]
pub struct Client {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connects, with [`TIMEOUT`] on reads and writes.
    pub fn connect(path: &Path) -> Result<Client, CtlError> {
        let stream = UnixStream::connect(path).map_err(|source| CtlError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        let io = |what, source| CtlError::Io {
            path: path.to_path_buf(),
            what,
            source,
        };
        stream
            .set_read_timeout(Some(TIMEOUT))
            .map_err(|e| io("setting the read timeout", e))?;
        stream
            .set_write_timeout(Some(TIMEOUT))
            .map_err(|e| io("setting the write timeout", e))?;
        let writer = stream
            .try_clone()
            .map_err(|e| io("cloning the socket", e))?;
        Ok(Client {
            path: path.to_path_buf(),
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Sends one request and returns the `ok: true` answer; `ok: false`
    /// becomes [`CtlError::Daemon`].
    pub fn call(&mut self, req: &Request) -> Result<Response, CtlError> {
        let mut line = req.to_line();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .and_then(|_| self.writer.flush())
            .map_err(|source| self.io("sending the request", source))?;
        let mut buf = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_RESPONSE + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|source| self.io("reading the response", source))?;
        if n == 0 {
            return Err(CtlError::Closed {
                path: self.path.clone(),
            });
        }
        if buf.len() as u64 > MAX_RESPONSE {
            return Err(CtlError::Malformed(format!(
                "response longer than {MAX_RESPONSE} bytes"
            )));
        }
        decode(parse_response(&buf)?)
    }

    fn io(&self, what: &'static str, source: std::io::Error) -> CtlError {
        CtlError::Io {
            path: self.path.clone(),
            what,
            source,
        }
    }
}

impl From<ResponseError> for CtlError {
    fn from(e: ResponseError) -> CtlError {
        match e {
            ResponseError::Refused(msg) => CtlError::Daemon(msg),
            other => CtlError::Malformed(other.to_string()),
        }
    }
}

/// Checks one response line: a version-1 object with a boolean `ok`
/// (see [`mpt_api::response::check`]); returns it as JSON.
pub fn parse_response(line: &[u8]) -> Result<Value, CtlError> {
    Ok(parse_checked(line)?)
}

/// A checked response object ([`parse_response`]) read as a [`Response`].
pub fn decode(response: Value) -> Result<Response, CtlError> {
    Ok(Response::from_value(response)?)
}

/// Connects, sends one request, returns the `ok: true` response.
pub fn call(path: &Path, req: &Request) -> Result<Response, CtlError> {
    Client::connect(path)?.call(req)
}
