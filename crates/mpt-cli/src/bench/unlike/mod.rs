//! `unlike` (issue 12): one TCP stream through the tunnel over paths that
//! differ in rate, delay and loss (GEO + DSL, WiFi + LTE, lossy WiFi + LTE,
//! LTE on a capacity trace beside WiFi) and over two like paths, next to
//! raw TCP over each path alone, measured in the same run with the same
//! congestion control (CUBIC and BBR, `iperf3 -C`).
//!
//! A case is a named list of emulated links (`[[unlike.case]]` with
//! `[[unlike.case.path]]` tables) and a target: the tunnel's goodput must
//! reach `ratio` x the best raw path (`target = "best"`) or `ratio` x the
//! sum of the raw paths (`target = "sum"`). Per case the testbed is built
//! once; per congestion control the raw paths are measured one after the
//! other (iperf3 between the path's outer addresses, the tunnel idle), then
//! the tunnel (iperf3 between the tunnel addresses). mptd runs with its
//! default scheduler and equal weights (the bench leaves `scheduler` out of
//! its configs for this scenario).
//!
//! One TCP run over a long-RTT path varies a lot from run to run (CUBIC
//! over the 600 ms GEO path: 0.5 to 1.3 of the best path alone), so the
//! tunnel is measured `[unlike] repeat` times (1..=9, default 1; also in
//! `[unlike.quick]`) in the same testbed, one run after the other. The run
//! whose goodput is the median (for an even count the lower middle one,
//! [`crate::bench::stats::median_run`]) is kept as the tunnel's figure, with its resequencing
//! hold and CPU use, and judged against the target; every run's goodput is
//! reported beside it (results.json/csv, and min..max in the table). The
//! raw paths are measured once each.
//!
//! Each measurement leaves out its first `omit` seconds (`iperf3 -O`): a
//! 600 ms path needs several seconds of slow start, and the raw baselines
//! and the tunnel are measured alike. A link on a trace has its emulator
//! wire restarted before every measurement, so each sees the same capacity
//! over time from the start of the trace.
//!
//! With `--baseline mptcp` (the default when `mptcpize` is installed)
//! kernel MPTCP runs after each tunnel run over the same paths, its bytes
//! per path counted to prove every subflow carried data, and the tables
//! give mpt / MPTCP beside the raw-path ratios ([`baseline`]).
//!
//! With `--accel` (on by default, off with `--quick` unless asked) the
//! testbed gets end hosts behind the gateways and mptd TCP acceleration,
//! and after each MPTCP run one TCP stream from end host to end host is
//! split at A and carried over warm legs ([`accel`]): accelerated Mbit/s,
//! accel / MPTCP and accel / sum of the raw paths. Cases marked `objects =
//! true` also fetch 1 MB objects one after another through the tunnel,
//! accelerated and over MPTCP, and report median completion times
//! ([`objects`]).
//!
//! Layout: [`def`] is the `[unlike]` table and its cases, [`expand`] turns
//! it into testbed cases, [`run`] measures one, [`verdict`] judges the
//! tunnel against the raw paths, [`result`] holds what a case measured and
//! [`report`] (with [`text`]) writes it out, with [`charts`] beside its bar
//! chart.

pub mod accel;
pub mod baseline;
pub mod charts;
pub mod def;
pub mod expand;
#[cfg(test)]
mod expand_tests;
pub mod objects;
pub mod report;
pub mod result;
pub mod run;
pub mod text;
pub mod verdict;
