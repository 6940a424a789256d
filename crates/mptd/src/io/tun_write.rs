//! Writing received packets to tun: consecutive TCP segments (and UDP
//! datagrams of one size) of a flow are coalesced into one GSO
//! super-packet per write, as the kernel's GRO would have done on a NIC.
//!
//! Why our own and not tun-rs's `send_multiple`: that one takes its
//! packets in a batch of separate buffers (so each packet was first copied
//! into a staging buffer), then copies every TCP packet once more into a
//! fresh allocation to look at it, and verifies each segment's checksum in
//! software. A profile of one encrypted TCP stream put those three at
//! about a fifth of the receive thread. Here each packet is copied once,
//! straight from where the resequencer has it into the super-packet being
//! built, nothing is allocated, and no checksum is computed: the tunnel
//! already authenticated the datagram (AEAD) or checked it (the outer UDP
//! checksum), so the packet is handed over with `NEEDS_CSUM` and the
//! pseudo-header sum, as a NIC hands over what it verified itself.
//!
//! What may join a super-packet (the rules of Linux's `tcp_gro_receive`):
//! same addresses and ports, IPv4 without options and not fragmented (or
//! IPv6 without extension headers), the same TOS/traffic class, TTL and
//! DF; for TCP the same header length, options, ACK number and no flag
//! but ACK (PSH ends the super-packet), the next sequence number and a
//! payload no longer than the first segment's; for UDP (only when the tun
//! device takes UDP GSO) a payload no longer than the first datagram's. A
//! shorter segment ends the super-packet. Anything else is written alone,
//! after the super-packet of its own flow, so a flow's order is kept.
//!
//! A few super-packets are built at once ([`OPEN_FLOWS`]); a new flow
//! when all are taken writes the oldest out. [`Coalescer::flush`] writes
//! all of them (the receive worker calls it at the end of a batch).

use mpt_proto::checksum::{fold, sum};
use std::io;

/// Length of the virtio-net header in front of every packet written to a
/// tun device opened with `IFF_VNET_HDR`.
pub const VNET_HDR_LEN: usize = 10;

/// Super-packets built at once (distinct flows).
pub const OPEN_FLOWS: usize = 8;

/// Largest IP packet (IPv4 total length, or IPv6 header + payload length).
const MAX_IP_PACKET: usize = 65_535;

const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV4: u8 = 1;
const VIRTIO_NET_HDR_GSO_TCPV6: u8 = 4;
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;

/// What a packet is, as far as coalescing goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    v6: bool,
    proto: u8,
    /// IP header length (20 or 40).
    ip_len: usize,
    /// TCP or UDP header length.
    l4_len: usize,
    /// TCP sequence number (0 for UDP).
    seq: u32,
    /// TCP: PSH set (with ACK).
    psh: bool,
    /// TCP: a flag other than ACK/PSH, or no payload; UDP: no payload.
    /// Written alone, but still in its flow's order.
    alone: bool,
    payload: usize,
}

/// Offsets of the addresses in the IP header: (source, length).
fn addrs(v6: bool) -> (usize, usize) {
    if v6 {
        (8, 16)
    } else {
        (12, 4)
    }
}

/// Parses the headers that decide coalescing. `None`: not TCP or UDP over
/// plain IPv4/IPv6 (written alone, no flow to keep in order with).
fn parse(p: &[u8]) -> Option<Segment> {
    let v = p.first()? >> 4;
    let (v6, ip_len, proto) = match v {
        4 => {
            if p.len() < 20 || p[0] & 0x0f != 5 {
                return None;
            }
            let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
            // Fragments (MF set or an offset) are not coalesced.
            let frag = u16::from_be_bytes([p[6], p[7]]) & 0x3fff;
            if total != p.len() || frag != 0 {
                return None;
            }
            (false, 20, p[9])
        }
        6 => {
            if p.len() < 40 {
                return None;
            }
            let payload = usize::from(u16::from_be_bytes([p[4], p[5]]));
            if payload + 40 != p.len() {
                return None;
            }
            (true, 40, p[6])
        }
        _ => return None,
    };
    let l4 = &p[ip_len..];
    match proto {
        PROTO_TCP => {
            if l4.len() < 20 {
                return None;
            }
            let l4_len = usize::from(l4[12] >> 4) * 4;
            if !(20..=60).contains(&l4_len) || l4.len() < l4_len {
                return None;
            }
            let flags = l4[13];
            let payload = l4.len() - l4_len;
            let psh = flags == TCP_ACK | TCP_PSH;
            Some(Segment {
                v6,
                proto,
                ip_len,
                l4_len,
                seq: u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]),
                psh,
                alone: !(flags == TCP_ACK || psh) || payload == 0,
                payload,
            })
        }
        PROTO_UDP => {
            if l4.len() < 8 || usize::from(u16::from_be_bytes([l4[4], l4[5]])) != l4.len() {
                return None;
            }
            Some(Segment {
                v6,
                proto,
                ip_len,
                l4_len: 8,
                seq: 0,
                psh: false,
                alone: l4.len() == 8,
                payload: l4.len() - 8,
            })
        }
        _ => None,
    }
}

