//! The leg's framing: what one gateway says to the other about one flow.
//!
//! A leg is a TCP connection between the two tunnel addresses that carries
//! one user flow at a time, then the next. Each message is one byte of
//! type and a fixed body:
//!
//! | type | body | sent by |
//! |---|---|---|
//! | `OPEN` 1 | magic `"mA"`, version 1, family 4/6, source ip+port, destination ip+port | near |
//! | `RESULT` 2 | code: 0 ok, 1 refused, 2 unreachable, 3 timed out, 4 other | far |
//! | `DATA` 3 | length (u16, 1..=65535), then the bytes | both |
//! | `FIN` 4 | - (no more data in this direction: half-close) | both |
//! | `RST` 5 | - (the flow is aborted; the leg is closed after it) | both |
//! | `JOIN` 6 | magic, version, set id (u64), index, count, path id | near, first on each leg of a pinned leg set |
//! | `CHUNK` 7 | sequence number (u32), then one of the frames 1-5 | both, on pinned leg sets (`crate::chunk`) |
//!
//! Ports and lengths are big-endian. Anything else (an unknown type, a
//! wrong magic or version, a zero length) is a [`FrameError`]: the reader
//! counts it and closes the leg; nothing here panics on what it reads.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Frame types.
const T_OPEN: u8 = 1;
const T_RESULT: u8 = 2;
const T_DATA: u8 = 3;
const T_FIN: u8 = 4;
const T_RST: u8 = 5;
const T_JOIN: u8 = 6;
/// A sequence-numbered frame on a pinned leg set (`crate::chunk`).
pub(crate) const T_CHUNK: u8 = 7;

/// The two bytes that start an OPEN body.
pub const MAGIC: [u8; 2] = *b"mA";
/// The framing's version.
pub const VERSION: u8 = 1;
/// Most payload bytes in one DATA frame.
pub const MAX_DATA: usize = u16::MAX as usize;

/// What the far gateway's connect to the destination gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectResult {
    /// Connected.
    Ok,
    /// The destination answered with a reset.
    Refused,
    /// No route, host or network unreachable.
    Unreachable,
    /// No answer in time.
    TimedOut,
    /// Any other error.
    Other,
}

impl ConnectResult {
    fn code(self) -> u8 {
        match self {
            ConnectResult::Ok => 0,
            ConnectResult::Refused => 1,
            ConnectResult::Unreachable => 2,
            ConnectResult::TimedOut => 3,
            ConnectResult::Other => 4,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => ConnectResult::Ok,
            1 => ConnectResult::Refused,
            2 => ConnectResult::Unreachable,
            3 => ConnectResult::TimedOut,
            4 => ConnectResult::Other,
            _ => return None,
        })
    }

    /// The result a connect error stands for.
    pub fn from_error(e: &io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset => {
                ConnectResult::Refused
            }
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ConnectResult::TimedOut,
            io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
                ConnectResult::Unreachable
            }
            _ => match e.raw_os_error() {
                Some(libc::EHOSTUNREACH | libc::ENETUNREACH) => ConnectResult::Unreachable,
                _ => ConnectResult::Other,
            },
        }
    }
}

/// A decoded frame. DATA's bytes are in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// Open a flow from `src` to `dst`.
    Open {
        /// The client's address.
        src: SocketAddr,
        /// The destination the client asked for.
        dst: SocketAddr,
    },
    /// The far side's connect result.
    Result(ConnectResult),
    /// This many bytes were read into the buffer.
    Data(usize),
    /// End of stream in this direction.
    Fin,
    /// Abort.
    Rst,
    /// This leg is one of a pinned leg set (see [`Join`]).
    Join(Join),
}

/// The first frame on each leg of a pinned leg set: which set, which of
/// its legs, and the path (tunnel path id) it is pinned to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Join {
    /// The set's id, chosen by the near end (unique per near end).
    pub set: u64,
    /// This leg's index in the set (0..count).
    pub index: u8,
    /// How many legs the set has (1..=63).
    pub count: u8,
    /// The tunnel path id the leg's packets are pinned to.
    pub path: u8,
}

/// Most legs in a set (DSCP 1..=63 names the path, 0 is unpinned).
pub const MAX_SET_LEGS: u8 = 63;

