//! What each command does once its arguments are parsed (`crate::cli`):
//! one module per command family, each returning the exit code or a
//! [`crate::exit::Failure`] that carries one.

pub(crate) mod bench;
pub(crate) mod bench_soak;
pub(crate) mod bench_tools;
pub(crate) mod client;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod ctl;
pub(crate) mod emu;
pub(crate) mod generate;
pub(crate) mod keys;
