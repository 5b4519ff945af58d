//! Salesforce REST API: a lead upserted by an external id field, and the OAuth 2.0 refresh-token flow.
//!
//! Documented shapes this module follows (developer.salesforce.com, REST API Developer Guide: "Upsert Records
//! Using sObject Rows by External ID", "Status Codes and Error Responses", "Limits"; Salesforce Help: "OAuth 2.0
//! Refresh Token Flow for Renewed Sessions"):
//! - `PATCH /services/data/vXX.X/sobjects/<Object>/<ExternalIdField>/<value>` with the fields as a JSON object;
//!   the body must not repeat `Id` or the external id field;
//! - 201 `{"id","success":true,"errors":[],"created":true}` when created; 200 with `"created":false` when updated
//!   (API 46.0 and later), 204 without a body in older versions; 300 with the list of matching records when the
//!   external id matches several (nothing written);
//! - errors: a JSON array `[{"message","errorCode","fields":[…]}]`;
//! - every answer: `Sforce-Limit-Info: api-usage=<used>/<max>`;
//! - token: form `grant_type=refresh_token&client_id&client_secret&refresh_token` to
//!   `<login host>/services/oauth2/token` → `{"access_token","instance_url","id","token_type":"Bearer",
//!   "issued_at","signature"}` (plus `refresh_token` when rotation is on); errors `{"error","error_description"}`.

use chrono::{DateTime, Duration, Utc};
use reqwest::Method;
use serde_json::{Map, Value};

use super::super::vendor::{encode_component, json_id, mask, str_at, VendorVerdict};
use crate::model::{default_class_for_status, ErrorClass};

/// Hold after an exhausted org-wide API limit. The limit is a rolling 24-hour count; an hour lets some of it
/// roll off without hammering a refusing org (each refused call counts too).
pub const DAILY_LIMIT_HOLD: Duration = Duration::hours(1);

/// The upsert request for one lead: method, URL and JSON body.
///
/// `value` becomes exactly one path segment (percent-encoded). `fields` is sent without `Id` and without the
/// external id field, which Salesforce refuses in the body of this resource. Names that are not API names
/// (letters, digits, underscores) and empty or dot-only values are refused here: they would address another URL.
pub fn upsert_request(
    instance_url: &str,
    api_version: &str,
    object: &str,
    external_id_field: &str,
    value: &str,
    fields: &Map<String, Value>,
) -> Result<(Method, String, Value), VendorVerdict> {
    let version = api_version.trim().trim_start_matches(['v', 'V']);
    let version_ok = version.split_once('.').is_some_and(|(major, minor)| {
        !major.is_empty() && !minor.is_empty() && (major.to_owned() + minor).bytes().all(|b| b.is_ascii_digit())
    });
    if !version_ok {
        return Err(config(format!("the Salesforce API version {api_version:?} is not of the form 60.0")));
    }
    for (what, name) in [("object", object), ("external id field", external_id_field)] {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(config(format!("the Salesforce {what} {name:?} is not an API name")));
        }
    }
    if value.trim().is_empty() || value.chars().all(|c| c == '.') {
        return Err(VendorVerdict::failed(
            ErrorClass::PermanentData,
            "the lead's external id is empty or only dots: it cannot address a Salesforce record",
        )
        .with_field(Some(external_id_field.to_string())));
    }
    let body: Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("Id") && !k.eq_ignore_ascii_case(external_id_field))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let url = format!(
        "{}/services/data/v{version}/sobjects/{object}/{external_id_field}/{}",
        instance_url.trim_end_matches('/'),
        encode_component(value)
    );
    Ok((Method::PATCH, url, Value::Object(body)))
}

