//! The initiation lane of a shared port: Noise initiations get a socket
//! of their own, so a flood of them cannot crowd out the datagrams of
//! established sessions.
//!
//! Why: a shared port's receive workers each read one SO_REUSEPORT socket,
//! and the kernel spread datagrams over them by a hash of the source. A
//! flood of forged initiations from spoofed sources therefore landed in
//! every worker's socket, filled its receive queue (the kernel dropped
//! clients' data behind it) and took the worker's time for a mac1 check
//! each. Measured before this lane: two clients under a flood of about
//! 200 000 forged initiations/s lost 29 % (median of 3 runs) of their
//! throughput against the same flood aimed at a closed port.
//!
//! How: one more socket joins each shared port's SO_REUSEPORT group, after
//! the workers' sockets, and a classic BPF program attached to the group
//! picks the socket for every datagram in the kernel:
//!
//! * message type `NoiseInitiation` (the low nibble of byte 0) goes to the
//!   lane socket (index `workers`);
//! * everything else goes to worker `(conn_id ^ path_id) % workers`: a
//!   session's datagrams of one path always reach the same worker (in
//!   order, as the source hash did), and the paths of one client spread
//!   over the workers;
//! * a datagram too short to read (the program stops and returns 0) goes
//!   to worker 0, which refuses it as malformed.
//!
//! The lane socket has a small receive queue and is read by one thread at
//! the lowest CPU priority (`dataplane::rx::lane`): under a flood the
//! kernel drops what that queue cannot hold, at about the cost of a
//! datagram to a closed port, and the established sessions' workers never
//! see the flood. The drops are the lane's, and are counted
//! ([`kernel_drops`]). If the kernel refuses the program, the lane socket
//! is closed again and the port works as before (every worker checks the
//! initiations it reads).

use std::io;

use crate::io::udp::PathSocket;

/// Receive buffer of a lane socket: about a thousand initiations (a
/// datagram of 168 bytes takes about 1 KiB of buffer in the kernel).
const LANE_BUFFER: libc::c_int = 1 << 20;

/// The Noise initiation's type code (`MsgType::NoiseInitiation`).
const INITIATION_CODE: u32 = 11;

// Classic BPF opcodes (linux/bpf_common.h, linux/filter.h).
const BPF_LD: u16 = 0x00;
const BPF_ALU: u16 = 0x04;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_MISC: u16 = 0x07;
const BPF_W: u16 = 0x00;
const BPF_H: u16 = 0x08;
const BPF_B: u16 = 0x10;
const BPF_ABS: u16 = 0x20;
const BPF_K: u16 = 0x00;
const BPF_X: u16 = 0x08;
const BPF_A: u16 = 0x10;
const BPF_AND: u16 = 0x50;
const BPF_XOR: u16 = 0xa0;
const BPF_MOD: u16 = 0x90;
const BPF_JEQ: u16 = 0x10;
const BPF_TAX: u16 = 0x00;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The steering program for a group of `workers` worker sockets followed
/// by the lane socket. Offsets are into the UDP payload (the kernel pulls
/// the UDP header before it runs the program); multi-byte loads are
/// big-endian, as the header's fields are.
pub fn steering_program(workers: u32) -> Vec<libc::sock_filter> {
    let workers = workers.max(1);
    vec![
        // A = byte 0 & 0x0f: the message type.
        op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 0),
        op(BPF_ALU | BPF_AND | BPF_K, 0, 0, 0x0f),
        // An initiation: to the lane (the last instruction).
        op(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, INITIATION_CODE),
        // X = path_id (bytes 2-3); A = conn_id (bytes 4-7).
        op(BPF_LD | BPF_H | BPF_ABS, 0, 0, 2),
        op(BPF_MISC | BPF_TAX, 0, 0, 0),
        op(BPF_LD | BPF_W | BPF_ABS, 0, 0, 4),
        op(BPF_ALU | BPF_XOR | BPF_X, 0, 0, 0),
        op(BPF_ALU | BPF_MOD | BPF_K, 0, 0, workers),
        op(BPF_RET | BPF_A, 0, 0, 0),
        op(BPF_RET | BPF_K, 0, 0, workers),
    ]
}

/// Makes `lane` (bound last in its shared port's SO_REUSEPORT group, after
/// `workers` worker sockets) the lane: shrinks its receive queue and
/// attaches the steering program to the group.
pub fn attach(lane: &PathSocket, workers: u32) -> io::Result<()> {
    let fd = lane.raw_fd();
    set_opt(fd, libc::SO_RCVBUFFORCE, &LANE_BUFFER)
        .or_else(|_| set_opt(fd, libc::SO_RCVBUF, &LANE_BUFFER))?;
    let mut program = steering_program(workers);
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    set_opt(fd, libc::SO_ATTACH_REUSEPORT_CBPF, &fprog)
}

/// Datagrams the kernel dropped at `socket` because its receive queue
/// was full (`SK_MEMINFO_DROPS`); `None` if the kernel does not say.
pub fn kernel_drops(socket: &PathSocket) -> Option<u64> {
    // SK_MEMINFO_VARS is 9 today; room for more fields.
    let mut info = [0u32; 16];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: getsockopt with a valid fd, writing at most `len` bytes into
    // `info`, which is `len` bytes long.
    let r = unsafe {
        libc::getsockopt(
            socket.raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let drops = libc::SK_MEMINFO_DROPS as usize;
    (r == 0 && (len as usize) >= (drops + 1) * 4).then(|| u64::from(info[drops]))
}

fn set_opt<T>(fd: std::os::fd::RawFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: setsockopt with a valid fd and a value of the option's size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests;
