//! Byte-exact data through the tunnels: a TCP server in the server
//! namespace that answers every connection with the SHA-256 of what it
//! read, and transfers from a client's tunnel address of a known
//! pseudo-random stream whose digest the sender computes too. Used for the
//! recovery probe (a small transfer per client: "does it answer") and the
//! background traffic (large transfers on a few clients, all the run).
//!
//! A transfer cut by a fault is an error, not a mismatch; a mismatch is a
//! digest that came back different: data altered or lost in the tunnel
//! while TCP believed it delivered.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ring::digest::{Context as Digest, SHA256};

use crate::bench::clients::config::{client_tun_ip, target_ip};

/// The checksum server's port (on every target address).
pub const PORT: u16 = 7207;

/// The listener in the server namespace; stops when dropped.
pub struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(ns: &str) -> anyhow::Result<Server> {
        let stop = Arc::new(AtomicBool::new(false));
        let (st, name) = (stop.clone(), ns.to_string());
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let listener = mpt_emu::sys::enter_netns(&name)
                .and_then(|()| TcpListener::bind((Ipv4Addr::UNSPECIFIED, PORT)))
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
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        // Threads inherit nothing of the namespace they
                        // need: the socket is already in it.
                        std::thread::spawn(move || {
                            let _ = answer(conn);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        rx.recv()
            .map_err(|_| anyhow::anyhow!("the checksum server thread ended"))?
            .map_err(|e| anyhow::anyhow!("checksum server in {ns}: {e}"))?;
        Ok(Server {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads to EOF, writes the digest.
fn answer(mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut d = Digest::new(&SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        d.update(&buf[..n]);
    }
    conn.write_all(d.finish().as_ref())
}

/// The stream a transfer sends: xorshift bytes from `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// How one transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The far end's digest matched.
    Verified,
    /// The far end's digest differed.
    Mismatch,
    /// Cut, refused or timed out.
    Failed,
}

/// Sends `data` from client `i`'s tunnel address to its target and
/// compares digests. Call on a thread inside the client namespace.
pub fn transfer(i: usize, data: &[u8], timeout: Duration) -> Outcome {
    attempt(i, data, timeout).unwrap_or(Outcome::Failed)
}

/// One transfer as [`transfer`], with why it failed (the probe records
/// the slowest client's last error: a connect or a read that timed out
/// says which direction of its tunnel was not carrying).
fn attempt(i: usize, data: &[u8], timeout: Duration) -> std::io::Result<Outcome> {
    let sock = socket_bound(client_tun_ip(i)).map_err(|e| context(e, "bind"))?;
    let to = SocketAddr::from((target_ip(i), PORT));
    let mut conn = connect(sock, to, timeout).map_err(|e| context(e, "connect"))?;
    conn.set_write_timeout(Some(timeout))?;
    conn.set_read_timeout(Some(timeout))?;
    conn.write_all(data).map_err(|e| context(e, "write"))?;
    conn.shutdown(std::net::Shutdown::Write)?;
    let mut got = Vec::new();
    conn.read_to_end(&mut got)
        .map_err(|e| context(e, "read the digest"))?;
    let want = ring::digest::digest(&SHA256, data);
    if got.len() != want.as_ref().len() {
        // No digest at all: the server saw an error, not EOF.
        return Err(std::io::Error::other(format!(
            "read the digest: {} bytes instead of {}",
            got.len(),
            want.as_ref().len()
        )));
    }
    Ok(if got == want.as_ref() {
        Outcome::Verified
    } else {
        Outcome::Mismatch
    })
}

fn context(e: std::io::Error, step: &str) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{step}: {e}"))
}

fn socket_bound(addr: Ipv4Addr) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket(2); ownership moves into OwnedFd at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sa is a valid sockaddr_in of the given length.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(owned)
}

/// Connects the bound socket with a timeout (non-blocking connect + poll).
fn connect(
    sock: std::os::fd::OwnedFd,
    to: SocketAddr,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    use std::os::fd::AsRawFd;
    let stream = TcpStream::from(sock);
    stream.set_nonblocking(true)?;
    let SocketAddr::V4(v4) = to else {
        return Err(std::io::Error::other("IPv4 only"));
    };
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sa is a valid sockaddr_in of the given length.
    let r = unsafe {
        libc::connect(
            stream.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        let end = Instant::now() + timeout;
        loop {
            let mut pfd = libc::pollfd {
                fd: stream.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) };
            if n > 0 {
                break;
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
    }
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// Counts of the background transfers.
#[derive(Debug, Default)]
pub struct Tally {
    pub verified: AtomicU64,
    pub mismatches: AtomicU64,
    pub failed: AtomicU64,
    pub bytes: AtomicU64,
}

impl Tally {
    fn count(&self, o: Outcome, len: usize) {
        match o {
            Outcome::Verified => {
                self.verified.fetch_add(1, Ordering::Relaxed);
                self.bytes.fetch_add(len as u64, Ordering::Relaxed);
            }
            Outcome::Mismatch => {
                self.mismatches.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Failed => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Between two background transfers of one sender.
const PAUSE: Duration = Duration::from_millis(100);

/// Background transfers: one thread per sender client, each sending
/// `len`-byte streams (a new seed each time), [`PAUSE`] apart, until
/// stopped.
pub struct Background {
    stop: Arc<AtomicBool>,
    pub tally: Arc<Tally>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Background {
    pub fn start(ns: &str, senders: &[usize], len: usize) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let threads = senders
            .iter()
            .map(|&i| {
                let (st, ta, name) = (stop.clone(), tally.clone(), ns.to_string());
                std::thread::spawn(move || {
                    if mpt_emu::sys::enter_netns(&name).is_err() {
                        return;
                    }
                    let mut seed = (i as u64 + 1) << 32;
                    while !st.load(Ordering::Relaxed) {
                        seed += 1;
                        let data = pattern(seed, len);
                        let o = transfer(i, &data, Duration::from_secs(5));
                        ta.count(o, len);
                        // Paced: traffic beside the faults, not a load
                        // test taking the cores the daemons need.
                        std::thread::sleep(match o {
                            Outcome::Failed => Duration::from_millis(200),
                            _ => PAUSE,
                        });
                    }
                })
            })
            .collect();
        Background {
            stop,
            tally,
            threads,
        }
    }
}

impl Background {
    /// Stops the threads (each after its transfer) and gives the counts.
    pub fn finish(mut self) -> Arc<Tally> {
        self.halt();
        self.tally.clone()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Probe threads at once: 200 clients probed one after the other would
/// take seconds on a loaded machine and pass that off as recovery time.
const PROBERS: usize = 16;

/// How one client's recovery probe went.
#[derive(Debug, Clone, Default)]
pub struct Probed {
    pub client: usize,
    /// When its transfer verified (`None`: not before the deadline).
    pub verified: Option<Instant>,
    /// Transfers that failed before (or without) one verified.
    pub failed: u32,
    /// The last failure, in words.
    pub last_error: Option<String>,
}

/// One small transfer from each of `clients`, retried until it verifies
/// or `deadline`, from [`PROBERS`] threads inside namespace `ns`; gives
/// how each client's probe went (in `clients`' order) and the number of
/// altered transfers.
pub fn probe_all(
    ns: &str,
    clients: Vec<usize>,
    deadline: Instant,
) -> anyhow::Result<(Vec<Probed>, u64)> {
    let mut queue = clients.clone();
    queue.reverse();
    let queue = Arc::new(std::sync::Mutex::new(queue));
    let workers: Vec<_> = (0..PROBERS)
        .map(|_| {
            let (q, name) = (queue.clone(), ns.to_string());
            std::thread::spawn(move || -> std::io::Result<(Vec<Probed>, u64)> {
                mpt_emu::sys::enter_netns(&name)?;
                let mut done = Vec::new();
                let mut mismatches = 0;
                loop {
                    let next = q.lock().ok().and_then(|mut v| v.pop());
                    let Some(i) = next else { break };
                    done.push(probe_one(i, deadline, &mut mismatches));
                }
                Ok((done, mismatches))
            })
        })
        .collect();
    let mut done = Vec::new();
    let mut mismatches = 0;
    for w in workers {
        let (d, n) = w
            .join()
            .map_err(|_| anyhow::anyhow!("a probe thread panicked"))?
            .map_err(|e| anyhow::anyhow!("probing in {ns}: {e}"))?;
        done.extend(d);
        mismatches += n;
    }
    done.sort_by_key(|p| clients.iter().position(|&c| c == p.client));
    Ok((done, mismatches))
}

/// Probes client `i` until it verifies or `deadline`.
fn probe_one(i: usize, deadline: Instant, mismatches: &mut u64) -> Probed {
    let data = pattern(0xC0FFEE ^ i as u64, 4096);
    let mut p = Probed {
        client: i,
        ..Probed::default()
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return p;
        }
        match attempt(i, &data, left.min(Duration::from_secs(2))) {
            Ok(Outcome::Verified) => {
                p.verified = Some(Instant::now());
                return p;
            }
            Ok(_) => {
                *mismatches += 1;
                p.failed += 1;
                p.last_error = Some("digest differs".into());
            }
            Err(e) => {
                p.failed += 1;
                p.last_error = Some(e.to_string());
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_deterministic_and_differ_by_seed() {
        assert_eq!(pattern(7, 1000), pattern(7, 1000));
        assert_ne!(pattern(7, 1000), pattern(8, 1000));
        assert_eq!(pattern(7, 13).len(), 13);
        assert_eq!(pattern(7, 100)[..13], pattern(7, 13)[..]);
    }
}