/// Reads the answer to an upsert.
pub fn parse_upsert_answer(status: u16, body: &[u8], now: DateTime<Utc>) -> VendorVerdict {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    match status {
        200 | 201 => {
            let id = json.as_ref().and_then(|j| j.get("id")).and_then(json_id);
            let created = json.as_ref().and_then(|j| j.get("created")).and_then(Value::as_bool).or(match status {
                201 => Some(true),
                _ => None,
            });
            let reason = match (created, &id) {
                (Some(true), Some(_)) => "created in Salesforce",
                (Some(true), None) => "created in Salesforce; the answer gave no record id",
                (_, Some(_)) => "updated in Salesforce",
                (_, None) => "updated in Salesforce; the answer gave no record id",
            };
            VendorVerdict::delivered(id, reason).with_created(created.or(Some(false)))
        }
        204 => VendorVerdict::delivered(
            None,
            "updated in Salesforce; the answer (204, API before 46.0) has no body, so the record id is unknown",
        )
        .with_created(Some(false)),
        300 => {
            let n = json.as_ref().and_then(Value::as_array).map(Vec::len).filter(|n| *n > 1);
            let count = n.map(|n| format!(" ({n})")).unwrap_or_default();
            VendorVerdict::failed(
                ErrorClass::PermanentData,
                format!(
                    "several records{count} match: a person must merge them in Salesforce, then replay (nothing was \
                     written)"
                ),
            )
        }
        _ => classify_errors(status, json.as_ref(), now),
    }
}

/// Codes whose message quotes the rejected value: their reason is written here, never copied from Salesforce.
const ECHOING: &[(&str, &str)] = &[
    ("STRING_TOO_LONG", "the value is too long for the field"),
    ("INVALID_EMAIL_ADDRESS", "the value is not a valid e-mail address"),
    ("INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST", "the value is not one of the field's picklist values"),
    ("INVALID_TYPE_ON_FIELD_IN_RECORD", "the value is not of the field's type"),
    ("NUMBER_OUTSIDE_VALID_RANGE", "the number is out of the field's range"),
    ("MALFORMED_ID", "the value is not a valid record id"),
    ("DUPLICATE_VALUE", "another record already holds this value in a unique field"),
    ("DUPLICATE_EXTERNAL_ID", "the external id is held by several records"),
];

/// Codes where the lead's data is at fault: dead letter, fix the data, replay.
const DATA: &[&str] = &[
    "REQUIRED_FIELD_MISSING",
    "FIELD_CUSTOM_VALIDATION_EXCEPTION",
    "FIELD_INTEGRITY_EXCEPTION",
    "DUPLICATES_DETECTED",
    "INVALID_CROSS_REFERENCE_KEY",
    "CANNOT_INSERT_UPDATE_ACTIVATE_ENTITY",
    "FIELD_FILTER_VALIDATION_EXCEPTION",
];

/// Codes where the setup is at fault: every lead would fail the same way.
const CONFIG: &[&str] = &[
    "INVALID_TYPE",
    "NOT_FOUND",
    "INSUFFICIENT_ACCESS",
    "INSUFFICIENT_ACCESS_OR_READONLY",
    "INSUFFICIENT_ACCESS_ON_CROSS_REFERENCE_ENTITY",
    "INVALID_FIELD_FOR_INSERT_UPDATE",
    "API_DISABLED_FOR_ORG",
    "API_CURRENTLY_DISABLED",
    "FUNCTIONALITY_NOT_ENABLED",
    "METHOD_NOT_ALLOWED",
    "JSON_PARSER_ERROR",
    "STORAGE_LIMIT_EXCEEDED",
    "INVALID_OPERATION_WITH_EXPIRED_PASSWORD",
];

/// Codes worth retrying.
const TRANSIENT: &[&str] = &["SERVER_UNAVAILABLE", "UNABLE_TO_LOCK_ROW", "REQUEST_RUNNING_TOO_LONG", "QUERY_TIMEOUT"];

