//! Throw-away network namespaces for the self-test (and tests): created with
//! `ip netns`, removed when the guard drops — on success, error, panic
//! unwinding, and on SIGINT/SIGTERM because those only set a stop flag that
//! every loop checks, so the stack unwinds normally.
//!
//! Names are `mptemu-<pid>-<role>`, unique per process. A run killed with
//! SIGKILL cannot clean up; the next self-test removes namespaces whose
//! owner pid is gone ([`remove_stale`]).

use std::io;
use std::process::Command;

use tracing::{debug, warn};

use super::sys;

/// Prefix of every namespace this module creates.
pub const PREFIX: &str = "mptemu-";

/// Runs `ip ARGS...`; the error carries the command and its stderr.
pub fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run ip (iproute2): {e}")))?;
    if out.status.success() {
        debug!(cmd = %args.join(" "), "ip");
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// A network namespace deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    pub fn create(name: &str) -> io::Result<Netns> {
        ip(&["netns", "add", name])?;
        Ok(Netns {
            name: name.to_string(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on a fresh thread inside this namespace (network namespaces
    /// are per thread). Sockets `f` opens stay in the namespace.
    pub fn run<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> io::Result<T> + Send + 'static,
    {
        in_netns(&self.name, f)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            warn!(netns = %self.name, error = %e, "could not remove namespace");
        }
    }
}

/// Runs `f` on a new thread that first enters namespace `name`.
pub fn in_netns<T, F>(name: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let name = name.to_string();
    std::thread::spawn(move || {
        sys::enter_netns(&name)?;
        f()
    })
    .join()
    .map_err(|_| io::Error::other("namespace helper thread panicked"))?
}

/// Removes `mptemu-<pid>-*` namespaces whose process no longer exists.
pub fn remove_stale() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            match ip(&["netns", "del", &name]) {
                Ok(()) => warn!(netns = %name, "removed a namespace left by a killed run"),
                Err(e) => warn!(netns = %name, error = %e, "could not remove stale namespace"),
            }
        }
    }
}

/// Writes a sysctl under /proc/sys/net inside the caller thread's namespace;
/// a missing key (e.g. IPv6 compiled out) is not an error.
fn sysctl_net(key: &str, value: &str) -> io::Result<()> {
    let path = format!("/proc/sys/net/{key}");
    match std::fs::write(&path, value) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}"))),
    }
}

/// Addresses of the self-test testbed.
pub const A_IF: &str = "a0";
pub const B_IF: &str = "b0";
pub const M_A_IF: &str = "ma";
pub const M_B_IF: &str = "mb";
pub const A_IP: &str = "10.77.0.1";
pub const B_IP: &str = "10.77.0.2";
const A_MAC: &str = "02:6d:70:74:00:0a";
const B_MAC: &str = "02:6d:70:74:00:0b";
const MA_MAC: &str = "02:6d:70:74:01:0a";
const MB_MAC: &str = "02:6d:70:74:01:0b";

/// Three namespaces: `a` and `b` are the endpoints (one subnet, static
/// neighbours so no ARP has to cross the impaired wire), `m` holds the wire
/// between veth `ma` (peer `a0`) and `mb` (peer `b0`). IPv6 is off so no
/// router solicitations or MLD reports cross the wire; offloads are off on
/// all four ends so every frame is one packet.
#[derive(Debug)]
pub struct Testbed {
    pub a: Netns,
    pub b: Netns,
    pub m: Netns,
}

impl Testbed {
    pub fn build(tag: &str) -> io::Result<Testbed> {
        let base = format!("{PREFIX}{}-{tag}", std::process::id());
        let a = Netns::create(&format!("{base}-a"))?;
        let b = Netns::create(&format!("{base}-b"))?;
        let m = Netns::create(&format!("{base}-m"))?;
        for ns in [&a, &b, &m] {
            ns.run(|| {
                sysctl_net("ipv6/conf/all/disable_ipv6", "1")?;
                sysctl_net("ipv6/conf/default/disable_ipv6", "1")
            })?;
        }
        for (ns, ifname, mac, peer, peer_mac) in [
            (&a, A_IF, A_MAC, M_A_IF, MA_MAC),
            (&b, B_IF, B_MAC, M_B_IF, MB_MAC),
        ] {
            ip(&[
                "link",
                "add",
                ifname,
                "netns",
                ns.name(),
                "address",
                mac,
                "type",
                "veth",
                "peer",
                "name",
                peer,
                "netns",
                m.name(),
                "address",
                peer_mac,
            ])?;
        }
        for (ns, ifname, addr, peer_ip, peer_mac) in
            [(&a, A_IF, A_IP, B_IP, B_MAC), (&b, B_IF, B_IP, A_IP, A_MAC)]
        {
            let n = ns.name();
            ip(&["-n", n, "link", "set", "dev", "lo", "up"])?;
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", ifname])?;
            ip(&["-n", n, "link", "set", "dev", ifname, "up"])?;
            ip(&[
                "-n",
                n,
                "neigh",
                "replace",
                peer_ip,
                "lladdr",
                peer_mac,
                "dev",
                ifname,
                "nud",
                "permanent",
            ])?;
            let ifname = ifname.to_string();
            ns.run(move || sys::disable_offloads(&ifname))?;
        }
        for ifname in [M_A_IF, M_B_IF] {
            // `dev` is needed: ip would read a bare "ma" as "master".
            ip(&["-n", m.name(), "link", "set", "dev", ifname, "up"])?;
        }
        m.run(|| {
            [M_A_IF, M_B_IF]
                .iter()
                .try_for_each(|i| sys::disable_offloads(i))
        })?;
        Ok(Testbed { a, b, m })
    }
}
