//! `mptd`: the mpt daemon's command line.

use std::process::ExitCode;

use clap::Parser;
use mptd::cli::Args;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(file) = args.check {
        return match mptd::config::load(&file) {
            Ok(c) => {
                for w in c.identity_warnings() {
                    eprintln!("warning: {w}");
                }
                println!("{}", c.check_report(&file));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        };
    }
    let Some(file) = args.config else {
        eprintln!("error: give --config FILE to run or --check FILE to validate (see --help)");
        return ExitCode::from(2);
    };
    let config = match mptd::config::load(&file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.daemon.log))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal: journald and log files would
    // keep the escape codes as text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    for w in config.identity_warnings() {
        tracing::warn!(config = %file.display(), "{w}");
    }
    match mptd::daemon::run(config, file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
