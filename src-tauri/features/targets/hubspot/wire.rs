//! HubSpot CRM v3: contacts upserted in batches by a unique property (`POST /crm/v3/objects/contacts/batch/upsert`).
//!
//! HubSpot has no `Idempotency-Key`; upserting by a unique property is what makes a repeat harmless, so any
//! input whose fate the answer leaves open is simply retried (never assumed delivered).
//!
//! Documented shapes this module follows (developers.hubspot.com, "Upsert contacts", CRM v3 batch endpoints, and
//! "API usage guidelines"):
//! - request `{"inputs":[{"id":"<unique value>","idProperty":"<unique property>","properties":{…}}]}`;
//! - answer `{"status","results":[{"id","new","properties":{…},"createdAt","updatedAt",…}],"errors":[{"status",
//!   "category","message","errors":[{"message","code","in","context"}],"context":{…}}],"numErrors",…}`, with
//!   `207 Multi-Status` when some inputs failed;
//! - error `{"status":"error","message","category","errors":[{"message","in","code","context"}],"correlationId"}`;
//! - 429 `{"status":"error","message","errorType":"RATE_LIMIT","policyName":"SECONDLY"|"TEN_SECONDLY_ROLLING"|
//!   "DAILY",…}` with `X-HubSpot-RateLimit-*` headers.
//!
//! The documentation does not promise that `results[]` follow the order of `inputs[]`, so results are matched
//! by the unique property's value in each result's `properties`, never by position (the one exception: a batch
//! of one input answered by exactly one result).

use chrono::{DateTime, Duration, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::{json, Map, Value};

use super::super::connector::ConnectionCheck;
use super::super::vendor::{header_u64, json_id, mask_known, retry_after, str_at, HeaderLookup, VendorVerdict};
use crate::model::{default_class_for_status, ErrorClass};

/// Path of the batch upsert endpoint, relative to `https://api.hubapi.com`.
pub const BATCH_UPSERT_PATH: &str = "/crm/v3/objects/contacts/batch/upsert";

/// Most inputs HubSpot accepts in one batch request.
pub const MAX_BATCH: usize = 100;

/// The daily limit resets "at midnight based on the time zone setting of the HubSpot account" (HubSpot, "API
/// usage guidelines" / request limits). The account's zone is not in any answer; when the configuration does not
/// say, Leadline assumes HubSpot's home zone, America/New_York, which HubSpot's own staff once gave as the reset
/// zone. A wrong guess costs at most a few hours of waiting or one early probe that is refused again.
pub const DEFAULT_ACCOUNT_TZ: Tz = chrono_tz::America::New_York;

/// The time of an answer and the account's time zone, for holds that end at the account's midnight.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub now: DateTime<Utc>,
    pub account_tz: Tz,
}

impl Clock {
    pub fn new(now: DateTime<Utc>) -> Clock {
        Clock { now, account_tz: DEFAULT_ACCOUNT_TZ }
    }
}

/// One input's fate in a batch answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemResult {
    /// The unique value the input was sent with (`inputs[].id`).
    pub input_id: String,
    pub verdict: VendorVerdict,
}

/// The request body for a batch upsert: one input per lead, keyed by `id_property`.
pub fn batch_upsert_body(id_property: &str, inputs: &[(String, Map<String, Value>)]) -> Value {
    let inputs: Vec<Value> = inputs
        .iter()
        .map(|(id, properties)| json!({ "id": id, "idProperty": id_property, "properties": properties }))
        .collect();
    json!({ "inputs": inputs })
}

/// Reads the answer to a batch upsert into one result per input, in the order of `input_ids`.
///
/// - 200/201/207: each `results[]` entry is matched to its input by `properties[id_property]` (exact, then
///   case-insensitive: HubSpot stores e-mail addresses in lower case); each `errors[]` entry is mapped to every
///   input its `context` (or `id`) names, and classified on its own. An input found in neither is a transient
///   failure: the upsert is safe to repeat, and a lead is never marked delivered on silence.
/// - Any other status concerns the whole request ([`classify_error`]); when a refused batch names the inputs at
///   fault, only those carry the error and the others are retried.
pub fn parse_batch_answer<H: HeaderLookup + ?Sized>(
    status: u16,
    body: &[u8],
    headers: &H,
    id_property: &str,
    input_ids: &[String],
    clock: &Clock,
) -> Vec<ItemResult> {
    let known: Vec<&str> = input_ids.iter().map(String::as_str).collect();
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if !matches!(status, 200 | 201 | 207) {
        return whole_batch(status, json.as_ref(), headers, input_ids, &known, clock);
    }
    let mut verdicts: Vec<Option<VendorVerdict>> = vec![None; input_ids.len()];
    let empty = Vec::new();
    let results = json.as_ref().and_then(|j| j.get("results")).and_then(Value::as_array).unwrap_or(&empty);
    let errors = json.as_ref().and_then(|j| j.get("errors")).and_then(Value::as_array).unwrap_or(&empty);

    for result in results {
        let value = result.pointer(&format!("/properties/{}", pointer_escape(id_property))).and_then(json_id);
        let mut matched = value.as_deref().map(|v| matching_inputs(input_ids, v)).unwrap_or_default();
        if matched.is_empty() && input_ids.len() == 1 && results.len() == 1 && errors.is_empty() {
            matched.push(0);
        }
        let crm_id = result.get("id").and_then(json_id);
        let created = result.get("new").and_then(Value::as_bool);
        for i in matched {
            if verdicts[i].is_none() {
                let reason = match created {
                    Some(true) => "created in HubSpot",
                    Some(false) => "updated in HubSpot",
                    None => "upserted in HubSpot",
                };
                verdicts[i] = Some(VendorVerdict::delivered(crm_id.clone(), reason).with_created(created));
            }
        }
    }

    let mut unmapped: Vec<String> = Vec::new();
    for error in errors {
        let named = named_inputs(error, input_ids);
        let verdict = judge(None, Some(error), headers, &known, clock);
        if named.is_empty() {
            unmapped.push(verdict.reason);
            continue;
        }
        for i in named {
            // A lead the results already report as written stays delivered; the first error naming it wins.
            if verdicts[i].is_none() {
                verdicts[i] = Some(verdict.clone());
            }
        }
    }

    let silence = match unmapped.first() {
        None => "HubSpot's answer did not mention this lead; the upsert is safe to repeat".to_string(),
        Some(first) => format!(
            "HubSpot's answer did not tie this lead to a result; it reported {} error(s) naming no lead (first: {}); \
             the upsert is safe to repeat",
            unmapped.len(),
            first
        ),
    };
    input_ids
        .iter()
        .zip(verdicts)
        .map(|(id, v)| ItemResult {
            input_id: id.clone(),
            verdict: v.unwrap_or_else(|| VendorVerdict::failed(ErrorClass::Transient, silence.clone())),
        })
        .collect()
}

