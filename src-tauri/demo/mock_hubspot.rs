//! A mock of HubSpot's CRM v3 API on loopback: enough of it to deliver leads to, and to misbehave on command.
//!
//! Used by the integration tests (switched mid-test) and meant for the demo. It stores contacts keyed by their
//! unique property, counts creates, updates and requests, enforces a token-bucket "secondly" limit when
//! configured, and records every request's arrival and every wait it announced — a `Retry-After`, or one interval
//! of its secondly limit — in a [`WaitLedger`] (`demo/waits.rs`), so a test can check that nothing arrived inside
//! an announced wait.
//!
//! Endpoints (shapes from developers.hubspot.com: "Upsert contacts" (CRM v3 batch upsert), the CRM error and
//! batch-error schemas, "API usage guidelines" for 429s, and the properties API):
//! - `POST /crm/v3/objects/contacts/batch/upsert` — `{"inputs":[{"id","idProperty","properties"}]}`;
//! - `GET /crm/v3/properties/contacts/{name}` — the property's definition, with `hasUniqueValue`;
//! - `GET /crm/v3/objects/contacts/{id}?idProperty=<unique property>` — "Retrieve a contact by ID or unique
//!   property value": the contact, or 404 `OBJECT_NOT_FOUND`. The mock adds `X-Mock-Writes` (how many times the
//!   contact was written) for tests that count duplicates from outside the process.
//!
//! Every request needs `Authorization: Bearer` [`TOKEN`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::waits::{Announced, Refusal, WaitLedger};

/// The private app token the mock accepts.
pub const TOKEN: &str = "demo-hubspot-token";

/// Most inputs one batch request may carry (HubSpot's batch limit).
const MAX_INPUTS: usize = 100;

