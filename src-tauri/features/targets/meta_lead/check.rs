//! What a `meta_lead` step's settings must be: the page access token variable and a Graph API version. Run by
//! `features::checks` after the configuration's own validation (which keeps the step first in a Meta source's
//! route).

use crate::config::{ConfigError, MetaLeadSettings, TargetConfig};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `meta_lead` keys.
pub fn check(key: &str, target: &TargetConfig, settings: &MetaLeadSettings) -> Result<(), ConfigError> {
    if settings.access_token_env.is_none() {
        return Err(invalid(
            format!("{key}.access_token_env"),
            "is required for kind = \"meta_lead\": the variable holding a page access token",
        ));
    }
    if target.api_version.is_empty() || target.api_version.contains(['/', '?', '#']) {
        return Err(invalid(format!("{key}.api_version"), "must be a version like \"v21.0\""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::examples::OK;

    /// Moved from the configuration's `errors_name_the_key`: the token is the `meta_lead` step's own setting.
    #[test]
    fn a_meta_lead_step_without_its_token_names_the_key() {
        let parse = |text: &str| crate::features::checks::parse(text, Path::new("test.toml"));
        let no_token = format!("{OK}\n[targets.fetch]\nkind = \"meta_lead\"\nurl = \"https://graph.facebook.com\"\n");
        let e = parse(&no_token).unwrap_err().to_string();
        assert!(e.starts_with("targets.fetch.access_token_env:"), "{e}");
    }
}
