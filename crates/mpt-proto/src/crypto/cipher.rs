//! The AEAD that seals data datagrams: AES-256-GCM or ChaCha20-Poly1305.
//!
//! Both are ring's, both take 32-byte keys, 12-byte nonces and give 16-byte
//! tags, so the datagram layout, the nonce (`0u32 || seq`) and the key
//! derivation are the same for either; only the algorithm differs. Why a
//! choice at all: on a CPU with AES-NI and carry-less multiply (every
//! x86-64 server of the last decade, ARMv8 with the crypto extension)
//! AES-256-GCM seals a 1400-byte packet in well under half the time of
//! ChaCha20-Poly1305 (measured: docs/results/2026-11-25-per-packet-cost.md),
//! and sealing and opening are most of what
//! an encrypted tunnel costs per packet. Without those instructions
//! ChaCha20-Poly1305 is the faster one (ring's AES then falls back to a
//! slower constant-time implementation).
//!
//! Both ends must use the same cipher, so the choice is bound into the
//! handshake: ChaCha20-Poly1305 leaves every handshake byte as it was
//! before the choice existed (older peers keep working), AES-256-GCM adds
//! its name to the PSK handshake's MAC key labels and to the Noise
//! prologue. Peers configured differently therefore fail the handshake
//! (counted as a bad MAC or a refused initiation) instead of agreeing on
//! keys and then failing every datagram.

use ring::aead::{Algorithm, AES_256_GCM, CHACHA20_POLY1305};

/// The data-plane AEAD of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Cipher {
    /// ChaCha20-Poly1305 (RFC 8439): fast in software on any CPU; the
    /// protocol's original cipher, so the library's default.
    #[default]
    ChaCha20Poly1305,
    /// AES-256-GCM: about twice as fast where the CPU has AES instructions.
    Aes256Gcm,
}

impl Cipher {
    /// Every cipher, for listing in errors and help.
    pub const ALL: [Cipher; 2] = [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305];

    /// The configuration name: `"aes-256-gcm"` or `"chacha20-poly1305"`.
    pub const fn name(self) -> &'static str {
        match self {
            Cipher::ChaCha20Poly1305 => "chacha20-poly1305",
            Cipher::Aes256Gcm => "aes-256-gcm",
        }
    }

    /// The cipher of a configuration name (exact, lower case).
    pub fn from_name(name: &str) -> Option<Cipher> {
        Cipher::ALL.into_iter().find(|c| c.name() == name)
    }

    /// ring's algorithm.
    pub(crate) fn algorithm(self) -> &'static Algorithm {
        match self {
            Cipher::ChaCha20Poly1305 => &CHACHA20_POLY1305,
            Cipher::Aes256Gcm => &AES_256_GCM,
        }
    }

    /// What the handshakes append to their labels and prologue: nothing
    /// for the original cipher, so its handshakes are unchanged.
    pub(crate) const fn binding(self) -> &'static [u8] {
        match self {
            Cipher::ChaCha20Poly1305 => b"",
            Cipher::Aes256Gcm => b" aes-256-gcm",
        }
    }
}

impl std::fmt::Display for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
