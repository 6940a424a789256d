//! The clients testbed: the server and client namespaces, one veth pair
//! per client path, the server mptd and one mptd per client; all stopped
//! or deleted on drop. Also when every client is up.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use mpt_api::Status;

use super::config::{client_config, client_ip, keypair, server_config, server_ip, TARGETS};
use super::options::Options;
use crate::bench::process::Proc;
use crate::bench::stop::check_stop;
use crate::bench::testbed::mptd_status;
use mpt_emu::netns::{ip, Netns, PREFIX};

/// Namespaces, daemons and addresses; everything stopped or deleted on
/// drop, processes first (fields drop in order).
pub(crate) struct Bed {
    pub(crate) clients: Vec<Proc>,
    pub(crate) server: Proc,
    pub(crate) server_control: PathBuf,
    pub(crate) client_controls: Vec<PathBuf>,
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
    let base = format!("{PREFIX}{}-clients", std::process::id());
    let s = Netns::create(&format!("{base}-s")).context("creating the server namespace")?;
    let c = Netns::create(&format!("{base}-c")).context("creating the client namespace")?;
    sysctl_in(&s, SYSCTLS)?;
    sysctl_in(&c, SYSCTLS)?;
    let (sn, cn) = (s.name().to_string(), c.name().to_string());
    let mut s_cmds = vec![
        "link set dev lo up".to_string(),
        format!("route add local {TARGETS} dev lo"),
    ];
    let mut c_cmds = vec!["link set dev lo up".to_string()];
    for k in 0..o.paths_per_client {
        ip(&[
            "-n",
            &cn,
            "link",
            "add",
            &format!("c{k}"),
            "type",
            "veth",
            "peer",
            "name",
            &format!("s{k}"),
            "netns",
            &sn,
        ])
        .with_context(|| format!("veth pair {k}"))?;
        s_cmds.push(format!("addr add {}/16 dev s{k}", server_ip(k)));
        s_cmds.push(format!("link set dev s{k} up"));
        for i in 0..o.clients {
            c_cmds.push(format!("addr add {}/16 dev c{k}", client_ip(i, k)));
        }
        c_cmds.push(format!("link set dev c{k} up"));
    }
    run_ip_batch(&sn, &s_cmds, work, "server")?;
    run_ip_batch(&cn, &c_cmds, work, "clients")?;
    check_stop(stop)?;

    println!("==> clients: writing keys and configs");
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
            .filter(|_| o.clients >= 2 && i == o.clients - 1);
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
    std::fs::write(
        &server_cfg,
        server_config(
            &server_control,
            &server_key,
            &client_publics,
            o.paths_per_client,
            o.shared_port,
        ),
    )
    .with_context(|| format!("writing {}", server_cfg.display()))?;

    println!("==> clients: starting the server mptd");
    let cfg = server_cfg.to_string_lossy().into_owned();
    let server = Proc::spawn_in(
        &sn,
        "mptd server",
        &o.mptd,
        &["--config", &cfg],
        work.join("server.log"),
    )?;
    let mut bed = Bed {
        clients: Vec::with_capacity(o.clients),
        server,
        server_control,
        client_controls,
        c,
        s,
    };
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
    println!("==> clients: starting {} client mptds", o.clients);
    *t_start = Some(Instant::now());
    for (i, file) in client_cfgs.iter().enumerate() {
        check_stop(stop)?;
        let cfg = file.to_string_lossy().into_owned();
        let p = Proc::spawn_in(
            bed.c.name(),
            &format!("mptd client {i}"),
            &o.mptd,
            &["--config", &cfg],
            work.join(format!("client-{i}.log")),
        )?;
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
