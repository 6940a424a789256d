//! The Linux system calls the emulator needs, each wrapped once: packet
//! sockets (one frame per call, or batches with `recvmmsg`/`sendmmsg` into
//! caller-owned buffers), kernel receive timestamps, network-namespace entry, offload
//! switches and timer slack. All `unsafe` of the emulator lives here, but
//! for the `PACKET_MMAP` ring memory (module `ring`), which sets its socket
//! up through `PacketSocket::open_with`: the ring builds on this module,
//! never the other way round.
//!
//! Packet sockets are opened with `PACKET_VNET_HDR`: every frame read is
//! preceded by a `virtio_net_hdr` and every frame written carries one back.
//! This matters on veth pairs, whose senders leave the checksum for
//! "hardware" (`CHECKSUM_PARTIAL`): the header carries that state through the
//! emulator, so the far end accepts the frame. Without it every UDP/TCP frame
//! would arrive with a bad checksum. It also lets GSO aggregates pass intact.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Size of `struct virtio_net_hdr` (linux/virtio_net.h), prepended to every
/// frame on a `PACKET_VNET_HDR` socket.
pub const VNET_HDR_LEN: usize = 10;

/// Largest frame a packet socket can hand us (a 64 KiB GSO aggregate plus
/// the Ethernet header), plus the vnet header.
pub const MAX_FRAME: usize = VNET_HDR_LEN + 65_535 + 14;

pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub(crate) fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size we pass.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Is the effective user root?
pub fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Moves the calling thread into network namespace `name` (as created by
/// `ip netns add`, i.e. `/run/netns/NAME`). Sockets it opens afterwards live
/// there, whichever thread later uses them.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let path = format!("/run/netns/{name}");
    let file =
        std::fs::File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    // SAFETY: plain syscall on an fd we own; affects only this thread.
    cvt(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Sets this thread's timer slack. The default 50 us would be added to every
/// coarse sleep; the driver spins the last stretch anyway, but a smaller
/// slack lets it spin less.
pub fn set_timer_slack(slack: Duration) -> io::Result<()> {
    let ns = slack.as_nanos().max(1) as libc::c_ulong;
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) }).map(drop)
}

/// Puts the calling thread in the SCHED_FIFO real-time class at `priority`
/// (1-99). A timing thread of the default class waits behind every other
/// runnable thread when the machine is busy; measured on the 2-core CI VM
/// under a parallel build, that cost 20-40 ms stalls. Kernel RT throttling
/// (`sched_rt_runtime_us`, default 95 %) still leaves the rest of the CPU
/// to others should the thread spin without end.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 = the calling thread; param is a live struct.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }).map(drop)
}

pub fn ifindex(name: &str) -> io::Result<libc::c_int> {
    let idx = nix::net::if_::if_nametoindex(name)
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, format!("interface {name}: {e}")))?;
    libc::c_int::try_from(idx).map_err(|_| io::Error::other("ifindex out of range"))
}

/// `struct ethtool_value` (linux/ethtool.h).
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

// Legacy per-feature ethtool commands (linux/ethtool.h); the `ethtool`
// binary is often missing in minimal images and iproute2 cannot set them.
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_SGRO: u32 = 0x2c;

fn ethtool_set(ifname: &str, cmd: u32, on: bool) -> io::Result<()> {
    let name = CString::new(ifname).map_err(|_| io::Error::other("interface name has NUL"))?;
    if name.as_bytes_with_nul().len() > libc::IFNAMSIZ {
        return Err(io::Error::other(format!(
            "interface name too long: {ifname}"
        )));
    }
    // SAFETY: socket() has no memory arguments; the fd is owned at once.
    let sock = unsafe {
        OwnedFd::from_raw_fd(cvt(libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))?)
    };
    let mut value = EthtoolValue {
        cmd,
        data: u32::from(on),
    };
    // SAFETY: zeroed ifreq is valid; we copy a NUL-terminated name that fits
    // (checked above) and point ifru_data at `value`, which outlives the call.
    unsafe {
        let mut ifr: libc::ifreq = zeroed();
        for (dst, src) in ifr.ifr_name.iter_mut().zip(name.as_bytes_with_nul()) {
            *dst = *src as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
        cvt(libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr)).map(drop)
    }
}

