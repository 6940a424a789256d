//! The `mpt` command line as a library, so that the benchmark harness and
//! workspace tests can drive the link emulator in-process, and tests can
//! drive the control client (`ctl`) against a stand-in daemon.

pub mod bench;
pub mod ctl;
pub mod emu;
