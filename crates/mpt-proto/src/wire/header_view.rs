//! The header's byte layout, and views that read and write its fields in
//! place.
//!
//! Why views beside the decoded `Header`: the data plane touches one or
//! two fields of a datagram it already parsed or just built (the daemon's
//! receive loop reads `path_seq` and `timestamp_us`; its control loop
//! rewrites `conn_id` and sets [`Flags::SEALED`] before sealing; the AEAD
//! takes its nonce from `seq`), and should neither copy nor re-validate
//! the whole header for that. Every byte offset of the header is written
//! here and nowhere else: `Header::parse` and `Header::emit`, the AEAD and
//! the daemon all go through these views.
//!
//! Contract: a view is built by checking the length only
//! ([`HeaderView::check_len`], [`HeaderViewMut::check_len`]); after that
//! no accessor or mutator can panic. A view holds exactly [`HEADER_LEN`]
//! bytes, and every field's offset is checked against that length when
//! the crate compiles. A view does not validate what it reads: the
//! version, type code and flag bits come back raw (or as `Option`), and
//! only `Header::parse` refuses a datagram for them.
//!
//! ```text
//! offset  size  field
//!      0     1  version (high nibble) | message type (low nibble)
//!      1     1  flags
//!      2     2  path_id
//!      4     4  conn_id
//!      8     8  seq
//!     16     4  path_seq
//!     20     4  timestamp_us
//! ```

use crate::wire::error::{DecodeError, EncodeError};
use crate::wire::flags::Flags;
use crate::wire::msg_type::MsgType;

/// Protocol version carried in the high nibble of byte 0.
pub const VERSION: u8 = 1;

/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = 24;

/// Byte 0: version (high nibble) and message type code (low nibble).
const VERSION_TYPE_AT: usize = 0;
/// Byte 1: flag bits.
const FLAGS_AT: usize = 1;
const PATH_ID_AT: usize = 2;
const CONN_ID_AT: usize = 4;
const SEQ_AT: usize = 8;
const PATH_SEQ_AT: usize = 16;
const TIMESTAMP_AT: usize = 20;

// The fields tile the header: the last one ends where the header does.
const _: () = assert!(TIMESTAMP_AT + 4 == HEADER_LEN);

/// The `N` bytes at offset `AT`. An offset that does not fit fails to
/// compile, so this never panics.
#[inline]
fn field<const AT: usize, const N: usize>(h: &[u8; HEADER_LEN]) -> [u8; N] {
    const { assert!(AT + N <= HEADER_LEN) };
    let mut out = [0u8; N];
    out.copy_from_slice(&h[AT..AT + N]);
    out
}

/// Writes `value` at offset `AT` (checked when compiling, as [`field`]).
#[inline]
fn set_field<const AT: usize, const N: usize>(h: &mut [u8; HEADER_LEN], value: [u8; N]) {
    const { assert!(AT + N <= HEADER_LEN) };
    h[AT..AT + N].copy_from_slice(&value);
}

/// Read access to the header bytes at the start of a datagram, in place.
///
/// After [`HeaderView::check_len`] (or from a `&[u8; HEADER_LEN]`) no
/// accessor panics, whatever the bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderView<'a> {
    bytes: &'a [u8; HEADER_LEN],
}

