//! A pinned leg set: one leg per tunnel path, a flow striped across them.
//!
//! A single leg inside the tunnel sees the tunnel as one path: over a
//! satellite beside DSL its round trip is the satellite's, and its
//! congestion control grows at satellite pace. A set instead has one leg
//! per path, each *pinned* to its path (its packets carry DSCP `path + 1`,
//! which mptd's scheduler honours for legs between the tunnel addresses
//! and its delay equalisation leaves alone; see `mptd::plane::leg_pin`):
//! each leg has its own congestion control at its own path's round trip,
//! as an MPTCP subflow does.
//!
//! Sending ([`LegSet::send_data`]) is a chunk scheduler: each chunk goes
//! to a leg whose socket takes it now (`TCP_NOTSENT_LOWAT` makes a leg
//! writable only while little of what it was given is still unsent), the
//! one with the shortest smoothed round trip first. So the fast path is
//! fed first, the slow one takes what the fast one cannot, and no leg
//! queues much more than it can send soon (bytes queued behind a
//! satellite's backlog would hold up everything after them at the far
//! end). Receiving: one reader thread per leg pushes chunks into the
//! set's bounded reorder buffer (`crate::reorder`); [`LegSet::recv`]
//! pops them in order.
//!
//! A set carries one flow at a time, like a single leg, and is reused
//! after a clean flow. Anything wrong (a leg fails, a bad chunk, a reset)
//! kills the whole set: every leg is shut down and the buffer closed,
//! which ends the flow on it as an abort at both ends. A peer that closes
//! the set closes every leg after its last chunk; the set ends once all
//! legs have ended, so what they carried (a refusal's RESULT, say) is
//! still read.
//!
//! A set's legs may also be *direct* (`crate::direct`): TCP connections
//! over the paths' own uplinks rather than inside the tunnel. Then each
//! chunk is one sealed message on its leg (when the connection has keys);
//! scheduling, reordering and the set's life are the same.

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::chunk::{self, Msg, CHUNK};
use crate::congestion::{self, Watch};
use crate::direct::{SealRx, SealTx, Seals};
use crate::frame::FrameError;
use crate::reorder::{PushError, Reorder};
use crate::sock;
use crate::stats::Stats;

/// A leg of a set: its socket, the id of its path and, for a sealed
/// direct leg, its keys.
pub struct PinnedLeg {
    /// The connected leg.
    pub stream: TcpStream,
    /// The path it is pinned to (or runs over, for a direct leg).
    pub path: u8,
    /// Its keys, if its chunks are sealed.
    pub seals: Option<Seals>,
    /// Its loss watch, if its congestion control is `"auto"` and still
    /// the clean path's (`crate::congestion`).
    pub watch: Option<Watch>,
}

impl PinnedLeg {
    /// A leg whose chunks go as they are (inside the tunnel, or a
    /// cleartext connection's direct leg).
    pub fn plain(stream: TcpStream, path: u8) -> Self {
        PinnedLeg {
            stream,
            path,
            seals: None,
            watch: None,
        }
    }
}

/// Room for a chunk's header before its data.
const CHUNK_HEADER_ROOM: usize = 16;
/// Data chunks sent between two looks at the legs' loss counters (1 MiB).
const WATCH_EVERY: u32 = 64;

/// Chunks the reorder buffer holds at most: 256 x 16 KiB = 4 MiB per
/// direction of a set, enough for a 10 Mbit/s path's data to wait out a
/// satellite's extra 600 ms and some queueing behind it.
pub const WINDOW: u32 = 256;

/// How long a sender waits for a writable leg before looking again
/// whether the set died.
const POLL_MS: i32 = 200;

struct Inner {
    legs: Vec<TcpStream>,
    /// Each leg's path id (for the per-path byte counts).
    paths: Vec<u8>,
    /// Legs whose far side closed cleanly (end of stream).
    ended: AtomicUsize,
    /// Each leg's loss watch (`crate::congestion`).
    watches: Mutex<Vec<Option<Watch>>>,
    rx: Reorder,
    tx: Mutex<Tx>,
    stats: Arc<Stats>,
}

struct Tx {
    seq: u32,
    scratch: Vec<u8>,
    /// Each leg's sending keys (`None`: plain).
    seals: Vec<Option<SealTx>>,
    /// `scratch` sealed, for a sealed leg.
    sealed: Vec<u8>,
    /// When the last data chunk was sent (`None`: none yet): the legs
    /// restart slow start after idling (`crate::congestion`).
    last_data: Option<Instant>,
}

