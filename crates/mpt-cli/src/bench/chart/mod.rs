//! The bench's SVG charts, written by hand (no plotting dependency for a
//! few hundred lines of SVG): line and dot charts ([`line`](mod@line): throughput
//! against the swept variable, VoIP delay over time, bundle goodput
//! against RTT) and grouped bars ([`bar`]: `unlike`). Every bench draws
//! through these two, so they share one look: [`svg`] holds the frame,
//! palette and escaping, [`scale`] the axis arithmetic.

pub mod bar;
pub mod line;
pub mod scale;
pub mod svg;
