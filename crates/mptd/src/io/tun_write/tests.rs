use super::*;

/// An IPv4 (or IPv6) TCP segment of flow `port` with `payload` bytes
/// (each byte its sequence number's low byte), flags, ACK number and
/// a timestamp option.
fn tcp(v6: bool, port: u16, seq: u32, payload: usize, flags: u8, ack: u32) -> Vec<u8> {
    let l4_len = 32; // 20 + 12 bytes of options (NOP, NOP, timestamps)
    let ip_len = if v6 { 40 } else { 20 };
    let mut p = vec![0u8; ip_len + l4_len + payload];
    let total = p.len();
    if v6 {
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((total - 40) as u16).to_be_bytes());
        p[6] = PROTO_TCP;
        p[7] = 64;
        p[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = PROTO_TCP;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let c = !fold(sum(&p[..20], 0));
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let t = &mut p[ip_len..];
    t[0..2].copy_from_slice(&port.to_be_bytes());
    t[2..4].copy_from_slice(&5201u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = ((l4_len / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&1000u16.to_be_bytes());
    t[20..24].copy_from_slice(&[1, 1, 8, 10]);
    t[24..28].copy_from_slice(&77u32.to_be_bytes());
    for (k, b) in t[l4_len..].iter_mut().enumerate() {
        *b = seq.wrapping_add(k as u32) as u8;
    }
    p
}

fn udp(port: u16, payload: usize, fill: u8) -> Vec<u8> {
    let mut p = vec![fill; 28 + payload];
    let total = p.len();
    p[0] = 0x45;
    p[1] = 0;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[4..8].fill(0);
    p[8] = 64;
    p[9] = PROTO_UDP;
    p[10..12].fill(0);
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&port.to_be_bytes());
    p[22..24].copy_from_slice(&9u16.to_be_bytes());
    p[24..26].copy_from_slice(&((total - 20) as u16).to_be_bytes());
    p[26..28].fill(0);
    p
}

const ACK: u8 = TCP_ACK;
const PSH: u8 = TCP_ACK | TCP_PSH;

/// Pushes `packets` and flushes; returns the frames written.
fn run(c: &mut Coalescer, packets: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut sink = |f: &[u8]| {
        out.push(f.to_vec());
        Ok(())
    };
    for p in packets {
        c.push(p, &mut sink).expect("push");
    }
    c.flush(&mut sink).expect("flush");
    out
}

fn ne16(b: &[u8]) -> u16 {
    u16::from_ne_bytes([b[0], b[1]])
}

/// Splits a frame the way the kernel does (GSO): the segments' payloads.
fn payloads(frame: &[u8]) -> Vec<Vec<u8>> {
    let (h, p) = frame.split_at(VNET_HDR_LEN);
    let hdr_len = usize::from(ne16(&h[2..4]));
    let gso = usize::from(ne16(&h[4..6]));
    if h[1] == 0 {
        let s = parse(p).expect("a packet");
        return vec![p[s.ip_len + s.l4_len..].to_vec()];
    }
    p[hdr_len..].chunks(gso).map(<[u8]>::to_vec).collect()
}

fn payload_of(p: &[u8]) -> Vec<u8> {
    let s = parse(p).expect("a packet");
    p[s.ip_len + s.l4_len..].to_vec()
}

#[test]
fn consecutive_segments_of_a_flow_become_one_gso_write() {
    let mut c = Coalescer::new(true, false);
    let segs: Vec<_> = (0..5)
        .map(|k| tcp(false, 40000, 1000 + k * 1348, 1348, ACK, 9))
        .collect();
    let out = run(&mut c, &segs);
    assert_eq!(out.len(), 1, "one write");
    let f = &out[0];
    let (h, p) = f.split_at(VNET_HDR_LEN);
    assert_eq!(h[0], VIRTIO_NET_HDR_F_NEEDS_CSUM);
    assert_eq!(h[1], VIRTIO_NET_HDR_GSO_TCPV4);
    assert_eq!(ne16(&h[2..4]), 52, "headers: 20 + 32");
    assert_eq!(ne16(&h[4..6]), 1348);
    assert_eq!(ne16(&h[6..8]), 20);
    assert_eq!(ne16(&h[8..10]), 16);
    assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), p.len());
    assert_eq!(p.len(), 52 + 5 * 1348);
    assert_eq!(fold(sum(&p[..20], 0)), 0xffff, "IPv4 header checksum valid");
    // The TCP checksum field holds the pseudo-header sum.
    let mut pseudo = sum(&p[12..20], 0) + u64::from(PROTO_TCP) + (p.len() - 20) as u64;
    pseudo = u64::from(fold(pseudo));
    assert_eq!(u64::from(u16::from_be_bytes([p[36], p[37]])), pseudo);
    let want: Vec<_> = segs.iter().map(|s| payload_of(s)).collect();
    assert_eq!(payloads(f), want);
    assert_eq!(
        c.stats(),
        WriteStats {
            packets: 5,
            writes: 1
        }
    );
}

