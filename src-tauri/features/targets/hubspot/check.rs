//! What a `hubspot` target's settings must be: the unique property to upsert by, the object type, a mapping, a
//! bearer token, HubSpot's address without a path. Run by `features::checks` after the configuration's own
//! validation.

use crate::config::{AuthConfig, ConfigError, HubspotSettings, TargetConfig};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `hubspot` keys.
pub fn check(key: &str, target: &TargetConfig, settings: &HubspotSettings) -> Result<(), ConfigError> {
    let is_name = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match settings.id_property.as_deref() {
        None => {
            return Err(invalid(
                format!("{key}.id_property"),
                "is required for kind = \"hubspot\": the unique property to upsert by (\"email\" or a custom \
                 unique property such as \"leadline_id\")",
            ))
        }
        Some(p) if !is_name(p) => {
            return Err(invalid(format!("{key}.id_property"), format!("`{p}` is not a HubSpot property name")))
        }
        _ => {}
    }
    if let Some(o) = &settings.object {
        if !is_name(o) {
            return Err(invalid(format!("{key}.object"), format!("`{o}` is not a HubSpot object type")));
        }
    }
    if target.mapping.is_empty() {
        return Err(invalid(
            format!("{key}.mapping"),
            "is required for kind = \"hubspot\": at least one rule that makes a HubSpot property",
        ));
    }
    if !matches!(target.auth, Some(AuthConfig::BearerEnv(_))) {
        return Err(invalid(
            format!("{key}.auth"),
            "is required for kind = \"hubspot\": { bearer_env = \"VAR\" } naming the variable with the \
             private app token or OAuth access token",
        ));
    }
    if target.url.contains("{external_id}") {
        return Err(invalid(format!("{key}.url"), "is HubSpot's address (\"https://api.hubapi.com\"), without a path"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, Strategy, TargetSettings};

    /// Parses with every check start-up makes: the configuration's own, then the kinds' (`features::checks`).
    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::features::checks::parse(text, Path::new("test.toml"))
    }

    #[test]
    fn hubspot_targets_are_checked() {
        let hubspot = r#"
        [sources.webform]
        route = ["hubspot"]
        [targets.hubspot]
        kind = "hubspot"
        url = "https://api.hubapi.com"
        auth = { bearer_env = "HUBSPOT_TOKEN" }
        id_property = "leadline_id"
        [[targets.hubspot.mapping]]
        to = "email"
        from = "/fields/email"
        required = true
    "#;
        let c = parse(hubspot).unwrap();
        let t = &c.targets["hubspot"];
        assert_eq!(t.strategy(), Strategy::Upsert);
        assert_eq!(t.hubspot_object(), "contacts");
        let TargetSettings::Hubspot(settings) = &t.settings else { panic!("{:?}", t.settings) };
        assert_eq!(settings.id_property.as_deref(), Some("leadline_id"));

        let e = parse(&hubspot.replace("id_property = \"leadline_id\"", "")).unwrap_err().to_string();
        assert_eq!(
            e,
            "targets.hubspot.id_property: is required for kind = \"hubspot\": the unique property to upsert by \
             (\"email\" or a custom unique property such as \"leadline_id\")"
        );
        let e = parse(&hubspot.replace("id_property = \"leadline_id\"", "id_property = \"lead id\""))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("targets.hubspot.id_property:"), "{e}");
        let no_mapping = hubspot.split("[[targets.hubspot.mapping]]").next().unwrap();
        let e = parse(no_mapping).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.mapping:") && e.contains("required"), "{e}");
        let e = parse(&hubspot.replace("id_property", "strategy = \"upsert\"\nid_property")).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.strategy:") && e.contains("does not apply"), "{e}");
        let e = parse(&hubspot.replace("auth = { bearer_env = \"HUBSPOT_TOKEN\" }", "")).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.auth:"), "{e}");
        let e = parse(&hubspot.replace("id_property", "object = \"contacts/x\"\nid_property")).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.object:"), "{e}");
        let e = parse(&hubspot.replace(
            "route = [\"hubspot\"]",
            "route = [\"hubspot\"]\nkind = \"meta\"\napp_secret_env = \"S\"\nverify_token_env = \"V\"",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("meta_lead"), "{e}");
    }
}
