//! Software segmentation of GSO aggregates.
//!
//! With the endpoints' offloads on (TSO/GSO on a veth sender), the ingress
//! packet socket hands the wire TCP or UDP aggregates of up to 64 KiB,
//! described by the `virtio_net_hdr` in front of each frame. Queued, paced
//! and lost as one frame, an aggregate would make one "packet" out of up to
//! 45, and loss, queue limits and rate would act on 64 KiB lumps. So the
//! wire cuts every aggregate it can into the MTU-sized segments a NIC would
//! have put on the wire, and the model sees each on its own. The endpoints
//! may then keep their offloads (which makes them cheaper) without the
//! emulation changing.
//!
//! Each segment gets its own headers: IPv4 total length, identification
//! (+1 per segment, as the kernel's own segmentation does) and header
//! checksum; IPv6 payload length; TCP sequence number, with CWR only on the
//! first segment and FIN/PSH only on the last; UDP length (`UDP_L4`). The
//! L4 checksum is left to the "hardware", as the aggregate's was: the
//! segment carries `NEEDS_CSUM` and the pseudo-header sum, and the receiving
//! veth accepts it like any locally sent frame.
//!
//! Not segmented, forwarded whole as before (and counted): VLAN-tagged
//! frames, IPv6 with extension headers, UFO (`VIRTIO_NET_HDR_GSO_UDP`, IP
//! fragmentation), anything whose headers do not add up. These are rare on
//! the links the emulator is used for.
//!
//! Pure functions on byte slices; no system calls, unit-tested with
//! hand-built aggregates.

use super::sys::VNET_HDR_LEN;

// virtio_net_hdr fields (linux/virtio_net.h), native endianness on a
// PACKET_VNET_HDR socket.
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

const TCP_CWR: u8 = 0x80;
const TCP_PSH: u8 = 0x08;
const TCP_FIN: u8 = 0x01;

/// Why an aggregate is forwarded whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    /// A GSO type other than TCPv4, TCPv6 and UDP_L4 (e.g. UFO).
    GsoType(u8),
    /// Not IPv4/IPv6 directly over Ethernet (e.g. VLAN-tagged).
    Ethertype(u16),
    /// IPv6 extension headers, or an L4 protocol that does not match.
    Protocol(u8),
    /// Lengths or header fields that do not add up.
    Malformed,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// One's-complement sum of `data` (16-bit big-endian words, odd byte
