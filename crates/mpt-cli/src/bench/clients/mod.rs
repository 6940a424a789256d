//! `mpt bench clients`: one server, many clients (issue 14).
//!
//! Two namespaces, `mptemu-<pid>-clients-s` (the server) and
//! `mptemu-<pid>-clients-c` (every client), joined by one veth pair per
//! client path (`c<k>` <-> `s<k>`, subnet 10.(100+k).0.0/16, server at
//! 10.(100+k).0.1). Client `i` has address 10.(100+k).(1+i/250).(1+i%250)
//! on veth `k`, its own mptd (tun `mptc<i>`, control socket, key pair), the
//! tunnel address 172.17.x.y/32 and one route through its tunnel: to its
//! "target" 172.18.x.y, an address the server namespace answers as its own
//! (`ip route add local 172.18.0.0/16 dev lo`), so every client reaches the
//! server over its own tunnel from one namespace. The server's tun has
//! 172.17.255.254/16: replies to a client's tunnel address leave through it
//! and mptd picks the connection by that address.
//!
//! Every connection uses the public-key handshake. The server config comes
//! in two modes behind [`config::server_config`]: per-connection ports (each client
//! connection on the server has its own port, 20000 + i, and its paths) and
//! the shared port (client connections without paths on port 65022, told
//! apart by the Noise session index, paths learnt from the client).
//!
//! Measured: time until every client is up (server status: session
//! established, every path up), the server's threads and memory
//! (/proc/PID/status), single-stream TCP of one client alone and of K
//! clients at once (iperf3 bound to the clients' tunnel addresses), with
//! `--flood` a thread sending forged Noise initiations from spoofed
//! addresses to the server ports as fast as it can, first alone (the
//! server's memory over it, with no traffic) and then in rounds beside the
//! same K senders: quiet, flooded, flooded at a closed port (the control:
//! what the flooding thread's CPU costs on a shared machine) and paced at
//! half rate, quiet and flooded (see `flood::measure_flood`); and with `--rekey-after` one client alone whose keys are renewed
//! every few seconds (TCP retransmits against client 0 without rekeys).
//! Both rekey runs are paced at half the single client's rate: at full
//! speed on two cores TCP overflows a socket buffer now and then with or
//! without rekeys (hundreds of retransmits in one run, none in the next),
//! which would hide what rekeying itself costs.
//!
//! Processes are stopped and namespaces deleted on every exit path (guards;
//! SIGINT/SIGTERM only set the stop flag every wait polls).
//!
//! Layout: [`options`] what to run, [`config`] addresses and mptd
//! configs, [`bed`] the namespaces and daemons, [`traffic`] the TCP
//! measurements, [`flood`] the forged initiations, [`report`] the
//! results; this module runs the steps in order.

pub mod bed;
pub mod config;
pub mod flood;
pub mod options;
pub mod report;
pub mod traffic;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use crate::bench::stop::sleep;
use crate::bench::testbed::mptd_status;
use bed::{build, wait_all_up, Bed};
use config::{client_name, server_port, SHARED_PORT};
use flood::measure_flood;
use report::{proc_mem, RekeyResult};
use traffic::{pick_senders, tcp_at_once};

