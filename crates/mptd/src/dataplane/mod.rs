//! The data plane: transmit and receive workers as named stages, the
//! crypto stage they share, and loss repair.
//!
//! * [`tx`]: read tun -> route -> schedule -> head -> seal -> send, one
//!   worker per tun queue;
//! * [`rx`]: receive on a path -> open -> check -> holes -> deliver to
//!   tun, one worker per connection (or a pool for a shared port);
//! * [`crypto_pool`]: helpers that seal and open a worker's batch in
//!   chunks, results in batch order;
//! * [`repair`], [`equalize`], [`demux`]: the receive side's loss repair,
//!   delay equalisation and connection lookup.
//!
//! Nothing here imports the control loop or the operator interfaces: what
//! the workers need from them is published in [`crate::plane`].

pub mod crypto_pool;
pub mod demux;
pub mod equalize;
pub mod repair;
pub mod rx;
pub mod tx;
