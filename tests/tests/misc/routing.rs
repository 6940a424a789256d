//! Policy routing on a branch office (issue 32), with real daemons and
//! kernel routing in namespaces:
//!
//! ```text
//!             u1 10.1.1.2 --- 10.1.1.1 [R1] 172.16.1.1 --- c1 172.16.1.2
//!   branch B                  (masquerade)                              C  198.51.100.10 (lo)
//!             u2 10.2.2.2 --- 10.2.2.1 [R2] 172.16.2.1 --- c2 172.16.2.2   203.0.113.50 (lo)
//! ```
//!
//! B has `default via 10.1.1.1 dev u1` (metric 0) and `default via
//! 10.2.2.1 dev u2 metric 200`, paths by `interface` only, `networks =
//! ["0.0.0.0/0"]`. The concentrator C serves both paths on its one
//! address 198.51.100.10, which B's paths know by name only (`remote =
//! "hub-PID.test"`, from `/etc/netns/B/hosts`, which `ip netns exec`
//! mounts over `/etc/hosts`); 203.0.113.50 stands for a host behind it
//! (reachable from B only through the tunnel: the routers have no route
//! to it).
//!
//! Checked: the tunnel comes up, both uplinks carry tunnel traffic (the
//! routers' WAN counters), pings to 203.0.113.50 are answered, B's main
//! table keeps both defaults while mptd runs, and B's rules and routes are
//! identical before start and after a SIGTERM stop, and after `kill -9`
//! plus a restart and a stop. Then R1 loses its upstream (its WAN link
//! down, B's u1 stays up): the longest gap in 20/s pings through the
//! tunnel is measured and must be under 1 s.

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use mpt_e2e::*;

const CONC: &str = "198.51.100.10";
const BEHIND: &str = "203.0.113.50";
const KEEPALIVE_MS: u64 = 100;
const DEAD_MS: u64 = 400;

/// `/etc/netns/NS/`: B's hosts file naming the concentrator, and a
/// resolv.conf pointing at B's own loopback (no query leaves B); removed
/// on drop.
struct EtcDir(std::path::PathBuf);

impl EtcDir {
    fn new(ns: &Netns, name: &str) -> Result<EtcDir> {
        let dir = std::path::PathBuf::from("/etc/netns").join(ns.name());
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let etc = EtcDir(dir);
        fs::write(
            etc.0.join("resolv.conf"),
            "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
        )?;
        fs::write(
            etc.0.join("hosts"),
            format!("127.0.0.1 localhost\n{CONC} {name}\n"),
        )?;
        Ok(etc)
    }
}

impl Drop for EtcDir {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.0) {
            eprintln!("warning: could not remove {}: {e}", self.0.display());
        }
    }
}

/// The concentrator's name, as B's hosts file gives it.
fn conc_name() -> String {
    format!("hub-{}.test", std::process::id())
}

struct Bed {
    etc: Option<EtcDir>,
    b: Netns,
    r1: Netns,
    r2: Netns,
    c: Netns,
    dir: TempDir,
}

fn veth(a: &Netns, an: &str, aaddr: &str, b: &Netns, bn: &str, baddr: &str) -> Result<()> {
    run(
        "ip",
        &[
            "link",
            "add",
            an,
            "netns",
            a.name(),
            "type",
            "veth",
            "peer",
            "name",
            bn,
            "netns",
            b.name(),
        ],
    )?;
    a.ip(&["addr", "add", aaddr, "dev", an])?;
    b.ip(&["addr", "add", baddr, "dev", bn])?;
    a.set_link(an, true)?;
    b.set_link(bn, true)
}

fn router(r: &Netns, wan: &str, conc_side: &str) -> Result<()> {
    r.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    r.ip(&["route", "add", &format!("{CONC}/32"), "via", conc_side])?;
    r.exec(&["nft", "add table ip nat"])?;
    r.exec(&[
        "nft",
        "add chain ip nat post { type nat hook postrouting priority 100 ; }",
    ])?;
    r.exec(&[
        "nft",
        "add",
        "rule",
        "ip",
        "nat",
        "post",
        "oifname",
        wan,
        "masquerade",
    ])?;
    Ok(())
}

