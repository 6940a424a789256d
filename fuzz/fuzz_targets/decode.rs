//! Decoding never panics on any input, and whatever decodes re-encodes to
//! the same bytes (so no two encodings mean the same thing, and every field
//! the parser accepts survives the round trip).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mpt_proto::wire::{check_ip_packet, ControlMsg, Header, Keepalive, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    // The inner-packet check must hold up on its own, not only behind a
    // valid header.
    let _ = check_ip_packet(data);

    let Ok((header, payload)) = Header::parse(data) else {
        return;
    };
    assert_eq!(payload.len(), data.len() - HEADER_LEN);
    assert_eq!(
        payload.as_ptr(),
        data[HEADER_LEN..].as_ptr(),
        "payload is not the tail"
    );

    // Header round trip, into a buffer pre-filled so an unwritten byte shows.
    let mut out = [0xa5u8; HEADER_LEN];
    header
        .emit(&mut out)
        .expect("a header fits HEADER_LEN bytes");
    assert_eq!(
        &out[..],
        &data[..HEADER_LEN],
        "header did not round-trip: {header:?}"
    );
    let (again, rest) = Header::parse(&out).expect("re-emitted header parses");
    assert_eq!(again, header);
    assert!(rest.is_empty());
    // Emitting into a short buffer is an error, not a panic.
    assert!(header.emit(&mut out[..HEADER_LEN - 1]).is_err());

    // Payload decoders must not panic whatever the message type says.
    let _ = check_ip_packet(payload);
    if let Ok(k) = Keepalive::parse(payload) {
        let mut kout = [0xa5u8; Keepalive::LEN];
        k.emit(&mut kout)
            .expect("a keepalive fits Keepalive::LEN bytes");
        assert_eq!(&kout[..], payload, "keepalive did not round-trip: {k:?}");
        assert_eq!(Keepalive::parse(&kout), Ok(k));
    }
    if let Ok(c) = ControlMsg::parse(payload) {
        let mut cout = [0xa5u8; ControlMsg::MAX_LEN];
        let n = c.emit(&mut cout).expect("a control message fits MAX_LEN");
        assert_eq!(&cout[..n], payload, "control message did not round-trip: {c:?}");
        assert_eq!(ControlMsg::parse(&cout[..n]), Ok(c));
    }
});
