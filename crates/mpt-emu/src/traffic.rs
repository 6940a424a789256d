//! Test traffic for the self-test: UDP datagrams from namespace `a` to `b`
//! through the wire, each carrying a sequence number and its send time.
//!
//! Send times are CLOCK_REALTIME (`SystemTime`), and the receiver takes the
//! kernel's receive timestamp (`SO_TIMESTAMPNS`), also CLOCK_REALTIME: the
//! clock is shared by all namespaces, and the kernel stamp is taken when the
//! frame enters `b`'s stack, so the receiver thread's wake-up latency is not
//! counted as link delay. The sender also keeps an `Instant` per datagram to
//! relate sends to the wire's epoch (outage edges).

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::netns::{Testbed, A_IP, B_IP};
use super::sys;

/// Sequence number (u64) + send time (u64 ns since the Unix epoch).
pub const HEADER: usize = 16;
const PORT_A: u16 = 47_000;
const PORT_B: u16 = 47_001;

/// Datagrams read per `recvmmsg` by the receiver.
const RECV_BURST: usize = 32;

/// Ethernet frame length of a UDP/IPv4 datagram with `payload` bytes:
/// 14 (Ethernet) + 20 (IPv4) + 8 (UDP) + payload.
pub fn frame_len(payload: usize) -> usize {
    payload + 42
}

pub fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What to send.
#[derive(Debug, Clone, Copy)]
pub struct Flow {
    /// Stop sending after this long even if `count` is not reached (a
    /// sender that cannot keep up with `gap` then sends flat out for it).
    pub until: Option<Duration>,
    /// UDP payload bytes, at least [`HEADER`].
    pub payload: usize,
    /// Time between datagrams (sent in catch-up bursts if the thread sleeps
    /// late, so the mean rate holds).
    pub gap: Duration,
    pub count: u64,
}

/// Per sequence number: when it was handed to the kernel (`None`: refused).
#[derive(Debug, Clone, Default)]
pub struct SendLog {
    pub sent: Vec<Option<Instant>>,
}

impl SendLog {
    pub fn sent_ok(&self) -> usize {
        self.sent.iter().filter(|s| s.is_some()).count()
    }
}

/// One datagram received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub tx_ns: u64,
    pub rx_ns: u64,
    /// Datagrams the receiving socket had dropped before this one (its
    /// buffer was full): they reached `b` all the same.
    pub socket_drops: u32,
}

/// Opens the sender socket in `a` and the receiver socket in `b`.
pub fn open_pair(bed: &Testbed) -> io::Result<(UdpSocket, UdpSocket)> {
    let tx = bed.a.run(|| {
        let s = UdpSocket::bind((A_IP, PORT_A))?;
        s.connect((B_IP, PORT_B))?;
        Ok(s)
    })?;
    let rx = bed.b.run(|| {
        let s = UdpSocket::bind((B_IP, PORT_B))?;
        s.set_nonblocking(true)?;
        sys::enable_rx_timestamps(s.as_raw_fd())?;
        sys::enable_drop_counter(s.as_raw_fd())?;
        // 64 MiB: about 100 ms of full-size datagrams at 3 Gbit/s, should
        // the receiver fall behind; kernel stamps keep their timing.
        sys::set_rcvbuf(s.as_raw_fd(), 64 << 20)?;
        Ok(s)
    })?;
    Ok((tx, rx))
}

/// Datagrams handed to the kernel per `sendmmsg` at most, when the sender
/// is behind its schedule. At 3 Gbit/s of full-size datagrams one is due
/// every 4 us, about what a single `send` costs on the 2-core CI VM, so
/// the sender must batch to offer more than the link takes.
const SEND_BURST: usize = 32;

