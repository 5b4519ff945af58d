//! What a `whatsapp` target's settings must be: its `whatsapp` section, the access token variable, the Graph
//! API version, and what every first-contact step needs (`contact::check`). Run by `features::checks` after the
//! configuration's own validation.

use crate::config::{ConfigError, TargetConfig, WhatsappSettings};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `whatsapp` keys.
pub fn check(key: &str, target: &TargetConfig, settings: &WhatsappSettings) -> Result<(), ConfigError> {
    let Some(w) = &settings.message else {
        return Err(invalid(
            format!("{key}.whatsapp"),
            "is required for kind = \"whatsapp\": { phone_number_id, template, language }",
        ));
    };
    if settings.access_token_env.is_none() {
        return Err(invalid(
            format!("{key}.access_token_env"),
            "is required for kind = \"whatsapp\": the variable holding the system user's access token",
        ));
    }
    let segment = |v: &str| !v.is_empty() && !v.contains(['/', '?', '#', ' ']);
    if !segment(&w.phone_number_id) {
        return Err(invalid(format!("{key}.whatsapp.phone_number_id"), "must be the number's id"));
    }
    if w.template.trim().is_empty() || w.language.trim().is_empty() {
        return Err(invalid(format!("{key}.whatsapp.template"), "and language must not be empty"));
    }
    if target.api_version.is_empty() || target.api_version.contains(['/', '?', '#']) {
        return Err(invalid(format!("{key}.api_version"), "must be a version like \"v21.0\""));
    }
    crate::features::targets::contact::check(key, target)
}
