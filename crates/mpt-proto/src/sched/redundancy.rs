//! Redundancy for real-time flows: which packets also go on a second path.
//!
//! A voice or video call cannot wait for a lost packet to be repaired, nor
//! for a silent path to be declared suspect: a packet sent on a path that
//! has just gone dark is lost, and every one after it until the sender
//! notices. Such flows are light (tens of kbit/s), so the tunnel sends each
//! of their packets on the two lowest-delay live paths and the receiver
//! keeps the first copy; a path failing without a word then costs nothing.
//!
//! Which flows, under `redundancy = "auto"` (the default):
//! * packets marked with a real-time DSCP ([`is_realtime_dscp`]: EF, VA,
//!   CS5, and network control CS6/CS7);
//! * flows that look real-time ([`RealtimeFlows`]): small UDP packets (at
//!   most [`REALTIME_MAX_LEN`] bytes) at a low, steady rate (at least
//!   [`REALTIME_MIN_GAP_NS`] apart, at most [`REALTIME_MAX_GAP_NS`]), from
//!   the [`REALTIME_RUN`]th such packet in a row on. One packet that breaks
//!   the pattern (a large one, or a burst) ends it.
//!
//! `"all"` sends every packet twice (for links so bad that bandwidth is
//! cheaper than loss), `"off"` none. Memory is one small entry per flow
//! bucket.

use crate::flow::{FlowTable, FLOW_BUCKETS};

/// What gets a second copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Redundancy {
    /// Real-time DSCPs and flows that look real-time.
    #[default]
    Auto,
    /// Nothing.
    Off,
    /// Every packet.
    All,
}

/// Largest IP packet of a flow that looks real-time (voice frames are
/// 60-250 bytes with headers).
pub const REALTIME_MAX_LEN: usize = 400;

/// Packets closer than this (over 200 per second) are not real-time media.
pub const REALTIME_MIN_GAP_NS: u64 = 5_000_000;

/// Packets further apart than this do not make a steady flow.
pub const REALTIME_MAX_GAP_NS: u64 = 200_000_000;

/// Consecutive small, steady packets before a flow counts as real-time.
pub const REALTIME_RUN: u16 = 3;

/// Whether `dscp` marks real-time traffic: EF (46), VOICE-ADMIT (44), CS5
/// (40, signalling), CS6 and CS7 (48, 56, network control).
pub fn is_realtime_dscp(dscp: u8) -> bool {
    matches!(dscp, 46 | 44 | 40 | 48 | 56)
}

/// Whether `packet` is a UDP datagram (IPv4, or IPv6 with UDP right after
/// the fixed header).
pub fn is_udp(packet: &[u8]) -> bool {
    match packet.first().map(|b| b >> 4) {
        Some(4) => packet.len() >= 20 && packet[9] == 17,
        Some(6) => packet.len() >= 40 && packet[6] == 17,
        _ => false,
    }
}

/// Per flow bucket: when its last packet left and how many small, steady
/// ones came in a row.
#[derive(Debug, Clone)]
pub struct RealtimeFlows {
    last: Box<[(u64, u16); FLOW_BUCKETS]>,
}

impl Default for RealtimeFlows {
    fn default() -> Self {
        RealtimeFlows::new()
    }
}

impl RealtimeFlows {
    /// No flow seen yet.
    pub fn new() -> RealtimeFlows {
        RealtimeFlows {
            last: Box::new([(0, 0); FLOW_BUCKETS]),
        }
    }

    /// Takes in a packet of the flow hashed to `hash` sent at `now_ns` and
    /// says whether the flow looks real-time now.
    pub fn on_packet(&mut self, hash: u32, packet: &[u8], now_ns: u64) -> bool {
        let entry = &mut self.last[FlowTable::bucket(hash)];
        let (last, run) = *entry;
        let gap = now_ns.saturating_sub(last);
        let small = packet.len() <= REALTIME_MAX_LEN && is_udp(packet);
        let steady = last != 0 && (REALTIME_MIN_GAP_NS..=REALTIME_MAX_GAP_NS).contains(&gap);
        let run = match (small, steady) {
            (true, true) => run.saturating_add(1),
            // The first small packet after a pause starts a new run.
            (true, false) if last == 0 || gap > REALTIME_MAX_GAP_NS => 1,
            _ => 0,
        };
        *entry = (now_ns.max(1), run);
        run >= REALTIME_RUN
    }

    /// Whether a packet gets a second copy under `mode`: every packet of
    /// the flow must be passed here (a large one ends the flow's run).
    pub fn wants_copy(&mut self, mode: Redundancy, hash: u32, packet: &[u8], now_ns: u64) -> bool {
        match mode {
            Redundancy::Off => false,
            Redundancy::All => true,
            Redundancy::Auto => {
                let looks = self.on_packet(hash, packet, now_ns);
                looks || crate::flow::dscp(packet).is_some_and(is_realtime_dscp)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn udp(len: usize, dscp: u8) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[1] = dscp << 2;
        p[9] = 17;
        p
    }

    #[test]
    fn voice_is_recognised_from_the_third_packet_and_bulk_never() {
        let mut f = RealtimeFlows::new();
        let voice = udp(200, 0);
        let t = 1_000 * MS;
        assert!(!f.on_packet(1, &voice, t));
        assert!(!f.on_packet(1, &voice, t + 20 * MS));
        assert!(f.on_packet(1, &voice, t + 40 * MS));
        assert!(f.on_packet(1, &voice, t + 60 * MS));
        // A large packet ends it; it takes three small ones again.
        assert!(!f.on_packet(1, &udp(1400, 0), t + 80 * MS));
        assert!(!f.on_packet(1, &voice, t + 100 * MS));
        // Bulk: small UDP but 1000 per second is no voice.
        let mut g = RealtimeFlows::new();
        let looked = (0..100)
            .filter(|k| g.on_packet(2, &voice, t + k * MS))
            .count();
        assert_eq!(looked, 0);
        // TCP of any size is not UDP.
        let mut tcp = udp(100, 0);
        tcp[9] = 6;
        let mut h = RealtimeFlows::new();
        assert!((0..10).all(|k| !h.on_packet(3, &tcp, t + k * 20 * MS)));
        // A long pause restarts the run.
        assert!(!f.on_packet(1, &voice, t + 120 * MS + 5_000 * MS));
    }

    #[test]
    fn modes_and_dscp() {
        let mut f = RealtimeFlows::new();
        let t = 1_000 * MS;
        let ef = udp(1200, 46);
        assert!(f.wants_copy(Redundancy::Auto, 9, &ef, t), "EF at once");
        assert!(!f.wants_copy(Redundancy::Off, 9, &ef, t));
        let plain = udp(1400, 0);
        assert!(!f.wants_copy(Redundancy::Auto, 9, &plain, t));
        assert!(f.wants_copy(Redundancy::All, 9, &plain, t));
        for d in [46, 44, 40, 48, 56] {
            assert!(is_realtime_dscp(d));
        }
        for d in [0, 8, 10, 34, 32] {
            assert!(!is_realtime_dscp(d));
        }
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        v6[6] = 17;
        assert!(is_udp(&v6) && !is_udp(&v6[..39]) && !is_udp(&[]));
    }
}
