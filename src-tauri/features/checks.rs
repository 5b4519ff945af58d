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

#[cfg(test)]
mod tests {
    use super::*;

    const HUBSPOT_WITHOUT_ID_PROPERTY: &str = r#"
        [sources.webform]
        route = ["hubspot"]
        [targets.hubspot]
        kind = "hubspot"
        url = "https://api.hubapi.com"
        auth = { bearer_env = "HUBSPOT_TOKEN" }
        [[targets.hubspot.mapping]]
        to = "email"
        from = "/fields/email"
    "#;

    const GOOGLE_WITHOUT_KEY: &str = r#"
        [sources.google]
        kind = "google_ads"
        route = ["crm"]
        [targets.crm]
        url = "http://127.0.0.1:9/leads"
        strategy = "idempotency_key"
    "#;

    /// A problem only a kind's own check knows is refused by what start-up, `check-config` and the settings page
    /// run (`preflight`), though the configuration's validation passes it.
    #[test]
    fn start_up_refuses_what_only_a_kinds_check_knows() {
        for (text, key) in [
            (HUBSPOT_WITHOUT_ID_PROPERTY, "targets.hubspot.id_property:"),
            (GOOGLE_WITHOUT_KEY, "sources.google.key_env:"),
        ] {
            let config = Config::parse(text, Path::new("t.toml")).expect("the file's shape is valid");
            let e = check(&config).unwrap_err().to_string();
            assert!(e.starts_with(key), "{key}: {e}");
            let e = crate::features::settings::preflight(&config).unwrap_err().to_string();
            assert!(e.starts_with(key), "{key}: {e}");
            let e = parse(text, Path::new("t.toml")).unwrap_err().to_string();
            assert!(e.starts_with(key), "{key}: {e}");
        }
    }
}
