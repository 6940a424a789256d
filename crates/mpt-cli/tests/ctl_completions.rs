//! `mpt completions` prints a script for each shell, and the copies in
//! conf/completions/ match what the current command line generates.
//!
//! After changing the command line, refresh them with
//! `MPT_UPDATE_COMPLETIONS=1 cargo test -p mpt-cli --test ctl_completions`.

use std::path::PathBuf;
use std::process::Command;

const MPT: &str = env!("CARGO_BIN_EXE_mpt");

fn generate(shell: &str) -> String {
    let o = Command::new(MPT)
        .args(["completions", shell])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn scripts_cover_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let script = generate(shell);
        for word in [
            "status",
            "path",
            "reload",
            "completions",
            "emu",
            "bench",
            "socket",
        ] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
}

#[test]
fn conf_completions_are_up_to_date() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conf/completions");
    let update = std::env::var_os("MPT_UPDATE_COMPLETIONS").is_some();
    for (shell, file) in [("bash", "mpt.bash"), ("zsh", "_mpt"), ("fish", "mpt.fish")] {
        let path = dir.join(file);
        let want = generate(shell);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let have =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            have == want,
            "{} is stale; refresh with MPT_UPDATE_COMPLETIONS=1 cargo test -p mpt-cli \
             --test ctl_completions",
            path.display()
        );
    }
}
