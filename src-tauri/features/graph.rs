//! Meta's Graph API, as Leadline uses it: fetching a lead's details, listing a form's leads, and reading
//! Graph's own error and throttling vocabulary.
//!
//! A Meta Lead Ads webhook carries only ids; the lead's answers (`field_data`) must be fetched with
//! `GET /{leadgen_id}` and a page access token. Reconciliation lists the same leads with
//! `GET /{form_id}/leads`. Both paths end in [`canonical_lead`], so a lead has one shape whichever way it came
//! (docs/configuration.md, "What a Meta lead looks like").
//!
//! Errors (`{"error": {"message", "type", "code", "error_subcode", "is_transient", "fbtrace_id"}}`, Graph API
//! "Handling errors" reference) are classified by [`classify_error`]: temporary codes retry, throttling codes
//! hold every request until the time Graph gives, an invalid or expired token is a credential problem (the
//! step pauses and an alert asks for a new token), a lead that no longer exists is a data problem. Graph's
//! usage headers (`X-App-Usage`, `X-Business-Use-Case-Usage`, "Rate limiting" reference) are read on every
//! answer; [`throttled_until`] turns them into a time before which no request is sent.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::model::ErrorClass;

/// What a Graph error means for the next request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraphErrorKind {
    /// Codes 1, 2 or `is_transient`: try again later.
    Temporary,
    /// Codes 4, 17, 32, 613 and the business use case range 80000–80014: the app or page is throttled.
    Throttled,
    /// Code 190 (and 102): the access token is invalid, expired or revoked. A person must renew it.
    Token,
    /// Code 10 and 200–299: the token lacks a permission (`leads_retrieval`, `pages_manage_ads`...).
    Permission,
    /// Code 100 (with subcode 33, or naming a missing object): the lead does not exist or cannot be read
    /// (Meta keeps leads 90 days; a test lead may have been deleted).
    Gone,
    /// Anything else Graph said.
    Other,
}

/// A classified Graph error: the class drives the delivery step, the words go to the operator.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphError {
    pub kind: GraphErrorKind,
    pub class: ErrorClass,
    pub code: Option<i64>,
    pub subcode: Option<i64>,
    /// Graph's message with what to do; never the lead's data (Graph's messages hold ids at most).
    pub reason: String,
}

/// Classifies a Graph answer that is not a success. `status` is the HTTP status; `body` the answer.
pub fn classify_error(status: u16, body: &[u8]) -> GraphError {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let err = json.as_ref().and_then(|j| j.get("error"));
    let code = err.and_then(|e| e.get("code")).and_then(Value::as_i64);
    let subcode = err.and_then(|e| e.get("error_subcode")).and_then(Value::as_i64);
    let transient = err.and_then(|e| e.get("is_transient")).and_then(Value::as_bool).unwrap_or(false);
    let message: String = err
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(300)
        .collect();
    let said = if message.is_empty() { format!("HTTP {status}") } else { message.clone() };
    let code_text = code.map(|c| format!(" (Graph error {c})")).unwrap_or_default();
    let (kind, class, advice) = match code {
        Some(4 | 17 | 32 | 613) | Some(80000..=80014) => (
            GraphErrorKind::Throttled,
            ErrorClass::RateLimited,
            "Meta is throttling this app or page; Leadline waits as Meta says",
        ),
        Some(190 | 102) => (
            GraphErrorKind::Token,
            ErrorClass::PermanentConfig,
            "the page access token is invalid or expired: create a new one (Meta Business Settings → System \
             users → Generate token, with leads_retrieval) and give it to Leadline",
        ),
        Some(10) | Some(200..=299) => (
            GraphErrorKind::Permission,
            ErrorClass::PermanentConfig,
            "the token lacks a permission: it needs leads_retrieval (and pages_manage_ads) for this page",
        ),
        Some(1 | 2) => (GraphErrorKind::Temporary, ErrorClass::Transient, "a temporary problem at Meta"),
        _ if transient => (GraphErrorKind::Temporary, ErrorClass::Transient, "a temporary problem at Meta"),
        Some(100) if subcode == Some(33) || message.contains("does not exist") => (
            GraphErrorKind::Gone,
            ErrorClass::PermanentData,
            "the lead does not exist or cannot be read any more (Meta keeps leads 90 days)",
        ),
        _ if status >= 500 || status == 0 => {
            (GraphErrorKind::Temporary, ErrorClass::Transient, "Meta's Graph API did not answer properly")
        }
        _ if status == 429 => (GraphErrorKind::Throttled, ErrorClass::RateLimited, "Meta asked to slow down"),
        _ => (GraphErrorKind::Other, ErrorClass::PermanentConfig, "Meta refused the request"),
    };
    GraphError { kind, class, code, subcode, reason: format!("{said}{code_text}: {advice}") }
}