/// How the mock behaves right now. `Default` is a healthy account.
#[derive(Debug, Clone, Default)]
pub struct HubspotBehaviour {
    /// Every request is answered 401 `EXPIRED_AUTHENTICATION`, as after the token expired.
    pub token_expired: bool,
    /// Every request is answered 403 `MISSING_SCOPES`.
    pub missing_scopes: bool,
    /// Every request is answered 429 with `policyName: DAILY` (the account's daily limit is used up).
    pub daily_limit_reached: bool,
    /// A token bucket: at most `max` requests per `interval_ms`, refilled continuously; an empty bucket answers
    /// 429 with `policyName: SECONDLY`.
    pub secondly: Option<Secondly>,
    /// Successful answers carry no `X-HubSpot-RateLimit-*` usage headers (only a 429 does), so a client cannot
    /// pace itself from them and meets the limit: the path where the limit is hit and waited out.
    pub quiet_usage_headers: bool,
    /// Inputs whose `email` property is one of these (case-insensitively) are refused as `INVALID_EMAIL`.
    pub reject_emails: Vec<String>,
    /// Refuse a whole batch holding a rejected input (an e-mail, or with `strict_phone` a phone) with
    /// `400 VALIDATION_ERROR` (naming it in `context.ids`) instead of answering `207 Multi-Status`.
    pub reject_whole_batch: bool,
    /// A validation rule on `phone` (the demo's "field-format change"): inputs whose phone is not in E.164
    /// (`+` and digits) are refused as `INVALID_PHONE_NUMBER`.
    pub strict_phone: bool,
    /// Down for maintenance: every upsert is answered `503` with `Retry-After` of this many seconds.
    pub maintenance_retry_after: Option<u64>,
    /// Every upsert is refused (`503` for maintenance, or `429`) with `Retry-After` while this lasts.
    pub refusal: Option<Refusal>,
    /// Added to every upsert's answer time.
    pub latency_ms: u64,
    /// Share of upserts answered `502 Bad Gateway` before anything is written (a network blip).
    pub blip_ratio: f64,
    /// Share of upserts that are written and then answered only after `hang_ms` (the client has given up by
    /// then: it cannot know whether the write happened).
    pub hang_after_write_ratio: f64,
    pub hang_ms: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct Secondly {
    pub max: u32,
    pub interval_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Contact {
    pub id: String,
    pub properties: Map<String, Value>,
    pub writes: u32,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct HubspotStats {
    pub contacts: usize,
    pub creates: u64,
    pub updates: u64,
    /// Every request, whatever its answer.
    pub requests: u64,
    /// Batch upsert requests, whatever their answer.
    pub upsert_requests: u64,
    /// Requests answered 429.
    pub rate_limited: u64,
    /// Requests that arrived while a wait this mock announced (a `Retry-After`, a secondly 429) was still running,
    /// on the wire or later (see [`WaitLedger`]).
    pub early_requests: u64,
    /// Inputs in the largest batch received.
    pub largest_batch: usize,
}

struct Inner {
    behaviour: HubspotBehaviour,
    contacts: Vec<Contact>,
    /// (unique property, value in lower case) → index in `contacts`.
    by_unique: HashMap<(String, String), usize>,
    stats: HubspotStats,
    /// Token bucket: tokens left and when they were counted.
    bucket: Option<(f64, Instant)>,
    /// Every request: arrival and status.
    log: Vec<(DateTime<Utc>, u16)>,
    /// Properties that exist, and whether their values are unique.
    properties: HashMap<String, bool>,
    /// Contacts forgotten by [`MockHubspot::forget_old`]: record ids go on counting.
    forgotten: usize,
}

impl Default for Inner {
    fn default() -> Self {
        let properties = [
            ("email", false),
            ("leadline_id", true),
            ("firstname", false),
            ("lastname", false),
            ("phone", false),
            ("leadline_source", false),
            ("hs_lead_status", false),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Inner {
            behaviour: HubspotBehaviour::default(),
            contacts: Vec::new(),
            by_unique: HashMap::new(),
            stats: HubspotStats::default(),
            bucket: None,
            log: Vec::new(),
            properties,
            forgotten: 0,
        }
    }
}

#[derive(Clone, Default)]
pub struct MockHubspot {
    inner: Arc<Mutex<Inner>>,
    waits: WaitLedger,
}

impl MockHubspot {
    /// Starts the mock on `addr` (port 0 for any free port) and returns it with its address.
    pub async fn start(addr: SocketAddr) -> anyhow::Result<(MockHubspot, SocketAddr)> {
        let mock = MockHubspot::default();
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let app = mock.router();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "mock HubSpot stopped");
            }
        });
        Ok((mock, local))
    }

    pub fn router(&self) -> Router {
        let api = Router::new()
            .route("/crm/v3/objects/contacts/batch/upsert", post(batch_upsert))
            .route("/crm/v3/properties/contacts/{name}", get(property))
            .route("/crm/v3/objects/contacts/{id}", get(read_contact))
            .with_state(self.clone());
        self.waits.layer(api)
    }

    /// The waits this mock announced and the requests that arrived inside them.
    pub fn waits(&self) -> &WaitLedger {
        &self.waits
    }

    pub fn set(&self, behaviour: HubspotBehaviour) {
        self.inner.lock().expect("mock lock").behaviour = behaviour;
    }

    pub fn behaviour(&self) -> HubspotBehaviour {
        self.inner.lock().expect("mock lock").behaviour.clone()
    }

    /// For the demo, which runs for days inside the app: forgets all but the newest `keep` contacts and the request
    /// logs beyond `keep` entries, so the mock does not grow with every demo lead. Tests never call it.
    pub fn forget_old(&self, keep: usize) {
        let mut guard = self.inner.lock().expect("mock lock");
        let inner = &mut *guard;
        let excess = inner.contacts.len().saturating_sub(keep);
        if excess > 0 {
            inner.contacts.drain(..excess);
            inner.forgotten += excess;
            inner.by_unique.retain(|_, i| *i >= excess);
            for i in inner.by_unique.values_mut() {
                *i -= excess;
            }
        }
        let old_log = inner.log.len().saturating_sub(keep);
        inner.log.drain(..old_log);
        self.waits.forget_old(keep);
    }

