//! Capacity traces by name: a file (relative to the working directory or
//! conf/links/) or the shipped LTE trace, compiled in. Shared by
//! `lte-gateway` and the traced links of `unlike`. A scenario names the
//! format beside the file (`trace_format = "mahimahi"`); the default is ours.

use std::path::{Path, PathBuf};

use mpt_emu::trace::{Trace, TraceFormat};

/// The shipped LTE capacity trace, compiled in for the preset.
const BUILTIN_TRACE: (&str, &str) = (
    "lte-capacity.trace",
    include_str!("../../../../conf/links/lte-capacity.trace"),
);

pub(crate) fn load_trace(name: &str, format: Option<TraceFormat>) -> Result<Trace, String> {
    let format = format.unwrap_or_default();
    for p in [PathBuf::from(name), Path::new("conf/links").join(name)] {
        if p.is_file() {
            return Trace::load_as(&p, format);
        }
    }
    if name == BUILTIN_TRACE.0 {
        return Trace::parse_as(BUILTIN_TRACE.1, format).map_err(|e| format!("{name}: {e}"));
    }
    Err(format!("trace {name:?}: no such file"))
}