fn classify_errors(status: u16, json: Option<&Value>, now: DateTime<Utc>) -> VendorVerdict {
    // Errors are an array; take the first that has a code (Salesforce lists the most relevant first).
    let first = json.and_then(Value::as_array).and_then(|a| a.iter().find(|e| str_at(e, "/errorCode").is_some()));
    let Some(error) = first else {
        let class = default_class_for_status(status);
        let verdict = VendorVerdict::failed(class, format!("Salesforce answered HTTP {status} without an error code"));
        return if class == ErrorClass::PermanentConfig { verdict.alerting() } else { verdict };
    };
    let code = str_at(error, "/errorCode").unwrap_or_default();
    let raw = str_at(error, "/message").unwrap_or_default();
    let field = str_at(error, "/fields/0").map(str::to_string);
    let on_field = field.as_deref().map(|f| format!(" on {f}")).unwrap_or_default();
    let quoted = |what: &str| {
        if raw.is_empty() {
            format!("{what} (HTTP {status} {code})")
        } else {
            format!("{what} (HTTP {status} {code}): {}", mask(raw))
        }
    };

    if code == "INVALID_SESSION_ID" {
        return VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            "the Salesforce session expired or is invalid (INVALID_SESSION_ID): refresh the token once; if it \
             still fails, reconnect Salesforce",
        )
        .credentials();
    }
    if code == "REQUEST_LIMIT_EXCEEDED" {
        // "ConcurrentPerOrgLongTxn Limit exceeded" passes in seconds; "TotalRequests Limit exceeded" is the org's
        // rolling 24-hour allowance, shared with every other integration: a person should know.
        return if raw.contains("Concurrent") {
            VendorVerdict::failed(ErrorClass::RateLimited, quoted("Salesforce's concurrent-request limit was hit"))
                .slow_down()
        } else {
            VendorVerdict::failed(
                ErrorClass::RateLimited,
                quoted("the Salesforce org's API request limit is used up; waiting for it to roll off"),
            )
            .hold(Some(now + DAILY_LIMIT_HOLD))
            .alerting()
        };
    }
    if let Some((_, words)) = ECHOING.iter().find(|(c, _)| *c == code) {
        return VendorVerdict::failed(
            ErrorClass::PermanentData,
            format!("Salesforce rejected the lead{on_field}: {words} (HTTP {status} {code})"),
        )
        .with_field(field);
    }
    if code == "INVALID_FIELD" {
        // "No such column 'X' on sobject of type Lead" is the field mapping (every lead fails); other
        // INVALID_FIELD messages (a referenced external id not found, ...) depend on the lead.
        return if raw.contains("No such column") {
            VendorVerdict::failed(ErrorClass::PermanentConfig, quoted("a mapped field does not exist in Salesforce"))
                .with_field(field.or_else(|| quoted_name(raw)))
                .alerting()
        } else {
            VendorVerdict::failed(ErrorClass::PermanentData, quoted(&format!("Salesforce rejected the lead{on_field}")))
                .with_field(field)
        };
    }
    if DATA.contains(&code) {
        return VendorVerdict::failed(
            ErrorClass::PermanentData,
            quoted(&format!("Salesforce rejected the lead{on_field}")),
        )
        .with_field(field);
    }
    if CONFIG.contains(&code) {
        return VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            quoted(&format!("the Salesforce setup refuses this request{on_field}")),
        )
        .with_field(field)
        .alerting();
    }
    if TRANSIENT.contains(&code) {
        return VendorVerdict::failed(ErrorClass::Transient, quoted("Salesforce is temporarily unable to answer"));
    }
    let class = default_class_for_status(status);
    let verdict =
        VendorVerdict::failed(class, quoted(&format!("Salesforce refused the lead{on_field}"))).with_field(field);
    if class == ErrorClass::PermanentConfig {
        verdict.alerting()
    } else {
        verdict
    }
}

/// "No such column 'Score__c' on sobject of type Lead" → `Score__c` (a field name, not a lead's value).
fn quoted_name(message: &str) -> Option<String> {
    let (_, rest) = message.split_once('\'')?;
    let (name, _) = rest.split_once('\'')?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).then(|| name.to_string())
}

/// `Sforce-Limit-Info: api-usage=10018/100000` → `(10018, 100000)`. Other entries in the header (such as
/// `per-app-api-usage=17/250(appName=…)`) are skipped.
pub fn parse_limit_info(value: &str) -> Option<(u64, u64)> {
    value.split(',').map(str::trim).find_map(|entry| {
        let usage = entry.strip_prefix("api-usage=")?;
        let (used, max) = usage.split_once('/')?;
        let max: String = max.chars().take_while(char::is_ascii_digit).collect();
        Some((used.trim().parse().ok()?, max.parse().ok()?))
    })
}

fn config(reason: String) -> VendorVerdict {
    VendorVerdict::failed(ErrorClass::PermanentConfig, reason).alerting()
}

// ---- OAuth 2.0 refresh-token flow ----

/// The token endpoint of a login host (`https://login.salesforce.com`, `https://test.salesforce.com`, or the
/// org's My Domain).
pub fn token_url(login_host: &str) -> String {
    format!("{}/services/oauth2/token", login_host.trim_end_matches('/'))
}