impl Bed {
    fn new() -> Result<Bed> {
        let mut bed = Bed {
            etc: None,
            b: Netns::new("rt-b")?,
            r1: Netns::new("rt-r1")?,
            r2: Netns::new("rt-r2")?,
            c: Netns::new("rt-c")?,
            dir: TempDir::new("routing")?,
        };
        // No duplicate address detection in B: its link-local addresses
        // (and their routes) are there at once, so the state taken before
        // mptd starts is the settled one.
        for key in ["all", "default"] {
            bed.b.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.accept_dad=0"),
            ])?;
        }
        veth(&bed.b, "u1", "10.1.1.2/24", &bed.r1, "r1b", "10.1.1.1/24")?;
        veth(&bed.b, "u2", "10.2.2.2/24", &bed.r2, "r2b", "10.2.2.1/24")?;
        veth(
            &bed.r1,
            "r1w",
            "172.16.1.1/30",
            &bed.c,
            "c1",
            "172.16.1.2/30",
        )?;
        veth(
            &bed.r2,
            "r2w",
            "172.16.2.1/30",
            &bed.c,
            "c2",
            "172.16.2.2/30",
        )?;
        bed.c
            .ip(&["addr", "add", &format!("{CONC}/32"), "dev", "lo"])?;
        bed.c
            .ip(&["addr", "add", &format!("{BEHIND}/32"), "dev", "lo"])?;
        router(&bed.r1, "r1w", "172.16.1.2")?;
        router(&bed.r2, "r2w", "172.16.2.2")?;
        bed.b
            .ip(&["route", "add", "default", "via", "10.1.1.1", "dev", "u1"])?;
        bed.b.ip(&[
            "route", "add", "default", "via", "10.2.2.1", "dev", "u2", "metric", "200",
        ])?;
        bed.etc = Some(EtcDir::new(&bed.b, &conc_name())?);
        let key = random_key()?;
        for side in ["b", "c"] {
            write_key_file(&bed.dir.path().join(format!("{side}.key")), &key, 0o600)?;
        }
        fs::write(bed.dir.path().join("b.toml"), bed.config_b())?;
        fs::write(bed.dir.path().join("c.toml"), bed.config_c())?;
        Ok(bed)
    }

    fn common(&self, side: &str, addr: &str, peer: &str) -> String {
        let d = self.dir.path().display();
        format!(
            "[daemon]\ncontrol = \"{d}/{side}.sock\"\nlog = \"info\"\n\n[tunnel]\nname = \"{TUN}\"\nmtu = {MTU}\nipv4 = \"{addr}/24\"\n\n[[connection]]\nname = \"hub\"\npeer_ipv4 = \"{peer}\"\nport = {DATA_PORT}\nremote_port = {DATA_PORT}\nkeepalive = \"{KEEPALIVE_MS}ms\"\ndead_timer = \"{DEAD_MS}ms\"\nscheduler = \"weighted\"\nkey_file = \"{d}/{side}.key\"\n"
        )
    }

    fn config_b(&self) -> String {
        let mut s = self.common("b", "10.99.0.1", "10.99.0.2");
        s.push_str("networks = [\"0.0.0.0/0\"]\n");
        for (name, dev) in [("dsl", "u1"), ("lte", "u2")] {
            s.push_str(&format!(
                "\n[[connection.path]]\nname = \"{name}\"\ninterface = \"{dev}\"\nremote = \"{}\"\n",
                conc_name()
            ));
        }
        s
    }

    fn config_c(&self) -> String {
        let mut s = self.common("c", "10.99.0.2", "10.99.0.1");
        for (name, dev) in [("dsl", "c1"), ("lte", "c2")] {
            s.push_str(&format!(
                "\n[[connection.path]]\nname = \"{name}\"\nlocal = \"{CONC}\"\ninterface = \"{dev}\"\n"
            ));
        }
        s
    }

    fn start(&self, side: &str, ns: &Netns, run: u32) -> Result<Daemon> {
        let d = self.dir.path();
        let mut daemon = Daemon::start(
            ns,
            side,
            &d.join(format!("{side}.toml")),
            &d.join(format!("{side}.sock")),
            &d.join(format!("{side}-{run}.log")),
        )?;
        daemon.wait_ready(ns, TUN, Duration::from_secs(5))?;
        Ok(daemon)
    }
}