/// Whether `a` and `b` (both parsed with the same version and protocol)
/// belong to the same flow: addresses and ports.
fn same_flow(a: &[u8], b: &[u8], s: &Segment) -> bool {
    let (src, len) = addrs(s.v6);
    a[src..src + 2 * len] == b[src..src + 2 * len]
        && a[s.ip_len..s.ip_len + 4] == b[s.ip_len..s.ip_len + 4]
}

/// A super-packet being built: the virtio header's room, then the first
/// packet's headers, then the payloads.
#[derive(Debug)]
struct Aggregate {
    buf: Vec<u8>,
    seg: Segment,
    /// Payload length of every segment but maybe the last.
    gso_size: usize,
    segments: usize,
    /// TCP: the sequence number the next segment must have.
    next_seq: u32,
    /// No segment may join any more (PSH, or a short one).
    closed: bool,
    /// Order of opening, to write the oldest out first.
    opened: u64,
}

impl Aggregate {
    fn new() -> Aggregate {
        Aggregate {
            buf: Vec::with_capacity(VNET_HDR_LEN + MAX_IP_PACKET),
            seg: Segment {
                v6: false,
                proto: 0,
                ip_len: 0,
                l4_len: 0,
                seq: 0,
                psh: false,
                alone: true,
                payload: 0,
            },
            gso_size: 0,
            segments: 0,
            next_seq: 0,
            closed: false,
            opened: 0,
        }
    }

    fn is_open(&self) -> bool {
        self.segments > 0
    }

    /// The first packet (without the virtio header room).
    fn head(&self) -> &[u8] {
        &self.buf[VNET_HDR_LEN..]
    }

    fn start(&mut self, p: &[u8], s: Segment, opened: u64) {
        self.buf.clear();
        self.buf.extend_from_slice(&[0; VNET_HDR_LEN]);
        self.buf.extend_from_slice(p);
        self.seg = s;
        self.gso_size = s.payload;
        self.segments = 1;
        self.next_seq = s.seq.wrapping_add(s.payload as u32);
        self.closed = s.psh;
        self.opened = opened;
    }

    /// Whether `p` (of the same flow) may be appended.
    fn takes(&self, p: &[u8], s: &Segment) -> bool {
        let h = self.head();
        let hs = &self.seg;
        if self.closed
            || s.alone
            || s.l4_len != hs.l4_len
            || s.payload > self.gso_size
            || self.buf.len() - VNET_HDR_LEN + s.payload > MAX_IP_PACKET
        {
            return false;
        }
        // IP fields that must agree.
        let ip_ok = if s.v6 {
            // Version, traffic class, flow label; next header; hop limit.
            h[0..4] == p[0..4] && h[6..8] == p[6..8]
        } else {
            // TOS; DF; TTL and protocol.
            h[1] == p[1] && (h[6] & 0x40) == (p[6] & 0x40) && h[8..10] == p[8..10]
        };
        if !ip_ok {
            return false;
        }
        if s.proto == PROTO_TCP {
            let (ht, pt) = (&h[hs.ip_len..], &p[s.ip_len..]);
            // The next sequence number, the same ACK and options.
            s.seq == self.next_seq
                && ht[8..12] == pt[8..12]
                && ht[20..hs.l4_len] == pt[20..s.l4_len]
        } else {
            true
        }
    }

    fn append(&mut self, p: &[u8], s: &Segment) {
        self.buf.extend_from_slice(&p[s.ip_len + s.l4_len..]);
        self.segments += 1;
        self.next_seq = self.next_seq.wrapping_add(s.payload as u32);
        if s.psh {
            // The super-packet carries the last segment's PSH.
            let at = VNET_HDR_LEN + self.seg.ip_len + 13;
            self.buf[at] |= TCP_PSH;
            self.closed = true;
        }
        if s.payload < self.gso_size {
            self.closed = true;
        }
    }

