//! results.csv (and the per-packet VoIP log) through the `csv` crate: each
//! row is a serde struct whose field names are the column names, so
//! quoting of user text (case names with commas or quotes) is the crate's
//! job, not a `format!`'s. Numbers keep the fixed precision their columns
//! have always had, through the `serialize_with` helpers below; a `None`
//! is an empty field.

use serde::{Serialize, Serializer};

/// Writing a CSV table into a string failed.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("writing CSV: {0}")]
    Csv(#[from] csv::Error),
    #[error("CSV output is not UTF-8: {0}")]
    Utf8(#[from] std::string::FromUtf8Error),
}

/// `rows` under a header made of the row type's field names; for no rows
/// the header alone (taken from `T::default()`).
pub fn to_string<T: Serialize + Default>(rows: &[T]) -> Result<String, CsvError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    if rows.is_empty() {
        w.serialize(T::default())?;
        let text = finish(w)?;
        return Ok(text
            .lines()
            .next()
            .map_or_else(String::new, |h| format!("{h}\n")));
    }
    for r in rows {
        w.serialize(r)?;
    }
    finish(w)
}

/// `rows` under the given header, for rows whose columns vary with the
/// data (one group per path); a row may hold sequences and nested
/// structs, which are written out field by field.
pub fn to_string_with_header<T: Serialize>(
    header: &[String],
    rows: &[T],
) -> Result<String, CsvError> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.write_record(header)?;
    for r in rows {
        w.serialize(r)?;
    }
    finish(w)
}

fn finish(w: csv::Writer<Vec<u8>>) -> Result<String, CsvError> {
    let bytes = w
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8(bytes)?)
}

macro_rules! fixed {
    ($($name:ident, $opt:ident, $prec:literal;)*) => {$(
        #[doc = concat!("An `f64` column with ", stringify!($prec), " decimals.")]
        pub fn $name<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(&format_args!("{v:.*}", $prec))
        }

        #[doc = concat!("An optional `f64` column with ", stringify!($prec), " decimals.")]
        pub fn $opt<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(v) => $name(v, s),
                None => s.serialize_none(),
            }
        }
    )*};
}

fixed! {
    f1, opt1, 1;
    f2, opt2, 2;
    f3, opt3, 3;
    f4, opt4, 4;
}

/// An `f64` column as Rust displays it (shortest form, "20" not "20.0").
pub fn plain<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// An optional `f64` column as Rust displays it.
pub fn opt_plain<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => plain(v, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize)]
    struct Row {
        name: String,
        #[serde(serialize_with = "f4")]
        mbps: f64,
        #[serde(serialize_with = "opt1")]
        rtt_ms: Option<f64>,
        #[serde(serialize_with = "plain")]
        loss: f64,
        retransmits: Option<u64>,
        pass: Option<bool>,
    }

    #[test]
    fn fields_are_quoted_and_numbers_keep_their_precision() {
        let rows = [
            Row {
                name: "wifi, \"fast\" + lte".into(),
                mbps: 12.3,
                rtt_ms: Some(60.04),
                loss: 0.01,
                retransmits: Some(3),
                pass: Some(true),
            },
            Row {
                name: "plain".into(),
                loss: 20.0,
                ..Row::default()
            },
        ];
        let text = to_string(&rows).expect("csv");
        assert_eq!(
            text,
            "name,mbps,rtt_ms,loss,retransmits,pass\n\
             \"wifi, \"\"fast\"\" + lte\",12.3000,60.0,0.01,3,true\n\
             plain,0.0000,,20,,\n"
        );
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let names: Vec<String> = r
            .records()
            .map(|rec| rec.expect("record")[0].to_string())
            .collect();
        assert_eq!(names, ["wifi, \"fast\" + lte", "plain"]);
    }

    #[test]
    fn no_rows_is_the_header_alone() {
        assert_eq!(
            to_string::<Row>(&[]).expect("csv"),
            "name,mbps,rtt_ms,loss,retransmits,pass\n"
        );
    }

    #[test]
    fn nested_rows_under_a_given_header() {
        #[derive(Serialize)]
        struct Wide<'a> {
            case: &'a str,
            paths: Vec<(&'a str, Option<u64>)>,
            total: u64,
        }
        let header: Vec<String> = ["case", "p1", "p1_n", "p2", "p2_n", "total"]
            .map(String::from)
            .to_vec();
        let rows = [Wide {
            case: "a,b",
            paths: vec![("x", Some(1)), ("", None)],
            total: 1,
        }];
        let text = to_string_with_header(&header, &rows).expect("csv");
        assert_eq!(text, "case,p1,p1_n,p2,p2_n,total\n\"a,b\",x,1,,,1\n");
    }
}