/// padded), not folded.
fn sum16(data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    let mut sum: u32 = 0;
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Where the headers of an aggregate are, once checked.
#[derive(Debug, Clone, Copy)]
struct Layout {
    ipv6: bool,
    /// Offset of the L4 header in the Ethernet frame.
    l4: usize,
    tcp: bool,
    /// Offset of the payload in the Ethernet frame.
    payload: usize,
    /// End of the IP packet in the Ethernet frame.
    end: usize,
    gso_size: usize,
}

fn layout(vnet: &[u8], eth: &[u8]) -> Result<Layout, Unsupported> {
    let gso_type = vnet[1] & !GSO_ECN;
    let gso_size = usize::from(u16::from_ne_bytes([vnet[4], vnet[5]]));
    let (want_v6, want_proto) = match gso_type {
        GSO_TCPV4 => (Some(false), PROTO_TCP),
        GSO_TCPV6 => (Some(true), PROTO_TCP),
        GSO_UDP_L4 => (None, PROTO_UDP),
        other => return Err(Unsupported::GsoType(other)),
    };
    if gso_size == 0 || eth.len() < ETH_LEN {
        return Err(Unsupported::Malformed);
    }
    let ipv6 = match be16(eth, 12) {
        ETHERTYPE_IPV4 => false,
        ETHERTYPE_IPV6 => true,
        other => return Err(Unsupported::Ethertype(other)),
    };
    if want_v6.is_some_and(|v6| v6 != ipv6) {
        return Err(Unsupported::Malformed);
    }
    let ip = &eth[ETH_LEN..];
    let (l4, proto, end) = if ipv6 {
        if ip.len() < 40 || ip[0] >> 4 != 6 {
            return Err(Unsupported::Malformed);
        }
        (ETH_LEN + 40, ip[6], ETH_LEN + 40 + usize::from(be16(ip, 4)))
    } else {
        if ip.len() < 20 || ip[0] >> 4 != 4 {
            return Err(Unsupported::Malformed);
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ihl < 20 || be16(ip, 6) & 0x3fff != 0 {
            // Too short, or a fragment.
            return Err(Unsupported::Malformed);
        }
        (ETH_LEN + ihl, ip[9], ETH_LEN + usize::from(be16(ip, 2)))
    };
    if proto != want_proto {
        return Err(Unsupported::Protocol(proto));
    }
    if end > eth.len() || l4 + 8 > end {
        return Err(Unsupported::Malformed);
    }
    let tcp = proto == PROTO_TCP;
    let l4_len = if tcp {
        if l4 + 20 > end {
            return Err(Unsupported::Malformed);
        }
        usize::from(eth[l4 + 12] >> 4) * 4
    } else {
        8
    };
    let payload = l4 + l4_len;
    // A TCP header is at least 20 bytes (flags and checksum are written
    // per segment); from the wire, a data offset below 5 is malformed.
    if l4_len < if tcp { 20 } else { 8 } || payload > end {
        return Err(Unsupported::Malformed);
    }
    Ok(Layout {
        ipv6,
        l4,
        tcp,
        payload,
        end,
        gso_size,
    })
}

/// Cuts the aggregate `frame` (vnet header + Ethernet frame, as read from a
/// `PACKET_VNET_HDR` socket) into segments and calls `emit` with each (vnet
/// header + Ethernet frame, ready to send), in order. `scratch` is reused
/// between segments. Returns the number of segments, or why the frame was
/// not cut (then `emit` was not called).
pub fn segment(
    frame: &[u8],
    scratch: &mut Vec<u8>,
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, Unsupported> {
    if frame.len() < VNET_HDR_LEN {
        return Err(Unsupported::Malformed);
    }
    let (vnet, eth) = frame.split_at(VNET_HDR_LEN);
    let l = layout(vnet, eth)?;
    let payload = &eth[l.payload..l.end];
    let count = payload.len().div_ceil(l.gso_size).max(1);
    let hdrs = &eth[..l.payload];
    let l4_hdr_len = l.payload - l.l4;
    let first_id = if l.ipv6 { 0 } else { be16(eth, ETH_LEN + 4) };
    let first_seq = if l.tcp {
        u32::from_be_bytes([eth[l.l4 + 4], eth[l.l4 + 5], eth[l.l4 + 6], eth[l.l4 + 7]])
    } else {
        0
    };
    // Pseudo-header sum without the length: addresses and protocol.
    let (addr_sum, proto) = if l.ipv6 {
        (sum16(&eth[ETH_LEN + 8..ETH_LEN + 40]), eth[ETH_LEN + 6])
    } else {
        (sum16(&eth[ETH_LEN + 12..ETH_LEN + 20]), eth[ETH_LEN + 9])
    };
    let csum_offset: u16 = if l.tcp { 16 } else { 6 };
    let mut chunks = payload.chunks(l.gso_size);
    for k in 0..count {
        let chunk = chunks.next().unwrap_or(&[]);
        let last = k + 1 == count;
        scratch.clear();
        // vnet header: partial checksum from the L4 header on, no GSO.
        scratch.push(F_NEEDS_CSUM);
        scratch.push(GSO_NONE);
        scratch.extend_from_slice(&(l.payload as u16).to_ne_bytes()); // hdr_len
        scratch.extend_from_slice(&0u16.to_ne_bytes()); // gso_size
        scratch.extend_from_slice(&(l.l4 as u16).to_ne_bytes()); // csum_start
        scratch.extend_from_slice(&csum_offset.to_ne_bytes());
        scratch.extend_from_slice(hdrs);
        scratch.extend_from_slice(chunk);
        let seg = &mut scratch[VNET_HDR_LEN..];
        let l4_len = l4_hdr_len + chunk.len();
        let ip = ETH_LEN;
        if l.ipv6 {
            put16(seg, ip + 4, l4_len as u16);
        } else {
            let ihl = l.l4 - ETH_LEN;
            put16(seg, ip + 2, (ihl + l4_len) as u16);
            put16(seg, ip + 4, first_id.wrapping_add(k as u16));
            put16(seg, ip + 10, 0);
            let c = !fold(sum16(&seg[ip..l.l4]));
            put16(seg, ip + 10, c);
        }
        if l.tcp {
            let seq = first_seq.wrapping_add((k * l.gso_size) as u32);
            seg[l.l4 + 4..l.l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let mut flags = seg[l.l4 + 13];
            if k > 0 {
                flags &= !TCP_CWR;
            }
            if !last {
                flags &= !(TCP_FIN | TCP_PSH);
            }
            seg[l.l4 + 13] = flags;
        } else {
            put16(seg, l.l4 + 4, l4_len as u16);
        }
        // The pseudo-header sum, not inverted: the "hardware" adds the L4
        // header and payload and stores the complement.
        let pseudo = addr_sum + u32::from(proto) + l4_len as u32;
        put16(seg, l.l4 + usize::from(csum_offset), fold(pseudo));
        emit(scratch);
    }
    Ok(count)
}

/// Is `frame` (vnet header first) a GSO aggregate?
pub fn is_gso(frame: &[u8]) -> bool {
    frame.len() >= VNET_HDR_LEN && frame[1] & !GSO_ECN != GSO_NONE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Completes a partial checksum as a NIC would: sum from csum_start to
    /// the end (the field holds the pseudo-header sum), store the complement.
    fn finish_csum(frame: &mut [u8]) {
        let (vnet, eth) = frame.split_at_mut(VNET_HDR_LEN);
        assert_eq!(vnet[0] & F_NEEDS_CSUM, F_NEEDS_CSUM);
        let start = usize::from(u16::from_ne_bytes([vnet[6], vnet[7]]));
        let off = usize::from(u16::from_ne_bytes([vnet[8], vnet[9]]));
        let c = !fold(sum16(&eth[start..]));
        put16(eth, start + off, c);
    }

    /// Verifies an L4 checksum with the pseudo header: sums to 0xffff.
    fn l4_checksum_ok(eth: &[u8]) -> bool {
        let v6 = be16(eth, 12) == ETHERTYPE_IPV6;
        let (l4, pseudo) = if v6 {
            let len = usize::from(be16(eth, ETH_LEN + 4));
            (
                ETH_LEN + 40,
                sum16(&eth[ETH_LEN + 8..ETH_LEN + 40]) + u32::from(eth[ETH_LEN + 6]) + len as u32,
            )
        } else {
            let ihl = usize::from(eth[ETH_LEN] & 0x0f) * 4;
            let len = usize::from(be16(eth, ETH_LEN + 2)) - ihl;
            (
                ETH_LEN + ihl,
                sum16(&eth[ETH_LEN + 12..ETH_LEN + 20]) + u32::from(eth[ETH_LEN + 9]) + len as u32,
            )
        };
        fold(pseudo + sum16(&eth[l4..])) == 0xffff
    }

    fn vnet(gso_type: u8, hdr_len: usize, gso_size: u16, csum_start: usize, off: u16) -> Vec<u8> {
        let mut v = vec![F_NEEDS_CSUM, gso_type];
        v.extend_from_slice(&(hdr_len as u16).to_ne_bytes());
        v.extend_from_slice(&gso_size.to_ne_bytes());
        v.extend_from_slice(&(csum_start as u16).to_ne_bytes());
        v.extend_from_slice(&off.to_ne_bytes());
        v
    }

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut e = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a];
        e.extend_from_slice(&ethertype.to_be_bytes());
        e
    }

    fn tcp_header(seq: u32, flags: u8) -> Vec<u8> {
        let mut t = vec![0xa5; 20];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&5201u16.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        t[16..18].copy_from_slice(&[0, 0]);
        t
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn tcp4_aggregate(seq: u32, flags: u8, data: &[u8], mss: u16) -> Vec<u8> {
        let mut f = vnet(GSO_TCPV4 | GSO_ECN, 54, mss, 34, 16);
        f.extend(eth(ETHERTYPE_IPV4));
        let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, PROTO_TCP, 0, 0];
        ip.extend_from_slice(&[10, 77, 0, 1, 10, 77, 0, 2]);
        put16(&mut ip, 2, (20 + 20 + data.len()) as u16);
        f.extend(ip);
        f.extend(tcp_header(seq, flags));
        f.extend_from_slice(data);
        f
    }

    fn cut(frame: &[u8]) -> Result<Vec<Vec<u8>>, Unsupported> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        let n = segment(frame, &mut scratch, |s| out.push(s.to_vec()))?;
        assert_eq!(n, out.len());
        Ok(out)
    }

    #[test]
    fn tcp4_aggregate_becomes_valid_segments() {
        let data = payload(3 * 1448 + 100);
        let flags = TCP_CWR | TCP_PSH | TCP_FIN | 0x10;
        let segs = cut(&tcp4_aggregate(0xffff_f000, flags, &data, 1448)).expect("cut");
        assert_eq!(segs.len(), 4);
        let mut joined = Vec::new();
        for (k, s) in segs.into_iter().enumerate() {
            let mut s = s;
            assert_eq!(s[1], GSO_NONE, "segment {k} still GSO");
            finish_csum(&mut s);
            let e = &s[VNET_HDR_LEN..];
            let len = if k < 3 { 1448 } else { 100 };
            assert_eq!(e.len(), 14 + 20 + 20 + len);
            assert_eq!(usize::from(be16(e, 16)), 40 + len, "IPv4 total length");
            assert_eq!(be16(e, 18), 0x1234 + k as u16, "IPv4 id");
            assert_eq!(fold(sum16(&e[14..34])), 0xffff, "IPv4 header checksum");
            let seq = u32::from_be_bytes([e[38], e[39], e[40], e[41]]);
            assert_eq!(seq, 0xffff_f000u32.wrapping_add(k as u32 * 1448));
            let f = e[47];
            assert_eq!(f & TCP_CWR != 0, k == 0, "CWR only first");
            assert_eq!(f & (TCP_FIN | TCP_PSH) != 0, k == 3, "FIN/PSH only last");
            assert_eq!(f & 0x10, 0x10, "ACK kept");
            assert!(l4_checksum_ok(e), "segment {k}: TCP checksum");
            joined.extend_from_slice(&e[54..]);
        }
        assert_eq!(joined, data);
    }

    #[test]
    fn tcp6_and_udp_l4_aggregates_are_cut() {
        let data = payload(2 * 1000 + 1);
        // TCPv6
        let mut f = vnet(GSO_TCPV6, 74, 1000, 54, 16);
        f.extend(eth(ETHERTYPE_IPV6));
        let mut ip = vec![0x60, 0, 0, 0, 0, 0, PROTO_TCP, 64];
        ip.extend((0..32).map(|i| i as u8));
        put16(&mut ip, 4, (20 + data.len()) as u16);
        f.extend(ip);
        f.extend(tcp_header(7, 0x18));
        f.extend_from_slice(&data);
        let segs = cut(&f).expect("cut v6");
        assert_eq!(segs.len(), 3);
        for (k, mut s) in segs.into_iter().enumerate() {
            finish_csum(&mut s);
            let e = &s[VNET_HDR_LEN..];
            let len = if k < 2 { 1000 } else { 1 };
            assert_eq!(usize::from(be16(e, 18)), 20 + len, "IPv6 payload length");
            assert!(l4_checksum_ok(e), "v6 segment {k}");
        }
        // UDP_L4 over IPv4
        let mut f = vnet(GSO_UDP_L4, 42, 1000, 34, 6);
        f.extend(eth(ETHERTYPE_IPV4));
        let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, PROTO_UDP, 0, 0];
        ip.extend_from_slice(&[10, 77, 0, 1, 10, 77, 0, 2]);
        put16(&mut ip, 2, (20 + 8 + data.len()) as u16);
        f.extend(ip);
        let mut udp = vec![0x9c, 0x40, 0x14, 0x51, 0, 0, 0, 0];
        put16(&mut udp, 4, (8 + data.len()) as u16);
        f.extend(udp);
        f.extend_from_slice(&data);
        let segs = cut(&f).expect("cut udp");
        assert_eq!(segs.len(), 3);
        for (k, mut s) in segs.into_iter().enumerate() {
            finish_csum(&mut s);
            let e = &s[VNET_HDR_LEN..];
            let len = if k < 2 { 1000 } else { 1 };
            assert_eq!(usize::from(be16(e, 38)), 8 + len, "UDP length");
            assert!(l4_checksum_ok(e), "udp segment {k}");
        }
    }

    #[test]
    fn what_cannot_be_cut_is_refused_untouched() {
        let data = payload(3000);
        let good = tcp4_aggregate(1, 0x10, &data, 1448);
        // UFO
        let mut f = good.clone();
        f[1] = 3;
        assert_eq!(cut(&f), Err(Unsupported::GsoType(3)));
        // VLAN
        let mut f = good.clone();
        f[VNET_HDR_LEN + 12..VNET_HDR_LEN + 14].copy_from_slice(&0x8100u16.to_be_bytes());
        assert_eq!(cut(&f), Err(Unsupported::Ethertype(0x8100)));
        // IP total length beyond the frame
        let mut f = good.clone();
        put16(&mut f, VNET_HDR_LEN + 16, 9000);
        assert_eq!(cut(&f), Err(Unsupported::Malformed));
        // TCP data offset below 5 words (header shorter than 20 bytes)
        for doff in 0..5u8 {
            let mut f = good.clone();
            f[VNET_HDR_LEN + 34 + 12] = doff << 4;
            assert_eq!(cut(&f), Err(Unsupported::Malformed), "doff {doff}");
        }
        // Truncated inside the IP header
        assert_eq!(cut(&good[..VNET_HDR_LEN + 20]), Err(Unsupported::Malformed));
        // TCP GSO type on a UDP packet
        let mut f = good.clone();
        f[VNET_HDR_LEN + 14 + 9] = PROTO_UDP;
        assert_eq!(cut(&f), Err(Unsupported::Protocol(PROTO_UDP)));
        assert!(is_gso(&good[..VNET_HDR_LEN]));
        assert!(!is_gso(&[F_NEEDS_CSUM, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
    }
}
