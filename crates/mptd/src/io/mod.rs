//! The kernel's interfaces, and nothing about tunnels: path sockets with
//! batched datagram I/O, the local address a datagram came in on, the tun
//! device and its coalescing writer, rtnetlink link, address and route
//! events, policy routing (rules and tables), routes through the tunnel,
//! the shared ports' initiation lane (a socket steered by a BPF program),
//! host-name lookups off the control loop, the operator's hook program,
//! and ending the process when the tun device is gone. This plane imports
//! no other plane of the daemon.

pub mod accel_rules;
pub mod fatal;
pub mod hook;
pub mod lane;
pub mod netlink;
pub mod notify;
pub mod policy;
pub mod resolve;
pub mod routes;
pub mod source;
pub mod tun;
pub mod tun_write;
pub mod udp;
