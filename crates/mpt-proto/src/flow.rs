//! Inner flows: which IP packets must stay in order with which.
//!
//! The receiver only has to restore the order of each transport flow, not
//! of the whole tunnel (see the `reorder` module). The sender therefore
//! classifies every packet it reads from tun by its inner 5-tuple
//! ([`flow_hash`]) into one of [`FLOW_BUCKETS`] buckets, and a
//! [`FlowTable`] remembers the connection sequence number of the last data
//! datagram sent per bucket. The distance to it is the `flow_gap` put in
//! front of the packet on the wire ([`crate::wire::Flags::FLOW`]); the
//! receiver holds the packet only until that predecessor is done.
//!
//! Why buckets and not exact flows: a fixed array costs no allocation and
//! no eviction policy, and two flows sharing a bucket are merely kept in
//! order with each other, which is what every packet got before. With 4096
//! buckets a tunnel carrying a hundred busy flows shares few of them.
//!
//! Why these fields: the addresses and protocol name the conversation; the
//! ports separate the connections of one host pair, and are read only for
//! the protocols whose first four transport bytes are the ports (TCP, UDP,
//! UDP-Lite, SCTP) and only when those bytes are there: a non-first
//! fragment carries no transport header, so it is hashed on addresses and
//! protocol (a first fragment with its ports, which puts the fragments of
//! one datagram in at most two buckets; reassembly does not care about
//! order). IPv6 extension headers (hop-by-hop, routing, fragment,
//! destination options, authentication) are skipped up to
//! [`MAX_EXT_HEADERS`]; past that, or when one is cut short, the packet is
//! hashed on its addresses and the fixed header's next header. The flow
//! label is not used: senders may change it within a connection.
//!
//! The mix is our own multiply-xorshift over 64-bit words: fast, no
//! dependency, and good enough to spread flows over buckets. It is not
//! keyed: a peer that crafts colliding flows only makes them share a
//! bucket, that is wait for each other as in global order. Nothing here
//! panics or allocates, whatever the bytes.

/// Number of buckets of a [`FlowTable`] (a power of two): 4096 × 8 bytes
/// = 32 KiB per sender.
pub const FLOW_BUCKETS: usize = 4096;

/// IPv6 extension headers skipped before giving up on finding the
/// transport header; real packets carry two or three at most.
pub const MAX_EXT_HEADERS: usize = 8;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_SCTP: u8 = 132;
const PROTO_UDPLITE: u8 = 136;

const EXT_HOP_BY_HOP: u8 = 0;
const EXT_ROUTING: u8 = 43;
const EXT_FRAGMENT: u8 = 44;
const EXT_AUTH: u8 = 51;
const EXT_DEST_OPTS: u8 = 60;

/// A multiply-xorshift accumulator (the finaliser is the one of
/// SplitMix64 / MurmurHash3's fmix64).
struct Mix(u64);

impl Mix {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn new(tag: u64) -> Mix {
        Mix(tag.wrapping_mul(Self::K))
    }

    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::K);
        self.0 ^= self.0 >> 29;
    }

    fn add_bytes(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_be_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_be_bytes(w));
        }
    }

    fn finish(self) -> u32 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        (h ^ (h >> 32)) as u32
    }
}

/// The flow hash of an IP packet: over its addresses, transport protocol
/// and ports (see the module documentation for which). Any byte string
/// gets a hash; one that is not an IPv4 or IPv6 packet hashes to 0.
pub fn flow_hash(packet: &[u8]) -> u32 {
    match packet.first().map(|b| b >> 4) {
        Some(4) => hash_v4(packet).unwrap_or(0),
        Some(6) => hash_v6(packet).unwrap_or(0),
        _ => 0,
    }
}

/// The first four bytes of a transport header that starts with the two
/// ports, when `proto` is such a protocol and the bytes are there.
fn ports(proto: u8, transport: &[u8]) -> Option<u32> {
    match proto {
        PROTO_TCP | PROTO_UDP | PROTO_SCTP | PROTO_UDPLITE => {
            transport.first_chunk::<4>().map(|p| u32::from_be_bytes(*p))
        }
        _ => None,
    }
}

fn hash_v4(p: &[u8]) -> Option<u32> {
    let fixed = p.get(..20)?;
    let ihl = usize::from(fixed[0] & 0x0f) * 4;
    let proto = fixed[9];
    let mut m = Mix::new(4);
    m.add_bytes(&fixed[12..20]);
    // Fragment offset (13 bits): a non-first fragment has no ports.
    let offset = u16::from_be_bytes([fixed[6], fixed[7]]) & 0x1fff;
    let ports = match (offset, p.get(ihl..)) {
        (0, Some(t)) if ihl >= 20 => ports(proto, t),
        _ => None,
    };
    m.add(u64::from(proto) << 32 | u64::from(ports.unwrap_or(0)));
    Some(m.finish())
}

