//! Direct legs: a pinned leg set whose legs run over the paths' own
//! uplinks, beside the tunnel rather than inside it.
//!
//! A leg inside the tunnel pays the tunnel's per-packet header on top of
//! its own TCP/IP header: 1348 payload bytes per 1452 on the wire, where
//! a TCP connection on the path itself carries 1448 per 1500. That 4 %
//! is the whole gap between the acceleration and kernel MPTCP where MPTCP
//! fills every path (docs/ACCELERATION.md). A direct leg is a TCP
//! connection from the path's local address (its device and its uplink's
//! routing mark, as the path's UDP socket has) to the path's remote
//! address, at the TCP port with the connection's UDP port number.
//!
//! Outside the tunnel the leg needs its own protection, bound to what the
//! tunnel already trusts:
//!
//! - a connection with a `public_key` runs `Noise_KKpsk2` with both
//!   static keys (and the `key_file` PSK if there is one, else zeros),
//! - a connection with only a `key_file` runs `Noise_NNpsk0` with its
//!   PSK,
//! - a cleartext connection's legs are cleartext too, taken only from the
//!   connection's configured remote addresses (what its tunnel accepts).
//!
//! On the wire: a clear prelude (magic, version, mode, connection id; it
//! is also the Noise prologue, so it cannot be altered unnoticed), the two
//! handshake messages, then sealed messages: a 2-byte length and one
//! ChaCha20-Poly1305 message with the nonce counted by each side (TCP
//! keeps them in order). The first sealed message is the leg's JOIN: the
//! far end admits a leg to a set only once it has opened it, so a replayed
//! first handshake message (an on-path attacker's) costs one answer and
//! never holds a place among the joining sets. Each of a set's chunks is
//! one sealed message.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use snow::{HandshakeState, StatelessTransportState};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use zeroize::Zeroizing;

use crate::frame::{self, Frame, FrameError, Join};

/// The prelude's magic ("mD": mpt, direct leg).
pub const MAGIC: [u8; 2] = *b"mD";
/// The prelude's version.
pub const VERSION: u8 = 1;
/// Prelude: magic, version, mode, connection id.
pub const PRELUDE_LEN: usize = 8;
/// Longest handshake message accepted (both patterns' are 48 bytes).
const HANDSHAKE_MAX: usize = 256;
/// Poly1305's tag.
const TAG: usize = 16;
/// Longest sealed message (Noise's limit).
pub const MAX_SEALED: usize = 65_535;
/// How long a leg's handshake may take before the socket gives up.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

const KK: &str = "Noise_KKpsk2_25519_ChaChaPoly_BLAKE2s";
const NN: &str = "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s";
const NO_PSK: [u8; 32] = [0; 32];

/// A 32-byte secret, wiped when the last holder drops it.
pub type Secret = Arc<Zeroizing<[u8; 32]>>;

/// What protects a connection's direct legs (the connection's own keys).
#[derive(Clone)]
pub enum LegKey {
    /// A cleartext connection: cleartext legs, from its remotes only.
    Clear,
    /// A `key_file` connection: `Noise_NNpsk0` with the PSK.
    Psk(Secret),
    /// A `public_key` connection: `Noise_KKpsk2`.
    Static {
        /// Our private key.
        private: Secret,
        /// The peer's public key.
        peer_public: [u8; 32],
        /// The connection's PSK, if it has one.
        psk: Option<Secret>,
    },
}

impl fmt::Debug for LegKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl LegKey {
    /// The mode byte of the prelude.
    fn mode(&self) -> u8 {
        match self {
            LegKey::Clear => 0,
            LegKey::Psk(_) => 1,
            LegKey::Static { .. } => 2,
        }
    }

    /// For logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            LegKey::Clear => "cleartext",
            LegKey::Psk(_) => "pre-shared key",
            LegKey::Static { .. } => "public keys",
        }
    }

    /// A handshake state for this key (`None`: cleartext).
    fn handshake(&self, prologue: &[u8], initiator: bool) -> io::Result<Option<HandshakeState>> {
        let mut seed = Zeroizing::new([0u8; 32]);
        let built = match self {
            LegKey::Clear => return Ok(None),
            LegKey::Psk(psk) => {
                fill_random(&mut seed[..])?;
                let b = mpt_proto::noise::seeded_builder(params(NN), &seed)
                    .prologue(prologue)
                    .and_then(|b| b.psk(0, psk));
                build(b, initiator)
            }
            LegKey::Static {
                private,
                peer_public,
                psk,
            } => {
                fill_random(&mut seed[..])?;
                let b = mpt_proto::noise::seeded_builder(params(KK), &seed)
                    .prologue(prologue)
                    .and_then(|b| b.local_private_key(&private[..]))
                    .and_then(|b| b.remote_public_key(peer_public))
                    .and_then(|b| b.psk(2, psk.as_ref().map_or(&NO_PSK, |p| &**p)));
                build(b, initiator)
            }
        };
        built.map(Some).map_err(noise_io)
    }
}

