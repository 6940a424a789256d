//! The end-to-end tests that need no test binary of their own: each file
//! here is a module with its own namespaces (unique names, removed on every
//! exit) and temp files, so they can run side by side. One binary instead
//! of fourteen saves CI most of its link time (every test binary of a
//! release build is linked with LTO). Tests that count what a whole run
//! leaves or does (repair, failover, the benches) keep a binary of their own.

mod accel;
mod client_add;
mod cmd_port;
mod combos;
mod concentrator;
mod config;
mod control;
mod garbage;
mod hooks;
mod names;
mod package;
mod routing;
mod structure;
mod weights;
