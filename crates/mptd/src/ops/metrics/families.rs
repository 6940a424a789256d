//! Writing a metric family through `prometheus-client`: its descriptor
//! (`# HELP`, `# TYPE`, `# UNIT`), then one sample per label set.
//!
//! Families are named here by their sample names as the page shows them
//! and the docs list them (`mpt_drops_total`, `mpt_path_rtt_seconds`):
//! [`counters`] drops the `_total` that OpenMetrics leaves out of a
//! counter family's name (the encoder adds it back to each sample), and a
//! `_seconds` or `_bytes` suffix becomes the family's unit.
//!
//! `prometheus-client` writes label values and help texts as given, so
//! [`Labels`] and the helpers here escape them (`\\`, `\"`, `\n`): a
//! connection or path name may hold any character.

use std::fmt::{self, Write as _};

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, LabelSetEncoder,
    NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

static SECONDS: Unit = Unit::Seconds;
static BYTES: Unit = Unit::Bytes;

/// A sample's labels, in order (`conn` first). The values are escaped
/// when written.
#[derive(Debug, Clone, Default)]
pub struct Labels<'a>(Vec<(&'static str, &'a str)>);

impl<'a> Labels<'a> {
    /// `conn="name"`: every sample carries it (`""`: no connection).
    pub fn conn(name: &'a str) -> Labels<'a> {
        Labels(vec![("conn", name)])
    }

    /// These labels and `key="value"`.
    pub fn with(mut self, key: &'static str, value: &'a str) -> Labels<'a> {
        self.0.push((key, value));
        self
    }
}

impl EncodeLabelSet for Labels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        for &(key, value) in &self.0 {
            let mut label = encoder.encode_label();
            let mut key_encoder = label.encode_label_key()?;
            key_encoder.write_str(key)?;
            let mut value_encoder = key_encoder.encode_label_value()?;
            write_escaped(&mut value_encoder, value)?;
            value_encoder.finish()?;
        }
        Ok(())
    }
}

/// Writes `text` with the escapes of OpenMetrics label values and help
/// texts.
pub fn write_escaped(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '"' => out.write_str("\\\"")?,
            '\n' => out.write_str("\\n")?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

/// A gauge family `name` with these samples.
pub fn gauges<'a, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels<'a>, V)>,
) -> fmt::Result {
    let (stem, unit) = split_unit(name);
    let help = escaped(help)?;
    let mut family = encoder.encode_descriptor(stem, &help, unit, MetricType::Gauge)?;
    for (labels, value) in samples {
        family.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

/// A counter family whose samples are `name` (which ends in `_total`).
pub fn counters<'a, V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels<'a>, V)>,
) -> fmt::Result {
    let family_name = name.strip_suffix("_total").ok_or(fmt::Error)?;
    let (stem, unit) = split_unit(family_name);
    let help = escaped(help)?;
    let mut family = encoder.encode_descriptor(stem, &help, unit, MetricType::Counter)?;
    for (labels, value) in samples {
        family
            .encode_family(&labels)?
            .encode_counter::<NoLabelSet, V, f64>(&value, None)?;
    }
    Ok(())
}

/// A histogram family `name`: per label set the sum, and the count of
/// each bucket (not cumulative) with its upper limit, `f64::MAX` for
/// `+Inf` (the last bucket must be that one).
pub fn histograms<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels<'a>, f64, Vec<(f64, u64)>)>,
) -> fmt::Result {
    let (stem, unit) = split_unit(name);
    let help = escaped(help)?;
    let mut family = encoder.encode_descriptor(stem, &help, unit, MetricType::Histogram)?;
    for (labels, sum, buckets) in samples {
        let count = buckets
            .iter()
            .fold(0u64, |total, &(_, n)| total.saturating_add(n));
        family
            .encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
    }
    Ok(())
}

/// `mpt_x_seconds` -> (`mpt_x`, seconds); names in other units, or in
/// none, stay whole.
fn split_unit(name: &str) -> (&str, Option<&'static Unit>) {
    if let Some(stem) = name.strip_suffix("_seconds") {
        (stem, Some(&SECONDS))
    } else if let Some(stem) = name.strip_suffix("_bytes") {
        (stem, Some(&BYTES))
    } else {
        (name, None)
    }
}

fn escaped(text: &str) -> Result<String, fmt::Error> {
    let mut out = String::with_capacity(text.len());
    write_escaped(&mut out, text)?;
    Ok(out)
}
