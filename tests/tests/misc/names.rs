//! Servers by name, with real daemons and the system resolver: A's path
//! names B by a host name that only A's namespace knows, through
//! `/etc/netns/NS/hosts` (which `ip netns exec` mounts over `/etc/hosts`
//! for the daemon it starts; the test writes the file in place, so the
//! mount shows every change).
//!
//! - A name that does not resolve: A starts anyway, its path is `down`
//!   with the reason in `mpt status --json`; once the hosts file has the
//!   name, the path resolves it (retries 1 s, 2 s) and the tunnel comes up.
//! - B's address changes (a new one added, the hosts file rewritten, the
//!   old one removed; B's path is interface-only and moves by itself): A's
//!   path follows within the re-resolution interval (2 s here) and
//!   traffic through the tunnel resumes, without a restart.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mpt_e2e::*;
use serde_json::Value;

/// The re-resolution interval of the test.
const RESOLVE_INTERVAL: &str = "2s";

/// `/etc/netns/NS/`: a hosts file and a resolv.conf for one namespace,
/// removed on drop. Its resolv.conf points at the namespace's own
/// loopback, where nothing answers: a name missing from the hosts file
/// fails at once, and no query leaves the namespace.
struct NetnsEtc {
    dir: PathBuf,
}

impl NetnsEtc {
    fn new(ns: &Netns) -> Result<Self> {
        let dir = PathBuf::from("/etc/netns").join(ns.name());
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let etc = NetnsEtc { dir };
        fs::write(
            etc.dir.join("resolv.conf"),
            "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
        )?;
        etc.hosts(&[])?;
        Ok(etc)
    }

    /// Writes the hosts file in place (same inode: the daemon's mount
    /// sees it).
    fn hosts(&self, entries: &[(IpAddr, &str)]) -> Result<()> {
        let mut text = String::from("127.0.0.1 localhost\n");
        for (ip, name) in entries {
            text.push_str(&format!("{ip} {name}\n"));
        }
        let file = self.dir.join("hosts");
        fs::write(&file, text).with_context(|| format!("writing {}", file.display()))
    }
}

impl Drop for NetnsEtc {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            eprintln!("warning: could not remove {}: {e}", self.dir.display());
        }
    }
}

/// A's path p0 in A's status document.
fn a_p0(bed: &TestBed) -> Result<Value> {
    Ok(bed.snap(Side::A)?.path("p0")?.raw.clone())
}

