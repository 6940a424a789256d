//! The short-flow workload of an `unlike` case (issue 36 item 4): `[unlike]
//! objects` 1 MB objects fetched one after another, each on a new
//! connection ([`crate::bench::objects`]), through the plain tunnel (A to
//! B's tunnel address), accelerated (end host C to S, split at A) and over
//! kernel MPTCP (A to B's path-0 address, MPTCP sockets at both ends), in
//! `repeat` rounds that interleave the three. Per round and variant the
//! median completion time; the figure is the median of the rounds.
//! IPv4 cases only (the end hosts are IPv4).

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::bench::endhosts::S_ADDR;
use crate::bench::objects::{self, median_ms, Server};
use crate::bench::stop::check_stop;
use crate::bench::testbed::Testbed;

/// Ports of the object servers (clear of iperf3's 5301.. and HTTP's 8080).
const PORT: u16 = 8090;
const PORT_MPTCP: u16 = 8091;

/// One round: every fetch's completion time per variant, ms.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ObjectsRound {
    pub tunnel_ms: Vec<f64>,
    pub accel_ms: Vec<f64>,
    pub mptcp_ms: Vec<f64>,
}

/// results.json `rows[].unlike.objects`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ObjectsResult {
    /// Objects fetched per variant and round.
    pub count: usize,
    pub bytes: usize,
    pub rounds: Vec<ObjectsRound>,
    /// Median over the rounds of each round's median, ms.
    pub tunnel_ms: Option<f64>,
    pub accel_ms: Option<f64>,
    pub mptcp_ms: Option<f64>,
}

impl ObjectsResult {
    pub fn from_rounds(count: usize, rounds: Vec<ObjectsRound>) -> ObjectsResult {
        let of = |f: fn(&ObjectsRound) -> &Vec<f64>| {
            let meds: Vec<f64> = rounds.iter().filter_map(|r| median_ms(f(r))).collect();
            median_ms(&meds)
        };
        ObjectsResult {
            count,
            bytes: objects::SIZE,
            tunnel_ms: of(|r| &r.tunnel_ms),
            accel_ms: of(|r| &r.accel_ms),
            mptcp_ms: of(|r| &r.mptcp_ms),
            rounds,
        }
    }

    /// Accelerated / MPTCP completion time (issue 36 target: <= 0.5).
    pub fn accel_over_mptcp(&self) -> Option<f64> {
        match (self.accel_ms, self.mptcp_ms) {
            (Some(a), Some(m)) if m > 0.0 => Some(a / m),
            _ => None,
        }
    }
}

/// Fetches `count` objects per variant in `rounds` rounds; MPTCP only when
/// `mptcp` (the baseline is on), accelerated only with end hosts.
pub fn measure(
    tb: &Testbed,
    count: usize,
    rounds: usize,
    mptcp: bool,
    progress: &dyn Fn(&str),
    stop: &AtomicBool,
) -> anyhow::Result<ObjectsResult> {
    let b = tb.b.name();
    let tunnel_to = SocketAddrV4::new(tb.plan.inner(2).parse().context("tunnel address")?, PORT);
    let mptcp_to = SocketAddrV4::new(
        tb.plan.outer(0, 2).parse().context("path 0 address")?,
        PORT_MPTCP,
    );
    let accel_to = SocketAddrV4::new(S_ADDR.parse().context("S address")?, PORT);
    let _srv = Server::start(b, PORT, false)?;
    let _srv_mptcp = if mptcp {
        Some(Server::start(b, PORT_MPTCP, true)?)
    } else {
        None
    };
    let _srv_s = match &tb.hosts {
        Some(h) => Some(Server::start(h.s.name(), PORT, false)?),
        None => None,
    };
    let fetch_n = |ns: &str, to: SocketAddrV4, mptcp: bool| -> anyhow::Result<Vec<f64>> {
        (0..count)
            .map(|_| {
                check_stop(stop)?;
                Ok(objects::fetch(ns, to, mptcp)?.as_secs_f64() * 1e3)
            })
            .collect()
    };
    let mut out = Vec::new();
    for r in 1..=rounds {
        progress(&format!(
            "{count} x 1 MB objects one after another, round {r}/{rounds}"
        ));
        let mut round = ObjectsRound::default();
        if mptcp {
            round.mptcp_ms = fetch_n(tb.a.name(), mptcp_to, true).context("objects over MPTCP")?;
        }
        round.tunnel_ms =
            fetch_n(tb.a.name(), tunnel_to, false).context("objects through the tunnel")?;
        if let Some(h) = &tb.hosts {
            round.accel_ms = fetch_n(h.c.name(), accel_to, false).context("objects accelerated")?;
        }
        println!(
            "    objects round {r}: median ms MPTCP {}, tunnel {}, accelerated {}",
            fmt(median_ms(&round.mptcp_ms)),
            fmt(median_ms(&round.tunnel_ms)),
            fmt(median_ms(&round.accel_ms)),
        );
        out.push(round);
    }
    Ok(ObjectsResult::from_rounds(count, out))
}

fn fmt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_round_medians() {
        let round = |t: &[f64], a: &[f64], m: &[f64]| ObjectsRound {
            tunnel_ms: t.to_vec(),
            accel_ms: a.to_vec(),
            mptcp_ms: m.to_vec(),
        };
        let r = ObjectsResult::from_rounds(
            3,
            vec![
                round(
                    &[3000.0, 3100.0, 2900.0],
                    &[1400.0, 1000.0, 1100.0],
                    &[2600.0; 3],
                ),
                round(&[3000.0; 3], &[1200.0; 3], &[2400.0; 3]),
                round(&[3000.0; 3], &[900.0; 3], &[2500.0; 3]),
            ],
        );
        assert_eq!(r.tunnel_ms, Some(3000.0));
        assert_eq!(r.accel_ms, Some(1100.0));
        assert_eq!(r.mptcp_ms, Some(2500.0));
        assert_eq!(r.accel_over_mptcp(), Some(0.44));
        let none = ObjectsResult::from_rounds(3, vec![round(&[1.0], &[], &[])]);
        assert_eq!((none.accel_ms, none.accel_over_mptcp()), (None, None));
    }
}
