//! Key files: pre-shared keys (`key_file`) and X25519 private keys
//! (`[daemon] private_key_file`).
//!
//! Both hold 32 bytes in standard base64 (what `mpt genkey` and `mpt
//! keypair` write), optionally followed by a newline. Because the key is
//! the only thing standing between the internet and the tunnel, the daemon
//! refuses a file that group or others can read, the way ssh refuses a
//! private key with loose permissions.
//!
//! A new private key file is written atomically: the key goes to a
//! temporary file (mode 0600 from its creation, never wider) in the same
//! directory, is flushed to disk, and only then takes the final name, so a
//! crash never leaves a half-written key under that name.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use mpt_proto::noise::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

/// Length of a pre-shared key in bytes.
pub const KEY_LEN: usize = 32;

/// Why a key file was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("key file {path}: {source}")]
    Read {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Group or others may read it.
    #[error(
        "key file {path} is readable by group or others (mode {mode:o}); run: chmod 600 {path}"
    )]
    Permissions {
        /// File.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// Not base64 of 32 bytes.
    #[error("key file {path}: expected 32 bytes in base64 (as written by `{writer}`), {what}")]
    Format {
        /// File.
        path: PathBuf,
        /// The command that writes such a file (`mpt genkey`, `mpt keypair`).
        writer: &'static str,
        /// What was found instead.
        what: String,
    },
    /// A new key file would replace an existing one.
    #[error("{path} exists already; refusing to overwrite a key (use --force to replace it)")]
    Exists {
        /// File.
        path: PathBuf,
    },
    /// The new key file could not be written.
    #[error("writing key file {path}: {source}")]
    Write {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// What writes pre-shared key files.
const PSK_WRITER: &str = "mpt genkey";
/// What writes private key files.
const PRIVATE_WRITER: &str = "mpt keypair";

/// Reads and checks a pre-shared key file. The key is wiped when the
/// value is dropped (the file's text and the decoded bytes already are).
pub fn load(path: &Path) -> Result<Zeroizing<[u8; KEY_LEN]>, KeyError> {
    load_as(path, PSK_WRITER)
}

/// Reads and checks an X25519 private key file (`[daemon]
/// private_key_file`, written by `mpt keypair`).
pub fn load_private(path: &Path) -> Result<StaticSecret, KeyError> {
    load_as(path, PRIVATE_WRITER).map(|k| StaticSecret::from_bytes(*k))
}

/// Decodes a base64 X25519 public key (a connection's `public_key`).
pub fn decode_public(text: &str) -> Result<PublicKey, String> {
    decode(text).map(PublicKey::from_bytes)
}

/// Encodes a public key as `mpt keypair` and `mpt pubkey` print it.
pub fn encode_public(key: &PublicKey) -> String {
    encode(key.as_bytes())
}

/// Writes `secret` as a new private key file at `path`, mode 0600,
/// atomically (temporary file, fsync, then the final name). Refuses an
/// existing `path` unless `force`, in which case the old file is replaced
/// in one step.
pub fn write_private(path: &Path, secret: &StaticSecret, force: bool) -> Result<(), KeyError> {
    let write_err = |source| KeyError::Write {
        path: path.to_path_buf(),
        source,
    };
    if !force && std::fs::symlink_metadata(path).is_ok() {
        return Err(KeyError::Exists {
            path: path.to_path_buf(),
        });
    }
    let name = path
        .file_name()
        .ok_or_else(|| write_err(std::io::Error::other("not a file name")))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // The umask can only narrow 0600; make sure of it all the same.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        let text = Zeroizing::new(encode(secret.as_bytes()));
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        if force {
            std::fs::rename(&tmp, path)?;
        } else {
            // link(2) fails if `path` appeared meanwhile: no race with
            // another writer, unlike a check followed by rename(2).
            std::fs::hard_link(&tmp, path)?;
            std::fs::remove_file(&tmp)?;
        }
        std::fs::File::open(&dir)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp); // best effort: it may be gone already
        return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
            KeyError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            write_err(e)
        });
    }
    Ok(())
}

fn load_as(path: &Path, writer: &'static str) -> Result<Zeroizing<[u8; KEY_LEN]>, KeyError> {
    let read_err = |source| KeyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Permissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    let text = Zeroizing::new(std::fs::read_to_string(path).map_err(read_err)?);
    decode_secret(text.trim()).map_err(|what| KeyError::Format {
        path: path.to_path_buf(),
        writer,
        what,
    })
}

