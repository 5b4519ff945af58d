//! What a `salesforce` target's settings must be: the OAuth variables, the external id field and object as API
//! names, the API version, a mapping (run by `features::checks` after the configuration's own validation).

use crate::config::{ConfigError, SalesforceSettings, TargetConfig};

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(key, message)
}

/// The `salesforce` keys.
pub fn check(key: &str, target: &TargetConfig, settings: &SalesforceSettings) -> Result<(), ConfigError> {
    for (name, value) in [
        ("client_id_env", &settings.oauth.client_id_env),
        ("client_secret_env", &settings.oauth.client_secret_env),
        ("refresh_token_env", &settings.oauth.refresh_token_env),
    ] {
        if value.as_deref().is_none_or(str::is_empty) {
            return Err(invalid(
                format!("{key}.{name}"),
                "is required for kind = \"salesforce\": the environment variable holding it",
            ));
        }
    }
    let api_name = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    match &settings.external_id_field {
        None => {
            return Err(invalid(
                format!("{key}.external_id_field"),
                "is required for kind = \"salesforce\": an External ID field of the object (like \"Leadline_Id__c\")",
            ))
        }
        Some(f) if !api_name(f) => {
            return Err(invalid(format!("{key}.external_id_field"), format!("`{f}` is not a Salesforce API name")))
        }
        _ => {}
    }
    if let Some(o) = &settings.object {
        if !api_name(o) {
            return Err(invalid(format!("{key}.object"), format!("`{o}` is not a Salesforce API name")));
        }
    }
    let v = target.salesforce_api_version();
    let ok = v
        .strip_prefix('v')
        .and_then(|n| n.split_once('.'))
        .is_some_and(|(major, minor)| !major.is_empty() && minor == "0" && major.bytes().all(|b| b.is_ascii_digit()));
    if !ok {
        return Err(invalid(format!("{key}.api_version"), format!("`{v}` is not a Salesforce version like \"v60.0\"")));
    }
    if target.mapping.is_empty() {
        return Err(invalid(
            format!("{key}.mapping"),
            "is required for kind = \"salesforce\": which lead field goes to which Salesforce field",
        ));
    }
    if target.method.is_some() || target.search_url.is_some() || target.auth.is_some() {
        let k = if target.method.is_some() {
            "method"
        } else if target.search_url.is_some() {
            "search_url"
        } else {
            "auth"
        };
        return Err(invalid(format!("{key}.{k}"), "does not apply to kind = \"salesforce\""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, Strategy, TargetKind};

    /// Parses with every check start-up makes: the configuration's own, then the kinds' (`features::checks`).
    fn parse(text: &str) -> Result<Config, ConfigError> {
        crate::features::checks::parse(text, Path::new("test.toml"))
    }

    const SALESFORCE: &str = r#"
        [sources.webform]
        route = ["sf"]
        [targets.sf]
        kind = "salesforce"
        url = "https://login.salesforce.com"
        external_id_field = "Leadline_Id__c"
        client_id_env = "SF_CLIENT_ID"
        client_secret_env = "SF_CLIENT_SECRET"
        refresh_token_env = "SF_REFRESH_TOKEN"
        mapping = [
            { to = "LastName", from = "/name" },
            { to = "Company", constant = "Unknown" },
        ]
    "#;

    #[test]
    fn a_salesforce_target_upserts_with_defaults() {
        let c = parse(SALESFORCE).unwrap();
        let t = &c.targets["sf"];
        assert_eq!(t.kind(), TargetKind::Salesforce);
        assert_eq!(t.strategy(), Strategy::Upsert);
        assert_eq!(t.salesforce_api_version(), "v60.0");
        assert_eq!(t.salesforce_object(), "Lead");
        let pinned = SALESFORCE
            .replace("kind = \"salesforce\"", "kind = \"salesforce\"\napi_version = \"v58.0\"\nobject = \"Contact\"");
        let t = parse(&pinned).unwrap().targets["sf"].clone();
        assert_eq!((t.salesforce_api_version(), t.salesforce_object()), ("v58.0", "Contact"));
    }

    #[test]
    fn the_documented_salesforce_example_is_valid() {
        let docs = include_str!("../../../../docs/configuration.md");
        let section = &docs[docs.find("### Salesforce").expect("docs have a Salesforce section")..];
        let start = section.find("```toml\n").expect("a TOML example") + "```toml\n".len();
        let end = start + section[start..].find("```").expect("the example ends");
        let text = format!("[sources.webform]\nroute = [\"salesforce\"]\n{}", &section[start..end]);
        let c = parse(&text).expect("the documented example is valid");
        assert_eq!(c.targets["salesforce"].kind(), TargetKind::Salesforce);
        assert_eq!(c.targets["salesforce"].mapping.len(), 6);
    }

    #[test]
    fn salesforce_errors_name_the_key() {
        let cases = [
            ("refresh_token_env = \"SF_REFRESH_TOKEN\"", "", "targets.sf.refresh_token_env:"),
            ("client_id_env = \"SF_CLIENT_ID\"", "", "targets.sf.client_id_env:"),
            ("client_secret_env = \"SF_CLIENT_SECRET\"", "", "targets.sf.client_secret_env:"),
            ("external_id_field = \"Leadline_Id__c\"", "", "targets.sf.external_id_field:"),
            (
                "external_id_field = \"Leadline_Id__c\"",
                "external_id_field = \"Leadline Id\"",
                "targets.sf.external_id_field:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\nobject = \"Lead/x\"",
                "targets.sf.object:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\napi_version = \"60\"",
                "targets.sf.api_version:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\napi_version = \"v60.0/x\"",
                "targets.sf.api_version:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\nstrategy = \"upsert\"",
                "targets.sf.strategy:",
            ),
            ("url = \"https://login.salesforce.com\"", "url = \"login.salesforce.com\"", "targets.sf.url:"),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\nmethod = \"PUT\"",
                "targets.sf.method:",
            ),
        ];
        for (from, to, key) in cases {
            let text = SALESFORCE.replace(from, to);
            assert_ne!(text, SALESFORCE, "{from}");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.starts_with(key), "{key}: {e}");
        }
        let no_mapping = SALESFORCE.split("mapping = [").next().unwrap().to_string();
        let e = parse(&no_mapping).unwrap_err().to_string();
        assert!(e.starts_with("targets.sf.mapping:"), "{e}");
        // A Meta source's route starts with its fetch step, never with Salesforce.
        let meta = SALESFORCE.replace("route = [\"sf\"]", "route = [\"sf\"]\nkind = \"meta\"");
        let e = parse(&meta).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("meta_lead"), "{e}");
    }
}
