//! Fuzz targets for the parsers of untrusted input, on stable Rust (see
//! `harness.rs` for how they run in CI and from `benches/fuzz.sh`).
//!
//! | target | input | properties besides "no panic" |
//! |---|---|---|
//! | `mss_clamp_bytes` | any bytes, MTU, checksum kind | length kept; untouched unless `Lowered`; `Lowered` means down to the limit |
//! | `mss_clamp_syn` | IPv4/IPv6 TCP SYNs with random options | a valid checksum stays valid; only MSS values and the checksum change |
//! | `checksum` | any bytes, split points, words | split sums add up; incremental update equals recomputing |
//! | `noise_messages` | raw or XOR-masked initiation, response, cookie reply | accepted exactly when unaltered (mac2 aside when not under load); both ends agree on the indexes |
//! | `psk_messages` | raw or XOR-masked Init, Challenge, Response | accepted exactly when unaltered; replies no larger than the Init |
//! | `api_request` | any bytes, and JSON objects of the request's fields | a parsed request survives `to_line` and `parse` unchanged |
//! | `api_response` | any bytes, JSON objects | a parsed response survives serialisation unchanged |
//! | `config` | any text, and edits of a valid config | an accepted config keeps every bound |
//! | `netlink` | any bytes, and framed netlink messages | never more messages than headers; route bodies never panic |
//! | `cmd_port_answer` | any bytes | no forged answer opens |

mod api;
mod daemon;
mod harness;
mod noise;
mod proto;
mod psk;
