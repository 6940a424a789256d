//! Socket set-up: the transparent listener that takes intercepted
//! flows, the legs' options, and the reset that tells a client its flow
//! was aborted.
//!
//! Legs are tuned for the long, multipath middle: `TCP_NODELAY` (a frame
//! is written whole, so Nagle only adds delay), the configured congestion
//! control (by default BBR inside the tunnel; on direct legs CUBIC until
//! the path shows random loss, see `crate::congestion`) and keepalive
//! so a leg whose far end vanished is found. Buffers stay autotuned: a
//! fixed `SO_SNDBUF` would switch the kernel's autotuning off and be
//! capped by `wmem_max`.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, TcpKeepalive, Type};

/// A listener with `IP_TRANSPARENT` (`IPV6_TRANSPARENT`): it accepts
/// connections that nftables `tproxy` steered to it, whatever their
/// destination address; the accepted socket's local address is the
/// destination the client asked for.
pub fn transparent_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
        s.set_ip_transparent_v6(true)?;
    } else {
        s.set_ip_transparent_v4(true)?;
    }
    s.bind(&SockAddr::from(addr))?;
    s.listen(1024)?;
    Ok(s.into())
}

/// A plain listener (the far end's, on the tunnel address). Bound with
/// `IP_FREEBIND`: an IPv6 tunnel address may still be tentative (duplicate
/// address detection) when the daemon starts.
pub fn listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
        s.set_freebind_v6(true)?;
    } else {
        s.set_freebind_v4(true)?;
    }
    s.bind(&SockAddr::from(addr))?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Connects with a timeout.
pub fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.connect_timeout(&SockAddr::from(addr), timeout)?;
    Ok(s.into())
}

/// Connects to `addr` from `source`, an address that need not be this
/// host's (`IP_TRANSPARENT`, which takes `CAP_NET_ADMIN`), with a port
/// the kernel picks. The destination's answers come back to this socket
/// only if they are routed to this host and delivered locally (mptd's
/// far-end rule for transparent sockets).
pub fn connect_from(source: IpAddr, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        s.set_ip_transparent_v6(true)?;
    } else {
        s.set_ip_transparent_v4(true)?;
    }
    s.bind(&SockAddr::from(SocketAddr::new(source, 0)))?;
    s.connect_timeout(&SockAddr::from(addr), timeout)?;
    Ok(s.into())
}

/// Tunes a leg (either end). A congestion control the kernel does not
/// have is reported once by the caller and the default kept.
pub fn tune_leg(s: &TcpStream, congestion: &str) -> io::Result<()> {
    let r = SockRef::from(s);
    r.set_tcp_nodelay(true)?;
    r.set_keepalive(true)?;
    r.set_tcp_keepalive(
        &TcpKeepalive::new()
            .with_time(Duration::from_secs(20))
            .with_interval(Duration::from_secs(5))
            .with_retries(4),
    )?;
    if !congestion.is_empty() {
        r.set_tcp_congestion(congestion.as_bytes())?;
    }
    Ok(())
}

/// Arms `s` to send a reset instead of a FIN when its last handle closes.
pub fn arm_reset(s: &TcpStream) {
    let _ = SockRef::from(s).set_linger(Some(Duration::ZERO));
}

/// Unsent bytes above which a pinned leg stops polling writable
/// (`TCP_NOTSENT_LOWAT`): the set's scheduler then feeds another leg
/// instead of queueing behind this one's backlog. 64 KiB is 26 ms at
/// 20 Mbit/s: enough to keep the leg busy between two wake-ups of the
/// sender, little enough that a chunk given to a slow leg is sent soon.
pub const NOTSENT_LOWAT: u32 = 64 * 1024;

/// Pins a leg to tunnel path `path`: its packets carry DSCP `path + 1`
/// (mptd sends a leg's packets so marked on that path; see
/// docs/ACCELERATION.md), and it is writable only while little of what
/// it was given is unsent. `congestion`, when not empty, is this path's
/// own congestion control for its leg (`accel_congestion` of the path),
/// replacing the legs' default set by [`tune_leg`].
pub fn pin_leg(s: &TcpStream, path: u8, congestion: &str) -> io::Result<()> {
    let r = SockRef::from(s);
    if !congestion.is_empty() {
        r.set_tcp_congestion(congestion.as_bytes())?;
    }
    let tos = (u32::from(path) + 1) << 2;
    if s.local_addr()?.is_ipv6() {
        r.set_tclass_v6(tos)?;
    } else {
        r.set_tos_v4(tos)?;
    }
    r.set_tcp_notsent_lowat(NOTSENT_LOWAT)
}

/// Tunes a direct leg (`crate::direct`; either end): as [`tune_leg`]
/// with `congestion` and the set's [`NOTSENT_LOWAT`], but no DSCP: it is
/// on the path itself, where a DSCP would mean something else (1 is
/// "lower effort", RFC 8622).
pub fn tune_direct_leg(s: &TcpStream, congestion: &str) -> io::Result<()> {
    tune_leg(s, congestion)?;
    SockRef::from(s).set_tcp_notsent_lowat(NOTSENT_LOWAT)
}

/// The kernel's smoothed round trip of `s`, µs.
pub fn srtt_us(s: &TcpStream) -> io::Result<u32> {
    tcp_info(s).map(|i| i.srtt_us)
}

/// What [`tcp_info`] reads of a connection.
#[derive(Debug, Clone, Copy)]
pub struct TcpInfo {
    /// Smoothed round trip, µs.
    pub srtt_us: u32,
    /// Data segments sent, retransmissions included.
    pub data_segs_out: u32,
    /// Segments retransmitted.
    pub total_retrans: u32,
    /// Milliseconds since the last data segment was sent.
    pub last_data_sent_ms: u32,
}

/// The kernel's `TCP_INFO` of `s`, the fields the legs use.
pub fn tcp_info(s: &TcpStream) -> io::Result<TcpInfo> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain data; zeroed is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes; the fd is owned by `s`.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        srtt_us: info.tcpi_rtt,
        data_segs_out: info.tcpi_data_segs_out,
        total_retrans: info.tcpi_total_retrans,
        last_data_sent_ms: info.tcpi_last_data_sent,
    })
}

/// Which of `socks` are writable, waiting up to `timeout_ms` for one.
pub fn writable(socks: &[TcpStream], timeout_ms: i32) -> io::Result<Vec<bool>> {
    use std::os::fd::AsRawFd;
    let mut fds: Vec<libc::pollfd> = socks
        .iter()
        .map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    // SAFETY: `fds` is a valid array of its length; the fds are owned by
    // `socks` for the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; socks.len()]);
        }
        return Err(e);
    }
    if fds
        .iter()
        .any(|f| f.revents & (libc::POLLERR | libc::POLLHUP) != 0)
    {
        return Err(io::ErrorKind::BrokenPipe.into());
    }
    Ok(fds.iter().map(|f| f.revents & libc::POLLOUT != 0).collect())
}

/// Whether an idle leg is dead: it has nothing to say while idle, so
/// anything readable (its end of stream, a reset, stray bytes) means the
/// far end closed it (restarted, say).
pub fn looks_dead(s: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, its fd owned by `s` for the call.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    n != 0
}