fn params(s: &str) -> snow::params::NoiseParams {
    // Both names are constants that snow's parser takes (tested below).
    s.parse().expect("a valid Noise pattern name")
}

fn build(
    b: Result<snow::Builder<'_>, snow::Error>,
    initiator: bool,
) -> Result<HandshakeState, snow::Error> {
    if initiator {
        b?.build_initiator()
    } else {
        b?.build_responder()
    }
}

fn fill_random(out: &mut [u8]) -> io::Result<()> {
    use ring::rand::SecureRandom;
    ring::rand::SystemRandom::new()
        .fill(out)
        .map_err(|_| io::Error::other("the system random source failed"))
}

fn noise_io(e: snow::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("leg handshake: {e}"))
}

/// A near end's direct legs to one peer: its connection id and keys.
#[derive(Debug, Clone)]
pub struct DirectAuth {
    /// The connection's id (both ends agree on it).
    pub conn_id: u32,
    /// The connection's keys.
    pub key: LegKey,
}

/// Where a path's direct leg goes and how it leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectRoute {
    /// The path's remote address, at the connection's remote port.
    pub remote: SocketAddr,
    /// The path's local address (`None`: the kernel's choice).
    pub local: Option<IpAddr>,
    /// The path's device (`SO_BINDTODEVICE`).
    pub device: Option<String>,
    /// The path's uplink routing mark (0: none).
    pub mark: u32,
}

/// The sending half of a leg's keys, with its nonce counter.
pub struct SealTx {
    keys: Arc<StatelessTransportState>,
    next: u64,
}

/// The receiving half of a leg's keys, with its nonce counter.
pub struct SealRx {
    keys: Arc<StatelessTransportState>,
    next: u64,
}

impl SealTx {
    /// Appends `plain` to `out` sealed: a 2-byte length, then the message.
    pub fn seal(&mut self, plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let len = plain.len() + TAG;
        if len > MAX_SEALED {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "message too long to seal",
            ));
        }
        let at = out.len();
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.resize(at + 2 + len, 0);
        self.keys
            .write_message(self.next, plain, &mut out[at + 2..])
            .map_err(noise_io)?;
        self.next += 1;
        Ok(())
    }
}

impl SealRx {
    /// Reads one sealed message from `r` and opens it into `plain`;
    /// returns its length.
    pub fn open(
        &mut self,
        r: &mut impl Read,
        sealed: &mut Vec<u8>,
        plain: &mut [u8],
    ) -> Result<usize, FrameError> {
        let mut l = [0u8; 2];
        r.read_exact(&mut l)?;
        let len = usize::from(u16::from_be_bytes(l));
        if len < TAG || len - TAG > plain.len() {
            return Err(FrameError::TooLong(len));
        }
        sealed.resize(len, 0);
        r.read_exact(sealed)?;
        let n = self
            .keys
            .read_message(self.next, sealed, plain)
            .map_err(|_| FrameError::Unsealed)?;
        self.next += 1;
        Ok(n)
    }
}

/// A leg's two halves of keys.
pub type Seals = (SealTx, SealRx);

fn seals(hs: HandshakeState) -> io::Result<Seals> {
    let keys = Arc::new(hs.into_stateless_transport_mode().map_err(noise_io)?);
    Ok((
        SealTx {
            keys: keys.clone(),
            next: 0,
        },
        SealRx { keys, next: 0 },
    ))
}

fn prelude(mode: u8, conn_id: u32) -> [u8; PRELUDE_LEN] {
    let mut p = [0u8; PRELUDE_LEN];
    p[..2].copy_from_slice(&MAGIC);
    p[2] = VERSION;
    p[3] = mode;
    p[4..].copy_from_slice(&conn_id.to_be_bytes());
    p
}

fn write_message(w: &mut impl Write, m: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(2 + m.len());
    out.extend_from_slice(&(m.len() as u16).to_be_bytes());
    out.extend_from_slice(m);
    w.write_all(&out)
}

fn read_message(r: &mut impl Read, buf: &mut [u8; HANDSHAKE_MAX]) -> io::Result<usize> {
    let mut l = [0u8; 2];
    r.read_exact(&mut l)?;
    let len = usize::from(u16::from_be_bytes(l));
    let dst = buf.get_mut(..len).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, "leg handshake message too long")
    })?;
    r.read_exact(dst)?;
    Ok(len)
}

