//! The bench's SVG charts, written by hand (no plotting dependency for a
//! few hundred lines of SVG): line, dot and step charts ([`line`](mod@line):
//! throughput against the swept variable, per-second series, VoIP delay
//! over time, CDFs, bundle goodput against RTT), small multiples
//! ([`panels`]: a panel per variant or case on shared axes) and grouped
//! bars ([`bar`]: `unlike`, with the range of repeated runs). Every bench
//! draws through these, so they share one look: [`svg`] holds the frame,
//! palette, line styles and escaping, [`scale`] the 1-2-5 axis steps.

pub mod bar;
pub mod line;
pub mod panels;
pub mod scale;
pub mod svg;
