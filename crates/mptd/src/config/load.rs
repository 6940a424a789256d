//! Reading a config: the main file, the files `[daemon] include` names,
//! serde's pass over the combined text, then [`super::validate`]; every
//! error placed in the file at fault.

use std::path::Path;

use mpt_proto::noise::PublicKey;

use super::error::ConfigError;
use super::include::{self, IncludedFile, Sources};
use super::position::key_at;
use super::raw::RawConfig;
use super::validate::validate;
use super::Config;

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = read(path)?;
    parse(&text, &path.display().to_string())
}

/// [`load`], except that a config with no `[[connection]]` at all passes:
/// what `mpt client add` reads of a server whose include folder is still
/// empty. The daemon itself starts without a peer only as a concentrator
/// awaiting clients (`include` and `private_key_file` set).
pub fn load_without_peers(path: &Path) -> Result<Config, ConfigError> {
    let text = read(path)?;
    parse_inner(&text, &path.display().to_string(), &load_own_key, false)
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: 0,
        column: 0,
        message: format!("cannot read: {e}"),
    })
}

/// Parses and validates config text; `file` names it in errors.
/// `[daemon] private_key_file` is read from the file system.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    parse_with(text, file, &load_own_key)
}

/// [`parse`], with `own_key` in place of reading the private key file.
pub(super) fn parse_with(
    text: &str,
    file: &str,
    own_key: &dyn Fn(&Path) -> Result<PublicKey, String>,
) -> Result<Config, ConfigError> {
    parse_inner(text, file, own_key, true)
}

/// [`parse_with`]; `need_peer`: a config without connections is an error.
fn parse_inner(
    text: &str,
    file: &str,
    own_key: &dyn Fn(&Path) -> Result<PublicKey, String>,
    need_peer: bool,
) -> Result<Config, ConfigError> {
    let main = Sources::main(text, file);
    let raw = raw_config(&main)?;
    let pattern = raw
        .daemon
        .as_ref()
        .map(|d| (d.span().start, d.get_ref().include.clone()))
        .filter(|(_, p)| !p.is_empty());
    let (sources, raw, includes) = match pattern {
        None => (main, raw, Vec::new()),
        Some((span, pattern)) => {
            let base = Path::new(file).parent().unwrap_or(Path::new(""));
            let files = include::expand(&pattern, base)
                .map_err(|e| main.error(span, format!("[daemon] key `include`: {e}")))?;
            let mut sources = main;
            let mut includes = Vec::new();
            for path in files {
                let name = path.display().to_string();
                if let Some(why) = include::writable_by_others(&path) {
                    return Err(ConfigError {
                        file: name,
                        line: 0,
                        column: 0,
                        message: format!(
                            "refused (included by [daemon] include = \"{pattern}\"): {why}"
                        ),
                    });
                }
                let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
                    file: name.clone(),
                    line: 0,
                    column: 0,
                    message: format!(
                        "cannot read (included by [daemon] include = \"{pattern}\"): {e}"
                    ),
                })?;
                let connections = sources.append(&text, &name)?;
                includes.push(IncludedFile { path, connections });
            }
            let raw = raw_config(&sources)?;
            let has_key = raw
                .daemon
                .as_ref()
                .is_some_and(|d| d.get_ref().private_key_file.is_some());
            if need_peer && raw.connection.is_empty() && !has_key {
                return Err(sources.error(
                    0,
                    format!(
                        "no [[connection]] here nor in the {} file(s) matching include = \"{pattern}\", and no [daemon] private_key_file to await clients with: the tunnel would have no peer",
                        includes.len()
                    ),
                ));
            }
            (sources, raw, includes)
        }
    };
    // The same name in two files: say both (within one file, `validate`
    // reports it).
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for c in &raw.connection {
        let (name, file) = (c.get_ref().name.as_str(), sources.file_at(c.span().start));
        if let Some((_, first)) = seen.iter().find(|(n, f)| *n == name && *f != file) {
            return Err(sources.error(
                c.span().start,
                format!("connection `{name}` is defined in both {first} and {file}; connection names must be unique"),
            ));
        }
        seen.push((name, file));
    }
    let mut config =
        validate(raw, own_key, need_peer).map_err(|(offset, msg)| sources.error(offset, msg))?;
    config.includes = includes;
    Ok(config)
}

/// Deserializes the (combined) text, errors placed in the file at fault.
fn raw_config(sources: &Sources) -> Result<RawConfig, ConfigError> {
    let text = sources.text.as_str();
    toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let message = e.message().trim().to_string();
        let message = match key_at(text, offset) {
            Some(key) if !message.contains(&format!("`{key}`")) => {
                format!("key `{key}`: {message}")
            }
            _ => message,
        };
        sources.error(offset, message)
    })
}

/// Reads `[daemon] private_key_file` and gives our public key.
fn load_own_key(path: &Path) -> Result<PublicKey, String> {
    crate::keys::load_private(path)
        .map(|secret| secret.public_key())
        .map_err(|e| e.to_string())
}