/// A TCP socket that leaves as the path's UDP socket does (mark, device,
/// local address), connected to its remote.
fn connect_socket(route: &DirectRoute, timeout: Duration) -> io::Result<TcpStream> {
    let s = Socket::new(
        Domain::for_address(route.remote),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    if route.mark != 0 {
        s.set_mark(route.mark)?;
    }
    if let Some(dev) = &route.device {
        s.bind_device(Some(dev.as_bytes()))?;
    }
    if let Some(local) = route.local {
        s.bind(&SockAddr::from(SocketAddr::new(local, 0)))?;
    }
    s.connect_timeout(&SockAddr::from(route.remote), timeout)?;
    s.set_tcp_nodelay(true)?;
    Ok(s.into())
}

/// Connects a direct leg on `route`, runs the handshake and sends `join`:
/// the leg and its keys (`None`: a cleartext connection).
pub fn connect(
    route: &DirectRoute,
    auth: &DirectAuth,
    join: Join,
    timeout: Duration,
) -> io::Result<(TcpStream, Option<Seals>)> {
    let mut leg = connect_socket(route, timeout)?;
    leg.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let p = prelude(auth.key.mode(), auth.conn_id);
    let join = frame::encode_join(join);
    let sealed = match auth.key.handshake(&p, true)? {
        None => {
            let mut first = p.to_vec();
            first.extend_from_slice(&join);
            leg.write_all(&first)?;
            None
        }
        Some(mut hs) => {
            let mut buf = [0u8; HANDSHAKE_MAX];
            let n = hs.write_message(&[], &mut buf).map_err(noise_io)?;
            let mut first = p.to_vec();
            first.extend_from_slice(&(n as u16).to_be_bytes());
            first.extend_from_slice(&buf[..n]);
            leg.write_all(&first)?;
            let mut answer = [0u8; HANDSHAKE_MAX];
            let n = read_message(&mut leg, &mut answer)?;
            hs.read_message(&answer[..n], &mut buf).map_err(noise_io)?;
            let (mut tx, rx) = seals(hs)?;
            let mut out = Vec::new();
            tx.seal(&join, &mut out)?;
            leg.write_all(&out)?;
            Some((tx, rx))
        }
    };
    leg.set_read_timeout(None)?;
    Ok((leg, sealed))
}

/// What the far end knows of a connection whose peer may open direct
/// legs.
#[derive(Debug, Clone)]
pub struct DirectPeer {
    /// The peer's tunnel address: the far end's key for the peer's sets
    /// and its paths' congestion controls, as for legs inside the tunnel.
    pub peer: IpAddr,
    /// The connection's keys.
    pub key: LegKey,
    /// The connection's configured remote addresses (cleartext legs are
    /// taken from these only).
    pub remotes: Vec<IpAddr>,
}

/// Why the far end refused a direct leg.
#[derive(Debug, thiserror::Error)]
pub enum RefusedLeg {
    /// The leg failed or timed out.
    #[error("direct leg i/o: {0}")]
    Io(#[from] io::Error),
    /// Not a direct leg's prelude.
    #[error("not an mpt direct leg (magic or version)")]
    BadPrelude,
    /// A connection id no configured connection has.
    #[error("direct leg for unknown connection id {0}")]
    UnknownConnection(u32),
    /// The near end protects its legs otherwise than this end would.
    #[error("direct leg for connection id {conn} in mode {got}, expected {expected}")]
    WrongMode {
        /// The connection.
        conn: u32,
        /// The mode it sent.
        got: u8,
        /// Ours.
        expected: &'static str,
    },
    /// A cleartext leg from an address that is not the connection's.
    #[error("cleartext direct leg from {0}, not a configured remote")]
    NotARemote(IpAddr),
    /// The handshake failed (wrong key, altered bytes).
    #[error("direct leg handshake failed: {0}")]
    Handshake(String),
    /// The first message was no JOIN.
    #[error("direct leg sent no JOIN: {0}")]
    NoJoin(FrameError),
}

/// A direct leg the far end admitted.
pub struct Admitted {
    /// The peer's tunnel address.
    pub peer: IpAddr,
    /// The set and place the leg joins.
    pub join: Join,
    /// Its keys (`None`: cleartext).
    pub seals: Option<Seals>,
}

/// The far end's side of [`connect`]: reads the prelude, runs the
/// handshake with the connection it names and reads the JOIN.
pub fn accept(
    leg: &mut TcpStream,
    peers: &HashMap<u32, DirectPeer>,
) -> Result<Admitted, RefusedLeg> {
    leg.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut p = [0u8; PRELUDE_LEN];
    leg.read_exact(&mut p)?;
    if p[..2] != MAGIC || p[2] != VERSION {
        return Err(RefusedLeg::BadPrelude);
    }
    let conn = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
    let known = peers
        .get(&conn)
        .ok_or(RefusedLeg::UnknownConnection(conn))?;
    if p[3] != known.key.mode() {
        return Err(RefusedLeg::WrongMode {
            conn,
            got: p[3],
            expected: known.key.name(),
        });
    }
    let mut plain = [0u8; 64];
    let (join, seals) = match known.key.handshake(&p, false)? {
        None => {
            let from = leg.peer_addr()?.ip();
            let from = from.to_canonical();
            if !known.remotes.contains(&from) {
                return Err(RefusedLeg::NotARemote(from));
            }
            (frame::read_frame(leg, &mut plain), None)
        }
        Some(mut hs) => {
            let failed = |e: snow::Error| RefusedLeg::Handshake(e.to_string());
            let mut buf = [0u8; HANDSHAKE_MAX];
            let n = read_message(leg, &mut buf)?;
            let mut payload = [0u8; HANDSHAKE_MAX];
            hs.read_message(&buf[..n], &mut payload).map_err(failed)?;
            let n = hs.write_message(&[], &mut buf).map_err(failed)?;
            write_message(leg, &buf[..n])?;
            let (tx, mut rx) = seals(hs)?;
            let mut sealed = Vec::new();
            let got = rx
                .open(leg, &mut sealed, &mut plain)
                .and_then(|n| frame::read_frame(&mut &plain[..n], &mut [0u8; 0]));
            (got, Some((tx, rx)))
        }
    };
    let join = match join {
        Ok(Frame::Join(j)) => j,
        Ok(other) => {
            return Err(RefusedLeg::NoJoin(FrameError::OutOfPlace))
                .inspect_err(|_| tracing::trace!(?other, "direct leg's first frame"))
        }
        Err(e) => return Err(RefusedLeg::NoJoin(e)),
    };
    leg.set_read_timeout(None)?;
    Ok(Admitted {
        peer: known.peer,
        join,
        seals,
    })
}

/// The far end's listener for direct legs: the wildcard address at
/// `port`, both families where the host has IPv6.
pub fn listener(port: u16) -> io::Result<std::net::TcpListener> {
    let any6 = SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port));
    let dual = (|| {
        let s = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        s.set_only_v6(false)?;
        s.bind(&SockAddr::from(any6))?;
        s.listen(1024)?;
        Ok::<_, io::Error>(s)
    })();
    match dual {
        Ok(s) => Ok(s.into()),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(e),
        Err(_) => crate::sock::listener(SocketAddr::from(([0, 0, 0, 0], port))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_proto::noise::StaticSecret;
    use std::net::TcpListener;

    fn secret(b: u8) -> Secret {
        Arc::new(Zeroizing::new([b; 32]))
    }

    fn public(of: &Secret) -> [u8; 32] {
        *StaticSecret::from_bytes(***of).public_key().as_bytes()
    }

    fn join() -> Join {
        Join {
            set: 0x0102_0304_0506_0708,
            index: 1,
            count: 2,
            path: 1,
        }
    }

    type NearSide = io::Result<(TcpStream, Option<Seals>)>;
    type FarSide = Result<(TcpStream, Admitted), RefusedLeg>;

    /// Connects with `near` to a far end that knows connection 7 as
    /// `far`; the near end's result and the far end's.
    fn meet(near: LegKey, far: LegKey, remotes: Vec<IpAddr>) -> (NearSide, FarSide) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let route = DirectRoute {
            remote: l.local_addr().unwrap(),
            local: None,
            device: None,
            mark: 0,
        };
        let peers = HashMap::from([(
            7,
            DirectPeer {
                peer: "10.99.0.1".parse().unwrap(),
                key: far,
                remotes,
            },
        )]);
        let far_side = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let r = accept(&mut s, &peers);
            r.map(|a| (s, a))
        });
        let auth = DirectAuth {
            conn_id: 7,
            key: near,
        };
        let near_side = connect(&route, &auth, join(), Duration::from_secs(2));
        (near_side, far_side.join().unwrap())
    }

    /// Sealed messages go both ways; a flipped byte does not open.
    fn exchange(near: (TcpStream, Option<Seals>), far: (TcpStream, Admitted)) {
        let (mut ns, nseals) = near;
        let (mut fs, adm) = far;
        let ((mut ntx, mut nrx), (mut ftx, mut frx)) = (nseals.unwrap(), adm.seals.unwrap());
        let mut out = Vec::new();
        ntx.seal(b"up", &mut out).unwrap();
        ns.write_all(&out).unwrap();
        let (mut sealed, mut plain) = (Vec::new(), [0u8; 64]);
        let n = frx.open(&mut fs, &mut sealed, &mut plain).unwrap();
        assert_eq!(&plain[..n], b"up");
        out.clear();
        ftx.seal(b"down", &mut out).unwrap();
        fs.write_all(&out).unwrap();
        let n = nrx.open(&mut ns, &mut sealed, &mut plain).unwrap();
        assert_eq!(&plain[..n], b"down");
        // An altered message does not open.
        out.clear();
        ntx.seal(b"again", &mut out).unwrap();
        let mut bad = out.clone();
        bad[5] ^= 1;
        ns.write_all(&bad).unwrap();
        assert!(matches!(
            frx.open(&mut fs, &mut sealed, &mut plain),
            Err(FrameError::Unsealed)
        ));
    }

    #[test]
    fn public_key_legs_meet_and_seal_both_ways() {
        let (a, b) = (secret(1), secret(2));
        let near = LegKey::Static {
            private: a.clone(),
            peer_public: public(&b),
            psk: Some(secret(9)),
        };
        let far = LegKey::Static {
            private: b,
            peer_public: public(&a),
            psk: Some(secret(9)),
        };
        let (n, f) = meet(near, far, vec![]);
        let f = f.unwrap();
        assert_eq!(f.1.join, join());
        assert_eq!(f.1.peer, "10.99.0.1".parse::<IpAddr>().unwrap());
        exchange(n.unwrap(), f);
    }

    #[test]
    fn psk_legs_meet_and_seal_both_ways() {
        let (n, f) = meet(LegKey::Psk(secret(5)), LegKey::Psk(secret(5)), vec![]);
        let f = f.unwrap();
        assert_eq!(f.1.join, join());
        exchange(n.unwrap(), f);
    }

    #[test]
    fn wrong_keys_are_refused_at_the_handshake() {
        let (_, f) = meet(LegKey::Psk(secret(5)), LegKey::Psk(secret(6)), vec![]);
        assert!(matches!(f, Err(RefusedLeg::Handshake(_))), "{:?}", f.err());
        // A third party's key pair, posing as the peer.
        let (a, b, c) = (secret(1), secret(2), secret(3));
        let near = LegKey::Static {
            private: c,
            peer_public: public(&b),
            psk: None,
        };
        let far = LegKey::Static {
            private: b,
            peer_public: public(&a),
            psk: None,
        };
        let (_, f) = meet(near, far, vec![]);
        assert!(matches!(f, Err(RefusedLeg::Handshake(_))), "{:?}", f.err());
    }

    #[test]
    fn mode_connection_and_cleartext_source_are_checked() {
        let (n, f) = meet(LegKey::Clear, LegKey::Psk(secret(5)), vec![]);
        assert!(n.is_ok(), "the near end wrote and left");
        assert!(
            matches!(
                f,
                Err(RefusedLeg::WrongMode {
                    conn: 7,
                    got: 0,
                    ..
                })
            ),
            "{:?}",
            f.err()
        );
        let (_, f) = meet(
            LegKey::Clear,
            LegKey::Clear,
            vec!["10.0.0.9".parse().unwrap()],
        );
        assert!(matches!(f, Err(RefusedLeg::NotARemote(_))), "{:?}", f.err());
        let (n, f) = meet(
            LegKey::Clear,
            LegKey::Clear,
            vec!["127.0.0.1".parse().unwrap()],
        );
        assert!(n.unwrap().1.is_none());
        let f = f.unwrap();
        assert_eq!(f.1.join, join());
        assert!(f.1.seals.is_none());
    }

    #[test]
    fn bad_preludes_and_unknown_connections_are_refused() {
        let peers = HashMap::new();
        for (bytes, want) in [
            (&b"GET / HTTP/1.1\r\n"[..], "magic"),
            (
                &[b'm', b'D', 1, 1, 0, 0, 0, 9][..],
                "unknown connection id 9",
            ),
        ] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            c.write_all(bytes).unwrap();
            let (mut s, _) = l.accept().unwrap();
            let e = accept(&mut s, &peers).err().unwrap();
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn the_pattern_names_parse() {
        for name in [KK, NN] {
            assert!(name.parse::<snow::params::NoiseParams>().is_ok(), "{name}");
        }
    }
}
