//! `mpt generate man DIR`: the man pages, rendered by `clap_mangen` from
//! the same clap definitions that parse the command lines, so a page never
//! tells of a flag the binary lacks. The Debian package
//! (scripts/package.sh) runs it at build time. It is not part of the
//! clap grammar: `hide` keeps a subcommand out of the help but not out
//! of clap_complete's scripts, and people never need it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;
use crate::exit::{runtime, Failure};

/// `Some` (the command's result) when the arguments are exactly
/// `generate man DIR`; `None` for every other command line.
pub(crate) fn from_args(args: impl IntoIterator<Item = OsString>) -> Option<Result<u8, Failure>> {
    let args: Vec<OsString> = args.into_iter().skip(1).collect();
    match args.as_slice() {
        [generate, man, dir] if generate == "generate" && man == "man" => {
            Some(self::man(&PathBuf::from(dir)))
        }
        _ => None,
    }
}

/// Writes `mpt.1`, one `mpt-COMMAND.1` per visible subcommand (nested
/// ones too, e.g. `mpt-emu-run.1`) and `mptd.8` into `dir`, then lists
/// the files on stdout.
pub(crate) fn man(dir: &Path) -> Result<u8, Failure> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating {}", dir.display()))
        .map_err(runtime)?;
    let mut written = Vec::new();
    write_tree(Cli::command(), dir, &mut written)?;
    write_page(mptd::cli::Args::command(), "8", dir, &mut written)?;
    for name in written {
        println!("{}", dir.join(name).display());
    }
    Ok(0)
}

/// The page of `cmd` and of each visible subcommand below it, each named
/// by its whole command line (`mpt-path-add.1`).
fn write_tree(cmd: clap::Command, dir: &Path, written: &mut Vec<String>) -> Result<(), Failure> {
    // `build` gives every subcommand its display name (`mpt-status`).
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    write_built(cmd, dir, written)
}

fn write_built(cmd: clap::Command, dir: &Path, written: &mut Vec<String>) -> Result<(), Failure> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_built(sub.clone(), dir, written)?;
    }
    write_page(cmd, "1", dir, written)
}

fn write_page(
    cmd: clap::Command,
    section: &str,
    dir: &Path,
    written: &mut Vec<String>,
) -> Result<(), Failure> {
    let man = clap_mangen::Man::new(cmd).section(section).manual("mpt");
    let file = man.get_filename();
    man.generate_to(dir)
        .with_context(|| format!("writing {}", dir.join(&file).display()))
        .map_err(runtime)?;
    written.push(file);
    Ok(())
}
