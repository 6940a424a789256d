//! HTTP download of a large file, as the MPT article measured with wget: a
//! tiny HTTP/1.1 server thread in namespace B serves `GET /<bytes>` from a
//! zeroed buffer, and a client thread in namespace A downloads it through
//! the tunnel and reports goodput (body bytes / transfer time).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::iperf::Measurement;
use super::stop::check_stop;
use mpt_emu::sys;

/// Port of the server in namespace B.
pub const PORT: u16 = 8080;
/// Write/read unit: 64 KiB, like wget's and most servers' buffers.
const CHUNK: usize = 64 * 1024;
/// A socket blocked this long is a dead transfer.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The server; stops (and its thread ends) on drop.
pub struct Server {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `[::]:PORT` (dual stack) in namespace `ns` and serves until dropped.
    pub fn start(ns: &str) -> anyhow::Result<Server> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<io::Result<()>>();
        let (ns2, stop2) = (ns.to_string(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("bench http".into())
            .spawn(move || {
                let listener = sys::enter_netns(&ns2)
                    .and_then(|()| TcpListener::bind(("::", PORT)))
                    .and_then(|l| l.set_nonblocking(true).map(|()| l));
                let listener = match listener {
                    Ok(l) => {
                        let _ = tx.send(Ok(()));
                        l
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let stop3 = stop2.clone();
                            // One thread per download; a bench runs one at a time.
                            std::thread::spawn(move || {
                                if let Err(e) = serve(s, &stop3) {
                                    tracing::debug!(error = %e, "http transfer ended");
                                }
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "http accept failed");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            })
            .context("starting the HTTP server thread")?;
        let server = Server {
            stop,
            handle: Some(handle),
        };
        match rx.recv() {
            Ok(Ok(())) => Ok(server),
            Ok(Err(e)) => Err(e).context(format!("HTTP server on port {PORT} in {ns}")),
            Err(_) => bail!("HTTP server thread ended during start-up"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Serves one request: `GET /<bytes>` answers with that many zero bytes.
fn serve(mut s: TcpStream, stop: &AtomicBool) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 || head.len() > 16 * 1024 {
            return Err(io::Error::other("bad request"));
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let size = line
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.trim_start_matches('/').parse::<u64>().ok());
    let Some(size) = size else {
        s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
        return Ok(());
    };
    write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {size}\r\nConnection: close\r\n\r\n"
    )?;
    let chunk = vec![0u8; CHUNK];
    let mut left = size;
    while left > 0 && !stop.load(Ordering::Relaxed) {
        let n = left.min(CHUNK as u64) as usize;
        s.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Downloads `size` bytes from `target` (the server through the tunnel)
/// from namespace `ns`; gives up after `limit`.
pub fn download(
    ns: &str,
    target: SocketAddr,
    size: u64,
    limit: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Measurement> {
    let abort = Arc::new(AtomicBool::new(false));
    let (ns2, abort2) = (ns.to_string(), abort.clone());
    let handle = std::thread::spawn(move || -> io::Result<(u64, Duration)> {
        sys::enter_netns(&ns2)?;
        let mut s = TcpStream::connect_timeout(&target, IO_TIMEOUT)?;
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
        let start = Instant::now();
        write!(
            s,
            "GET /{size} HTTP/1.1\r\nHost: mpt-bench\r\nConnection: close\r\n\r\n"
        )?;
        let mut buf = vec![0u8; CHUNK];
        let mut head: Vec<u8> = Vec::new();
        let mut body = 0u64;
        let mut in_body = false;
        let mut last = Instant::now();
        loop {
            if abort2.load(Ordering::Relaxed) {
                break;
            }
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    last = Instant::now();
                    if in_body {
                        body += n as u64;
                    } else {
                        head.extend_from_slice(&buf[..n]);
                        if let Some(p) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                            if !head.starts_with(b"HTTP/1.1 200") {
                                return Err(io::Error::other("HTTP status not 200"));
                            }
                            body = (head.len() - p - 4) as u64;
                            in_body = true;
                            head.clear();
                        }
                    }
                }
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut =>
                {
                    if last.elapsed() > IO_TIMEOUT {
                        return Err(io::Error::other("download stalled"));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok((body, last.duration_since(start)))
    });
    let end = Instant::now() + limit;
    while !handle.is_finished() {
        if check_stop(stop).is_err() || Instant::now() > end {
            abort.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check_stop(stop)?;
    let (bytes, took) = handle
        .join()
        .map_err(|_| anyhow::anyhow!("HTTP client thread panicked"))?
        .with_context(|| format!("HTTP download from {target}"))?;
    if bytes == 0 {
        bail!("HTTP download from {target}: no data");
    }
    let seconds = took.as_secs_f64().max(1e-6);
    Ok(Measurement {
        mbps: bytes as f64 * 8.0 / seconds / 1e6,
        sent_mbps: None,
        loss_pct: None,
        retransmits: None,
        seconds,
    })
}