    /// Fills in the headers of a super-packet of several segments (a
    /// single packet goes out as it came, with a zero virtio header).
    fn finish(&mut self) {
        if self.segments < 2 {
            self.buf[..VNET_HDR_LEN].fill(0);
            return;
        }
        let s = self.seg;
        let total = self.buf.len() - VNET_HDR_LEN;
        let l4_total = total - s.ip_len;
        let p = &mut self.buf[VNET_HDR_LEN..];
        if s.v6 {
            p[4..6].copy_from_slice(&(l4_total as u16).to_be_bytes());
        } else {
            p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            p[10..12].fill(0);
            let c = !fold(sum(&p[..20], 0));
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let (src, len) = addrs(s.v6);
        let mut pseudo = sum(&p[src..src + 2 * len], 0);
        pseudo += u64::from(s.proto) + l4_total as u64;
        let (gso_type, csum_offset) = match (s.proto, s.v6) {
            (PROTO_TCP, false) => (VIRTIO_NET_HDR_GSO_TCPV4, 16),
            (PROTO_TCP, true) => (VIRTIO_NET_HDR_GSO_TCPV6, 16),
            _ => {
                // The UDP length covers every datagram; each segment's is
                // set when the kernel splits it.
                p[s.ip_len + 4..s.ip_len + 6].copy_from_slice(&(l4_total as u16).to_be_bytes());
                (VIRTIO_NET_HDR_GSO_UDP_L4, 6)
            }
        };
        // The checksum field holds the pseudo-header sum (not inverted):
        // the kernel adds the header and payload to it (CHECKSUM_PARTIAL).
        let at = s.ip_len + csum_offset;
        p[at..at + 2].copy_from_slice(&fold(pseudo).to_be_bytes());
        let hdr_len = (s.ip_len + s.l4_len) as u16;
        let h = &mut self.buf[..VNET_HDR_LEN];
        h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        h[1] = gso_type;
        h[2..4].copy_from_slice(&hdr_len.to_ne_bytes());
        h[4..6].copy_from_slice(&(self.gso_size as u16).to_ne_bytes());
        h[6..8].copy_from_slice(&(s.ip_len as u16).to_ne_bytes());
        h[8..10].copy_from_slice(&(csum_offset as u16).to_ne_bytes());
    }
}

/// Counters of what a [`Coalescer`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Packets taken in.
    pub packets: u64,
    /// Writes made (super-packets and packets written alone).
    pub writes: u64,
}

/// Builds the tun writes of a receive worker (see the module docs). The
/// sink makes one write of a frame (virtio header included when `vnet`).
#[derive(Debug)]
pub struct Coalescer {
    /// The device takes a virtio-net header in front of each packet (else
    /// packets are written one by one, as they are).
    vnet: bool,
    /// The device takes UDP GSO super-packets.
    udp_gso: bool,
    aggs: Vec<Aggregate>,
    /// A packet written alone, behind a zero virtio header.
    single: Vec<u8>,
    opened: u64,
    stats: WriteStats,
}

impl Coalescer {
    /// A coalescer for a device with (`vnet`) or without a virtio-net
    /// header, taking UDP GSO (`udp_gso`) or not. Allocates its buffers
    /// (about 0.5 MB) here, never per packet.
    pub fn new(vnet: bool, udp_gso: bool) -> Coalescer {
        Coalescer {
            vnet,
            udp_gso,
            aggs: if vnet {
                (0..OPEN_FLOWS).map(|_| Aggregate::new()).collect()
            } else {
                Vec::new()
            },
            single: Vec::with_capacity(VNET_HDR_LEN + MAX_IP_PACKET),
            opened: 0,
            stats: WriteStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> WriteStats {
        self.stats
    }

    /// Takes one IP packet; writes what it completes through `sink`.
    pub fn push(
        &mut self,
        p: &[u8],
        sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        self.stats.packets += 1;
        if !self.vnet {
            self.stats.writes += 1;
            return sink(p);
        }
        let Some(s) = parse(p).filter(|s| s.proto == PROTO_TCP || self.udp_gso) else {
            return self.write_alone(p, sink);
        };
        let own = self.aggs.iter().position(|a| {
            a.is_open() && a.seg.v6 == s.v6 && a.seg.proto == s.proto && same_flow(a.head(), p, &s)
        });
        if let Some(i) = own {
            if self.aggs[i].takes(p, &s) {
                self.aggs[i].append(p, &s);
                return Ok(());
            }
            // Its flow's super-packet goes first, then this packet starts
            // the next one (or goes alone).
            self.write_out(i, sink)?;
            if s.alone {
                return self.write_alone(p, sink);
            }
            self.opened += 1;
            self.aggs[i].start(p, s, self.opened);
            return Ok(());
        }
        if s.alone {
            return self.write_alone(p, sink);
        }
        let i = match self.aggs.iter().position(|a| !a.is_open()) {
            Some(i) => i,
            None => {
                let oldest = (0..self.aggs.len())
                    .min_by_key(|&i| self.aggs[i].opened)
                    .unwrap_or(0);
                self.write_out(oldest, sink)?;
                oldest
            }
        };
        self.opened += 1;
        self.aggs[i].start(p, s, self.opened);
        Ok(())
    }

    /// Writes every super-packet being built.
    pub fn flush(&mut self, sink: &mut impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let mut result = Ok(());
        for i in 0..self.aggs.len() {
            if self.aggs[i].is_open() {
                if let Err(e) = self.write_out(i, sink) {
                    result = Err(e);
                }
            }
        }
        result
    }

    /// Whether nothing is waiting to be written.
    pub fn is_empty(&self) -> bool {
        self.aggs.iter().all(|a| !a.is_open())
    }

    fn write_out(
        &mut self,
        i: usize,
        sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let a = &mut self.aggs[i];
        a.finish();
        a.segments = 0;
        self.stats.writes += 1;
        sink(&a.buf)
    }

    fn write_alone(
        &mut self,
        p: &[u8],
        sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        self.single.clear();
        self.single.extend_from_slice(&[0; VNET_HDR_LEN]);
        self.single.extend_from_slice(p);
        self.stats.writes += 1;
        sink(&self.single)
    }
}

#[cfg(test)]
mod tests;