/// Decodes a base64 key.
pub fn decode(text: &str) -> Result<[u8; KEY_LEN], String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("not base64 ({e})"))?;
    <[u8; KEY_LEN]>::try_from(bytes.as_slice()).map_err(|_| format!("found {} bytes", bytes.len()))
}

/// [`decode`] for a secret: the decoded buffer is wiped, and so is the
/// key once the caller drops it.
fn decode_secret(text: &str) -> Result<Zeroizing<[u8; KEY_LEN]>, String> {
    let bytes = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("not base64 ({e})"))?,
    );
    let mut key = Zeroizing::new([0u8; KEY_LEN]);
    match bytes.get(..) {
        Some(b) if b.len() == KEY_LEN => key.copy_from_slice(b),
        _ => return Err(format!("found {} bytes", bytes.len())),
    }
    Ok(key)
}

/// Encodes a key as `mpt genkey` writes it.
pub fn encode(key: &[u8; KEY_LEN]) -> String {
    base64::engine::general_purpose::STANDARD.encode(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "mptd-keys-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn round_trip_and_permissions() {
        let d = tempdir();
        let key = [7u8; KEY_LEN];
        let good = write(&d, "good.key", &format!("{}\n", encode(&key)), 0o600);
        assert_eq!(*load(&good).unwrap(), key);
        let loose = write(&d, "loose.key", &encode(&key), 0o644);
        let e = load(&loose).unwrap_err();
        assert!(
            matches!(e, KeyError::Permissions { mode: 0o644, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("chmod 600"), "{e}");
        let short = write(&d, "short.key", &encode(&[1u8; KEY_LEN])[..20], 0o600);
        assert!(matches!(load(&short), Err(KeyError::Format { .. })));
        let junk = write(&d, "junk.key", "not a key!", 0o400);
        assert!(matches!(load(&junk), Err(KeyError::Format { .. })));
        assert!(matches!(
            load(&d.join("missing.key")),
            Err(KeyError::Read { .. })
        ));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn private_key_written_atomically_with_mode_0600() {
        let base = tempdir();
        let d = base.join("private");
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("mptd.key");
        let secret = StaticSecret::from_bytes([0x5a; KEY_LEN]);
        write_private(&path, &secret, false).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_private(&path).unwrap().as_bytes(), secret.as_bytes());
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);

        // An existing file is kept unless forced.
        let other = StaticSecret::from_bytes([0x11; KEY_LEN]);
        let e = write_private(&path, &other, false).unwrap_err();
        assert!(matches!(e, KeyError::Exists { .. }), "{e}");
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(load_private(&path).unwrap().as_bytes(), secret.as_bytes());
        write_private(&path, &other, true).unwrap();
        assert_eq!(load_private(&path).unwrap().as_bytes(), other.as_bytes());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);

        // A directory that does not exist is a write error, not a panic.
        let e = write_private(&d.join("nope/k"), &other, false).unwrap_err();
        assert!(matches!(e, KeyError::Write { .. }), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn private_key_errors_name_the_writer() {
        let base = tempdir();
        let d = base.join("private-errors");
        std::fs::create_dir_all(&d).unwrap();
        let short = write(&d, "short.key", &encode(&[1u8; KEY_LEN])[..20], 0o600);
        let e = load_private(&short).unwrap_err();
        assert!(e.to_string().contains("mpt keypair"), "{e}");
        let long = write(
            &d,
            "long.key",
            &base64::engine::general_purpose::STANDARD.encode([1u8; 33]),
            0o600,
        );
        let e = load_private(&long).unwrap_err();
        assert!(e.to_string().contains("found 33 bytes"), "{e}");
        let open = write(&d, "open.key", &encode(&[1u8; KEY_LEN]), 0o640);
        assert!(matches!(
            load_private(&open),
            Err(KeyError::Permissions { mode: 0o640, .. })
        ));
        assert!(matches!(
            load_private(&d.join("missing.key")),
            Err(KeyError::Read { .. })
        ));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn public_key_text() {
        let public = StaticSecret::from_bytes([3; KEY_LEN]).public_key();
        assert_eq!(decode_public(&encode_public(&public)).unwrap(), public);
        assert!(decode_public("!!").unwrap_err().contains("not base64"));
        assert!(
            decode_public(&base64::engine::general_purpose::STANDARD.encode([0u8; 16]))
                .unwrap_err()
                .contains("found 16 bytes")
        );
    }
}
