//! The terrestrial hop added to a case's testbed: namespace S (the bundle
//! source, and the sender of the competing flows) joined to A (the relay,
//! the satellite gateway, where the tunnel starts) through an emulator
//! wire in the testbed's middle namespace M:
//!
//! ```text
//!   S vs0 --- ts0 [wire: terrestrial hop] tr0 --- vr0 A ==mpt tunnel, GEO path(s)== B
//!   10.78.0.1                                 10.78.0.2   192.168.77.1       192.168.77.2
//! ```
//!
//! S routes the tunnel's subnet via A, A forwards, and B routes S's subnet
//! into the tunnel (B's mptd `networks`), so end-to-end TCP from S to B
//! crosses both hops exactly as the bundles do. Dropped before the testbed
//! (the wire stops, then S is deleted with its veths).

use anyhow::Context;

use crate::bench::scenario::link::Link;
use mpt_emu::netns::{ip, Netns, PREFIX};
use mpt_emu::sys;
use mpt_emu::wire::{Wire, WireConfig};

/// S's subnet, routed by B into the tunnel.
pub const SUBNET: &str = "10.78.0.0/24";
pub const S_ADDR: &str = "10.78.0.1";
pub const RELAY_ADDR: &str = "10.78.0.2";

/// The terrestrial hop; field order is drop order.
pub struct Terrestrial {
    wire: Option<Wire>,
    pub s: Netns,
}

impl Terrestrial {
    /// Builds S and the hop between S and `a` through a wire in `m`, with
    /// the tunnel's subnet `tunnel_subnet` routed from S via A.
    pub fn build(
        k: usize,
        link: &Link,
        a: &str,
        m: &str,
        tunnel_subnet: &str,
    ) -> anyhow::Result<Terrestrial> {
        let Link::Emu { a_to_b, b_to_a, .. } = link else {
            anyhow::bail!("the terrestrial hop must be emulated");
        };
        let s = Netns::create(&format!("{PREFIX}{}-bench{k}-s", std::process::id()))
            .context("creating namespace S")?;
        let sn = s.name().to_string();
        ip(&["-n", &sn, "link", "set", "dev", "lo", "up"])?;
        ip(&[
            "link", "add", "vs0", "netns", &sn, "type", "veth", "peer", "name", "ts0", "netns", m,
        ])?;
        ip(&[
            "link", "add", "vr0", "netns", a, "type", "veth", "peer", "name", "tr0", "netns", m,
        ])?;
        for (ns, dev) in [(m, "ts0"), (m, "tr0"), (sn.as_str(), "vs0"), (a, "vr0")] {
            ip(&["-n", ns, "link", "set", "dev", dev, "up"])?;
        }
        ip(&[
            "-n",
            &sn,
            "addr",
            "add",
            &format!("{S_ADDR}/24"),
            "dev",
            "vs0",
        ])?;
        ip(&[
            "-n",
            a,
            "addr",
            "add",
            &format!("{RELAY_ADDR}/24"),
            "dev",
            "vr0",
        ])?;
        ip(&["-n", &sn, "route", "add", tunnel_subnet, "via", RELAY_ADDR])?;
        s.run(|| sys::disable_offloads("vs0"))
            .context("offloads in S")?;
        mpt_emu::netns::in_netns(a, || {
            sys::disable_offloads("vr0")?;
            std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        })
        .context("offloads and forwarding in A")?;
        let wire = Wire::start(WireConfig {
            a: "ts0".into(),
            b: "tr0".into(),
            netns: Some(m.to_string()),
            a_to_b: (**a_to_b).clone(),
            b_to_a: (**b_to_a).clone(),
            seed: 77,
            disable_offloads: true,
            realtime_priority: None,
        })
        .context("starting the terrestrial hop's emulator")?;
        Ok(Terrestrial {
            wire: Some(wire),
            s,
        })
    }

    /// Has the hop's wire stopped on an error?
    pub fn failed(&self) -> bool {
        self.wire.as_ref().is_some_and(Wire::is_finished)
    }

    /// Stops the wire; its report as JSON.
    pub fn stop(&mut self) -> Option<serde_json::Value> {
        let w = self.wire.take()?;
        Some(match w.stop() {
            Ok(r) => serde_json::to_value(&r).unwrap_or(serde_json::Value::Null),
            Err(e) => serde_json::json!({ "error": e.to_string() }),
        })
    }
}

/// Sets the default congestion control of namespace `ns` (per-namespace
/// sysctl; new sockets there use it).
pub fn set_cc(ns: &str, cc: &str) -> anyhow::Result<()> {
    let cc = cc.to_string();
    mpt_emu::netns::in_netns(ns, move || {
        std::fs::write("/proc/sys/net/ipv4/tcp_congestion_control", &cc)
    })
    .with_context(|| {
        // Outside the initial namespace only the allowed ones can be a
        // default (EPERM otherwise).
        let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
            .unwrap_or_default();
        format!(
            "setting tcp_congestion_control in {ns} (a namespace's default must be one of \
             net.ipv4.tcp_allowed_congestion_control: {})",
            allowed.trim()
        )
    })
}

/// The default congestion control of namespace `ns`.
pub fn get_cc(ns: &str) -> anyhow::Result<String> {
    mpt_emu::netns::in_netns(ns, || {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
    })
    .map(|s| s.trim().to_string())
    .with_context(|| format!("reading tcp_congestion_control in {ns}"))
}