/// Turns off TSO, GSO and GRO on `ifname` (in the caller's namespace), so
/// that every frame crossing the wire is one MTU-sized packet and is paced
/// on its own. Call it on the endpoints' interfaces too: a sender's TSO/GSO
/// aggregates reach the wire before any segmentation (the wire cuts them
/// itself, see `gso`, but the endpoints then spend less per packet).
pub fn disable_offloads(ifname: &str) -> io::Result<()> {
    set_offloads(ifname, false)
}

/// Turns TSO, GSO and GRO on or off on `ifname` (in the caller's namespace).
pub fn set_offloads(ifname: &str, on: bool) -> io::Result<()> {
    let state = if on { "on" } else { "off" };
    for (cmd, what) in [
        (ETHTOOL_STSO, "tso"),
        (ETHTOOL_SGSO, "gso"),
        (ETHTOOL_SGRO, "gro"),
    ] {
        ethtool_set(ifname, cmd, on)
            .map_err(|e| io::Error::new(e.kind(), format!("{ifname}: {what} {state}: {e}")))?;
    }
    Ok(())
}

/// One frame (or datagram) read, with when the kernel received it.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes read; larger than the buffer if the datagram was truncated
    /// (`MSG_TRUNC` reports the real length).
    pub len: usize,
    /// Kernel receive timestamp (CLOCK_REALTIME), if the socket gave one.
    pub kernel_time: Option<SystemTime>,
    /// A packet socket saw its own host sending (should not happen with
    /// `PACKET_IGNORE_OUTGOING`, checked anyway).
    pub outgoing: bool,
    /// Datagrams the socket has dropped so far for want of buffer space,
    /// if asked for ([`enable_drop_counter`]).
    pub socket_drops: Option<u32>,
}

/// `SO_RXQ_OVFL` (asm-generic/socket.h; the libc crate lacks it on gnu).
const SO_RXQ_OVFL: libc::c_int = 40;

/// Asks the kernel to attach the socket's drop counter to every datagram
/// received (`SO_RXQ_OVFL`): how many it discarded for want of buffer space
/// so far. A receiver that falls behind then still knows how many
/// datagrams arrived between two it did read.
pub fn enable_drop_counter(fd: RawFd) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, SO_RXQ_OVFL, &1 as &libc::c_int)
}

/// Asks the kernel to timestamp received packets (`SO_TIMESTAMPNS`).
pub fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPNS,
        &1 as &libc::c_int,
    )
}

/// Sets the receive buffer, beyond `rmem_max` when allowed (root).
pub fn set_rcvbuf(fd: RawFd, bytes: libc::c_int) -> io::Result<()> {
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &bytes)
        .or_else(|_| setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &bytes))
}

/// Non-blocking receive with timestamp; `Ok(None)` when nothing is queued.
pub fn recv_timestamped(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    // Room for one cmsg with a timespec, u64-aligned as cmsghdr needs.
    let mut control = [0u64; 8];
    // SAFETY: all pointers in msghdr point to live buffers of the stated
    // sizes for the duration of recvmsg; sockaddr_ll is plain old data.
    unsafe {
        let mut addr: libc::sockaddr_ll = zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg: libc::msghdr = zeroed();
        msg.msg_name = (&mut addr as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 8]>() as _;
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC);
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(err),
            };
        }
        let len = n as usize;
        let (kernel_time, socket_drops) = cmsg_info(&msg);
        let outgoing =
            addr.sll_family == libc::AF_PACKET as u16 && addr.sll_pkttype == libc::PACKET_OUTGOING;
        Ok(Some(Received {
            len,
            kernel_time,
            outgoing,
            socket_drops,
        }))
    }
}

