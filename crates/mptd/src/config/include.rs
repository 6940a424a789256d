//! `[daemon] include`: more `[[connection]]` tables from other files.
//!
//! The pattern names files by a directory and a file-name part; only the
//! file-name part may hold wildcards (`*` any run of characters, `?` one
//! character; neither matches a leading `.`, as in the shell). A relative
//! pattern is taken relative to the directory of the main config file.
//! Matching files are read in sorted order; none matching (or no such
//! directory) is fine: no more connections.
//!
//! Each included file may hold `[[connection]]` tables only; anything else
//! is an error naming that file, its line and column. The files are then
//! appended to the main text (each after a newline) and the whole is
//! parsed as one document, so that validation runs once over all
//! connections; [`Sources`] maps a position in that text back to its file.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::error::ConfigError;
use super::position::{key_at, line_col};
use super::raw::RawConnection;

/// A file read through `include`, with the connections it defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludedFile {
    /// The file, as found (pattern directory joined with the file name).
    pub path: PathBuf,
    /// Names of the connections it holds, in file order.
    pub connections: Vec<String>,
}

/// What an included file may hold.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInclude {
    #[serde(default)]
    connection: Vec<Spanned<RawConnection>>,
}

/// Whether `s` holds a wildcard character this matcher knows or refuses.
fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}'])
}

/// Files matching `pattern` (see the module doc), sorted. Relative
/// patterns are joined to `base`.
pub fn expand(pattern: &str, base: &Path) -> Result<Vec<PathBuf>, String> {
    let full = if Path::new(pattern).is_absolute() {
        PathBuf::from(pattern)
    } else {
        base.join(pattern)
    };
    let Some(name) = full.file_name().and_then(|n| n.to_str()) else {
        return Err(format!(
            "`{pattern}` names no file (e.g. include = \"clients.d/*.toml\")"
        ));
    };
    let dir = full.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if has_wildcard(&dir.to_string_lossy()) {
        return Err(format!(
            "`{pattern}`: only the file-name part may hold wildcards (e.g. \"clients.d/*.toml\")"
        ));
    }
    if name.contains(['[', ']', '{', '}']) {
        return Err(format!(
            "`{pattern}`: only `*` and `?` are wildcards here (no [..] or {{..}})"
        ));
    }
    if !has_wildcard(name) {
        // A plain file name: it must exist (a typo should not pass silently).
        return if full.is_file() {
            Ok(vec![full])
        } else {
            Err(format!("`{}` is not a readable file", full.display()))
        };
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list `{}`: {e}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list `{}`: {e}", dir.display()))?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let path = dir.join(file_name);
        // Symbolic links count as what they point to.
        if wildcard_match(name, file_name) && path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Shell-style match of `*` and `?` over a whole file name; a leading `.`
/// is matched only by a leading `.` in the pattern.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Iterative match with one backtrack point (the last `*`).
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Why an included file must not be trusted, if it must not: the file,
/// or the folder holding it, can be written by users other than its owner
/// and group (mode `o+w`; a folder with the sticky bit, like /tmp, still
/// lets anyone add a file). Whoever can write an included file can add a
/// client with its own key, so such a file is refused, not read.
pub fn writable_by_others(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777)
    };
    if let Some(m) = mode(path).filter(|m| m & 0o002 != 0) {
        return Some(format!(
            "the file is writable by anyone (mode {m:o}): whoever can write it can add a client; run: chmod o-w {}",
            path.display()
        ));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Some(m) = mode(dir).filter(|m| m & 0o002 != 0) {
        return Some(format!(
            "its folder {} is writable by anyone (mode {m:o}): whoever can write there can add a client; run: chmod o-w {}",
            dir.display(),
            dir.display()
        ));
    }
    None
}

/// One file's part of the combined text.
#[derive(Debug)]
struct Segment {
    file: String,
    start: usize,
    len: usize,
}

/// The main text with the included files appended, and where each starts.
#[derive(Debug)]
pub struct Sources {
    /// Main text, then each included file after a newline.
    pub text: String,
    segments: Vec<Segment>,
}

impl Sources {
    /// The main file alone.
    pub fn main(text: &str, file: &str) -> Sources {
        Sources {
            text: text.to_string(),
            segments: vec![Segment {
                file: file.to_string(),
                start: 0,
                len: text.len(),
            }],
        }
    }

    /// Checks that `text` (the file `file`) holds connections only, then
    /// appends it. Gives the names of its connections.
    pub fn append(&mut self, text: &str, file: &str) -> Result<Vec<String>, ConfigError> {
        let raw: RawInclude = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            let (line, column) = line_col(text, offset);
            let mut message = e.message().trim().to_string();
            if let Some(key) = key_at(text, offset) {
                if !message.contains(&format!("`{key}`")) {
                    message = format!("key `{key}`: {message}");
                }
            }
            // A top-level key or table other than [[connection]].
            if message.contains("unknown field") && message.contains("expected `connection`") {
                message.push_str(" (an included file holds [[connection]] tables only)");
            }
            ConfigError {
                file: file.to_string(),
                line,
                column,
                message,
            }
        })?;
        self.text.push('\n');
        let start = self.text.len();
        self.text.push_str(text);
        self.segments.push(Segment {
            file: file.to_string(),
            start,
            len: text.len(),
        });
        Ok(raw
            .connection
            .into_iter()
            .map(|c| c.into_inner().name)
            .collect())
    }

    fn segment(&self, offset: usize) -> &Segment {
        self.segments
            .iter()
            .rev()
            .find(|s| s.start <= offset)
            .unwrap_or(&self.segments[0])
    }

    /// The file holding `offset` of [`Sources::text`].
    pub fn file_at(&self, offset: usize) -> &str {
        &self.segment(offset).file
    }

    /// An error at `offset` of the combined text, in the file holding it.
    pub fn error(&self, offset: usize, message: String) -> ConfigError {
        let seg = self.segment(offset);
        let local = (offset - seg.start).min(seg.len);
        let (line, column) = line_col(&self.text[seg.start..seg.start + seg.len], local);
        ConfigError {
            file: seg.file.clone(),
            line,
            column,
            message,
        }
    }
}
