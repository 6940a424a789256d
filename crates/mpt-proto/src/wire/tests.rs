use super::*;
use proptest::prelude::*;

/// A header with every field distinct, so a swapped field shows.
fn sample() -> Header {
    Header {
        msg_type: MsgType::Data,
        flags: Flags::NONE,
        path_id: 0x0102,
        conn_id: 0x0304_0506,
        seq: 0x0708_090a_0b0c_0d0e,
        path_seq: 0x0f10_1112,
        timestamp_us: 0x1314_1516,
    }
}

/// Known-answer vector: the exact bytes of `sample()`.
const SAMPLE_BYTES: [u8; HEADER_LEN] = [
    0x11, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
    0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
];

#[test]
fn header_known_answer_emit() {
    let mut buf = [0xa5u8; HEADER_LEN + 4];
    sample().emit(&mut buf).expect("room");
    assert_eq!(buf[..HEADER_LEN], SAMPLE_BYTES);
    assert_eq!(buf[HEADER_LEN..], [0xa5; 4], "emit wrote past the header");
}

#[test]
fn header_known_answer_parse() {
    let mut dgram = SAMPLE_BYTES.to_vec();
    dgram.extend_from_slice(b"payload");
    let (h, payload) = Header::parse(&dgram).expect("valid");
    assert_eq!(h, sample());
    assert_eq!(payload, b"payload");
}

#[test]
fn probe_reply_sealed_known_answer() {
    let h = Header {
        msg_type: MsgType::ProbeReply,
        flags: Flags::SEALED,
        path_id: 11,
        conn_id: 1,
        seq: 1,
        path_seq: 2,
        timestamp_us: 3,
    };
    let mut buf = [0xa5u8; HEADER_LEN];
    h.emit(&mut buf).expect("room");
    assert_eq!(
        buf,
        [0x13, 0x01, 0x00, 0x0b, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]
    );
}

#[test]
fn keepalive_known_answer() {
    let k = Keepalive {
        echo_timestamp_us: 0x0102_0304,
        echo_path_seq: 0x0506_0708,
        report: PathReport {
            rx_packets: 0x090a_0b0c,
            rx_highest_path_seq: 0x0d0e_0f10,
            weight_in: 0x1112,
            hears_you: true,
        },
    };
    let mut buf = [0xa5u8; Keepalive::LEN];
    k.emit(&mut buf).expect("room");
    assert_eq!(
        buf,
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0x11, 0x12, 0x01, 0x00]
    );
    assert_eq!(Keepalive::parse(&buf), Ok(k));
}

#[test]
fn emit_into_short_buffer_fails() {
    let mut buf = [0u8; HEADER_LEN - 1];
    assert_eq!(
        sample().emit(&mut buf),
        Err(EncodeError::BufferTooSmall {
            needed: HEADER_LEN,
            have: HEADER_LEN - 1
        })
    );
    let mut small = [0u8; 3];
    assert!(Keepalive::default().emit(&mut small).is_err());
}

#[test]
fn parse_rejects_each_bad_field() {
    assert_eq!(
        Header::parse(&SAMPLE_BYTES[..10]),
        Err(DecodeError::TooShort { len: 10 })
    );
    let mut bad_version = SAMPLE_BYTES;
    bad_version[0] = 0x21;
    assert_eq!(
        Header::parse(&bad_version),
        Err(DecodeError::BadVersion { version: 2 })
    );
    let mut bad_type = SAMPLE_BYTES;
    bad_type[0] = 0x1f;
    assert_eq!(
        Header::parse(&bad_type),
        Err(DecodeError::UnknownType { code: 15 })
    );
    let mut zero_type = SAMPLE_BYTES;
    zero_type[0] = 0x10;
    assert_eq!(
        Header::parse(&zero_type),
        Err(DecodeError::UnknownType { code: 0 })
    );
    let mut bad_flags = SAMPLE_BYTES;
    bad_flags[1] = 0x80;
    assert_eq!(
        Header::parse(&bad_flags),
        Err(DecodeError::UnknownFlags { bits: 0x80 })
    );
    let huge = vec![0x11u8; MAX_DATAGRAM + 1];
    assert_eq!(
        Header::parse(&huge),
        Err(DecodeError::TooLong {
            len: MAX_DATAGRAM + 1
        })
    );
}

