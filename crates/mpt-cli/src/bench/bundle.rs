//! Bundle-style workload, as DTNperf with window W = 1 (Caini et al.,
//! papers/000): send one `size`-byte bundle over TCP, wait for its 1-byte
//! delivery acknowledgment, repeat. A bundle not acknowledged within its
//! lifetime counts as not delivered; the connection is then dropped and a
//! new one opened. Threads of this process in the end namespaces (setns).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpt_emu::sys;

const STEP: Duration = Duration::from_millis(200);

fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Receiver in B: accepts connections; for each, reads bundles of `size`
/// bytes and answers each with one byte. Stops with `stop`.
pub fn spawn_receiver(
    ns: &str,
    bind: SocketAddr,
    size: usize,
    stop: Arc<AtomicBool>,
) -> io::Result<JoinHandle<()>> {
    let ns = ns.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let l = match sys::enter_netns(&ns).and_then(|()| TcpListener::bind(bind)) {
            Ok(l) => l,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        if let Err(e) = l.set_nonblocking(true) {
            let _ = tx.send(Err(e));
            return;
        }
        let _ = tx.send(Ok(()));
        let mut conns = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((c, _)) => {
                    let st = stop.clone();
                    conns.push(std::thread::spawn(move || serve(c, size, &st)));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        for c in conns {
            let _ = c.join();
        }
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other("bundle receiver did not start")),
    }
}

fn serve(mut c: TcpStream, size: usize, stop: &AtomicBool) {
    let _ = c.set_nonblocking(false);
    let _ = c.set_read_timeout(Some(STEP));
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0usize;
    while !stop.load(Ordering::Relaxed) {
        match c.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                got += n;
                while got >= size {
                    got -= size;
                    if c.write_all(&[1]).is_err() {
                        return;
                    }
                }
            }
            Err(e) if transient(&e) => {}
            Err(_) => return,
        }
    }
}

/// One bundle's fate.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Outcome {
    /// Seconds from the workload start to the bundle's send.
    pub start_s: f64,
    /// Seconds until its acknowledgment, if it came within the lifetime.
    pub delivered_s: Option<f64>,
}

/// Sender in A: bundles one at a time until `duration` has passed (the
/// last one may finish within its lifetime after that).
pub fn spawn_sender(
    ns: &str,
    target: SocketAddr,
    size: usize,
    duration: Duration,
    lifetime: Duration,
    stop: Arc<AtomicBool>,
) -> JoinHandle<io::Result<(Vec<Outcome>, Duration)>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        sys::enter_netns(&ns)?;
        let payload = vec![0x5au8; size];
        let t0 = Instant::now();
        let mut out = Vec::new();
        let mut conn: Option<TcpStream> = None;
        while t0.elapsed() < duration && !stop.load(Ordering::Relaxed) {
            let b0 = Instant::now();
            let deadline = b0 + lifetime;
            let ok = send_one(&mut conn, target, &payload, deadline, &stop);
            if !ok {
                conn = None;
            }
            out.push(Outcome {
                start_s: (b0 - t0).as_secs_f64(),
                delivered_s: ok.then(|| b0.elapsed().as_secs_f64()),
            });
        }
        Ok((out, t0.elapsed()))
    })
}

fn send_one(
    conn: &mut Option<TcpStream>,
    target: SocketAddr,
    payload: &[u8],
    deadline: Instant,
    stop: &AtomicBool,
) -> bool {
    let live = |stop: &AtomicBool| !stop.load(Ordering::Relaxed) && Instant::now() < deadline;
    while conn.is_none() {
        if !live(stop) {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(&target, left.min(Duration::from_secs(5))) {
            Ok(c) => {
                let _ = c.set_nodelay(true);
                let _ = c.set_write_timeout(Some(STEP));
                let _ = c.set_read_timeout(Some(STEP));
                *conn = Some(c);
            }
            Err(_) => std::thread::sleep(STEP),
        }
    }
    let Some(c) = conn.as_mut() else {
        return false;
    };
    let mut off = 0;
    while off < payload.len() {
        if !live(stop) {
            return false;
        }
        match c.write(&payload[off..]) {
            Ok(0) => return false,
            Ok(n) => off += n,
            Err(e) if transient(&e) => {}
            Err(_) => return false,
        }
    }
    let mut ack = [0u8; 1];
    loop {
        if !live(stop) {
            return false;
        }
        match c.read(&mut ack) {
            Ok(1) => return true,
            Ok(_) => return false,
            Err(e) if transient(&e) => {}
            Err(_) => return false,
        }
    }
}
