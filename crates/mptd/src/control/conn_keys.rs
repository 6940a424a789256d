//! A connection's key exchange, as the control loop drives it: the
//! pre-shared-key handshake, the public-key (Noise) one, or none for a
//! cleartext connection. One value per connection, so the two kinds can
//! never both be set or drift apart by index.

use crate::control::handshake::KeyExchange;
use crate::control::noise::NoiseConn;

/// How a connection gets its session keys. Both handshakes hold
/// kilobytes of state, boxed so a cleartext connection costs a pointer.
#[derive(Debug)]
pub enum ConnKeys {
    /// Cleartext: no keys (or a client connection cut off by a reload).
    None,
    /// The pre-shared-key handshake (`key_file`, no `public_key`).
    Psk(Box<KeyExchange>),
    /// The public-key handshake (`public_key`), a PSK mixed in if any.
    Noise(Box<NoiseConn>),
}

impl ConnKeys {
    /// The PSK handshake, if that is how this connection keys.
    pub fn psk(&self) -> Option<&KeyExchange> {
        match self {
            ConnKeys::Psk(x) => Some(x),
            _ => None,
        }
    }

    /// The PSK handshake, mutable.
    pub fn psk_mut(&mut self) -> Option<&mut KeyExchange> {
        match self {
            ConnKeys::Psk(x) => Some(x),
            _ => None,
        }
    }

    /// The Noise handshake, mutable.
    pub fn noise_mut(&mut self) -> Option<&mut NoiseConn> {
        match self {
            ConnKeys::Noise(n) => Some(n),
            _ => None,
        }
    }
}
