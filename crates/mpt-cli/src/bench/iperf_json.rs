//! The parts of iperf3's `-J` report the harness reads, typed.
//!
//! iperf3's JSON is large and differs between versions and between TCP
//! and UDP tests; [`crate::bench::iperf::parse`] needs a handful of its
//! fields. These structs declare just those, and read them as leniently
//! as the untyped reader they replace did: a field of another type than
//! expected counts as missing (`None`), never as an unreadable report,
//! and an object that is present but not an object (say `null`) counts
//! as present and empty, so that the "without a sum" checks keep their
//! meaning.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The whole report.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Report {
    /// Why the test failed, when it did.
    #[serde(deserialize_with = "lenient")]
    pub error: Option<String>,
    /// The totals at the end of the test.
    #[serde(deserialize_with = "present")]
    pub end: Option<End>,
}

/// The report's `end` section: totals as the receiver and the sender saw
/// them (`sum`: UDP's totals of older iperf3 versions, or either side's).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct End {
    #[serde(deserialize_with = "present")]
    pub sum_received: Option<Sum>,
    #[serde(deserialize_with = "present")]
    pub sum_sent: Option<Sum>,
    #[serde(deserialize_with = "present")]
    pub sum: Option<Sum>,
}

/// One side's totals.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Sum {
    #[serde(deserialize_with = "lenient")]
    pub seconds: Option<f64>,
    #[serde(deserialize_with = "lenient")]
    pub bits_per_second: Option<f64>,
    /// UDP: datagrams sent (sender) or expected (receiver).
    #[serde(deserialize_with = "lenient")]
    pub packets: Option<f64>,
    #[serde(deserialize_with = "lenient")]
    pub lost_packets: Option<f64>,
    #[serde(deserialize_with = "lenient")]
    pub lost_percent: Option<f64>,
    /// TCP sender: segments retransmitted.
    #[serde(deserialize_with = "lenient")]
    pub retransmits: Option<u64>,
}

/// A field read as `T` if it is one, else `None` (never an error).
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(d)?;
    Ok(T::deserialize(value).ok())
}

/// A field that is present: read as `T`, or `T`'s default when it is not
/// one (a missing field is left to `#[serde(default)]`, i.e. `None`).
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(d)?;
    Ok(Some(T::deserialize(value).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(text: &str) -> Report {
        serde_json::from_str(text).expect("JSON")
    }

    #[test]
    fn fields_of_another_type_count_as_missing() {
        let r =
            report(r#"{"error":3,"end":{"sum":{"seconds":"2","packets":10,"retransmits":1.5}}}"#);
        assert_eq!(r.error, None);
        let sum = r.end.and_then(|e| e.sum).expect("sum");
        assert_eq!((sum.seconds, sum.packets), (None, Some(10.0)));
        assert_eq!(sum.retransmits, None);
    }

    #[test]
    fn present_but_not_objects_count_as_empty() {
        let r = report(r#"{"end":null}"#);
        let end = r.end.expect("end is present");
        assert!(end.sum_received.is_none() && end.sum.is_none());
        let r = report(r#"{"end":{"sum_received":null}}"#);
        let recv = r.end.and_then(|e| e.sum_received).expect("present");
        assert_eq!(recv.bits_per_second, None);
        assert!(report("{}").end.is_none());
    }
}
