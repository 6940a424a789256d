//! bench helpers
