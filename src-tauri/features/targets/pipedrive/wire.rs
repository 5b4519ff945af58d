//! Pipedrive: no upsert by external id, so a lead is delivered as search → create person (when none) → create lead.
//! The search and the create are separate requests and can race another writer; the worker keeps a local
//! external-id → person-id link so a repeat never depends on the search alone.
//!
//! Documented shapes this module follows (developers.pipedrive.com, API reference: "Persons: Search persons" (v2),
//! "Persons: Add a new person" (v2), "Leads: Add a lead" (v1), "Rate limiting", and the v1/v2 response format):
//! - search: `GET /api/v2/persons/search?term=<value>&fields=custom_fields&exact_match=true` (v1's
//!   `/v1/persons/search` is deprecated in favour of it; same item shape). Exact matching is case-insensitive.
//!   It searches every custom field at once (there is no per-field parameter), so a hit is confirmed by finding
//!   the value among the item's `custom_fields`. Answer `{"success":true,"data":{"items":[{"result_score",
//!   "item":{"id","type":"person","name","emails":[…],"phones":[…],"custom_fields":[…],…}}]},
//!   "additional_data":{"next_cursor"}}`;
//! - create person: `POST /api/v2/persons` `{"name","emails":[{"value","primary","label"}],"phones":[…],
//!   "custom_fields":{"<key>":…}}` → `{"success":true,"data":{"id",…}}`;
//! - create lead: `POST /v1/leads` `{"title","person_id"|"organization_id",…}` → `{"success":true,"data":
//!   {"id":"<uuid>",…}}`;
//! - errors `{"success":false,"error","error_info","data":null,"additional_data":null}` (v2 adds `code`);
//!   429 with `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset` (seconds until the window
//!   resets) and `x-daily-requests-left`.
//!
//! The API token travels in the `x-api-token` header ([`AUTH_HEADER`]), never in the URL: URLs are logged.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Map, Value};

use super::super::vendor::{
    encode_component, header_u64, json_id, mask, retry_after, str_at, HeaderLookup, VendorVerdict,
};
use crate::model::{default_class_for_status, ErrorClass, Failure, Verdict};

/// The header that carries the API token (v1 and v2 accept it).
pub const AUTH_HEADER: &str = "x-api-token";

/// Wait when a 429 gives neither `Retry-After` nor `x-ratelimit-reset`: Pipedrive's burst windows are 2 seconds.
pub const DEFAULT_RATE_HOLD: Duration = Duration::seconds(2);

/// Wait once the company's daily request budget is spent. Pipedrive's headers say how many requests are left
/// today, not when the day ends; an hour keeps probes rare while noticing a raised budget the same day.
pub const DAILY_BUDGET_HOLD: Duration = Duration::hours(1);

/// What a search for one external id found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchResult {
    /// Exactly one person holds the value.
    Found(u64),
    NotFound,
    /// Several persons hold it: a person must merge them; creating another would make it worse.
    Many(usize),
}

/// The search URL for persons holding `value` in a custom field. `base` is the company domain root
/// (`https://acme.pipedrive.com`). Exact matching on Pipedrive takes a term of one character or more.
pub fn search_person_url(base: &str, value: &str) -> Result<String, VendorVerdict> {
    if value.trim().is_empty() {
        return Err(VendorVerdict::failed(
            ErrorClass::PermanentData,
            "the lead's external id is empty: it cannot be searched in Pipedrive",
        ));
    }
    Ok(format!(
        "{}/api/v2/persons/search?term={}&fields=custom_fields&exact_match=true",
        base.trim_end_matches('/'),
        encode_component(value)
    ))
}

