//! One flow on one leg: two blocking copies, one per direction, the same
//! at both ends (the near end's socket is the client, the far end's the
//! destination).
//!
//! * out: read the socket, write DATA frames; at its end of stream, FIN.
//! * in: read frames, write their bytes to the socket; at FIN, shut the
//!   socket's write side (half-close passes through); at RST, abort.
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

use crate::frame::{self, Frame};
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

/// What both copies of one flow share.
struct Flow<'a> {
    sock: &'a TcpStream,
    leg: &'a TcpStream,
    /// Frames are written whole under this lock (both copies write:
    /// DATA and FIN from out, RST from either).
    leg_w: Mutex<&'a TcpStream>,
    aborted: AtomicBool,
    stats: &'a Stats,
}

impl Flow<'_> {
    fn abort(&self, send_rst: bool) {
        if self.aborted.swap(true, Relaxed) {
            return;
        }
        self.stats.resets.fetch_add(1, Relaxed);
        // The RST is a courtesy: the leg is shut down right after, which
        // the other end also takes as an abort. It is never waited for: the
        // other copy may hold the lock, blocked on a full leg.
        if send_rst {
            if let Ok(mut w) = self.leg_w.try_lock() {
                let _ = w.set_nonblocking(true);
                let _ = w.write_all(&frame::RST);
            }
        }
        arm_reset(self.sock);
        let _ = self.sock.shutdown(Shutdown::Read);
        let _ = self.leg.shutdown(Shutdown::Both);
    }

    /// Socket to leg. Returns whether it ended with a FIN sent.
    fn out(&self, counter: &AtomicU64) -> bool {
        let mut buf = vec![0u8; BUF];
        let mut scratch = Vec::with_capacity(BUF + 3);
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
            let mut w = crate::lock(&self.leg_w);
            let sent = if n == 0 {
                w.write_all(&frame::FIN)
            } else {
                frame::write_data(&mut *w, &buf[..n], &mut scratch)
            };
            drop(w);
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

    /// Leg to socket. Returns whether it ended with a FIN received.
    fn to_sock(&self, counter: &AtomicU64) -> bool {
        let mut buf = vec![0u8; frame::MAX_DATA];
        let mut leg = self.leg;
        let mut s = self.sock;
        loop {
            match frame::read_frame(&mut leg, &mut buf) {
                Ok(Frame::Data(n)) => {
                    if s.write_all(&buf[..n]).is_err() {
                        self.abort(true);
                        return false;
                    }
                    counter.fetch_add(n as u64, Relaxed);
                }
                Ok(Frame::Fin) => {
                    let _ = s.shutdown(Shutdown::Write);
                    return true;
                }
                Ok(Frame::Rst) => {
                    self.abort(false);
                    return false;
                }
                Ok(Frame::Open { .. } | Frame::Result(_)) | Err(_) => {
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

/// Runs a flow between `sock` and `leg` until both directions end.
/// `counters` count the bytes read from `sock` and written to it. The out
/// copy runs on a scoped thread, the in copy on the caller's.
pub fn run(
    sock: &TcpStream,
    leg: &TcpStream,
    counters: (&AtomicU64, &AtomicU64),
    stats: &Stats,
) -> Ending {
    let flow = Flow {
        sock,
        leg,
        leg_w: Mutex::new(leg),
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
        let fin_in = flow.to_sock(counters.1);
        (out.join().unwrap_or(false), fin_in)
    });
    if fin_out && fin_in && !flow.aborted.load(Relaxed) {
        Ending::Clean
    } else {
        flow.abort(true);
        Ending::Aborted
    }
}