/// A running leg set; dropping it kills it.
pub struct LegSet(Arc<Inner>);

impl Drop for LegSet {
    fn drop(&mut self) {
        self.0.kill();
    }
}

impl Inner {
    fn kill(&self) {
        self.rx.close();
        for l in &self.legs {
            let _ = l.shutdown(Shutdown::Both);
        }
    }

    /// One leg's reader: chunks into the reorder buffer until the set
    /// dies.
    fn read_leg(&self, mut leg: TcpStream, mut seal: Option<SealRx>) {
        let mut buf = vec![0u8; CHUNK];
        let (mut sealed, mut plain) = match seal {
            Some(_) => (Vec::new(), vec![0u8; CHUNK + CHUNK_HEADER_ROOM]),
            None => (Vec::new(), Vec::new()),
        };
        loop {
            let got = match &mut seal {
                None => chunk::read(&mut leg, &mut buf),
                Some(rx) => rx
                    .open(&mut leg, &mut sealed, &mut plain)
                    .and_then(|n| whole_chunk(&plain[..n], &mut buf)),
            };
            let bad = match got {
                Ok((seq, msg)) => match self.rx.push(seq, msg) {
                    Ok(()) => continue,
                    Err(PushError::Closed) => None,
                    Err(e) => Some(e.to_string()),
                },
                // The peer closed this leg: when it closes the set it
                // closes every leg after its last chunk, so the set ends
                // when all legs have ended and what they carried is in.
                Err(FrameError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    if self.ended.fetch_add(1, Relaxed) + 1 < self.legs.len() {
                        return;
                    }
                    None
                }
                Err(FrameError::Io(_)) => None,
                Err(e) => Some(e.to_string()),
            };
            if let Some(why) = bad.filter(|_| !self.rx.is_closed()) {
                self.stats.bad_frames.fetch_add(1, Relaxed);
                tracing::debug!(%why, "bad chunk on an acceleration leg set: set closed");
            }
            self.kill();
            return;
        }
    }

    /// The leg to send on: of those whose socket takes data now, the one
    /// with the shortest round trip (waits while none does).
    fn pick(&self) -> io::Result<usize> {
        if self.legs.len() == 1 {
            return Ok(0);
        }
        loop {
            if self.rx.is_closed() {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            let ready = sock::writable(&self.legs, POLL_MS)?;
            let best = ready
                .iter()
                .enumerate()
                .filter(|(_, r)| **r)
                .map(|(i, _)| (sock::srtt_us(&self.legs[i]).unwrap_or(u32::MAX), i))
                .min();
            if let Some((_, i)) = best {
                return Ok(i);
            }
        }
    }

    /// The set sends again after idling (or for the first time): its
    /// auto legs' loss watches start over (`crate::congestion`).
    fn legs_restart(&self) {
        for w in crate::lock(&self.watches).iter_mut().flatten() {
            w.restart();
        }
    }

    /// Looks at the auto legs' loss counters (`crate::congestion`).
    fn watch_losses(&self) {
        let mut watches = crate::lock(&self.watches);
        for (w, leg) in watches.iter_mut().zip(&self.legs) {
            if let Some(w) = w {
                w.check(leg);
            }
        }
    }

    /// The leg with the shortest round trip, writable or not (for the
    /// few bytes of OPEN, RESULT, FIN).
    fn fastest(&self) -> usize {
        (0..self.legs.len())
            .min_by_key(|&i| sock::srtt_us(&self.legs[i]).unwrap_or(u32::MAX))
            .unwrap_or(0)
    }

    fn write(&self, leg: usize, tx: &mut Tx) -> io::Result<()> {
        let mut w = &self.legs[leg];
        let r = match tx.seals.get_mut(leg) {
            Some(Some(seal)) => {
                tx.sealed.clear();
                seal.seal(&tx.scratch, &mut tx.sealed)
                    .and_then(|()| w.write_all(&tx.sealed))
            }
            _ => w.write_all(&tx.scratch),
        };
        if r.is_err() {
            self.kill();
        }
        r
    }
}

impl LegSet {
    /// Starts the readers of `legs` (connected, joined and tuned), each
    /// with its path id.
    pub fn start(legs: Vec<PinnedLeg>, stats: Arc<Stats>) -> io::Result<LegSet> {
        let mut streams = Vec::with_capacity(legs.len());
        let mut paths = Vec::with_capacity(legs.len());
        let mut seals = Vec::with_capacity(legs.len());
        let mut readers = Vec::with_capacity(legs.len());
        let mut watches = Vec::with_capacity(legs.len());
        for leg in legs {
            watches.push(leg.watch);
            let (tx, rx) = match leg.seals {
                Some((tx, rx)) => (Some(tx), Some(rx)),
                None => (None, None),
            };
            readers.push((leg.stream.try_clone()?, rx));
            streams.push(leg.stream);
            paths.push(leg.path);
            seals.push(tx);
        }
        let legs = streams;
        let inner = Arc::new(Inner {
            legs,
            paths,
            ended: AtomicUsize::new(0),
            watches: Mutex::new(watches),
            rx: Reorder::new(WINDOW),
            tx: Mutex::new(Tx {
                seq: 0,
                scratch: Vec::with_capacity(CHUNK + CHUNK_HEADER_ROOM),
                seals,
                sealed: Vec::new(),
                last_data: None,
            }),
            stats,
        });
        let set = LegSet(inner.clone());
        for (r, seal) in readers {
            let inn = inner.clone();
            std::thread::Builder::new()
                .name("accel-set-rx".into())
                .spawn(move || inn.read_leg(r, seal))?;
        }
        Ok(set)
    }

