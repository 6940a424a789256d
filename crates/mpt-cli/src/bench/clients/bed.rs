//! The clients testbed: the server and client namespaces, one veth pair
//! per client path, the server mptd and one mptd per client; all stopped
//! or deleted on drop. Also when every client is up, and the restarts and
//! the path-0 wire that `mpt bench soak` drives.
//!
//! With `emu_path0` path 0 runs through an emulator wire in a third
//! namespace (`-m`: `c0` <-> `m0c` | wire | `m0s` <-> `s0`), so the soak
//! can make it silent (a wire restarted with an outage window) without a
//! link event either side would see.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mpt_api::Status;
use mpt_emu::model::LinkConfig;
use mpt_emu::schedule::{Schedule, Window};
use mpt_emu::wire::{Wire, WireConfig};

use super::config::{
    client_config, client_entry, client_ip, client_name, keypair, server_config, server_ip, TARGETS,
};
use super::options::Options;
use crate::bench::process::Proc;
use crate::bench::stop::check_stop;
use crate::bench::testbed::{disable_offloads_in, mptd_status};
use mpt_emu::netns::{ip, Netns, PREFIX};

/// Namespaces, daemons and addresses; everything stopped or deleted on
/// drop, processes first, then the wire (fields drop in order).
pub(crate) struct Bed {
    pub(crate) clients: Vec<Proc>,
    pub(crate) server: Proc,
    pub(crate) server_control: PathBuf,
    pub(crate) client_controls: Vec<PathBuf>,
    /// The wire of path 0 (`emu_path0`).
    wire: Option<Wire>,
    server_cfg: PathBuf,
    client_cfgs: Vec<PathBuf>,
    /// Each client's public key (for its server-side entry).
    pub(crate) client_publics: Vec<String>,
    /// The include folder of the server's connections (`clients_d`).
    pub(crate) clients_d: Option<PathBuf>,
    paths: usize,
    shared: bool,
    mptd: PathBuf,
    nofile: Option<u64>,
    work: PathBuf,
    pub(crate) m: Option<Netns>,
    pub(crate) c: Netns,
    pub(crate) s: Netns,
}

impl Drop for Bed {
    fn drop(&mut self) {
        // SIGTERM to every client first, so they stop in parallel; each
        // guard then only waits for its own.
        for p in &mut self.clients {
            if p.exited().is_none() {
                let pid = nix::unistd::Pid::from_raw(p.pid() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            }
        }
        self.clients.clear();
    }
}

impl Bed {
    /// Starts the server mptd (under `ulimit -n` if `nofile`); its log
    /// is `server.log`, or `server-<n>.log` for restart `n`.
    pub(crate) fn spawn_server(&self, restart: usize) -> anyhow::Result<Proc> {
        let cfg = self.server_cfg.to_string_lossy().into_owned();
        let log = if restart == 0 {
            self.work.join("server.log")
        } else {
            self.work.join(format!("server-{restart}.log"))
        };
        match self.nofile {
            // The shell sets both limits and execs mptd: the pid is mptd's.
            Some(n) => {
                let script = format!("ulimit -n {n} && exec \"$0\" --config \"$1\"");
                let mptd = self.mptd.to_string_lossy().into_owned();
                Proc::spawn_in(
                    self.s.name(),
                    "mptd server",
                    Path::new("sh"),
                    &["-c", &script, &mptd, &cfg],
                    log,
                )
            }
            None => Proc::spawn_in(
                self.s.name(),
                "mptd server",
                &self.mptd,
                &["--config", &cfg],
                log,
            ),
        }
    }

    /// Starts client `i`'s mptd (log `client-<i>.log`, appended to by
    /// restarts: the log guard truncates, so restarts get `-<n>`).
    pub(crate) fn spawn_client(&self, i: usize, restart: usize) -> anyhow::Result<Proc> {
        let cfg = self.client_cfgs[i].to_string_lossy().into_owned();
        let log = if restart == 0 {
            self.work.join(format!("client-{i}.log"))
        } else {
            self.work.join(format!("client-{i}-{restart}.log"))
        };
        Proc::spawn_in(
            self.c.name(),
            &format!("mptd client {i}"),
            &self.mptd,
            &["--config", &cfg],
            log,
        )
    }