/// The time before which Graph said not to call again, from its usage headers (and `Retry-After`), or `None`.
///
/// - `X-Business-Use-Case-Usage`: `{"<id>": [{"type", "call_count", "total_cputime", "total_time",
///   "estimated_time_to_regain_access": <minutes>}]}` — the minutes are used as given.
/// - `X-App-Usage` / `X-Ad-Account-Usage`: `{"call_count", "total_cputime", "total_time"}` in percent. At 100 %
///   the app is throttled and Graph gives no time: Leadline waits [`FULL_USAGE_PAUSE_MINUTES`].
pub fn throttled_until(headers: &reqwest::header::HeaderMap, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut until: Option<DateTime<Utc>> = None;
    let mut later = |t: DateTime<Utc>| until = Some(until.map_or(t, |u| u.max(t)));
    if let Some(v) = headers.get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()) {
        if let Some(t) = crate::model::parse_retry_after(v, now) {
            later(t);
        }
    }
    let parse = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| serde_json::from_str(v).ok());
    if let Some(Value::Object(buc)) = parse("x-business-use-case-usage") {
        for usage in buc.values().filter_map(Value::as_array).flatten() {
            let minutes = usage.get("estimated_time_to_regain_access").and_then(Value::as_i64).unwrap_or(0);
            if minutes > 0 {
                later(now + chrono::Duration::minutes(minutes));
            } else if full(usage) {
                later(now + chrono::Duration::minutes(FULL_USAGE_PAUSE_MINUTES));
            }
        }
    }
    for name in ["x-app-usage", "x-ad-account-usage"] {
        if let Some(usage) = parse(name) {
            if full(&usage) {
                later(now + chrono::Duration::minutes(FULL_USAGE_PAUSE_MINUTES));
            }
        }
    }
    until
}

/// How long Leadline waits when a usage header reports 100 % without saying for how long.
pub const FULL_USAGE_PAUSE_MINUTES: i64 = 5;

fn full(usage: &Value) -> bool {
    ["call_count", "total_cputime", "total_time"]
        .iter()
        .any(|k| usage.get(*k).and_then(Value::as_f64).unwrap_or(0.0) >= 100.0)
}

/// One hold per Graph API base URL, shared by every part of this process that calls it (the fetch step and
/// reconciliation): Graph throttles an app and a page, not one request, so after it says "wait" nobody here
/// sends a request before the time it gave.
static HOLDS: LazyLock<Mutex<HashMap<String, DateTime<Utc>>>> = LazyLock::new(Default::default);

/// Records that Graph at `base` must not be called before `until` (a shorter hold never replaces a longer one).
pub fn hold(base: &str, until: DateTime<Utc>) {
    let mut holds = HOLDS.lock().expect("graph holds lock");
    let entry = holds.entry(base.to_string()).or_insert(until);
    *entry = (*entry).max(until);
}

/// The time before which Graph at `base` must not be called, if that is still in the future.
pub fn held_until(base: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    HOLDS.lock().expect("graph holds lock").get(base).copied().filter(|t| *t > now)
}

