//! A new branch in one command (issue 33): a concentrator and two branches
//! in namespaces, configured only from `mpt client add` output.
//!
//! The test writes the server's config once (a key pair, a dual-stack
//! tunnel prefix, `include = "clients.d/*.toml"` and nothing else); then
//! the server starts with no client; `mpt client add b1` + `mpt reload`
//! and `mpt client add b2` + `mpt reload` (a running server takes each);
//! each branch runs mptd with the printed config, unchanged, and the
//! key file `--key-out` wrote. Checked: both tunnels carry pings (IPv4 and
//! IPv6, and branch to branch through the concentrator, which the
//! default `networks` allows), each printed config passes `mpt config
//! check`, `mpt client list` shows both up, the time
//! from the first `mpt client add` to the first answered ping is under
//! 10 s (printed), and `mpt client remove b1` + `mpt reload` cuts b1 off
//! (and its network's route on the hub goes) while b2 keeps working.
//!
//! Each branch daemon gets a private /run (a tmpfs mounted inside `ip
//! netns exec`'s own mount namespace), so that the printed config's
//! default control socket, /run/mpt/mptd.sock, is its own. Traffic stays
//! inside the test's namespaces.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use mpt_e2e::*;

const SERVER_V4: &str = "10.98.0.1";
const SERVER_V6: &str = "fd98::1";

/// A branch's mptd, run with a private /run; SIGTERM (then SIGKILL) on drop.
struct BranchDaemon {
    child: Child,
    log: PathBuf,
}

impl BranchDaemon {
    fn start(ns: &Netns, config: &Path, log: &Path) -> Result<BranchDaemon> {
        let out = std::fs::File::create(log)?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name(), "sh", "-c"])
            .arg("mount -t tmpfs mpt-run /run && exec \"$0\" --config \"$1\"")
            .arg(mptd_bin()?)
            .arg(config)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting a branch mptd")?;
        Ok(BranchDaemon {
            child,
            log: log.to_path_buf(),
        })
    }

    fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for BranchDaemon {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `mpt ARGS`; exit code, stdout, stderr.
fn mpt(args: &[&str]) -> Result<(i32, String, String)> {
    let out = Command::new(mpt_bin()?)
        .args(args)
        .output()
        .context("running mpt")?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Runs `mpt ARGS` and requires exit 0; its stdout.
fn mpt_ok(args: &[&str]) -> Result<String> {
    let (code, out, err) = mpt(args)?;
    ensure!(code == 0, "mpt {} exited {code}: {err}", args.join(" "));
    Ok(out)
}

/// One ping from `ns` to `to`, given 0.3 s: whether it was answered.
fn ping_once(ns: &Netns, to: &str) -> bool {
    let v6 = if to.contains(':') { "-6" } else { "-4" };
    ns.exec(&["ping", v6, "-n", "-q", "-c", "1", "-W", "0.3", to])
        .is_ok()
}

/// Starts `n` pings 0.2 s apart from `ns` to `to`; [`answered`] counts the
/// answers. Several run at once.
fn start_pings(ns: &Netns, to: &str, n: u32) -> Child {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            "ping",
            "-n",
            "-q",
            "-W",
            "1",
            "-i",
            "0.2",
        ])
        .args(["-c", &n.to_string(), to])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ping (iputils-ping installed?)")
}

/// How many of a ping's echoes were answered.
fn answered(child: Child) -> u64 {
    ping_result(child).1
}

/// `mpt client add NAME` for the branch on link `link` (its LAN
/// 192.168.10LINK.0/24): writes its config (stdout) and key next to the
/// server's, checks the config with `mpt config check`; returns the
/// config file.
fn client_add(dir: &Path, server: &Path, name: &str, link: u8) -> Result<PathBuf> {
    let key = dir.join(format!("{name}.key"));
    let key = key.to_str().context("temp path")?;
    let endpoint = format!("10.77.{link}.1");
    let uplink = format!("u{link}");
    let out = mpt_ok(&[
        "client",
        "add",
        name,
        "--config",
        server.to_str().context("temp path")?,
        "--endpoint",
        &endpoint,
        "--key-out",
        key,
        "--key-path",
        key,
        "--uplink",
        &uplink,
        "--network",
        &format!("192.168.10{link}.0/24"),
    ])?;
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, out)?;
    mpt_ok(&["config", "check", file.to_str().context("temp path")?])?;
    Ok(file)
}