#[test]
fn keepalive_rejects_wrong_length_and_reserved_bits() {
    assert!(matches!(
        Keepalive::parse(&[0u8; 19]),
        Err(DecodeError::BadBodyLength { len: 19, .. })
    ));
    assert!(Keepalive::parse(&[0u8; 21]).is_err());
    let mut b = [0u8; Keepalive::LEN];
    b[18] = 0x02;
    assert!(Keepalive::parse(&b).is_err());
    b[18] = 0;
    b[19] = 1;
    assert!(Keepalive::parse(&b).is_err());
}

#[test]
fn every_type_code_round_trips() {
    for code in 0..=15u8 {
        if let Some(t) = MsgType::from_code(code) {
            assert_eq!(t.code(), code);
        }
    }
    assert_eq!(MsgType::from_code(1), Some(MsgType::Data));
    assert_eq!(MsgType::from_code(7), Some(MsgType::HandshakeChallenge));
    assert_eq!(MsgType::from_code(8), Some(MsgType::Feedback));
    assert_eq!(MsgType::from_code(9), Some(MsgType::Nack));
    assert_eq!(MsgType::from_code(10), Some(MsgType::Repair));
    assert_eq!(MsgType::from_code(11), Some(MsgType::NoiseInitiation));
    assert_eq!(MsgType::from_code(12), Some(MsgType::NoiseResponse));
    assert_eq!(MsgType::from_code(13), Some(MsgType::NoiseCookieReply));
    assert_eq!(MsgType::from_code(14), None);
}

fn ipv4_packet(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

#[test]
fn inner_packet_check() {
    assert_eq!(check_ip_packet(&ipv4_packet(60)), Ok(()));
    let mut short_total = ipv4_packet(60);
    short_total[3] = 59;
    assert!(check_ip_packet(&short_total).is_err());
    assert!(check_ip_packet(&ipv4_packet(60)[..19]).is_err());
    let mut bad_ihl = ipv4_packet(60);
    bad_ihl[0] = 0x44;
    assert!(check_ip_packet(&bad_ihl).is_err());
    let mut v6 = vec![0u8; 48];
    v6[0] = 0x60;
    v6[5] = 8;
    assert_eq!(check_ip_packet(&v6), Ok(()));
    v6[5] = 9;
    assert!(check_ip_packet(&v6).is_err());
    assert!(check_ip_packet(&[]).is_err());
    assert!(check_ip_packet(&[0x50; 40]).is_err());
}

fn any_type() -> impl Strategy<Value = MsgType> {
    prop::sample::select(vec![
        MsgType::Data,
        MsgType::Probe,
        MsgType::ProbeReply,
        MsgType::Control,
        MsgType::HandshakeInit,
        MsgType::HandshakeResponse,
        MsgType::HandshakeChallenge,
        MsgType::Feedback,
    ])
}

prop_compose! {
    fn any_header()(msg_type in any_type(), sealed in any::<bool>(), path_id in any::<u16>(),
                    conn_id in any::<u32>(), seq in any::<u64>(), path_seq in any::<u32>(),
                    timestamp_us in any::<u32>()) -> Header {
        Header { msg_type, flags: if sealed { Flags::SEALED } else { Flags::NONE },
                 path_id, conn_id, seq, path_seq, timestamp_us }
    }
}

proptest! {
    #[test]
    fn header_round_trips(h in any_header(), payload in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut buf = vec![0xa5u8; HEADER_LEN + payload.len()];
        h.emit(&mut buf).expect("room");
        buf[HEADER_LEN..].copy_from_slice(&payload);
        let (back, rest) = Header::parse(&buf).expect("parses");
        prop_assert_eq!(back, h);
        prop_assert_eq!(rest, &payload[..]);
    }

    #[test]
    fn keepalive_round_trips(a in any::<u32>(), b in any::<u32>(), c in any::<u32>(), d in any::<u32>(),
                             w in any::<u16>(), hears in any::<bool>()) {
        let k = Keepalive { echo_timestamp_us: a, echo_path_seq: b,
            report: PathReport { rx_packets: c, rx_highest_path_seq: d, weight_in: w, hears_you: hears } };
        let mut buf = [0u8; Keepalive::LEN];
        k.emit(&mut buf).expect("room");
        prop_assert_eq!(Keepalive::parse(&buf), Ok(k));
    }

    #[test]
    fn decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok((h, payload)) = Header::parse(&bytes) {
            // A parsed header re-emits to the same bytes: parsing is lossless.
            let mut again = [0u8; HEADER_LEN];
            h.emit(&mut again).expect("room");
            prop_assert_eq!(&again[..], &bytes[..HEADER_LEN]);
            let _ = Keepalive::parse(payload);
            let _ = check_ip_packet(payload);
        }
    }
}

