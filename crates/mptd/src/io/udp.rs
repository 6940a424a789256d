//! Path sockets and batched datagram I/O (`recvmmsg`/`sendmmsg`).
//!
//! One socket per path, bound to the path's local address (and device, if
//! configured). Receiving and sending move whole batches per system call
//! into and out of caller-owned buffers; nothing here allocates per packet.

use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::io::source::{self, Source};

/// Datagrams moved per `recvmmsg`/`sendmmsg` call. 64 amortises the system
/// call over ~90 KB of 1400-byte datagrams; larger batches gave no gain in
/// the veth measurements of docs/ARCHITECTURE.md but hold more memory.
pub const BATCH: usize = 64;

/// Most datagrams in one vectored GSO send ([`PathSocket::send_datagrams`]):
/// the kernel's UDP_MAX_SEGMENTS is 64 on older kernels (128 on newer).
pub const MAX_GSO_PARTS: usize = 64;

/// 8-byte words of a control buffer: a UDP_GRO or UDP_SEGMENT message
/// (24 bytes), a source message (`crate::io::source::CMSG_SPACE`) and a
/// receive timestamp (a 16-byte header and a 16-byte `timespec`).
const CONTROL_WORDS: usize = (24 + source::CMSG_SPACE + 32) / 8;

/// Socket buffer size requested for each path socket: 4 MiB holds ~3000
/// full datagrams, enough to ride out a scheduling hiccup of a few ms at
/// several Gbit/s.
const SOCKET_BUFFER: usize = 4 << 20;

/// How long an idle receive worker sleeps before it checks for shutdown.
pub const RECV_TIMEOUT: Duration = Duration::from_millis(200);

/// A bound path socket.
#[derive(Debug)]
pub struct PathSocket {
    /// Shared by [`PathSocket::share`]d handles: one descriptor however
    /// many learnt paths send through a shared port.
    socket: Arc<UdpSocket>,
    local: SocketAddr,
    gso: GsoState,
    gro: bool,
    /// The socket's `SO_MARK` (0: none), kept so a rebind marks the new
    /// socket alike.
    mark: u32,
}

/// The mark (`SO_MARK`) of every path and shared-port socket bound
/// without one of its own; 0, the default, sets none. The daemon sets it
/// once at start when it installs policy routing (see
/// `crate::control::routing_plan`), so sockets made later (paths added at
/// run time, rebinds) stay out of the full tunnel's table too. A process
/// global rather than a parameter of every bind: it is one value per
/// daemon and the binds are spread over the control loop and the wiring.
static DEFAULT_MARK: AtomicU32 = AtomicU32::new(0);

/// Sets the mark of sockets bound from now on without one of their own.
pub fn set_default_mark(mark: u32) {
    DEFAULT_MARK.store(mark, Relaxed);
}

/// Whether UDP GSO is used on a socket. A refusal switches it off for a
/// while, not for good: the refusal may come from a passing state of the
/// device (a route over a device without checksum offload, a bonding
/// change), so it is tried again after 10 s, then after twice as long each
/// time it is refused again, up to 10 minutes.
#[derive(Debug)]
struct GsoState {
    /// Origin of the times below.
    epoch: Instant,
    /// When to try again, in ns since `epoch`; 0 while GSO is on.
    retry_at_ns: AtomicU64,
    /// Refusals since it last worked.
    refusals: AtomicU32,
}

/// First wait before GSO is tried again after a refusal.
const GSO_RETRY_FIRST: Duration = Duration::from_secs(10);
/// Longest wait before GSO is tried again.
const GSO_RETRY_MAX: Duration = Duration::from_secs(600);

impl GsoState {
    fn new() -> GsoState {
        GsoState {
            epoch: Instant::now(),
            retry_at_ns: AtomicU64::new(0),
            refusals: AtomicU32::new(0),
        }
    }