/// Graph ids are numbers in some answers and strings in others: always text here.
pub fn id_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A creation time as RFC 3339 UTC text: Graph writes `2015-02-28T08:49:14+0000`, webhooks a Unix number.
pub fn time_text(v: &Value) -> Option<String> {
    let t = match v {
        Value::Number(n) => DateTime::from_timestamp(n.as_i64()?, 0)?,
        Value::String(s) => {
            let s = s.trim();
            if let Ok(secs) = s.parse::<i64>() {
                DateTime::from_timestamp(secs, 0)?
            } else {
                DateTime::parse_from_rfc3339(s)
                    .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%z"))
                    .ok()?
                    .to_utc()
            }
        }
        _ => return None,
    };
    Some(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// `field_data` (`[{"name": "email", "values": ["a@b.c"]}, ...]`) as named fields: one value as text, several
/// (a multiple-choice question) as a list of texts.
pub fn flatten_fields(field_data: &Value) -> Map<String, Value> {
    let mut fields = Map::new();
    for item in field_data.as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let Some(name) = item.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else { continue };
        let values: Vec<Value> = item
            .get("values")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter().map(|v| v.as_str().map_or_else(|| Value::String(v.to_string()), |s| s.into())).collect()
            })
            .unwrap_or_default();
        let value = match values.len() {
            0 => Value::String(String::new()),
            1 => values.into_iter().next().unwrap_or_default(),
            _ => Value::Array(values),
        };
        fields.insert(name.to_string(), value);
    }
    fields
}

/// The one shape of a Meta lead, whichever path brought it:
///
/// ```json
/// {"leadgen_id": "…", "page_id": "…" | null, "form_id": "…", "ad_id": "…" | null,
///  "created_time": "2026-11-30T09:14:00Z", "fields": {"full_name": "…", "email": "…", …},
///  "field_data": [{"name": "email", "values": ["…"]}, …]}
/// ```
///
/// `lead` is a Graph lead object (`id`, `created_time`, `ad_id`, `form_id`, `field_data`); `known` is what
/// was known before the fetch (the webhook's or the listing's ids), used where the Graph answer lacks a value.
/// `page_id` is not a field of Graph's lead object: it comes from the webhook, or the source's `page_id`.
pub fn canonical_lead(lead: &Value, known: &Value, page_id: Option<&str>) -> Value {
    let pick = |key: &str, alt: &str| {
        lead.get(key)
            .and_then(id_text)
            .or_else(|| known.get(alt).and_then(id_text))
            .map(Value::String)
            .unwrap_or(Value::Null)
    };
    let created = lead
        .get("created_time")
        .and_then(time_text)
        .or_else(|| known.get("created_time").and_then(time_text))
        .map(Value::String)
        .unwrap_or(Value::Null);
    let page = known
        .get("page_id")
        .and_then(id_text)
        .or_else(|| page_id.map(String::from))
        .map(Value::String)
        .unwrap_or(Value::Null);
    let field_data = lead.get("field_data").cloned().unwrap_or_else(|| json!([]));
    json!({
        "leadgen_id": pick("id", "leadgen_id"),
        "page_id": page,
        "form_id": pick("form_id", "form_id"),
        "ad_id": pick("ad_id", "ad_id"),
        "created_time": created,
        "fields": Value::Object(flatten_fields(&field_data)),
        "field_data": field_data,
    })
}

/// A stored Meta lead already carries its details (it was listed with `field_data` by reconciliation or
/// polling, or fetched before).
pub fn has_details(payload: &Value) -> bool {
    payload.get("field_data").is_some_and(Value::is_array) && payload.get("fields").is_some_and(Value::is_object)
}

/// The fields asked of Graph for one lead (the same as a listing asks for).
pub const LEAD_FIELDS: &str = "id,created_time,ad_id,form_id,field_data";

