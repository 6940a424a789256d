//! Single-stream TCP from a set of clients at once (iperf3 bound to their
//! tunnel addresses, each to its own server), and which clients send.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::bed::Bed;
use super::config::{client_name, client_tun_ip, target_ip};
use super::options::Options;
use super::report::Aggregate;
use crate::bench::iperf;
use crate::bench::process::Proc;
use crate::bench::stop::check_stop;

/// Single-stream TCP from each of `senders` (client indexes) at once, each
/// to its own iperf3 server in the server namespace.
pub(crate) fn tcp_at_once(
    bed: &Bed,
    senders: &[usize],
    o: &Options,
    work: &Path,
    tag: &str,
    rate_mbps: Option<u64>,
    stop: &AtomicBool,
) -> anyhow::Result<Aggregate> {
    let mut servers = Vec::new();
    for &i in senders {
        let log = work.join(format!("iperf3-{tag}-{i}-server.log"));
        servers.push(iperf::Server::start(bed.s.name(), &log, false, stop)?);
    }
    let secs = o.duration.as_secs().max(1).to_string();
    let cpu0 = (bed.server.cpu_time(), Instant::now());
    let mut procs = Vec::new();
    let mut outs = Vec::new();
    for (&i, server) in senders.iter().zip(&servers) {
        let json = work.join(format!("iperf3-{tag}-{i}.json"));
        let (target, bind, port) = (
            target_ip(i).to_string(),
            client_tun_ip(i).to_string(),
            server.port.to_string(),
        );
        let rate = rate_mbps.map(|r| format!("{r}M"));
        let mut args = vec![
            "-c",
            &target,
            "-B",
            &bind,
            "-p",
            &port,
            "-t",
            &secs,
            "-J",
            "--connect-timeout",
            "5000",
        ];
        if let Some(r) = &rate {
            args.extend(["-b", r.as_str()]);
        }
        procs.push(Proc::spawn_in(
            bed.c.name(),
            &format!("iperf3 client {i}"),
            Path::new("iperf3"),
            &args,
            json.clone(),
        )?);
        outs.push(json);
    }
    let deadline = Instant::now() + o.duration + Duration::from_secs(30);
    while procs.iter_mut().any(|p| p.exited().is_none()) {
        check_stop(stop)?;
        if Instant::now() > deadline {
            bail!("iperf3 clients ({tag}) did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let server_cpu_pct = match (cpu0.0, bed.server.cpu_time()) {
        (Some(a), Some(b)) => Some(100.0 * (b - a).as_secs_f64() / cpu0.1.elapsed().as_secs_f64()),
        _ => None,
    };
    drop(procs);
    drop(servers);
    let mut agg = Aggregate {
        server_cpu_pct,
        ..Aggregate::default()
    };
    for (&i, json) in senders.iter().zip(&outs) {
        let text =
            std::fs::read_to_string(json).with_context(|| format!("reading {}", json.display()))?;
        let m = iperf::parse(&text, None)
            .with_context(|| format!("client {i} ({tag}), output in {}", json.display()))?;
        agg.mbps += m.mbps;
        agg.retransmits += m.retransmits.unwrap_or(0);
        agg.clients.push(client_name(i));
        agg.per_sender.push(m);
    }
    Ok(agg)
}

/// `k` clients spread over `0..n` (client 0 first), leaving out `skip`.
pub fn pick_senders(n: usize, k: usize, skip: Option<usize>) -> Vec<usize> {
    let pool: Vec<usize> = (0..n).filter(|&i| Some(i) != skip).collect();
    let pool = if pool.len() >= k {
        pool
    } else {
        (0..n).collect()
    };
    (0..k.min(pool.len()))
        .map(|j| pool[j * pool.len() / k])
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_spread_and_skip_the_rekey_client() {
        assert_eq!(pick_senders(200, 4, Some(199)), [0, 49, 99, 149]);
        assert_eq!(pick_senders(4, 2, Some(3)), [0, 1]);
        assert_eq!(pick_senders(2, 2, Some(1)), [0, 1]);
        assert_eq!(pick_senders(1, 1, None), [0]);
    }
}
