//! `dtn-relay` (Caini et al., papers/000, Figures 4-6): bundles through a
//! real store-and-forward relay against end-to-end TCP, on the same paths
//! and in the same run.
//!
//! Three BPv7 agents (dtn7-rs's `dtnd`, [`agent`]): the source in namespace
//! S, the relay (the satellite gateway) in A and the destination in B,
//! TCPCL between neighbours, static routes src -> relay -> dst. The
//! terrestrial hop S - A ([`topo`]) is an emulator wire (RTT 25 ms) shared
//! with competing TCP flows (iperf3 -P 5 S -> A); the GEO hop A - B is the
//! mpt tunnel over the case's emulated path(s) (RTT and PER swept). So the
//! relay splits the transfer at the gateway: the source's TCP connection
//! has the competing flows' RTT and gets its fair share of the terrestrial
//! bottleneck whatever the GEO RTT, while an end-to-end TCP connection S ->
//! B (same hops, same competition) has the long RTT and loses against the
//! short-RTT flows. That is the effect the paper measured.
//!
//! Per case ([`run`], [`phases`]): end-to-end TCP goodput, bundle goodput
//! with a window of W undelivered bundles (the order alternates between
//! cases), both beside the competing flows; then a contact gap: the GEO
//! wire restarted with an outage, bundles submitted just before and during
//! it, every one accounted for by id and payload digest ([`payload`],
//! [`goodput`]). The bundles' delivery is observed by the bench at the
//! destination's agent ([`flow`], over its local HTTP interface, [`http`]).
//!
//! Layout: [`def`] is the `[dtn]` table, [`result`] what a case measured
//! and [`report`] its table, CSV and chart.

pub mod agent;
pub mod def;
pub mod flow;
pub mod goodput;
pub mod http;
pub mod payload;
pub mod phases;
pub mod report;
pub mod result;
pub mod run;
pub mod topo;