#[test]
fn flow_flag_is_known_and_parses() {
    let mut b = SAMPLE_BYTES;
    b[1] = 0x03;
    let (h, _) = Header::parse(&b).expect("SEALED | FLOW is known");
    assert!(h.flags.contains(Flags::FLOW));
    assert!(h.flags.contains(Flags::SEALED));
    assert_eq!(Flags::SEALED.with(Flags::FLOW), h.flags);
    b[1] = 0x07;
    let (h, _) = Header::parse(&b).expect("SEALED | FLOW | COPY is known");
    assert!(h.flags.contains(Flags::COPY));
    b[1] = 0x08;
    assert_eq!(
        Header::parse(&b),
        Err(DecodeError::UnknownFlags { bits: 0x08 })
    );
}

#[test]
fn flow_prefix_known_answer() {
    // A data header with FLOW, then flow_gap = 0x01020304, then the packet.
    let h = Header {
        flags: Flags::FLOW,
        ..sample()
    };
    let mut dgram = [0xa5u8; HEADER_LEN + FLOW_PREFIX_LEN + 3];
    h.emit(&mut dgram).expect("room");
    emit_flow_prefix(0x0102_0304, &mut dgram[HEADER_LEN..]).expect("room");
    assert_eq!(dgram[1], 0x02);
    assert_eq!(
        dgram[HEADER_LEN..],
        [0x01, 0x02, 0x03, 0x04, 0xa5, 0xa5, 0xa5],
        "the prefix is 4 bytes, big-endian, and nothing else is written"
    );
    let (parsed, payload) = Header::parse(&dgram).expect("valid");
    assert!(parsed.flags.contains(Flags::FLOW));
    let (gap, packet) = split_flow_prefix(payload).expect("long enough");
    assert_eq!(gap, 0x0102_0304);
    assert_eq!(packet, [0xa5; 3]);
}

#[test]
fn flow_prefix_short_inputs_are_errors() {
    for len in 0..FLOW_PREFIX_LEN {
        assert_eq!(
            split_flow_prefix(&[0; FLOW_PREFIX_LEN][..len]),
            Err(DecodeError::BadBodyLength {
                len,
                expected: FLOW_PREFIX_LEN
            })
        );
        let mut buf = [0u8; FLOW_PREFIX_LEN];
        assert_eq!(
            emit_flow_prefix(1, &mut buf[..len]),
            Err(EncodeError::BufferTooSmall {
                needed: FLOW_PREFIX_LEN,
                have: len
            })
        );
    }
    // Exactly the prefix: an empty packet, which check_ip_packet refuses.
    let (gap, packet) = split_flow_prefix(&[0, 0, 0, 0]).expect("prefix only");
    assert_eq!((gap, packet.len()), (0, 0));
    assert!(check_ip_packet(packet).is_err());
}

#[test]
fn flow_predecessor_of_a_gap() {
    assert_eq!(flow_predecessor(100, 0), None, "0: no predecessor");
    assert_eq!(flow_predecessor(100, 1), Some(99));
    assert_eq!(flow_predecessor(100, 100), Some(0));
    assert_eq!(flow_predecessor(100, 101), None, "below 0");
    assert_eq!(
        flow_predecessor(u64::MAX, u32::MAX),
        Some(u64::MAX - u64::from(u32::MAX))
    );
}

proptest! {
    #[test]
    fn flow_prefix_round_trips(
        gap in any::<u32>(),
        packet in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut buf = vec![0xa5u8; FLOW_PREFIX_LEN + packet.len()];
        emit_flow_prefix(gap, &mut buf).expect("room");
        buf[FLOW_PREFIX_LEN..].copy_from_slice(&packet);
        let (g, p) = split_flow_prefix(&buf).expect("long enough");
        prop_assert_eq!(g, gap);
        prop_assert_eq!(p, &packet[..]);
    }
}