#[test]
fn ipv6_segments_coalesce_with_the_payload_length_set() {
    let mut c = Coalescer::new(true, false);
    let segs: Vec<_> = (0..3)
        .map(|k| tcp(true, 40000, 7 + k * 1200, 1200, ACK, 9))
        .collect();
    let out = run(&mut c, &segs);
    assert_eq!(out.len(), 1);
    let (h, p) = out[0].split_at(VNET_HDR_LEN);
    assert_eq!(h[1], VIRTIO_NET_HDR_GSO_TCPV6);
    assert_eq!(ne16(&h[6..8]), 40);
    assert_eq!(usize::from(u16::from_be_bytes([p[4], p[5]])), p.len() - 40);
    assert_eq!(
        payloads(&out[0]).concat(),
        segs.iter()
            .map(|s| payload_of(s))
            .collect::<Vec<_>>()
            .concat()
    );
}

#[test]
fn psh_a_short_segment_or_a_gap_ends_the_super_packet() {
    let mut c = Coalescer::new(true, false);
    let segs = vec![
        tcp(false, 1, 0, 1000, ACK, 9),
        tcp(false, 1, 1000, 1000, PSH, 9), // ends it, PSH carried
        tcp(false, 1, 2000, 1000, ACK, 9),
        tcp(false, 1, 3000, 400, ACK, 9), // short: ends it
        tcp(false, 1, 3400, 400, ACK, 9),
        tcp(false, 1, 9000, 400, ACK, 9), // a gap: a new one
    ];
    let out = run(&mut c, &segs);
    assert_eq!(
        out.len(),
        4,
        "{:?}",
        out.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let psh = &out[0][VNET_HDR_LEN..];
    assert_eq!(psh[20 + 13], PSH, "the super-packet keeps the PSH");
    assert_eq!(payloads(&out[0]).len(), 2);
    assert_eq!(payloads(&out[1]).len(), 2);
    assert_eq!(payloads(&out[2]).len(), 1);
    assert_eq!(out[2][1], 0, "a single packet goes out as it came");
    assert_eq!(&out[2][VNET_HDR_LEN..], &segs[4][..]);
    assert_eq!(&out[3][VNET_HDR_LEN..], &segs[5][..]);
}

#[test]
fn flows_interleave_and_a_control_segment_keeps_its_place_in_its_flow() {
    let mut c = Coalescer::new(true, false);
    let mut segs = Vec::new();
    for k in 0..4 {
        segs.push(tcp(false, 1, k * 100, 100, ACK, 9));
        segs.push(tcp(false, 2, k * 100, 100, ACK, 9));
    }
    // Flow 1 ends (FIN): written after its data, alone.
    segs.push(tcp(false, 1, 400, 0, ACK | 0x01, 9));
    // A changed ACK number does not join.
    segs.push(tcp(false, 2, 400, 100, ACK, 10));
    let out = run(&mut c, &segs);
    let flow = |f: &Vec<u8>| u16::from_be_bytes([f[VNET_HDR_LEN + 20], f[VNET_HDR_LEN + 21]]);
    let one: Vec<_> = out.iter().filter(|f| flow(f) == 1).collect();
    let two: Vec<_> = out.iter().filter(|f| flow(f) == 2).collect();
    assert_eq!(one.len(), 2);
    assert_eq!(payloads(one[0]).len(), 4);
    assert_eq!(
        one[1][VNET_HDR_LEN + 20 + 13],
        ACK | 0x01,
        "FIN after the data"
    );
    assert_eq!(two.len(), 2);
    assert_eq!(payloads(two[0]).len(), 4);
    assert_eq!(&two[1][VNET_HDR_LEN..], &segs[9][..]);
}

#[test]
fn more_flows_than_slots_write_the_oldest_out() {
    let mut c = Coalescer::new(true, false);
    let segs: Vec<_> = (0..(OPEN_FLOWS as u16 + 3))
        .map(|f| tcp(false, 100 + f, 0, 100, ACK, 9))
        .collect();
    let out = std::cell::RefCell::new(Vec::new());
    let mut sink = |f: &[u8]| {
        out.borrow_mut().push(f.to_vec());
        Ok(())
    };
    for p in &segs {
        c.push(p, &mut sink).expect("push");
    }
    assert_eq!(out.borrow().len(), 3, "three oldest written to make room");
    for (k, f) in out.borrow().iter().enumerate() {
        assert_eq!(&f[VNET_HDR_LEN..], &segs[k][..]);
    }
    assert!(!c.is_empty());
    c.flush(&mut sink).expect("flush");
    assert_eq!(out.borrow().len(), segs.len());
    assert!(c.is_empty());
}

#[test]
fn udp_coalesces_only_when_the_device_takes_udp_gso() {
    let dgrams = vec![
        udp(5, 1000, 1),
        udp(5, 1000, 2),
        udp(5, 300, 3),
        udp(5, 300, 4),
    ];
    let out = run(&mut Coalescer::new(true, false), &dgrams);
    assert_eq!(out.len(), 4);
    let out = run(&mut Coalescer::new(true, true), &dgrams);
    assert_eq!(out.len(), 2, "the short third ends the first");
    let (h, p) = out[0].split_at(VNET_HDR_LEN);
    assert_eq!(h[1], VIRTIO_NET_HDR_GSO_UDP_L4);
    assert_eq!(ne16(&h[4..6]), 1000);
    assert_eq!(ne16(&h[8..10]), 6);
    assert_eq!(
        usize::from(u16::from_be_bytes([p[24], p[25]])),
        p.len() - 20
    );
    assert_eq!(
        payloads(&out[0]),
        vec![vec![1u8; 1000], vec![2u8; 1000], vec![3u8; 300]]
    );
    assert_eq!(&out[1][VNET_HDR_LEN..], &dgrams[3][..]);
}

#[test]
fn without_a_virtio_header_packets_pass_through_untouched() {
    let mut c = Coalescer::new(false, false);
    let segs: Vec<_> = (0..3).map(|k| tcp(false, 1, k * 10, 10, ACK, 9)).collect();
    let out = run(&mut c, &segs);
    assert_eq!(out, segs);
}

#[test]
fn anything_else_is_written_alone_and_garbage_does_not_panic() {
    let mut c = Coalescer::new(true, true);
    let mut frag = tcp(false, 1, 0, 100, ACK, 9);
    frag[6] = 0x20; // MF
    let mut opts = tcp(false, 1, 0, 100, ACK, 9);
    opts[0] = 0x46; // IPv4 options
    let packets = vec![
        vec![],
        vec![0x45],
        vec![0x60; 39],
        vec![0x45; 60],
        frag.clone(),
        opts.clone(),
        tcp(false, 1, 0, 100, 0x02, 0), // SYN
    ];
    let out = run(&mut c, &packets);
    assert_eq!(out.len(), packets.len());
    for (f, p) in out.iter().zip(&packets) {
        assert_eq!(&f[..VNET_HDR_LEN], &[0; VNET_HDR_LEN]);
        assert_eq!(&f[VNET_HDR_LEN..], &p[..]);
    }
}

#[test]
fn a_super_packet_never_passes_64_kib() {
    let mut c = Coalescer::new(true, false);
    let segs: Vec<_> = (0..60)
        .map(|k| tcp(false, 1, k * 1400, 1400, ACK, 9))
        .collect();
    let out = run(&mut c, &segs);
    assert!(out.len() >= 2);
    for f in &out {
        assert!(f.len() - VNET_HDR_LEN <= 65_535);
    }
    let all: Vec<u8> = out.iter().flat_map(|f| payloads(f).concat()).collect();
    let want: Vec<u8> = segs.iter().flat_map(|s| payload_of(s)).collect();
    assert_eq!(all, want);
}
