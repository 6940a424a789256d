//! A real-time link emulator in user space: the engine behind `mpt emu`
//! (spec section 5) and the emulated paths of `mpt bench`.
//!
//! What it is for: benchmarkers measure channel aggregation on one machine,
//! over paths that must look like DSL, LTE, satellite or fibre links. The
//! kernel's netem would do, but it is missing on some kernels (our CI among
//! them), so this is a transparent wire between two interfaces of a middle
//! network namespace, in the spirit of Seawind (paper 001). Each direction
//! has its own rate, delay and jitter, loss (Bernoulli and Gilbert-Elliott),
//! outage schedule, store-and-forward relay and rate/delay trace.
//!
//! Why a library: the same wire serves three callers, the `mpt emu`
//! command line, the benchmark harness (which starts one wire per path
//! inside its testbed, in-process, and reads the report back) and the tests
//! of this crate, which drive it in throw-away namespaces without building
//! the CLI. The link model is sans-IO and can be used on its own, e.g. in a
//! virtual-time simulation.
//!
//! Layout, sans-IO core first:
//!
//! * [`model`] — the link model: packet size and arrival time in, departure
//!   time or drop reason out; virtual time only, unit-tested with a seed.
//!   Built from [`pacer`] (absolute-timeline rate pacing), [`loss`],
//!   [`schedule`] (outages) and [`trace`] (time-varying rate/delay; also
//!   read from Mahimahi's delivery-opportunity files by [`mahimahi`]).
//! * [`profile`] — TOML link profiles, presets, layering with flags.
//! * [`wire`] — the real-time driver: packet sockets read and written in
//!   batches, coarse sleep + spin; [`gso`] cuts GSO aggregates into packets.
//! * [`stats`] — requested vs achieved rate, delay error (paper's Table 1).
//! * [`selftest`], [`netns`], [`traffic`] — the accuracy self-test.
//! * [`sys`] — the system calls, and (with [`ring`], the shared receive
//!   ring) all `unsafe`.
//! * [`units`], [`rng`], [`signal`] — rate/size/duration parsing, the seeded
//!   generator, SIGINT/SIGTERM to a stop flag.
//!
//! For a harness: build [`model::LinkConfig`]s (or [`profile::resolve`]
//! them), then [`wire::Wire::start`] in the middle namespace and
//! [`wire::Wire::stop`] for the report, or the blocking [`wire::run`].

pub mod gso;
pub mod loss;
pub mod mahimahi;
pub mod model;
pub mod netns;
pub mod pacer;
pub mod profile;
pub mod ring;
pub mod rng;
pub mod schedule;
pub mod selftest;
pub mod signal;
pub mod stats;
pub mod sys;
pub mod trace;
pub mod traffic;
pub mod units;
pub mod wire;

/// Serializes a `Duration` as seconds (f64) in reports.
pub(crate) mod serde_duration {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Serializes an `Option<Duration>` as seconds or null.
pub(crate) mod serde_opt_duration {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}