/// Classifies an error answer to any HubSpot request (not a 2xx).
pub fn classify_error<H: HeaderLookup + ?Sized>(status: u16, body: &[u8], headers: &H, clock: &Clock) -> VendorVerdict {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    judge(Some(status), json.as_ref(), headers, &[], clock)
}

fn whole_batch<H: HeaderLookup + ?Sized>(
    status: u16,
    json: Option<&Value>,
    headers: &H,
    input_ids: &[String],
    known: &[&str],
    clock: &Clock,
) -> Vec<ItemResult> {
    let verdict = judge(Some(status), json, headers, known, clock);
    let named = match json {
        Some(j) if verdict.class == Some(ErrorClass::PermanentData) => named_inputs(j, input_ids),
        _ => Vec::new(),
    };
    let blame_some = !named.is_empty() && named.len() < input_ids.len();
    // A whole-request "delivered" (a 409 naming one existing id) cannot tell which of several leads it means:
    // none of them is assumed delivered; the upsert is safe to repeat.
    let verdict = if verdict.is_delivered() && input_ids.len() > 1 {
        VendorVerdict::failed(
            ErrorClass::Transient,
            format!("HubSpot answered HTTP {status} for the whole batch without telling which lead; retried"),
        )
    } else {
        verdict
    };
    input_ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let verdict = if blame_some && !named.contains(&i) {
                VendorVerdict::failed(
                    ErrorClass::Transient,
                    "not written: HubSpot refused the whole batch because of another lead in it",
                )
            } else {
                verdict.clone()
            };
            ItemResult { input_id: id.clone(), verdict }
        })
        .collect()
}