    pub fn stats(&self) -> HubspotStats {
        let inner = self.inner.lock().expect("mock lock");
        HubspotStats {
            contacts: inner.contacts.len(),
            early_requests: self.waits.inside().total(),
            ..inner.stats.clone()
        }
    }

    /// The contact whose unique property `property` is `value`.
    pub fn contact(&self, property: &str, value: &str) -> Option<Contact> {
        let inner = self.inner.lock().expect("mock lock");
        let i = *inner.by_unique.get(&(property.to_string(), value.to_lowercase()))?;
        Some(inner.contacts[i].clone())
    }

    pub fn contacts(&self) -> Vec<Contact> {
        self.inner.lock().expect("mock lock").contacts.clone()
    }

    /// Every request so far: when it arrived and the status it got.
    pub fn requests(&self) -> Vec<(DateTime<Utc>, u16)> {
        self.inner.lock().expect("mock lock").log.clone()
    }
}

fn error_id() -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", rand::random::<u32>(), rand::random::<u64>() & 0xffff_ffff_ffff)
}

/// What every request goes through: counting, the token, the scopes, the daily and secondly limits.
/// `Some` is the answer.
fn gate(inner: &mut Inner, headers: &HeaderMap) -> Option<Response> {
    let now = Utc::now();
    inner.stats.requests += 1;
    let b = inner.behaviour.clone();
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if bearer != Some(TOKEN) {
        // Shape: 401 error body {"status":"error","message","correlationId","category":"INVALID_AUTHENTICATION"}.
        return Some(answer(
            StatusCode::UNAUTHORIZED,
            json!({"status": "error", "message": "Authentication credentials not found. This API supports OAuth 2.0 \
                   authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview",
                   "correlationId": error_id(), "category": "INVALID_AUTHENTICATION"}),
            &[],
        ));
    }
    if b.token_expired {
        // Shape: 401 error body with category EXPIRED_AUTHENTICATION, as an expired OAuth access token gets.
        return Some(answer(
            StatusCode::UNAUTHORIZED,
            json!({"status": "error", "message": "The OAuth token used to make this call expired 1 minute(s) ago.",
                   "correlationId": error_id(), "category": "EXPIRED_AUTHENTICATION"}),
            &[],
        ));
    }
    if b.missing_scopes {
        // Shape: 403 error body, category MISSING_SCOPES, errors[].context.requiredGranularScopes.
        return Some(answer(
            StatusCode::FORBIDDEN,
            json!({"status": "error", "message": "This app hasn't been granted all required scopes to make this call. \
                   Read more about required scopes here: https://developers.hubspot.com/scopes.",
                   "correlationId": error_id(),
                   "errors": [{"message": "One or more of the following scopes are required.",
                               "context": {"requiredGranularScopes": ["crm.objects.contacts.write"]}}],
                   "links": {"scopes": "https://developers.hubspot.com/scopes"}, "category": "MISSING_SCOPES"}),
            &[],
        ));
    }
    if b.daily_limit_reached {
        inner.stats.rate_limited += 1;
        // Shape: 429 body {"status":"error","message":"You have reached your daily limit.","errorType":"RATE_LIMIT",
        // "correlationId","policyName":"DAILY","requestId"} with the X-HubSpot-RateLimit-Daily(-Remaining) headers
        // ("API usage guidelines"). The reset is the account's midnight, which the answer does not say.
        return Some(answer(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"status": "error", "message": "You have reached your daily limit.", "errorType": "RATE_LIMIT",
                   "correlationId": error_id(), "policyName": "DAILY", "requestId": error_id()}),
            &[("X-HubSpot-RateLimit-Daily", "250000".into()), ("X-HubSpot-RateLimit-Daily-Remaining", "0".into())],
        ));
    }
    if let Some(limit) = b.secondly {
        let rate = f64::from(limit.max) / limit.interval_ms.max(1) as f64;
        let clock = Instant::now();
        let (tokens, since) = inner.bucket.unwrap_or((f64::from(limit.max), clock));
        let tokens = (tokens + clock.duration_since(since).as_millis() as f64 * rate).min(f64::from(limit.max));
        if tokens < 1.0 {
            inner.bucket = Some((tokens, clock));
            inner.stats.rate_limited += 1;
            // Shape: 429 body {"status":"error","message":"You have reached your secondly limit.","errorType":
            // "RATE_LIMIT","correlationId","policyName":"SECONDLY"} with X-HubSpot-RateLimit-Max / -Remaining /
            // -Interval-Milliseconds headers ("API usage guidelines"); the wait announced is one interval.
            let mut refused = answer(
                StatusCode::TOO_MANY_REQUESTS,
                json!({"status": "error", "message": "You have reached your secondly limit.", "errorType": "RATE_LIMIT",
                       "correlationId": error_id(), "policyName": "SECONDLY"}),
                &[
                    ("X-HubSpot-RateLimit-Max", limit.max.to_string()),
                    ("X-HubSpot-RateLimit-Remaining", "0".into()),
                    ("X-HubSpot-RateLimit-Interval-Milliseconds", limit.interval_ms.to_string()),
                ],
            );
            refused.extensions_mut().insert(Announced(now + chrono::Duration::milliseconds(limit.interval_ms as i64)));
            return Some(refused);
        }
        inner.bucket = Some((tokens - 1.0, clock));
    }
    None
}

