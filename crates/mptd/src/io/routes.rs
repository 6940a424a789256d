//! Routes into the tunnel: a connection's `networks` (and a client's
//! tunnel address) point at the tun device. Set with `ip route`, so the
//! route is the kernel's own and disappears with the interface.

use anyhow::{bail, Context, Result};

use crate::config::Prefix;

/// Routes `net` into the tunnel. The route disappears with the interface.
pub fn add_route(net: &Prefix, dev: &str) -> Result<()> {
    let family = if net.addr.is_ipv4() { "-4" } else { "-6" };
    let out = std::process::Command::new("ip")
        .args([family, "route", "replace", &net.to_string(), "dev", dev])
        .output()
        .context("running `ip route` (is iproute2 installed?)")?;
    if !out.status.success() {
        bail!(
            "ip route replace failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Takes the route to `net` out of the tunnel (a removed client's
/// `networks`).
pub fn del_route(net: &Prefix, dev: &str) -> Result<()> {
    let family = if net.addr.is_ipv4() { "-4" } else { "-6" };
    let out = std::process::Command::new("ip")
        .args([family, "route", "del", &net.to_string(), "dev", dev])
        .output()
        .context("running `ip route` (is iproute2 installed?)")?;
    if !out.status.success() {
        bail!(
            "ip route del failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
