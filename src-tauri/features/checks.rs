//! The whole check of a configuration: the configuration's own validation (`Config::validate`: ranges, names,
//! references between sections, which fields a kind takes), then each kind's checks of its settings, done by the
//! feature that owns the kind — the sources' in `ingest` (`google_ads`, `crm_stage`), the targets' in each
//! connector's `check.rs`. `config` imports no feature, so it cannot call them itself: whoever takes a
//! configuration in (start-up's preflight, `check-config`, `test-connection`, the settings page) calls [`check`],
//! or reads the file with [`load`].

use std::path::Path;

use crate::config::{Config, ConfigError};

/// Every check of `config` that needs no secret or network, in order: the configuration's own, the sources'
/// kinds, the targets' kinds. Fails with the first problem, naming its key.
pub fn check(config: &Config) -> Result<(), ConfigError> {
    config.validate()?;
    crate::features::ingest::check_kinds(config)?;
    crate::features::targets::check(config)
}

/// [`Config::load`], then the kinds' checks.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let config = Config::load(path)?;
    check(&config)?;
    Ok(config)
}

/// [`Config::parse`], then the kinds' checks.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let config = Config::parse(text, path)?;
    check(&config)?;
    Ok(config)
}