/// Pings `to` from `ns` until one is answered (15 s at most).
fn first_answer(ns: &Netns, to: &str, daemon: &mut BranchDaemon) -> Result<()> {
    wait_until(
        &format!("a ping to {to} answered"),
        Duration::from_secs(15),
        Duration::from_millis(1),
        || {
            if let Some(st) = daemon.child.try_wait()? {
                return Err(Fatal(anyhow::anyhow!(
                    "branch mptd exited ({st}):\n{}",
                    daemon.log_tail()
                ))
                .into());
            }
            Ok(ping_once(ns, to).then_some(()))
        },
    )
}

#[test]
fn branches_from_client_add_output() -> Result<()> {
    let dir = TempDir::new("clientadd")?;
    let cc = Netns::new("cc")?;
    let b = [Netns::new("b1")?, Netns::new("b2")?];
    // Link k: concentrator s<k> 10.77.k.1/24 <-> branch u<k> 10.77.k.2/24.
    for (k, ns) in b.iter().enumerate() {
        let link = k + 1;
        let (s, u) = (format!("s{link}"), format!("u{link}"));
        cc.ip(&[
            "link",
            "add",
            &s,
            "type",
            "veth",
            "peer",
            "name",
            &u,
            "netns",
            ns.name(),
        ])?;
        cc.ip(&["addr", "add", &format!("10.77.{link}.1/24"), "dev", &s])?;
        ns.ip(&["addr", "add", &format!("10.77.{link}.2/24"), "dev", &u])?;
        cc.set_link(&s, true)?;
        ns.set_link(&u, true)?;
    }
    // Branch to branch goes through the concentrator's kernel.
    cc.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;

    let server = dir.path().join("mptd.toml");
    let control = dir.path().join("server.sock");
    let server_key = dir.path().join("server.key");
    keypair(&server_key)?;
    std::fs::write(
        &server,
        format!(
            "[daemon]\ncontrol = {:?}\nprivate_key_file = {:?}\ninclude = \"clients.d/*.toml\"\n\n[tunnel]\nipv4 = \"{SERVER_V4}/24\"\nipv6 = \"{SERVER_V6}/64\"\n",
            control.display().to_string(),
            server_key.display().to_string()
        ),
    )?;
    let server_s = server.to_str().context("temp path")?;
    let socket_s = control.to_str().context("temp path")?;

    // The concentrator starts with no client at all (its include folder
    // does not even exist yet) and lists none.
    let mut hub = Daemon::start(
        &cc,
        "concentrator",
        &server,
        &control,
        &dir.path().join("hub.log"),
    )?;
    hub.wait_ready(&cc, TUN, Duration::from_secs(5))?;
    let list = mpt_ok(&["client", "list", "--config", server_s])?;
    ensure!(
        !list.contains("b1") && !list.contains("b2"),
        "client list before any client:\n{list}"
    );

    // The first branch: add, reload the running server, start the branch.
    let t0 = Instant::now();
    let b1_conf = client_add(dir.path(), &server, "b1", 1)?;
    let reload = mpt_ok(&["--socket", socket_s, "reload"])?;
    ensure!(reload.contains("b1: added"), "reload answered: {reload}");
    let mut b1 = BranchDaemon::start(&b[0], &b1_conf, &dir.path().join("b1.log"))?;
    first_answer(&b[0], SERVER_V4, &mut b1)?;
    let first = t0.elapsed();
    println!("first branch (server running, no client before): `mpt client add` + `mpt reload` to the first answered ping: {first:.2?}");

    // The second: add, reload the running server, start the branch.
    let t1 = Instant::now();
    let b2_conf = client_add(dir.path(), &server, "b2", 2)?;
    let reload = mpt_ok(&["--socket", socket_s, "reload"])?;
    ensure!(reload.contains("b2: added"), "reload answered: {reload}");
    let mut b2 = BranchDaemon::start(&b[1], &b2_conf, &dir.path().join("b2.log"))?;
    first_answer(&b[1], SERVER_V4, &mut b2)?;
    let second = t1.elapsed();
    println!("second branch (server running): `mpt client add` + `mpt reload` to the first answered ping: {second:.2?}");
    ensure!(
        first < Duration::from_secs(10) && second < Duration::from_secs(10),
        "a new branch took {first:?} / {second:?}, over the 10 s target"
    );

    // Both tunnels, IPv6 too, and branch to branch through the hub.
    let checks = [
        (&b[0], SERVER_V6),
        (&b[1], SERVER_V6),
        (&b[0], "10.98.0.3"),
        (&b[1], "10.98.0.2"),
    ];
    let running: Vec<Child> = checks
        .iter()
        .map(|(ns, to)| start_pings(ns, to, 3))
        .collect();
    for ((ns, to), child) in checks.iter().zip(running) {
        let got = answered(child);
        ensure!(got >= 2, "{} -> {to}: {got} of 3 pings answered", ns.name());
    }
    let list = mpt_ok(&["client", "list", "--config", server_s])?;
    for (name, addr) in [
        ("b1", "10.98.0.2,fd98::2  "),
        ("b2", "10.98.0.3,fd98::3  "),
        ("b1", "  192.168.101.0/24  "),
        ("b2", "  192.168.102.0/24  "),
    ] {
        let line = list
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .with_context(|| format!("{name} missing from:\n{list}"))?;
        ensure!(
            line.contains(addr) && line.trim_end().ends_with("up"),
            "client list:\n{list}"
        );
    }
    // A name in use is refused, and nothing is written.
    let (code, _, err) = mpt(&[
        "client",
        "add",
        "b2",
        "--config",
        server_s,
        "--endpoint",
        "10.77.2.1",
        "--key-out",
        dir.path().join("again.key").to_str().context("temp path")?,
        "--uplink",
        "u2",
    ])?;
    ensure!(
        code == 2 && err.contains("already in use"),
        "exit {code}: {err}"
    );
    ensure!(!dir.path().join("again.key").exists());

    let b1_lan = || cc.ip(&["route", "show", "192.168.101.0/24"]);
    ensure!(
        b1_lan()?.contains(TUN),
        "no route to b1's network on the hub"
    );

    // Remove b1: after the reload its pings go unanswered, b2's do not.
    mpt_ok(&["client", "remove", "b1", "--config", server_s])?;
    let reload = mpt_ok(&["--socket", socket_s, "reload"])?;
    ensure!(reload.contains("b1: removed"), "reload answered: {reload}");
    let cut = Instant::now();
    wait_until("b1 cut off", Duration::from_secs(5), POLL, || {
        Ok((!ping_once(&b[0], SERVER_V4)).then_some(()))
    })?;
    println!("b1 cut off {:.2?} after the reload", cut.elapsed());
    ensure!(
        b1_lan()?.trim().is_empty(),
        "b1's route stayed: {}",
        b1_lan()?
    );
    let (b1_ping, b2_ping) = (
        start_pings(&b[0], SERVER_V4, 5),
        start_pings(&b[1], SERVER_V4, 5),
    );
    let (b1_got, b2_got) = (answered(b1_ping), answered(b2_ping));
    if b1_got != 0 || b2_got < 4 {
        bail!(
            "after removing b1: b1 got {b1_got} of 5 answers (want 0), b2 {b2_got} of 5 (want >= 4)\nhub:\n{}\nb2:\n{}",
            hub.log_tail(20),
            b2.log_tail()
        );
    }
    let list = mpt_ok(&["client", "list", "--config", server_s])?;
    ensure!(!list.contains("b1 ") && list.contains("b2 "), "{list}");
    hub.stop_clean(&cc, TUN)?;
    drop((b1, b2));
    Ok(())
}