/// A 503 with `Retry-After`: HubSpot documents no body for it; the text is the mock's.
fn maintenance(retry_after: &str) -> Response {
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"status": "error", "message": "Scheduled maintenance: HubSpot is temporarily unavailable.",
               "correlationId": error_id(), "category": "SERVICE_UNAVAILABLE"}),
        &[("Retry-After", retry_after.to_string())],
    )
}

fn answer(status: StatusCode, body: Value, headers: &[(&str, String)]) -> Response {
    let mut response = (status, Json(body)).into_response();
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) =
            (axum::http::HeaderName::from_bytes(k.as_bytes()), axum::http::HeaderValue::from_str(v))
        {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// A 400 `VALIDATION_ERROR` about the request as a whole.
fn invalid_request(message: &str, context: Value) -> Response {
    // Shape: error body {"status":"error","message","correlationId","category":"VALIDATION_ERROR","errors":[…],
    // "context":{…}}.
    answer(
        StatusCode::BAD_REQUEST,
        json!({"status": "error", "message": message, "correlationId": error_id(), "category": "VALIDATION_ERROR",
               "context": context}),
        &[],
    )
}

async fn batch_upsert(State(mock): State<MockHubspot>, headers: HeaderMap, body: String) -> Response {
    let b = mock.behaviour();
    if b.latency_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(b.latency_ms)).await;
    }
    let blip = b.blip_ratio > 0.0 && rand::random::<f64>() < b.blip_ratio;
    let hang = b.hang_after_write_ratio > 0.0 && rand::random::<f64>() < b.hang_after_write_ratio;
    let response = {
        let mut inner = mock.inner.lock().expect("mock lock");
        let now = Utc::now();
        let refused = b.refusal.and_then(|r| Some((r.status, r.retry_after(now)?)));
        let response = if let Some((status, retry_after)) = refused {
            inner.stats.requests += 1;
            inner.stats.upsert_requests += 1;
            if status == 429 {
                inner.stats.rate_limited += 1;
                // Shape: the 429 body of "API usage guidelines" (see `gate`), with the Retry-After HubSpot may add.
                answer(
                    StatusCode::TOO_MANY_REQUESTS,
                    json!({"status": "error", "message": "You have reached your secondly limit.",
                           "errorType": "RATE_LIMIT", "correlationId": error_id(), "policyName": "SECONDLY"}),
                    &[("Retry-After", retry_after)],
                )
            } else {
                maintenance(&retry_after)
            }
        } else if let Some(seconds) = b.maintenance_retry_after {
            inner.stats.requests += 1;
            inner.stats.upsert_requests += 1;
            maintenance(&seconds.to_string())
        } else if blip {
            inner.stats.requests += 1;
            inner.stats.upsert_requests += 1;
            answer(StatusCode::BAD_GATEWAY, json!({"status": "error", "message": "Bad gateway"}), &[])
        } else {
            upsert_locked(&mut inner, &headers, &body, now)
        };
        inner.log.push((now, response.status().as_u16()));
        response
    };
    if hang && response.status().is_success() {
        // Written, but the answer comes too late for the client.
        tokio::time::sleep(std::time::Duration::from_millis(b.hang_ms)).await;
    }
    response
}