/// The form fields of a refresh request (sent `application/x-www-form-urlencoded`).
pub fn refresh_form(client_id: &str, client_secret: &str, refresh_token: &str) -> Vec<(&'static str, String)> {
    vec![
        ("grant_type", "refresh_token".to_string()),
        ("client_id", client_id.to_string()),
        ("client_secret", client_secret.to_string()),
        ("refresh_token", refresh_token.to_string()),
    ]
}

/// A fresh session. `Debug` never shows the tokens.
#[derive(Clone, PartialEq)]
pub struct Token {
    pub access_token: String,
    /// API calls go here, not to the login host.
    pub instance_url: String,
    /// Present when refresh-token rotation is on: it replaces the stored refresh token, which no longer works.
    pub refresh_token: Option<String>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("access_token", &"…")
            .field("instance_url", &self.instance_url)
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "…"))
            .finish()
    }
}

/// Why no token came back.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenError {
    pub class: ErrorClass,
    /// Words a person understands: what to do, not only the OAuth code.
    pub reason: String,
}

impl TokenError {
    /// The verdict for the lead whose delivery needed the token.
    pub fn verdict(&self) -> VendorVerdict {
        let verdict = VendorVerdict::failed(self.class, self.reason.clone());
        if self.class == ErrorClass::PermanentConfig {
            verdict.credentials()
        } else {
            verdict
        }
    }
}

/// Reads the token endpoint's answer.
pub fn parse_token_answer(status: u16, body: &[u8]) -> Result<Token, TokenError> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let j = json.as_ref();
    if (200..300).contains(&status) {
        let access = j.and_then(|j| str_at(j, "/access_token"));
        let instance = j.and_then(|j| str_at(j, "/instance_url"));
        return match (access, instance) {
            (Some(access), Some(instance)) => Ok(Token {
                access_token: access.to_string(),
                instance_url: instance.trim_end_matches('/').to_string(),
                refresh_token: j.and_then(|j| str_at(j, "/refresh_token")).map(str::to_string),
            }),
            _ => Err(TokenError {
                class: ErrorClass::Transient,
                reason: format!("Salesforce's token answer (HTTP {status}) lacks access_token or instance_url"),
            }),
        };
    }
    let error = j.and_then(|j| str_at(j, "/error")).unwrap_or("");
    let description = j.and_then(|j| str_at(j, "/error_description")).unwrap_or("");
    let config = |reason: String| Err(TokenError { class: ErrorClass::PermanentConfig, reason });
    match error {
        // With rotation, two refreshes racing: the other one wins, this one may simply be repeated.
        "invalid_grant" if description.contains("already being processed") => Err(TokenError {
            class: ErrorClass::Transient,
            reason: "Salesforce was already renewing the session: trying again shortly".into(),
        }),
        "invalid_grant" if description.contains("expired") => config(
            "Salesforce no longer accepts the saved authorization: it expired or was revoked. Reconnect Salesforce \
             in Settings (invalid_grant: expired access/refresh token)"
                .into(),
        ),
        "invalid_grant" if description.contains("inactive") => {
            config(format!("the Salesforce user Leadline connects as is inactive: reactivate it or reconnect with another user (invalid_grant: {})", mask(description)))
        }
        "invalid_grant" if description.contains("IP restricted") || description.contains("login hours") => config(
            "Salesforce refuses logins from this computer or at this hour (IP restrictions or login hours of the \
             connected user): ask the Salesforce admin (invalid_grant)"
                .into(),
        ),
        "invalid_grant" => config(format!(
            "Salesforce refused the saved authorization: reconnect Salesforce in Settings (invalid_grant: {})",
            mask(description)
        )),
        "invalid_client_id" => config(
            "Salesforce does not know the connected app's consumer key: check the client id in Settings \
             (invalid_client_id)"
                .into(),
        ),
        "invalid_client" => config(
            "Salesforce refused the connected app's consumer secret: check the client secret in Settings \
             (invalid_client)"
                .into(),
        ),
        "inactive_user" | "inactive_org" => config(format!(
            "the Salesforce {} is inactive or locked: ask the Salesforce admin ({error})",
            if error == "inactive_org" { "org" } else { "user Leadline connects as" }
        )),
        "unsupported_grant_type" | "invalid_request" | "invalid_scope" => config(format!(
            "the connected app does not allow the refresh-token flow: enable it for this app ({error}: {})",
            mask(description)
        )),
        _ => {
            let class = match status {
                429 => ErrorClass::RateLimited,
                400..=499 => ErrorClass::PermanentConfig,
                _ => ErrorClass::Transient,
            };
            let what = if error.is_empty() { String::new() } else { format!(" ({error})") };
            let reason = format!("Salesforce's token endpoint answered HTTP {status}{what}");
            if class == ErrorClass::PermanentConfig {
                config(format!("{reason}: reconnect Salesforce in Settings"))
            } else {
                Err(TokenError { class, reason })
            }
        }
    }
}

