//! `mpt emu`: a real-time link emulator in user space (spec section 5).
//!
//! netem is missing on some kernels (our CI among them), so this is a
//! transparent wire between two interfaces of a middle network namespace,
//! in the spirit of Seawind (paper 001). Each direction has its own rate,
//! delay and jitter, loss (Bernoulli and Gilbert-Elliott), outage schedule,
//! store-and-forward relay and rate/delay trace.
//!
//! Layout, sans-IO core first:
//!
//! * [`model`] — the link model: packet size and arrival time in, departure
//!   time or drop reason out; virtual time only, unit-tested with a seed.
//!   Built from [`pacer`] (absolute-timeline rate pacing), [`loss`],
//!   [`schedule`] (outages) and [`trace`] (time-varying rate/delay).
//! * [`profile`] — TOML link profiles, presets, layering with flags.
//! * [`wire`] — the real-time driver: packet sockets, coarse sleep + spin.
//! * [`stats`] — requested vs achieved rate, delay error (paper's Table 1).
//! * [`selftest`], [`netns`], [`traffic`] — the accuracy self-test.
//! * [`sys`] — the system calls, and all `unsafe`.
//!
//! For a harness: build [`model::LinkConfig`]s (or [`profile::resolve`]
//! them), then [`wire::Wire::start`] in the middle namespace and
//! [`wire::Wire::stop`] for the report, or the blocking [`wire::run`].

pub mod loss;
pub mod model;
pub mod netns;
pub mod pacer;
pub mod profile;
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
