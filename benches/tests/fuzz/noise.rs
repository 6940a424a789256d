//! The public-key handshake's three messages (initiation, response,
//! cookie reply) and the receive side's mac1 filter.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mpt_proto::noise::{
    Entropy, Identity, Initiator, Outgoing, PublicKey, Reply, Responder, ResponderConfig,
    StaticSecret, Tai64n,
};
use mpt_proto::wire::{Flags, Header, MsgType, HEADER_LEN};
use proptest::prelude::*;

use crate::harness::fuzz;

struct Counter(u64);

impl Entropy for Counter {
    fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            *b = (self.0 >> 56) as u8;
        }
    }
}

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

struct Ids {
    server: Identity,
    client: Identity,
    client_key: PublicKey,
}

/// The two identities (deriving a public key costs an X25519: once).
fn ids() -> &'static Ids {
    static I: OnceLock<Ids> = OnceLock::new();
    I.get_or_init(|| {
        let client = Identity::new(StaticSecret::from_bytes([0xc1; 32])).expect("identity");
        Ids {
            server: Identity::new(StaticSecret::from_bytes([0x51; 32])).expect("identity"),
            client_key: client.public_key(),
            client,
        }
    })
}

fn src() -> SocketAddr {
    "192.0.2.7:4000".parse().expect("address")
}

fn server() -> Responder<u32> {
    let mut r = Responder::new(ids().server.clone(), ResponderConfig::default());
    r.add_peer(ids().client_key, 1, None);
    r
}

fn answer(
    r: &mut Responder<u32>,
    dgram: &[u8],
    now: Instant,
    under_load: bool,
    rng: &mut Counter,
) -> (Result<Reply<u32>, mpt_proto::noise::NoiseError>, Vec<u8>) {
    let mut out = vec![0u8; 256];
    let reply = r.handle_initiation(
        dgram,
        src(),
        &mut |_| Some(77),
        now,
        under_load,
        Outgoing {
            template: template(),
            entropy: rng,
            out: &mut out,
        },
    );
    let len = match &reply {
        Ok(Reply::CookieReply { len }) | Ok(Reply::Response { len, .. }) => *len,
        Err(_) => 0,
    };
    out.truncate(len);
    (reply, out)
}

/// `mask` XORed over `msg` (the mask repeats no byte: a shorter mask
/// leaves the tail alone, a longer one is cut).
fn masked(msg: &[u8], mask: &[u8]) -> Vec<u8> {
    msg.iter()
        .enumerate()
        .map(|(i, b)| b ^ mask.get(i).copied().unwrap_or(0))
        .collect()
}

#[test]
fn noise_messages() {
    let input = (
        0u8..4,
        prop::collection::vec(any::<u8>(), 0..200),
        prop::collection::vec(prop_oneof![3 => Just(0u8), 1 => any::<u8>()], 0..170),
        any::<u64>(),
    );
    // Each case runs one or two handshakes' worth of X25519: fewer cases.
    fuzz("noise_messages", 32, input, |(mode, raw, mask, seed)| {
        let now = Instant::now();
        let mut rng = Counter(seed);
        let wall = Tai64n::from_unix(Duration::from_secs(1_800_000_000));
        let mut client = Initiator::new(ids().client.clone(), ids().server.public_key(), None);
        let mut init = vec![0u8; 200];
        let n = client
            .initiate(
                5,
                wall,
                now,
                Outgoing {
                    template: template(),
                    entropy: &mut rng,
                    out: &mut init,
                },
            )
            .expect("initiate");
        init.truncate(n);
        let mac1 = ids().server.mac1_check();
        prop_assert!(mac1.check(&init));
        match mode {
            0 => {
                // Raw bytes: nothing accepts them (unless they are a copy).
                let mut s = server();
                let accepted = answer(&mut s, &raw, now, false, &mut rng).0.is_ok();
                prop_assert_eq!(accepted, raw == init);
                prop_assert_eq!(mac1.check(&raw), raw == init);
                prop_assert!(client.handle_response(&raw).is_err());
                prop_assert!(client.handle_cookie_reply(&raw, now).is_err());
            }
            1 => {
                // The initiation, altered: accepted exactly when no byte
                // before mac2 changed (mac2 is not asked for without load).
                let d = masked(&init, &mask);
                let untouched = d[..d.len() - 16] == init[..init.len() - 16];
                prop_assert_eq!(mac1.check(&d), untouched);
                let mut s = server();
                let (r, _) = answer(&mut s, &d, now, false, &mut rng);
                prop_assert_eq!(r.is_ok(), untouched, "{:?}", r.err());
            }
            2 => {
                // The response, altered: taken exactly when unaltered, and
                // then both ends name the same indexes.
                let mut s = server();
                let (r, resp) = answer(&mut s, &init, now, false, &mut rng);
                let Ok(Reply::Response { established, .. }) = r else {
                    return Err(TestCaseError::fail("the genuine initiation was refused"));
                };
                let d = masked(&resp, &mask);
                let got = client.handle_response(&d);
                prop_assert_eq!(got.is_ok(), d == resp);
                if let Ok(e) = got {
                    prop_assert_eq!(e.local_index, 5);
                    prop_assert_eq!(e.remote_index, established.local_index);
                    prop_assert_eq!(established.remote_index, 5);
                }
            }
            _ => {
                // The cookie reply (under load, no mac2), altered.
                let mut s = server();
                let (r, cr) = answer(&mut s, &init, now, true, &mut rng);
                let cookie = matches!(r, Ok(Reply::CookieReply { .. }));
                prop_assert!(cookie, "no cookie reply under load");
                prop_assert!(cr.len() <= init.len(), "amplification");
                // Its header fields other than type and receiver index are
                // informational (docs/PROTOCOL.md: the AEAD covers the
                // cookie, with our mac1 as associated data): an altered
                // body or type is refused, the genuine reply taken.
                let d = masked(&cr, &mask);
                let ok = client.handle_cookie_reply(&d, now).is_ok();
                if d == cr {
                    prop_assert!(ok, "the genuine cookie reply was refused");
                }
                if ok {
                    prop_assert_eq!(&d[HEADER_LEN..], &cr[HEADER_LEN..]);
                    prop_assert_eq!(d[0], cr[0]);
                }
            }
        }
        Ok(())
    });
}
