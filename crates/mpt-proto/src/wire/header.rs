//! The decoded header: every field typed and validated at once.
//!
//! What the receive path uses: [`Header::parse`] refuses a datagram whose
//! length, version, type or flags this version does not accept, before
//! anything else looks at it. The byte layout itself is in
//! `header_view`, which this reads and writes through.

use crate::wire::error::{DecodeError, EncodeError};
use crate::wire::flags::Flags;
use crate::wire::header_view::{HeaderView, HeaderViewMut, VERSION};
use crate::wire::msg_type::MsgType;

/// The largest datagram we ever build or accept: a 9000-byte jumbo inner
/// packet, the header and room for a 16-byte AEAD tag, rounded up.
pub const MAX_DATAGRAM: usize = 9216;

/// The decoded fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// What the payload is.
    pub msg_type: MsgType,
    /// Flag bits.
    pub flags: Flags,
    /// The sender's index of the path this datagram was sent on.
    pub path_id: u16,
    /// The connection this datagram belongs to.
    pub conn_id: u32,
    /// Per-connection, per-direction sequence number over all paths.
    pub seq: u64,
    /// Per-path sequence number (wrapping).
    pub path_seq: u32,
    /// Sender's clock in microseconds when sent (wrapping).
    pub timestamp_us: u32,
}

impl Header {
    /// Writes the header into the first [`HEADER_LEN`](super::HEADER_LEN)
    /// bytes of `buf`.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), EncodeError> {
        let mut out = HeaderViewMut::check_len(buf)?;
        out.set_msg_type(self.msg_type);
        out.set_flags(self.flags);
        out.set_path_id(self.path_id);
        out.set_conn_id(self.conn_id);
        out.set_seq(self.seq);
        out.set_path_seq(self.path_seq);
        out.set_timestamp_us(self.timestamp_us);
        Ok(())
    }

    /// Parses the header at the start of `datagram` and returns it with the
    /// payload that follows. Never panics, never allocates.
    #[inline]
    pub fn parse(datagram: &[u8]) -> Result<(Header, &[u8]), DecodeError> {
        if datagram.len() > MAX_DATAGRAM {
            return Err(DecodeError::TooLong {
                len: datagram.len(),
            });
        }
        let (h, payload) = HeaderView::split(datagram)?;
        let version = h.version();
        if version != VERSION {
            return Err(DecodeError::BadVersion { version });
        }
        let code = h.type_code();
        let msg_type = MsgType::from_code(code).ok_or(DecodeError::UnknownType { code })?;
        let bits = h.flag_bits();
        let flags = Flags::from_bits(bits).ok_or(DecodeError::UnknownFlags { bits })?;
        let header = Header {
            msg_type,
            flags,
            path_id: h.path_id(),
            conn_id: h.conn_id(),
            seq: h.seq(),
            path_seq: h.path_seq(),
            timestamp_us: h.timestamp_us(),
        };
        Ok((header, payload))
    }
}