    fn ns(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// Whether to use GSO for a send at `now`.
    fn usable(&self, now: impl FnOnce() -> Instant) -> bool {
        match self.retry_at_ns.load(Relaxed) {
            0 => true,
            at => self.ns(now()) >= at,
        }
    }

    /// GSO was refused at `now`; returns how many times in a row.
    fn refused(&self, now: Instant) -> u32 {
        let n = self.refusals.fetch_add(1, Relaxed).saturating_add(1);
        let wait = GSO_RETRY_FIRST
            .saturating_mul(1u32 << (n - 1).min(16))
            .min(GSO_RETRY_MAX);
        self.retry_at_ns
            .store((self.ns(now) + wait.as_nanos() as u64).max(1), Relaxed);
        n
    }

    /// GSO worked; returns whether it had been off.
    fn worked(&self) -> bool {
        if self.retry_at_ns.load(Relaxed) == 0 {
            return false;
        }
        self.retry_at_ns.store(0, Relaxed);
        self.refusals.store(0, Relaxed);
        true
    }
}

impl PathSocket {
    /// Binds `local`, optionally to device `interface`, with the default
    /// mark (see [`set_default_mark`]).
    pub fn bind(local: SocketAddr, interface: Option<&str>) -> io::Result<PathSocket> {
        Self::bind_marked(local, interface, DEFAULT_MARK.load(Relaxed))
    }

    /// Binds `local`, optionally to device `interface`, with `SO_MARK`
    /// `mark` (0: none; a mark needs `CAP_NET_ADMIN`), which selects the
    /// uplink's routing table.
    pub fn bind_marked(
        local: SocketAddr,
        interface: Option<&str>,
        mark: u32,
    ) -> io::Result<PathSocket> {
        Self::bind_with(local, mark, |s| match interface {
            Some(dev) => s.bind_device(Some(dev.as_bytes())),
            None => Ok(()),
        })
    }

    /// The socket's mark (0: none).
    pub fn mark(&self) -> u32 {
        self.mark
    }

    /// The socket's descriptor, for options this type does not wrap.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.socket.as_raw_fd()
    }

    /// Binds the wildcard address `local` (`0.0.0.0:port` or `[::]:port`,
    /// IPv6-only) with SO_REUSEPORT: one of the shared port's sockets,
    /// one per receive worker and family (see `crate::plane::shared_port`). The
    /// kernel picks one of them for each datagram (by the steering program
    /// of `crate::io::lane`, else by a hash of the source), so a path's
    /// datagrams always reach the same worker, in order.
    /// Each datagram's destination address is reported (see
    /// `crate::io::source`), so replies can leave from it.
    pub fn bind_shared(local: SocketAddr) -> io::Result<PathSocket> {
        let s = Self::bind_with(local, DEFAULT_MARK.load(Relaxed), |s| {
            s.set_reuse_port(true)
        })?;
        source::enable(&s.socket, local.is_ipv6())?;
        Ok(s)
    }

