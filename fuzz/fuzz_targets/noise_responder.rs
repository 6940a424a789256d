//! The public-key handshake's responder (`mpt_proto::noise::Responder`)
//! never panics on any input and accepts nothing but an authentic
//! initiation. Every input goes to a fresh responder that knows one
//! client; a valid initiation from that client is built once.
//!
//! The first input byte picks how the rest is used:
//!
//! | byte & 3 | input                                                      |
//! |----------|------------------------------------------------------------|
//! | 0        | the rest, as is (also to the three message parsers)        |
//! | 1        | the valid initiation with the rest XORed over it           |
//! | 2        | as 1, with the responder under load                        |
//! | 3        | the rest under a valid initiation header (type 11, flags 0)|
//!
//! Checked besides "no panic":
//! * an answer is never larger than the initiation (no amplification);
//! * mode 1: accepted exactly when the mask is zero over everything mac1
//!   covers (mac2 is not checked off load); forging mac1 and the Noise
//!   tags by chance has probability 2^-128, so any other acceptance is a
//!   bug; a refusal of an altered header or mac1 does no Noise work;
//! * mode 2: without a cookie, the answer is a cookie reply at most;
//! * modes 0 and 3: nothing is accepted unless it is byte for byte the
//!   valid initiation.

#![no_main]

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use mpt_proto::noise::{
    parse_cookie_reply, parse_initiation, parse_response, Entropy, Identity, Initiator, Outgoing,
    Reply, Responder, ResponderConfig, StaticSecret, Tai64n, INITIATION_LEN, MAC_LEN,
};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};

struct Counter(u64);

impl Entropy for Counter {
    fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (self.0 >> 56) as u8;
        }
    }
}

const SERVER: [u8; 32] = [0x51; 32];
const CLIENT: [u8; 32] = [0xc1; 32];

fn template() -> Header {
    Header {
        msg_type: MsgType::Data,
        flags: Flags::NONE,
        path_id: 1,
        conn_id: 0,
        seq: 1,
        path_seq: 1,
        timestamp_us: 1,
    }
}

struct Fixture {
    base: Instant,
    initiation: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let base = Instant::now();
        let client = Identity::new(StaticSecret::from_bytes(CLIENT)).expect("identity");
        let server = StaticSecret::from_bytes(SERVER).public_key();
        let mut i = Initiator::new(client, server, None);
        let mut out = vec![0u8; INITIATION_LEN];
        let len = i
            .initiate(
                7,
                Tai64n::from_unix(Duration::from_secs(1_800_000_000)),
                base,
                Outgoing {
                    template: template(),
                    entropy: &mut Counter(1),
                    out: &mut out,
                },
            )
            .expect("initiation");
        out.truncate(len);
        Fixture {
            base,
            initiation: out,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut responder: Responder<u8> = Responder::new(
        Identity::new(StaticSecret::from_bytes(SERVER)).expect("identity"),
        ResponderConfig::default(),
    );
    responder.add_peer(StaticSecret::from_bytes(CLIENT).public_key(), 1, None);
    let (dgram, under_load) = match mode & 3 {
        0 => (rest.to_vec(), false),
        1 | 2 => {
            let mut d = f.initiation.clone();
            for (b, m) in d.iter_mut().zip(rest) {
                *b ^= m;
            }
            (d, mode & 3 == 2)
        }
        _ => {
            let mut d = f.initiation[..HEADER_LEN].to_vec();
            d.extend_from_slice(rest);
            (d, false)
        }
    };
    let _ = parse_initiation(&dgram);
    let _ = parse_response(&dgram);
    let _ = parse_cookie_reply(&dgram);
    let src: SocketAddr = "192.0.2.1:5000".parse().expect("address");
    let mut out = [0u8; 256];
    let reply = responder.handle_initiation(
        &dgram,
        src,
        9,
        f.base,
        under_load,
        Outgoing {
            template: template(),
            entropy: &mut Counter(2),
            out: &mut out,
        },
    );
    let untouched = rest.iter().take(INITIATION_LEN - MAC_LEN).all(|&m| m == 0);
    match reply {
        Ok(Reply::Response { len, peer, .. }) => {
            assert!(len <= dgram.len(), "amplification");
            assert_eq!(peer, 1);
            match mode & 3 {
                1 => assert!(untouched, "accepted an altered initiation"),
                2 => panic!("accepted without a cookie under load"),
                _ => assert_eq!(dgram, f.initiation, "accepted a forgery"),
            }
        }
        Ok(Reply::CookieReply { len }) => {
            assert!(len <= dgram.len(), "amplification");
            assert!(under_load, "cookie reply off load");
        }
        Err(_) => {
            if mode & 3 == 1 {
                assert!(!untouched, "refused the valid initiation");
            }
        }
    }
    let c = responder.counters();
    if mode & 3 == 1
        && rest
            .iter()
            .take(INITIATION_LEN - 2 * MAC_LEN)
            .all(|&m| m == 0)
    {
        // Only mac1 bytes altered (or none): at most one Noise run.
        assert!(c.initiations_processed <= 1);
    }
    if c.refused.mac1 + c.refused.malformed > 0 {
        assert_eq!(c.initiations_processed, 0, "Noise work before mac1");
    }
});
