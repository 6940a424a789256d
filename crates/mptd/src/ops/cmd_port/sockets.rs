//! The port's sockets: TCP and UDP on the same port, dual stack when the
//! host has IPv6.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::time::Duration;

/// How often the threads look at the shutdown flag.
pub(super) const POLL: Duration = Duration::from_millis(250);

/// Binds TCP and UDP on `[::]:port` (dual stack), or `0.0.0.0:port` when
/// IPv6 is not available.
pub fn bind(port: u16) -> io::Result<(TcpListener, UdpSocket)> {
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
    match bind_both(v6) {
        Ok(pair) => Ok(pair),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(e),
        Err(e6) => {
            let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
            let pair = bind_both(v4)?;
            tracing::info!(error = %e6, "remote command port: IPv6 unavailable, listening on IPv4 only");
            Ok(pair)
        }
    }
}

fn bind_both(addr: SocketAddr) -> io::Result<(TcpListener, UdpSocket)> {
    use socket2::{Domain, Protocol, Socket, Type};
    let domain = Domain::for_address(addr);
    let tcp = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    let udp = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        tcp.set_only_v6(false)?;
        udp.set_only_v6(false)?;
    }
    tcp.set_reuse_address(true)?;
    tcp.bind(&addr.into())?;
    tcp.listen(16)?;
    // With port 0 (tests) UDP takes the port TCP got.
    let port = tcp
        .local_addr()?
        .as_socket()
        .map_or(addr.port(), |a| a.port());
    udp.bind(&SocketAddr::new(addr.ip(), port).into())?;
    tcp.set_nonblocking(true)?;
    udp.set_read_timeout(Some(POLL))?;
    Ok((tcp.into(), udp.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    #[test]
    fn binds_dual_stack_or_v4() {
        let (tcp, udp) = bind(0).unwrap();
        let port = tcp.local_addr().unwrap().port();
        assert_ne!(port, 0);
        assert_eq!(udp.local_addr().unwrap().port(), port);
        // Reachable over IPv4 whichever family it bound.
        let _c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
