//! One server, many clients on one shared port (issue 14): the server's
//! config lists each client as a `[[connection]]` with its `public_key`
//! and no paths; every client reaches the server on port 65022, and the
//! server learns the clients' paths from their datagrams.
//!
//! - three clients (one with two paths, one over IPv6) ping the server and
//!   send it a TCP transfer, intact, all at the same time;
//! - a client whose source port changes (its daemon restarted on another
//!   port, as behind a NAT that rebinds) is served again, and the server
//!   learns its new address;
//! - a client whose NAT rebinds in the middle of its session (its source
//!   port rewritten by nftables while a ping runs; the client's daemon
//!   keeps its socket) loses at most a few pings, and the server learns
//!   the new port from the first datagram that authenticates;
//! - a client whose key the server does not list gets no tunnel, and the
//!   refusal is counted (`noise.refused.unknown_peer`); initiations not
//!   made for the server's key are dropped by the receive workers and
//!   counted (`shared_port.bad_mac1`) without reaching the handshake;
//! - a server with two addresses on each link, reached on the second one
//!   by a client behind a stateful firewall (replies from any other
//!   address are dropped), gives that client its tunnel over IPv4 and
//!   IPv6: its replies leave from the address the client sends to;
//! - `mpt reload` adds that client (it gets its tunnel without a restart)
//!   and removes another, which is cut off within a second while the
//!   others carry on; its datagrams are refused and counted.
//!
//! Traffic is only sent to addresses inside the test's own namespaces.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mpt_e2e::*;
use serde_json::Value;

/// The server's tunnel address.
const SERVER_INNER: &str = "10.99.0.1";

/// One client: its namespace, links to the server, key and daemon.
struct Client {
    name: String,
    /// Veth pair numbers (one per path) and whether the path is IPv6.
    links: Vec<(usize, bool)>,
    public_key: String,
    private_key: PathBuf,
    /// The client's local UDP port (changed to simulate NAT rebinding).
    port: u16,
}

impl Client {
    fn inner(&self, k: usize) -> String {
        format!("10.99.0.{}", 10 + k)
    }
}

/// Field order is drop order: daemons stop before their namespaces go.
struct Bed {
    server: Option<Daemon>,
    clients: Vec<Option<Daemon>>,
    cfg: Vec<Client>,
    server_ns: Netns,
    client_ns: Vec<Netns>,
    server_public: String,
    server_private: PathBuf,
    dir: TempDir,
}

fn outer(link: usize, v6: bool, server: bool) -> String {
    let host = if server { 1 } else { 2 };
    if v6 {
        format!("fd78:{link}::{host}")
    } else {
        format!("10.78.{link}.{host}")
    }
}

impl Bed {
    fn new(spec: &[(&str, Vec<bool>)]) -> Result<Bed> {
        let dir = TempDir::new("shared")?;
        let server_ns = Netns::new("srv")?;
        let server_private = dir.path().join("server.private");
        let server_public = keypair(&server_private)?;
        let mut client_ns = Vec::new();
        let mut cfg = Vec::new();
        let mut link = 1;
        for (name, paths) in spec {
            let ns = Netns::new(name)?;
            let mut links = Vec::new();
            for &v6 in paths {
                let (a, b) = (format!("s{link}"), format!("c{link}"));
                server_ns.ip(&[
                    "link",
                    "add",
                    &a,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &b,
                    "netns",
                    ns.name(),
                ])?;
                for (n, dev, server) in [(&server_ns, &a, true), (&ns, &b, false)] {
                    let addr = outer(link, v6, server);
                    let plen = if v6 { "64" } else { "24" };
                    let mut args = vec!["addr", "add"];
                    let full = format!("{addr}/{plen}");
                    args.extend([full.as_str(), "dev", dev.as_str()]);
                    if v6 {
                        args.push("nodad");
                    }
                    n.ip(&args)?;
                    n.set_link(dev, true)?;
                }
                links.push((link, v6));
                link += 1;
            }
            let private_key = dir.path().join(format!("{name}.private"));
            let public_key = keypair(&private_key)?;
            client_ns.push(ns);
            cfg.push(Client {
                name: name.to_string(),
                links,
                public_key,
                private_key,
                port: DATA_PORT,
            });
        }
        Ok(Bed {
            server: None,
            clients: cfg.iter().map(|_| None).collect(),
            cfg,
            server_ns,
            client_ns,
            server_public,
            server_private,
            dir,
        })
    }

