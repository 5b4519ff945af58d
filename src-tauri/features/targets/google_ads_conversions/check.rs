//! What a `google_ads_conversions` step's settings must be: the customer id, the OAuth variables, at least one
//! stage, each a conversion action's resource name. Run by `features::checks` after the configuration's own
//! validation.

use crate::config::{ConfigError, GoogleAdsSettings};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `google_ads_conversions` keys.
pub fn check(key: &str, target: &GoogleAdsSettings) -> Result<(), ConfigError> {
    for (set, name) in [
        (target.customer_id.is_some(), "customer_id"),
        (target.oauth.client_id_env.is_some(), "client_id_env"),
        (target.oauth.client_secret_env.is_some(), "client_secret_env"),
        (target.oauth.refresh_token_env.is_some(), "refresh_token_env"),
    ] {
        if !set {
            return Err(invalid(format!("{key}.{name}"), "is required for kind = \"google_ads_conversions\""));
        }
    }
    let stages = &target.conversions.stages;
    if stages.is_empty() {
        return Err(invalid(format!("{key}.stages"), "must map at least one CRM stage to a conversion action"));
    }
    if let Some((stage, action)) = stages.iter().find(|(_, a)| !a.starts_with("customers/")) {
        return Err(invalid(
            format!("{key}.stages.{stage}"),
            format!(
                "`{action}` is not a conversion action's resource name (customers/{{id}}/conversionActions/{{id}})"
            ),
        ));
    }
    Ok(())
}
