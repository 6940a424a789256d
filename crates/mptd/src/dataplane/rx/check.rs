//! Stage 2 of the receive path: check. Each datagram gets a [`Verdict`]
//! that carries its parsed header: data to deliver, a message for the
//! control loop, a sequence number to mark done, or a drop with its
//! reason ([`Refusal`]).
//!
//! Nothing is copied and nothing trusted before it is checked, in this
//! order: header; connection (by id or session index, see
//! `crate::dataplane::demux`); on a shared port, the path the header
//! names; handshake messages (authenticated by their own MAC in the
//! control loop, only size-checked here); then the key (sealed exactly
//! when the connection has one; opened by the open stage); then the type.
//! Data must carry an IP packet whose source address the peer is routed
//! for. Before any of that, a whole received message is refused when the
//! kernel truncated it, or, without a key, when it does not come from the
//! path's configured remote address and port ([`Check::message`]): there
//! nothing but where a datagram comes from authenticates it.
//!
//! The checks count nothing: the driver counts each verdict's refusal
//! once. They never panic and never allocate, whatever was received.

use std::net::SocketAddr;
use std::time::Instant;

use mpt_proto::crypto::TAG_LEN;
use mpt_proto::wire::{
    check_ip_packet, flow_predecessor, split_flow_prefix, Flags, Header, MsgType, Nack, Repair,
    HEADER_LEN,
};
use mpt_proto::{DecodeError, Transmit};

use crate::dataplane::rx::open::{OpenItem, Opener};
use crate::dataplane::rx::refusal::Refusal;
use crate::io::udp::RecvMeta;
use crate::plane::ConnShared;

/// What one datagram of a batch turned out to be.
#[derive(Debug)]
pub enum Verdict<'d> {
    /// Data for tun.
    Data {
        /// Its header.
        header: Header,
        /// With the FLOW flag, the flow predecessor it waits for
        /// (`Some(None)`: none).
        flow: Option<Option<u64>>,
        /// The datagram as plaintext (header, then payload without tag).
        plain: &'d [u8],
        /// The IP packet in it.
        packet: &'d [u8],
    },
    /// A repair (or a redundancy copy): its own sequence number is done
    /// like a probe's, and it carries data as [`Verdict::Data`] does.
    Repair {
        /// Its header.
        header: Header,
        /// The sequence number of the data it carries.
        original: u64,
        /// The data's flow predecessor, as for [`Verdict::Data`].
        flow: Option<Option<u64>>,
        /// The IP packet it carries.
        packet: &'d [u8],
    },
    /// A message for the control loop (probe, reply, feedback, control
    /// message), as plaintext; its sequence number is done.
    Control {
        /// Its header.
        header: Header,
        /// The datagram as plaintext.
        plain: &'d [u8],
    },
    /// A handshake message for the control loop, as received: nothing in
    /// it is trusted yet, not even its sequence number.
    Handshake {
        /// The datagram.
        dgram: &'d [u8],
    },
    /// The peer's request for repairs of datagrams it lost on this path.
    Nack {
        /// Its header.
        header: Header,
        /// What it asks for.
        nack: Nack,
    },
    /// A valid sequence number without data for tun (the inner packet or
    /// body was refused): the resequencer must not wait for it.
    Skip {
        /// Its header.
        header: Header,
        /// Why nothing of it goes on.
        refused: Refusal,
    },
    /// Dropped before its sequence number was trusted.
    Drop(Refusal),
}

/// The checks of one batch of one connection's datagrams of one path.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The connection.
    pub conn: &'a ConnShared,
    /// Read from a shared port: the path is the header's path id (checked
    /// after authentication), not the socket's.
    pub shared: bool,
    /// The batch's path id.
    pub pi: usize,
    /// When the batch is handled.
    pub now: Instant,
}