impl<'a> HeaderView<'a> {
    /// A view of exactly the header's bytes.
    #[inline]
    pub const fn new(bytes: &'a [u8; HEADER_LEN]) -> HeaderView<'a> {
        HeaderView { bytes }
    }

    /// A view of the first [`HEADER_LEN`] bytes of `datagram`, or
    /// [`DecodeError::TooShort`]. The only check made: the fields are not
    /// validated (see the module docs).
    #[inline]
    pub fn check_len(datagram: &'a [u8]) -> Result<HeaderView<'a>, DecodeError> {
        HeaderView::split(datagram).map(|(view, _)| view)
    }

    /// As [`HeaderView::check_len`], also returning the payload after the
    /// header.
    #[inline]
    pub fn split(datagram: &'a [u8]) -> Result<(HeaderView<'a>, &'a [u8]), DecodeError> {
        match datagram.split_first_chunk::<HEADER_LEN>() {
            Some((bytes, payload)) => Ok((HeaderView { bytes }, payload)),
            None => Err(DecodeError::TooShort {
                len: datagram.len(),
            }),
        }
    }

    /// The raw header bytes (e.g. as AEAD associated data).
    #[inline]
    pub const fn bytes(self) -> &'a [u8; HEADER_LEN] {
        self.bytes
    }

    /// The version nibble (valid: [`VERSION`]).
    #[inline]
    pub fn version(self) -> u8 {
        self.bytes[VERSION_TYPE_AT] >> 4
    }

    /// The 4-bit message type code, whether known or not.
    #[inline]
    pub fn type_code(self) -> u8 {
        self.bytes[VERSION_TYPE_AT] & 0x0f
    }

    /// The message type, if the code is one this version knows (the
    /// version nibble is not looked at).
    #[inline]
    pub fn msg_type(self) -> Option<MsgType> {
        MsgType::from_code(self.type_code())
    }

    /// The raw flag byte, unknown bits included.
    #[inline]
    pub fn flag_bits(self) -> u8 {
        self.bytes[FLAGS_AT]
    }

    /// Whether every bit of `flags` is set (other bits, known or not, do
    /// not matter).
    #[inline]
    pub fn has_flags(self, flags: Flags) -> bool {
        self.flag_bits() & flags.bits() == flags.bits()
    }

    /// The sender's index of the path.
    #[inline]
    pub fn path_id(self) -> u16 {
        u16::from_be_bytes(field::<PATH_ID_AT, 2>(self.bytes))
    }

    /// The connection id (on public-key connections: the receiver's
    /// session index).
    #[inline]
    pub fn conn_id(self) -> u32 {
        u32::from_be_bytes(field::<CONN_ID_AT, 4>(self.bytes))
    }

    /// The per-connection sequence number (the AEAD nonce).
    #[inline]
    pub fn seq(self) -> u64 {
        u64::from_be_bytes(field::<SEQ_AT, 8>(self.bytes))
    }

    /// The per-path sequence number (wrapping).
    #[inline]
    pub fn path_seq(self) -> u32 {
        u32::from_be_bytes(field::<PATH_SEQ_AT, 4>(self.bytes))
    }

    /// The sender's clock in microseconds when sent (wrapping).
    #[inline]
    pub fn timestamp_us(self) -> u32 {
        u32::from_be_bytes(field::<TIMESTAMP_AT, 4>(self.bytes))
    }
}

/// Write access to the header bytes at the start of a buffer, in place.
///
/// After [`HeaderViewMut::check_len`] (or from a `&mut [u8; HEADER_LEN]`)
/// no mutator panics. Read the fields through [`HeaderViewMut::as_view`].
#[derive(Debug, PartialEq, Eq)]
pub struct HeaderViewMut<'a> {
    bytes: &'a mut [u8; HEADER_LEN],
}

