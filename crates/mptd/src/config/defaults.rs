//! What a key is when the config does not give it: serde's `default`
//! functions for the `Raw*` tables, and the daemon section's defaults
//! used when there is no `[daemon]` at all.

use std::path::PathBuf;
use std::time::Duration;

use mpt_proto::crypto::Cipher;

use super::duration::Dur;

/// `[daemon] cipher` when not given: AES-256-GCM, about twice as fast as
/// ChaCha20-Poly1305 on CPUs with AES instructions (see
/// `mpt_proto::crypto::Cipher`).
pub const DEFAULT_CIPHER: Cipher = Cipher::Aes256Gcm;

/// `[daemon] resolve_interval` when not given: a host name's address is
/// looked up again this often (and at once when its path goes down).
pub const DEFAULT_RESOLVE_INTERVAL: Duration = Duration::from_secs(300);

pub(super) fn default_control() -> PathBuf {
    PathBuf::from("/run/mpt/mptd.sock")
}
/// `[daemon] hook_timeout` when not given.
pub(super) fn default_hook_timeout() -> Dur {
    Dur(Duration::from_secs(10))
}
pub(super) fn default_log() -> String {
    "info".into()
}
pub(super) fn default_tun_name() -> String {
    "mpt0".into()
}
pub(super) fn default_mtu() -> u16 {
    1400
}
pub(super) fn default_port() -> u16 {
    super::DEFAULT_SHARED_PORT
}
pub(super) fn default_keepalive() -> Dur {
    Dur(Duration::from_secs(2))
}
pub(super) fn default_dead() -> Dur {
    Dur(Duration::from_secs(5))
}
pub(super) fn default_repair() -> bool {
    true
}
pub(super) fn default_mss_clamp() -> bool {
    true
}
pub(super) fn default_one_u32() -> u32 {
    1
}
pub(super) fn default_one_u16() -> u16 {
    1
}
