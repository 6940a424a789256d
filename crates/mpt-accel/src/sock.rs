//! Socket set-up: the transparent listener that takes intercepted
//! flows, the legs' options, and the reset that tells a client its flow
//! was aborted.
//!
//! Legs are tuned for the long, multipath middle: `TCP_NODELAY` (a frame
//! is written whole, so Nagle only adds delay), the configured congestion
//! control (BBR by default: it paces at the measured rate instead of
//! halving at every random loss, see docs/ACCELERATION.md) and keepalive
//! so a leg whose far end vanished is found. Buffers stay autotuned: a
//! fixed `SO_SNDBUF` would switch the kernel's autotuning off and be
//! capped by `wmem_max`.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
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