impl<'a> HeaderViewMut<'a> {
    /// A view of exactly the header's bytes.
    #[inline]
    pub fn new(bytes: &'a mut [u8; HEADER_LEN]) -> HeaderViewMut<'a> {
        HeaderViewMut { bytes }
    }

    /// A view of the first [`HEADER_LEN`] bytes of `buf`, or
    /// [`EncodeError::BufferTooSmall`]. The only check made.
    #[inline]
    pub fn check_len(buf: &'a mut [u8]) -> Result<HeaderViewMut<'a>, EncodeError> {
        let have = buf.len();
        match buf.first_chunk_mut::<HEADER_LEN>() {
            Some(bytes) => Ok(HeaderViewMut { bytes }),
            None => Err(EncodeError::BufferTooSmall {
                needed: HEADER_LEN,
                have,
            }),
        }
    }

    /// Read access to the same bytes.
    #[inline]
    pub fn as_view(&self) -> HeaderView<'_> {
        HeaderView::new(self.bytes)
    }

    /// Writes byte 0: [`VERSION`] and the code of `msg_type`.
    #[inline]
    pub fn set_msg_type(&mut self, msg_type: MsgType) {
        self.bytes[VERSION_TYPE_AT] = (VERSION << 4) | msg_type.code();
    }

    /// Replaces the whole flag byte with `flags`.
    #[inline]
    pub fn set_flags(&mut self, flags: Flags) {
        self.bytes[FLAGS_AT] = flags.bits();
    }

    /// Sets every bit of `flags`, leaving the others as they are (e.g.
    /// [`Flags::SEALED`] on a datagram about to be sealed).
    #[inline]
    pub fn insert_flags(&mut self, flags: Flags) {
        self.bytes[FLAGS_AT] |= flags.bits();
    }

    /// Clears every bit of `flags`, leaving the others as they are (e.g.
    /// [`Flags::SEALED`] on a datagram opened in place).
    #[inline]
    pub fn remove_flags(&mut self, flags: Flags) {
        self.bytes[FLAGS_AT] &= !flags.bits();
    }

    /// Writes the path id.
    #[inline]
    pub fn set_path_id(&mut self, path_id: u16) {
        set_field::<PATH_ID_AT, 2>(self.bytes, path_id.to_be_bytes());
    }

    /// Writes the connection id (or the peer's session index).
    #[inline]
    pub fn set_conn_id(&mut self, conn_id: u32) {
        set_field::<CONN_ID_AT, 4>(self.bytes, conn_id.to_be_bytes());
    }

    /// Writes the per-connection sequence number.
    #[inline]
    pub fn set_seq(&mut self, seq: u64) {
        set_field::<SEQ_AT, 8>(self.bytes, seq.to_be_bytes());
    }

    /// Writes the per-path sequence number.
    #[inline]
    pub fn set_path_seq(&mut self, path_seq: u32) {
        set_field::<PATH_SEQ_AT, 4>(self.bytes, path_seq.to_be_bytes());
    }

    /// Writes the sender timestamp.
    #[inline]
    pub fn set_timestamp_us(&mut self, timestamp_us: u32) {
        set_field::<TIMESTAMP_AT, 4>(self.bytes, timestamp_us.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field distinct: the bytes are their own offsets plus one.
    const COUNTING: [u8; HEADER_LEN] = [
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
    ];

    /// A 0xa5 buffer with `bytes` written at `at`: what a mutator that
    /// touched those bytes only must leave.
    fn a5_with(at: usize, bytes: &[u8]) -> [u8; HEADER_LEN] {
        let mut b = [0xa5; HEADER_LEN];
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    }

    #[test]
    fn accessors_known_answer_on_a5() {
        let v = HeaderView::new(&[0xa5; HEADER_LEN]);
        assert_eq!(v.version(), 0xa);
        assert_eq!(v.type_code(), 0x5);
        assert_eq!(v.msg_type(), Some(MsgType::HandshakeInit));
        assert_eq!(v.flag_bits(), 0xa5);
        assert!(v.has_flags(Flags::SEALED));
        assert!(!v.has_flags(Flags::FLOW));
        assert!(v.has_flags(Flags::COPY));
        assert!(v.has_flags(Flags::SEALED.with(Flags::COPY)));
        assert!(!v.has_flags(Flags::SEALED.with(Flags::FLOW)));
        assert!(v.has_flags(Flags::NONE));
        assert_eq!(v.path_id(), 0xa5a5);
        assert_eq!(v.conn_id(), 0xa5a5_a5a5);
        assert_eq!(v.seq(), 0xa5a5_a5a5_a5a5_a5a5);
        assert_eq!(v.path_seq(), 0xa5a5_a5a5);
        assert_eq!(v.timestamp_us(), 0xa5a5_a5a5);
        assert_eq!(v.bytes(), &[0xa5; HEADER_LEN]);
    }

    #[test]
    fn accessors_known_answer_on_distinct_bytes() {
        let v = HeaderView::new(&COUNTING);
        assert_eq!(v.version(), 0);
        assert_eq!(v.type_code(), 1);
        assert_eq!(v.msg_type(), Some(MsgType::Data));
        assert_eq!(v.flag_bits(), 0x02);
        assert!(v.has_flags(Flags::FLOW));
        assert!(!v.has_flags(Flags::SEALED));
        assert_eq!(v.path_id(), 0x0304);
        assert_eq!(v.conn_id(), 0x0506_0708);
        assert_eq!(v.seq(), 0x090a_0b0c_0d0e_0f10);
        assert_eq!(v.path_seq(), 0x1112_1314);
        assert_eq!(v.timestamp_us(), 0x1516_1718);
    }

    #[test]
    fn unknown_type_code_reads_as_none() {
        let mut b = [0xa5; HEADER_LEN];
        b[0] = 0x1f;
        let v = HeaderView::new(&b);
        assert_eq!((v.version(), v.type_code(), v.msg_type()), (1, 0xf, None));
        b[0] = 0x10;
        assert_eq!(HeaderView::new(&b).msg_type(), None);
    }

    #[test]
    fn check_len_refuses_short_and_views_the_prefix() {
        for len in 0..HEADER_LEN {
            let d = vec![0xa5; len];
            assert_eq!(
                HeaderView::check_len(&d),
                Err(DecodeError::TooShort { len })
            );
            assert_eq!(HeaderView::split(&d), Err(DecodeError::TooShort { len }));
            let mut d = d;
            assert_eq!(
                HeaderViewMut::check_len(&mut d),
                Err(EncodeError::BufferTooSmall {
                    needed: HEADER_LEN,
                    have: len
                })
            );
        }
        let mut d = COUNTING.to_vec();
        d.extend_from_slice(&[0xa5; 3]);
        let v = HeaderView::check_len(&d).unwrap();
        assert_eq!(v.bytes(), &COUNTING);
        let (v, payload) = HeaderView::split(&d).unwrap();
        assert_eq!((v.path_seq(), payload), (0x1112_1314, &[0xa5; 3][..]));
        let (_, empty) = HeaderView::split(&COUNTING).unwrap();
        assert!(empty.is_empty());
        let mut m = HeaderViewMut::check_len(&mut d).unwrap();
        m.set_conn_id(0);
        assert_eq!(
            &d[HEADER_LEN..],
            &[0xa5; 3],
            "a mutator wrote past the header"
        );
    }

    /// One call of a mutator.
    type Mutator = fn(&mut HeaderViewMut<'_>);

    #[test]
    fn mutators_write_their_bytes_only() {
        let cases: [(Mutator, usize, &[u8]); 10] = [
            (|m| m.set_msg_type(MsgType::Probe), 0, &[0x12]),
            (|m| m.set_msg_type(MsgType::NoiseCookieReply), 0, &[0x1d]),
            (|m| m.set_flags(Flags::FLOW), 1, &[0x02]),
            (|m| m.insert_flags(Flags::FLOW), 1, &[0xa7]),
            (|m| m.remove_flags(Flags::SEALED), 1, &[0xa4]),
            (|m| m.set_path_id(0x0102), 2, &[0x01, 0x02]),
            (|m| m.set_conn_id(0x0102_0304), 4, &[1, 2, 3, 4]),
            (
                |m| m.set_seq(0x0102_0304_0506_0708),
                8,
                &[1, 2, 3, 4, 5, 6, 7, 8],
            ),
            (|m| m.set_path_seq(0x0102_0304), 16, &[1, 2, 3, 4]),
            (|m| m.set_timestamp_us(0x0102_0304), 20, &[1, 2, 3, 4]),
        ];
        for (i, (set, at, bytes)) in cases.into_iter().enumerate() {
            let mut b = [0xa5; HEADER_LEN];
            set(&mut HeaderViewMut::new(&mut b));
            assert_eq!(b, a5_with(at, bytes), "case {i}");
        }
    }

    #[test]
    fn sealed_flag_set_and_cleared_in_place() {
        let mut b = [0u8; HEADER_LEN];
        let mut m = HeaderViewMut::new(&mut b);
        m.insert_flags(Flags::SEALED);
        assert!(m.as_view().has_flags(Flags::SEALED));
        m.insert_flags(Flags::COPY);
        m.remove_flags(Flags::SEALED);
        assert_eq!(m.as_view().flag_bits(), Flags::COPY.bits());
        assert_eq!(b, zeros_with(1, Flags::COPY.bits()));
    }

    /// Zeros with one byte set.
    fn zeros_with(at: usize, byte: u8) -> [u8; HEADER_LEN] {
        let mut b = [0; HEADER_LEN];
        b[at] = byte;
        b
    }

    #[test]
    fn written_fields_read_back() {
        let mut b = [0xa5; HEADER_LEN];
        let mut m = HeaderViewMut::new(&mut b);
        m.set_msg_type(MsgType::Feedback);
        m.set_flags(Flags::SEALED);
        m.set_path_id(7);
        m.set_conn_id(u32::MAX);
        m.set_seq(u64::MAX - 1);
        m.set_path_seq(0x8000_0000);
        m.set_timestamp_us(1);
        let v = m.as_view();
        assert_eq!(v.version(), VERSION);
        assert_eq!(v.msg_type(), Some(MsgType::Feedback));
        assert_eq!(v.flag_bits(), Flags::SEALED.bits());
        assert_eq!(v.path_id(), 7);
        assert_eq!(v.conn_id(), u32::MAX);
        assert_eq!(v.seq(), u64::MAX - 1);
        assert_eq!(v.path_seq(), 0x8000_0000);
        assert_eq!(v.timestamp_us(), 1);
    }
}