/// Reads a search answer. A non-2xx answer or `success:false` is returned as the verdict of the attempt.
/// `value` is the searched external id: only items listing it among their `custom_fields` count (items that
/// list no custom fields at all are counted, since the search matched them on one).
pub fn parse_search<H: HeaderLookup + ?Sized>(
    status: u16,
    body: &[u8],
    headers: &H,
    value: &str,
    now: DateTime<Utc>,
) -> Result<SearchResult, VendorVerdict> {
    let verdict = parse_answer(status, body, headers, now);
    if !verdict.is_delivered() {
        return Err(verdict);
    }
    let json: Value = serde_json::from_slice(body).map_err(|_| unreadable(status))?;
    let Some(items) = json.pointer("/data/items").and_then(Value::as_array) else {
        // `data: null` or no items: nothing found.
        return match json.get("data") {
            Some(Value::Null) | Some(Value::Object(_)) | None => Ok(SearchResult::NotFound),
            Some(_) => Err(unreadable(status)),
        };
    };
    let mut ids: Vec<u64> = Vec::new();
    for entry in items {
        let item = entry.get("item").unwrap_or(entry);
        if item.get("type").and_then(Value::as_str).is_some_and(|t| t != "person") {
            continue;
        }
        let holds = match item.get("custom_fields").and_then(Value::as_array) {
            Some(values) => values.iter().filter_map(json_id).any(|v| v.trim().eq_ignore_ascii_case(value.trim())),
            None => true,
        };
        let id = item.get("id").and_then(Value::as_u64);
        if let (true, Some(id)) = (holds, id) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(match ids.as_slice() {
        [] => SearchResult::NotFound,
        [one] => SearchResult::Found(*one),
        many => SearchResult::Many(many.len()),
    })
}

/// The body of `POST /api/v2/persons`. The first e-mail and phone are primary. `custom_fields` maps Pipedrive's
/// field keys (40-character hashes) to values and must include the external id field the search looks in.
pub fn create_person_body(
    name: &str,
    emails: &[String],
    phones: &[String],
    custom_fields: &Map<String, Value>,
) -> Result<Value, VendorVerdict> {
    if name.trim().is_empty() {
        return Err(VendorVerdict::failed(ErrorClass::PermanentData, "the lead has no name, which Pipedrive requires")
            .with_field(Some("name".into())));
    }
    let entries = |values: &[String]| -> Vec<Value> {
        values
            .iter()
            .filter(|v| !v.trim().is_empty())
            .enumerate()
            .map(|(i, v)| json!({ "value": v, "primary": i == 0, "label": "work" }))
            .collect()
    };
    let mut body = Map::new();
    body.insert("name".into(), Value::String(name.trim().to_string()));
    let (emails, phones) = (entries(emails), entries(phones));
    if !emails.is_empty() {
        body.insert("emails".into(), Value::Array(emails));
    }
    if !phones.is_empty() {
        body.insert("phones".into(), Value::Array(phones));
    }
    if !custom_fields.is_empty() {
        body.insert("custom_fields".into(), Value::Object(custom_fields.clone()));
    }
    Ok(Value::Object(body))
}

/// The body of `POST /v1/leads`: a title and the person. `extra` adds documented optional fields (`owner_id`,
/// `label_ids`, `value`, `expected_close_date`, `origin_id`, custom field keys…); it cannot replace the title or
/// the person.
pub fn create_lead_body(title: &str, person_id: u64, extra: &Map<String, Value>) -> Result<Value, VendorVerdict> {
    if title.trim().is_empty() {
        return Err(VendorVerdict::failed(
            ErrorClass::PermanentData,
            "the lead title is empty; Pipedrive requires one",
        )
        .with_field(Some("title".into())));
    }
    let mut body = extra.clone();
    body.insert("title".into(), Value::String(title.trim().to_string()));
    body.insert("person_id".into(), Value::from(person_id));
    Ok(Value::Object(body))
}

/// Reads any Pipedrive answer: `{success:true, data}` is delivered (with `data.id` as the CRM id), anything else a
/// failure with its class.
pub fn parse_answer<H: HeaderLookup + ?Sized>(
    status: u16,
    body: &[u8],
    headers: &H,
    now: DateTime<Utc>,
) -> VendorVerdict {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let j = json.as_ref();
    let success = j.and_then(|j| j.get("success")).and_then(Value::as_bool);
    let message = j.and_then(|j| str_at(j, "/error")).map(mask);
    let code = j.and_then(|j| str_at(j, "/code")).map(str::to_string);
    let tag = match &code {
        Some(c) => format!("HTTP {status} {c}"),
        None => format!("HTTP {status}"),
    };
    let said = |what: String| match &message {
        Some(m) => format!("{what} ({tag}): {m}"),
        None => format!("{what} ({tag})"),
    };

    if (200..300).contains(&status) {
        return match success {
            Some(true) => VendorVerdict::delivered(
                j.and_then(|j| j.pointer("/data/id")).and_then(json_id),
                "accepted by Pipedrive",
            ),
            // A 2xx that says it failed: the request was understood and refused.
            Some(false) => VendorVerdict::failed(ErrorClass::PermanentData, said("Pipedrive refused the lead".into()))
                .with_field(j.and_then(blamed_field)),
            None => unreadable(status),
        };
    }
    match status {
        429 => rate_limited(headers, now, said("Pipedrive's rate limit was hit".into())),
        401 => VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            said("Pipedrive refused the API token: it is wrong, expired or revoked; update it in Settings".into()),
        )
        .credentials(),
        400 | 422 => VendorVerdict::failed(ErrorClass::PermanentData, said("Pipedrive rejected the lead".into()))
            .with_field(j.and_then(blamed_field)),
        402 => VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            said("Pipedrive asks for payment: the company's subscription has lapsed".into()),
        )
        .alerting(),
        403 => VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            said("Pipedrive forbids this for the token's user: check its permissions".into()),
        )
        .alerting(),
        404 | 410 => VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            said("Pipedrive has no such endpoint or record: check the company domain and the field keys".into()),
        )
        .alerting(),
        _ => {
            let class = default_class_for_status(status);
            let verdict = VendorVerdict::failed(class, said("Pipedrive answered".into()));
            match class {
                ErrorClass::PermanentConfig => verdict.alerting(),
                ErrorClass::Transient => verdict.hold(retry_after(headers, now)),
                _ => verdict,
            }
        }
    }
}

