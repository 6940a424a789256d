//! `mpt completions SHELL`: the shell completion script clap writes for
//! the whole command line.

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionShell};
use crate::exit::{runtime, Failure};

/// `mpt completions SHELL`.
pub(crate) fn completions(shell: CompletionShell) -> Result<u8, Failure> {
    use clap_complete::Shell;
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "mpt", &mut out);
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&out)
        .and_then(|_| stdout.flush())
        .context("writing the completion script")
        .map_err(runtime)?;
    Ok(0)
}