/// Reads the `SCM_TIMESTAMPNS` and `SO_RXQ_OVFL` control messages of a
/// received `msg`.
///
/// # Safety
/// `msg` must be a header just filled by `recvmsg`/`recvmmsg`, whose control
/// buffer is still alive.
unsafe fn cmsg_info(msg: &libc::msghdr) -> (Option<SystemTime>, Option<u32>) {
    let (mut kernel_time, mut drops) = (None, None);
    // SAFETY: the caller guarantees a filled header with a live control
    // buffer; CMSG_* walk only inside msg_controllen.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                kernel_time =
                    UNIX_EPOCH.checked_add(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == SO_RXQ_OVFL {
                drops = Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(cmsg).cast::<u32>(),
                ));
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    (kernel_time, drops)
}

/// Room for a timespec and a drop counter control message (16 + 16 and
/// 16 + 4 bytes, each padded to 8), u64-aligned as cmsghdr needs.
type Control = [u64; 8];

/// Caller-owned buffers for one `recvmmsg` call on a [`PacketSocket`]:
/// `slots` frames of up to `slot` bytes each (vnet header included), with
/// their control buffers and addresses. Allocated once per direction; the
/// kernel's pointers into it are rebuilt on every call, so moving the batch
/// is safe.
pub struct RecvBatch {
    data: Vec<u8>,
    slot: usize,
    control: Vec<Control>,
    addrs: Vec<libc::sockaddr_ll>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    got: Vec<Received>,
}

impl RecvBatch {
    pub fn new(slots: usize, slot: usize) -> RecvBatch {
        let slots = slots.max(1);
        RecvBatch {
            data: vec![0; slots * slot],
            slot,
            control: vec![[0; 8]; slots],
            // SAFETY: sockaddr_ll, iovec and mmsghdr are plain old data for
            // which all-zero is a valid value (null pointers, zero lengths).
            addrs: vec![unsafe { zeroed() }; slots],
            iovs: vec![unsafe { zeroed() }; slots],
            hdrs: vec![unsafe { zeroed() }; slots],
            got: Vec::with_capacity(slots),
        }
    }

    /// Frames the last call read, in arrival order.
    pub fn received(&self) -> &[Received] {
        &self.got
    }

    /// Bytes of frame `i` of the last call (vnet header first), cut to the
    /// slot if it was truncated (`received()[i].len` is the real length).
    pub fn frame(&self, i: usize) -> &[u8] {
        let len = self.got.get(i).map_or(0, |r| r.len.min(self.slot));
        &self.data[i * self.slot..i * self.slot + len]
    }
}

