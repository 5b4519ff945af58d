//! What a `meta_conversions` step's settings must be: the dataset, the access token variable, at least one
//! stage. Run by `features::checks` after the configuration's own validation.

use crate::config::{ConfigError, MetaConversionsSettings};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `meta_conversions` keys.
pub fn check(key: &str, target: &MetaConversionsSettings) -> Result<(), ConfigError> {
    for (set, name) in
        [(target.dataset_id.is_some(), "dataset_id"), (target.access_token_env.is_some(), "access_token_env")]
    {
        if !set {
            return Err(invalid(format!("{key}.{name}"), "is required for kind = \"meta_conversions\""));
        }
    }
    if target.conversions.stages.is_empty() {
        return Err(invalid(format!("{key}.stages"), "must map at least one CRM stage to an event name"));
    }
    Ok(())
}