fn rate_limited<H: HeaderLookup + ?Sized>(headers: &H, now: DateTime<Utc>, reason: String) -> VendorVerdict {
    if header_u64(headers, "x-daily-requests-left") == Some(0) {
        return VendorVerdict::failed(
            ErrorClass::RateLimited,
            format!("{reason}; the company's daily request budget is used up"),
        )
        .hold(Some(now + DAILY_BUDGET_HOLD))
        .alerting();
    }
    let until = retry_after(headers, now)
        .or_else(|| {
            header_u64(headers, "x-ratelimit-reset")
                .filter(|s| *s <= 3_600)
                .map(|s| now + Duration::seconds(s.max(1) as i64))
        })
        .unwrap_or(now + DEFAULT_RATE_HOLD);
    VendorVerdict::failed(ErrorClass::RateLimited, reason).hold(Some(until))
}

/// The field a validation error names: v1 says "Validation failed: <field>: <what>" or "<field> is required"
/// in `error`; some answers carry `error_info` or `field`.
fn blamed_field(j: &Value) -> Option<String> {
    if let Some(f) = str_at(j, "/field").or_else(|| str_at(j, "/data/field")) {
        return Some(f.to_string());
    }
    let error = str_at(j, "/error")?;
    let after = error.split_once("Validation failed:").map(|(_, rest)| rest.trim_start()).unwrap_or(error);
    let token: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let named = after[token.len()..].starts_with(':') || after[token.len()..].starts_with(" is required");
    (named && !token.is_empty()).then_some(token)
}

fn unreadable(status: u16) -> VendorVerdict {
    VendorVerdict::failed(
        ErrorClass::Transient,
        format!("Pipedrive's answer (HTTP {status}) is not the documented JSON: the request may have reached a proxy"),
    )
}

/// Path of person creation (v2), below the base.
pub const PERSONS_PATH: &str = "/api/v2/persons";
/// Path of lead creation and listing (v1; leads have no v2 endpoint).
pub const LEADS_PATH: &str = "/v1/leads";

/// The base every path is appended to: `url` as configured, without a trailing slash or a version suffix
/// (`https://api.pipedrive.com`, `https://acme.pipedrive.com`; `…/v1` and `…/api/v1` are accepted and cut).
pub fn base_url(url: &str) -> String {
    let mut base = url.trim_end_matches('/');
    for suffix in ["/api/v1", "/api/v2", "/v1"] {
        if let Some(cut) = base.strip_suffix(suffix) {
            base = cut;
            break;
        }
    }
    base.to_string()
}

