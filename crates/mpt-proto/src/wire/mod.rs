//! The mpt wire format: one fixed 24-byte header in front of every datagram.
//!
//! Every datagram a path socket sends starts with [`Header`]; what follows
//! depends on [`MsgType`]. The layout (big-endian, byte offsets) is drawn in
//! `docs/PROTOCOL.md`:
//!
//! ```text
//! offset  size  field
//!      0     1  version (high nibble, = 1) | message type (low nibble)
//!      1     1  flags
//!      2     2  path_id       sender's index of the path
//!      4     4  conn_id       connection identifier
//!      8     8  seq           per-connection sequence number
//!     16     4  path_seq      per-path sequence number
//!     20     4  timestamp_us  sender's clock, microseconds, wrapping
//!     24     …  payload (then a 16-byte AEAD tag when SEALED)
//! ```
//!
//! Why these fields:
//! * `conn_id` lets many peers share one server port (and is the key lookup
//!   before any cryptographic work).
//! * `seq` is per connection and per direction, counted over all paths. It
//!   will be the AEAD nonce (hence 64 bits: it never wraps in practice) and
//!   the replay-window index; the receiver can also use it to restore order.
//! * `path_seq` counts datagrams per path, so the peer can report how many
//!   it received and how far the sequence went: that ratio is the loss rate.
//! * `timestamp_us` is the sender's clock in microseconds (wrapping); probe
//!   replies echo it, which yields an RTT sample without synchronised clocks.
//!
//! The header is authenticated in full as AEAD associated data; only the
//! payload is sealed, and the tag (if [`Flags::SEALED`]) trails the payload.
//! So encryption fits without changing a single header byte.
//!
//! Contract: [`Header::parse`] and the views ([`HeaderView::check_len`],
//! [`HeaderViewMut::check_len`]) check the length first; after that no
//! accessor can panic. Parsing never allocates; emitting writes into a
//! caller-owned buffer. Every byte offset of the header is written in one
//! file, `header_view.rs`; code outside this module reads and writes
//! header fields through [`Header`] or the views, never by offset.
//!
//! Files: `header_view.rs` (the layout and in-place views), `header.rs`
//! (the validated [`Header`]), `msg_type.rs`, `flags.rs`, `error.rs` (the
//! codec's errors), `flow_prefix.rs`, `inner_packet.rs`, and one file per
//! message body: `keepalive.rs`, `feedback.rs`, `control.rs`, `repair.rs`.

mod control;
mod error;
mod feedback;
mod flags;
mod flow_prefix;
mod header;
mod header_view;
mod inner_packet;
mod keepalive;
mod msg_type;
mod repair;

pub use control::{
    is_plain_name, ControlBody, ControlMsg, PathAdd, PathName, Refusal, MAX_NAME_LEN,
};
pub use error::{DecodeError, EncodeError};
pub use feedback::Feedback;
pub use flags::Flags;
pub use flow_prefix::{emit_flow_prefix, flow_predecessor, split_flow_prefix, FLOW_PREFIX_LEN};
pub use header::{Header, MAX_DATAGRAM};
pub use header_view::{HeaderView, HeaderViewMut, HEADER_LEN, VERSION};
pub use inner_packet::check_ip_packet;
pub use keepalive::{Keepalive, PathReport};
pub use msg_type::MsgType;
pub use repair::{Nack, Repair, MAX_NACK_RUN, REPAIR_PREFIX_LEN};

#[cfg(test)]
mod tests;