/// What a describe answer says about the object and its external id field, in plain words.
pub fn describe_verdict(object: &str, external_id_field: &str, body: &[u8]) -> Result<String, String> {
    let json: Value =
        serde_json::from_slice(body).map_err(|_| format!("the describe answer for {object} is not JSON"))?;
    let fields = json.get("fields").and_then(Value::as_array).cloned().unwrap_or_default();
    let field = fields.iter().find(|f| str_at(f, "/name").is_some_and(|n| n.eq_ignore_ascii_case(external_id_field)));
    match field {
        None => Err(format!(
            "{object} has no field {external_id_field} (or the connected user cannot see it): create it as an \
             External ID text field on {object}, or fix external_id_field"
        )),
        Some(f) if f.get("externalId").and_then(Value::as_bool) != Some(true) => Err(format!(
            "{object}.{external_id_field} exists but is not marked \"External ID\": upsert needs it (edit the \
             field in Setup, Object Manager)"
        )),
        Some(_) => Ok(format!("{object} has the external id field {external_id_field}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;
    use ErrorClass::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 14, 15, 0, 0).unwrap()
    }

    fn fields() -> Map<String, Value> {
        json!({"LastName": "Lovelace", "Company": "Analytical Engines", "Id": "00Q000000000001", "Leadline_Id__c": "x"})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[test]
    fn the_request_follows_the_documented_upsert() {
        // Shape: "Upsert Records Using sObject Rows by External ID": PATCH /services/data/vXX.X/sobjects/<Object>/
        // <field>/<value>, body without Id or the external id field.
        let (method, url, body) = upsert_request(
            "https://acme.my.salesforce.com/",
            "60.0",
            "Lead",
            "Leadline_Id__c",
            "meta:123/4 5",
            &fields(),
        )
        .unwrap();
        assert_eq!(method, Method::PATCH);
        assert_eq!(
            url,
            "https://acme.my.salesforce.com/services/data/v60.0/sobjects/Lead/Leadline_Id__c/meta%3A123%2F4%205"
        );
        assert_eq!(body, json!({"LastName": "Lovelace", "Company": "Analytical Engines"}));

        let (_, url, _) = upsert_request("https://x", "v58.0", "Lead", "Ext__c", "a.b", &Map::new()).unwrap();
        assert_eq!(url, "https://x/services/data/v58.0/sobjects/Lead/Ext__c/a.b");
    }

    #[test]
    fn requests_that_would_address_another_url_are_refused() {
        let err = upsert_request("https://x", "60", "Lead", "Ext__c", "1", &Map::new()).unwrap_err();
        assert_eq!(err.class, Some(PermanentConfig));
        let err = upsert_request("https://x", "60.0", "Lead/../Account", "Ext__c", "1", &Map::new()).unwrap_err();
        assert_eq!(err.class, Some(PermanentConfig));
        for value in ["", "  ", ".", ".."] {
            let err = upsert_request("https://x", "60.0", "Lead", "Ext__c", value, &Map::new()).unwrap_err();
            assert_eq!(err.class, Some(PermanentData), "{value:?}");
            assert_eq!(err.field.as_deref(), Some("Ext__c"));
        }
    }

    #[test]
    fn created_updated_and_updated_without_body() {
        // Shape: upsert 201 {"id","errors":[],"success":true,"created":true}.
        let v = parse_upsert_answer(
            201,
            br#"{"id":"00Q5g00000AbCdEAAZ","errors":[],"success":true,"created":true}"#,
            now(),
        );
        assert!(v.is_delivered());
        assert_eq!(v.crm_id.as_deref(), Some("00Q5g00000AbCdEAAZ"));
        assert_eq!(v.created, Some(true));

        // Shape: upsert 200 (API 46.0+) {"id","errors":[],"success":true,"created":false}.
        let v = parse_upsert_answer(
            200,
            br#"{"id":"00Q5g00000AbCdEAAZ","errors":[],"success":true,"created":false}"#,
            now(),
        );
        assert_eq!((v.crm_id.as_deref(), v.created), (Some("00Q5g00000AbCdEAAZ"), Some(false)));
        assert_eq!(v.reason, "updated in Salesforce");

        // Shape: upsert 204 No Content (API before 46.0): delivered, id unknown, said so.
        let v = parse_upsert_answer(204, b"", now());
        assert!(v.is_delivered());
        assert_eq!(v.crm_id, None);
        assert!(v.reason.contains("record id is unknown"));
    }

    #[test]
    fn several_matches_need_a_person() {
        // Shape: upsert 300 Multiple Choices, a JSON array of the matching records' URLs.
        let body = br#"["/services/data/v60.0/sobjects/Lead/00Q5g00000AbCdEAAZ","/services/data/v60.0/sobjects/Lead/00Q5g00000AbCdFAAZ"]"#;
        let v = parse_upsert_answer(300, body, now());
        assert_eq!(v.class, Some(PermanentData));
        assert_eq!(
            v.reason,
            "several records (2) match: a person must merge them in Salesforce, then replay (nothing was written)"
        );
    }

    #[test]
    fn an_expired_session_asks_for_one_refresh() {
        // Shape: 401 [{"message":"Session expired or invalid","errorCode":"INVALID_SESSION_ID"}].
        let v = parse_upsert_answer(
            401,
            br#"[{"message":"Session expired or invalid","errorCode":"INVALID_SESSION_ID"}]"#,
            now(),
        );
        assert_eq!(v.class, Some(PermanentConfig));
        assert!(v.credential_problem);
    }

    #[test]
    fn an_exhausted_org_limit_is_a_rate_limit_with_a_hold() {
        // Shape: 403 [{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}].
        let v = parse_upsert_answer(
            403,
            br#"[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#,
            now(),
        );
        assert_eq!(v.class, Some(RateLimited));
        assert_eq!(v.hold_until, Some(now() + DAILY_LIMIT_HOLD));
        assert!(v.alert && !v.credential_problem);

        // Shape: 403 REQUEST_LIMIT_EXCEEDED for concurrent long-running requests: "too many", without saying how
        // many or for how long — the target slows down (its pace is learned), no fixed hold, no alert.
        let body = br#"[{"message":"ConcurrentPerOrgLongTxn Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#;
        let v = parse_upsert_answer(403, body, now());
        assert_eq!(v.class, Some(RateLimited));
        assert_eq!(v.hold_until, None);
        assert!(v.slow_down && !v.alert);
    }

    #[test]
    fn data_errors_name_the_field_and_never_echo_the_value() {
        // Shape: 400 [{"message","errorCode","fields":[…]}] for field-level errors.
        let cases: &[(&[u8], &str)] = &[
            (br#"[{"message":"Required fields are missing: [LastName]","errorCode":"REQUIRED_FIELD_MISSING","fields":["LastName"]}]"#, "LastName"),
            (br#"[{"message":"Last Name: data value too large: Lovelace-Byron-King-Noel (max length=20)","errorCode":"STRING_TOO_LONG","fields":["LastName"]}]"#, "LastName"),
            (br#"[{"message":"Email: invalid email address: ada@@example","errorCode":"INVALID_EMAIL_ADDRESS","fields":["Email"]}]"#, "Email"),
            (br#"[{"message":"Lead Source: bad value for restricted picklist field: Lovelace Fan Club","errorCode":"INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST","fields":["LeadSource"]}]"#, "LeadSource"),
            (br#"[{"message":"Phone must look like +1 555 0100","errorCode":"FIELD_CUSTOM_VALIDATION_EXCEPTION","fields":["Phone"]}]"#, "Phone"),
        ];
        for (body, field) in cases {
            let v = parse_upsert_answer(400, body, now());
            assert_eq!(v.class, Some(PermanentData), "{}", v.reason);
            assert_eq!(v.field.as_deref(), Some(*field));
            for secret in ["Lovelace", "ada@", "555 0100"] {
                assert!(!v.reason.contains(secret), "{}", v.reason);
            }
        }
        let v = parse_upsert_answer(400, cases[1].0, now());
        assert_eq!(
            v.reason,
            "Salesforce rejected the lead on LastName: the value is too long for the field (HTTP 400 STRING_TOO_LONG)"
        );
        let v = parse_upsert_answer(400, cases[0].0, now());
        assert_eq!(
            v.reason,
            "Salesforce rejected the lead on LastName (HTTP 400 REQUIRED_FIELD_MISSING): Required fields are missing: [LastName]"
        );
    }

    #[test]
    fn setup_errors_are_configuration() {
        // Shape: 404 [{"errorCode":"NOT_FOUND","message":"The requested resource does not exist"}] (wrong external id
        // field), 400 INVALID_FIELD "No such column", 403 INSUFFICIENT_ACCESS, 404 INVALID_TYPE.
        let cases: &[(u16, &[u8])] = &[
            (404, br#"[{"errorCode":"NOT_FOUND","message":"The requested resource does not exist"}]"#),
            (404, br#"[{"errorCode":"INVALID_TYPE","message":"The requested resource does not exist"}]"#),
            (403, br#"[{"errorCode":"INSUFFICIENT_ACCESS","message":"insufficient access rights on object id"}]"#),
            (400, br#"[{"message":"No such column 'Score__c' on sobject of type Lead","errorCode":"INVALID_FIELD"}]"#),
        ];
        for (status, body) in cases {
            let v = parse_upsert_answer(*status, body, now());
            assert_eq!(v.class, Some(PermanentConfig), "{}", v.reason);
            assert!(v.alert);
        }
        let v = parse_upsert_answer(cases[3].0, cases[3].1, now());
        assert_eq!(v.field.as_deref(), Some("Score__c"));

        // INVALID_FIELD about the lead's own data stays a data error.
        let body = br#"[{"message":"Foreign key external ID: 99123 not found for field Account_Ext__c in entity Account","errorCode":"INVALID_FIELD","fields":["Account_Ext__c"]}]"#;
        let v = parse_upsert_answer(400, body, now());
        assert_eq!(v.class, Some(PermanentData));
        assert!(!v.reason.contains("99123"), "{}", v.reason);
    }

    #[test]
    fn server_trouble_and_unknown_codes_follow_the_status() {
        // Shape: 503 [{"errorCode":"SERVER_UNAVAILABLE","message":"…"}]; a row lock; an unknown code; HTML.
        let v =
            parse_upsert_answer(503, br#"[{"errorCode":"SERVER_UNAVAILABLE","message":"Server unavailable"}]"#, now());
        assert_eq!(v.class, Some(Transient));
        let v = parse_upsert_answer(
            400,
            br#"[{"errorCode":"UNABLE_TO_LOCK_ROW","message":"unable to obtain exclusive access to this record"}]"#,
            now(),
        );
        assert_eq!(v.class, Some(Transient));
        let v = parse_upsert_answer(400, br#"[{"errorCode":"SOMETHING_NEW","message":"new"}]"#, now());
        assert_eq!(v.class, Some(PermanentData));
        let v = parse_upsert_answer(502, b"<html>bad gateway</html>", now());
        assert_eq!(v.class, Some(Transient));
    }

    #[test]
    fn limit_info_header() {
        // Shape: "Sforce-Limit-Info: api-usage=10018/100000", optionally with per-app usage after a comma.
        assert_eq!(parse_limit_info("api-usage=10018/100000"), Some((10018, 100000)));
        assert_eq!(
            parse_limit_info("api-usage=25/5000, per-app-api-usage=17/250(appName=sample-connected-app)"),
            Some((25, 5000))
        );
        assert_eq!(parse_limit_info("per-app-api-usage=17/250(appName=x)"), None);
        assert_eq!(parse_limit_info("api-usage=abc/100"), None);
        assert_eq!(parse_limit_info(""), None);
    }

    #[test]
    fn refresh_form_fields() {
        // Shape: "OAuth 2.0 Refresh Token Flow": grant_type, client_id, client_secret, refresh_token.
        let form = refresh_form("cid", "secret", "rt");
        assert_eq!(
            form,
            vec![
                ("grant_type", "refresh_token".to_string()),
                ("client_id", "cid".to_string()),
                ("client_secret", "secret".to_string()),
                ("refresh_token", "rt".to_string()),
            ]
        );
        assert_eq!(token_url("https://login.salesforce.com/"), "https://login.salesforce.com/services/oauth2/token");
    }

    #[test]
    fn token_answers() {
        // Shape: refresh answer {"access_token","signature","scope","instance_url","id","token_type":"Bearer","issued_at"}.
        let body = br#"{"access_token":"00Dxx0000001gPL!AR8AQJXg5oj8jXSgxJfA0lBog","signature":"SSSbLO/gBhmmyNUvN18ODBDFYHzakxOMgqYtu+hDPsc=","scope":"web openid api id","instance_url":"https://acme.my.salesforce.com/","id":"https://login.salesforce.com/id/00Dxx0000001gPLEAY/005xx000001Sv6AAAS","token_type":"Bearer","issued_at":"1278448384422"}"#;
        let token = parse_token_answer(200, body).unwrap();
        assert_eq!(token.instance_url, "https://acme.my.salesforce.com");
        assert_eq!(token.refresh_token, None);
        assert!(!format!("{token:?}").contains("AR8AQ"));

        // Shape: the same answer with refresh-token rotation: a new refresh_token to store.
        let body = br#"{"access_token":"a","refresh_token":"5Aep861new","instance_url":"https://acme.my.salesforce.com","id":"i","token_type":"Bearer","issued_at":"1","signature":"s"}"#;
        let token = parse_token_answer(200, body).unwrap();
        assert_eq!(token.refresh_token.as_deref(), Some("5Aep861new"));
        assert!(!format!("{token:?}").contains("5Aep861new"));

        assert_eq!(parse_token_answer(200, br#"{"token_type":"Bearer"}"#).unwrap_err().class, Transient);
    }

    #[test]
    fn token_errors_in_words_a_person_understands() {
        // Shape: token error {"error","error_description"}.
        let e =
            parse_token_answer(400, br#"{"error":"invalid_grant","error_description":"expired access/refresh token"}"#)
                .unwrap_err();
        assert_eq!(e.class, PermanentConfig);
        assert!(e.reason.contains("Reconnect Salesforce"), "{}", e.reason);
        let v = e.verdict();
        assert!(v.credential_problem && v.alert);

        let e = parse_token_answer(
            400,
            br#"{"error":"invalid_client_id","error_description":"client identifier invalid"}"#,
        )
        .unwrap_err();
        assert!(e.reason.contains("consumer key"));
        let e =
            parse_token_answer(400, br#"{"error":"invalid_client","error_description":"invalid client credentials"}"#)
                .unwrap_err();
        assert!(e.reason.contains("consumer secret"));
        let e = parse_token_answer(400, br#"{"error":"invalid_grant","error_description":"authentication failure"}"#)
            .unwrap_err();
        assert_eq!(e.class, PermanentConfig);
        let e = parse_token_answer(
            400,
            br#"{"error":"invalid_grant","error_description":"token request is already being processed"}"#,
        )
        .unwrap_err();
        assert_eq!(e.class, Transient);
        assert!(!e.verdict().credential_problem);
        assert_eq!(parse_token_answer(503, b"<html>maintenance</html>").unwrap_err().class, Transient);
    }

    #[test]
    fn describe_names_what_is_missing() {
        let ok = br#"{"name":"Lead","fields":[{"name":"Id","externalId":false},{"name":"Leadline_Id__c","externalId":true}]}"#;
        assert!(describe_verdict("Lead", "Leadline_Id__c", ok).unwrap().contains("Leadline_Id__c"));
        let e = describe_verdict("Lead", "Other__c", ok).unwrap_err();
        assert!(e.contains("no field Other__c"), "{e}");
        let e = describe_verdict("Lead", "Id", ok).unwrap_err();
        assert!(e.contains("not marked \"External ID\""), "{e}");
        assert!(describe_verdict("Lead", "X", b"<html>").is_err());
    }
}
