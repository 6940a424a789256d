//! Shared inputs of the mpt hot-path benchmarks (`benches/*.rs`).
//!
//! Each benchmark measures one packet's worth of work and reports it per
//! packet. The inputs are built here so that every bench uses the same
//! packet and path shapes:
//!
//! * `wire`: emit a data header into a caller-owned buffer, parse it back,
//!   check the inner IP packet; emit and parse a keepalive body.
//! * `sched`: one [`mpt_proto::sched::Weighted`] pick over 2, 4, 12 and 32
//!   paths with mixed weights, window 1 and 8.
//! * `reorder`: one [`mpt_proto::reorder::Resequencer`] insert, in order,
//!   with two paths interleaved (even/odd) so that half the packets are
//!   held, and with one path lagging and 1 % loss ([`LossyReordered`]).
//! * `crypto`: seal and open of one data datagram of 64, 512, 1400 and
//!   8192 bytes with session keys from a real handshake ([`session_keys`]),
//!   and both in turn at 1400; one replay-window check+update; one full
//!   PSK handshake.
//!
//! Measurement settings are short on purpose (see [`MEASUREMENT_TIME`]): the
//! numbers are for spotting regressions of several percent, not for
//! publication.

use std::time::Duration;

use mpt_proto::crypto::{Answer, HandshakeError, Initiator, Psk, Responder, SessionKeys};
use mpt_proto::sched::SchedPath;
use mpt_proto::wire::{Flags, Header, MsgType};

/// Connection id of every bench header.
pub const CONN_ID: u32 = 0x6d70_7401;

/// Inner packet size of the data benches: a typical tunnel MTU payload.
pub const PACKET_LEN: usize = 1400;

/// Criterion warm-up time per benchmark.
pub const WARM_UP_TIME: Duration = Duration::from_secs(1);
/// Criterion measurement time per benchmark: 1 s of warm-up plus 3 s
/// keeps each bench binary near a minute (sched, with 20 benchmarks,
/// nearer a minute and a half; filter it, e.g. `-- 4paths`, in a hurry).
pub const MEASUREMENT_TIME: Duration = Duration::from_secs(3);
/// Criterion samples per benchmark (its minimum is 10).
pub const SAMPLE_SIZE: usize = 30;

/// The criterion settings every bench of this crate uses: short runs, so
/// `cargo bench -p mpt-benches` stays within about three minutes on 2 cores.
pub fn criterion_config() -> criterion::Criterion {
    criterion::Criterion::default()
        .warm_up_time(WARM_UP_TIME)
        .measurement_time(MEASUREMENT_TIME)
        .sample_size(SAMPLE_SIZE)
        .without_plots()
}

/// A well-formed IPv4 packet of `len` bytes (at least 20): version 4,
/// IHL 5, total length `len`, UDP, the rest filled with 0xa5.
pub fn ipv4_packet(len: usize) -> Vec<u8> {
    assert!(
        (20..=usize::from(u16::MAX)).contains(&len),
        "IPv4 packet length {len} out of range"
    );
    let mut p = vec![0xa5; len];
    p[0] = 0x45;
    p[1] = 0;
    let total = u16::try_from(len).unwrap_or(u16::MAX);
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[4..8].fill(0);
    p[8] = 64; // TTL
    p[9] = 17; // UDP
    p
}

/// The header of the `seq`-th data datagram on path `path_id`.
pub fn data_header(seq: u64, path_id: u16) -> Header {
    Header {
        msg_type: MsgType::Data,
        flags: Flags::NONE,
        path_id,
        conn_id: CONN_ID,
        seq,
        path_seq: seq as u32,
        timestamp_us: (seq as u32).wrapping_mul(7),
    }
}

/// The header of the `seq`-th sealed data datagram on path `path_id`
/// ([`data_header`] with [`Flags::SEALED`]).
pub fn sealed_data_header(seq: u64, path_id: u16) -> Header {
    Header {
        flags: Flags::SEALED,
        ..data_header(seq, path_id)
    }
}

/// The fixed pre-shared key of the crypto benches.
pub fn bench_psk() -> Psk {
    Psk::from_bytes(*b"mpt bench pre-shared key 32 byte")
}

/// The header of a handshake message (type and flags are set by the
/// handshake itself).
pub fn handshake_header(seq: u64) -> Header {
    Header {
        msg_type: MsgType::HandshakeInit,
        ..data_header(seq, 0)
    }
}

/// Instance id of the benches' initiator.
pub const BENCH_INITIATOR: [u8; 8] = *b"bench-i!";
/// Instance id of the benches' responder.
pub const BENCH_RESPONDER: [u8; 8] = *b"bench-r!";

/// A responder for [`CONN_ID`] under `psk`, with [`BENCH_RESPONDER`].
pub fn bench_responder(psk: &Psk) -> Result<Responder, HandshakeError> {
    Responder::new(psk, CONN_ID, BENCH_RESPONDER)
}

