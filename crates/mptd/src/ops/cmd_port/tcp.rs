//! The TCP side: one thread accepting, one per client (at most
//! [`MAX_TCP_CLIENTS`]); a client sends request lines and reads answer
//! lines, is closed after a refusal it could not be authenticated for,
//! and when idle.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpt_api::Response;

use crate::ops::cmd_port::envelope::MAX_REQUEST;
use crate::ops::cmd_port::handler::{count, Reply, Shared};
use crate::ops::cmd_port::sockets::POLL;

/// TCP clients served at once; more are refused.
pub const MAX_TCP_CLIENTS: usize = 8;
/// A TCP client that sends no complete request for this long is closed.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Accepts TCP clients until shutdown, each on its own thread, at most
/// [`MAX_TCP_CLIENTS`] at once.
pub(super) fn serve_tcp(listener: TcpListener, shared: Arc<Shared>, shutdown: Arc<AtomicBool>) {
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
            let busy = Response::error("too many clients; try again");
            let _ = writeln!(stream, "{}", busy.to_line());
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
