//! The `mpt` command line as a library, so that the benchmark harness and
//! workspace tests can drive the link emulator in-process.

pub mod bench;
pub mod emu;
