//! The header's flag byte. Each bit changes how the payload is read
//! (sealed, flow-prefixed, a redundant copy); unknown bits are refused
//! when the header is parsed, so they stay free for later versions.

/// Header flag bits. Unknown bits are rejected so that they can be given a
/// meaning later without old peers misreading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No flag set.
    pub const NONE: Flags = Flags(0);
    /// The payload is sealed with the session's AEAD; a 16-byte tag follows it.
    pub const SEALED: Flags = Flags(0x01);
    /// Data only: the payload starts with a 4-byte flow prefix (see
    /// `split_flow_prefix`), so the receiver can release each flow on its
    /// own instead of in global sequence order.
    pub const FLOW: Flags = Flags(0x02);
    /// Redundancy: on data, a copy of this datagram went on another path
    /// too; on a repair, it is that copy, not an answer to a request. The
    /// receiver keeps whichever arrives first and counts the other as an
    /// expected duplicate rather than a replay.
    pub const COPY: Flags = Flags(0x04);
    /// Every bit this version understands.
    pub const KNOWN: Flags = Flags(0x07);

    /// The raw bits.
    #[inline]
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// Flags from raw bits, or `None` when an unknown bit is set.
    #[inline]
    pub const fn from_bits(bits: u8) -> Option<Flags> {
        if bits & !Self::KNOWN.0 == 0 {
            Some(Flags(bits))
        } else {
            None
        }
    }
    /// Whether every bit of `other` is set here.
    #[inline]
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// These flags with every bit of `other` set as well.
    #[inline]
    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}