    /// Paths of each client.
    pub(crate) fn paths(&self) -> usize {
        self.paths
    }

    /// Client `i`'s file in the include folder.
    pub(crate) fn client_file(&self, i: usize) -> Option<PathBuf> {
        let d = self.clients_d.as_ref()?;
        Some(d.join(format!("{}.toml", client_name(i))))
    }

    /// Writes client `i`'s server-side file (what `mpt client add` does).
    pub(crate) fn write_client_file(&self, i: usize) -> anyhow::Result<()> {
        let Some(f) = self.client_file(i) else {
            bail!("the server's clients are not in an include folder");
        };
        let text = client_entry(i, &self.client_publics[i], self.paths, self.shared);
        std::fs::write(&f, text).with_context(|| format!("writing {}", f.display()))
    }

    /// Restarts path 0's wire, silent for `silent` from now.
    pub(crate) fn silence_path0(&mut self, silent: Duration) -> anyhow::Result<()> {
        let Some(m) = &self.m else {
            bail!("path 0 has no emulator wire");
        };
        if let Some(old) = self.wire.take() {
            let _ = old.stop();
        }
        let link = LinkConfig {
            schedule: Schedule::new(
                vec![Window {
                    start: Duration::ZERO,
                    len: silent,
                }],
                None,
            ),
            ..LinkConfig::default()
        };
        let cfg = wire_config(m.name(), link.clone(), link);
        self.wire = Some(Wire::start(cfg).context("restarting the path-0 wire")?);
        Ok(())
    }
}

fn wire_config(m: &str, up: LinkConfig, down: LinkConfig) -> WireConfig {
    WireConfig {
        a: "m0c".into(),
        b: "m0s".into(),
        netns: Some(m.to_string()),
        a_to_b: up,
        b_to_a: down,
        seed: 1,
        disable_offloads: false,
        // Normal scheduling: on 2 cores a real-time wire would starve the
        // daemons.
        realtime_priority: None,
    }
}

fn run_ip_batch(ns: &str, lines: &[String], work: &Path, tag: &str) -> anyhow::Result<()> {
    let file = work.join(format!("ip-{tag}.batch"));
    std::fs::write(&file, lines.join("\n") + "\n")
        .with_context(|| format!("writing {}", file.display()))?;
    let path = file.to_string_lossy().into_owned();
    ip(&["-n", ns, "-batch", &path]).with_context(|| format!("ip -batch {path} in {ns}"))?;
    Ok(())
}

fn sysctl_in(ns: &Netns, settings: &'static [(&'static str, &'static str)]) -> anyhow::Result<()> {
    ns.run(move || {
        for (key, value) in settings {
            let path = format!("/proc/sys/net/{key}");
            match std::fs::write(&path, value) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                r => r.map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?,
            }
        }
        Ok(())
    })
    .with_context(|| format!("sysctls in {}", ns.name()))
}

const SYSCTLS: &[(&str, &str)] = &[
    ("ipv4/conf/all/rp_filter", "0"),
    ("ipv4/conf/default/rp_filter", "0"),
    ("ipv6/conf/all/disable_ipv6", "1"),
    ("ipv6/conf/default/disable_ipv6", "1"),
];

/// Whether every server connection is up: session established and
/// `paths` paths up. Gives the number up.
pub(crate) fn count_up(status: &Status, paths: usize) -> usize {
    status.connections.as_deref().map_or(0, |conns| {
        conns
            .iter()
            .filter(|c| {
                let established = c
                    .session
                    .as_ref()
                    .and_then(|s| s.established)
                    .unwrap_or(false);
                let up = c.paths.as_deref().map_or(0, |ps| {
                    ps.iter()
                        .filter(|p| p.state.as_deref() == Some("up"))
                        .count()
                });
                established && up >= paths
            })
            .count()
    })
}

