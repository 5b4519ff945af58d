//! Google Ads lead form webhook bodies. Google posts one lead per request as JSON (Google's `WebhookLead`, Google
//! Ads "Webhook implementation guide", developers.google.com/google-ads/webhook/docs/implementation):
//!
//! ```json
//! {"lead_id": "…", "api_version": "1.0", "form_id": 40000000000, "campaign_id": 50000000000,
//!  "adgroup_id": 60000000000, "creative_id": 70000000000, "gcl_id": "…", "google_key": "…", "is_test": false,
//!  "user_column_data": [{"column_id": "FULL_NAME", "string_value": "…", "column_name": "Full Name"}, …]}
//! ```
//!
//! There is no signature header: the key the advertiser typed beside the webhook URL comes back in `google_key`,
//! and is compared (in constant time, by the caller) before anything is stored. The ids are int64 in Google's
//! schema and are kept as text digit for digit. The lead becomes the shape a Meta lead has — its answers in
//! `fields`, keyed by the column id in lower case (`FULL_NAME` → `full_name`, `EMAIL` → `email`,
//! `PHONE_NUMBER` → `phone_number`: Meta's own field names), so one field mapping serves both — with Google's
//! ids beside them and the raw `user_column_data` kept.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::id::{self, IdError};

/// One Google lead, checked for shape (its key still to be compared).
#[derive(Debug, Clone, PartialEq)]
pub struct GoogleLead {
    /// `lead_id`: the source ref.
    pub lead_id: String,
    /// `google_key` as sent (absent: `None`).
    pub key: Option<String>,
    /// `is_test`: sent by the form editor's "send test data" button.
    pub is_test: bool,
    /// The canonical lead (see the module's text); `google_key` is never part of it.
    pub payload: Value,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GoogleBodyError {
    #[error("the body is not valid JSON: {0}")]
    Malformed(String),
    #[error("expected a JSON object")]
    NotAnObject,
    #[error("lead_id: {0}")]
    LeadId(IdError),
}

/// The ids Google sends beside the answers, kept as text.
const IDS: [&str; 6] = ["form_id", "campaign_id", "adgroup_id", "creative_id", "asset_group_id", "gcl_id"];

/// Reads a Google lead form webhook body. `received_at` stands for the lead's creation time: Google's body carries
/// none, and it posts each lead within seconds of its submission.
pub fn lead(body: &str, received_at: DateTime<Utc>) -> Result<GoogleLead, GoogleBodyError> {
    let root: &RawValue = serde_json::from_str(body).map_err(|e| GoogleBodyError::Malformed(e.to_string()))?;
    let members: BTreeMap<String, &RawValue> = id::object(root).ok_or(GoogleBodyError::NotAnObject)?;
    let text = |key: &str| members.get(key).and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    let key = text("google_key");
    let lead_id = members.get("lead_id").map(|raw| id::id_text(raw)).unwrap_or(Err(IdError::Missing));
    let lead_id = lead_id.map_err(GoogleBodyError::LeadId)?;
    let is_test = members.get("is_test").and_then(|raw| serde_json::from_str::<bool>(raw.get()).ok()).unwrap_or(false);
    let columns: Vec<Value> =
        members.get("user_column_data").and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default();
    let mut payload = Map::new();
    payload.insert("lead_id".into(), Value::String(lead_id.clone()));
    for key in IDS {
        match members.get(key).map(|raw| id::id_text(raw)) {
            Some(Ok(v)) => payload.insert(key.into(), Value::String(v)),
            _ => payload.insert(key.into(), Value::Null),
        };
    }
    if let Some(v) = text("api_version") {
        payload.insert("api_version".into(), Value::String(v));
    }
    payload.insert("is_test".into(), Value::Bool(is_test));
    payload.insert("created_time".into(), Value::String(received_at.to_rfc3339_opts(SecondsFormat::Secs, true)));
    payload.insert("fields".into(), Value::Object(fields(&columns)));
    payload.insert("user_column_data".into(), Value::Array(columns));
    Ok(GoogleLead { lead_id, key, is_test, payload: Value::Object(payload) })
}

/// The answers by column id in lower case (a column without an id, by its name). The same id twice (two custom
/// questions cannot share one; a repeated column can) gives a list, like Meta's several values.
pub fn fields(columns: &[Value]) -> Map<String, Value> {
    let mut out = Map::new();
    for c in columns {
        let name = c
            .get("column_id")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .or_else(|| c.get("column_name").and_then(Value::as_str).filter(|s| !s.trim().is_empty()));
        let Some(name) = name else { continue };
        let value = match c.get("string_value") {
            Some(Value::String(s)) => Value::String(s.clone()),
            Some(Value::Null) | None => Value::String(String::new()),
            Some(other) => Value::String(other.to_string()),
        };
        let key = name.trim().to_lowercase();
        match out.remove(&key) {
            None => {
                out.insert(key, value);
            }
            Some(Value::Array(mut list)) => {
                list.push(value);
                out.insert(key, Value::Array(list));
            }
            Some(first) => {
                out.insert(key, Value::Array(vec![first, value]));
            }
        }
    }
    out
}

/// What a `google_ads` source's settings must be: the key's variable, and none of the webhook signature or
/// listing settings other sources take. Run by `features::checks` after the configuration's own validation.
pub fn check(key: &str, source: &crate::config::SourceConfig) -> Result<(), crate::config::ConfigError> {
    fn invalid(key: impl Into<String>, message: impl Into<String>) -> crate::config::ConfigError {
        crate::config::ConfigError::invalid(key, message)
    }
    let crate::config::SourceSettings::GoogleAds(settings) = &source.settings else {
        return Ok(());
    };
    if settings.key_env.is_none() {
        return Err(invalid(
            format!("{key}.key_env"),
            "is required for kind = \"google_ads\" (the key Google sends back in every lead)",
        ));
    }
    for (set, name) in [
        (source.sets_stray("signature"), "signature"),
        (source.sets_stray("app_secret_env"), "app_secret_env"),
        (source.sets_stray("verify_token_env"), "verify_token_env"),
        (source.sets_stray("page_id"), "page_id"),
        (source.sets_stray("stage_webhook"), "stage_webhook"),
        (source.reconcile.is_some(), "reconcile"),
        (source.poll.is_some(), "poll"),
    ] {
        if set {
            return Err(invalid(
                format!("{key}.{name}"),
                "does not apply to kind = \"google_ads\" (Google's lead form webhook carries its key in the body, \
                 and Google offers no list of leads to compare with)",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 9, 30, 0).unwrap()
    }

    /// Google's documented sample body (Webhook implementation guide, "Sample lead data"), ids as JSON numbers.
    #[test]
    fn the_documented_body_becomes_the_meta_lead_shape() {
        let body = json!({
            "lead_id": "TeSter-123-ABCDEFGHIJKLMNOPQRSTUVWXYZ-abcdefghijklmnopqrstuvwxyz-0123456789-AaBbCcDdEeFfGgHhIiJjKkLl",
            "user_column_data": [
                {"column_name": "Full Name", "string_value": "FirstName LastName", "column_id": "FULL_NAME"},
                {"column_name": "User Phone", "string_value": "1-650-555-0123", "column_id": "PHONE_NUMBER"},
                {"column_name": "User Email", "string_value": "test@example.com", "column_id": "EMAIL"},
                {"string_value": "morning", "column_id": "WHEN_TO_CALL"}
            ],
            "api_version": "1.0",
            "form_id": 40000000000u64,
            "campaign_id": 50000000000u64,
            "google_key": "secret-key",
            "is_test": true,
            "gcl_id": "gclid-abc",
            "adgroup_id": 60000000000u64,
            "creative_id": 70000000000u64
        });
        let l = lead(&body.to_string(), at()).unwrap();
        assert!(l.lead_id.starts_with("TeSter-123-"));
        assert_eq!(l.key.as_deref(), Some("secret-key"));
        assert!(l.is_test);
        let p = &l.payload;
        assert_eq!(p["form_id"], "40000000000");
        assert_eq!(p["campaign_id"], "50000000000");
        assert_eq!(p["adgroup_id"], "60000000000");
        assert_eq!(p["creative_id"], "70000000000");
        assert_eq!(p["gcl_id"], "gclid-abc");
        assert_eq!(p["asset_group_id"], Value::Null);
        assert_eq!(p["created_time"], "2026-12-01T09:30:00Z");
        assert_eq!(p["fields"]["full_name"], "FirstName LastName");
        assert_eq!(p["fields"]["email"], "test@example.com");
        assert_eq!(p["fields"]["phone_number"], "1-650-555-0123");
        assert_eq!(p["fields"]["when_to_call"], "morning");
        assert_eq!(p["user_column_data"].as_array().unwrap().len(), 4);
        assert!(p.get("google_key").is_none(), "the key is never stored with the lead");
    }

    #[test]
    fn ids_keep_every_digit_and_odd_bodies_are_refused() {
        let l = lead(r#"{"lead_id": 12345678901234567890123, "form_id": 9007199254740993}"#, at()).unwrap();
        assert_eq!(l.lead_id, "12345678901234567890123");
        assert_eq!(l.payload["form_id"], "9007199254740993");
        assert!(!l.is_test);
        assert_eq!(l.key, None);
        assert_eq!(l.payload["fields"], json!({}));
        assert_eq!(lead("[1]", at()), Err(GoogleBodyError::NotAnObject));
        assert!(matches!(lead("{", at()), Err(GoogleBodyError::Malformed(_))));
        assert_eq!(lead(r#"{"google_key": "k"}"#, at()), Err(GoogleBodyError::LeadId(IdError::Missing)));
    }

    #[test]
    fn a_repeated_column_gives_a_list() {
        let cols = vec![
            json!({"column_id": "CHOICE", "string_value": "a"}),
            json!({"column_id": "choice", "string_value": "b"}),
            json!({"column_name": "Unnamed question", "string_value": "x"}),
            json!({"string_value": "lost"}),
        ];
        let f = fields(&cols);
        assert_eq!(f["choice"], json!(["a", "b"]));
        assert_eq!(f["unnamed question"], "x");
        assert_eq!(f.len(), 2);
    }
}
