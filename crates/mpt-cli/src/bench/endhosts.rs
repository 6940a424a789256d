//! End hosts behind the gateways, for the TCP acceleration variant of the
//! bench (issue 36): mptd only splits TCP flows it *forwards* (from its LAN
//! into the tunnel), never the gateway's own connections, so measuring it
//! needs a client host C behind A and a server host S behind B:
//!
//! ```text
//!   C lc0 ---- la0 A ==mpt tunnel, the case's paths== B sb0 ---- ss0 S
//!   10.78.0.2  10.78.0.1                      10.79.0.1  10.79.0.2
//! ```
//!
//! The two LAN hops are plain veths (no shaping: a LAN round trip). C and
//! S route everything via their gateway; A and B forward. A routes S's
//! subnet into the tunnel and B routes C's (the mptd `networks` the
//! [`super::testbed::Plan`] writes when end hosts are asked for). The
//! namespaces are deleted on drop, which also removes their veths.

use anyhow::Context;

use mpt_emu::netns::{in_netns, ip, Netns};
use mpt_emu::sys;

/// C's subnet (behind A) and addresses.
pub const C_SUBNET: &str = "10.78.0.0/24";
pub const C_ADDR: &str = "10.78.0.2";
const A_LAN: &str = "10.78.0.1";
/// S's subnet (behind B) and addresses.
pub const S_SUBNET: &str = "10.79.0.0/24";
pub const S_ADDR: &str = "10.79.0.2";
const B_LAN: &str = "10.79.0.1";

/// The two end-host namespaces; deleted on drop.
pub struct EndHosts {
    pub c: Netns,
    pub s: Netns,
}

impl EndHosts {
    /// Creates `<base>-c` behind namespace `a` and `<base>-s` behind `b`,
    /// with addresses, routes and forwarding as drawn above.
    pub fn build(base: &str, a: &str, b: &str) -> anyhow::Result<EndHosts> {
        let c = Netns::create(&format!("{base}-c")).context("creating end host C")?;
        let s = Netns::create(&format!("{base}-s")).context("creating end host S")?;
        for (host, gw, hif, gif, haddr, gaddr) in [
            (&c, a, "lc0", "la0", C_ADDR, A_LAN),
            (&s, b, "ss0", "sb0", S_ADDR, B_LAN),
        ] {
            let hn = host.name();
            ip(&["-n", hn, "link", "set", "dev", "lo", "up"])?;
            ip(&[
                "link", "add", hif, "netns", hn, "type", "veth", "peer", "name", gif, "netns", gw,
            ])?;
            ip(&["-n", hn, "addr", "add", &format!("{haddr}/24"), "dev", hif])?;
            ip(&["-n", gw, "addr", "add", &format!("{gaddr}/24"), "dev", gif])?;
            ip(&["-n", hn, "link", "set", "dev", hif, "up"])?;
            ip(&["-n", gw, "link", "set", "dev", gif, "up"])?;
            ip(&["-n", hn, "route", "add", "default", "via", gaddr])?;
            let hif2 = hif.to_string();
            host.run(move || sys::disable_offloads(&hif2))
                .with_context(|| format!("offloads in {hn}"))?;
            let gif2 = gif.to_string();
            in_netns(gw, move || {
                sys::disable_offloads(&gif2)?;
                std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")?;
                // Replies to C come back through the tunnel, not la0.
                std::fs::write("/proc/sys/net/ipv4/conf/all/rp_filter", "0")
            })
            .with_context(|| format!("offloads and forwarding in {gw}"))?;
        }
        Ok(EndHosts { c, s })
    }
}