/// The decision table for one HubSpot error object: a whole answer (`status` known) or one `errors[]` entry of a
/// batch answer (`status` unknown: its `category` decides).
fn judge<H: HeaderLookup + ?Sized>(
    status: Option<u16>,
    json: Option<&Value>,
    headers: &H,
    known: &[&str],
    clock: &Clock,
) -> VendorVerdict {
    let null = Value::Null;
    let j = json.unwrap_or(&null);
    let category = str_at(j, "/category").unwrap_or("");
    let message = str_at(j, "/message").map(|m| mask_known(m, known));
    let said = |what: &str| match &message {
        Some(m) => format!("{what}: {m}"),
        None => what.to_string(),
    };
    let http = status.map(|s| format!("HTTP {s} ")).unwrap_or_default();
    let tag = match (category.is_empty(), status) {
        (false, _) => format!("{http}{category}"),
        (true, Some(_)) => http.trim_end().to_string(),
        (true, None) => "an error without category".to_string(),
    };

    if status == Some(429) || category == "RATE_LIMITS" || str_at(j, "/errorType") == Some("RATE_LIMIT") {
        return rate_limited(j, headers, clock, &tag);
    }
    if status == Some(401) || matches!(category, "INVALID_AUTHENTICATION" | "EXPIRED_AUTHENTICATION") {
        return VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            format!(
                "HubSpot refused the access token: expired or invalid ({tag}); renew the private app token or \
                 reconnect HubSpot"
            ),
        )
        .credentials();
    }
    let scopes = required_scopes(j);
    if category == "MISSING_SCOPES" || (status == Some(403) && !scopes.is_empty()) {
        let which = if scopes.is_empty() { "(HubSpot did not name them)".to_string() } else { scopes.join(", ") };
        return VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            format!("the HubSpot token lacks the scopes {which} ({tag}); grant them to the app, then replay"),
        )
        .alerting();
    }
    if status == Some(409) || category == "CONFLICT" {
        // "Contact already exists. Existing ID: 123": the lead is in HubSpot; the retry would only conflict again.
        let raw = str_at(j, "/message").unwrap_or("");
        return match existing_id(raw) {
            Some(id) => VendorVerdict::delivered(
                Some(id.clone()),
                format!("already in HubSpot as contact {id} (conflict answer): not created again"),
            )
            .with_created(Some(false)),
            None => VendorVerdict::failed(
                ErrorClass::Ambiguous,
                said(&format!("HubSpot says the contact already exists but gave no id ({tag}); look it up")),
            ),
        };
    }
    let (field, code) = blamed_property(j);
    let validation = category == "VALIDATION_ERROR" || matches!(status, Some(400 | 422));
    if validation && code.as_deref() == Some("PROPERTY_DOESNT_EXIST") {
        // A property missing from the account is the mapping's fault, not the lead's: every lead would fail.
        let name = field.clone().unwrap_or_else(|| "(unnamed)".into());
        return VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            format!("the HubSpot property {name} does not exist ({tag}); fix the field mapping, then replay"),
        )
        .with_field(field)
        .alerting();
    }
    if validation {
        let what = match (&field, &code) {
            (Some(f), Some(c)) => format!("HubSpot rejected property {f} ({tag}, {c})"),
            (Some(f), None) => format!("HubSpot rejected property {f} ({tag})"),
            (None, _) => format!("HubSpot rejected the lead ({tag})"),
        };
        let detail = first_detail(j).map(|m| mask_known(m, known));
        let reason = match (detail, &message) {
            (Some(d), _) => format!("{what}: {d}"),
            (None, Some(m)) => format!("{what}: {m}"),
            (None, None) => what,
        };
        return VendorVerdict::failed(ErrorClass::PermanentData, reason).with_field(field);
    }
    if category == "OBJECT_NOT_FOUND" && status.is_none() {
        return VendorVerdict::failed(
            ErrorClass::PermanentData,
            said(&format!("HubSpot found no such record ({tag})")),
        );
    }
    let class = match status {
        Some(s) => default_class_for_status(s),
        // An errors[] entry with a category this table does not know: the upsert is safe to repeat, and the
        // retry budget still ends in a dead letter that quotes HubSpot.
        None => ErrorClass::Transient,
    };
    let verdict = VendorVerdict::failed(class, said(&format!("HubSpot answered {tag}")));
    if class == ErrorClass::PermanentConfig {
        verdict.alerting()
    } else {
        verdict.hold(status.and_then(|_| retry_after(headers, clock.now)))
    }
}

fn rate_limited<H: HeaderLookup + ?Sized>(j: &Value, headers: &H, clock: &Clock, tag: &str) -> VendorVerdict {
    let policy = str_at(j, "/policyName").unwrap_or("");
    let daily = policy == "DAILY"
        || (policy.is_empty() && header_u64(headers, "x-hubspot-ratelimit-daily-remaining") == Some(0));
    if daily {
        let reset = next_midnight(clock);
        let local = reset.with_timezone(&clock.account_tz).format("%Y-%m-%d %H:%M %Z");
        return VendorVerdict::failed(
            ErrorClass::RateLimited,
            format!(
                "HubSpot's daily API limit is used up ({tag}, DAILY); deliveries resume after the reset at {local}"
            ),
        )
        .hold(Some(reset))
        .alerting();
    }
    // Short windows: HubSpot's Retry-After when given, else the window the headers announce, else the policy's.
    let window_ms = header_u64(headers, "x-hubspot-ratelimit-interval-milliseconds")
        .filter(|ms| *ms > 0 && *ms <= 60_000)
        .unwrap_or(if policy == "SECONDLY" { 1_000 } else { 10_000 });
    let until = retry_after(headers, clock.now).unwrap_or(clock.now + Duration::milliseconds(window_ms as i64));
    let name = if policy.is_empty() { "short-term" } else { policy };
    VendorVerdict::failed(ErrorClass::RateLimited, format!("HubSpot's {name} rate limit was hit ({tag}); waiting"))
        .hold(Some(until))
}

/// The first midnight after `clock.now` in the account's time zone. Where a transition skips midnight, the first
/// instant of that day.
fn next_midnight(clock: &Clock) -> DateTime<Utc> {
    let tz = clock.account_tz;
    let today = clock.now.with_timezone(&tz).date_naive();
    let tomorrow = today.succ_opt().unwrap_or(today);
    (0..=3)
        .find_map(|h| tomorrow.and_hms_opt(h, 0, 0).and_then(|t| tz.from_local_datetime(&t).earliest()))
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(clock.now + Duration::hours(24))
}

/// Scopes a 403 names: `errors[].context.requiredGranularScopes` / `requiredScopes` / `missingScopes`, as a list
/// or as HubSpot's string form `"{missingScopes=[a, b]}"`, and the same keys in the top-level `context`.
fn required_scopes(j: &Value) -> Vec<String> {
    const KEYS: [&str; 3] = ["requiredGranularScopes", "requiredScopes", "missingScopes"];
    let mut contexts: Vec<&Value> = j.get("context").into_iter().collect();
    if let Some(errors) = j.get("errors").and_then(Value::as_array) {
        contexts.extend(errors.iter().filter_map(|e| e.get("context")));
    }
    let mut scopes: Vec<String> = Vec::new();
    for context in contexts {
        let found: Vec<String> = match context {
            Value::Object(map) => KEYS
                .iter()
                .filter_map(|k| map.get(*k).and_then(Value::as_array))
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            Value::String(s) => KEYS
                .iter()
                .filter_map(|k| s.split_once(&format!("{k}=[")))
                .filter_map(|(_, rest)| rest.split_once(']'))
                .flat_map(|(list, _)| list.split(',').map(|x| x.trim().to_string()))
                .filter(|x| !x.is_empty())
                .collect(),
            _ => Vec::new(),
        };
        for s in found {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
    }
    scopes
}

/// "Contact already exists. Existing ID: 123" → 123.
fn existing_id(message: &str) -> Option<String> {
    let (_, rest) = message.split_once("Existing ID:")?;
    let digits: String = rest.trim_start().chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty()).then_some(digits)
}