/// The lead look-up: `GET /v1/leads?person_id=<id>` ("Get all leads", filtered by person; archived ones too).
pub fn leads_of_person_url(base: &str, person_id: u64) -> String {
    format!("{base}{LEADS_PATH}?person_id={person_id}&archived_status=all&limit=500")
}

/// What the mapped record becomes: the person body (without its id) and the lead (without `person_id`).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `POST /api/v2/persons` body, the external id in `custom_fields.<person_field_key>`.
    pub person: Value,
    pub title: String,
    /// The lead's other fields; `origin_id` is the external id, which the look-up recognises the lead by.
    pub lead_extra: Map<String, Value>,
}

pub use super::mapping::validate_pipedrive as validate_mapping;

/// Splits a mapped record (`{"person": {…}, "lead": {…}}`) into the two bodies. A value Pipedrive cannot take is
/// a data error naming the field.
pub fn plan(record: &Map<String, Value>, external_id: &str, person_field_key: &str) -> Result<Plan, VendorVerdict> {
    let empty = Map::new();
    let person = record.get("person").and_then(Value::as_object).unwrap_or(&empty);
    let lead = record.get("lead").and_then(Value::as_object).unwrap_or(&empty);
    let text = |v: Option<&Value>| -> String {
        match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        }
    };
    let list = |key: &str| -> Result<Vec<String>, VendorVerdict> {
        match person.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(not_text(&format!("/person/{key}"))),
                })
                .collect(),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(_) => Err(not_text(&format!("/person/{key}"))),
        }
    };
    let mut custom = person.get("custom_fields").and_then(Value::as_object).cloned().unwrap_or_default();
    custom.insert(person_field_key.to_string(), Value::String(external_id.to_string()));
    let person_body = create_person_body(&text(person.get("name")), &list("email")?, &list("phone")?, &custom)
        .map_err(|v| v.with_field(Some("/person/name".into())))?;
    let title = text(lead.get("title"));
    if title.trim().is_empty() {
        return Err(VendorVerdict::failed(
            ErrorClass::PermanentData,
            "the lead title is empty; Pipedrive requires one",
        )
        .with_field(Some("/lead/title".into())));
    }
    let mut lead_extra = lead.clone();
    lead_extra.remove("title");
    lead_extra.insert("origin_id".into(), Value::String(external_id.to_string()));
    Ok(Plan { person: person_body, title, lead_extra })
}

fn not_text(field: &str) -> VendorVerdict {
    VendorVerdict::failed(ErrorClass::PermanentData, format!("{field} must be text or a list of texts"))
        .with_field(Some(field.to_string()))
}

/// Reads the lead look-up's answer (`{"success":true,"data":[{"id","person_id","origin_id",…}],
/// "additional_data":{"pagination":…}}`): the lead whose `origin_id` is the external id, if any.
pub fn parse_leads_lookup<H: HeaderLookup + ?Sized>(
    status: u16,
    body: &[u8],
    headers: &H,
    external_id: &str,
    now: DateTime<Utc>,
) -> Result<Option<String>, VendorVerdict> {
    let verdict = parse_answer(status, body, headers, now);
    if !verdict.is_delivered() {
        return Err(verdict);
    }
    let json: Value = serde_json::from_slice(body).map_err(|_| unreadable(status))?;
    let items = match json.get("data") {
        Some(Value::Array(items)) => items.as_slice(),
        Some(Value::Null) | None => &[],
        Some(_) => return Err(unreadable(status)),
    };
    Ok(items
        .iter()
        .find(|l| l.get("origin_id").and_then(Value::as_str) == Some(external_id))
        .and_then(|l| l.get("id"))
        .and_then(json_id))
}

/// Whether a `GET /v1/personFields` answer (`{"success":true,"data":[{"id","key","name","field_type",…}]}`)
/// lists a field with `key`; `None` when the answer is not that shape.
pub fn person_fields_hold(body: &[u8], key: &str) -> Option<bool> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let fields = json.get("data")?.as_array()?;
    Some(fields.iter().any(|f| f.get("key").and_then(Value::as_str) == Some(key)))
}

