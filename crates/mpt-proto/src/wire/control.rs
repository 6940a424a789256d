//! Body of control messages: the daemons tell each other about paths.
//!
//! An operator adds or removes a path on one side only (`mpt path add`,
//! `mpt path remove`, or a reload); the other side learns of it through
//! these messages, so a mobile node can hand over from one uplink to
//! another without anyone touching the server. Every message but an
//! acknowledgement carries a 64-bit id; the receiver answers each with an
//! [`ControlBody::Ack`] naming that id, and the sender repeats the message
//! until the ack arrives (see the `control` module).
//!
//! On encrypted connections a control message is sealed like a probe, so
//! only a holder of the session keys can add or remove a path.
//!
//! ```text
//! offset  size  field
//!      0     1  kind          1 = path add, 2 = path remove, 3 = ack
//!      1     1  reserved      zero
//!      2     2  path_id       the path the message is about
//!      4     8  id            message id (ack: the id acknowledged)
//!     12     …  kind-specific, fixed length per kind:
//!
//! path add (94 bytes in all)
//!     12     1  flags         0x01 = backup; other bits zero
//!     13     1  name_len      1..=32
//!     14    32  name          UTF-8, zero padded
//!     46    19  sender_local  address the sender sends from
//!     65    19  sender_remote address the sender sends to (family 0 = none)
//!     84     4  weight_out    the sender's share of its outgoing traffic
//!     88     2  weight_in     the share the sender asks to receive
//!     90     4  window        the sender's window
//!
//! path remove (45 bytes in all)
//!     12     1  name_len      1..=32
//!     13    32  name          zero padded
//!
//! ack (13 bytes in all)
//!     12     1  result        0 = done, else a refusal code
//!
//! address (19 bytes): family (4, 6 or 0 = none), 16 address bytes (IPv4 in
//! the first 4, rest zero), port (2).
//! ```
//!
//! Names travel with the ids so that a receiver can refuse a message whose
//! id and name disagree with what it has (two sides adding different paths
//! under the same id at the same moment) instead of silently mixing paths.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::wire::error::{DecodeError, EncodeError};

/// Longest path name a control message carries.
pub const MAX_NAME_LEN: usize = 32;

const KIND_PATH_ADD: u8 = 1;
const KIND_PATH_REMOVE: u8 = 2;
const KIND_ACK: u8 = 3;

const FLAG_BACKUP: u8 = 0x01;

const COMMON_LEN: usize = 12;

/// A path name of 1 to [`MAX_NAME_LEN`] bytes, stored inline (no
/// allocation, `Copy`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathName {
    len: u8,
    bytes: [u8; MAX_NAME_LEN],
}

impl PathName {
    /// The name, if it is 1..=32 bytes of UTF-8 without NUL.
    pub fn new(name: &str) -> Option<PathName> {
        let b = name.as_bytes();
        if b.is_empty() || b.len() > MAX_NAME_LEN || b.contains(&0) {
            return None;
        }
        let mut bytes = [0u8; MAX_NAME_LEN];
        bytes[..b.len()].copy_from_slice(b);
        Some(PathName {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        // Only built from `&str` or checked UTF-8, so this never fails.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }

    /// Whether the name is printable ASCII without spaces (`!` to `~`),
    /// the only names a daemon takes from its peer: anything else could
    /// forge log lines or mangle status tables.
    pub fn is_plain(&self) -> bool {
        is_plain_name(self.as_str())
    }

    fn emit(&self, out: &mut [u8]) {
        out[0] = self.len;
        out[1..1 + MAX_NAME_LEN].copy_from_slice(&self.bytes);
    }

    fn parse(b: &[u8]) -> Result<PathName, DecodeError> {
        let len = usize::from(b[0]);
        let raw = &b[1..1 + MAX_NAME_LEN];
        if len == 0 || len > MAX_NAME_LEN || raw[len..].iter().any(|&x| x != 0) {
            return Err(DecodeError::BadControl);
        }
        let s = std::str::from_utf8(&raw[..len]).map_err(|_| DecodeError::BadControl)?;
        PathName::new(s).ok_or(DecodeError::BadControl)
    }
}

impl std::fmt::Debug for PathName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Whether `name` is 1 to [`MAX_NAME_LEN`] bytes of printable ASCII
/// without spaces: what path names on the wire should be.
pub fn is_plain_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_graphic())
}

/// Shows the name with anything but plain printable characters escaped, so
/// a name taken from the network cannot break a log line.
impl std::fmt::Display for PathName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.as_str();
        if is_plain_name(s) {
            f.write_str(s)
        } else {
            write!(f, "{}", s.escape_default())
        }
    }
}