/// `next` page links are followed only to the origin of the first request: an answer cannot send the access
/// token elsewhere.
pub fn same_origin(first: &reqwest::Url, next: &str) -> Option<reqwest::Url> {
    let next = reqwest::Url::parse(next).ok()?;
    (next.scheme() == first.scheme()
        && next.host_str() == first.host_str()
        && next.port_or_known_default() == first.port_or_known_default())
    .then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z").unwrap().to_utc()
    }

    // Bodies follow the Graph API "Handling errors" reference: {"error": {message, type, code, error_subcode,
    // fbtrace_id}}.
    fn err(code: i64, subcode: Option<i64>, message: &str) -> Vec<u8> {
        let mut e = json!({"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbC"});
        if let Some(s) = subcode {
            e["error_subcode"] = s.into();
        }
        json!({"error": e}).to_string().into_bytes()
    }

    #[test]
    fn graph_errors_are_classified_by_code() {
        let cases = [
            (
                400,
                err(190, Some(463), "Error validating access token: Session has expired"),
                GraphErrorKind::Token,
                ErrorClass::PermanentConfig,
            ),
            (400, err(102, None, "Session key invalid"), GraphErrorKind::Token, ErrorClass::PermanentConfig),
            (
                400,
                err(4, None, "Application request limit reached"),
                GraphErrorKind::Throttled,
                ErrorClass::RateLimited,
            ),
            (400, err(17, None, "User request limit reached"), GraphErrorKind::Throttled, ErrorClass::RateLimited),
            (400, err(32, None, "Page request limit reached"), GraphErrorKind::Throttled, ErrorClass::RateLimited),
            (
                400,
                err(613, None, "Calls to this api have exceeded the rate limit"),
                GraphErrorKind::Throttled,
                ErrorClass::RateLimited,
            ),
            (
                400,
                err(80001, None, "There have been too many calls to this Page account"),
                GraphErrorKind::Throttled,
                ErrorClass::RateLimited,
            ),
            (500, err(1, None, "An unknown error occurred"), GraphErrorKind::Temporary, ErrorClass::Transient),
            (503, err(2, None, "Service temporarily unavailable"), GraphErrorKind::Temporary, ErrorClass::Transient),
            (
                400,
                err(100, Some(33), "Unsupported get request. Object with ID '123' does not exist"),
                GraphErrorKind::Gone,
                ErrorClass::PermanentData,
            ),
            (
                403,
                err(200, None, "Requires leads_retrieval permission"),
                GraphErrorKind::Permission,
                ErrorClass::PermanentConfig,
            ),
            (
                403,
                err(10, None, "Application does not have permission"),
                GraphErrorKind::Permission,
                ErrorClass::PermanentConfig,
            ),
            (502, b"<html>Bad Gateway</html>".to_vec(), GraphErrorKind::Temporary, ErrorClass::Transient),
        ];
        for (status, body, kind, class) in cases {
            let e = classify_error(status, &body);
            assert_eq!((e.kind.clone(), e.class), (kind, class), "{}", String::from_utf8_lossy(&body));
        }
        let token = classify_error(400, &err(190, None, "Error validating access token"));
        assert!(token.reason.contains("Graph error 190") && token.reason.contains("new one"), "{}", token.reason);
        // `is_transient` wins over an unknown code.
        let body = json!({"error": {"message": "x", "code": 99, "is_transient": true}}).to_string();
        assert_eq!(classify_error(400, body.as_bytes()).kind, GraphErrorKind::Temporary);
    }

    #[test]
    fn usage_headers_say_how_long_to_wait() {
        let mut h = HeaderMap::new();
        assert_eq!(throttled_until(&h, now()), None);
        h.insert("x-app-usage", HeaderValue::from_static(r#"{"call_count":28,"total_time":25,"total_cputime":25}"#));
        assert_eq!(throttled_until(&h, now()), None);
        h.insert("x-app-usage", HeaderValue::from_static(r#"{"call_count":100,"total_time":25,"total_cputime":25}"#));
        assert_eq!(throttled_until(&h, now()), Some(now() + chrono::Duration::minutes(FULL_USAGE_PAUSE_MINUTES)));
        h.insert(
            "x-business-use-case-usage",
            HeaderValue::from_static(
                r#"{"112233":[{"type":"pages","call_count":100,"total_cputime":10,"total_time":10,"estimated_time_to_regain_access":12}]}"#,
            ),
        );
        assert_eq!(throttled_until(&h, now()), Some(now() + chrono::Duration::minutes(12)));
        let mut r = HeaderMap::new();
        r.insert("retry-after", HeaderValue::from_static("30"));
        assert_eq!(throttled_until(&r, now()), Some(now() + chrono::Duration::seconds(30)));
        let mut junk = HeaderMap::new();
        junk.insert("x-app-usage", HeaderValue::from_static("not json"));
        assert_eq!(throttled_until(&junk, now()), None);
    }

    #[test]
    fn holds_only_grow_and_expire() {
        let base = "http://graph.test/holds_only_grow";
        assert_eq!(held_until(base, now()), None);
        hold(base, now() + chrono::Duration::minutes(10));
        hold(base, now() + chrono::Duration::minutes(1));
        assert_eq!(held_until(base, now()), Some(now() + chrono::Duration::minutes(10)));
        assert_eq!(held_until(base, now() + chrono::Duration::minutes(11)), None);
    }

    #[test]
    fn webhook_and_listing_give_the_same_lead() {
        // Graph's lead object ("Retrieving leads" reference) and a `leadgen` webhook change for the same lead.
        let graph = json!({"id": "900001", "created_time": "2026-11-30T09:14:00+0000", "ad_id": "6001",
            "form_id": "4242", "field_data": [
                {"name": "full_name", "values": ["Ada Lovelace"]},
                {"name": "email", "values": ["ada@example.com"]},
                {"name": "phone_number", "values": ["+4915112345678"]},
                {"name": "which_products", "values": ["a", "b"]}]});
        let webhook = json!({"leadgen_id": "900001", "page_id": "7007", "form_id": "4242", "adgroup_id": "6001",
            "ad_id": "6001", "created_time": 1_796_030_040});
        let fetched = canonical_lead(&graph, &webhook, Some("7007"));
        let listed = canonical_lead(&graph, &json!({"form_id": "4242"}), Some("7007"));
        assert_eq!(fetched, listed);
        assert_eq!(fetched["created_time"], "2026-11-30T09:14:00Z");
        assert_eq!(fetched["fields"]["email"], "ada@example.com");
        assert_eq!(fetched["fields"]["which_products"], json!(["a", "b"]));
        assert_eq!(fetched["page_id"], "7007");
        assert!(has_details(&fetched));
        assert!(!has_details(&webhook));
    }

    #[test]
    fn times_and_ids_become_text() {
        assert_eq!(time_text(&json!(0)).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(time_text(&json!("2015-02-28T08:49:14+0000")).as_deref(), Some("2015-02-28T08:49:14Z"));
        assert_eq!(time_text(&json!("2015-02-28T10:49:14+02:00")).as_deref(), Some("2015-02-28T08:49:14Z"));
        assert_eq!(time_text(&json!("yesterday")), None);
        assert_eq!(id_text(&json!(12345678901234567u64)).as_deref(), Some("12345678901234567"));
        assert_eq!(id_text(&json!(" 12 ")).as_deref(), Some("12"));
        assert_eq!(id_text(&json!(null)), None);
    }

    #[test]
    fn next_links_stay_on_the_first_origin() {
        let first = reqwest::Url::parse("https://graph.facebook.com/v21.0/1/leads?access_token=t").unwrap();
        assert!(same_origin(&first, "https://graph.facebook.com/v21.0/1/leads?after=x").is_some());
        assert!(same_origin(&first, "https://evil.example/v21.0/1/leads?after=x").is_none());
        assert!(same_origin(&first, "http://graph.facebook.com/v21.0/1/leads").is_none());
        assert!(same_origin(&first, "https://graph.facebook.com:8443/x").is_none());
        assert!(same_origin(&first, "not a url").is_none());
    }
}
