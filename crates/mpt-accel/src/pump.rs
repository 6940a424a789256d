//! One flow on one carrier (a single leg, or a pinned leg set): two
//! blocking copies, one per direction, the same at both ends (the near
//! end's socket is the client, the far end's the destination).
//!
//! * out: read the socket, send its bytes; at its end of stream, FIN.
//! * in: receive, write the bytes to the socket; at FIN, shut the
//!   socket's write side (half-close passes through); at RST, abort. At
//!   the near end the first message back is the far end's connect
//!   result: the near end sends OPEN and the client's first bytes at
//!   once, without waiting for it (one round trip over the middle less
//!   per flow), and a refusal then aborts the flow (the client sees a
//!   reset).
//!
//! Backpressure is the blocking writes: each direction holds one buffer
//! of [`BUF`] bytes, so a slow reader fills the socket buffers on its own
//! flow's path and stalls only that flow's copy. An abort (a reset from
//! either side, a broken leg, bad frames) arms the socket to reset when
//! closed, shuts its read side (which wakes the other copy) and the leg,
//! and the leg is not reused. A flow that ended with a FIN each way
//! leaves the leg clean for the next flow.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::chunk::Msg;
use crate::frame::{self, ConnectResult, Frame};
use crate::set::LegSet;
use crate::sock::arm_reset;
use crate::stats::Stats;

/// Bytes one copy moves per read.
pub const BUF: usize = 64 * 1024;

/// How a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Both directions ended with a FIN: the leg can carry the next flow.
    Clean,
    /// Reset, or the leg broke: the leg is closed.
    Aborted,
}

/// What the in copy received.
#[derive(Debug)]
pub enum Got {
    /// Bytes, in the buffer given.
    Data(usize),
    /// End of stream.
    Fin,
    /// Abort.
    Rst,
    /// The far end's connect result.
    Result(ConnectResult),
    /// Something that is no message here (counted as a bad frame).
    Bad,
    /// The carrier closed or failed.
    Closed,
}

/// What carries a flow between the gateways.
pub trait Carrier: Sync {
    /// Sends bytes read from the socket.
    fn send_data(&self, d: &[u8]) -> std::io::Result<()>;
    /// Sends end of stream.
    fn send_fin(&self) -> std::io::Result<()>;
    /// Sends the far end's connect result (before the flow's copies run).
    fn send_result(&self, r: ConnectResult) -> std::io::Result<()>;
    /// Sends a reset if that takes no waiting.
    fn try_rst(&self);
    /// Receives the next message; `buf` takes the bytes.
    fn recv(&self, buf: &mut Vec<u8>) -> Got;
    /// Aborts: both directions fail from now on.
    fn shut(&self);
}

/// One leg, framed as in [`crate::frame`].
pub struct Leg<'a> {
    leg: &'a TcpStream,
    /// Frames are written whole under this lock (DATA and FIN from the out
    /// copy, RST from either).
    w: Mutex<Vec<u8>>,
}

impl<'a> Leg<'a> {
    /// A carrier over `leg`.
    pub fn new(leg: &'a TcpStream) -> Self {
        Leg {
            leg,
            w: Mutex::new(Vec::with_capacity(BUF + 3)),
        }
    }
}

impl Carrier for Leg<'_> {
    fn send_data(&self, d: &[u8]) -> std::io::Result<()> {
        let mut scratch = crate::lock(&self.w);
        let mut leg = self.leg;
        frame::write_data(&mut leg, d, &mut scratch)
    }

    fn send_fin(&self) -> std::io::Result<()> {
        let _w = crate::lock(&self.w);
        (&mut &*self.leg).write_all(&frame::FIN)
    }

    fn send_result(&self, r: ConnectResult) -> std::io::Result<()> {
        let _w = crate::lock(&self.w);
        (&mut &*self.leg).write_all(&frame::encode_result(r))
    }

    fn try_rst(&self) {
        // Never waited for: the other copy may hold the lock, blocked on a
        // full leg.
        if let Ok(_w) = self.w.try_lock() {
            let _ = self.leg.set_nonblocking(true);
            let _ = (&mut &*self.leg).write_all(&frame::RST);
        }
    }

    fn recv(&self, buf: &mut Vec<u8>) -> Got {
        buf.resize(frame::MAX_DATA, 0);
        match frame::read_frame(&mut &*self.leg, buf) {
            Ok(Frame::Data(n)) => Got::Data(n),
            Ok(Frame::Fin) => Got::Fin,
            Ok(Frame::Rst) => Got::Rst,
            Ok(Frame::Result(r)) => Got::Result(r),
            Ok(Frame::Open { .. } | Frame::Join(_)) => Got::Bad,
            Err(e) if e.is_io() => Got::Closed,
            Err(e) => {
                tracing::debug!(error = %e, "bad frame on an acceleration leg");
                Got::Bad
            }
        }
    }

    fn shut(&self) {
        let _ = self.leg.shutdown(Shutdown::Both);
    }
}

