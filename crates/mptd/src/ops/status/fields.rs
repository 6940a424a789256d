//! How the daemon's values become the document's fields: durations as
//! milliseconds to the microsecond, and counter groups as typed objects.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// `d` in milliseconds, rounded to the microsecond.
pub(super) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Microseconds as milliseconds.
pub(super) fn us_as_ms(us: u64) -> f64 {
    us as f64 / 1e3
}

/// The object `T` of a counter group, each counter under its external
/// name (`each()` of a [`crate::plane::counters`] group), after the
/// fields in `first`.
///
/// The counters are matched to `T`'s fields by name rather than one by
/// one, so that the group stays declared once: a counter the API does not
/// know lands in `T`'s `other` map, where the status tests find it.
pub(super) fn counters_as<T: DeserializeOwned + Default>(
    first: impl IntoIterator<Item = (&'static str, Value)>,
    counters: impl IntoIterator<Item = (&'static str, u64)>,
) -> T {
    let mut object: Map<String, Value> = first
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
    for (name, value) in counters {
        object.insert(name.to_string(), Value::from(value));
    }
    // Only a counter named like a field of another type fails here (the
    // status tests would too).
    serde_json::from_value(Value::Object(object)).unwrap_or_else(|e| {
        tracing::error!(error = %e, "a counter group does not fit the status document");
        T::default()
    })
}
