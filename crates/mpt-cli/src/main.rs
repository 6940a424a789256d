//! `mpt`: the command line of the multipath tunnel. The binary parses
//! arguments (`cli`: the whole grammar, help texts included), runs the
//! command (`commands`: one module per command family), maps errors to
//! exit codes (`exit`: 0 ok, 1 runtime failure, 2 usage or configuration
//! error) and prints; the work is in the library. This file sets up
//! logging and dispatches.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod exit;

use cli::emu::EmuCommand;
use cli::{Cli, Command, ConfigCommand};
use commands::{bench, client, completions, config, ctl, emu, generate, keys};
use exit::EXIT_USAGE;

fn main() -> ExitCode {
    // `mpt generate man DIR` is for packaging only: outside the grammar, so
    // neither the help nor the completion scripts offer it.
    if let Some(result) = generate::from_args(std::env::args_os()) {
        return exit_code(result);
    }
    let cli = Cli::parse();
    let log = cli.log.clone().unwrap_or_else(|| {
        match cli.cmd {
            Command::Bench(_) => "warn",
            Command::Status(_)
            | Command::Path(_)
            | Command::Reload
            | Command::Completions { .. }
            | Command::Client { .. } => "warn",
            Command::Emu { .. }
            | Command::Genkey { .. }
            | Command::Keypair { .. }
            | Command::Pubkey { .. }
            | Command::Config { .. } => "info",
        }
        .to_string()
    });
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&log));
    let filter = match filter {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: invalid --log {log:?}: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Colour only for a person at a terminal, never into files or pipes.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let endpoint = cli.endpoint();
    let result = match cli.cmd {
        Command::Status(args) => ctl::status(&endpoint, &args),
        Command::Path(args) => ctl::path(&endpoint, args),
        Command::Reload => ctl::reload(&endpoint),
        Command::Completions { shell } => completions::completions(shell),
        Command::Emu { cmd } => match cmd {
            EmuCommand::Run(args) => emu::emu_run(*args),
            EmuCommand::Selftest(args) => emu::emu_selftest(&args),
            EmuCommand::Profiles { name } => emu::emu_profiles(name.as_deref()),
        },
        Command::Bench(args) => bench::bench(*args),
        Command::Genkey { file } => keys::genkey(file),
        Command::Keypair { file, force } => keys::keypair(&file, force).map(keys::print_key),
        Command::Pubkey { file } => keys::pubkey(&file).map(keys::print_key),
        Command::Client { cmd } => client::client(cmd, &cli.socket),
        Command::Config {
            cmd: ConfigCommand::Check { file, resolve },
        } => config::config_check(&file, resolve),
    };
    exit_code(result)
}

fn exit_code(result: Result<u8, exit::Failure>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {:#}", f.err);
            ExitCode::from(f.code)
        }
    }
}