/// A failed verdict as the worker's failure.
pub fn failure_of(v: &VendorVerdict) -> Failure {
    match v.verdict() {
        Verdict::Failed(f) => f,
        Verdict::Delivered => Failure { class: ErrorClass::Transient, reason: v.reason.clone(), field: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use ErrorClass::*;

    const NO_HEADERS: [(&str, &str); 0] = [];
    const EXT: &str = "meta:9876543210";

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 14, 15, 0, 0).unwrap()
    }

    #[test]
    fn search_url_follows_the_documented_v2_search() {
        // Shape: "Search persons" (v2), GET /api/v2/persons/search?term&fields=custom_fields&exact_match=true.
        assert_eq!(
            search_person_url("https://acme.pipedrive.com/", "meta:1/2 3&x").unwrap(),
            "https://acme.pipedrive.com/api/v2/persons/search?term=meta%3A1%2F2%203%26x&fields=custom_fields&exact_match=true"
        );
        assert_eq!(search_person_url("https://acme.pipedrive.com", " ").unwrap_err().class, Some(PermanentData));
    }

    #[test]
    fn search_found_not_found_and_many() {
        // Shape: v2 search answer {"success":true,"data":{"items":[{"result_score","item":{"id","type":"person",
        // "name","phones","emails","visible_to","owner","organization","custom_fields","notes"}}]},
        // "additional_data":{"next_cursor":null}}.
        let one = br#"{"success":true,"data":{"items":[{"result_score":1.0,"item":{"id":42,"type":"person","name":"Ada Lovelace","phones":[],"emails":["ada@example.com"],"visible_to":3,"owner":{"id":1},"organization":null,"custom_fields":["meta:9876543210"],"notes":[]}}]},"additional_data":{"next_cursor":null}}"#;
        assert_eq!(parse_search(200, one, &NO_HEADERS[..], EXT, now()), Ok(SearchResult::Found(42)));

        let none = br#"{"success":true,"data":{"items":[]},"additional_data":{"next_cursor":null}}"#;
        assert_eq!(parse_search(200, none, &NO_HEADERS[..], EXT, now()), Ok(SearchResult::NotFound));

        let two = br#"{"success":true,"data":{"items":[
            {"result_score":1.0,"item":{"id":42,"type":"person","name":"A","custom_fields":["META:9876543210"]}},
            {"result_score":1.0,"item":{"id":43,"type":"person","name":"B","custom_fields":["meta:9876543210","x"]}}]},
            "additional_data":{"next_cursor":null}}"#;
        assert_eq!(parse_search(200, two, &NO_HEADERS[..], EXT, now()), Ok(SearchResult::Many(2)));
    }

    #[test]
    fn a_hit_on_another_custom_field_does_not_count() {
        // Shape: v2 search item whose custom_fields hold other values: the term matched elsewhere.
        let body = br#"{"success":true,"data":{"items":[{"result_score":0.2,"item":{"id":7,"type":"person","name":"X","custom_fields":["meta:98765432101"]}}]},"additional_data":{"next_cursor":null}}"#;
        assert_eq!(parse_search(200, body, &NO_HEADERS[..], EXT, now()), Ok(SearchResult::NotFound));
    }

    #[test]
    fn a_failed_search_is_the_attempts_verdict() {
        // Shape: 401 {"success":false,"error":"unauthorized access","errorCode":401,"error_info":"…"}.
        let body = br#"{"success":false,"error":"unauthorized access","errorCode":401,"error_info":"Please check developers.pipedrive.com for more information about Pipedrive API."}"#;
        let err = parse_search(401, body, &NO_HEADERS[..], EXT, now()).unwrap_err();
        assert!(err.credential_problem);
        assert_eq!(
            parse_search(200, b"<html></html>", &NO_HEADERS[..], EXT, now()).unwrap_err().class,
            Some(Transient)
        );
    }

    #[test]
    fn person_body_follows_the_documented_v2_create() {
        // Shape: "Add a new person" (v2) {"name","emails":[{"value","primary","label"}],"phones":[…],"custom_fields":{…}}.
        let custom: Map<String, Value> = json!({"abc123": EXT}).as_object().cloned().unwrap();
        let body = create_person_body(
            " Ada Lovelace ",
            &["ada@example.com".into(), "".into()],
            &["+44 20 7946 0000".into()],
            &custom,
        )
        .unwrap();
        assert_eq!(
            body,
            json!({
                "name": "Ada Lovelace",
                "emails": [{"value": "ada@example.com", "primary": true, "label": "work"}],
                "phones": [{"value": "+44 20 7946 0000", "primary": true, "label": "work"}],
                "custom_fields": {"abc123": EXT}
            })
        );
        assert_eq!(create_person_body("Ada", &[], &[], &Map::new()).unwrap(), json!({"name": "Ada"}));
        let err = create_person_body("  ", &[], &[], &Map::new()).unwrap_err();
        assert_eq!((err.class, err.field.as_deref()), (Some(PermanentData), Some("name")));
    }

    #[test]
    fn lead_body_has_a_title_and_the_person() {
        // Shape: "Add a lead" (v1) {"title","person_id",…}: title and a person or organization are required.
        let extra: Map<String, Value> =
            json!({"title": "overridden?", "person_id": 1, "origin_id": EXT}).as_object().cloned().unwrap();
        let body = create_lead_body("Web form: spring offer", 42, &extra).unwrap();
        assert_eq!(body, json!({"title": "Web form: spring offer", "person_id": 42, "origin_id": EXT}));
        assert_eq!(create_lead_body("", 42, &Map::new()).unwrap_err().field.as_deref(), Some("title"));
    }

    #[test]
    fn created_records_carry_their_ids() {
        // Shape: add person (v2) {"success":true,"data":{"id":42,"name",…},"additional_data":null}.
        let v = parse_answer(
            201,
            br#"{"success":true,"data":{"id":42,"name":"Ada Lovelace"},"additional_data":null}"#,
            &NO_HEADERS[..],
            now(),
        );
        assert!(v.is_delivered());
        assert_eq!(v.crm_id.as_deref(), Some("42"));
        assert!(!v.reason.contains("Ada"));
        // Shape: add lead (v1) {"success":true,"data":{"id":"<uuid>","title","person_id",…}}.
        let v = parse_answer(
            201,
            br#"{"success":true,"data":{"id":"adf21080-0e10-11eb-879b-05d71fb426ec","title":"t","person_id":42}}"#,
            &NO_HEADERS[..],
            now(),
        );
        assert_eq!(v.crm_id.as_deref(), Some("adf21080-0e10-11eb-879b-05d71fb426ec"));
    }

    #[test]
    fn bad_requests_are_data_errors_naming_the_field() {
        // Shape: 400 {"success":false,"error":"Validation failed: title: Required","error_info":"…","data":null,"additional_data":null}.
        let body = br#"{"success":false,"error":"Validation failed: title: Required","error_info":"Please check developers.pipedrive.com for more information about Pipedrive API.","data":null,"additional_data":null}"#;
        let v = parse_answer(400, body, &NO_HEADERS[..], now());
        assert_eq!(v.class, Some(PermanentData));
        assert_eq!(v.field.as_deref(), Some("title"));
        assert_eq!(v.reason, "Pipedrive rejected the lead (HTTP 400): Validation failed: title: Required");

        // Shape: v2 400 {"success":false,"error":"…","code":"ERR_SCHEMA_VALIDATION_FAILED","error_info":"…"}; the
        // message quotes a value, which is masked.
        let body = br#"{"success":false,"error":"emails[0].value 'ada@example' is not a valid email","code":"ERR_SCHEMA_VALIDATION_FAILED","error_info":"Please check developers.pipedrive.com"}"#;
        let v = parse_answer(400, body, &NO_HEADERS[..], now());
        assert_eq!(v.class, Some(PermanentData));
        assert!(v.reason.contains("ERR_SCHEMA_VALIDATION_FAILED") && !v.reason.contains("ada@"), "{}", v.reason);

        // Shape: a 200 carrying {"success":false}.
        let v = parse_answer(200, br#"{"success":false,"error":"person_id is required"}"#, &NO_HEADERS[..], now());
        assert_eq!((v.class, v.field.as_deref()), (Some(PermanentData), Some("person_id")));
    }

    #[test]
    fn rate_limits_wait_as_the_headers_say() {
        // Shape: 429 {"success":false,"error":"Request over limit","errorCode":429} with x-ratelimit-* headers.
        let body = br#"{"success":false,"error":"Request over limit","errorCode":429,"error_info":"Please check developers.pipedrive.com"}"#;
        let headers = [
            ("x-ratelimit-limit", "80"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "2"),
            ("x-daily-requests-left", "9000"),
        ];
        let v = parse_answer(429, body, &headers[..], now());
        assert_eq!(v.class, Some(RateLimited));
        assert_eq!(v.hold_until, Some(now() + Duration::seconds(2)));
        assert!(!v.alert);

        let v = parse_answer(429, body, &[("Retry-After", "5"), ("x-ratelimit-reset", "2")][..], now());
        assert_eq!(v.hold_until, Some(now() + Duration::seconds(5)));
        let v = parse_answer(429, body, &NO_HEADERS[..], now());
        assert_eq!(v.hold_until, Some(now() + DEFAULT_RATE_HOLD));

        let v = parse_answer(429, body, &[("x-daily-requests-left", "0"), ("x-ratelimit-reset", "2")][..], now());
        assert_eq!(v.hold_until, Some(now() + DAILY_BUDGET_HOLD));
        assert!(v.alert);
    }

    #[test]
    fn setup_and_server_errors() {
        // Shape: 401/402/403/404/410 {"success":false,"error","error_info"}; 5xx with or without JSON.
        let body =
            br#"{"success":false,"error":"unauthorized access","error_info":"Please check developers.pipedrive.com"}"#;
        let v = parse_answer(401, body, &NO_HEADERS[..], now());
        assert_eq!(v.class, Some(PermanentConfig));
        assert!(v.credential_problem && v.alert);
        for status in [402, 403, 404, 410] {
            let v = parse_answer(status, br#"{"success":false,"error":"Not found"}"#, &NO_HEADERS[..], now());
            assert_eq!(v.class, Some(PermanentConfig), "{status}");
            assert!(!v.credential_problem);
        }
        let v = parse_answer(503, b"<html>maintenance</html>", &[("Retry-After", "60")][..], now());
        assert_eq!(v.class, Some(Transient));
        assert_eq!(v.hold_until, Some(now() + Duration::seconds(60)));
        assert_eq!(
            parse_answer(500, br#"{"success":false,"error":"Internal"}"#, &NO_HEADERS[..], now()).class,
            Some(Transient)
        );
    }

    fn rule(to: &str) -> crate::features::targets::mapping::FieldRule {
        crate::features::targets::mapping::FieldRule {
            to: to.into(),
            from: Some("x".into()),
            constant: None,
            transform: vec![],
            default: None,
            required: false,
        }
    }

    #[test]
    fn base_urls_in_both_documented_forms() {
        // "https://api.pipedrive.com/v1" and "https://{COMPANYDOMAIN}.pipedrive.com/v1" (tutorial "Adding a lead").
        assert_eq!(base_url("https://api.pipedrive.com/"), "https://api.pipedrive.com");
        assert_eq!(base_url("https://api.pipedrive.com/v1"), "https://api.pipedrive.com");
        assert_eq!(base_url("https://acme.pipedrive.com/api/v1/"), "https://acme.pipedrive.com");
        assert_eq!(
            leads_of_person_url("https://acme.pipedrive.com", 42),
            "https://acme.pipedrive.com/v1/leads?person_id=42&archived_status=all&limit=500"
        );
    }

    #[test]
    fn the_mapping_splits_into_person_and_lead() {
        let key = "abc";
        let ok = [
            "/person/name",
            "/person/email",
            "/person/phone",
            "/person/custom_fields/def",
            "/lead/title",
            "/lead/value/amount",
        ];
        assert_eq!(validate_mapping(&ok.map(rule), key), Ok(()));
        for (bad, at) in [
            ("/deal/title", Some(5)),
            ("/person/custom_fields/abc", Some(5)),
            ("/lead/origin_id", Some(5)),
            ("/lead/person_id", Some(5)),
            ("/person/notes", Some(5)),
            ("name", Some(5)),
        ] {
            let mut rules: Vec<_> = ok[..5].iter().map(|t| rule(t)).collect();
            rules.push(rule(bad));
            assert_eq!(validate_mapping(&rules, key).unwrap_err().0, at, "{bad}");
        }
        let no_title = validate_mapping(&[rule("/person/name")], key).unwrap_err();
        assert!(no_title.0.is_none() && no_title.1.contains("/lead/title"));
        let no_name = validate_mapping(&[rule("/lead/title")], key).unwrap_err();
        assert!(no_name.1.contains("/person/name"));
    }

    #[test]
    fn a_record_becomes_the_two_bodies() {
        let record = json!({
            "person": {"name": "Ada Lovelace", "email": "ada@example.com", "phone": ["+4915112345678"],
                       "custom_fields": {"def": "morning"}},
            "lead": {"title": "Meta lead", "value": {"amount": 100, "currency": "EUR"}}
        });
        let p = plan(record.as_object().unwrap(), EXT, "abc").unwrap();
        assert_eq!(
            p.person,
            json!({"name": "Ada Lovelace",
                   "emails": [{"value": "ada@example.com", "primary": true, "label": "work"}],
                   "phones": [{"value": "+4915112345678", "primary": true, "label": "work"}],
                   "custom_fields": {"def": "morning", "abc": EXT}})
        );
        assert_eq!(p.title, "Meta lead");
        assert_eq!(
            create_lead_body(&p.title, 42, &p.lead_extra).unwrap(),
            json!({"title": "Meta lead", "person_id": 42, "origin_id": EXT,
                   "value": {"amount": 100, "currency": "EUR"}})
        );

        let no_title = json!({"person": {"name": "Ada"}, "lead": {}});
        let v = plan(no_title.as_object().unwrap(), EXT, "abc").unwrap_err();
        assert_eq!((v.class, v.field.as_deref()), (Some(PermanentData), Some("/lead/title")));
        let no_name = json!({"person": {"email": "a@b.c"}, "lead": {"title": "t"}});
        assert_eq!(plan(no_name.as_object().unwrap(), EXT, "abc").unwrap_err().field.as_deref(), Some("/person/name"));
        let bad_email = json!({"person": {"name": "A", "email": {"x": 1}}, "lead": {"title": "t"}});
        let v = plan(bad_email.as_object().unwrap(), EXT, "abc").unwrap_err();
        assert_eq!(v.field.as_deref(), Some("/person/email"));
    }

    #[test]
    fn the_lead_look_up_finds_the_lead_by_its_origin() {
        // Shape: "Get all leads" {"success":true,"data":[{"id","title","person_id","origin_id",…}],
        // "additional_data":{"pagination":{…}}}.
        let body = br#"{"success":true,"data":[
            {"id":"aaa","title":"by hand","person_id":42,"origin_id":null},
            {"id":"bbb","title":"Meta lead","person_id":42,"origin_id":"meta:9876543210"}],
            "additional_data":{"pagination":{"start":0,"limit":500,"more_items_in_collection":false}}}"#;
        assert_eq!(parse_leads_lookup(200, body, &NO_HEADERS[..], EXT, now()), Ok(Some("bbb".into())));
        let none = br#"{"success":true,"data":[],"additional_data":{}}"#;
        assert_eq!(parse_leads_lookup(200, none, &NO_HEADERS[..], EXT, now()), Ok(None));
        assert_eq!(parse_leads_lookup(200, br#"{"success":true,"data":null}"#, &NO_HEADERS[..], EXT, now()), Ok(None));
        // The look-up's own failures are classified like any answer.
        let limited = parse_leads_lookup(
            429,
            br#"{"success":false,"error":"Request over limit"}"#,
            &[("x-ratelimit-reset", "3")][..],
            EXT,
            now(),
        )
        .unwrap_err();
        assert_eq!((limited.class, limited.hold_until), (Some(RateLimited), Some(now() + Duration::seconds(3))));
        let refused =
            parse_leads_lookup(401, br#"{"success":false,"error":"unauthorized access"}"#, &NO_HEADERS[..], EXT, now())
                .unwrap_err();
        assert!(refused.credential_problem);
    }

    #[test]
    fn person_fields_are_recognised_by_key() {
        // Shape: "Get all person fields" {"success":true,"data":[{"id","key","name","field_type"}]}.
        let body =
            br#"{"success":true,"data":[{"id":1,"key":"name","name":"Name"},{"id":9,"key":"abc","name":"Ext"}]}"#;
        assert_eq!(person_fields_hold(body, "abc"), Some(true));
        assert_eq!(person_fields_hold(body, "def"), Some(false));
        assert_eq!(person_fields_hold(b"<html>", "abc"), None);
    }
}
