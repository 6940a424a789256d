//! Public-key identities and the Noise IK handshake (forward secrecy).
//!
//! Work in progress: this module grows in steps (keys first, then the
//! handshake, cookies and rekey timers).

mod keys;

pub use keys::{PublicKey, StaticSecret, KEY_LEN};
