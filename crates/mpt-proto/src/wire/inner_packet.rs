//! The sanity check a data payload passes before the daemon writes it to
//! the tun device: the peer is authenticated, but what it forwards is
//! still only bytes, and the kernel should never be handed a packet whose
//! own length fields disagree with its size.

use crate::wire::error::DecodeError;

/// Checks that `packet` looks like an IPv4 or IPv6 packet whose header
/// length field agrees with the buffer. The daemon applies it to data
/// payloads before writing them to tun, so a peer cannot make the kernel
/// parse junk.
#[inline]
pub fn check_ip_packet(packet: &[u8]) -> Result<(), DecodeError> {
    let Some(&first) = packet.first() else {
        return Err(DecodeError::BadInnerPacket);
    };
    match first >> 4 {
        4 => {
            if packet.len() < 20 {
                return Err(DecodeError::BadInnerPacket);
            }
            let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20 || total < ihl || total != packet.len() {
                return Err(DecodeError::BadInnerPacket);
            }
            Ok(())
        }
        6 => {
            if packet.len() < 40 {
                return Err(DecodeError::BadInnerPacket);
            }
            let payload = usize::from(u16::from_be_bytes([packet[4], packet[5]]));
            if payload + 40 != packet.len() {
                return Err(DecodeError::BadInnerPacket);
            }
            Ok(())
        }
        _ => Err(DecodeError::BadInnerPacket),
    }
}
