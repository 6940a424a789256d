//! `[daemon]` handshake limits: how many public-key handshakes the daemon
//! spends CPU on, per source address and in all, and how many wait for
//! the control loop.
//!
//! The defaults suit a concentrator of a few hundred clients on a small
//! machine (docs/SECURITY.md explains each number). They are keys because
//! the right values depend on what the operator has: a concentrator with
//! thousands of clients behind one carrier-grade NAT needs a larger
//! per-source budget; a router on a slow CPU wants a smaller daemon-wide
//! one. Every value is bounded here, so a typo cannot switch a limit off
//! (0 would refuse every handshake; a huge value would let a flood through).

use super::raw::RawDaemon;

/// Handshake messages waiting for the control loop (the handshake queue,
/// apart from established sessions' control queue).
pub const DEFAULT_HANDSHAKE_QUEUE: usize = 1024;

/// The handshake limits of the daemon (`[daemon] handshake_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeConfig {
    /// `handshake_source_rate`: handshakes per second from one source
    /// address (IPv4 address or IPv6 /64; never the port).
    pub source_rate: u32,
    /// `handshake_source_burst`: how many one source may send at once.
    pub source_burst: u32,
    /// `handshake_rate`: handshakes per second for the whole daemon (its
    /// burst is half a second's worth).
    pub rate: u32,
    /// `handshake_queue`: handshake messages queued for the control loop;
    /// more are dropped and counted.
    pub queue: usize,
}

impl Default for HandshakeConfig {
    fn default() -> Self {
        let l = mpt_proto::noise::HandshakeLimits::default();
        HandshakeConfig {
            source_rate: l.per_source_per_sec,
            source_burst: l.per_source_burst,
            rate: l.global_per_sec,
            queue: DEFAULT_HANDSHAKE_QUEUE,
        }
    }
}

impl HandshakeConfig {
    /// The Noise responder's token buckets for these limits.
    pub fn responder_limits(&self) -> mpt_proto::noise::HandshakeLimits {
        mpt_proto::noise::HandshakeLimits {
            per_source_per_sec: self.source_rate,
            per_source_burst: self.source_burst,
            global_per_sec: self.rate,
            global_burst: (self.rate / 2).max(1),
            ..mpt_proto::noise::HandshakeLimits::default()
        }
    }
}

/// Ranges: low ends keep the daemon usable (a restarting NAT full of
/// clients must get through eventually), high ends keep a limit a limit.
const SOURCE_RATE: (u32, u32) = (1, 10_000);
const SOURCE_BURST: (u32, u32) = (1, 10_000);
const RATE: (u32, u32) = (1, 100_000);
const QUEUE: (usize, usize) = (16, 65_536);

fn in_range<T: PartialOrd + std::fmt::Display + Copy>(
    key: &str,
    v: T,
    (lo, hi): (T, T),
    unit: &str,
) -> Result<T, String> {
    if v < lo || v > hi {
        return Err(format!(
            "[daemon] key `{key}`: {v} is outside {lo}..={hi} ({unit})"
        ));
    }
    Ok(v)
}

/// The `handshake_*` keys of `[daemon]`, checked.
pub(super) fn handshake_config(d: &RawDaemon) -> Result<HandshakeConfig, String> {
    let def = HandshakeConfig::default();
    let c = HandshakeConfig {
        source_rate: in_range(
            "handshake_source_rate",
            d.handshake_source_rate.unwrap_or(def.source_rate),
            SOURCE_RATE,
            "handshakes per second from one source address",
        )?,
        source_burst: in_range(
            "handshake_source_burst",
            d.handshake_source_burst.unwrap_or(def.source_burst),
            SOURCE_BURST,
            "handshakes one source address may send at once",
        )?,
        rate: in_range(
            "handshake_rate",
            d.handshake_rate.unwrap_or(def.rate),
            RATE,
            "handshakes per second for the whole daemon",
        )?,
        queue: in_range(
            "handshake_queue",
            d.handshake_queue.unwrap_or(def.queue),
            QUEUE,
            "handshake messages waiting for the control loop",
        )?,
    };
    if c.rate < c.source_rate {
        return Err(format!(
            "[daemon] key `handshake_rate`: {} is below `handshake_source_rate` ({}): one source could never reach its own limit",
            c.rate, c.source_rate
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(keys: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
        let text = format!(
            "[daemon]\ncontrol = \"/tmp/x.sock\"\n{keys}\n[tunnel]\nname = \"mpt0\"\nipv4 = \"192.168.200.1/24\"\n\
             [[connection]]\nname = \"b\"\npeer_ipv4 = \"192.168.200.2\"\nport = 65022\n\
             [[connection.path]]\nname = \"p\"\nlocal = \"10.0.0.1\"\nremote = \"10.0.0.2\"\n"
        );
        crate::config::parse(&text, "h.toml")
    }

    #[test]
    fn defaults_are_the_protocol_defaults() {
        let c = with("").unwrap();
        assert_eq!(c.daemon.handshake, HandshakeConfig::default());
        assert_eq!(
            c.daemon.handshake.responder_limits(),
            mpt_proto::noise::HandshakeLimits::default()
        );
        assert_eq!(c.daemon.handshake.queue, 1024);
    }

    #[test]
    fn keys_set_the_limits() {
        let c = with(
            "handshake_source_rate = 50\nhandshake_source_burst = 40\nhandshake_rate = 2000\nhandshake_queue = 4096",
        )
        .unwrap();
        let h = c.daemon.handshake;
        assert_eq!(
            (h.source_rate, h.source_burst, h.rate, h.queue),
            (50, 40, 2000, 4096)
        );
        let l = h.responder_limits();
        assert_eq!((l.per_source_per_sec, l.per_source_burst), (50, 40));
        assert_eq!((l.global_per_sec, l.global_burst), (2000, 1000));
    }

    #[test]
    fn bad_values_get_errors_that_name_the_key() {
        for (keys, key) in [
            ("handshake_source_rate = 0", "handshake_source_rate"),
            ("handshake_source_rate = 20000", "handshake_source_rate"),
            ("handshake_source_burst = 0", "handshake_source_burst"),
            ("handshake_rate = 0", "handshake_rate"),
            ("handshake_rate = 1000000", "handshake_rate"),
            ("handshake_queue = 1", "handshake_queue"),
            ("handshake_queue = 1000000", "handshake_queue"),
            (
                "handshake_rate = 10\nhandshake_source_rate = 20",
                "handshake_rate",
            ),
            ("handshake_rate = -1", "handshake_rate"),
            ("handshake_queue = \"big\"", "handshake_queue"),
        ] {
            let e = with(keys).expect_err(keys);
            assert!(e.to_string().contains(key), "{keys}: {e}");
        }
    }

    #[test]
    fn a_change_needs_a_restart() {
        let a = with("").unwrap();
        let b = with("handshake_rate = 900").unwrap();
        let why = crate::config::reload::needs_restart(&a, &b);
        assert!(why.iter().any(|w| w.contains("handshake_rate")), "{why:?}");
    }
}
