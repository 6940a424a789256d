//! The `mpt` command line as a library, so that workspace tests can drive
//! the benchmark harness (`bench`) and the control client (`ctl`) against a
//! stand-in daemon. The link emulator both `mpt emu` and `mpt bench` use is
//! the `mpt_emu` crate.

pub mod bench;
pub mod branch;
pub mod ctl;