/// The property an error blames and the code it gives: `errors[0].in` / `errors[0].code`, or the
/// `propertyName` of a context.
fn blamed_property(j: &Value) -> (Option<String>, Option<String>) {
    let nested = j.get("errors").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let field = nested
        .iter()
        .find_map(|e| str_at(e, "/in"))
        .or_else(|| str_at(j, "/in"))
        .or_else(|| nested.iter().find_map(|e| str_at(e, "/context/propertyName/0")))
        .or_else(|| str_at(j, "/context/propertyName/0"))
        .map(str::to_string);
    let code = nested.iter().find_map(|e| str_at(e, "/code")).map(str::to_string);
    (field, code)
}

fn first_detail(j: &Value) -> Option<&str> {
    j.get("errors").and_then(Value::as_array)?.iter().find_map(|e| str_at(e, "/message"))
}

/// The inputs an error object names: any string in its `context` (HubSpot lists the failed inputs' ids there,
/// under keys such as `ids`) or its `id`.
fn named_inputs(error: &Value, input_ids: &[String]) -> Vec<usize> {
    let mut names: Vec<&str> = Vec::new();
    if let Some(context) = error.get("context") {
        collect_strings(context, &mut names);
    }
    if let Some(id) = str_at(error, "/id") {
        names.push(id);
    }
    let mut out: Vec<usize> = Vec::new();
    for name in names {
        for i in matching_inputs(input_ids, name) {
            if !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// Indices of inputs equal to `value`: exact matches, else case-insensitive ones.
fn matching_inputs(input_ids: &[String], value: &str) -> Vec<usize> {
    let exact: Vec<usize> = input_ids.iter().enumerate().filter(|(_, id)| *id == value).map(|(i, _)| i).collect();
    if !exact.is_empty() {
        return exact;
    }
    input_ids.iter().enumerate().filter(|(_, id)| id.eq_ignore_ascii_case(value)).map(|(i, _)| i).collect()
}

/// Escapes a property name for a JSON pointer (RFC 6901).
fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// For each position, whether it is the first with its unique value (case-insensitively, as HubSpot compares
/// e-mail addresses). `None` positions are never sent.
pub fn first_of_each(ids: &[Option<&str>]) -> Vec<bool> {
    let mut seen: Vec<String> = Vec::new();
    ids.iter()
        .map(|id| match id {
            None => false,
            Some(id) => {
                let key = id.to_lowercase();
                if seen.contains(&key) {
                    false
                } else {
                    seen.push(key);
                    true
                }
            }
        })
        .collect()
}

/// What one lead keeps of a batch answer: its record id, or the error in Leadline's masked words.
pub(super) fn item_excerpt(v: &VendorVerdict) -> String {
    match v.class {
        None => json!({"id": v.crm_id, "new": v.created}).to_string(),
        Some(class) => json!({"error": v.reason, "class": class.to_string(), "field": v.field}).to_string(),
    }
}

/// The answer to the connection check, in plain words.
pub fn check_message<H: HeaderLookup + ?Sized>(
    status: u16,
    body: &[u8],
    headers: &H,
    object: &str,
    id_property: &str,
    token_env: &str,
    clock: &Clock,
) -> ConnectionCheck {
    let fail = |message: String| ConnectionCheck { ok: false, message };
    match status {
        200 => {
            let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let unique = json.get("hasUniqueValue").and_then(Value::as_bool).unwrap_or(false);
            // `email` is unique for contacts by HubSpot's own rule, whatever the property says.
            if unique || (object == "contacts" && id_property == "email") {
                ConnectionCheck {
                    ok: true,
                    message: format!(
                        "the token in {token_env} works, and the {object} property {id_property} exists and is unique: \
                         leads can be upserted by it"
                    ),
                }
            } else {
                fail(format!(
                    "the token in {token_env} works, but the {object} property {id_property} does not have unique \
                     values: HubSpot upserts only by a unique property; make it unique or choose another id_property"
                ))
            }
        }
        404 => fail(format!(
            "the token in {token_env} works, but HubSpot has no {object} property {id_property}: create it (with \
             unique values) or fix id_property"
        )),
        401 => fail(format!("HubSpot refused the token in {token_env}: it is expired or invalid; put a new one there")),
        _ => {
            let v = classify_error(status, body, headers, clock);
            match v.class {
                Some(ErrorClass::RateLimited) => fail(format!("HubSpot answers, but is rate-limiting: {}", v.reason)),
                _ if status == 403 => fail(format!("the token in {token_env} is refused for this: {}", v.reason)),
                _ => fail(format!("HubSpot answered HTTP {status}: {}", v.reason)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ErrorClass::*;

    const NO_HEADERS: [(&str, &str); 0] = [];

    fn clock() -> Clock {
        // 2025-03-14 15:00 UTC = 11:00 in New York (EDT, UTC-4).
        Clock::new(Utc.with_ymd_and_hms(2025, 3, 14, 15, 0, 0).unwrap())
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn props(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect()
    }

    #[test]
    fn body_follows_the_documented_batch_input() {
        // Shape: "Upsert contacts" request, {"inputs":[{"id","idProperty","properties"}]}.
        let body = batch_upsert_body(
            "leadline_id",
            &[
                ("meta:1".into(), props(&[("email", "ada@example.com"), ("firstname", "Ada")])),
                ("meta:2".into(), Map::new()),
            ],
        );
        assert_eq!(
            body,
            json!({"inputs": [
                {"id": "meta:1", "idProperty": "leadline_id", "properties": {"email": "ada@example.com", "firstname": "Ada"}},
                {"id": "meta:2", "idProperty": "leadline_id", "properties": {}}
            ]})
        );
    }

    #[test]
    fn results_are_matched_by_the_unique_value_not_by_position() {
        // Shape: batch upsert 200 answer, BatchResponseSimplePublicUpsertObject: {"status","results":[{"id","new",
        // "properties",…}],"startedAt","completedAt"}. Results deliberately out of input order.
        let body = br#"{"status":"COMPLETE","results":[
            {"id":"502","new":false,"properties":{"leadline_id":"meta:2","hs_object_id":"502"},"createdAt":"2025-03-01T10:00:00Z","updatedAt":"2025-03-14T15:00:00Z","archived":false},
            {"id":"501","new":true,"properties":{"leadline_id":"meta:1","hs_object_id":"501"},"createdAt":"2025-03-14T15:00:00Z","updatedAt":"2025-03-14T15:00:00Z","archived":false}
        ],"startedAt":"2025-03-14T15:00:00Z","completedAt":"2025-03-14T15:00:01Z"}"#;
        let out = parse_batch_answer(200, body, &NO_HEADERS[..], "leadline_id", &ids(&["meta:1", "meta:2"]), &clock());
        assert_eq!(out[0].input_id, "meta:1");
        assert_eq!(out[0].verdict.crm_id.as_deref(), Some("501"));
        assert_eq!(out[0].verdict.created, Some(true));
        assert_eq!(out[0].verdict.reason, "created in HubSpot");
        assert_eq!(out[1].verdict.crm_id.as_deref(), Some("502"));
        assert_eq!(out[1].verdict.created, Some(false));
        assert!(out.iter().all(|r| r.verdict.is_delivered()));
    }

    #[test]
    fn emails_match_whatever_case_hubspot_stored() {
        // Shape: batch upsert 200 answer keyed by `email`; HubSpot stores addresses in lower case.
        let body =
            br#"{"status":"COMPLETE","results":[{"id":"7","new":true,"properties":{"email":"ada@example.com"}}]}"#;
        let out =
            parse_batch_answer(200, body, &NO_HEADERS[..], "email", &ids(&["x@y.org", "Ada@Example.com"]), &clock());
        assert!(out[1].verdict.is_delivered());
        assert_eq!(out[1].verdict.crm_id.as_deref(), Some("7"));
        assert_eq!(out[0].verdict.class, Some(Transient));
    }

    #[test]
    fn multi_status_maps_every_error_to_its_own_lead() {
        // Shape: batch upsert 207 answer, BatchResponseSimplePublicUpsertObjectWithErrors: results[] for the good
        // inputs, errors[] of StandardError {"status","category","message","errors":[{"message","code","in"}],
        // "context":{"ids":[…]}} naming the failed inputs, and "numErrors".
        let body = br#"{"status":"COMPLETE","numErrors":2,
          "results":[{"id":"601","new":true,"properties":{"leadline_id":"meta:1"}}],
          "errors":[
            {"status":"error","category":"VALIDATION_ERROR","message":"Property values were not valid: [{\"isValid\":false,\"message\":\"+49 151 1234 5678 is not a valid phone number\",\"name\":\"phone\"}]",
             "errors":[{"message":"Phone number is not valid","code":"INVALID_PHONE_NUMBER","in":"phone"}],
             "context":{"ids":["meta:3"]}},
            {"status":"error","category":"VALIDATION_ERROR","message":"Property values were not valid",
             "errors":[{"message":"Email address bad@@example is invalid","code":"INVALID_EMAIL","in":"email"}],
             "context":{"ids":["meta:2"]}}
          ],
          "startedAt":"2025-03-14T15:00:00Z","completedAt":"2025-03-14T15:00:01Z"}"#;
        let inputs = ids(&["meta:1", "meta:2", "meta:3", "meta:4"]);
        let out = parse_batch_answer(207, body, &NO_HEADERS[..], "leadline_id", &inputs, &clock());
        assert!(out[0].verdict.is_delivered());

        assert_eq!(out[1].verdict.class, Some(PermanentData));
        assert_eq!(out[1].verdict.field.as_deref(), Some("email"));
        assert_eq!(
            out[1].verdict.reason,
            "HubSpot rejected property email (VALIDATION_ERROR, INVALID_EMAIL): Email address … is invalid"
        );

        assert_eq!(out[2].verdict.class, Some(PermanentData));
        assert_eq!(out[2].verdict.field.as_deref(), Some("phone"));
        assert!(!out[2].verdict.reason.contains("151"), "{}", out[2].verdict.reason);

        // Named nowhere: not delivered, retried (the upsert is idempotent).
        assert_eq!(out[3].verdict.class, Some(Transient));
        assert!(out[3].verdict.reason.contains("did not mention this lead"));
    }

    #[test]
    fn errors_naming_no_input_leave_the_silent_ones_transient() {
        // Shape: 207 answer whose StandardError has an empty "context" (the documented schema allows it).
        let body = br#"{"status":"COMPLETE","numErrors":1,"results":[],
          "errors":[{"status":"error","category":"VALIDATION_ERROR","message":"Property values were not valid","context":{}}]}"#;
        let out = parse_batch_answer(207, body, &NO_HEADERS[..], "leadline_id", &ids(&["meta:1"]), &clock());
        assert_eq!(out[0].verdict.class, Some(Transient));
        assert!(out[0].verdict.reason.contains("1 error(s) naming no lead"), "{}", out[0].verdict.reason);
    }

    #[test]
    fn a_single_result_answers_a_single_input() {
        // Shape: 200 answer whose result's properties omit the unique property (only hs_object_id echoed).
        let body = br#"{"status":"COMPLETE","results":[{"id":"9","new":false,"properties":{"hs_object_id":"9"}}]}"#;
        let out = parse_batch_answer(200, body, &NO_HEADERS[..], "leadline_id", &ids(&["meta:1"]), &clock());
        assert_eq!(out[0].verdict.crm_id.as_deref(), Some("9"));
        // With two inputs, position proves nothing: neither is assumed delivered.
        let out = parse_batch_answer(200, body, &NO_HEADERS[..], "leadline_id", &ids(&["a", "b"]), &clock());
        assert!(out.iter().all(|r| r.verdict.class == Some(Transient)));
    }

    #[test]
    fn a_refused_batch_blames_only_the_named_leads() {
        // Shape: whole-request 400 error {"status":"error","message","category":"VALIDATION_ERROR","errors":[…],
        // "context":{"ids":[…]},"correlationId"}.
        let body = br#"{"status":"error","message":"Property values were not valid","correlationId":"aeb5f871-7f07-4993-9211-075dc63e7cbf","category":"VALIDATION_ERROR",
          "errors":[{"message":"Invalid date","code":"INVALID_DATE","in":"date_of_birth"}],"context":{"ids":["b"]}}"#;
        let out = parse_batch_answer(400, body, &NO_HEADERS[..], "leadline_id", &ids(&["a", "b"]), &clock());
        assert_eq!(out[0].verdict.class, Some(Transient));
        assert_eq!(out[1].verdict.class, Some(PermanentData));
        assert_eq!(out[1].verdict.field.as_deref(), Some("date_of_birth"));
        // A whole-request 5xx fails every input alike.
        let out = parse_batch_answer(
            502,
            b"<html>Bad gateway</html>",
            &NO_HEADERS[..],
            "leadline_id",
            &ids(&["a", "b"]),
            &clock(),
        );
        assert!(out.iter().all(|r| r.verdict.class == Some(Transient)));
    }

    #[test]
    fn validation_names_the_field() {
        // Shape: error body {"status":"error","message","correlationId","category":"VALIDATION_ERROR","errors":[{"message","in"}]}.
        let body = br#"{"status":"error","message":"Property values were not valid: [{\"isValid\":false,\"message\":\"Email address ada@example is invalid\",\"error\":\"INVALID_EMAIL\",\"name\":\"email\"}]","correlationId":"c3128f30-2543-41cc-9e39-0fd384367bce","category":"VALIDATION_ERROR","errors":[{"message":"Email address ada@example is invalid","in":"email"}]}"#;
        let v = classify_error(400, body, &NO_HEADERS[..], &clock());
        assert_eq!(v.class, Some(PermanentData));
        assert_eq!(v.field.as_deref(), Some("email"));
        assert!(!v.reason.contains("ada@"), "{}", v.reason);
        assert!(v.reason.starts_with("HubSpot rejected property email (HTTP 400 VALIDATION_ERROR)"), "{}", v.reason);
    }

    #[test]
    fn a_property_missing_from_the_account_is_configuration() {
        // Shape: error body with errors[].code PROPERTY_DOESNT_EXIST and the property in context.propertyName.
        let body = br#"{"status":"error","message":"Property values were not valid","category":"VALIDATION_ERROR","errors":[{"message":"Property \"lead_score_x\" does not exist","code":"PROPERTY_DOESNT_EXIST","context":{"propertyName":["lead_score_x"]}}]}"#;
        let v = classify_error(400, body, &NO_HEADERS[..], &clock());
        assert_eq!(v.class, Some(PermanentConfig));
        assert_eq!(v.field.as_deref(), Some("lead_score_x"));
        assert!(v.alert);
    }

    #[test]
    fn secondly_limits_wait_briefly() {
        // Shape: 429 body {"status":"error","message":"You have reached your secondly limit.","errorType":"RATE_LIMIT",
        // "correlationId","policyName":"SECONDLY"} with X-HubSpot-RateLimit-* headers.
        let body = br#"{"status":"error","message":"You have reached your secondly limit.","errorType":"RATE_LIMIT","correlationId":"c033cdaa-2c40-4a64-ae48-b4cec88dad24","policyName":"SECONDLY"}"#;
        let v = classify_error(429, body, &NO_HEADERS[..], &clock());
        assert_eq!(v.class, Some(RateLimited));
        assert_eq!(v.hold_until, Some(clock().now + Duration::seconds(1)));
        assert!(!v.alert);

        // TEN_SECONDLY_ROLLING follows the window the headers announce.
        let body = br#"{"status":"error","message":"You have reached your ten_secondly_rolling limit.","errorType":"RATE_LIMIT","policyName":"TEN_SECONDLY_ROLLING"}"#;
        let headers = [("X-HubSpot-RateLimit-Interval-Milliseconds", "10000"), ("X-HubSpot-RateLimit-Remaining", "0")];
        let v = classify_error(429, body, &headers[..], &clock());
        assert_eq!(v.hold_until, Some(clock().now + Duration::seconds(10)));
        assert!(v.reason.contains("TEN_SECONDLY_ROLLING"));

        // Retry-After, when HubSpot sends one, wins.
        let v = classify_error(429, body, &[("Retry-After", "3")][..], &clock());
        assert_eq!(v.hold_until, Some(clock().now + Duration::seconds(3)));
    }

    #[test]
    fn the_daily_limit_holds_until_the_accounts_midnight_and_alerts() {
        // Shape: 429 body with "policyName":"DAILY" and X-HubSpot-RateLimit-Daily-Remaining: 0.
        let body = br#"{"status":"error","message":"You have reached your daily limit.","errorType":"RATE_LIMIT","correlationId":"4b3a2f1e-0000-4000-8000-000000000000","policyName":"DAILY"}"#;
        let headers = [("X-HubSpot-RateLimit-Daily", "250000"), ("X-HubSpot-RateLimit-Daily-Remaining", "0")];
        let v = classify_error(429, body, &headers[..], &clock());
        assert_eq!(v.class, Some(RateLimited));
        assert!(v.alert);
        // Midnight in New York on 2025-03-15 is 04:00 UTC (EDT).
        assert_eq!(v.hold_until, Some(Utc.with_ymd_and_hms(2025, 3, 15, 4, 0, 0).unwrap()));
        assert!(v.reason.contains("2025-03-15 00:00 EDT"), "{}", v.reason);

        // The account's own zone, when configured.
        let berlin = Clock { account_tz: chrono_tz::Europe::Berlin, ..clock() };
        let v = classify_error(429, body, &headers[..], &berlin);
        assert_eq!(v.hold_until, Some(Utc.with_ymd_and_hms(2025, 3, 14, 23, 0, 0).unwrap()));

        // No policyName, but the daily counter at zero: still the daily limit.
        let v = classify_error(429, br#"{"status":"error","message":"limit"}"#, &headers[..], &clock());
        assert!(v.alert && v.hold_until > Some(clock().now + Duration::hours(12)));
    }

    #[test]
    fn midnight_across_a_daylight_saving_change() {
        // 2025-11-01 12:00 New York (EDT); the next midnight, 2025-11-02 00:00, is still EDT (the change is at 02:00).
        let c = Clock::new(Utc.with_ymd_and_hms(2025, 11, 1, 16, 0, 0).unwrap());
        assert_eq!(next_midnight(&c), Utc.with_ymd_and_hms(2025, 11, 2, 4, 0, 0).unwrap());
        // A zone whose clocks skip midnight (America/Santiago, 2024-09-08 00:00 → 01:00).
        let c = Clock {
            now: Utc.with_ymd_and_hms(2024, 9, 7, 15, 0, 0).unwrap(),
            account_tz: chrono_tz::America::Santiago,
        };
        assert_eq!(next_midnight(&c), Utc.with_ymd_and_hms(2024, 9, 8, 4, 0, 0).unwrap());
    }

    #[test]
    fn unauthorized_is_a_credential_problem() {
        // Shape: 401 body {"status":"error","message":"Authentication credentials not found…","correlationId","category":"INVALID_AUTHENTICATION"}.
        let body = br#"{"status":"error","message":"Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview","correlationId":"501e2a8e-1f41-4d3a-9c39-4a1f0b1e3c11","category":"INVALID_AUTHENTICATION"}"#;
        let v = classify_error(401, body, &NO_HEADERS[..], &clock());
        assert_eq!(v.class, Some(PermanentConfig));
        assert!(v.credential_problem && v.alert);
        assert!(v.reason.contains("expired or invalid"));
    }

    #[test]
    fn missing_scopes_are_named() {
        // Shape: 403 body {"status":"error","message":"This app hasn't been granted all required scopes…",
        // "errors":[{"message":"One or more of the following scopes are required.","context":{"requiredGranularScopes":[…]}}],
        // "category":"MISSING_SCOPES"}.
        let body = br#"{"status":"error","message":"This app hasn't been granted all required scopes to make this call. Read more about required scopes here: https://developers.hubspot.com/scopes.","correlationId":"2b9d6a5c-55c1-4d36-9a41-2a7d5c3b0e7f","errors":[{"message":"One or more of the following scopes are required.","context":{"requiredGranularScopes":["crm.objects.contacts.write","crm.objects.contacts.read"]}}],"links":{"scopes":"https://developers.hubspot.com/scopes"},"category":"MISSING_SCOPES"}"#;
        let v = classify_error(403, body, &NO_HEADERS[..], &clock());
        assert_eq!(v.class, Some(PermanentConfig));
        assert!(v.reason.contains("crm.objects.contacts.write, crm.objects.contacts.read"), "{}", v.reason);
        assert!(!v.credential_problem);

        // The schema's string form of the context: "{missingScopes=[scope1, scope2]}".
        let body = br#"{"status":"error","message":"missing scopes","category":"MISSING_SCOPES","errors":[{"message":"m","context":"{missingScopes=[crm.objects.contacts.write, crm.schemas.contacts.read]}"}]}"#;
        let v = classify_error(403, body, &NO_HEADERS[..], &clock());
        assert!(v.reason.contains("crm.objects.contacts.write, crm.schemas.contacts.read"), "{}", v.reason);
    }

    #[test]
    fn a_conflict_is_delivered_by_look_up() {
        // Shape: 409 body {"status":"error","message":"Contact already exists. Existing ID: 123","correlationId","category":"CONFLICT"}.
        let body = br#"{"status":"error","message":"Contact already exists. Existing ID: 123","correlationId":"f3b0c1d2-0000-4000-8000-000000000001","category":"CONFLICT"}"#;
        let v = classify_error(409, body, &NO_HEADERS[..], &clock());
        assert!(v.is_delivered());
        assert_eq!(v.crm_id.as_deref(), Some("123"));
        assert_eq!(v.created, Some(false));

        let v = classify_error(
            409,
            br#"{"status":"error","message":"Conflict","category":"CONFLICT"}"#,
            &NO_HEADERS[..],
            &clock(),
        );
        assert_eq!(v.class, Some(Ambiguous));

        // One id for a batch of several: no lead is assumed to be it.
        let body = br#"{"status":"error","message":"Contact already exists. Existing ID: 123","category":"CONFLICT"}"#;
        let out = parse_batch_answer(409, body, &NO_HEADERS[..], "email", &ids(&["a@x.org", "b@x.org"]), &clock());
        assert!(out.iter().all(|r| r.verdict.class == Some(Transient)), "{out:?}");
        let out = parse_batch_answer(409, body, &NO_HEADERS[..], "email", &ids(&["a@x.org"]), &clock());
        assert_eq!(out[0].verdict.crm_id.as_deref(), Some("123"));
    }

    #[test]
    fn server_errors_are_transient() {
        // Shape: 5xx with HubSpot's error body, and a gateway's HTML page.
        let body = br#"{"status":"error","message":"internal error","correlationId":"x","category":"INTERNAL_ERROR"}"#;
        for status in [500, 502, 503, 504] {
            assert_eq!(classify_error(status, body, &NO_HEADERS[..], &clock()).class, Some(Transient));
        }
        let v = classify_error(503, b"<html>down</html>", &[("Retry-After", "30")][..], &clock());
        assert_eq!(v.class, Some(Transient));
        assert_eq!(v.hold_until, Some(clock().now + Duration::seconds(30)));
    }

    #[test]
    fn reasons_never_quote_the_leads_values() {
        // Shape: 207 answer whose error message echoes the unique value (an e-mail used as idProperty).
        let body = br#"{"status":"COMPLETE","numErrors":1,"results":[],"errors":[{"status":"error","category":"VALIDATION_ERROR","message":"Lead Grace.Hopper@Navy.mil failed: phone 030 1234567 invalid","context":{"ids":["grace.hopper@navy.mil"]}}]}"#;
        let out = parse_batch_answer(207, body, &NO_HEADERS[..], "email", &ids(&["grace.hopper@navy.mil"]), &clock());
        let reason = &out[0].verdict.reason;
        assert_eq!(out[0].verdict.class, Some(PermanentData));
        assert!(!reason.to_lowercase().contains("hopper") && !reason.contains("1234567"), "{reason}");
    }

    #[test]
    fn one_input_per_unique_value_in_a_batch() {
        let ids = [Some("a@x.org"), None, Some("A@X.org"), Some("b@x.org"), Some("a@x.org")];
        assert_eq!(first_of_each(&ids), vec![true, false, false, true, false]);
    }

    #[test]
    fn the_connection_check_says_what_is_wrong() {
        let c = |status: u16, body: &[u8], prop: &str| {
            check_message(status, body, &NO_HEADERS[..], "contacts", prop, "HUBSPOT_TOKEN", &clock())
        };
        let ok = c(200, br#"{"name":"leadline_id","hasUniqueValue":true}"#, "leadline_id");
        assert!(ok.ok && ok.message.contains("exists and is unique"), "{}", ok.message);
        assert!(c(200, br#"{"name":"email","hasUniqueValue":false}"#, "email").ok);
        let not_unique = c(200, br#"{"name":"phone","hasUniqueValue":false}"#, "phone");
        assert!(!not_unique.ok && not_unique.message.contains("unique"), "{}", not_unique.message);
        let missing = c(404, br#"{"status":"error","category":"OBJECT_NOT_FOUND"}"#, "leadline_id");
        assert!(!missing.ok && missing.message.contains("no contacts property leadline_id"), "{}", missing.message);
        let expired = c(401, br#"{"status":"error","category":"EXPIRED_AUTHENTICATION"}"#, "email");
        assert!(!expired.ok && expired.message.contains("HUBSPOT_TOKEN"), "{}", expired.message);
        let scopes = c(
            403,
            br#"{"status":"error","category":"MISSING_SCOPES","errors":[{"message":"m","context":{"requiredGranularScopes":["crm.schemas.contacts.read"]}}]}"#,
            "email",
        );
        assert!(!scopes.ok && scopes.message.contains("crm.schemas.contacts.read"), "{}", scopes.message);
    }
}
