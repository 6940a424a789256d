//! `lte-gateway` (spec section 6; Masek et al., papers/002; handover,
//! papers/004): a WiFi path and an LTE path, a VoIP-like flow (160 B every
//! 20 ms) beside bulk TCP (iperf3), and a handover: the WiFi link goes dark
//! for `handover_len` in the middle of the run.
//!
//! Mapping onto the testbed: path 0 is the WiFi link (`[link]`), path 1 the
//! LTE link (`[extra_link]`), both through emulator wires in M; mptd weights
//! are proportional to the nominal link rates. The LTE link's capacity
//! follows a trace (`trace`, rate steps over time), scaled by
//! L / (L + gtp_overhead) with L = 1466 B, the Ethernet frame of a full-size
//! tunnel packet: the emulator charges whole frames at the link rate, so the
//! 40 B of GTP-U/UDP/IP encapsulation per packet become a lower effective
//! rate (exact for full-size packets; small VoIP packets pay 40 B each in a
//! real network, about 16 % more than modelled here). The handover is an
//! outage window on both directions of the WiFi wire, so mptd only learns of
//! it from missing keepalives (as with a radio that silently disappears):
//! `event = "silent"`, the default. With `event = "link-down"` the wire
//! stays as it is and A's WiFi interface itself goes down for the same
//! window (`ip link set va0 down`, then up): mptd in A learns of it from
//! netlink at once; B, whose own interface stays up, learns nothing. With
//! `event = "addr-change"` A's WiFi path names only its interface (no
//! `local`; both sides get a key and B learns A's address), and at the
//! handover A's WiFi interface trades its address for another of the same
//! subnet for good (a DHCP renew, a new network): A's path moves to it and
//! B learns it from A's authenticated datagrams.
//!
//! Timeline: the wires start (epoch), the testbed comes up, the measurement
//! starts at epoch + [`run::SETUP_ALLOWANCE`] (or at once if setup took longer),
//! and the WiFi outage begins `handover_at` after that.
//!
//! Layout: [`def`] is the `[lte]` table and its variants, [`run`] one case
//! (with [`wifi`] watching the WiFi path come back, [`target`] judging it
//! and [`mptcp`] the kernel MPTCP baseline of a bulk stream), [`result`]
//! what a case measured, [`report`] its table and CSV and [`charts`] its
//! charts.

pub mod charts;
pub mod def;
pub mod mptcp;
pub mod report;
pub mod result;
pub mod run;
pub mod target;
pub mod voip_log;
pub mod wifi;