impl Check<'_> {
    /// Whether the datagrams of received message `m` (in `buf`) may be
    /// looked at: not truncated and, on a connection without a key
    /// (`cleartext_peer`: the path's configured remote, if any), from
    /// that remote. Otherwise the refusal and how many datagrams it
    /// covers (a truncated message counts once).
    pub fn message(
        &self,
        m: &RecvMeta,
        buf: &mut [u8],
        cleartext_peer: Option<Option<SocketAddr>>,
    ) -> Result<(), (Refusal, u64)> {
        if m.truncated {
            return Err((Refusal::Malformed, 1));
        }
        if let Some(peer) = cleartext_peer {
            if !same_endpoint(m.from, peer) {
                return Err((Refusal::WrongSource, m.datagrams_mut(buf).count() as u64));
            }
        }
        Ok(())
    }

    /// Checks one datagram, opening it in place when the connection is
    /// encrypted (the crypto stage may have already: `pre`).
    pub fn datagram<'d>(
        &self,
        dgram: &'d mut [u8],
        pre: Option<OpenItem>,
        opener: &mut Opener,
    ) -> Verdict<'d> {
        let header = match self.header(dgram) {
            Ok(h) => h,
            Err(r) => return Verdict::Drop(r),
        };
        if let Some((expected, noise)) = crate::plane::queue::handshake_kind(header.msg_type) {
            return self.handshake(dgram, expected, noise, header.msg_type);
        }
        match self.unseal(&header, dgram, pre, opener) {
            Ok((plain, opened_by)) => self.classify(header, plain, opened_by, opener),
            Err(r) => Verdict::Drop(r),
        }
    }

    /// The header, if it parses and names this connection (and, on a
    /// shared port, this batch's path).
    fn header(&self, dgram: &[u8]) -> Result<Header, Refusal> {
        let header = match Header::parse(dgram) {
            Ok((h, _)) => h,
            Err(DecodeError::TooShort { .. }) => return Err(Refusal::TooShort),
            Err(DecodeError::BadVersion { .. }) => return Err(Refusal::BadVersion),
            Err(_) => return Err(Refusal::Malformed),
        };
        // By connection id, or (public-key sessions) session index.
        if !crate::dataplane::demux::accepts(self.conn, &header) {
            return Err(Refusal::UnknownConnection);
        }
        // On a shared port the header names the path (the client's path
        // id; its source address is learnt): the whole group is one path.
        if self.shared && usize::from(header.path_id) != self.pi {
            return Err(Refusal::NoPath);
        }
        Ok(header)
    }

    /// A handshake message: for the control loop if the connection takes
    /// its kind (`noise`), it has its exact length and (a Noise
    /// initiation) its mac1 was made for our public key.
    fn handshake<'d>(
        &self,
        dgram: &'d [u8],
        expected: usize,
        noise: bool,
        msg_type: MsgType,
    ) -> Verdict<'d> {
        let Some(crypto) = self.conn.crypto.as_ref().filter(|c| c.noise == noise) else {
            return Verdict::Drop(Refusal::Unsupported);
        };
        if dgram.len() != expected {
            Verdict::Drop(Refusal::Malformed)
        } else if noise && msg_type == MsgType::NoiseInitiation && !crypto.mac1_ok(dgram) {
            // Junk or a scan: one BLAKE2s here, nothing queued.
            Verdict::Drop(Refusal::BadMac1)
        } else {
            Verdict::Handshake { dgram }
        }
    }

    /// The datagram as plaintext (header, then payload without tag), and
    /// the key slot that opened it if it was sealed. Sealed exactly when
    /// the connection has a key.
    fn unseal<'d>(
        &self,
        header: &Header,
        dgram: &'d mut [u8],
        pre: Option<OpenItem>,
        opener: &mut Opener,
    ) -> Result<(&'d [u8], Option<usize>), Refusal> {
        match (&self.conn.crypto, header.flags.contains(Flags::SEALED)) {
            (None, false) => Ok((dgram, None)),
            (None, true) | (Some(_), false) => Err(Refusal::Auth),
            (Some(_), true) => {
                let slot = opener.open(self.conn, dgram, header, pre, self.now)?;
                // Plaintext: header then payload; the tag is cut off and the
                // header keeps its SEALED bit (cleared for the control loop).
                let len = dgram.len();
                Ok((&dgram[..len - TAG_LEN], Some(slot)))
            }
        }
    }

    /// The verdict on an authentic datagram, by its type.
    fn classify<'d>(
        &self,
        header: Header,
        plain: &'d [u8],
        opened_by: Option<usize>,
        opener: &mut Opener,
    ) -> Verdict<'d> {
        let skip = |refused| Verdict::Skip { header, refused };
        match header.msg_type {
            MsgType::Data => {
                let (flow, packet) = flow_and_packet(&header, header.seq, &plain[HEADER_LEN..]);
                match self.inner_packet(packet) {
                    Ok(()) => Verdict::Data {
                        header,
                        flow,
                        plain,
                        packet,
                    },
                    Err(r) => skip(r),
                }
            }
            MsgType::Repair => self.repair(header, &plain[HEADER_LEN..], opened_by, opener),
            // As trusted as a probe (sealed, or from the configured
            // remote); answered after the batch.
            MsgType::Nack => match Nack::parse(&plain[HEADER_LEN..]) {
                Ok(nack) => Verdict::Nack { header, nack },
                Err(_) => skip(Refusal::Malformed),
            },
            // As trusted as a probe: sealed with a key; without one, from
            // the configured remote only (checked before).
            MsgType::Feedback if plain.len() != Transmit::FEEDBACK_LEN => skip(Refusal::Malformed),
            MsgType::Probe | MsgType::ProbeReply if plain.len() != Transmit::KEEPALIVE_LEN => {
                skip(Refusal::Malformed)
            }
            MsgType::Feedback | MsgType::Probe | MsgType::ProbeReply => {
                Verdict::Control { header, plain }
            }
            // Parsed (and length-checked) by the session. Without a key
            // anyone who can spoof the peer's address could add or remove
            // paths: never obeyed there.
            MsgType::Control => {
                if self.conn.crypto.is_none() {
                    skip(Refusal::UnauthenticatedControl)
                } else if plain.len() > Transmit::MAX_LEN {
                    skip(Refusal::Malformed)
                } else {
                    Verdict::Control { header, plain }
                }
            }
            // Handled before any crypto.
            MsgType::HandshakeInit
            | MsgType::HandshakeResponse
            | MsgType::HandshakeChallenge
            | MsgType::NoiseInitiation
            | MsgType::NoiseResponse
            | MsgType::NoiseCookieReply => Verdict::Drop(Refusal::Unsupported),
        }
    }

    /// Checks a repair's payload (plaintext, after the header): the data
    /// it carries is checked as data is, and must not have arrived before
    /// (the original's number goes through the replay window of the keys
    /// that opened the copy).
    fn repair<'d>(
        &self,
        header: Header,
        payload: &'d [u8],
        opened_by: Option<usize>,
        opener: &mut Opener,
    ) -> Verdict<'d> {
        let skip = |refused| Verdict::Skip { header, refused };
        let Ok(r) = Repair::parse(payload) else {
            return skip(Refusal::Malformed);
        };
        let (flow, packet) = flow_and_packet(&header, r.original_seq, r.payload);
        if let Err(refused) = self.inner_packet(packet) {
            return skip(refused);
        }
        if !opener.take_original(opened_by, r.original_seq) {
            // The original came after all (or the copy is a replay).
            return skip(if header.flags.contains(Flags::COPY) {
                Refusal::CopyDuplicate
            } else {
                Refusal::RepairDuplicate
            });
        }
        Verdict::Repair {
            header,
            original: r.original_seq,
            flow,
            packet,
        }
    }

    /// Whether an inner packet may go to tun: a well-formed IP packet
    /// from an address the peer is routed for.
    fn inner_packet(&self, packet: &[u8]) -> Result<(), Refusal> {
        if check_ip_packet(packet).is_err() {
            Err(Refusal::Malformed)
        } else if !self.conn.allowed_sources.allows(packet) {
            Err(Refusal::InnerSource)
        } else {
            Ok(())
        }
    }
}