/// Why bytes on a leg are not a frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The leg failed or closed in the middle of a frame (or, for
    /// [`read_frame`], before one: then the kind is `UnexpectedEof`).
    #[error("leg i/o: {0}")]
    Io(#[from] io::Error),
    /// An unknown type byte.
    #[error("unknown frame type {0}")]
    BadType(u8),
    /// OPEN with a wrong magic or version.
    #[error("not an mpt acceleration leg (magic or version)")]
    BadMagic,
    /// OPEN with a family other than 4 or 6, or mixed families.
    #[error("bad address family {0}")]
    BadFamily(u8),
    /// RESULT with an unknown code.
    #[error("unknown result code {0}")]
    BadResult(u8),
    /// DATA of length 0.
    #[error("empty data frame")]
    EmptyData,
    /// The buffer given is shorter than a DATA frame's length.
    #[error("data frame of {0} bytes does not fit the buffer")]
    TooLong(usize),
    /// JOIN with an index not below its count, a count of 0 or more than
    /// [`MAX_SET_LEGS`], or a path id above 62.
    #[error("bad leg set join (leg {index} of {count}, path {path})")]
    BadJoin {
        /// The index sent.
        index: u8,
        /// The count sent.
        count: u8,
        /// The path sent.
        path: u8,
    },
    /// A frame that does not belong where it was (a CHUNK inside a
    /// CHUNK, a JOIN or an unnumbered frame on a leg set).
    #[error("frame out of place")]
    OutOfPlace,
    /// A chunk's sequence number that is behind, a duplicate, or too far
    /// ahead of the reorder window.
    #[error("chunk sequence number {0} out of the window")]
    BadSeq(u32),
    /// A direct leg's sealed message that did not open (wrong key,
    /// altered or replayed bytes; `crate::direct`).
    #[error("a sealed message did not open")]
    Unsealed,
}

impl FrameError {
    /// Whether the error is the leg's (closed, reset) rather than bad bytes.
    pub fn is_io(&self) -> bool {
        matches!(self, FrameError::Io(_))
    }
}

/// Encodes OPEN.
pub fn encode_open(src: SocketAddr, dst: SocketAddr, out: &mut Vec<u8>) {
    out.push(T_OPEN);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(if dst.is_ipv4() { 4 } else { 6 });
    for a in [src, dst] {
        match (a.ip(), dst.is_ipv4()) {
            (IpAddr::V4(ip), true) => out.extend_from_slice(&ip.octets()),
            (IpAddr::V6(ip), false) => out.extend_from_slice(&ip.octets()),
            (IpAddr::V4(ip), false) => out.extend_from_slice(&ip.to_ipv6_mapped().octets()),
            (IpAddr::V6(ip), true) => {
                let v4 = ip.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED);
                out.extend_from_slice(&v4.octets())
            }
        }
        out.extend_from_slice(&a.port().to_be_bytes());
    }
}

/// Encodes JOIN.
pub fn encode_join(j: Join) -> [u8; 15] {
    let mut out = [0u8; 15];
    out[0] = T_JOIN;
    out[1..3].copy_from_slice(&MAGIC);
    out[3] = VERSION;
    out[4..12].copy_from_slice(&j.set.to_be_bytes());
    out[12] = j.index;
    out[13] = j.count;
    out[14] = j.path;
    out
}

/// Encodes RESULT.
pub fn encode_result(r: ConnectResult) -> [u8; 2] {
    [T_RESULT, r.code()]
}

/// Encodes a DATA header for `len` (1..=[`MAX_DATA`]) bytes.
pub fn data_header(len: usize) -> [u8; 3] {
    let l = u16::try_from(len.min(MAX_DATA))
        .unwrap_or(u16::MAX)
        .to_be_bytes();
    [T_DATA, l[0], l[1]]
}

/// FIN.
pub const FIN: [u8; 1] = [T_FIN];
/// RST.
pub const RST: [u8; 1] = [T_RST];

/// Writes `data` as DATA frames (one write per frame: header and bytes).
pub fn write_data(w: &mut impl Write, data: &[u8], scratch: &mut Vec<u8>) -> io::Result<()> {
    for chunk in data.chunks(MAX_DATA) {
        scratch.clear();
        scratch.extend_from_slice(&data_header(chunk.len()));
        scratch.extend_from_slice(chunk);
        w.write_all(scratch)?;
    }
    Ok(())
}

/// Reads one frame; DATA's bytes go to the front of `buf`.
pub fn read_frame(r: &mut impl Read, buf: &mut [u8]) -> Result<Frame, FrameError> {
    let mut t = [0u8; 1];
    r.read_exact(&mut t)?;
    match t[0] {
        T_OPEN => read_open(r),
        T_RESULT => {
            r.read_exact(&mut t)?;
            ConnectResult::from_code(t[0])
                .map(Frame::Result)
                .ok_or(FrameError::BadResult(t[0]))
        }
        T_DATA => {
            let mut l = [0u8; 2];
            r.read_exact(&mut l)?;
            let len = usize::from(u16::from_be_bytes(l));
            if len == 0 {
                return Err(FrameError::EmptyData);
            }
            let dst = buf.get_mut(..len).ok_or(FrameError::TooLong(len))?;
            r.read_exact(dst)?;
            Ok(Frame::Data(len))
        }
        T_FIN => Ok(Frame::Fin),
        T_RST => Ok(Frame::Rst),
        T_JOIN => read_join(r),
        other => Err(FrameError::BadType(other)),
    }
}

fn read_join(r: &mut impl Read) -> Result<Frame, FrameError> {
    let mut b = [0u8; 14];
    r.read_exact(&mut b)?;
    if b[..2] != MAGIC || b[2] != VERSION {
        return Err(FrameError::BadMagic);
    }
    let mut set = [0u8; 8];
    set.copy_from_slice(&b[3..11]);
    let (index, count, path) = (b[11], b[12], b[13]);
    if count == 0 || count > MAX_SET_LEGS || index >= count || path >= MAX_SET_LEGS {
        return Err(FrameError::BadJoin { index, count, path });
    }
    Ok(Frame::Join(Join {
        set: u64::from_be_bytes(set),
        index,
        count,
        path,
    }))
}

