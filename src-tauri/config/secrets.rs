//! Where the secret a field names is found: given in code, the secrets file, the environment, the OS keyring
//! (`platform/keyring.rs`), in that order. The file holds variable names only, never a value.

use super::{invalid, keyring, Config, ConfigError};

impl Config {
    /// Reads the secret named `var` (for config key `key`): from the secrets file as it is now, else from the
    /// environment, else from the OS keyring (secrets entered in the app's settings), naming where it looked when
    /// missing.
    pub fn secret(&self, key: &str, var: &str) -> Result<String, ConfigError> {
        if let Some(v) = self.inline_secrets.get(var) {
            return Ok(v.clone());
        }
        if let Some(path) = &self.secrets_file {
            let unreadable =
                |e: dotenvy::Error| invalid("secrets_file", format!("cannot read {}: {e}", path.display()));
            for entry in dotenvy::from_path_iter(path).map_err(unreadable)? {
                let (name, value) = entry.map_err(unreadable)?;
                if name == var {
                    return Ok(value);
                }
            }
        }
        if let Ok(v) = std::env::var(var) {
            return Ok(v);
        }
        let keyring = match keyring::unavailable() {
            Some(_) => String::new(),
            None => match keyring::get(var) {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => ", nor in the keyring".to_string(),
                Err(e) => format!(" ({e})"),
            },
        };
        Err(match &self.secrets_file {
            Some(path) => invalid(
                key,
                format!("{var} is neither in the secrets file {} nor in the environment{keyring}", path.display()),
            ),
            None => invalid(
                key,
                format!("environment variable {var} is not set{keyring} (secrets are never stored in the config file)"),
            ),
        })
    }

    /// Where the secret named `var` is found now, in the order [`Config::secret`] looks: `None` when nowhere.
    /// Reads the keyring (blocking on D-Bus) only when the other places lack it.
    pub fn secret_source(&self, var: &str) -> Option<SecretSource> {
        if self.inline_secrets.contains_key(var) {
            return Some(SecretSource::Inline);
        }
        if let Some(path) = &self.secrets_file {
            let found = dotenvy::from_path_iter(path)
                .map(|entries| entries.flatten().any(|(name, _)| name == var))
                .unwrap_or(false);
            if found {
                return Some(SecretSource::SecretsFile);
            }
        }
        if std::env::var_os(var).is_some() {
            return Some(SecretSource::Environment);
        }
        matches!(keyring::get(var), Ok(Some(_))).then_some(SecretSource::Keyring)
    }
}

/// Where a secret was found (never the secret itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// Given in code (the demo, tests).
    Inline,
    SecretsFile,
    Environment,
    Keyring,
}