fn upsert_locked(inner: &mut Inner, headers: &HeaderMap, body: &str, now: DateTime<Utc>) -> Response {
    inner.stats.upsert_requests += 1;
    if let Some(r) = gate(inner, headers) {
        return r;
    }
    let Ok(request) = serde_json::from_str::<Value>(body) else {
        return invalid_request("Invalid input JSON: the request body is not JSON", json!({}));
    };
    let empty = Vec::new();
    let inputs = request.get("inputs").and_then(Value::as_array).unwrap_or(&empty);
    if inputs.is_empty() || inputs.len() > MAX_INPUTS {
        return invalid_request(&format!("Batch input must have between 1 and {MAX_INPUTS} inputs"), json!({}));
    }
    inner.stats.largest_batch = inner.stats.largest_batch.max(inputs.len());
    let mut seen: Vec<String> = Vec::new();
    for input in inputs {
        let id = input.get("id").and_then(Value::as_str).unwrap_or("").to_lowercase();
        let property = input.get("idProperty").and_then(Value::as_str).unwrap_or("");
        if id.is_empty() || property.is_empty() {
            return invalid_request("Each input needs an id and an idProperty", json!({}));
        }
        if !inner.properties.get(property).copied().unwrap_or(false) && property != "email" {
            return invalid_request(
                &format!("Property {property} is not a unique property and cannot be used as idProperty"),
                json!({"propertyName": [property]}),
            );
        }
        if seen.contains(&id) {
            return invalid_request("Duplicate IDs found in batch input", json!({"ids": [id]}));
        }
        seen.push(id);
    }

    let reject = inner.behaviour.reject_emails.clone();
    let rejected = |input: &Value| {
        let email = input.pointer("/properties/email").and_then(Value::as_str).unwrap_or("");
        reject.iter().any(|r| r.eq_ignore_ascii_case(email))
    };
    let refused: Vec<&Value> = inputs.iter().filter(|i| rejected(i)).collect();
    if inner.behaviour.reject_whole_batch && !refused.is_empty() {
        let ids: Vec<&str> = refused.iter().filter_map(|i| i.get("id").and_then(Value::as_str)).collect();
        // Shape: whole-request 400 VALIDATION_ERROR naming the property in errors[].in and the inputs in context.
        return answer(
            StatusCode::BAD_REQUEST,
            json!({"status": "error", "message": "Property values were not valid", "correlationId": error_id(),
                   "category": "VALIDATION_ERROR",
                   "errors": [{"message": "Email address is invalid", "code": "INVALID_EMAIL", "in": "email"}],
                   "context": {"ids": ids}}),
            &[],
        );
    }

    let bad_phone = |input: &Value| {
        let phone = input.pointer("/properties/phone").and_then(Value::as_str).unwrap_or("");
        let e164 = phone.len() > 7 && phone.starts_with('+') && phone[1..].chars().all(|c| c.is_ascii_digit());
        !phone.is_empty() && !e164
    };
    let bad_phones: Vec<&str> = (inputs.iter())
        .filter(|i| inner.behaviour.strict_phone && bad_phone(i))
        .filter_map(|i| i.get("id").and_then(Value::as_str))
        .collect();
    if inner.behaviour.reject_whole_batch && !bad_phones.is_empty() {
        // Shape: whole-request 400 VALIDATION_ERROR naming the property in errors[].in and the inputs in context.
        return answer(
            StatusCode::BAD_REQUEST,
            json!({"status": "error", "message": "Property values were not valid", "correlationId": error_id(),
                   "category": "VALIDATION_ERROR",
                   "errors": [{"message": "Phone number is not valid: use the international format",
                               "code": "INVALID_PHONE_NUMBER", "in": "phone"}],
                   "context": {"ids": bad_phones}}),
            &[],
        );
    }

    let mut results = Vec::new();
    let mut errors = Vec::new();
    for input in inputs {
        let id = input["id"].as_str().unwrap_or_default().to_string();
        let property = input["idProperty"].as_str().unwrap_or_default().to_string();
        let phone = input.pointer("/properties/phone").and_then(Value::as_str).unwrap_or("");
        let e164 = phone.len() > 7 && phone.starts_with('+') && phone[1..].chars().all(|c| c.is_ascii_digit());
        if inner.behaviour.strict_phone && !phone.is_empty() && !e164 {
            // Shape: as INVALID_EMAIL below (the documented StandardError of a 207 answer), for a property with a
            // validation rule; the error code's name is the mock's.
            errors.push(json!({
                "status": "error",
                "category": "VALIDATION_ERROR",
                "message": format!("Property values were not valid: [{{\"isValid\":false,\"message\":\"{phone} is not a valid phone number: use the international format\",\"error\":\"INVALID_PHONE_NUMBER\",\"name\":\"phone\"}}]"),
                "errors": [{"message": format!("{phone} is not a valid phone number: use the international format"), "code": "INVALID_PHONE_NUMBER", "in": "phone"}],
                "context": {"ids": [id]},
            }));
            continue;
        }
        if rejected(input) {
            let email = input.pointer("/properties/email").and_then(Value::as_str).unwrap_or("");
            // Shape: one errors[] entry of a 207 answer (StandardError): status, category, message (HubSpot's
            // "Property values were not valid: [{…}]" with the value in it), errors[] with code and `in`, and
            // context naming the failed input.
            errors.push(json!({
                "status": "error",
                "category": "VALIDATION_ERROR",
                "message": format!("Property values were not valid: [{{\"isValid\":false,\"message\":\"Email address {email} is invalid\",\"error\":\"INVALID_EMAIL\",\"name\":\"email\"}}]"),
                "errors": [{"message": format!("Email address {email} is invalid"), "code": "INVALID_EMAIL", "in": "email"}],
                "context": {"ids": [id]},
            }));
            continue;
        }
        let mut properties: Map<String, Value> = Map::new();
        if let Some(p) = input.get("properties").and_then(Value::as_object) {
            for (k, v) in p {
                // HubSpot keeps every property value as text.
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                properties.insert(k.clone(), Value::String(text));
            }
        }
        let key = (property.clone(), id.to_lowercase());
        let stored_value = if property == "email" { id.to_lowercase() } else { id.clone() };
        properties.insert(property.clone(), Value::String(stored_value));
        if let Some(email) = properties.get("email").and_then(Value::as_str).map(str::to_lowercase) {
            properties.insert("email".into(), Value::String(email));
        }
        let (index, created) = match inner.by_unique.get(&key) {
            Some(&i) => {
                let contact = &mut inner.contacts[i];
                contact.properties.extend(properties);
                contact.writes += 1;
                inner.stats.updates += 1;
                (i, false)
            }
            None => {
                let i = inner.contacts.len();
                let record_id = ((i + inner.forgotten) as u64 + 1001).to_string();
                properties.insert("hs_object_id".into(), Value::String(record_id.clone()));
                properties.insert("createdate".into(), Value::String(now.to_rfc3339()));
                inner.contacts.push(Contact { id: record_id, properties, writes: 1 });
                inner.by_unique.insert(key, i);
                inner.stats.creates += 1;
                (i, true)
            }
        };
        let contact = &inner.contacts[index];
        // Shape: a results[] entry of the batch upsert answer (SimplePublicUpsertObject): id, new, properties,
        // createdAt, updatedAt, archived.
        results.push(json!({
            "id": contact.id,
            "new": created,
            "properties": contact.properties,
            "createdAt": contact.properties.get("createdate").cloned().unwrap_or(Value::Null),
            "updatedAt": now.to_rfc3339(),
            "archived": false,
        }));
    }
    let mut headers: Vec<(&str, String)> = Vec::new();
    if let Some(limit) = inner.behaviour.secondly.filter(|_| !inner.behaviour.quiet_usage_headers) {
        let left = inner.bucket.map_or(0.0, |(t, _)| t).max(0.0) as u64;
        headers.push(("X-HubSpot-RateLimit-Max", limit.max.to_string()));
        headers.push(("X-HubSpot-RateLimit-Remaining", left.to_string()));
        headers.push(("X-HubSpot-RateLimit-Interval-Milliseconds", limit.interval_ms.to_string()));
    }
    if errors.is_empty() {
        // Shape: 200 batch upsert answer (BatchResponseSimplePublicUpsertObject): status, results, startedAt,
        // completedAt.
        answer(
            StatusCode::OK,
            json!({"status": "COMPLETE", "results": results, "startedAt": now.to_rfc3339(),
                   "completedAt": Utc::now().to_rfc3339()}),
            &headers,
        )
    } else {
        // Shape: 207 Multi-Status (BatchResponseSimplePublicUpsertObjectWithErrors): results for the good inputs,
        // errors[] for the others, numErrors.
        answer(
            StatusCode::MULTI_STATUS,
            json!({"status": "COMPLETE", "results": results, "numErrors": errors.len(), "errors": errors,
                   "startedAt": now.to_rfc3339(), "completedAt": Utc::now().to_rfc3339()}),
            &headers,
        )
    }
}

