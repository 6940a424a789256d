//! Chunks: the frames of one flow direction, sequence-numbered, as they
//! travel over a pinned leg set (`crate::set`).
//!
//! A leg set stripes a flow over several legs, each pinned to one tunnel
//! path, so the frames of one direction arrive out of order. Each frame
//! is sent as `CHUNK` (type 7), a sequence number (u32, big-endian,
//! counting up per direction of the set, wrapping) and then the frame
//! itself (OPEN, RESULT, DATA, FIN or RST, as in [`crate::frame`]). The
//! receiver puts them back in order in a bounded reorder buffer
//! (`crate::reorder`).
//!
//! A DATA frame in a chunk carries at most [`CHUNK`] bytes: the reorder
//! buffer holds at most its window of chunks, so this bounds its memory
//! whatever the peer sends (a longer one is a [`FrameError::TooLong`]).

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use crate::frame::{self, ConnectResult, Frame, FrameError, T_CHUNK};

/// Most payload bytes in one chunk's DATA.
pub const CHUNK: usize = 16 * 1024;

/// One message of a flow direction, owned (it waits in the reorder
/// buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// Open a flow from `src` to `dst` (near to far).
    Open {
        /// The client's address.
        src: SocketAddr,
        /// The destination.
        dst: SocketAddr,
    },
    /// The far end's connect result (far to near, first of a flow).
    Result(ConnectResult),
    /// Bytes of the flow.
    Data(Vec<u8>),
    /// No more data in this direction.
    Fin,
    /// The flow is aborted.
    Rst,
}

/// Appends `msg` as a chunk with sequence number `seq` to `out`.
pub fn encode(seq: u32, msg: &Msg, out: &mut Vec<u8>) {
    out.push(T_CHUNK);
    out.extend_from_slice(&seq.to_be_bytes());
    match msg {
        Msg::Open { src, dst } => frame::encode_open(*src, *dst, out),
        Msg::Result(r) => out.extend_from_slice(&frame::encode_result(*r)),
        Msg::Data(d) => encode_data(d, out),
        Msg::Fin => out.extend_from_slice(&frame::FIN),
        Msg::Rst => out.extend_from_slice(&frame::RST),
    }
}

/// Appends DATA with `d` (1..=[`CHUNK`] bytes; longer is cut) to `out`.
pub fn encode_data(d: &[u8], out: &mut Vec<u8>) {
    let d = &d[..d.len().min(CHUNK)];
    out.extend_from_slice(&frame::data_header(d.len()));
    out.extend_from_slice(d);
}

/// Appends a chunk with DATA `d` to `out` without building a [`Msg`].
pub fn encode_data_chunk(seq: u32, d: &[u8], out: &mut Vec<u8>) {
    out.push(T_CHUNK);
    out.extend_from_slice(&seq.to_be_bytes());
    encode_data(d, out);
}

/// Writes `msg` as one chunk (one write).
pub fn write(w: &mut impl Write, seq: u32, msg: &Msg, scratch: &mut Vec<u8>) -> io::Result<()> {
    scratch.clear();
    encode(seq, msg, scratch);
    w.write_all(scratch)
}

/// Reads one chunk. `buf` must hold [`CHUNK`] bytes; a DATA longer than
/// that, a nested CHUNK, a JOIN or an unnumbered frame is an error.
pub fn read(r: &mut impl Read, buf: &mut [u8]) -> Result<(u32, Msg), FrameError> {
    let mut head = [0u8; 5];
    r.read_exact(&mut head[..1])?;
    if head[0] != T_CHUNK {
        return Err(FrameError::OutOfPlace);
    }
    r.read_exact(&mut head[1..])?;
    let seq = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let lim = buf.len().min(CHUNK);
    let buf = &mut buf[..lim];
    let msg = match frame::read_frame(r, buf)? {
        Frame::Open { src, dst } => Msg::Open { src, dst },
        Frame::Result(res) => Msg::Result(res),
        Frame::Data(n) => Msg::Data(buf[..n].to_vec()),
        Frame::Fin => Msg::Fin,
        Frame::Rst => Msg::Rst,
        Frame::Join(_) => return Err(FrameError::OutOfPlace),
    };
    Ok((seq, msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn every_message_round_trips() {
        let msgs = [
            Msg::Open {
                src: "10.0.0.1:4000".parse().unwrap(),
                dst: "[2001:db8::1]:443".parse().unwrap(),
            },
            Msg::Result(ConnectResult::TimedOut),
            Msg::Data(vec![7; CHUNK]),
            Msg::Data(vec![1]),
            Msg::Fin,
            Msg::Rst,
        ];
        let mut v = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            encode((u32::MAX - 2).wrapping_add(i as u32), m, &mut v);
        }
        let mut c = Cursor::new(&v[..]);
        let mut buf = vec![0u8; CHUNK];
        for (i, m) in msgs.iter().enumerate() {
            let (seq, got) = read(&mut c, &mut buf).unwrap();
            assert_eq!(seq, (u32::MAX - 2).wrapping_add(i as u32));
            // Open's v4 source is carried as v4-mapped v6 beside a v6
            // destination.
            if let (Msg::Open { dst, .. }, Msg::Open { dst: d2, .. }) = (m, &got) {
                assert_eq!(dst, d2);
            } else {
                assert_eq!(&got, m);
            }
        }
        let mut d = Vec::new();
        encode_data_chunk(9, &[5; 3], &mut d);
        assert_eq!(
            read(&mut Cursor::new(&d[..]), &mut buf).unwrap(),
            (9, Msg::Data(vec![5; 3]))
        );
    }

    #[test]
    fn bad_chunks_are_errors_not_panics() {
        let mut buf = vec![0u8; CHUNK];
        // Unnumbered frame where a chunk belongs.
        assert!(matches!(
            read(&mut Cursor::new(&frame::FIN[..]), &mut buf),
            Err(FrameError::OutOfPlace)
        ));
        // Nested chunk.
        let nested = [T_CHUNK, 0, 0, 0, 1, T_CHUNK, 0, 0, 0, 2, 4];
        assert!(read(&mut Cursor::new(&nested[..]), &mut buf).is_err());
        // A JOIN inside a chunk.
        let mut j = vec![T_CHUNK, 0, 0, 0, 1];
        j.extend_from_slice(&frame::encode_join(frame::Join {
            set: 1,
            index: 0,
            count: 1,
            path: 0,
        }));
        assert!(matches!(
            read(&mut Cursor::new(&j[..]), &mut buf),
            Err(FrameError::OutOfPlace)
        ));
        // DATA longer than a chunk.
        let mut long = vec![T_CHUNK, 0, 0, 0, 1];
        long.extend_from_slice(&frame::data_header(CHUNK + 1));
        long.extend_from_slice(&vec![0u8; CHUNK + 1]);
        assert!(matches!(
            read(&mut Cursor::new(&long[..]), &mut buf),
            Err(FrameError::TooLong(_))
        ));
        // Truncated anywhere: an i/o error.
        let mut v = Vec::new();
        encode(3, &Msg::Data(vec![1, 2, 3]), &mut v);
        for cut in 0..v.len() {
            let e = read(&mut Cursor::new(&v[..cut]), &mut buf).unwrap_err();
            assert!(e.is_io(), "{cut}: {e}");
        }
        // Garbage of every first byte: never a panic.
        for b in 0..=255u8 {
            let g = [T_CHUNK, 0, 0, 0, 0, b, 0xff, 0xff, 0xff];
            let _ = read(&mut Cursor::new(&g[..]), &mut buf);
        }
    }
}