/// "Add this path": what the receiver needs to set up its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PathAdd {
    /// The new path's name.
    pub name: PathName,
    /// The address the sender sends from: the receiver's remote.
    pub sender_local: SocketAddr,
    /// The address the sender sends to, if it knows it: the receiver's
    /// local address.
    pub sender_remote: Option<SocketAddr>,
    /// The sender's `weight_out` (what the receiver may expect to get).
    pub weight_out: u32,
    /// The sender's `weight_in`: the share it asks the receiver to send.
    pub weight_in: u16,
    /// The sender's window.
    pub window: u32,
    /// The path is a backup.
    pub backup: bool,
}

/// Why a receiver refused a control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The path id is in use by a path of another name.
    IdInUse,
    /// A path of that name exists under another id.
    NameInUse,
    /// The receiver could not open a socket for the path.
    CannotBind,
    /// The connection has no room for another path.
    TooManyPaths,
    /// The path named for removal does not exist under that id.
    UnknownPath,
    /// The receiver does not accept this change (policy, last path).
    Refused,
    /// A code this version does not know.
    Other(u8),
}

impl Refusal {
    fn code(self) -> u8 {
        match self {
            Refusal::IdInUse => 1,
            Refusal::NameInUse => 2,
            Refusal::CannotBind => 3,
            Refusal::TooManyPaths => 4,
            Refusal::UnknownPath => 5,
            Refusal::Refused => 6,
            Refusal::Other(c) => c,
        }
    }

    fn from_code(c: u8) -> Refusal {
        match c {
            1 => Refusal::IdInUse,
            2 => Refusal::NameInUse,
            3 => Refusal::CannotBind,
            4 => Refusal::TooManyPaths,
            5 => Refusal::UnknownPath,
            6 => Refusal::Refused,
            c => Refusal::Other(c),
        }
    }

    /// A short description for logs and operators.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::IdInUse => "path id in use by another path",
            Refusal::NameInUse => "a path of that name exists under another id",
            Refusal::CannotBind => "cannot open a socket for the path",
            Refusal::TooManyPaths => "no room for another path",
            Refusal::UnknownPath => "no such path",
            Refusal::Refused => "refused",
            Refusal::Other(_) => "unknown refusal",
        }
    }
}

/// What a control message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlBody {
    /// A path was added on the sender's side.
    PathAdd(PathAdd),
    /// A path was removed on the sender's side.
    PathRemove {
        /// Its name.
        name: PathName,
    },
    /// The answer to message `id`: `Ok(())` or why it was refused.
    Ack(Result<(), Refusal>),
}

/// One control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControlMsg {
    /// Message id (for an ack: the acknowledged message's id).
    pub id: u64,
    /// The path concerned.
    pub path_id: u16,
    /// The content.
    pub body: ControlBody,
}

impl ControlMsg {
    /// Longest encoded body (a path add).
    pub const MAX_LEN: usize = 94;

    /// Encoded length of this message.
    pub fn len(&self) -> usize {
        match self.body {
            ControlBody::PathAdd(_) => 94,
            ControlBody::PathRemove { .. } => 45,
            ControlBody::Ack(_) => 13,
        }
    }

