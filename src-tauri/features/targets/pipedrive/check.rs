//! What a `pipedrive` target's settings must be: the token variable, the person field, a mapping that splits
//! into person and lead (run by `features::checks` after the configuration's own validation).

use crate::config::{ConfigError, PipedriveSettings, TargetConfig};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `pipedrive` keys: the token variable, the person field, a mapping that splits into person and lead.
pub fn check(key: &str, target: &TargetConfig, settings: &PipedriveSettings) -> Result<(), ConfigError> {
    if settings.api_token_env.as_deref().is_none_or(str::is_empty) {
        return Err(invalid(
            format!("{key}.api_token_env"),
            "is required for kind = \"pipedrive\": the variable holding the API token",
        ));
    }
    let field = settings.person_field_key.as_deref().unwrap_or("");
    if field.is_empty() || !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(invalid(
            format!("{key}.person_field_key"),
            "is required for kind = \"pipedrive\": the key (a 40-character hash) of the custom person field \
             holding Leadline's external id",
        ));
    }
    if target.auth.is_some() {
        return Err(invalid(format!("{key}.auth"), "does not apply to kind = \"pipedrive\"; use api_token_env"));
    }
    if target.search_url.is_some() {
        return Err(invalid(
            format!("{key}.search_url"),
            "does not apply to kind = \"pipedrive\" (it searches persons by person_field_key)",
        ));
    }
    crate::model::mapping::validate_pipedrive(&target.mapping, field).map_err(|(i, message)| match i {
        Some(i) => invalid(format!("{key}.mapping[{i}].to"), message),
        None => invalid(format!("{key}.mapping"), message),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, Strategy, TargetKind, TargetSettings};

    /// Parses with every check start-up makes: the configuration's own, then the kinds' (`features::checks`).
    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::features::checks::parse(text, Path::new("test.toml"))
    }

    const PIPEDRIVE: &str = r#"
        [sources.webform]
        route = ["crm"]
        [targets.crm]
        kind = "pipedrive"
        url = "https://api.pipedrive.com"
        api_token_env = "PIPEDRIVE_TOKEN"
        person_field_key = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
        [[targets.crm.mapping]]
        to = "/person/name"
        from = "/fields/full_name"
        [[targets.crm.mapping]]
        to = "/person/email"
        from = "/fields/email"
        [[targets.crm.mapping]]
        to = "/lead/title"
        constant = "Meta lead"
    "#;

    #[test]
    fn a_pipedrive_target_parses_and_always_searches_then_creates() {
        let c = parse(PIPEDRIVE).unwrap();
        let t = &c.targets["crm"];
        assert_eq!(t.kind(), TargetKind::Pipedrive);
        assert_eq!(t.strategy(), Strategy::SearchThenCreate);
        let TargetSettings::Pipedrive(settings) = &t.settings else { panic!("{:?}", t.settings) };
        assert_eq!(settings.api_token_env.as_deref(), Some("PIPEDRIVE_TOKEN"));
        let company = PIPEDRIVE.replace("https://api.pipedrive.com", "https://acme.pipedrive.com");
        assert!(parse(&company).is_ok());
    }

    #[test]
    fn pipedrive_errors_name_the_key() {
        let cases = [
            (
                PIPEDRIVE.replace("kind = \"pipedrive\"", "kind = \"pipedrive\"\nstrategy = \"upsert\""),
                "targets.crm.strategy:",
            ),
            (PIPEDRIVE.replace("api_token_env = \"PIPEDRIVE_TOKEN\"", ""), "targets.crm.api_token_env:"),
            (
                PIPEDRIVE.replace("person_field_key = \"a1b2c3d4e5f60718293a4b5c6d7e8f9012345678\"", ""),
                "targets.crm.person_field_key:",
            ),
            (PIPEDRIVE.replace("\"/lead/title\"", "\"/deal/title\""), "targets.crm.mapping[2].to:"),
            (PIPEDRIVE.replace("\"/person/email\"", "\"/lead/person_id\""), "targets.crm.mapping[1].to:"),
            (
                PIPEDRIVE
                    .replace("\"/person/email\"", "\"/person/custom_fields/a1b2c3d4e5f60718293a4b5c6d7e8f9012345678\""),
                "targets.crm.mapping[1].to:",
            ),
            (PIPEDRIVE.replace("\"/lead/title\"", "\"/lead/note\""), "targets.crm.mapping:"),
            (PIPEDRIVE.replace("\"/person/name\"", "\"/person/phone\""), "targets.crm.mapping:"),
            (PIPEDRIVE.replace("https://api.pipedrive.com", "ftp://x"), "targets.crm.url:"),
            (
                PIPEDRIVE.replace("kind = \"pipedrive\"", "kind = \"pipedrive\"\nauth = { bearer_env = \"X\" }"),
                "targets.crm.auth:",
            ),
        ];
        for (text, key) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.starts_with(key), "{key}: {e}");
        }
        let e = parse(&PIPEDRIVE.replace("\"/lead/title\"", "\"/lead/note\"")).unwrap_err().to_string();
        assert!(e.contains("/lead/title"), "{e}");
    }
}