    /// A UDP socket on `local` (IPv6-only for an IPv6 address) with large
    /// buffers and GRO when the kernel has it; `setup` sets what differs
    /// before the bind.
    fn bind_with(
        local: SocketAddr,
        mark: u32,
        setup: impl FnOnce(&Socket) -> io::Result<()>,
    ) -> io::Result<PathSocket> {
        let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
        if local.is_ipv6() {
            s.set_only_v6(true)?;
        }
        setup(&s)?;
        if mark != 0 {
            s.set_mark(mark)?;
        }
        // Ask for large buffers; as root, force past the sysctl limits.
        s.set_recv_buffer_size(SOCKET_BUFFER)?;
        s.set_send_buffer_size(SOCKET_BUFFER)?;
        force_buffer(&s, libc::SO_RCVBUFFORCE);
        force_buffer(&s, libc::SO_SNDBUFFORCE);
        s.bind(&local.into())?;
        let socket: Arc<UdpSocket> = Arc::new(s.into());
        let local = socket.local_addr()?;
        let gro = set_int_opt(&socket, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
        // When each datagram reached the socket (see `RecvMeta::arrived_ns`);
        // without it the delays are measured when the worker reads.
        let _ = set_int_opt(&socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        Ok(PathSocket {
            socket,
            local,
            gso: GsoState::new(),
            gro,
            mark,
        })
    }

    /// A second handle on the same socket, for sending: the learnt paths
    /// of client connections all send through their shared port's socket.
    /// No descriptor is duplicated (a concentrator with 1000 two-path
    /// clients holds its shared sockets, not 2000 more), and the handle is
    /// never read from (the receive workers read the original). Each
    /// handle keeps its own GSO state.
    pub fn share(&self) -> PathSocket {
        PathSocket {
            socket: Arc::clone(&self.socket),
            local: self.local,
            gso: GsoState::new(),
            gro: self.gro,
            mark: self.mark,
        }
    }

    /// Whether the kernel coalesces received datagrams (UDP_GRO).
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// Whether segmentation offload is used for sending now (it is off
    /// for a while after the kernel refused it; see [`GsoState`]).
    pub fn gso(&self) -> bool {
        self.gso.usable(Instant::now)
    }

    /// Sends `buf` as datagrams of `segment` bytes each (the last may be
    /// shorter) with one system call (UDP GSO), from local address `via`
    /// if given. If the kernel or device refuses GSO, it is switched off
    /// for this socket for a while (tried again later) and the datagrams
    /// go out one by one. Returns the number of datagrams sent.
    pub fn send_segments(
        &self,
        to: &SockAddr,
        via: Option<&Source>,
        buf: &[u8],
        segment: usize,
    ) -> io::Result<usize> {
        let segment = segment.max(1);
        let whole = [io::IoSlice::new(buf)];
        self.send_gso_or_batch(to, via, &whole, buf.chunks(segment), segment)
    }

    /// Sends `datagrams` (at most [`MAX_GSO_PARTS`]; all but the last of
    /// the same length, the last no longer) with one system call (UDP
    /// GSO): the kernel gathers them from where they lie, so the caller
    /// does not first copy them into one buffer (the transmit stage's
    /// sealed datagrams each sit in their own buffer). Without GSO, or if
    /// it is refused (switched off for a while, as in
    /// [`PathSocket::send_segments`]), one `sendmmsg`. Returns the number
    /// of datagrams sent.
    pub fn send_datagrams(
        &self,
        to: &SockAddr,
        via: Option<&Source>,
        datagrams: &[io::IoSlice<'_>],
    ) -> io::Result<usize> {
        let segment = datagrams.first().map_or(1, |d| d.len().max(1));
        debug_assert!(datagrams.len() <= MAX_GSO_PARTS);
        debug_assert!(datagrams
            .iter()
            .enumerate()
            .all(|(i, d)| d.len() == segment || (i + 1 == datagrams.len() && d.len() <= segment)));
        self.send_gso_or_batch(to, via, datagrams, datagrams.iter().map(|d| &**d), segment)
    }

    /// One GSO send of `iov` (datagrams of `segment` bytes) when GSO is
    /// usable and there is more than one datagram, else (or when the
    /// kernel refuses GSO) `datagrams` one by one in a `sendmmsg`.
    fn send_gso_or_batch<'a>(
        &self,
        to: &SockAddr,
        via: Option<&Source>,
        iov: &[io::IoSlice<'_>],
        datagrams: impl Iterator<Item = &'a [u8]> + Clone,
        segment: usize,
    ) -> io::Result<usize> {
        let count = datagrams.clone().count();
        if count > 1 && self.gso.usable(Instant::now) {
            match self.send_msg(to, via, iov, Some(segment)) {
                Ok(()) => {
                    if self.gso.worked() {
                        tracing::info!(local = %self.local, "UDP GSO works again");
                    }
                    return Ok(count);
                }
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP)
                    ) =>
                {
                    let n = self.gso.refused(Instant::now());
                    if n == 1 {
                        tracing::warn!(local = %self.local, error = %e, "UDP GSO refused; sending datagrams one by one, trying GSO again later");
                    } else {
                        tracing::debug!(local = %self.local, error = %e, refusals = n, "UDP GSO refused again");
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let (sent, failed) = self.send_batch(to, via, datagrams);
        if sent == 0 && failed > 0 {
            return Err(io::Error::other("every datagram failed"));
        }
        Ok(sent)
    }

    /// One `sendmsg`: the bytes of `iov` as one datagram, or as datagrams
    /// of `segment` bytes (GSO), from `via` if given.
    fn send_msg(
        &self,
        to: &SockAddr,
        via: Option<&Source>,
        iov: &[io::IoSlice<'_>],
        segment: Option<usize>,
    ) -> io::Result<()> {
        // Room for the UDP_SEGMENT message (a u16) and a source message,
        // 8-byte aligned.
        let mut control = [0u64; CONTROL_WORDS];
        // SAFETY: msghdr is plain data; all-zero is valid, fields set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = to.as_ptr().cast_mut().cast();
        msg.msg_namelen = to.len();
        // IoSlice is ABI-compatible with iovec on Unix (std documents it);
        // the kernel only reads through the pointer.
        msg.msg_iov = iov.as_ptr().cast_mut().cast();
        msg.msg_iovlen = iov.len();
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg_control points at `control`, large enough for one
        // cmsg of a u16 and one source message (CONTROL_WORDS); the
        // CMSG_* macros stay inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            let mut used = 0;
            if let Some(segment) = segment {
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment as u16);
                used = libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as usize;
            }
            if let Some(src) = via {
                let next = cmsg.cast::<u8>().add(used).cast::<libc::cmsghdr>();
                used += source::write(next, src);
            }
            msg.msg_controllen = used;
            if used == 0 {
                msg.msg_control = std::ptr::null_mut();
            }
        }
        loop {
            // SAFETY: msg points at live buffers for the duration of the call.
            let r = unsafe { libc::sendmsg(self.socket.as_raw_fd(), &raw const msg, 0) };
            if r >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if via.is_some() && source_refused(&e) {
                // The address the peer reached is ours no more: send as
                // routing picks rather than not at all (and do not take it
                // for a GSO refusal).
                return self.send_msg(to, None, iov, segment);
            }
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Sends one datagram.
    pub fn send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.socket.send_to(buf, to)
    }

    /// Sends one datagram from local address `via` (plain
    /// [`PathSocket::send_to`] without one).
    pub fn send_from(&self, buf: &[u8], to: SocketAddr, via: Option<&Source>) -> io::Result<usize> {
        if via.is_none() {
            return self.send_to(buf, to);
        }
        self.send_msg(&SockAddr::from(to), via, &[io::IoSlice::new(buf)], None)?;
        Ok(buf.len())
    }

    /// Waits until a datagram can be read or `timeout` passes. Returns
    /// whether the socket is readable.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        let mut fds = [libc::pollfd {
            fd: self.socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(r > 0)
    }

    /// Receives up to `bufs.len()` datagrams (at most [`BATCH`]) without
    /// blocking (`WouldBlock` when none is queued). `meta[i]` gets the
    /// length and source of `bufs[i]`.
    pub fn recv_batch(&self, bufs: &mut [Vec<u8>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        let n = bufs.len().min(meta.len()).min(BATCH);
        let mut iov: [MaybeUninit<libc::iovec>; BATCH] = [const { MaybeUninit::uninit() }; BATCH];
        let mut hdrs: [MaybeUninit<libc::mmsghdr>; BATCH] =
            [const { MaybeUninit::uninit() }; BATCH];
        // Left uninitialised: the kernel writes each address and control
        // message and says how much (msg_namelen, msg_controllen), and only
        // that is read. Zeroing them cost 12 KiB of memset per call, most of
        // it wasted when a call returns a datagram or two (a flood of small
        // forged ones: 8 % of the server's CPU).
        let mut addrs: [MaybeUninit<libc::sockaddr_storage>; BATCH] =
            [const { MaybeUninit::uninit() }; BATCH];
        // One cmsg buffer per message for the UDP_GRO segment size and the
        // destination address (shared ports).
        let mut controls: [MaybeUninit<[u64; CONTROL_WORDS]>; BATCH] =
            [const { MaybeUninit::uninit() }; BATCH];
        for i in 0..n {
            iov[i].write(libc::iovec {
                iov_base: bufs[i].as_mut_ptr().cast(),
                iov_len: bufs[i].len(),
            });
            // SAFETY: msghdr is plain data; all-zero is valid, fields set below.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = addrs[i].as_mut_ptr().cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msg.msg_iov = iov[i].as_mut_ptr();
            msg.msg_iovlen = 1;
            msg.msg_control = controls[i].as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of::<[u64; CONTROL_WORDS]>();
            hdrs[i].write(libc::mmsghdr {
                msg_hdr: msg,
                msg_len: 0,
            });
        }
        // SAFETY: hdrs[..n] are initialised and point at live buffers and
        // addresses that outlive the call; the kernel writes at most
        // iov_len bytes into each buffer.
        let got = unsafe {
            libc::recvmmsg(
                self.socket.as_raw_fd(),
                hdrs.as_mut_ptr().cast(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = got as usize;
        for i in 0..got {
            // SAFETY: the kernel filled the first `got` headers.
            let h = unsafe { hdrs[i].assume_init_ref() };
            let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            meta[i] = RecvMeta {
                len: h.msg_len as usize,
                from: socket_addr(addrs[i].as_ptr(), h.msg_hdr.msg_namelen),
                truncated,
                segment: gro_segment(&h.msg_hdr),
                to: source::parse(&h.msg_hdr),
                arrived_ns: arrival_stamp(&h.msg_hdr),
            };
        }
        Ok(got)
    }

    /// Sends `packets` (at most [`BATCH`]) to `to`, from local address
    /// `via` if given. Returns how many the kernel took and how many
    /// failed; a failing datagram is skipped, the rest of the batch still
    /// goes.
    pub fn send_batch<'a>(
        &self,
        to: &SockAddr,
        via: Option<&Source>,
        packets: impl Iterator<Item = &'a [u8]>,
    ) -> (usize, usize) {
        // One source message, read by the kernel for every datagram.
        let mut control = [0u64; CONTROL_WORDS];
        let mut control_len = 0;
        if let Some(src) = via {
            // SAFETY: `control` is aligned for cmsghdr and has room for one
            // source message (CONTROL_WORDS * 8 >= source::CMSG_SPACE).
            control_len = unsafe { source::write(control.as_mut_ptr().cast(), src) };
        }
        let mut iov: [MaybeUninit<libc::iovec>; BATCH] = [const { MaybeUninit::uninit() }; BATCH];
        let mut hdrs: [MaybeUninit<libc::mmsghdr>; BATCH] =
            [const { MaybeUninit::uninit() }; BATCH];
        let mut n = 0;
        for p in packets.take(BATCH) {
            iov[n].write(libc::iovec {
                iov_base: p.as_ptr().cast_mut().cast(),
                iov_len: p.len(),
            });
            // SAFETY: msghdr is plain data; all-zero is valid.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = to.as_ptr().cast_mut().cast();
            msg.msg_namelen = to.len();
            msg.msg_iov = iov[n].as_mut_ptr();
            msg.msg_iovlen = 1;
            if control_len > 0 {
                msg.msg_control = control.as_mut_ptr().cast();
                msg.msg_controllen = control_len;
            }
            hdrs[n].write(libc::mmsghdr {
                msg_hdr: msg,
                msg_len: 0,
            });
            n += 1;
        }
        let (mut sent, mut failed, mut at) = (0, 0, 0);
        while at < n {
            // SAFETY: hdrs[at..n] are initialised and point at buffers that
            // outlive the call; the kernel only reads them.
            let r = unsafe {
                libc::sendmmsg(
                    self.socket.as_raw_fd(),
                    hdrs.as_mut_ptr().add(at).cast(),
                    (n - at) as libc::c_uint,
                    0,
                )
            };
            if r > 0 {
                sent += r as usize;
                at += r as usize;
            } else if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            } else if r < 0 && control_len > 0 && source_refused(&io::Error::last_os_error()) {
                // As in send_msg: without the source rather than not at all.
                control_len = 0;
                for h in &mut hdrs[at..n] {
                    // SAFETY: hdrs[..n] were initialised above.
                    let h = unsafe { h.assume_init_mut() };
                    h.msg_hdr.msg_control = std::ptr::null_mut();
                    h.msg_hdr.msg_controllen = 0;
                }
                continue;
            } else {
                // The datagram at `at` failed (unreachable, too big, …):
                // skip it, keep the rest.
                failed += 1;
                at += 1;
            }
        }
        (sent, failed)
    }
}

/// Waits until any of `sockets` (at most [`crate::io::udp::MAX_POLL`]) can be
/// read, or `timeout` passes.
pub fn wait_any_readable<'a>(
    sockets: impl Iterator<Item = &'a PathSocket>,
    waker: Option<&Waker>,
    timeout: Duration,
) -> io::Result<()> {
    let mut fds = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; MAX_POLL + 1];
    let mut n = 0;
    if let Some(w) = waker {
        fds[0].fd = w.fd.as_raw_fd();
        n = 1;
    }
    for (fd, s) in fds[n..].iter_mut().zip(sockets) {
        fd.fd = s.socket.as_raw_fd();
        n += 1;
    }
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
    // SAFETY: `n` valid pollfds for the duration of the call.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    if let Some(w) = waker {
        if fds[0].revents & libc::POLLIN != 0 {
            w.drain();
        }
    }
    Ok(())
}

/// Wakes a thread blocked in [`wait_any_readable`]: an eventfd in its poll
/// set. The control loop wakes a connection's receive worker when the path
/// table changes, so a new path's socket is read at once rather than after
/// the worker's poll timeout (which would also inflate the new path's first
/// RTT sample).
#[derive(Debug)]
pub struct Waker {
    fd: std::os::fd::OwnedFd,
}

impl Waker {
    /// A new, unsignalled waker.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Waker { fd })
    }

    /// Signals the waker (a blocked [`wait_any_readable`] returns).
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64. A full counter (never in
        // practice) fails harmlessly: the waker is signalled already.
        let _ = unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast::<libc::c_void>(),
                8,
            )
        };
    }

    fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; non-blocking.
        let _ = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut v as *mut u64).cast::<libc::c_void>(),
                8,
            )
        };
    }
}

/// Whether a send may have failed because of its source address
/// (IP_PKTINFO / IPV6_PKTINFO naming an address this host no longer has:
/// IPv4 routing answers ENETUNREACH, IPv6 EINVAL or EADDRNOTAVAIL). A
/// genuinely unreachable peer costs one more failing call.
fn source_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EADDRNOTAVAIL | libc::ENETUNREACH)
    )
}

/// Most sockets one receive worker polls: a connection's paths.
pub const MAX_POLL: usize = mpt_proto::sched::MAX_PATHS;

/// Converts the socket address the kernel wrote at `s` (`len` bytes of
/// it) to a std one (IPv4/IPv6 only). Only those bytes are read.
fn socket_addr(s: *const libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    if len < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: the kernel wrote `len` bytes at `s`, which is aligned and
    // large enough for any address; each read below stays within them.
    unsafe {
        match libc::c_int::from((*s).ss_family) {
            libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
                let a = std::ptr::read(s.cast::<libc::sockaddr_in>());
                let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                Some(SocketAddr::new(ip.into(), u16::from_be(a.sin_port)))
            }
            libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
                let a = std::ptr::read(s.cast::<libc::sockaddr_in6>());
                let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
                Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                    ip,
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

fn force_buffer(s: &Socket, opt: libc::c_int) {
    let size = SOCKET_BUFFER as libc::c_int;
    // SAFETY: setsockopt with a valid fd and an int-sized option value.
    // Failure (not root) leaves the size set by the portable call above.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&raw const size).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// The UDP_GRO segment size the kernel attached to a received message.
fn gro_segment(msg: &libc::msghdr) -> Option<usize> {
    // SAFETY: msg was filled by recvmmsg; the CMSG_* macros walk the control
    // buffer within msg_controllen, and we read an int-sized payload only
    // from a cmsg of the type that carries one.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                return usize::try_from(v).ok().filter(|&s| s > 0);
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// The kernel's receive timestamp of a message (`SO_TIMESTAMPNS`: the
/// wall clock in ns since 1970), if it attached one.
fn arrival_stamp(msg: &libc::msghdr) -> Option<u64> {
    // SAFETY: msg was filled by recvmmsg; the CMSG_* macros walk the control
    // buffer within msg_controllen, and we read a timespec only from a cmsg
    // of the type that carries one.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                let secs = u64::try_from(ts.tv_sec).ok()?;
                let nanos = u64::try_from(ts.tv_nsec).ok()?;
                return secs.checked_mul(1_000_000_000)?.checked_add(nanos);
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// The wall clock now, in ns since 1970 (the clock of [`arrival_stamp`]).
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// How long before `wall_now_ns` a message arrived, by its kernel stamp:
/// zero without a stamp, for a stamp in the future, or for one implausibly
/// old (the wall clock was stepped between the stamp and now; a receive
/// worker never lags a second).
pub fn arrival_lag(arrived_ns: Option<u64>, wall_now_ns: u64) -> Duration {
    match arrived_ns.map(|a| wall_now_ns.checked_sub(a)) {
        Some(Some(lag)) if lag < 1_000_000_000 => Duration::from_nanos(lag),
        _ => Duration::ZERO,
    }
}

/// setsockopt of an int-sized option.
pub(crate) fn set_int_opt(
    s: &UdpSocket,
    level: libc::c_int,
    opt: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: setsockopt with a valid fd and an int-sized option value.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Length and source of one received message.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// Sender.
    pub from: Option<SocketAddr>,
    /// The datagram was larger than the buffer.
    pub truncated: bool,
    /// With UDP GRO: the message holds several datagrams of this size
    /// (the last may be shorter).
    pub segment: Option<usize>,
    /// Our address it was sent to (shared ports only; see
    /// `crate::io::source`).
    pub to: Option<Source>,
    /// When the kernel received it (wall clock, ns since 1970; the first
    /// datagram's time for a coalesced message). A receive worker busy with
    /// another socket reads a path's datagrams a millisecond or more after
    /// they came; measured from here, a path's one-way delay leaves that
    /// out (see [`arrival_lag`]).
    pub arrived_ns: Option<u64>,
}

impl RecvMeta {
    /// Like [`RecvMeta::datagrams`], but mutable (for opening in place).
    pub fn datagrams_mut<'a>(&self, buf: &'a mut [u8]) -> impl Iterator<Item = &'a mut [u8]> {
        let len = self.len.min(buf.len());
        let segment = self.segment.unwrap_or(len).max(1);
        let data = &mut buf[..len];
        let empty_datagram = data.is_empty();
        let mut parts = data.chunks_mut(segment);
        let mut gave_empty = false;
        std::iter::from_fn(move || {
            if empty_datagram {
                if gave_empty {
                    return None;
                }
                gave_empty = true;
                return Some(&mut [][..]);
            }
            parts.next()
        })
    }

    /// The datagrams in a received message: one, or several coalesced by
    /// GRO. `buf` is the message's buffer.
    pub fn datagrams<'a>(&self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
        let data = &buf[..self.len.min(buf.len())];
        // `chunks` yields nothing for an empty slice, but an empty datagram
        // is still a datagram: it must reach the checks and be counted.
        let empty = data.is_empty().then_some(data);
        data.chunks(self.segment.unwrap_or(self.len).max(1))
            .chain(empty)
    }
}

#[cfg(test)]
mod tests;