pub(crate) fn build(
    o: &Options,
    work: &Path,
    stop: &AtomicBool,
    t_start: &mut Option<Instant>,
) -> anyhow::Result<Bed> {
    let base = format!("{PREFIX}{}-{}", std::process::id(), o.tag);
    let s = Netns::create(&format!("{base}-s")).context("creating the server namespace")?;
    let c = Netns::create(&format!("{base}-c")).context("creating the client namespace")?;
    let m = if o.emu_path0 {
        Some(Netns::create(&format!("{base}-m")).context("creating the middle namespace")?)
    } else {
        None
    };
    sysctl_in(&s, SYSCTLS)?;
    sysctl_in(&c, SYSCTLS)?;
    let (sn, cn) = (s.name().to_string(), c.name().to_string());
    let mut s_cmds = vec![
        "link set dev lo up".to_string(),
        format!("route add local {TARGETS} dev lo"),
    ];
    let mut c_cmds = vec!["link set dev lo up".to_string()];
    for k in 0..o.paths_per_client {
        let (ck, sk) = (format!("c{k}"), format!("s{k}"));
        match (&m, k) {
            (Some(m), 0) => {
                let mn = m.name();
                ip(&[
                    "-n", &cn, "link", "add", &ck, "type", "veth", "peer", "name", "m0c", "netns",
                    mn,
                ])
                .context("veth pair c0/m0c")?;
                ip(&[
                    "-n", &sn, "link", "add", &sk, "type", "veth", "peer", "name", "m0s", "netns",
                    mn,
                ])
                .context("veth pair s0/m0s")?;
                ip(&["-n", mn, "link", "set", "dev", "m0c", "up"])?;
                ip(&["-n", mn, "link", "set", "dev", "m0s", "up"])?;
            }
            _ => ip(&[
                "-n", &cn, "link", "add", &ck, "type", "veth", "peer", "name", &sk, "netns", &sn,
            ])
            .with_context(|| format!("veth pair {k}"))?,
        }
        s_cmds.push(format!("addr add {}/16 dev s{k}", server_ip(k)));
        s_cmds.push(format!("link set dev s{k} up"));
        for i in 0..o.clients {
            c_cmds.push(format!("addr add {}/16 dev c{k}", client_ip(i, k)));
        }
        c_cmds.push(format!("link set dev c{k} up"));
    }
    run_ip_batch(&sn, &s_cmds, work, "server")?;
    run_ip_batch(&cn, &c_cmds, work, "clients")?;
    let mut wire = None;
    if let Some(m) = &m {
        // The wire reads whole frames: no aggregates on its path.
        disable_offloads_in(m, vec!["m0c".into(), "m0s".into()])?;
        disable_offloads_in(&c, vec!["c0".into()])?;
        disable_offloads_in(&s, vec!["s0".into()])?;
        let link = LinkConfig::default();
        wire = Some(
            Wire::start(wire_config(m.name(), link.clone(), link))
                .context("starting the path-0 wire")?,
        );
    }
    check_stop(stop)?;

    println!("==> {}: writing keys and configs", o.tag);
    let server_key = work.join("server.key");
    let server_public = keypair(&server_key)?;
    let mut client_publics = Vec::with_capacity(o.clients);
    let mut client_controls = Vec::with_capacity(o.clients);
    let mut client_cfgs = Vec::with_capacity(o.clients);
    for i in 0..o.clients {
        let key = work.join(format!("client-{i}.key"));
        client_publics.push(keypair(&key)?);
        let control = work.join(format!("client-{i}.sock"));
        let rekey = o
            .rekey_after
            .filter(|_| o.clients >= 2 && i == o.clients - 1)
            .or(o.rekey_all);
        let cfg = client_config(
            i,
            &control,
            &key,
            &server_public,
            o.paths_per_client,
            o.shared_port,
            rekey,
        );
        let file = work.join(format!("client-{i}.toml"));
        std::fs::write(&file, cfg).with_context(|| format!("writing {}", file.display()))?;
        client_cfgs.push(file);
        client_controls.push(control);
    }
    let server_control = work.join("server.sock");
    let server_cfg = work.join("server.toml");
    let clients_d = o.clients_d.then(|| work.join("clients.d"));
    if let Some(d) = &clients_d {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    std::fs::write(
        &server_cfg,
        server_config(
            &server_control,
            &server_key,
            &client_publics,
            o.paths_per_client,
            o.shared_port,
            clients_d.as_ref().map(|d| d.join("*.toml")).as_deref(),
        ),
    )
    .with_context(|| format!("writing {}", server_cfg.display()))?;

    // A placeholder until the server runs: Bed's fields need a Proc.
    let mut bed = Bed {
        clients: Vec::with_capacity(o.clients),
        server: Proc::spawn_in(&sn, "true", Path::new("true"), &[], work.join("true.log"))?,
        server_control,
        client_controls,
        wire,
        server_cfg,
        client_cfgs,
        client_publics,
        clients_d,
        paths: o.paths_per_client,
        shared: o.shared_port,
        mptd: o.mptd.clone(),
        nofile: o.nofile,
        work: work.to_path_buf(),
        m,
        c,
        s,
    };
    for i in 0..o.clients {
        if bed.clients_d.is_some() {
            bed.write_client_file(i)?;
        }
    }
    println!("==> {}: starting the server mptd", o.tag);
    bed.server = bed.spawn_server(0)?;
    // The server listens once its control socket answers.
    let end = Instant::now() + Duration::from_secs(20);
    while mptd_status(&bed.server_control).is_err() {
        check_stop(stop)?;
        if let Some(st) = bed.server.exited() {
            bail!("the server mptd exited ({st}):\n{}", bed.server.log_tail());
        }
        if Instant::now() > end {
            bail!("the server mptd did not answer on its control socket within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("==> {}: starting {} client mptds", o.tag, o.clients);
    *t_start = Some(Instant::now());
    for i in 0..o.clients {
        check_stop(stop)?;
        let p = bed.spawn_client(i, 0)?;
        bed.clients.push(p);
    }
    Ok(bed)
}

/// Polls the server status until every client is up or `timeout`; prints
/// progress. Gives (up count, seconds since `t0` when all were up).
pub(crate) fn wait_all_up(
    bed: &mut Bed,
    o: &Options,
    t0: Instant,
    timeout: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<(usize, Option<f64>)> {
    let mut last_print = Instant::now();
    let mut up = 0;
    loop {
        check_stop(stop)?;
        if let Some(st) = bed.server.exited() {
            bail!("the server mptd exited ({st}):\n{}", bed.server.log_tail());
        }
        if let Ok(status) = mptd_status(&bed.server_control) {
            up = count_up(&status, o.paths_per_client);
            if up == o.clients {
                return Ok((up, Some(t0.elapsed().as_secs_f64())));
            }
        }
        if last_print.elapsed() >= Duration::from_secs(2) {
            println!(
                "    {up}/{} clients up after {:.1} s",
                o.clients,
                t0.elapsed().as_secs_f64()
            );
            last_print = Instant::now();
        }
        if t0.elapsed() > timeout {
            for (i, p) in bed.clients.iter_mut().enumerate() {
                if let Some(st) = p.exited() {
                    bail!("client {i}'s mptd exited ({st}):\n{}", p.log_tail());
                }
            }
            return Ok((up, None));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_connection_counts_up_with_its_session_and_enough_paths_up() {
        let status: Status = serde_json::from_value(json!({"connections": [
            {"session": {"established": true}, "paths": [{"state": "up"}, {"state": "up"}]},
            {"session": {"established": true}, "paths": [{"state": "up"}, {"state": "probing"}]},
            {"session": {"established": false}, "paths": [{"state": "up"}, {"state": "up"}]},
            {"paths": [{"state": "up"}, {"state": "up"}]},
        ]}))
        .expect("status");
        assert_eq!(count_up(&status, 2), 1);
        assert_eq!(count_up(&status, 1), 2);
        assert_eq!(count_up(&Status::default(), 0), 0);
    }
}