use crate::bench::report::meta::{sha256_hex, RunMeta};
pub use options::Options;
pub use report::Report;

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Runs the scenario; writes results.json/csv (partial ones too, on error
/// or interrupt) and returns the report or the first error.
pub fn run(o: &Options, stop: &AtomicBool) -> anyhow::Result<Report> {
    o.check().map_err(anyhow::Error::msg)?;
    if !mpt_emu::sys::is_root() {
        bail!("mpt bench clients needs root (network namespaces, veths, tun devices)");
    }
    let work = o.out.join("work");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let started = Instant::now();
    let mut report = Report {
        scenario: "clients".into(),
        mode: o.mode().into(),
        clients: o.clients,
        paths_per_client: o.paths_per_client,
        senders: o.senders,
        duration_s: o.duration.as_secs_f64(),
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: kernel(),
        meta: RunMeta::begin(
            "built-in clients",
            &sha256_hex(o.settings().as_bytes()),
            &o.settings(),
            Vec::new(),
        ),
        ..Report::default()
    };
    println!(
        "==> mpt bench clients ({} mode): {} clients x {} paths, {} senders, {} s per measurement, output {}",
        o.mode(),
        o.clients,
        o.paths_per_client,
        o.senders,
        o.duration.as_secs(),
        o.out.display()
    );
    let result = measure(o, &work, &mut report, stop);
    report.wall_s = started.elapsed().as_secs_f64();
    report.complete = result.is_ok();
    report.meta.finish(Vec::new());
    report.write(&o.out)?;
    result.map(|()| report)
}

fn measure(o: &Options, work: &Path, report: &mut Report, stop: &AtomicBool) -> anyhow::Result<()> {
    println!(
        "==> clients: building the testbed (server and client namespaces, {} veth pair(s))",
        o.paths_per_client
    );
    let mut t_start = None;
    let mut bed = build(o, work, stop, &mut t_start)?;
    let t0 = t_start.unwrap_or_else(Instant::now);
    let timeout = Duration::from_secs(30) + Duration::from_millis(200) * o.clients as u32;
    let (up, up_s) = wait_all_up(&mut bed, o, t0, timeout, stop)?;
    report.up_count = up;
    report.up_s = up_s;
    report.all_up = up_s.is_some();
    println!(
        "    {up}/{} clients up{}",
        o.clients,
        up_s.map_or(" (timed out)".to_string(), |t| format!(" after {t:.1} s"))
    );
    let server_pid = bed.server.pid();
    report.server_idle = proc_mem(server_pid);
    if !report.all_up {
        bail!(
            "only {up} of {} clients came up within {} s (logs in {})",
            o.clients,
            timeout.as_secs(),
            work.display()
        );
    }
    // Let the handshakes' and probes' first burst settle.
    sleep(Duration::from_secs(1), stop)?;

    let rekey_client = o
        .rekey_after
        .filter(|_| o.clients >= 2)
        .map(|_| o.clients - 1);
    println!(
        "==> clients: one client alone, TCP ({} s)",
        o.duration.as_secs()
    );
    let single = tcp_at_once(&bed, &[0], o, work, "single", None, stop)?;
    let single_m = single.per_sender[0].clone();
    println!("    {:.1} Mbit/s", single_m.mbps);
    report.single = Some(single_m.clone());

    if let (Some(i), Some(every)) = (rekey_client, o.rekey_after) {
        println!(
            "==> clients: client {i} alone, keys renewed every {} s ({} s)",
            every.as_secs(),
            o.duration.as_secs()
        );
        let rekeys = |bed: &Bed| {
            mptd_status(&bed.client_controls[i])
                .ok()
                .and_then(|s| s.connections.as_deref()?.first()?.session.as_ref()?.rekeys)
                .unwrap_or(0)
        };
        let paced = ((single_m.mbps / 2.0) as u64).max(10);
        let r0 = rekeys(&bed);
        let m = tcp_at_once(&bed, &[i], o, work, "rekey", Some(paced), stop)?;
        let with_rekeys = m.per_sender[0].clone();
        let rekeys_made = rekeys(&bed).saturating_sub(r0);
        println!(
            "    {:.1} Mbit/s paced at {paced}, {} retransmits, {rekeys_made} rekeys",
            with_rekeys.mbps,
            with_rekeys.retransmits.unwrap_or(0),
        );
        println!(
            "==> clients: client 0 alone, no rekeys, paced the same ({} s)",
            o.duration.as_secs()
        );
        let base = tcp_at_once(&bed, &[0], o, work, "norekey", Some(paced), stop)?;
        let r = RekeyResult {
            client: client_name(i),
            rekey_after_s: every.as_secs(),
            rekeys: rekeys_made,
            paced_mbps: paced,
            with_rekeys,
            without_rekeys: base.per_sender[0].clone(),
        };
        println!(
            "    {:.1} Mbit/s, {} retransmits",
            r.without_rekeys.mbps,
            r.without_rekeys.retransmits.unwrap_or(0)
        );
        report.rekey = Some(r);
    }

    let senders = pick_senders(o.clients, o.senders, rekey_client);
    println!(
        "==> clients: {} clients at once, TCP ({} s)",
        senders.len(),
        o.duration.as_secs()
    );
    let agg = tcp_at_once(&bed, &senders, o, work, "aggregate", None, stop)?;
    println!("    {:.1} Mbit/s in all", agg.mbps);
    report.aggregate_ratio = (single_m.mbps > 0.0).then(|| agg.mbps / single_m.mbps);
    let quiet_mbps = agg.mbps;
    report.aggregate = Some(agg);

    if o.flood {
        let ports: Vec<u16> = if o.shared_port {
            vec![SHARED_PORT]
        } else {
            (0..o.clients).map(|i| server_port(i, false)).collect()
        };
        report.flood = Some(measure_flood(
            &bed, &senders, o, work, ports, quiet_mbps, server_pid, stop,
        )?);
    }
    report.server_end = proc_mem(server_pid);
    if let Some(st) = bed.server.exited() {
        bail!("the server mptd died ({st}):\n{}", bed.server.log_tail());
    }
    println!("==> clients: tearing down");
    drop(bed);
    Ok(())
}