#[derive(serde::Deserialize)]
struct ReadQuery {
    #[serde(rename = "idProperty")]
    id_property: Option<String>,
}

async fn read_contact(
    State(mock): State<MockHubspot>,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<ReadQuery>,
    headers: HeaderMap,
) -> Response {
    let mut inner = mock.inner.lock().expect("mock lock");
    if let Some(r) = gate(&mut inner, &headers) {
        return r;
    }
    let found = match q.id_property.as_deref() {
        Some(property) => inner.by_unique.get(&(property.to_string(), id.to_lowercase())).copied(),
        None => inner.contacts.iter().position(|c| c.id == id),
    };
    match found.map(|i| inner.contacts[i].clone()) {
        // Shape: SimplePublicObject — id, properties, createdAt, updatedAt, archived.
        Some(c) => answer(
            StatusCode::OK,
            json!({"id": c.id, "properties": c.properties, "createdAt": c.properties.get("createdate"),
                   "updatedAt": Utc::now().to_rfc3339(), "archived": false}),
            &[("X-Mock-Writes", c.writes.to_string())],
        ),
        None => answer(
            StatusCode::NOT_FOUND,
            json!({"status": "error", "message": "resource not found", "correlationId": error_id(),
                   "category": "OBJECT_NOT_FOUND"}),
            &[],
        ),
    }
}

async fn property(State(mock): State<MockHubspot>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let mut inner = mock.inner.lock().expect("mock lock");
    let now = Utc::now();
    let response = match gate(&mut inner, &headers) {
        Some(r) => r,
        None => match inner.properties.get(&name) {
            // Shape: properties API "Read a property": name, label, type, fieldType, groupName, hasUniqueValue, …
            Some(unique) => answer(
                StatusCode::OK,
                json!({"name": name, "label": name, "type": "string", "fieldType": "text",
                       "groupName": "contactinformation", "hasUniqueValue": unique, "hidden": false,
                       "formField": true, "calculated": false, "archived": false}),
                &[],
            ),
            // Shape: 404 error body, category OBJECT_NOT_FOUND.
            None => answer(
                StatusCode::NOT_FOUND,
                json!({"status": "error", "message": format!("Unable to find property with name {name}"),
                       "correlationId": error_id(), "category": "OBJECT_NOT_FOUND"}),
                &[],
            ),
        },
    };
    inner.log.push((now, response.status().as_u16()));
    response
}