/// One full handshake under `psk`: Init then Response, with the
/// Challenge/cookie round in between when the responder asks for it (its
/// first handshake). Returns the initiator's and the responder's session
/// keys. `counter` makes the nonces and the Init timestamp (`counter + 1`,
/// then `counter + 2` for a cookie Init) distinct per handshake.
pub fn handshake(
    psk: &Psk,
    responder: &mut Responder,
    counter: u64,
    now: std::time::Instant,
) -> Result<(SessionKeys, SessionKeys), HandshakeError> {
    let mut init = [0u8; mpt_proto::crypto::INIT_LEN];
    let mut reply = [0u8; mpt_proto::crypto::INIT_LEN];
    let mut i_nonce = [0x11u8; 32];
    let mut r_nonce = [0x22u8; 32];
    i_nonce[..8].copy_from_slice(&counter.to_le_bytes());
    r_nonce[..8].copy_from_slice(&counter.to_le_bytes());
    let cookie = [0x33u8; 16];
    let header = handshake_header(counter);
    let (mut initiator, mut n) = Initiator::start(
        psk,
        BENCH_INITIATOR,
        &header,
        i_nonce,
        counter + 1,
        None,
        &mut init,
    )?;
    for _ in 0..2 {
        match responder.handle_init(&init[..n], r_nonce, cookie, now, &header, &mut reply)? {
            Answer::Response { keys, len } => {
                let i_keys = initiator.handle_response(&reply[..len])?;
                return Ok((i_keys, *keys));
            }
            Answer::Challenge { len } => {
                let cookie = initiator.handle_challenge(&reply[..len])?;
                (initiator, n) = Initiator::start(
                    psk,
                    BENCH_INITIATOR,
                    &header,
                    i_nonce,
                    counter + 2,
                    Some(cookie),
                    &mut init,
                )?;
            }
        }
    }
    Err(HandshakeError::BadCookie)
}

/// A matching pair of session keys, `(initiator, responder)`, from one
/// handshake under [`bench_psk`]: what the initiator seals the responder
/// opens. (Session keys exist only as the result of a handshake.)
pub fn session_keys() -> (SessionKeys, SessionKeys) {
    let psk = bench_psk();
    let mut responder = bench_responder(&psk).expect("responder from a 32-byte PSK");
    handshake(&psk, &mut responder, 0, std::time::Instant::now())
        .expect("handshake with matching PSKs succeeds")
}

/// `n` paths with mixed weights (cycling through 1, 2, 3, 5, 8) and the
/// given window.
pub fn mixed_paths(n: usize, window: u32) -> Vec<SchedPath> {
    const WEIGHTS: [u32; 5] = [1, 2, 3, 5, 8];
    (0..n)
        .map(|i| SchedPath {
            weight: WEIGHTS[i % WEIGHTS.len()],
            window,
        })
        .collect()
}