/// B's rules and every table of both families, as `ip` prints them.
fn routing_state(ns: &Netns) -> Result<String> {
    let mut out = String::new();
    for args in [
        &["-4", "rule"][..],
        &["-6", "rule"],
        &["-4", "route", "show", "table", "all"],
        &["-6", "route", "show", "table", "all"],
    ] {
        out.push_str(&format!("== ip {}\n{}", args.join(" "), ns.ip(args)?));
    }
    Ok(out)
}

fn wait_both_paths_up(daemon: &mut Daemon) -> Result<()> {
    wait_until("both paths up", Duration::from_secs(5), POLL, || {
        daemon.check_alive()?;
        let c = daemon.conn("hub")?;
        let up = ["dsl", "lte"]
            .iter()
            .all(|p| c.path(p).is_ok_and(|p| p.state == "up"));
        Ok(up.then_some(()))
    })
}

fn ping(ns: &Netns, count: u32, interval: &str) -> Result<u32> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "ping", "-n", "-q", "-c"])
        .arg(count.to_string())
        .args(["-i", interval, "-W", "1", BEHIND])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let received = text
        .split(',')
        .find_map(|f| f.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("ping output: {text}"))?;
    Ok(received)
}

fn wan_tx(r: &Netns, dev: &str) -> Result<u64> {
    Ok(r.link_stats(dev)?.tx_bytes)
}

fn same(before: &str, after: &str, when: &str) -> Result<()> {
    ensure!(
        before == after,
        "B's rules and routes differ {when}:\n--- before\n{before}\n--- after\n{after}"
    );
    Ok(())
}