    /// Never empty; here for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the body into the first [`ControlMsg::len`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let len = self.len();
        let Some(out) = buf.get_mut(..len) else {
            return Err(EncodeError::BufferTooSmall {
                needed: len,
                have: buf.len(),
            });
        };
        out.fill(0);
        out[2..4].copy_from_slice(&self.path_id.to_be_bytes());
        out[4..12].copy_from_slice(&self.id.to_be_bytes());
        match &self.body {
            ControlBody::PathAdd(a) => {
                out[0] = KIND_PATH_ADD;
                out[12] = if a.backup { FLAG_BACKUP } else { 0 };
                a.name.emit(&mut out[13..46]);
                emit_addr(Some(a.sender_local), &mut out[46..65]);
                emit_addr(a.sender_remote, &mut out[65..84]);
                out[84..88].copy_from_slice(&a.weight_out.to_be_bytes());
                out[88..90].copy_from_slice(&a.weight_in.to_be_bytes());
                out[90..94].copy_from_slice(&a.window.to_be_bytes());
            }
            ControlBody::PathRemove { name } => {
                out[0] = KIND_PATH_REMOVE;
                name.emit(&mut out[12..45]);
            }
            ControlBody::Ack(result) => {
                out[0] = KIND_ACK;
                out[12] = match result {
                    Ok(()) => 0,
                    Err(r) => r.code().max(1),
                };
            }
        }
        Ok(len)
    }

    /// Parses a body; its length must be exactly that of its kind.
    pub fn parse(payload: &[u8]) -> Result<ControlMsg, DecodeError> {
        if payload.len() < COMMON_LEN {
            return Err(DecodeError::BadControl);
        }
        if payload[1] != 0 {
            return Err(DecodeError::BadControl);
        }
        let path_id = u16::from_be_bytes([payload[2], payload[3]]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&payload[4..12]);
        let id = u64::from_be_bytes(id);
        let expected = match payload[0] {
            KIND_PATH_ADD => 94,
            KIND_PATH_REMOVE => 45,
            KIND_ACK => 13,
            _ => return Err(DecodeError::BadControl),
        };
        if payload.len() != expected {
            return Err(DecodeError::BadControl);
        }
        let body = match payload[0] {
            KIND_PATH_ADD => {
                let b = payload;
                if b[12] & !FLAG_BACKUP != 0 {
                    return Err(DecodeError::BadControl);
                }
                let sender_local = parse_addr(&b[46..65])?.ok_or(DecodeError::BadControl)?;
                let sender_remote = parse_addr(&b[65..84])?;
                if sender_remote.is_some_and(|r| r.is_ipv4() != sender_local.is_ipv4()) {
                    return Err(DecodeError::BadControl);
                }
                ControlBody::PathAdd(PathAdd {
                    name: PathName::parse(&b[13..46])?,
                    sender_local,
                    sender_remote,
                    weight_out: u32::from_be_bytes([b[84], b[85], b[86], b[87]]),
                    weight_in: u16::from_be_bytes([b[88], b[89]]),
                    window: u32::from_be_bytes([b[90], b[91], b[92], b[93]]),
                    backup: b[12] & FLAG_BACKUP != 0,
                })
            }
            KIND_PATH_REMOVE => ControlBody::PathRemove {
                name: PathName::parse(&payload[12..45])?,
            },
            _ => ControlBody::Ack(match payload[12] {
                0 => Ok(()),
                c => Err(Refusal::from_code(c)),
            }),
        };
        Ok(ControlMsg { id, path_id, body })
    }
}

fn emit_addr(addr: Option<SocketAddr>, out: &mut [u8]) {
    out.fill(0);
    let Some(a) = addr else { return };
    match a.ip() {
        IpAddr::V4(v4) => {
            out[0] = 4;
            out[1..5].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            out[0] = 6;
            out[1..17].copy_from_slice(&v6.octets());
        }
    }
    out[17..19].copy_from_slice(&a.port().to_be_bytes());
}