#[test]
fn a_path_follows_its_servers_name() {
    let mut spec = BedSpec::keyed(1).learn_remote(Side::B);
    spec.keepalive = Duration::from_millis(500);
    spec.dead_timer = Duration::from_secs(2);
    let mut bed = TestBed::start(spec.clone()).expect("test bed");
    let etc = NetnsEtc::new(&bed.a).expect("A's /etc/netns files");
    let pid = std::process::id();
    // Short: the status table shows `name (address)` in its address column.
    let name = format!("h{pid}.test");
    let old = outer_addr(0, Family::V4, Side::B);
    let b_dev = veth(Side::B, 0);

    // B's path follows its interface's address; A names B by `name`.
    bed.stop_daemon(Side::A).expect("stop A");
    bed.stop_daemon(Side::B).expect("stop B");
    let b_cfg = spec.config(Side::B, &bed.daemon(Side::B).control).replacen(
        &format!("local = \"{}\"\n", outer_addr(0, Family::V4, Side::B)),
        &format!("interface = \"{b_dev}\"\n"),
        1,
    );
    assert!(b_cfg.contains("interface ="), "{b_cfg}");
    bed.restart_daemon(Side::B, Some(&b_cfg)).expect("B");
    let a_cfg = spec
        .config(Side::A, &bed.daemon(Side::A).control)
        .replacen(
            &format!("remote = \"{old}\""),
            &format!("remote = \"{name}\""),
            1,
        )
        .replacen(
            "[daemon]\n",
            &format!("[daemon]\nresolve_interval = \"{RESOLVE_INTERVAL}\"\n"),
            1,
        );
    assert!(a_cfg.contains(&format!("remote = \"{name}\"")), "{a_cfg}");

    // Not in the hosts file yet: A runs, its path is down with the reason.
    bed.restart_daemon(Side::A, Some(&a_cfg))
        .expect("A starts with a name that does not resolve");
    let reason = wait_until(
        "A's p0 down with a resolve error",
        Duration::from_secs(5),
        POLL,
        || {
            bed.check_alive()?;
            let p = a_p0(&bed)?;
            let err = p["resolve_error"].as_str().map(str::to_string);
            Ok((p["state"] == "down" && err.is_some()).then_some(err))
        },
    )
    .expect("unresolved name reported")
    .unwrap_or_default();
    assert!(reason.starts_with(&format!("name {name}: ")), "{reason}");
    let (code, out, err) =
        mpt_ctl(&bed.control_socket(Side::A), &["status", "--json"]).expect("mpt status --json");
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).expect("status JSON");
    let p0 = &doc["connections"][0]["paths"][0];
    assert_eq!(p0["remote_name"].as_str(), Some(name.as_str()), "{p0}");
    assert_eq!(p0["remote"], Value::Null, "{p0}");
    assert_eq!(p0["state"].as_str(), Some("down"), "{p0}");
    assert!(p0["resolve_error"].is_string(), "{p0}");

    // The name appears: the path resolves it and the tunnel comes up.
    let added = Instant::now();
    etc.hosts(&[(old, &name)]).expect("hosts");
    let took = bed
        .wait_tunnel(Side::A, Family::V4, Duration::from_secs(8))
        .expect("tunnel up once the name resolves");
    eprintln!(
        "tunnel up {:?} after the name appeared",
        added.elapsed().max(took)
    );
    let p = a_p0(&bed).expect("status");
    let want_old = SocketAddr::new(old, DATA_PORT).to_string();
    assert_eq!(p["remote"].as_str(), Some(want_old.as_str()), "{p}");
    assert_eq!(p["resolve_error"], Value::Null, "{p}");
    let (code, table, _) = mpt_ctl(&bed.control_socket(Side::A), &["status"]).expect("status");
    assert_eq!(code, 0);
    assert!(
        table.contains(&format!("{name} ({old})")),
        "the table shows the name and the address:\n{table}"
    );

    // B moves: new address, the hosts file follows, the old one goes.
    let new = match old {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], 111))
        }
        IpAddr::V6(_) => unreachable!("IPv4 outer addresses"),
    };
    // Without this the kernel removes the new (secondary) address of the
    // subnet along with the old (primary) one.
    bed.b
        .exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv4.conf.{b_dev}.promote_secondaries=1"),
        ])
        .expect("promote_secondaries");
    bed.b
        .ip(&["addr", "add", &format!("{new}/24"), "dev", &b_dev])
        .expect("B's new address");
    etc.hosts(&[(new, &name)]).expect("hosts");
    let moved = Instant::now();
    bed.b
        .ip(&["addr", "del", &format!("{old}/24"), "dev", &b_dev])
        .expect("B's old address removed");
    let want_new = SocketAddr::new(new, DATA_PORT).to_string();
    let mut seen = Vec::new();
    let followed = wait_until(
        "A's p0 towards B's new address and up",
        Duration::from_secs(6),
        POLL,
        || {
            bed.check_alive()?;
            let p = a_p0(&bed)?;
            let now = format!("{} {}", p["state"], p["remote"]);
            if seen.last() != Some(&now) {
                seen.push(now);
            }
            Ok(
                (p["remote"].as_str() == Some(&want_new) && p["state"] == "up")
                    .then(|| moved.elapsed()),
            )
        },
    )
    .unwrap_or_else(|e| panic!("{e:#}; seen {seen:?}"));
    let resumed = bed
        .wait_tunnel(Side::A, Family::V4, Duration::from_secs(4))
        .expect("traffic through the tunnel after the move");
    eprintln!(
        "p0 followed {name} to {new} after {followed:?} (interval {RESOLVE_INTERVAL}); tunnel answered {resumed:?} later; seen {seen:?}"
    );
    // Within the interval, plus the time to probe the path up again.
    assert!(
        followed < Duration::from_millis(3500),
        "followed after {followed:?}"
    );
    bed.shutdown().expect("clean shutdown");
    drop(etc);
}
