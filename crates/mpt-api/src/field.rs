//! How single fields are read where serde's defaults are not what the
//! protocol needs.
//!
//! serde reads a missing `Option` field as `None` and a `null` one as
//! `None` too. The status document tells them apart (a daemon too old to
//! send a field, against a daemon saying it has no value), so nullable
//! fields are `Option<Option<T>>` read with [`nullable`]. The response
//! envelope is checked the way the untyped client checked it: a field of
//! the wrong type counts as missing ([`lenient`]).

use serde::{de::DeserializeOwned, Deserialize, Deserializer};
use serde_json::Value;

/// A field that is present: `Some(None)` for `null`, `Some(Some(v))` for a
/// value (a missing field is left to `#[serde(default)]`, i.e. `None`).
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A field read as `T` if it is one, else `None` (never an error).
pub(crate) fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(d)?;
    Ok(T::deserialize(value).ok())
}

/// A field kept as the JSON it is, `null` included (`Some(Value::Null)`),
/// so that a parser can tell a missing field from a `null` one.
pub(crate) fn present<'de, D>(d: D) -> Result<Option<Value>, D::Error>
where
    D: Deserializer<'de>,
{
    Value::deserialize(d).map(Some)
}
