//! Leadline's configuration: one TOML file, secrets read from environment variables.
//!
//! Every key is documented in `docs/configuration.md`. Loading validates the whole file and fails with a
//! message that names the offending key (`targets.crm.backoff.base_ms: must be greater than 0`), so a bad
//! config stops the process at start instead of misbehaving later.
//!
//! This layer holds data and the checks of its shape only; it imports nothing above `model` (and `platform`):
//!
//! - `schema.rs`: the types the file is read into, their defaults and what they answer (`database_url()`,
//!   `policy()`, …), with the sections that have kinds in files of their own: `sources.rs`, `targets.rs` and
//!   `channels.rs` (each kind's settings a variant of a tagged enum, read from the file's flat table);
//! - `validation.rs`: the checks serde cannot make that belong to the file as a whole: ranges, names,
//!   references between sections, which fields a kind takes ([`Config::validate`], run by [`Config::parse`]);
//! - `secrets.rs`: where a secret a field names is found (inline, the secrets file, the environment, the
//!   keyring, which is a platform part: `platform/keyring.rs`).
//!
//! What a kind's values must be (a HubSpot `id_property`, a Salesforce API name, a WhatsApp template, a Google
//! Ads source's key) is checked by the feature that owns the kind (`features::checks` runs them after
//! [`Config::validate`]; `docs/architecture.md`, "Configuration").

use std::path::{Path, PathBuf};

mod channels;
mod schema;
mod secrets;
mod sources;
mod targets;
mod validation;

/// Secrets entered in the app's settings: the OS keyring, a platform part (`platform/keyring.rs`). Re-exported here
/// so that `config::keyring` keeps naming it.
pub use crate::platform::keyring;
pub use channels::*;
pub use schema::*;
pub use secrets::SecretSource;
pub use sources::*;
pub use targets::*;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

impl ConfigError {
    /// A value that cannot be used, with the key it is at (`targets.crm.url`).
    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { key: key.into(), message: message.into() }
    }
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

impl Config {
    /// Reads, parses and validates the file at `path` (the features' own checks are `features::checks::load`).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        let mut config = Self::parse(&text, path)?;
        config.file = Some(path.to_owned());
        Ok(config)
    }

    /// Parses `text` (read from `path`, which relative paths in it are resolved against) and validates it.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
        if let (Some(file), Some(dir)) = (&config.secrets_file, path.parent()) {
            config.secrets_file = Some(dir.join(file));
        }
        config.validate()?;
        Ok(config)
    }
}

/// Configurations the tests of this layer and of the features' checks share.
#[cfg(test)]
pub(crate) mod examples {
    use super::{Config, ConfigError};
    use std::path::Path;

    /// Parses and validates as [`Config::parse`] (the configuration's own checks only).
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.toml"))
    }

    /// One webhook source delivering to one `http` target.
    pub const OK: &str = r#"
        [sources.webform]
        route = ["crm"]
        [targets.crm]
        url = "http://127.0.0.1:9/leads"
        strategy = "idempotency_key"
    "#;

    /// Three alert channels, one of each kind.
    pub const CHANNELS: &str = r#"
        [monitor]
        quiet_hours = { start = "22:00", end = "07:00" }
        public_url = "https://leads.example.com"
        [monitor.channels.oncall]
        kind = "slack"
        webhook_url_env = "SLACK_WEBHOOK_URL"
        alerts = { volume_drop = "immediate", new_cause = "none" }
        quiet_hours = false
        [monitor.channels.mail]
        kind = "email"
        smtp_host = "smtp.example.com"
        username_env = "SMTP_USER"
        password_env = "SMTP_PASSWORD"
        from = "Leadline <alerts@example.com>"
        to = ["ops@example.com"]
        [monitor.channels.hook]
        kind = "webhook"
        url_env = "HOOK_URL"
        secret_env = "HOOK_SECRET"
        quiet_hours = { start = "20:00", end = "08:00" }
    "#;
}