/// A data payload split into its flow predecessor (with the FLOW flag;
/// `seq` is the data's sequence number) and its IP packet. A FLOW payload
/// too short for the prefix has no packet (refused by the packet check).
fn flow_and_packet<'d>(
    header: &Header,
    seq: u64,
    payload: &'d [u8],
) -> (Option<Option<u64>>, &'d [u8]) {
    if header.flags.contains(Flags::FLOW) {
        match split_flow_prefix(payload) {
            Ok((gap, packet)) => (Some(flow_predecessor(seq, gap)), packet),
            Err(_) => (None, &[][..]),
        }
    } else {
        (None, payload)
    }
}

/// Whether a datagram from `from` comes from the configured `remote`:
/// address and port (an IPv6 source's scope id and flow label, which a
/// configured address does not carry, are not compared).
pub fn same_endpoint(from: Option<SocketAddr>, remote: Option<SocketAddr>) -> bool {
    match (from, remote) {
        (Some(f), Some(r)) => f.ip() == r.ip() && f.port() == r.port(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv6Addr, SocketAddrV6};

    #[test]
    fn a_cleartext_source_must_match_address_and_port() {
        let remote: SocketAddr = "10.0.0.2:65022".parse().unwrap();
        assert!(same_endpoint(Some(remote), Some(remote)));
        assert!(!same_endpoint(
            Some("10.0.0.2:65023".parse().unwrap()),
            Some(remote)
        ));
        assert!(!same_endpoint(
            Some("10.0.0.3:65022".parse().unwrap()),
            Some(remote)
        ));
        assert!(!same_endpoint(None, Some(remote)));
        assert!(!same_endpoint(Some(remote), None));
        // A link-local source arrives with its interface's scope id; the
        // configured address has none.
        let ll: Ipv6Addr = "fe80::2".parse().unwrap();
        let configured = SocketAddr::V6(SocketAddrV6::new(ll, 65022, 0, 0));
        let received = SocketAddr::V6(SocketAddrV6::new(ll, 65022, 0, 7));
        assert!(same_endpoint(Some(received), Some(configured)));
    }
}
