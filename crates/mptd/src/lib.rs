//! # mptd: the mpt multipath tunnel daemon
//!
//! The data plane is split into named stages, each with its own worker
//! loop and batch buffers (see docs/ARCHITECTURE.md):
//!
//! * [`tx`]: read tun → route → schedule → send (one worker per tun queue);
//! * [`rx`]: receive on a path → check → write tun (one worker per
//!   connection);
//! * [`control_loop`]: drives the sans-IO [`mpt_proto::Session`] of every
//!   connection (probes, liveness, RTT, loss) and publishes which paths the
//!   schedulers may use;
//! * [`control`]: the unix control socket; [`command`] and [`pathset`]:
//!   runtime changes (path state, weights, paths added and removed, reload).
//!
//! [`config`] turns TOML into a validated [`config::Config`]; [`daemon`]
//! wires everything together.

pub mod auth_warning;
pub mod cmd_port;
pub mod command;
pub mod config;
pub mod control;
pub mod control_loop;
pub mod crypto_pool;
pub mod daemon;
pub mod demux;
pub mod equalize;
pub mod fatal;
pub mod handshake;
pub mod keys;
pub mod links;
pub mod metrics;
pub mod model;
pub mod netlink;
pub mod noise;
pub mod notify;
pub mod pathset;
pub mod repair;
pub mod route;
pub mod rx;
pub mod shared;
pub mod source;
pub mod state;
pub mod tun;
pub mod tun_write;
pub mod tx;
pub mod tx_order;
pub mod udp;
