//! The shared ports: one UDP port per `port` value of the client
//! connections, with one SO_REUSEPORT socket per receive worker and
//! family (see `crate::plane::shared_port` for why).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::{Context, Result};

use crate::config::Config;
use crate::control::control_loop::SharedPort;
use crate::io::udp::PathSocket;

/// The bound shared ports.
pub(super) struct SharedPorts {
    /// The port numbers, sorted, once each.
    pub ports: Vec<u16>,
    /// Per receive worker: its sockets (every port, both families).
    pub sockets: Vec<Vec<PathSocket>>,
    /// The initiation lanes (per port and family; see `crate::io::lane`).
    pub lanes: Vec<PathSocket>,
    /// Per port: handles the control loop sends from.
    pub send: Vec<SharedPort>,
}

/// Binds the shared ports of `config`'s client connections for `workers`
/// receive workers. Without IPv6 on the host a port serves IPv4 only.
pub(super) fn bind(config: &Config, workers: usize) -> Result<SharedPorts> {
    let mut ports: Vec<u16> = config
        .connections
        .iter()
        .filter(|c| c.is_client())
        .map(|c| c.port)
        .collect();
    if config.awaits_clients() {
        ports.push(crate::config::DEFAULT_SHARED_PORT);
    }
    ports.sort_unstable();
    ports.dedup();
    let mut sockets: Vec<Vec<PathSocket>> = (0..workers).map(|_| Vec::new()).collect();
    let mut send = Vec::new();
    let mut lanes = Vec::new();
    for &port in &ports {
        let mut handles = SharedPort {
            port,
            v4: None,
            v6: None,
        };
        for any in [
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)),
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
        ] {
            for (w, worker_sockets) in sockets.iter_mut().enumerate() {
                match PathSocket::bind_shared(any) {
                    Ok(s) => {
                        if w == 0 {
                            let handle = s.share();
                            if any.is_ipv4() {
                                handles.v4 = Some(handle);
                            } else {
                                handles.v6 = Some(handle);
                            }
                        }
                        worker_sockets.push(s);
                    }
                    // No IPv6 on this host: clients use IPv4.
                    Err(e) if any.is_ipv6() && w == 0 => {
                        tracing::warn!(port, error = %e, "shared port: no IPv6 socket; clients reach it over IPv4 only");
                        break;
                    }
                    Err(e) => {
                        return Err(e).with_context(|| format!("shared port: binding {any}"));
                    }
                }
            }
            if any.is_ipv4() || handles.v6.is_some() {
                lanes.extend(bind_lane(any, workers));
            }
        }
        tracing::info!(
            port,
            workers,
            ipv6 = handles.v6.is_some(),
            "shared port for client connections"
        );
        send.push(handles);
    }
    Ok(SharedPorts {
        ports,
        sockets,
        lanes,
        send,
    })
}

/// The initiation lane of the group at `any`, bound after its `workers`
/// sockets; `None` (a warning, and the workers check initiations as
/// before) if the kernel refuses the steering program.
fn bind_lane(any: SocketAddr, workers: usize) -> Option<PathSocket> {
    let lane = match PathSocket::bind_shared(any) {
        Ok(lane) => lane,
        Err(e) => {
            tracing::warn!(%any, error = %e, "shared port: no initiation lane");
            return None;
        }
    };
    match crate::io::lane::attach(&lane, workers as u32) {
        Ok(()) => Some(lane),
        // Dropping the socket takes it out of the group again.
        Err(e) => {
            tracing::warn!(%any, error = %e, "shared port: no initiation lane (the kernel refused the steering program); initiations are checked by the receive workers");
            None
        }
    }
}