fn read_open(r: &mut impl Read) -> Result<Frame, FrameError> {
    let mut head = [0u8; 4];
    r.read_exact(&mut head)?;
    if head[..2] != MAGIC || head[2] != VERSION {
        return Err(FrameError::BadMagic);
    }
    let mut addrs = [SocketAddr::from(([0, 0, 0, 0], 0)); 2];
    for a in addrs.iter_mut() {
        let ip = match head[3] {
            4 => {
                let mut o = [0u8; 4];
                r.read_exact(&mut o)?;
                IpAddr::V4(Ipv4Addr::from(o))
            }
            6 => {
                let mut o = [0u8; 16];
                r.read_exact(&mut o)?;
                IpAddr::V6(Ipv6Addr::from(o))
            }
            f => return Err(FrameError::BadFamily(f)),
        };
        let mut p = [0u8; 2];
        r.read_exact(&mut p)?;
        *a = SocketAddr::new(ip, u16::from_be_bytes(p));
    }
    Ok(Frame::Open {
        src: addrs[0],
        dst: addrs[1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn read_all(bytes: &[u8]) -> Vec<Result<Frame, String>> {
        let mut c = Cursor::new(bytes);
        let mut buf = vec![0xa5; 70_000];
        let mut out = Vec::new();
        while (c.position() as usize) < bytes.len() {
            match read_frame(&mut c, &mut buf) {
                Ok(f) => out.push(Ok(f)),
                Err(e) => {
                    out.push(Err(e.to_string()));
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn open_round_trips_v4_and_v6() {
        for (src, dst) in [
            ("10.1.0.2:40000", "10.2.0.2:80"),
            ("[fd00::2]:1", "[2001:db8::1]:65535"),
        ] {
            let (src, dst) = (src.parse().unwrap(), dst.parse().unwrap());
            let mut v = Vec::new();
            encode_open(src, dst, &mut v);
            assert_eq!(read_all(&v), vec![Ok(Frame::Open { src, dst })]);
        }
    }

    #[test]
    fn data_fin_rst_result_round_trip() {
        let payload: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut v = Vec::new();
        write_data(&mut v, &payload, &mut Vec::new()).unwrap();
        v.extend_from_slice(&encode_result(ConnectResult::Refused));
        v.extend_from_slice(&FIN);
        v.extend_from_slice(&RST);
        let mut c = Cursor::new(&v[..]);
        let mut buf = vec![0u8; MAX_DATA];
        let mut got = Vec::new();
        for _ in 0..2 {
            match read_frame(&mut c, &mut buf).unwrap() {
                Frame::Data(n) => got.extend_from_slice(&buf[..n]),
                f => panic!("{f:?}"),
            }
        }
        assert_eq!(got, payload);
        let rest: Vec<_> = (0..3)
            .map(|_| read_frame(&mut c, &mut buf).unwrap())
            .collect();
        assert_eq!(
            rest,
            vec![
                Frame::Result(ConnectResult::Refused),
                Frame::Fin,
                Frame::Rst
            ]
        );
    }

    #[test]
    fn bad_frames_are_refused() {
        assert_eq!(read_all(&[9]), vec![Err("unknown frame type 9".into())]);
        assert_eq!(read_all(&[3, 0, 0]), vec![Err("empty data frame".into())]);
        assert_eq!(read_all(&[2, 7]), vec![Err("unknown result code 7".into())]);
        assert!(read_all(b"\x01GET / HTTP")[0].is_err());
        assert_eq!(
            read_all(&[1, b'm', b'A', 1, 5, 0]),
            vec![Err("bad address family 5".into())]
        );
        // Truncated: an i/o error, not a panic.
        let mut v = Vec::new();
        encode_open(
            "1.2.3.4:5".parse().unwrap(),
            "5.6.7.8:9".parse().unwrap(),
            &mut v,
        );
        for cut in 1..v.len() {
            let mut c = Cursor::new(&v[..cut]);
            assert!(read_frame(&mut c, &mut [0u8; 8]).unwrap_err().is_io());
        }
        let mut join = encode_join(Join {
            set: 7,
            index: 2,
            count: 2,
            path: 0,
        });
        assert!(matches!(
            read_frame(&mut Cursor::new(&join[..]), &mut [0u8; 8]),
            Err(FrameError::BadJoin { index: 2, .. })
        ));
        join[12] = 1;
        assert_eq!(
            read_all(&join),
            vec![Ok(Frame::Join(Join {
                set: 7,
                index: 1,
                count: 2,
                path: 0
            }))]
        );
        join[14] = 63;
        assert!(read_all(&join)[0].is_err());
        let mut c = Cursor::new(&[3u8, 0, 9][..]);
        assert!(matches!(
            read_frame(&mut c, &mut [0u8; 8]),
            Err(FrameError::TooLong(9))
        ));
    }
}
