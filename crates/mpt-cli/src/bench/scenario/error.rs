//! What can be wrong with a scenario: unknown name, unreadable file, bad
//! TOML, or a value out of range (named with where it came from). A leaf,
//! so that each scenario family can report its own table's errors.

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("unknown scenario {name:?}: not a preset ({presets}) nor a file")]
    Unknown { name: String, presets: String },
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{origin}: {error}")]
    Toml {
        origin: String,
        error: toml::de::Error,
    },
    #[error("{origin}: {msg}")]
    Invalid { origin: String, msg: String },
}

pub(crate) fn invalid(origin: &str, msg: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        origin: origin.to_string(),
        msg: msg.into(),
    }
}