fn parse_addr(b: &[u8]) -> Result<Option<SocketAddr>, DecodeError> {
    let port = u16::from_be_bytes([b[17], b[18]]);
    let ip = match b[0] {
        0 => {
            if b.iter().any(|&x| x != 0) {
                return Err(DecodeError::BadControl);
            }
            return Ok(None);
        }
        4 => {
            if b[5..17].iter().any(|&x| x != 0) {
                return Err(DecodeError::BadControl);
            }
            IpAddr::V4(Ipv4Addr::new(b[1], b[2], b[3], b[4]))
        }
        6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[1..17]);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return Err(DecodeError::BadControl),
    };
    if port == 0 || ip.is_unspecified() || ip.is_multicast() {
        return Err(DecodeError::BadControl);
    }
    Ok(Some(SocketAddr::new(ip, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add() -> ControlMsg {
        ControlMsg {
            id: 0x0102_0304_0506_0708,
            path_id: 3,
            body: ControlBody::PathAdd(PathAdd {
                name: PathName::new("lte-2").unwrap(),
                sender_local: "10.0.3.1:65022".parse().unwrap(),
                sender_remote: Some("10.0.3.2:65022".parse().unwrap()),
                weight_out: 300,
                weight_in: 7,
                window: 2,
                backup: true,
            }),
        }
    }

    fn all() -> Vec<ControlMsg> {
        vec![
            add(),
            ControlMsg {
                id: 9,
                path_id: 63,
                body: ControlBody::PathAdd(PathAdd {
                    name: PathName::new(&"x".repeat(32)).unwrap(),
                    sender_local: "[fd00::1]:1".parse().unwrap(),
                    sender_remote: None,
                    weight_out: 1,
                    weight_in: 1,
                    window: 1,
                    backup: false,
                }),
            },
            ControlMsg {
                id: 10,
                path_id: 0,
                body: ControlBody::PathRemove {
                    name: PathName::new("dsl").unwrap(),
                },
            },
            ControlMsg {
                id: 11,
                path_id: 1,
                body: ControlBody::Ack(Ok(())),
            },
            ControlMsg {
                id: 12,
                path_id: 1,
                body: ControlBody::Ack(Err(Refusal::CannotBind)),
            },
            ControlMsg {
                id: 13,
                path_id: 1,
                body: ControlBody::Ack(Err(Refusal::Other(200))),
            },
        ]
    }

    #[test]
    fn every_kind_round_trips_at_its_documented_length() {
        for m in all() {
            let mut buf = [0xeeu8; ControlMsg::MAX_LEN + 8];
            let n = m.emit(&mut buf).unwrap();
            assert_eq!(n, m.len());
            assert_eq!(ControlMsg::parse(&buf[..n]).unwrap(), m, "{m:?}");
            // One byte more or less is refused.
            assert!(ControlMsg::parse(&buf[..n - 1]).is_err());
            assert!(ControlMsg::parse(&buf[..n + 1]).is_err());
        }
    }

    #[test]
    fn path_add_has_the_documented_layout() {
        let mut buf = [0u8; 94];
        add().emit(&mut buf).unwrap();
        assert_eq!(buf[0], 1);
        assert_eq!(&buf[2..4], &[0, 3]);
        assert_eq!(&buf[4..12], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(buf[12], 1, "backup flag");
        assert_eq!(buf[13], 5);
        assert_eq!(&buf[14..19], b"lte-2");
        assert_eq!(&buf[46..51], &[4, 10, 0, 3, 1]);
        assert_eq!(&buf[63..65], &65022u16.to_be_bytes());
        assert_eq!(&buf[65..70], &[4, 10, 0, 3, 2]);
        assert_eq!(&buf[84..88], &300u32.to_be_bytes());
        assert_eq!(&buf[88..90], &7u16.to_be_bytes());
        assert_eq!(&buf[90..94], &2u32.to_be_bytes());
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let mut good = [0u8; 94];
        add().emit(&mut good).unwrap();
        let cases: Vec<(usize, u8)> = vec![
            (0, 0),     // kind 0
            (0, 9),     // unknown kind
            (1, 1),     // reserved
            (12, 2),    // unknown flag
            (13, 0),    // empty name
            (13, 33),   // name too long
            (30, 1),    // garbage after the name
            (46, 0),    // no local address
            (46, 5),    // bad family
            (52, 1),    // IPv4 with trailing bytes
            (63, 0),    // port 0 (with 64)
            (65, 6),    // remote family differs from local
            (14, 0xff), // not UTF-8
        ];
        for (at, v) in cases {
            let mut b = good;
            b[at] = v;
            if at == 63 {
                b[64] = 0;
            }
            assert!(ControlMsg::parse(&b).is_err(), "byte {at} = {v} accepted");
        }
        assert!(ControlMsg::parse(&good[..5]).is_err());
        assert!(ControlMsg::parse(&[]).is_err());
    }

    #[test]
    fn names_are_checked() {
        assert!(PathName::new("").is_none());
        assert!(PathName::new(&"a".repeat(33)).is_none());
        assert!(PathName::new("a\0b").is_none());
        assert_eq!(PathName::new("wifi0").unwrap().as_str(), "wifi0");
        assert_eq!(PathName::new("wifi0").unwrap().to_string(), "wifi0");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120)) {
            if let Ok(m) = ControlMsg::parse(&bytes) {
                let mut out = [0u8; ControlMsg::MAX_LEN];
                let n = m.emit(&mut out).unwrap();
                proptest::prop_assert_eq!(ControlMsg::parse(&out[..n]).unwrap(), m);
            }
        }
    }
}
