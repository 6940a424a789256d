//! `dtn-relay` (spec section 6; Caini et al., papers/000): two hops through
//! a store-and-forward relay and a bundle workload with window W = 1.
//!
//! Mapping onto the testbed: mptd runs at the two ends only (A = bundle
//! source, B = destination), so the tunnel is the end-to-end convergence
//! layer and its single path crosses both hops. The middle namespace M is
//! the relay: two emulator wires in series, `ma0 <-> ra0` (hop 1, the wired
//! hop A-relay, `[dtn.wired]`, RTT 25 ms) and `rb0 <-> mb0` (hop 2, the
//! satellite hop relay-B, `[link]`, RTT and PER swept, intermittent
//! contacts from `contacts`, custody store `relay`) joined by the veth pair
//! ra0/rb0 inside M. During a contact gap the satellite wire keeps what
//! arrives (custody) and forwards it at link rate when the contact returns;
//! mptd and TCP see a long delay instead of a loss.
//!
//! Workload ([`super::bundle`]): 1 MB bundles, one at a time, each waiting
//! for its 1-byte delivery acknowledgment. Reported: goodput (acknowledged
//! bytes / elapsed time) against the satellite RTT, and the delivery ratio
//! (acknowledged / sent within the bundle lifetime).
//!
//! Layout: [`def`] is the `[dtn]` table, [`run`] one case, [`result`] what
//! it measured and [`report`] its table, CSV and chart.

pub mod def;
pub mod report;
pub mod result;
pub mod run;