/// Scratch for one `sendmmsg` call, kept by the caller so that sending
/// allocates nothing in steady state.
#[derive(Default)]
pub struct SendBatch {
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

/// Non-blocking read of up to `batch`'s capacity of datagrams from `fd` in
/// one `recvmmsg`, with kernel timestamps if enabled; returns how many (0
/// when nothing is queued). They are in [`RecvBatch::frame`] and
/// [`RecvBatch::received`]. (`outgoing` is meaningful on packet sockets
/// only; it is false for others.)
pub fn recv_batch(fd: RawFd, batch: &mut RecvBatch) -> io::Result<usize> {
    batch.got.clear();
    let n = batch.hdrs.len();
    let ctrl_len = size_of::<Control>();
    for i in 0..n {
        batch.iovs[i] = libc::iovec {
            iov_base: batch.data[i * batch.slot..].as_mut_ptr().cast(),
            iov_len: batch.slot,
        };
        let h = &mut batch.hdrs[i];
        h.msg_len = 0;
        h.msg_hdr.msg_name = (&mut batch.addrs[i] as *mut libc::sockaddr_ll).cast();
        h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        h.msg_hdr.msg_iov = &mut batch.iovs[i];
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = batch.control[i].as_mut_ptr().cast();
        h.msg_hdr.msg_controllen = ctrl_len as _;
        h.msg_hdr.msg_flags = 0;
    }
    // SAFETY: every header points to live buffers of `batch` (data
    // slots, addresses, control) of the sizes stated, for the duration
    // of the call; `n` is the length of `hdrs`.
    let got = unsafe {
        libc::recvmmsg(
            fd,
            batch.hdrs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        let err = io::Error::last_os_error();
        return match err.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(err),
        };
    }
    let got = got as usize;
    for i in 0..got {
        let h = &batch.hdrs[i];
        // SAFETY: header `i` was filled by this recvmmsg and its control
        // buffer is `batch.control[i]`, alive.
        let (kernel_time, socket_drops) = unsafe { cmsg_info(&h.msg_hdr) };
        let addr = &batch.addrs[i];
        batch.got.push(Received {
            len: h.msg_len as usize,
            kernel_time,
            outgoing: addr.sll_family == libc::AF_PACKET as u16
                && addr.sll_pkttype == libc::PACKET_OUTGOING,
            socket_drops,
        });
    }
    Ok(got)
}

/// Writes datagrams on the connected or bound socket `fd` with one
/// `sendmmsg` (`flags`, e.g. `MSG_DONTWAIT`), from the first on. `Ok(k)`
/// with k >= 1: the first k were sent; `Ok(0)`: the first was refused
/// because the socket buffer is full (`EAGAIN`/`ENOBUFS`); `Err`: the first
/// failed otherwise. The caller resumes after what was sent or refused.
pub fn send_batch<B: AsRef<[u8]>>(
    fd: RawFd,
    frames: &[B],
    scratch: &mut SendBatch,
    flags: libc::c_int,
) -> io::Result<usize> {
    if frames.is_empty() {
        return Ok(0);
    }
    scratch.iovs.clear();
    scratch.iovs.extend(frames.iter().map(|f| {
        let f = f.as_ref();
        libc::iovec {
            iov_base: f.as_ptr().cast_mut().cast(),
            iov_len: f.len(),
        }
    }));
    scratch.hdrs.clear();
    for iov in scratch.iovs.iter_mut() {
        // SAFETY: all-zero mmsghdr is valid (no name, no control).
        let mut h: libc::mmsghdr = unsafe { zeroed() };
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
        scratch.hdrs.push(h);
    }
    // SAFETY: each header points to one iovec in `scratch.iovs` (not
    // reallocated after the pointers were taken), which points to a
    // live frame of `frames`; the kernel only reads the frames.
    let n = unsafe {
        libc::sendmmsg(
            fd,
            scratch.hdrs.as_mut_ptr(),
            scratch.hdrs.len() as libc::c_uint,
            flags,
        )
    };
    if n < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(0),
            _ => Err(err),
        };
    }
    Ok(n as usize)
}

/// Waits until `fd` is readable or `timeout` passes (ns resolution, unlike
/// poll's ms). Returns whether it is readable.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one pollfd, a timespec on the stack, no signal mask.
    let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if n < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(err)
        };
    }
    Ok(n > 0 && pfd.revents & libc::POLLIN != 0)
}

/// Which end of the wire a packet socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reads every frame arriving on the interface (all protocols, any
    /// destination MAC), never the ones the host sends.
    Ingress,
    /// Writes frames out of the interface; receives nothing.
    Egress,
}

/// An `AF_PACKET`/`SOCK_RAW` socket bound to one interface, with vnet headers.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifname: String,
}

/// Socket buffer asked for (with the FORCE variants, as root): about 100 ms
/// at 1 Gbit/s, so a driver thread that is briefly descheduled loses nothing.
const SOCKET_BUFFER: libc::c_int = 16 << 20;

impl PacketSocket {
    /// Opens a packet socket on `ifname` for `role`, read and written with
    /// `recvmmsg`/`sendmmsg` (no ring).
    pub fn open(ifname: &str, role: Role) -> io::Result<PacketSocket> {
        Self::open_with(ifname, role, |_| Ok(())).map(|(s, ())| s)
    }