/// Walks the IPv6 extension headers from `next` at `off`: the transport
/// protocol and its header, or `None` when the chain is cut short or too
/// long. A non-first fragment yields its protocol and no header.
pub(crate) fn v6_transport(p: &[u8], mut next: u8, mut off: usize) -> Option<(u8, Option<&[u8]>)> {
    for _ in 0..=MAX_EXT_HEADERS {
        let ext = match next {
            EXT_HOP_BY_HOP | EXT_ROUTING | EXT_DEST_OPTS | EXT_FRAGMENT | EXT_AUTH => {
                p.get(off..off.checked_add(8)?)?
            }
            proto => return Some((proto, p.get(off..))),
        };
        let len = match next {
            EXT_FRAGMENT => {
                let frag_offset = u16::from_be_bytes([ext[2], ext[3]]) >> 3;
                if frag_offset != 0 {
                    return Some((ext[0], None));
                }
                8
            }
            EXT_AUTH => (usize::from(ext[1]) + 2) * 4,
            _ => (usize::from(ext[1]) + 1) * 8,
        };
        next = ext[0];
        off = off.checked_add(len)?;
    }
    None
}

fn hash_v6(p: &[u8]) -> Option<u32> {
    let fixed = p.get(..40)?;
    let mut m = Mix::new(6);
    m.add_bytes(&fixed[8..40]);
    let word = match v6_transport(p, fixed[6], 40) {
        Some((proto, transport)) => {
            let ports = transport.and_then(|t| ports(proto, t));
            u64::from(proto) << 32 | u64::from(ports.unwrap_or(0))
        }
        // Fall back to the addresses and the fixed header's next header,
        // marked so it cannot equal a parsed protocol without ports.
        None => 1 << 40 | u64::from(fixed[6]) << 32,
    };
    m.add(word);
    Some(m.finish())
}

/// The DSCP (the upper six bits of the IPv4 TOS / IPv6 traffic class) of
/// an IP packet, or `None` when `packet` is not one.
pub fn dscp(packet: &[u8]) -> Option<u8> {
    let first = *packet.first()?;
    match first >> 4 {
        4 if packet.len() >= 20 => Some(packet[1] >> 2),
        6 if packet.len() >= 40 => Some(((first & 0x0f) << 2) | (packet[1] >> 6)),
        _ => None,
    }
}

/// Whether `packet` is a TCP segment with the SYN flag (IPv4, or IPv6
/// with TCP right after the fixed header). The adaptive scheduler sends
/// a SYN like bulk data: the handshake's RTT then matches the data's, and
/// a sender sizing its window by the shortest RTT it saw (BBR) is not
/// misled by a handshake over a faster path than its data takes.
pub fn is_tcp_syn(packet: &[u8]) -> bool {
    let Some(&first) = packet.first() else {
        return false;
    };
    let tcp = match first >> 4 {
        4 if packet.len() >= 20 => {
            let fragment = u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff;
            if packet[9] != 6 || fragment != 0 {
                return false;
            }
            usize::from(first & 0x0f) * 4
        }
        6 if packet.len() >= 40 && packet[6] == 6 => 40,
        _ => return false,
    };
    packet.get(tcp + 13).is_some_and(|flags| flags & 0x02 != 0)
}

/// The sender's memory of the last data datagram sent per flow bucket:
/// a fixed array, no allocation after construction.
#[derive(Debug, Clone)]
pub struct FlowTable {
    /// Per bucket: the last sequence number sent, or [`FlowTable::NONE`].
    last: Box<[u64; FLOW_BUCKETS]>,
}

impl Default for FlowTable {
    fn default() -> Self {
        FlowTable::new()
    }
}

impl FlowTable {
    /// No datagram sent in the bucket yet. (`u64::MAX` as a real sequence
    /// number behaves the same: nothing can follow it.)
    const NONE: u64 = u64::MAX;

    /// An empty table.
    pub fn new() -> FlowTable {
        FlowTable {
            last: Box::new([Self::NONE; FLOW_BUCKETS]),
        }
    }

    /// The bucket of a flow hash.
    pub fn bucket(hash: u32) -> usize {
        hash as usize & (FLOW_BUCKETS - 1)
    }

    /// The `flow_gap` to send with the data datagram `seq` of the flow
    /// hashed to `bucket_hash`, and records `seq` as that bucket's last.
    /// 0 (no predecessor) when the bucket saw nothing yet, when `seq` is not
    /// above the last one (the counter restarted) or when the distance does
    /// not fit in 32 bits.
    pub fn gap(&mut self, bucket_hash: u32, seq: u64) -> u32 {
        let last = &mut self.last[Self::bucket(bucket_hash)];
        let prev = std::mem::replace(last, seq);
        if prev == Self::NONE || seq <= prev {
            return 0;
        }
        u32::try_from(seq - prev).unwrap_or(0)
    }

    /// Forgets every bucket (new session, new sequence counter).
    pub fn clear(&mut self) {
        self.last.fill(Self::NONE);
    }
}

#[cfg(test)]
mod tests;