#[test]
fn full_tunnel_branch_both_uplinks_clean_exit_and_upstream_failure() -> Result<()> {
    let bed = Bed::new()?;
    let before = routing_state(&bed.b)?;
    let mut c = bed.start("c", &bed.c, 0)?;
    let mut b = bed.start("b", &bed.b, 0)?;
    wait_both_paths_up(&mut b)?;

    // The main table keeps both defaults, untouched.
    let defaults = bed.b.ip(&["-4", "route", "show", "default"])?;
    ensure!(
        defaults.contains("via 10.1.1.1 dev u1") && defaults.contains("via 10.2.2.1 dev u2"),
        "B's main defaults changed while mptd runs:\n{defaults}"
    );

    // Pings to the host behind C: through the tunnel (the routers do not
    // know that address), on both uplinks.
    let tx1 = wan_tx(&bed.r1, "r1w")?;
    let tx2 = wan_tx(&bed.r2, "r2w")?;
    let got = ping(&bed.b, 100, "0.01")?;
    ensure!(
        got >= 95,
        "only {got}/100 pings through the full tunnel answered"
    );
    let d1 = wan_tx(&bed.r1, "r1w")? - tx1;
    let d2 = wan_tx(&bed.r2, "r2w")? - tx2;
    eprintln!("tunnel bytes out of R1's WAN {d1}, R2's WAN {d2} (100 pings)");
    ensure!(
        d1 > 3000 && d2 > 3000,
        "an uplink carries no tunnel traffic: R1 {d1} B, R2 {d2} B"
    );
    let st = b.status()?;
    let paths = &st["routing"]["paths"];
    eprintln!("status routing: {}", st["routing"]);
    ensure!(
        paths[0]["uplink"] == "u1" && paths[1]["uplink"] == "u2",
        "status routing paths: {paths}"
    );
    // (The paths know the concentrator by name, so both families are
    // planned; B has no IPv6 default: "10.2.2.1, none (...)".)
    ensure!(
        paths[1]["gateway"]
            .as_str()
            .is_some_and(|g| g.starts_with("10.2.2.1")),
        "lte's gateway: {paths}"
    );
    // Both paths reached the concentrator by its name.
    for p in st["connections"][0]["paths"]
        .as_array()
        .into_iter()
        .flatten()
    {
        ensure!(
            p["remote_name"] == conc_name().as_str()
                && p["remote"].as_str().is_some_and(|r| r.starts_with(CONC)),
            "path {} does not show the name and its address: {p}",
            p["name"]
        );
    }

    // SIGTERM: everything gone.
    b.stop_clean(&bed.b, TUN)?;
    same(&before, &routing_state(&bed.b)?, "after a SIGTERM stop")?;

    // kill -9 leaves rules and tables; the next start removes them, and its
    // stop leaves the host as it was.
    let mut b = bed.start("b", &bed.b, 1)?;
    wait_both_paths_up(&mut b)?;
    let pid = b.pid().context("pid")?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    let _ = b.stop(Duration::from_secs(3));
    wait_until(
        "tun gone after kill -9",
        Duration::from_secs(2),
        POLL,
        || Ok((!bed.b.link_exists(TUN)).then_some(())),
    )?;
    let killed = routing_state(&bed.b)?;
    ensure!(
        killed != before,
        "kill -9 left nothing to clean up (the check could not fail)"
    );
    let mut b = bed.start("b", &bed.b, 2)?;
    wait_both_paths_up(&mut b)?;
    b.stop_clean(&bed.b, TUN)?;
    same(
        &before,
        &routing_state(&bed.b)?,
        "after kill -9, a restart and a stop",
    )?;

    // R1's upstream fails; B's u1 stays up: pings through the tunnel go on.
    let mut b = bed.start("b", &bed.b, 3)?;
    wait_both_paths_up(&mut b)?;
    let gap = upstream_failure_gap(&bed)?;
    eprintln!("R1's WAN down: longest gap in 20/s pings through the tunnel {gap:?} (keepalive {KEEPALIVE_MS} ms, dead timer {DEAD_MS} ms)");
    ensure!(
        gap < Duration::from_secs(1),
        "pings stopped for {gap:?} after R1's upstream failed"
    );
    b.stop_clean(&bed.b, TUN)?;
    c.stop_clean(&bed.c, TUN)?;
    same(&before, &routing_state(&bed.b)?, "after the last stop")?;
    Ok(())
}

/// Pings at 20/s for 4 s, R1's WAN link down after 1 s; the longest time
/// between two answered pings.
fn upstream_failure_gap(bed: &Bed) -> Result<Duration> {
    const INTERVAL_MS: u64 = 50;
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            bed.b.name(),
            "ping",
            "-n",
            "-i",
            "0.05",
            "-W",
            "1",
            "-c",
            "80",
            BEHIND,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(1000));
    let t = Instant::now();
    bed.r1.set_link("r1w", false)?;
    eprintln!("R1's WAN down ({:?})", t.elapsed());
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut seqs: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split("icmp_seq=").nth(1))
        .filter_map(|s| s.split_whitespace().next()?.parse().ok())
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    ensure!(
        seqs.len() > 40,
        "too few pings answered: {}\n{text}",
        seqs.len()
    );
    let first = *seqs.first().unwrap_or(&1);
    let last = *seqs.last().unwrap_or(&1);
    ensure!(
        first <= 2 && last >= 78,
        "pings did not run through: seqs {first}..{last}"
    );
    let worst = seqs.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(1);
    // The paths take turns (weighted scheduler), so the failed one loses
    // every other ping until it is declared down: the count says how long.
    eprintln!("pings lost: {} of 80", 80 - seqs.len());
    Ok(Duration::from_millis(worst * INTERVAL_MS))
}