    /// Opens the socket with protocol 0 (no frames yet), sets its options,
    /// runs `setup` (ring options, which must follow `PACKET_VNET_HDR`),
    /// then binds it to `ifname` with the role's protocol: an ingress
    /// socket receives nothing before its ring is in place.
    pub(crate) fn open_with<R>(
        ifname: &str,
        role: Role,
        setup: impl FnOnce(RawFd) -> io::Result<R>,
    ) -> io::Result<(PacketSocket, R)> {
        let ctx =
            |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{ifname}: {what}: {e}"));
        let index = ifindex(ifname)?;
        let proto = match role {
            Role::Ingress => (libc::ETH_P_ALL as u16).to_be(),
            // Protocol 0: the socket is bound for sending and gets no frames.
            Role::Egress => 0,
        };
        // SAFETY: socket() has no memory arguments; the fd is owned at once.
        let fd = unsafe {
            OwnedFd::from_raw_fd(
                cvt(libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                    0,
                ))
                .map_err(|e| ctx("packet socket (needs root/CAP_NET_RAW)", e))?,
            )
        };
        let raw = fd.as_raw_fd();
        setsockopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            &1 as &libc::c_int,
        )
        .map_err(|e| ctx("PACKET_VNET_HDR", e))?;
        match role {
            Role::Ingress => {
                setsockopt(
                    raw,
                    libc::SOL_PACKET,
                    libc::PACKET_IGNORE_OUTGOING,
                    &1 as &libc::c_int,
                )
                .map_err(|e| ctx("PACKET_IGNORE_OUTGOING", e))?;
                set_rcvbuf(raw, SOCKET_BUFFER).map_err(|e| ctx("SO_RCVBUF", e))?;
                enable_rx_timestamps(raw).map_err(|e| ctx("SO_TIMESTAMPNS", e))?;
            }
            Role::Egress => {
                setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &SOCKET_BUFFER)
                    .or_else(|_| setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &SOCKET_BUFFER))
                    .map_err(|e| ctx("SO_SNDBUF", e))?;
            }
        }
        let extra = setup(raw).map_err(|e| ctx("ring", e))?;
        // SAFETY: zeroed sockaddr_ll is valid; we fill the fields bind needs.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index;
        // SAFETY: sll is a live sockaddr_ll of the size passed.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map_err(|e| ctx("bind", e))?;
        if role == Role::Ingress {
            // Frames for the far end carry its MAC; on a real NIC only
            // promiscuous mode delivers them. Dropped with the socket.
            // SAFETY: zeroed packet_mreq is valid.
            let mut mreq: libc::packet_mreq = unsafe { zeroed() };
            mreq.mr_ifindex = index;
            mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
            setsockopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| ctx("promiscuous mode", e))?;
        }
        Ok((
            PacketSocket {
                fd,
                ifname: ifname.to_string(),
            },
            extra,
        ))
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Non-blocking read of one vnet header + frame into `buf`.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        recv_timestamped(self.fd.as_raw_fd(), buf)
    }

    /// Writes one vnet header + frame. `Ok(false)` if the socket buffer is
    /// full (the frame is dropped; we never block the timeline).
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: frame is a live slice of the length passed.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(false),
                _ => Err(err),
            };
        }
        Ok(true)
    }

    /// Non-blocking read of up to `batch`'s capacity of frames in one
    /// `recvmmsg`; see [`recv_batch`].
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        recv_batch(self.fd.as_raw_fd(), batch)
    }

    /// Writes frames (vnet header + frame each) with one non-blocking
    /// `sendmmsg`; see [`send_batch`]. A full socket buffer refuses a frame
    /// (`Ok(0)`) rather than block the timeline.
    pub fn send_batch<B: AsRef<[u8]>>(
        &self,
        frames: &[B],
        scratch: &mut SendBatch,
    ) -> io::Result<usize> {
        send_batch(self.fd.as_raw_fd(), frames, scratch, libc::MSG_DONTWAIT)
    }

    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        wait_readable(self.fd.as_raw_fd(), timeout)
    }
}
