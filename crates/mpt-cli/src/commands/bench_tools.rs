//! `mpt bench compare` and `mpt bench replot`: tools for results already
//! written, no testbed and no root.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::cli::bench::BenchTool;
use crate::exit::{runtime, Failure};

pub(crate) fn run(tool: BenchTool) -> Result<u8, Failure> {
    match tool {
        BenchTool::Compare { old, new, json } => {
            let (a, b) = (read(&old).map_err(runtime)?, read(&new).map_err(runtime)?);
            let c = mpt_cli::bench::report::compare::compare(&a, &b);
            let text = if json {
                serde_json::to_string_pretty(&c)
                    .context("serializing the comparison")
                    .map_err(runtime)?
                    + "\n"
            } else {
                format!(
                    "old: {}\nnew: {}\n\n{}",
                    old.display(),
                    new.display(),
                    c.text()
                )
            };
            // A closed pipe (`| head`) is the reader's choice, not an error.
            match std::io::stdout().write_all(text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(runtime(anyhow::Error::new(e).context("writing to stdout")))
                }
                _ => Ok(0),
            }
        }
        BenchTool::Replot { dir } => {
            let written = mpt_cli::bench::report::replot(&dir).map_err(runtime)?;
            for f in written {
                println!("{}", dir.join(f).display());
            }
            Ok(0)
        }
    }
}

fn read(p: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a results.json", p.display()))
}
