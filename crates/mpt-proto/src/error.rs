//! The crate's former home of [`DecodeError`] and [`EncodeError`], kept so
//! that `mpt_proto::error::*` paths still resolve. The errors are defined
//! next to the codec that raises them, in [`crate::wire`]; new code names
//! them from there (or from the crate root).

pub use crate::wire::{DecodeError, EncodeError};
