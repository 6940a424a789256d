//! Short flows (issue 36): 1 MB objects fetched one after another, each on
//! a new TCP connection, as a web page's fetches are. What counts is the
//! completion time of one fetch (connect, request, the whole object): a
//! short flow lives mostly in slow start and handshakes, where a long
//! round trip costs most and where warm, already-open legs help most.
//!
//! A [`Server`] thread in one namespace answers every connection with
//! [`SIZE`] bytes after reading a request line, and closes; [`fetch`] runs
//! in a thread that enters the client's namespace. Either side can use
//! kernel MPTCP sockets (`IPPROTO_MPTCP`), for the MPTCP baseline, without
//! `mptcpize`.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use mpt_emu::sys;

/// Bytes of one object.
pub const SIZE: usize = 1 << 20;
/// A fetch that takes longer has failed.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// `IPPROTO_MPTCP` (linux/in.h).
const IPPROTO_MPTCP: libc::c_int = 262;

/// A fresh IPv4 stream socket, MPTCP when asked.
fn socket(mptcp: bool) -> io::Result<OwnedFd> {
    let proto = if mptcp { IPPROTO_MPTCP } else { 0 };
    // SAFETY: plain socket(2); ownership moves into OwnedFd at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// Calls bind(2) or connect(2) on `fd` with `a`.
fn with_addr(
    fd: &impl AsRawFd,
    a: SocketAddrV4,
    f: unsafe extern "C" fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int,
) -> io::Result<()> {
    let sa = sockaddr(a);
    // SAFETY: sa is a valid sockaddr_in of the given length; fd is open.
    let r = unsafe {
        f(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn listener(port: u16, mptcp: bool) -> io::Result<TcpListener> {
    let fd = socket(mptcp)?;
    // SO_REUSEADDR: a port of an earlier case may linger in TIME_WAIT.
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReuseAddr, &true)?;
    with_addr(
        &fd,
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port),
        libc::bind,
    )?;
    // SAFETY: listen(2) on an open, bound socket.
    if unsafe { libc::listen(fd.as_raw_fd(), 64) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let l = TcpListener::from(fd);
    l.set_nonblocking(true)?;
    Ok(l)
}

/// The object server; stops (and its thread ends) on drop.
pub struct Server {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `0.0.0.0:port` in namespace `ns` (MPTCP sockets if
    /// `mptcp`) and serves until dropped.
    pub fn start(ns: &str, port: u16, mptcp: bool) -> anyhow::Result<Server> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<io::Result<()>>();
        let (ns2, stop2) = (ns.to_string(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("bench objects".into())
            .spawn(move || {
                let l = match sys::enter_netns(&ns2).and_then(|()| listener(port, mptcp)) {
                    Ok(l) => {
                        let _ = tx.send(Ok(()));
                        l
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                let blob = Arc::new(vec![b'x'; SIZE]);
                while !stop2.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((s, _)) => {
                            let blob = blob.clone();
                            std::thread::spawn(move || {
                                if let Err(e) = serve(s, &blob) {
                                    tracing::debug!(error = %e, "object transfer ended");
                                }
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "object server accept failed");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            })
            .context("starting the object server thread")?;
        let server = Server {
            stop,
            handle: Some(handle),
        };
        match rx.recv() {
            Ok(Ok(())) => Ok(server),
            Ok(Err(e)) => Err(e).with_context(|| format!("object server on port {port} in {ns}")),
            Err(_) => bail!("the object server thread ended at start"),
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

fn serve(mut s: TcpStream, blob: &[u8]) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(FETCH_TIMEOUT))?;
    s.set_write_timeout(Some(FETCH_TIMEOUT))?;
    let mut req = [0u8; 16];
    let _ = s.read(&mut req)?;
    s.write_all(blob)?;
    s.shutdown(std::net::Shutdown::Write)
}

/// Fetches one object from `to` in namespace `ns`: the time from before
/// connect to the last byte.
pub fn fetch(ns: &str, to: SocketAddrV4, mptcp: bool) -> anyhow::Result<Duration> {
    let ns2 = ns.to_string();
    std::thread::Builder::new()
        .name("bench fetch".into())
        .spawn(move || -> anyhow::Result<Duration> {
            sys::enter_netns(&ns2).with_context(|| format!("entering {ns2}"))?;
            let fd = socket(mptcp).context("socket")?;
            let t0 = Instant::now();
            let mut s = TcpStream::from(fd);
            // connect(2) of a blocking socket honours SO_SNDTIMEO.
            s.set_write_timeout(Some(FETCH_TIMEOUT))?;
            s.set_read_timeout(Some(FETCH_TIMEOUT))?;
            with_addr(&s, to, libc::connect).with_context(|| format!("connecting to {to}"))?;
            s.write_all(b"GET\n")?;
            let mut buf = vec![0u8; 64 * 1024];
            let mut got = 0usize;
            loop {
                match s.read(&mut buf)? {
                    0 => break,
                    n => got += n,
                }
            }
            if got != SIZE {
                bail!("object from {to}: {got} bytes, expected {SIZE}");
            }
            Ok(t0.elapsed())
        })
        .context("starting a fetch thread")?
        .join()
        .map_err(|_| anyhow::anyhow!("the fetch thread panicked"))?
}

/// Median of `v` (the lower middle one for an even count).
pub fn median_ms(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (!s.is_empty()).then(|| s[(s.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_is_the_lower_middle() {
        assert_eq!(median_ms(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_ms(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median_ms(&[]), None);
    }
}