impl Carrier for LegSet {
    fn send_data(&self, d: &[u8]) -> std::io::Result<()> {
        LegSet::send_data(self, d)
    }

    fn send_fin(&self) -> std::io::Result<()> {
        self.send(&Msg::Fin)
    }

    fn send_result(&self, r: ConnectResult) -> std::io::Result<()> {
        self.send(&Msg::Result(r))
    }

    fn try_rst(&self) {
        LegSet::try_rst(self)
    }

    fn recv(&self, buf: &mut Vec<u8>) -> Got {
        match LegSet::recv(self) {
            Some(Msg::Data(mut d)) => {
                std::mem::swap(buf, &mut d);
                Got::Data(buf.len())
            }
            Some(Msg::Fin) => Got::Fin,
            Some(Msg::Rst) => Got::Rst,
            Some(Msg::Result(r)) => Got::Result(r),
            Some(Msg::Open { .. }) => Got::Bad,
            None => Got::Closed,
        }
    }

    fn shut(&self) {
        self.kill()
    }
}

/// What both copies of one flow share.
struct Flow<'a, C: Carrier> {
    sock: &'a TcpStream,
    carrier: &'a C,
    aborted: AtomicBool,
    stats: &'a Stats,
}

impl<C: Carrier> Flow<'_, C> {
    fn abort(&self, send_rst: bool) {
        if self.aborted.swap(true, Relaxed) {
            return;
        }
        self.stats.resets.fetch_add(1, Relaxed);
        // The RST is a courtesy: the carrier is shut down right after,
        // which the other end also takes as an abort.
        if send_rst {
            self.carrier.try_rst();
        }
        arm_reset(self.sock);
        let _ = self.sock.shutdown(Shutdown::Read);
        self.carrier.shut();
    }

    /// Socket to carrier. Returns whether it ended with a FIN sent.
    fn out(&self, counter: &AtomicU64) -> bool {
        let mut buf = vec![0u8; BUF];
        let mut s = self.sock;
        loop {
            let n = match s.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.abort(true);
                    return false;
                }
            };
            if self.aborted.load(Relaxed) {
                return false;
            }
            let sent = if n == 0 {
                self.carrier.send_fin()
            } else {
                self.carrier.send_data(&buf[..n])
            };
            if sent.is_err() {
                self.abort(false);
                return false;
            }
            if n == 0 {
                return true;
            }
            counter.fetch_add(n as u64, Relaxed);
        }
    }

    /// Carrier to socket. Returns whether it ended with a FIN received.
    /// `result_first`: the first message must be the far end's connect
    /// result (the near end).
    fn to_sock(&self, counter: &AtomicU64, result_first: bool) -> bool {
        let mut buf = Vec::with_capacity(frame::MAX_DATA);
        let mut s = self.sock;
        let mut awaiting = result_first;
        loop {
            match self.carrier.recv(&mut buf) {
                Got::Result(ConnectResult::Ok) if awaiting => awaiting = false,
                Got::Result(r) if awaiting => {
                    self.stats.refused.fetch_add(1, Relaxed);
                    tracing::debug!(result = ?r, "accelerated flow refused by the far end");
                    self.abort(false);
                    return false;
                }
                Got::Data(n) if !awaiting => {
                    if s.write_all(&buf[..n]).is_err() {
                        self.abort(true);
                        return false;
                    }
                    counter.fetch_add(n as u64, Relaxed);
                }
                Got::Fin if !awaiting => {
                    let _ = s.shutdown(Shutdown::Write);
                    return true;
                }
                Got::Rst | Got::Closed => {
                    self.abort(false);
                    return false;
                }
                _ => {
                    if !self.aborted.load(Relaxed) {
                        self.stats.bad_frames.fetch_add(1, Relaxed);
                    }
                    self.abort(true);
                    return false;
                }
            }
        }
    }
}

/// Runs a flow between `sock` and `carrier` until both directions end.
/// `counters` count the bytes read from `sock` and written to it;
/// `result_first`: see [`Got::Result`] (true at the near end). The out
/// copy runs on a scoped thread, the in copy on the caller's.
pub fn run<C: Carrier>(
    sock: &TcpStream,
    carrier: &C,
    counters: (&AtomicU64, &AtomicU64),
    stats: &Stats,
    result_first: bool,
) -> Ending {
    let flow = Flow {
        sock,
        carrier,
        aborted: AtomicBool::new(false),
        stats,
    };
    let (fin_out, fin_in) = std::thread::scope(|sc| {
        let out = std::thread::Builder::new()
            .name("accel-out".into())
            .spawn_scoped(sc, || flow.out(counters.0));
        let Ok(out) = out else {
            flow.abort(true);
            return (false, false);
        };
        let fin_in = flow.to_sock(counters.1, result_first);
        (out.join().unwrap_or(false), fin_in)
    });
    if fin_out && fin_in && !flow.aborted.load(Relaxed) {
        Ending::Clean
    } else {
        flow.abort(true);
        Ending::Aborted
    }
}
