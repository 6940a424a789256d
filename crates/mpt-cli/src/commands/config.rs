//! `mpt config check FILE`: the daemon's own validation of a config
//! file, its warnings and a summary.

use crate::exit::{Failure, EXIT_USAGE};

/// `mpt config check FILE`: the daemon's own validation.
pub(crate) fn config_check(file: &std::path::Path) -> Result<u8, Failure> {
    match mptd::config::load(file) {
        Ok(c) => {
            for w in c.identity_warnings() {
                eprintln!("warning: {w}");
            }
            println!("{}", c.check_report(file));
            Ok(0)
        }
        Err(e) => Err(Failure {
            code: EXIT_USAGE,
            err: e.into(),
        }),
    }
}