    /// How many legs.
    pub fn len(&self) -> usize {
        self.0.legs.len()
    }

    /// Whether the set has no legs (never: a set has at least one).
    pub fn is_empty(&self) -> bool {
        self.0.legs.is_empty()
    }

    /// Whether the set still works (no leg failed, not killed).
    pub fn alive(&self) -> bool {
        !self.0.rx.is_closed()
    }

    /// Sends a control message (OPEN, RESULT, FIN) on the fastest leg.
    pub fn send(&self, msg: &Msg) -> io::Result<()> {
        let mut tx = crate::lock(&self.0.tx);
        let seq = tx.seq;
        tx.scratch.clear();
        chunk::encode(seq, msg, &mut tx.scratch);
        self.0.write(self.0.fastest(), &mut tx)?;
        tx.seq = seq.wrapping_add(1);
        Ok(())
    }

    /// Sends `data` as chunks, each on the leg the scheduler picks.
    pub fn send_data(&self, data: &[u8]) -> io::Result<()> {
        let idle_restart = Duration::from_millis(congestion::IDLE_RESTART_MS.into());
        let last_data = crate::lock(&self.0.tx).last_data;
        if last_data.is_none_or(|t| t.elapsed() >= idle_restart) {
            self.0.legs_restart();
        }
        for piece in data.chunks(CHUNK) {
            let leg = self.0.pick()?;
            let mut tx = crate::lock(&self.0.tx);
            let seq = tx.seq;
            tx.scratch.clear();
            chunk::encode_data_chunk(seq, piece, &mut tx.scratch);
            self.0.write(leg, &mut tx)?;
            let path = self.0.paths.get(leg).copied().unwrap_or(u8::MAX);
            self.0.stats.path_bytes.add(path, piece.len());
            tx.seq = seq.wrapping_add(1);
            tx.last_data = Some(Instant::now());
            if seq.is_multiple_of(WATCH_EVERY) {
                self.0.watch_losses();
            }
        }
        Ok(())
    }

    /// A reset, if it can be sent without waiting (a courtesy: the set is
    /// killed right after, which the peer takes as an abort too).
    pub fn try_rst(&self) {
        if let Ok(mut tx) = self.0.tx.try_lock() {
            let seq = tx.seq;
            tx.scratch.clear();
            chunk::encode(seq, &Msg::Rst, &mut tx.scratch);
            let leg = self.0.fastest();
            let _ = self.0.legs[leg].set_nonblocking(true);
            let _ = self.0.write(leg, &mut tx);
            tx.seq = seq.wrapping_add(1);
        }
    }

    /// The next message of the peer's direction, in order; `None` once
    /// the set died.
    pub fn recv(&self) -> Option<Msg> {
        self.0.rx.pop()
    }

