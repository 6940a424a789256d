//! Pre-shared key files.
//!
//! A key file holds 32 random bytes in standard base64 (what `mpt genkey`
//! writes), optionally followed by a newline. Because the key is the only
//! thing standing between the internet and the tunnel, the daemon refuses a
//! file that group or others can read, the way ssh refuses a private key
//! with loose permissions.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::Engine;

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
    #[error("key file {path}: expected 32 bytes in base64 (as written by `mpt genkey`), {what}")]
    Format {
        /// File.
        path: PathBuf,
        /// What was found instead.
        what: String,
    },
}

/// Reads and checks a key file.
pub fn load(path: &Path) -> Result<[u8; KEY_LEN], KeyError> {
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
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    decode(text.trim()).map_err(|what| KeyError::Format {
        path: path.to_path_buf(),
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
        assert_eq!(load(&good).unwrap(), key);
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
}