/// The eligibility mask with the low `n` bits set.
pub fn all_paths_mask(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Arrival order of two paths striping a connection: path 0 carries the
/// even, path 1 the odd sequence numbers, and each odd packet overtakes the
/// even one before it (1, 0, 3, 2, …), so every odd packet waits in the
/// resequencer for exactly one packet and half of all packets are held.
///
/// The first two packets (0 then 1) arrive in order, so the resequencer
/// starts at 0 and has seen both paths before the pattern begins.
#[derive(Debug, Clone, Default)]
pub struct Interleaved {
    i: u64,
}

impl Interleaved {
    /// The stream from its first packet.
    pub fn new() -> Interleaved {
        Interleaved::default()
    }
}

impl Iterator for Interleaved {
    /// `(seq, path)`.
    type Item = (u64, usize);

    fn next(&mut self) -> Option<(u64, usize)> {
        let i = self.i;
        self.i += 1;
        let seq = if i < 2 { i } else { i ^ 1 };
        Some((seq, (seq & 1) as usize))
    }
}

/// Arrival order of two paths striping a connection where path 1 lags
/// path 0 by `lag` of its packets and one sequence number in `loss_every`
/// is lost: path 0 carries the even, path 1 the odd numbers; after 0 and 1
/// the arrivals alternate between the paths (0, 1, 2, 4, …, 2·lag + 2, 3,
/// 2·lag + 4, 5, …), so
/// about `lag` packets wait in the resequencer at any time, and each lost
/// number is a gap that stays open until both paths have passed it (it
/// is then proven lost and skipped, with no timer).
///
/// Lost numbers are `seq % loss_every == loss_every / 2`; they are never
/// yielded. Yields `(seq, path)` for ever.
#[derive(Debug, Clone)]
pub struct LossyReordered {
    k: u64,
    lag: u64,
    loss_every: u64,
}

impl LossyReordered {
    /// The stream from its first packet; `loss_every` at least 4 (so
    /// that the first two packets, which introduce the paths, arrive).
    pub fn new(lag: u64, loss_every: u64) -> LossyReordered {
        assert!(loss_every >= 4, "loss_every must be at least 4");
        LossyReordered {
            k: 0,
            lag,
            loss_every,
        }
    }

    /// Whether `seq` is one of the lost numbers.
    pub fn is_lost(&self, seq: u64) -> bool {
        seq % self.loss_every == self.loss_every / 2
    }
}

impl Iterator for LossyReordered {
    /// `(seq, path)`.
    type Item = (u64, usize);

    fn next(&mut self) -> Option<(u64, usize)> {
        loop {
            let k = self.k;
            self.k += 1;
            // Arrival slots 0 and 1 are seq 0 on path 0 and seq 1 on path
            // 1, so the resequencer knows both paths from the start. After
            // that even slots belong to path 0 (seq = slot), odd ones to
            // path 1, which is `lag` of its own packets behind.
            let seq = if k < 2 || k & 1 == 0 {
                k
            } else if k >= 2 * self.lag + 3 {
                k - 2 * self.lag
            } else {
                continue;
            };
            if !self.is_lost(seq) {
                return Some((seq, (seq & 1) as usize));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_proto::wire::check_ip_packet;

    #[test]
    fn bench_packet_is_valid_ipv4() {
        assert_eq!(check_ip_packet(&ipv4_packet(PACKET_LEN)), Ok(()));
    }

    #[test]
    fn interleaved_holds_half() {
        use mpt_proto::reorder::{Outcome, Resequencer};
        let now = std::time::Instant::now();
        let mut r = Resequencer::new(64, PACKET_LEN, Duration::from_millis(10));
        let packet = ipv4_packet(PACKET_LEN);
        let mut delivered = 0u64;
        let mut outcomes = vec![];
        for (seq, path) in Interleaved::new().take(1002) {
            outcomes.push(r.insert(seq, path, &packet, now, |_| delivered += 1));
        }
        assert_eq!(delivered, 1002);
        assert_eq!(r.held(), 0);
        assert_eq!(r.stats().held, 500);
        assert_eq!(r.stats().gaps_skipped, 0);
        assert_eq!(
            &outcomes[..6],
            [
                Outcome::InOrder,
                Outcome::InOrder,
                Outcome::Held,
                Outcome::InOrder,
                Outcome::Held,
                Outcome::InOrder
            ]
        );
    }

    #[test]
    fn lossy_reordered_skips_only_the_lost() {
        use mpt_proto::reorder::Resequencer;
        let now = std::time::Instant::now();
        let mut r = Resequencer::new(64, PACKET_LEN, Duration::from_millis(10));
        // One instant for every packet: the paths' order alone proves
        // loss (a reorder grace would never pass).
        r.set_reorder_grace(Duration::ZERO);
        let packet = ipv4_packet(PACKET_LEN);
        let stream = LossyReordered::new(8, 100);
        let mut delivered = 0u64;
        let mut arrived = 0u64;
        let mut seen = std::collections::HashSet::new();
        for (seq, path) in stream.clone().take(10_000) {
            assert!(!stream.is_lost(seq));
            assert_eq!(path as u64, seq & 1);
            assert!(seen.insert(seq), "seq {seq} twice");
            r.insert(seq, path, &packet, now, |_| delivered += 1);
            arrived += 1;
        }
        let stats = r.stats();
        assert_eq!(stats.late, 0, "{stats:?}");
        assert_eq!(stats.duplicates, 0, "{stats:?}");
        assert!(stats.gaps_skipped >= 90, "{stats:?}");
        assert!(stats.held > arrived / 3, "{stats:?}");
        assert!(r.held() <= 10, "held {} at the end", r.held());
        assert_eq!(delivered + r.held() as u64, arrived);
    }

    #[test]
    fn session_keys_match() {
        use mpt_proto::crypto::TAG_LEN;
        use mpt_proto::wire::HEADER_LEN;
        let (i, r) = session_keys();
        let packet = ipv4_packet(PACKET_LEN);
        let mut buf = vec![0u8; HEADER_LEN + PACKET_LEN + TAG_LEN];
        sealed_data_header(7, 0).emit(&mut buf).unwrap();
        buf[HEADER_LEN..HEADER_LEN + PACKET_LEN].copy_from_slice(&packet);
        let n = i.seal_datagram(&mut buf, PACKET_LEN).unwrap();
        assert_eq!(n, buf.len());
        assert_ne!(&buf[HEADER_LEN..HEADER_LEN + PACKET_LEN], &packet[..]);
        let mut copy = buf.clone();
        assert_eq!(r.open_datagram(&mut buf).unwrap(), &packet[..]);
        // The initiator's own receive key is the other direction's.
        assert!(i.open_datagram(&mut copy).is_err());
    }

    #[test]
    fn masks() {
        assert_eq!(all_paths_mask(2), 0b11);
        assert_eq!(all_paths_mask(64), u64::MAX);
    }
}