    /// Shuts every leg down and closes the buffer.
    pub fn kill(&self) {
        self.0.kill();
    }
}

/// The one chunk an opened sealed message holds (anything after it is a
/// bad chunk).
fn whole_chunk(mut plain: &[u8], buf: &mut [u8]) -> Result<(u32, Msg), FrameError> {
    let got = chunk::read(&mut plain, buf)?;
    if plain.is_empty() {
        Ok(got)
    } else {
        Err(FrameError::OutOfPlace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    /// `n` connected loopback pairs, leg `i` on path `i`: (near sides,
    /// far sides).
    fn pairs(n: usize) -> (Vec<PinnedLeg>, Vec<PinnedLeg>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..n {
            let c = TcpStream::connect(addr).unwrap();
            sock::pin_leg(&c, i as u8, "").unwrap();
            a.push(PinnedLeg::plain(c, i as u8));
            b.push(PinnedLeg::plain(l.accept().unwrap().0, i as u8));
        }
        (a, b)
    }

    fn wait_for(what: &str, f: impl Fn() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(t.elapsed() < Duration::from_secs(5), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_striped_stream_arrives_whole_and_in_order() {
        let (a, b) = pairs(3);
        let stats = Arc::new(Stats::default());
        let near = LegSet::start(a, stats.clone()).unwrap();
        let far = LegSet::start(b, stats.clone()).unwrap();
        let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let p2 = payload.clone();
        let sender = std::thread::spawn(move || {
            near.send(&Msg::Open {
                src: "10.0.0.1:1".parse().unwrap(),
                dst: "10.0.0.2:2".parse().unwrap(),
            })
            .unwrap();
            for piece in p2.chunks(50_000) {
                near.send_data(piece).unwrap();
            }
            near.send(&Msg::Fin).unwrap();
            near
        });
        assert!(matches!(far.recv(), Some(Msg::Open { .. })));
        let mut got = Vec::new();
        loop {
            match far.recv() {
                Some(Msg::Data(d)) => {
                    assert!(d.len() <= CHUNK);
                    got.extend_from_slice(&d);
                }
                Some(Msg::Fin) => break,
                other => panic!("{other:?}"),
            }
        }
        assert!(got == payload, "bytes differ");
        let near = sender.join().unwrap();
        // Every data byte is counted once, on the path of the leg that
        // carried it (loopback legs: any split is fine).
        let by_path = stats.snapshot().path_bytes;
        assert_eq!(by_path.iter().map(|p| p.1).sum::<u64>(), 3_000_000);
        assert!(by_path.iter().all(|p| p.0 < 3), "{by_path:?}");
        // The other direction on the same set, then a reset.
        far.send_data(b"answer").unwrap();
        far.send(&Msg::Rst).unwrap();
        assert_eq!(near.recv(), Some(Msg::Data(b"answer".to_vec())));
        assert_eq!(near.recv(), Some(Msg::Rst));
        assert_eq!(stats.bad_frames.load(Relaxed), 0);
        assert!(near.alive() && far.alive());
        // Dropping one end kills the set at the other.
        drop(near);
        wait_for("the far set did not die", || !far.alive());
        assert_eq!(far.recv(), None);
    }

    #[test]
    fn bad_bytes_on_a_leg_are_counted_and_kill_the_set() {
        for garbage in [
            &b"GET / HTTP/1.1\r\n"[..],
            // A valid chunk out of the window (far ahead).
            &[frame::T_CHUNK, 0x7f, 0, 0, 0, 4][..],
            // DATA longer than a chunk.
            &[frame::T_CHUNK, 0, 0, 0, 0, 3, 0xff, 0xff][..],
        ] {
            let (a, b) = pairs(2);
            let stats = Arc::new(Stats::default());
            let mut raw = a[1].stream.try_clone().unwrap();
            let far = LegSet::start(b, stats.clone()).unwrap();
            raw.write_all(garbage).unwrap();
            wait_for("the set did not die", || !far.alive());
            assert_eq!(far.recv(), None);
            assert_eq!(stats.bad_frames.load(Relaxed), 1, "{garbage:?}");
            drop(a);
        }
    }

    #[test]
    fn a_slow_reader_stops_the_sender_within_bounds() {
        let (a, b) = pairs(2);
        let stats = Arc::new(Stats::default());
        let near = Arc::new(LegSet::start(a, stats.clone()).unwrap());
        let far = LegSet::start(b, stats).unwrap();
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (n2, s2) = (near.clone(), sent.clone());
        let sender = std::thread::spawn(move || {
            let block = vec![1u8; CHUNK];
            while n2.send_data(&block).is_ok() {
                s2.fetch_add(CHUNK as u64, Relaxed);
            }
        });
        // Nobody reads at the far end: the sender must stall after the
        // reorder window plus the legs' socket buffers.
        let t = Instant::now();
        let mut stalled = sent.load(Relaxed);
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = sent.load(Relaxed);
            if now == stalled {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the sender did not stall"
            );
            stalled = now;
        }
        assert!(far.0.rx.held() <= WINDOW as usize);
        assert!(stalled < 64 << 20, "{stalled} bytes sent to nobody");
        far.kill();
        near.kill();
        sender.join().unwrap();
    }
}
