//! What an `sms` target's settings must be: its `sms` section (a Twilio Account SID, one sender, a body) and
//! what every first-contact step needs (`contact::check`). Run by `features::checks` after the configuration's
//! own validation.

use crate::config::{ConfigError, SmsConfig, TargetConfig};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `sms` keys.
pub fn check(key: &str, target: &TargetConfig, sms: Option<&SmsConfig>) -> Result<(), ConfigError> {
    let Some(s) = sms else {
        return Err(invalid(
            format!("{key}.sms"),
            "is required for kind = \"sms\": { account_sid, auth_token_env, from or messaging_service_sid, body }",
        ));
    };
    if !s.account_sid.starts_with("AC") || s.account_sid.contains(['/', '?', '#']) {
        return Err(invalid(format!("{key}.sms.account_sid"), "must be an Account SID (AC…)"));
    }
    if s.from.is_some() == s.messaging_service_sid.is_some() {
        return Err(invalid(format!("{key}.sms.from"), "or messaging_service_sid: exactly one of them"));
    }
    if s.body.trim().is_empty() {
        return Err(invalid(format!("{key}.sms.body"), "must not be empty"));
    }
    crate::features::targets::contact::check(key, target)
}
