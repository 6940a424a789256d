//! # mptd: the mpt multipath tunnel daemon
//!
//! The daemon is cut into planes with one-way imports (docs/ARCHITECTURE.md
//! draws them; a test in `tests/` holds the code to the rule):
//!
//! * [`io`]: the kernel's interfaces: path sockets with batched I/O, the
//!   tun device, rtnetlink events, routes. Imports no other plane.
//! * [`plane`]: what the data plane and the control loop share: connection
//!   and path state, counters, key sets, the session map, the router and
//!   the queue from the workers to the control loop.
//! * [`dataplane`]: the workers, as named stages (receive: open -> check
//!   -> holes -> deliver; send: plan -> head -> seal -> send), the crypto
//!   stage and loss repair. Never imports [`control`] or [`ops`].
//! * [`control`]: the control loop that drives every connection's sans-IO
//!   [`mpt_proto::Session`], key exchange, path changes. Never imports
//!   [`dataplane`].
//! * [`ops`]: what operators touch: the control socket, the command port,
//!   metrics, systemd notification. Reads [`plane`] and sends commands to
//!   [`control`].
//!
//! [`cli`] is the daemon's command line, [`config`] turns TOML into a validated [`config::Config`], [`keys`]
//! reads key files, and [`daemon`] wires everything together.

pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod dataplane;
pub mod io;
pub mod keys;
pub mod ops;
pub mod plane;
pub mod sync;
