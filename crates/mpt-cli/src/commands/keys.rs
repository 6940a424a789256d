//! `mpt genkey`, `mpt keypair`, `mpt pubkey`: pre-shared keys and the
//! public-key handshake's key pairs, written readable by the owner only.

use std::path::PathBuf;

use anyhow::Context;

use crate::exit::{runtime, usage, Failure};

/// `mpt genkey`: a fresh key to stdout or a new file, readable by the owner only.
pub(crate) fn genkey(file: Option<PathBuf>) -> Result<u8, Failure> {
    use ring::rand::SecureRandom;
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut key = [0u8; mptd::keys::KEY_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| runtime(anyhow::anyhow!("the system random generator failed")))?;
    let line = format!("{}\n", mptd::keys::encode(&key));
    match file {
        Some(path) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .with_context(|| format!("creating {} (it must not exist yet)", path.display()))
                .map_err(runtime)?;
            f.write_all(line.as_bytes())
                .with_context(|| format!("writing {}", path.display()))
                .map_err(runtime)?;
        }
        None => {
            let stdout = std::io::stdout();
            // `mpt genkey > FILE`: the shell created FILE with the umask;
            // tighten it, since we own it.
            let fd = std::os::fd::AsFd::as_fd(&stdout);
            if let Ok(meta) = nix::sys::stat::fstat(fd) {
                if meta.st_mode & libc::S_IFMT == libc::S_IFREG {
                    let f = std::fs::File::from(fd.try_clone_to_owned().map_err(runtime)?);
                    f.set_permissions(std::fs::Permissions::from_mode(0o600))
                        .context("setting mode 0600 on the output file")
                        .map_err(runtime)?;
                }
            }
            let mut out = stdout.lock();
            out.write_all(line.as_bytes())
                .and_then(|_| out.flush())
                .context("writing the key")
                .map_err(runtime)?;
        }
    }
    Ok(0)
}

/// Prints a base64 public key on its own line; exit code 0.
pub(crate) fn print_key(public: String) -> u8 {
    println!("{public}");
    0
}

/// `mpt keypair FILE`: a new private key in FILE (0600, atomic); returns
/// the public key in base64.
pub(crate) fn keypair(file: &std::path::Path, force: bool) -> Result<String, Failure> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; mpt_proto::noise::KEY_LEN];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| runtime(anyhow::anyhow!("the system random generator failed")))?;
    let secret = mpt_proto::noise::StaticSecret::from_bytes(bytes);
    mptd::keys::write_private(file, &secret, force).map_err(|e| match e {
        // The user's choice of FILE, not a failure of the machine.
        mptd::keys::KeyError::Exists { .. } => usage(e),
        _ => runtime(e),
    })?;
    tracing::info!(file = %file.display(), "wrote a new private key");
    Ok(mptd::keys::encode_public(&secret.public_key()))
}

/// `mpt pubkey FILE`: the public key of a private key file, in base64.
pub(crate) fn pubkey(file: &std::path::Path) -> Result<String, Failure> {
    let secret = mptd::keys::load_private(file).map_err(usage)?;
    Ok(mptd::keys::encode_public(&secret.public_key()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::exit::EXIT_USAGE;
    use clap::{CommandFactory, Parser};
    use std::os::unix::fs::PermissionsExt;

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpt-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d); // a leftover from an earlier run
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn keypair_then_pubkey_agree() {
        let d = tempdir("keypair");
        let file = d.join("private.key");
        let cli = Cli::try_parse_from(["mpt", "keypair", file.to_str().unwrap()]).unwrap();
        let Command::Keypair { file: f, force } = cli.cmd else {
            panic!("parsed as {:?}", cli.cmd)
        };
        assert!(!force);
        let printed = keypair(&f, force).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // 32 bytes in base64, and `mpt pubkey` prints the same.
        assert_eq!(
            mptd::keys::decode_public(&printed)
                .unwrap()
                .as_bytes()
                .len(),
            32
        );
        assert_eq!(pubkey(&file).unwrap(), printed);

        // No overwrite without --force (a usage error), a new key with it.
        let e = keypair(&file, false).unwrap_err();
        assert_eq!(e.code, EXIT_USAGE);
        assert!(format!("{:#}", e.err).contains("--force"), "{:#}", e.err);
        assert_eq!(pubkey(&file).unwrap(), printed);
        let cli =
            Cli::try_parse_from(["mpt", "keypair", "--force", file.to_str().unwrap()]).unwrap();
        assert!(matches!(cli.cmd, Command::Keypair { force: true, .. }));
        let replaced = keypair(&file, true).unwrap();
        assert_ne!(replaced, printed);
        assert_eq!(pubkey(&file).unwrap(), replaced);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn pubkey_refuses_bad_files() {
        let d = tempdir("pubkey");
        let err = |path: &std::path::Path| format!("{:#}", pubkey(path).unwrap_err().err);
        assert!(err(&d.join("missing.key")).contains("No such file"));

        let short = d.join("short.key");
        std::fs::write(&short, "AAAA\n").unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = err(&short);
        assert!(
            e.contains("found 3 bytes") && e.contains("mpt keypair"),
            "{e}"
        );

        let open = d.join("open.key");
        std::fs::write(&open, format!("{}\n", mptd::keys::encode(&[7; 32]))).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = err(&open);
        assert!(e.contains("chmod 600"), "{e}");

        // Unreadable: a directory in place of the file.
        let e = err(&d);
        assert!(e.contains("key file"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn help_explains_keypair_and_pubkey() {
        let mut cmd = Cli::command();
        let help = cmd
            .find_subcommand_mut("keypair")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            help.contains("public_key") && help.contains("--force"),
            "{help}"
        );
        let help = cmd
            .find_subcommand_mut("pubkey")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("mpt keypair"), "{help}");
        assert!(Cli::try_parse_from(["mpt", "keypair"]).is_err());
    }
}