    fn control(&self, who: &str) -> PathBuf {
        self.dir.path().join(format!("{who}.sock"))
    }

    /// The server's config listing clients `listed`.
    fn server_config(&self, listed: &[usize]) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "[daemon]\ncontrol = {:?}\nlog = \"info\"\nthreads = 2\nprivate_key_file = {:?}\n",
            self.control("server").display().to_string(),
            self.server_private.display().to_string()
        );
        let _ = writeln!(
            s,
            "[tunnel]\nname = {TUN:?}\nmtu = {MTU}\nipv4 = \"{SERVER_INNER}/24\"\n"
        );
        for &k in listed {
            let c = &self.cfg[k];
            let _ = writeln!(
                s,
                "[[connection]]\nname = {:?}\npeer_ipv4 = {:?}\npublic_key = {:?}\nkeepalive = \"200ms\"\ndead_timer = \"1s\"\n",
                c.name,
                c.inner(k),
                c.public_key
            );
        }
        s
    }

    fn client_config(&self, k: usize) -> String {
        let c = &self.cfg[k];
        let mut s = String::new();
        let _ = writeln!(
            s,
            "[daemon]\ncontrol = {:?}\nlog = \"info\"\nthreads = 1\nprivate_key_file = {:?}\n",
            self.control(&c.name).display().to_string(),
            c.private_key.display().to_string()
        );
        let _ = writeln!(
            s,
            "[tunnel]\nname = {TUN:?}\nmtu = {MTU}\nipv4 = \"{}/24\"\n",
            c.inner(k)
        );
        let _ = writeln!(
            s,
            "[[connection]]\nname = \"server\"\npeer_ipv4 = \"{SERVER_INNER}\"\nport = {}\nremote_port = {DATA_PORT}\npublic_key = {:?}\nkeepalive = \"200ms\"\ndead_timer = \"1s\"\nscheduler = \"weighted\"",
            c.port, self.server_public
        );
        for (i, &(link, v6)) in c.links.iter().enumerate() {
            let _ = writeln!(
                s,
                "\n[[connection.path]]\nname = \"p{i}\"\nlocal = {:?}\nremote = {:?}",
                outer(link, v6, false),
                outer(link, v6, true)
            );
        }
        s
    }

    fn write(&self, who: &str, text: &str) -> Result<PathBuf> {
        let p = self.dir.path().join(format!("{who}.toml"));
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        Ok(p)
    }

    fn start_server(&mut self, listed: &[usize]) -> Result<()> {
        let config = self.write("server", &self.server_config(listed))?;
        let control = self.control("server");
        let log = self.dir.path().join("server.log");
        let mut d = Daemon::start(&self.server_ns, "server", &config, &control, &log)?;
        d.wait_ready(&self.server_ns, TUN, Duration::from_secs(10))?;
        self.server = Some(d);
        Ok(())
    }

    fn start_client(&mut self, k: usize) -> Result<()> {
        self.start_client_with(k, &self.client_config(k))
    }

    fn start_client_with(&mut self, k: usize, text: &str) -> Result<()> {
        let name = self.cfg[k].name.clone();
        let config = self.write(&name, text)?;
        let control = self.control(&name);
        let log = self.dir.path().join(format!("{name}.log"));
        let mut d = Daemon::start(&self.client_ns[k], &name, &config, &control, &log)?;
        d.wait_ready(&self.client_ns[k], TUN, Duration::from_secs(10))?;
        self.clients[k] = Some(d);
        Ok(())
    }

    fn server(&self) -> &Daemon {
        self.server.as_ref().expect("server running")
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        if let Some(d) = &self.server {
            let _ = writeln!(s, "server's log:\n{}", d.log_tail(40));
        }
        for d in self.clients.iter().flatten() {
            let _ = writeln!(s, "{}'s log:\n{}", d.label(), d.log_tail(15));
        }
        s
    }

    /// Pings the server from client `k`: (sent, received).
    fn ping(&self, k: usize, n: u32, interval: &str) -> (u64, u64, String) {
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                self.client_ns[k].name(),
                "ping",
                "-n",
                "-q",
            ])
            .args([
                "-i",
                interval,
                "-W",
                "1",
                "-c",
                &n.to_string(),
                SERVER_INNER,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ping (iputils-ping installed?)");
        ping_result(child)
    }

    /// Waits until client `k` reaches the server through the tunnel.
    fn wait_tunnel(&self, k: usize, timeout: Duration) -> Result<Duration> {
        let t0 = Instant::now();
        wait_until(
            &format!("a ping from {} through the tunnel", self.cfg[k].name),
            timeout,
            Duration::from_millis(100),
            || {
                let out = self.client_ns[k].exec(&[
                    "ping",
                    "-n",
                    "-q",
                    "-c",
                    "1",
                    "-W",
                    "1",
                    SERVER_INNER,
                ]);
                Ok(out.ok().filter(|o| o.contains(" 1 received")).map(|_| ()))
            },
        )
        .with_context(|| self.logs())?;
        Ok(t0.elapsed())
    }

    /// The server's status object of connection `name`.
    fn server_conn(&self, name: &str) -> Result<Value> {
        let st = self.server().status()?;
        st["connections"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name))
            .cloned()
            .with_context(|| format!("no connection {name} in {st}"))
    }
}