/// Sends `flow` on `sock`; stops early (with `Interrupted`) if `stop` is set.
/// Datagrams leave on schedule one by one while the sender keeps up, and
/// in bursts of those already due when it does not, so the mean rate holds.
pub fn send_flow(sock: &UdpSocket, flow: &Flow, stop: &AtomicBool) -> io::Result<SendLog> {
    let mut bufs = vec![vec![0u8; flow.payload.max(HEADER)]; SEND_BURST];
    let mut scratch = sys::SendBatch::default();
    let mut log = SendLog {
        sent: Vec::with_capacity(flow.count.min(1 << 20) as usize),
    };
    let gap_ns = flow.gap.as_nanos().max(1) as u64;
    let start = Instant::now();
    let mut seq = 0u64;
    while seq < flow.count {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
        }
        if flow.until.is_some_and(|limit| start.elapsed() >= limit) {
            break;
        }
        let due = start + Duration::from_nanos(gap_ns * seq);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        // Everything due by now, at least this one.
        let elapsed = start.elapsed().as_nanos() as u64;
        let burst = (elapsed / gap_ns + 1)
            .saturating_sub(seq)
            .clamp(1, SEND_BURST as u64)
            .min(flow.count - seq) as usize;
        let stamp = realtime_ns();
        for (k, buf) in bufs[..burst].iter_mut().enumerate() {
            buf[..8].copy_from_slice(&(seq + k as u64).to_le_bytes());
            buf[8..16].copy_from_slice(&stamp.to_le_bytes());
        }
        let at = Instant::now();
        let mut i = 0;
        while i < burst {
            match sys::send_batch(sock.as_raw_fd(), &bufs[i..burst], &mut scratch, 0)? {
                0 => {
                    log.sent.push(None);
                    i += 1;
                }
                k => {
                    log.sent.extend(std::iter::repeat_n(Some(at), k));
                    i += k;
                }
            }
        }
        seq += burst as u64;
    }
    Ok(log)
}

/// A receiver thread collecting [`Record`]s until finished.
pub struct Collector {
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<Vec<Record>>>>,
}

/// `realtime`: run the receiver as SCHED_FIFO at this priority (best
/// effort, warns if not allowed).
pub fn spawn_receiver(sock: UdpSocket, realtime: Option<i32>) -> Collector {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let handle = std::thread::spawn(move || {
        if let Some(prio) = realtime {
            if let Err(e) = sys::set_realtime(prio) {
                tracing::warn!(error = %e, "receiver cannot use SCHED_FIFO");
            }
        }
        let mut out = Vec::new();
        // Batched reads: at several Gbit/s of full-size datagrams one
        // `recvmsg` per datagram would fall behind the wire.
        let mut batch = sys::RecvBatch::new(RECV_BURST, 2048);
        let fd = sock.as_raw_fd();
        loop {
            let finishing = flag.load(Ordering::Relaxed);
            loop {
                let n = sys::recv_batch(fd, &mut batch)?;
                if n == 0 {
                    break;
                }
                for (i, got) in batch.received().iter().enumerate() {
                    let buf = batch.frame(i);
                    if got.len < HEADER || buf.len() < HEADER {
                        continue;
                    }
                    let word = |i: usize| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&buf[i..i + 8]);
                        u64::from_le_bytes(w)
                    };
                    let rx_ns = got
                        .kernel_time
                        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                        .map_or_else(realtime_ns, |d| d.as_nanos() as u64);
                    out.push(Record {
                        seq: word(0),
                        tx_ns: word(8),
                        rx_ns,
                        socket_drops: got.socket_drops.unwrap_or(0),
                    });
                }
            }
            if finishing {
                return Ok(out);
            }
            sys::wait_readable(fd, Duration::from_millis(5))?;
        }
    });
    Collector {
        done,
        handle: Some(handle),
    }
}

impl Collector {
    /// Stops the receiver after it has drained its socket.
    pub fn finish(mut self) -> io::Result<Vec<Record>> {
        self.done.store(true, Ordering::Relaxed);
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| io::Error::other("receiver thread panicked"))?,
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}
