//! `mpt bench compare` and `mpt bench replot`: tools for results already
//! written, no testbed and no root.

use std::path::Path;

use anyhow::Context;

use crate::cli::bench::BenchTool;
use crate::exit::{runtime, Failure};

pub(crate) fn run(tool: BenchTool) -> Result<u8, Failure> {
    match tool {
        BenchTool::Compare { old, new, json } => {
            let (a, b) = (read(&old).map_err(runtime)?, read(&new).map_err(runtime)?);
            let c = mpt_cli::bench::report::compare::compare(&a, &b);
            if json {
                let s = serde_json::to_string_pretty(&c)
                    .context("serializing the comparison")
                    .map_err(runtime)?;
                println!("{s}");
            } else {
                println!("old: {}\nnew: {}\n", old.display(), new.display());
                print!("{}", c.text());
            }
            Ok(0)
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