/// How many descriptors `d`'s process holds.
fn open_fds(d: &Daemon) -> usize {
    let pid = d.pid().expect("daemon running");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .count()
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut at = v;
    for k in path {
        at = &at[*k];
    }
    at.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v}"))
}

/// The remotes of a connection's live paths in the server's status.
fn remotes(conn: &Value) -> Vec<String> {
    conn["paths"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|p| p["state"] != "removed")
                .filter_map(|p| p["remote"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn many_clients_share_one_port() {
    const BYTES: u64 = 8 << 20;
    // Client 0: two IPv4 paths; client 1: one IPv6 path; client 2: one
    // IPv4 path (it rebinds later); client 3: not listed at first.
    let mut bed = Bed::new(&[
        ("c0", vec![false, false]),
        ("c1", vec![true]),
        ("c2", vec![false]),
        ("c3", vec![false]),
    ])
    .expect("test bed");
    bed.start_server(&[0, 1, 2]).expect("server");
    let fds_before = open_fds(bed.server());
    for k in 0..4 {
        bed.start_client(k).expect("client");
    }
    for k in 0..3 {
        let t = bed
            .wait_tunnel(k, Duration::from_secs(15))
            .expect("tunnel up");
        eprintln!("{}: tunnel up after {t:?}", bed.cfg[k].name);
    }

    // Every client's paths are learnt: client 0 has two.
    wait_until(
        "the server to learn client 0's two paths",
        Duration::from_secs(5),
        POLL,
        || {
            let c = bed.server_conn("c0")?;
            Ok((remotes(&c).len() == 2).then_some(()))
        },
    )
    .unwrap_or_else(|e| panic!("{e:#}\n{}", bed.logs()));
    // The four learnt paths send through the shared port's sockets: no
    // descriptor each (a concentrator's fd count must not grow with its
    // clients' paths).
    // (Up to 2 more may be a control-socket connection of the status
    // reads above that the server has not closed yet: a stream and its
    // write half.)
    let fds_after = open_fds(bed.server());
    assert!(
        fds_after < fds_before + 4,
        "the server's descriptors went from {fds_before} to {fds_after} as it learnt 4 paths"
    );
    let c1 = bed.server_conn("c1").expect("c1");
    assert!(
        remotes(&c1).iter().all(|r| r.starts_with("[fd78:")),
        "client 1's path is IPv6: {:?}",
        remotes(&c1)
    );

    // Ping and a TCP transfer through each client, all at once.
    let mut transfers = Vec::new();
    for k in 0..3 {
        let server: IpAddr = SERVER_INNER.parse().unwrap();
        transfers.push(
            Transfer::start(
                &bed.client_ns[k],
                &bed.server_ns,
                server,
                5201 + k as u16,
                BYTES,
                k as u64 + 1,
                None,
            )
            .expect("start transfer"),
        );
    }
    for k in 0..3 {
        let (sent, got, text) = bed.ping(k, 10, "0.05");
        assert_eq!(
            (sent, got),
            (10, 10),
            "ping from {}: {text}",
            bed.cfg[k].name
        );
    }
    for (k, t) in transfers.into_iter().enumerate() {
        let r = t
            .finish(transfer_timeout(BYTES))
            .unwrap_or_else(|e| panic!("transfer from c{k}: {e:#}\n{}", bed.logs()));
        assert_eq!(r.bytes, BYTES, "transfer from c{k}");
        eprintln!(
            "c{k}: {} bytes in {:.2?} ({:.0} Mbit/s)",
            r.bytes,
            r.elapsed,
            r.mbit_per_s()
        );
    }
    for k in 0..3 {
        let c = bed.server_conn(&bed.cfg[k].name).expect("conn");
        eprintln!(
            "server's view of c{k}: drops {} reorder {}",
            c["drops"], c["reorder"]
        );
    }
    // Both of client 0's paths carried data.
    let c0 = bed.server_conn("c0").expect("c0");
    let rx: Vec<u64> = c0["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| num(p, &["rx_packets"]))
        .collect();
    assert!(
        rx.len() == 2 && rx.iter().all(|&n| n > 100),
        "client 0's paths on the server: {}",
        c0["paths"]
    );

    // The unlisted client gets nothing; its initiations are counted.
    let (sent, got, _) = bed.ping(3, 3, "0.2");
    assert_eq!((sent, got), (3, 0), "an unlisted client got through");
    let st = bed.server().status().expect("status");
    assert!(
        num(&st, &["noise", "refused", "unknown_peer"]) >= 1,
        "refusal not counted: {}",
        st["noise"]
    );

    // A flood of initiations not made for the server's key: dropped and
    // counted by the receive workers (mac1), never queued to the
    // handshake (whose refusal counters do not move).
    let before = bed.server().status().expect("status");
    let bogus: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            let mut d = vec![0u8; 168];
            d[0] = 0x1b; // version 1, type 11 (Noise initiation)
            for (j, b) in d[24..].iter_mut().enumerate() {
                *b = (i as usize * 31 + j * 7) as u8;
            }
            d
        })
        .collect();
    let (link, _) = bed.cfg[3].links[0];
    let to = std::net::SocketAddr::new(outer(link, false, true).parse().unwrap(), DATA_PORT);
    send_datagrams(
        &bed.client_ns[3],
        outer(link, false, false).parse().unwrap(),
        to,
        bogus,
    )
    .expect("bogus initiations sent");
    wait_until(
        "the bogus initiations to be counted",
        Duration::from_secs(3),
        POLL,
        || {
            let st = bed.server().status()?;
            Ok((num(&st, &["shared_port", "bad_mac1"])
                >= num(&before, &["shared_port", "bad_mac1"]) + 200)
                .then_some(()))
        },
    )
    .expect("bad_mac1 counted");
    let after = bed.server().status().expect("status");
    assert_eq!(
        num(&after, &["noise", "refused", "mac1"]),
        num(&before, &["noise", "refused", "mac1"]),
        "bogus initiations reached the handshake"
    );

    // NAT rebinding: client 2 comes back from another source port.
    let before = remotes(&bed.server_conn("c2").expect("c2"));
    if let Some(mut d) = bed.clients[2].take() {
        d.stop_clean(&bed.client_ns[2], TUN).expect("c2 stops");
    }
    bed.cfg[2].port = DATA_PORT + 7;
    bed.start_client(2).expect("c2 again");
    bed.wait_tunnel(2, Duration::from_secs(15))
        .expect("c2's tunnel after rebinding");
    wait_until(
        "the server to learn client 2's new port",
        Duration::from_secs(5),
        POLL,
        || {
            let r = remotes(&bed.server_conn("c2")?);
            Ok(r.iter()
                .any(|r| r.ends_with(&format!(":{}", DATA_PORT + 7)))
                .then_some(()))
        },
    )
    .unwrap_or_else(|e| panic!("{e:#} (before: {before:?})\n{}", bed.logs()));
    let (sent, got, text) = bed.ping(2, 10, "0.05");
    assert_eq!((sent, got), (10, 10), "ping after rebinding: {text}");

    // Reload: client 3 is added, client 1 removed.
    let config = bed.server_config(&[0, 2, 3]);
    bed.write("server", &config).expect("new config");
    let ping1 = Command::new("ip")
        .args(["netns", "exec", bed.client_ns[1].name(), "ping", "-n"])
        .args(["-i", "0.05", "-W", "1", "-c", "80", SERVER_INNER])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ping");
    std::thread::sleep(Duration::from_millis(1000));
    let (code, out, err) = mpt_ctl(&bed.control("server"), &["reload"]).expect("mpt reload");
    let reloaded = Instant::now();
    assert_eq!(code, 0, "mpt reload: {out}{err}\n{}", bed.logs());
    eprintln!("reload: {out}");
    let out1 = ping1.wait_with_output().expect("ping output");
    let text = String::from_utf8_lossy(&out1.stdout).into_owned();
    // icmp_seq of the last reply: the client was cut off within 1 s.
    let last_seq = text
        .lines()
        .filter(|l| l.contains("bytes from"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("icmp_seq="))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .max()
        .unwrap_or(0);
    // The ping started ~1 s before the reload at 50 ms: seq ~20 then.
    assert!(
        (15..=45).contains(&last_seq),
        "client 1's last reply was icmp_seq={last_seq} (reload at ~20, cut-off within 1 s = 40):\n{text}"
    );
    let _ = reloaded;
    let st = bed.server().status().expect("status");
    assert!(
        num(&st, &["shared_port", "unknown_session"]) > 0,
        "the removed client's datagrams are not counted: {}",
        st["shared_port"]
    );
    assert!(
        st["connections"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "c1"),
        "c1 still in the status"
    );
    // The added client gets its tunnel; the others carry on.
    bed.wait_tunnel(3, Duration::from_secs(10))
        .expect("the added client's tunnel");
    for k in [0, 2, 3] {
        let (sent, got, text) = bed.ping(k, 10, "0.05");
        assert_eq!(
            (sent, got),
            (10, 10),
            "ping from c{k} after the reload: {text}"
        );
    }

    for k in 0..4 {
        if let Some(mut d) = bed.clients[k].take() {
            d.stop_clean(&bed.client_ns[k], TUN).expect("client stops");
        }
    }
    if let Some(mut d) = bed.server.take() {
        d.stop_clean(&bed.server_ns, TUN).expect("server stops");
    }
}

/// Rewrites, without state, the client's UDP source port `from` to `to`
/// on the way out and `to` back to `from` on the way in, in the client's
/// namespace: to the server the client moved to another port in the
/// middle of its session (a NAT that rebinds), while the client's daemon
/// keeps its socket and knows nothing of it.
fn rebind_source_port(ns: &Netns, from: u16, to: u16) -> Result<()> {
    nft(
        ns,
        &format!(
            "table ip mpt_rebind {{\n\
             \tchain out {{ type filter hook postrouting priority 0; udp sport {from} udp sport set {to}; }}\n\
             \tchain in {{ type filter hook prerouting priority -300; udp dport {to} udp dport set {from}; }}\n\
             }}\n"
        ),
    )
}

/// Loads nftables `rules` in namespace `ns` (`nft -f -`).
fn nft(ns: &Netns, rules: &str) -> Result<()> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns.name(), "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nft (nftables installed?)")?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write as _;
        stdin
            .write_all(rules.as_bytes())
            .context("writing nft rules")?;
    }
    let out = child.wait_with_output().context("nft")?;
    anyhow::ensure!(
        out.status.success(),
        "nft -f: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[test]
fn a_client_whose_nat_rebinds_mid_session_keeps_its_tunnel() {
    const NEW_PORT: u16 = DATA_PORT + 9;
    let mut bed = Bed::new(&[("c0", vec![false])]).expect("test bed");
    bed.start_server(&[0]).expect("server");
    bed.start_client(0).expect("client");
    bed.wait_tunnel(0, Duration::from_secs(15))
        .expect("tunnel up");
    // 150 pings over 3 s; the port changes under them after ~1 s.
    let ping = Command::new("ip")
        .args(["netns", "exec", bed.client_ns[0].name(), "ping", "-n", "-q"])
        .args(["-i", "0.02", "-W", "1", "-c", "150", SERVER_INNER])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ping (iputils-ping installed?)");
    std::thread::sleep(Duration::from_secs(1));
    rebind_source_port(&bed.client_ns[0], DATA_PORT, NEW_PORT).expect("rebinding rules");
    let (sent, got, text) = ping_result(ping);
    let remotes_now = remotes(&bed.server_conn("c0").expect("c0 on the server"));
    assert!(
        remotes_now
            .iter()
            .any(|r| r.ends_with(&format!(":{NEW_PORT}"))),
        "the server did not learn the new port: {remotes_now:?}\n{}",
        bed.logs()
    );
    // The client's next datagram after the change (a ping or a keepalive,
    // every 20 ms) moves the path: a loss or two, not a dead timer's worth
    // (1 s, 50 pings).
    assert_eq!(sent, 150, "{text}");
    assert!(
        got >= sent - 3,
        "{got} of {sent} pings across the rebinding: {text}\n{}",
        bed.logs()
    );
}

/// The server's second address on link `link` (the first stays the one
/// routing picks as the source towards the client).
fn second_server_address(link: usize, v6: bool) -> String {
    if v6 {
        format!("fd78:{link}::11")
    } else {
        format!("10.78.{link}.11")
    }
}

/// A stateful firewall in the client's namespace: datagrams from the
/// server's port are let in only as replies to what the client sent
/// (the same 4-tuple), as a NAT or a host firewall does.
fn stateful_firewall(ns: &Netns) -> Result<()> {
    nft(
        ns,
        &format!(
            "table inet mpt_fw {{\n\
             \tchain in {{ type filter hook input priority 0; ct state established,related accept; udp sport {DATA_PORT} counter drop; }}\n\
             }}\n"
        ),
    )
}

#[test]
fn a_multihomed_server_answers_from_the_address_its_client_reached() {
    // One IPv4 and one IPv6 path; the server has a second address on
    // each, and the client is configured with those.
    let mut bed = Bed::new(&[("c0", vec![false, true])]).expect("test bed");
    let mut config = bed.client_config(0);
    for &(link, v6) in &bed.cfg[0].links {
        let (plen, extra) = if v6 {
            ("64", Some("nodad"))
        } else {
            ("24", None)
        };
        let addr = format!("{}/{plen}", second_server_address(link, v6));
        let dev = format!("s{link}");
        let mut args = vec!["addr", "add", addr.as_str(), "dev", dev.as_str()];
        args.extend(extra);
        bed.server_ns.ip(&args).expect("second server address");
        config = config.replace(
            &format!("remote = {:?}", outer(link, v6, true)),
            &format!("remote = {:?}", second_server_address(link, v6)),
        );
    }
    assert_eq!(
        config.matches("::11\"").count() + config.matches(".11\"").count(),
        2,
        "{config}"
    );
    stateful_firewall(&bed.client_ns[0]).expect("firewall rules");
    bed.start_server(&[0]).expect("server");
    bed.start_client_with(0, &config).expect("client");
    bed.wait_tunnel(0, Duration::from_secs(15))
        .expect("tunnel up through the client's firewall");
    let (sent, got, text) = bed.ping(0, 40, "0.05");
    assert!(
        got >= sent - 1,
        "{got} of {sent} pings: {text}\n{}",
        bed.logs()
    );
    // Both paths are learnt, each answering from the address reached.
    let want: Vec<String> = bed.cfg[0]
        .links
        .iter()
        .map(|&(link, v6)| {
            let ip: IpAddr = second_server_address(link, v6).parse().unwrap();
            std::net::SocketAddr::new(ip, DATA_PORT).to_string()
        })
        .collect();
    wait_until(
        "both client paths up on the server, with their local addresses",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            let conn = bed.server_conn("c0")?;
            let mut locals: Vec<String> = conn["paths"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter(|p| p["state"] == "up")
                        .filter_map(|p| p["local"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            locals.sort();
            let mut w = want.clone();
            w.sort();
            Ok((locals == w).then_some(()))
        },
    )
    .unwrap_or_else(|e| panic!("{e:#}\n{}", bed.logs()));
}

/// The server renews a shared-port client's keys itself (`rekey_after` on
/// the server's side only, so the server initiates: the handshake's index
/// becomes the new session's). The client's traffic must keep reaching its
/// connection under the new keys: before the fix the server unmapped that
/// index as the handshake ended, and every datagram of the client became
/// `unknown_session` until the server re-initiated (and lost it again).
#[test]
fn a_server_initiated_rekey_keeps_the_clients_session() {
    let mut bed = Bed::new(&[("k0", vec![false])]).expect("test bed");
    let text = bed.server_config(&[0]).replace(
        "dead_timer = \"1s\"\n",
        "dead_timer = \"1s\"\nrekey_after = \"2s\"\n",
    );
    let config = bed.write("server", &text).expect("server config");
    let control = bed.control("server");
    let log = bed.dir.path().join("server.log");
    let mut d = Daemon::start(&bed.server_ns, "server", &config, &control, &log).expect("server");
    d.wait_ready(&bed.server_ns, TUN, Duration::from_secs(10))
        .expect("server ready");
    bed.server = Some(d);
    bed.start_client(0).expect("client");
    bed.wait_tunnel(0, Duration::from_secs(15))
        .expect("tunnel up");
    // The server answered the first handshake: its own rekey comes after
    // 2 s + the responder's delay (10 s), then every 2 s as initiator.
    // 16 s of pings every 50 ms cover the first two server-initiated rekeys.
    let (sent, got, text) = bed.ping(0, 320, "0.05");
    let conn = bed.server_conn("k0").expect("k0 on the server");
    let rekeys = num(&conn, &["session", "rekeys"]);
    let status = bed.server().status().expect("server status");
    let unknown = num(&status, &["shared_port", "unknown_session"]);
    assert!(
        rekeys >= 2,
        "the server renewed the keys {rekeys} times in 16 s\n{}",
        bed.logs()
    );
    assert!(
        got * 100 >= sent * 97,
        "{got} of {sent} pings across {rekeys} server-initiated rekeys ({unknown} unknown_session): {text}\n{}",
        bed.logs()
    );
    assert!(
        unknown <= 5,
        "{unknown} datagrams of the client were unknown_session after the server's rekeys\n{}",
        bed.logs()
    );
}
