//! A mock CRM on loopback that behaves like the real ones and misbehaves on command.
//!
//! Used by the demo (on a schedule) and by the integration tests (switched mid-test). It keeps every record it
//! created, so a test can count at the end: no lead lost, none written twice.
//!
//! Endpoints (JSON):
//! - `POST /crm/leads` — create; honours `Idempotency-Key` as the IETF draft describes it, by the key alone: a
//!   repeated key gets the stored answer, the same key with a different body 422, a repeat while the first is
//!   still being processed 409; a new key creates a new record (even for an external id it already holds).
//! - `PUT /crm/leads/{external_id}` — upsert by external id.
//! - `GET /crm/leads/search/{external_id}` — `{"results": [{"id": ...}]}` or an empty list.
//! - `POST /crm/plain` — create with no idempotency at all (a second call makes a second record).
//! - `PUT /notify/{external_id}` — the follow-up step; needs `previous_steps.crm.crm_id`.
//! - `PUT /tasks/{external_id}` — a call task for a sales rep (the follow-up's fallback for old leads).
//! - `GET /_mock/stats` — counts.
//!
//! The CRM's routes (`/crm/…`) and the Graph API's (`/graph/…`) each keep a [`WaitLedger`] (`demo/waits.rs`):
//! every `Retry-After` they gave and the requests that arrived inside it.
//!
//! It also plays the lead *sources'* own endpoints, for the Meta fetch step and reconciliation:
//! - `GET /graph/{version}/{leadgen_id}?fields=…&access_token=…` — Meta's Graph API lead object (Graph API
//!   "Retrieving leads": `{id, created_time: "2026-11-30T09:14:00+0000", ad_id, form_id, field_data: [{name,
//!   values}]}`); an unknown id gets Graph error 100 / subcode 33 ("does not exist").
//! - `GET /graph/{version}/{form_id}/leads?access_token=…&filtering=[…time_created GREATER_THAN…]` — the
//!   listing of a form's leads, 50 a page with `paging.next`.
//! - Graph errors follow the "Handling errors" reference (`{"error": {message, type, code, error_subcode,
//!   fbtrace_id}}`): a wrong or expired token gets 400 / code 190; [`GraphBehaviour::throttled`] answers code 4
//!   ("Application request limit reached") or 80001 with an `X-Business-Use-Case-Usage` header (its
//!   `estimated_time_to_regain_access` in minutes), as the "Rate limiting" reference shows.
//! - `GET /source/{name}/leads?since=<unix>` — a generic source's list, `{"items": […], "next": url|null}`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use rand::Rng;
use serde::Serialize;
use serde_json::{json, Value};

use super::waits::{Refusal, WaitLedger};

/// How the mock CRM behaves right now. `Default` is a healthy CRM.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// Answer every request with this status (503 maintenance, 401 expired token, 500...).
    pub fail_with: Option<u16>,
    /// `Retry-After` seconds sent with 429 and 503 answers.
    pub retry_after_secs: Option<u64>,
    /// At most this many writes per second; more get 429.
    pub rate_limit_per_sec: Option<u32>,
    /// The field-format change: phones not in E.164 (`+` and digits) are rejected with 422.
    pub strict_phone: bool,
    /// Share of requests answered with a 502 from "the load balancer" (a network blip).
    pub blip_ratio: f64,
    /// Share of writes that are stored and then not answered until `hang_ms` has passed (a timeout after the
    /// write happened).
    pub hang_after_write_ratio: f64,
    pub hang_ms: u64,
    /// Delay before answering anything.
    pub latency_ms: u64,
    /// A token bucket: `(requests per second, burst)`. Writes beyond it get 429 without `Retry-After`, with
    /// `x-ratelimit-limit` (per second) / `-remaining` / `-reset` headers like Pipedrive's.
    pub token_bucket: Option<(f64, f64)>,
    /// The token bucket's 429s carry no rate-limit headers (a CRM that only says "too many").
    pub bare_429: bool,
    /// Until this time every request gets 429 with `Retry-After` as an HTTP-date (RFC 9110 §10.2.3).
    pub limited_until: Option<chrono::DateTime<chrono::Utc>>,
    /// Every request is refused (429 or 503 with `Retry-After`, seconds or a date) while this lasts.
    pub refusal: Option<Refusal>,
    /// Keyed creates (`POST /crm/leads`) need `Authorization: Bearer <this>`; another token gets 401.
    pub require_bearer: Option<String>,
}

/// How the mock Graph API behaves right now. `Default` is healthy.
#[derive(Debug, Clone, Default)]
pub struct GraphBehaviour {
    /// Every request is answered with code 190, as after the page token expired.
    pub token_expired: bool,
    /// Every request is answered as throttled.
    pub throttled: Option<GraphThrottle>,
    /// Every request is refused (503 "temporarily unavailable", Graph's transient code 2, or 429) with
    /// `Retry-After` while this lasts.
    pub refusal: Option<Refusal>,
    /// Delay before answering a lead's fetch.
    pub latency_ms: u64,
}

#[derive(Debug, Clone)]
pub struct GraphThrottle {
    /// Graph's error code: 4 (app), 32 (page), 613, 80001 (business use case).
    pub code: i64,
    /// `estimated_time_to_regain_access` in the `X-Business-Use-Case-Usage` header, in minutes; `None`: no
    /// usage header (Leadline must back off on its own).
    pub regain_minutes: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub id: String,
    pub external_id: String,
    pub lead: Value,
    pub writes: u32,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Stats {
    /// Records in the CRM.
    pub records: usize,
    /// External ids held by more than one record (must stay 0).
    pub duplicated_external_ids: usize,
    /// Records written more than once (a harmless upsert repeat, but a sign of a re-send).
    pub rewritten_records: usize,
    /// Leads that got the follow-up notification.
    pub notifications: usize,
    /// Leads whose notification was sent more than once.
    pub duplicated_notifications: usize,
    /// Call tasks created (the follow-up's fallback).
    pub tasks: usize,
    pub requests: u64,
    /// Requests answered 429.
    pub rate_limited: u64,
    /// Requests to the CRM's routes that arrived inside a `Retry-After` they gave (on the wire or later: see
    /// [`WaitLedger`]).
    pub requests_inside_retry_after: u64,
}

#[derive(Default)]
struct Inner {
    records: Vec<Record>,
    by_external: HashMap<String, Vec<usize>>,
    /// Idempotency keys: the body's fingerprint, the stored answer, and when its processing ends (a repeat
    /// before then is "still being processed"). Stored before any deliberate hang, so a client that gave up
    /// waiting finds the answer on its retry.
    idempotency: HashMap<String, KeyState>,
    /// Every `Idempotency-Key` received on a create, in order (tests assert the key each attempt sent).
    keys_seen: Vec<(String, String)>,
    notifications: HashMap<String, u32>,
    tasks: HashMap<String, u32>,
    behaviour: Behaviour,
    window_start: Option<Instant>,
    window_count: u32,
    requests: u64,
    rate_limited: u64,
    bucket: Option<(Instant, f64)>,
    /// Leads the sources list (sent as a webhook or not): (list name, id, created, payload).
    listed: Vec<(String, String, i64, Value)>,
    graph: GraphBehaviour,
    /// When each Graph request arrived, and its path (for tests: nothing inside an announced back-off).
    graph_log: Vec<(chrono::DateTime<chrono::Utc>, String)>,
    /// Records forgotten by [`MockCrm::forget_old`] (the demo's long runs): record ids go on counting.
    forgotten: usize,
}

/// Drops all but the newest `keep` entries of a log.
fn keep_newest<T>(log: &mut Vec<T>, keep: usize) {
    let excess = log.len().saturating_sub(keep);
    log.drain(..excess);
}

/// What the mock remembers of an `Idempotency-Key`: the body's fingerprint, the stored answer (status and body,
/// once written) and when its processing ends.
type KeyState = (String, Option<(u16, Value)>, Instant);

/// The access token the mock Graph API accepts.
pub const GRAPH_TOKEN: &str = "demo-graph-token";
const PAGE: usize = 50;

#[derive(Clone, Default)]
pub struct MockCrm {
    inner: Arc<Mutex<Inner>>,
    /// HubSpot's CRM v3 API on the same address (`/crm/v3/...`): the demo's CRM.
    hubspot: super::mock_hubspot::MockHubspot,
    /// The waits the CRM's routes announced, and the Graph API's.
    crm_waits: WaitLedger,
    graph_waits: WaitLedger,
}

enum Gate {
    Pass {
        hang: Option<Duration>,
        latency: Duration,
    },
    Answer(Response),
    /// An answer that takes the CRM's time like a write would (`latency_ms`): a refusal.
    AnswerAfter(Response, Duration),
}

impl MockCrm {
    /// Starts the mock on `addr` (use port 0 for any free port) and returns it with its address.
    pub async fn start(addr: SocketAddr) -> anyhow::Result<(MockCrm, SocketAddr)> {
        let crm = MockCrm::default();
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let app = crm.router();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "mock CRM stopped");
            }
        });
        Ok((crm, local))
    }

    pub fn router(&self) -> Router {
        let crm = Router::new()
            .route("/crm/leads", post(create))
            .route("/crm/plain", post(create_plain))
            .route("/crm/leads/{external_id}", put(upsert))
            .route("/crm/leads/search/{external_id}", get(search))
            .with_state(self.clone());
        let graph = Router::new()
            .route("/graph/{version}/{form_id}/leads", get(graph_leads))
            .route("/graph/{version}/{leadgen_id}", get(graph_lead))
            .with_state(self.clone());
        Router::new()
            .route("/notify/{external_id}", put(notify))
            .route("/tasks/{external_id}", put(task))
            .route("/_mock/stats", get(stats))
            .route("/source/{name}/leads", get(source_leads))
            .with_state(self.clone())
            .merge(self.crm_waits.layer(crm))
            .merge(self.graph_waits.layer(graph))
            .merge(self.hubspot.router())
    }

    /// The waits the CRM's routes (`/crm/…`) announced and the requests inside them.
    pub fn waits(&self) -> &WaitLedger {
        &self.crm_waits
    }

    /// The waits the Graph API (`/graph/…`) announced and the requests inside them.
    pub fn graph_waits(&self) -> &WaitLedger {
        &self.graph_waits
    }

    /// The HubSpot mock served on the same address.
    pub fn hubspot(&self) -> &super::mock_hubspot::MockHubspot {
        &self.hubspot
    }

    pub fn set_behaviour(&self, b: Behaviour) {
        self.inner.lock().expect("mock lock").behaviour = b;
    }

    pub fn set_graph(&self, g: GraphBehaviour) {
        self.inner.lock().expect("mock lock").graph = g;
    }

    /// Every Graph request so far: when it arrived and its path.
    pub fn graph_requests(&self) -> Vec<(chrono::DateTime<chrono::Utc>, String)> {
        self.inner.lock().expect("mock lock").graph_log.clone()
    }

    pub fn behaviour(&self) -> Behaviour {
        self.inner.lock().expect("mock lock").behaviour.clone()
    }

    pub fn stats(&self) -> Stats {
        let inner = self.inner.lock().expect("mock lock");
        Stats {
            records: inner.records.len() + inner.forgotten,
            duplicated_external_ids: inner.by_external.values().filter(|v| v.len() > 1).count(),
            rewritten_records: inner.records.iter().filter(|r| r.writes > 1).count(),
            notifications: inner.notifications.len(),
            duplicated_notifications: inner.notifications.values().filter(|n| **n > 1).count(),
            tasks: inner.tasks.len(),
            requests: inner.requests,
            rate_limited: inner.rate_limited,
            requests_inside_retry_after: self.crm_waits.inside().total(),
        }
    }

    /// Adds a lead to a source's list (`list` is a Meta form id or a generic source's name).
    pub fn list_lead(&self, list: &str, id: &str, created: chrono::DateTime<chrono::Utc>, payload: Value) {
        let mut inner = self.inner.lock().expect("mock lock");
        inner.listed.push((list.to_string(), id.to_string(), created.timestamp(), payload));
    }

    /// The lead the CRM holds for `external_id` (the first record's), as it was last written.
    pub fn lead_for(&self, external_id: &str) -> Option<Value> {
        let inner = self.inner.lock().expect("mock lock");
        let i = *inner.by_external.get(external_id)?.first()?;
        Some(inner.records[i].lead.clone())
    }

    /// For the demo, which runs for days inside the app: forgets all but the newest `keep` records, received keys,
    /// listed leads and Graph requests, and the idempotency keys whose processing ended more than `keys_for` ago
    /// (a real CRM keeps a key for a day, then forgets it too). Without it the mock, which lives in the app's process,
    /// would grow with every demo lead. Tests never call it: what they count stays whole.
    pub fn forget_old(&self, keep: usize, keys_for: Duration) {
        let mut guard = self.inner.lock().expect("mock lock");
        let inner = &mut *guard;
        let excess = inner.records.len().saturating_sub(keep);
        if excess > 0 {
            inner.records.drain(..excess);
            inner.forgotten += excess;
            let mut by_external: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, r) in inner.records.iter().enumerate() {
                by_external.entry(r.external_id.clone()).or_default().push(i);
            }
            inner.by_external = by_external;
        }
        keep_newest(&mut inner.keys_seen, keep);
        keep_newest(&mut inner.listed, keep);
        keep_newest(&mut inner.graph_log, keep);
        self.crm_waits.forget_old(keep);
        self.graph_waits.forget_old(keep);
        let now = Instant::now();
        inner.idempotency.retain(|_, (_, _, ready)| now.saturating_duration_since(*ready) < keys_for);
        if inner.notifications.len() > keep {
            inner.notifications.clear();
        }
        if inner.tasks.len() > keep {
            inner.tasks.clear();
        }
    }

    /// The `Idempotency-Key` of every create of `external_id`, in the order they arrived.
    pub fn keys_for(&self, external_id: &str) -> Vec<String> {
        let inner = self.inner.lock().expect("mock lock");
        inner.keys_seen.iter().filter(|(e, _)| e == external_id).map(|(_, k)| k.clone()).collect()
    }

    /// How many times the follow-up step was written for `external_id` (an upsert: the first creates, the rest
    /// update).
    pub fn notifications_for(&self, external_id: &str) -> u32 {
        self.inner.lock().expect("mock lock").notifications.get(external_id).copied().unwrap_or(0)
    }

    /// Records holding `external_id`.
    pub fn records_for(&self, external_id: &str) -> usize {
        let inner = self.inner.lock().expect("mock lock");
        inner.by_external.get(external_id).map_or(0, Vec::len)
    }

    /// How many distinct external ids the CRM holds.
    pub fn distinct_leads(&self) -> usize {
        self.inner.lock().expect("mock lock").by_external.len()
    }

    fn gate(&self, is_write: bool) -> Gate {
        let mut inner = self.inner.lock().expect("mock lock");
        inner.requests += 1;
        let b = inner.behaviour.clone();
        let latency = Duration::from_millis(b.latency_ms);
        let wall = chrono::Utc::now();
        // "Come back at <date>" (429), or a refusal for a while (429 or 503, seconds or a date): the ledger
        // counts the requests that arrive inside the wait each answer announced.
        let refusal = b.refusal.or(b.limited_until.map(|until| Refusal::until_date(429, until)));
        if let Some((r, retry_after)) = refusal.and_then(|r| Some((r, r.retry_after(wall)?))) {
            if r.status == 429 {
                inner.rate_limited += 1;
            }
            return Gate::AnswerAfter(with_retry_after(error_response(r.status, None), &retry_after), latency);
        }
        if let (true, Some((rate, burst))) = (is_write, b.token_bucket) {
            let now = Instant::now();
            let (last, tokens) = inner.bucket.unwrap_or((now, burst));
            let tokens = (tokens + now.duration_since(last).as_secs_f64() * rate).min(burst);
            if tokens < 1.0 {
                inner.bucket = Some((now, tokens));
                inner.rate_limited += 1;
                let mut r = error_response(429, None);
                // Pipedrive-style headers for a bucket refilled at `rate` per second: the limit per one-second
                // window, none remaining, and the seconds until the next request is allowed.
                let reset = ((1.0 - tokens) / rate).ceil().max(1.0) as u64;
                if !b.bare_429 {
                    for (k, v) in [
                        ("x-ratelimit-limit", rate.round() as u64),
                        ("x-ratelimit-remaining", 0),
                        ("x-ratelimit-reset", reset),
                    ] {
                        r.headers_mut().insert(k, v.to_string().parse().expect("digits"));
                    }
                }
                return Gate::Answer(r);
            }
            inner.bucket = Some((now, tokens - 1.0));
        }
        if let Some(status) = b.fail_with {
            return Gate::Answer(error_response(status, b.retry_after_secs));
        }
        let mut rng = rand::rng();
        if b.blip_ratio > 0.0 && rng.random_bool(b.blip_ratio.min(1.0)) {
            return Gate::Answer(
                (StatusCode::BAD_GATEWAY, "<html><body>502 Bad Gateway</body></html>").into_response(),
            );
        }
        if is_write {
            if let Some(limit) = b.rate_limit_per_sec {
                let now = Instant::now();
                let start = *inner.window_start.get_or_insert(now);
                if now.duration_since(start) >= Duration::from_secs(1) {
                    inner.window_start = Some(now);
                    inner.window_count = 0;
                }
                inner.window_count += 1;
                if inner.window_count > limit {
                    inner.rate_limited += 1;
                    return Gate::Answer(error_response(429, Some(b.retry_after_secs.unwrap_or(1))));
                }
            }
        }
        let hang = (is_write && b.hang_after_write_ratio > 0.0 && rng.random_bool(b.hang_after_write_ratio.min(1.0)))
            .then(|| Duration::from_millis(b.hang_ms));
        Gate::Pass { hang, latency }
    }

    /// Stores or updates the record of `external_id`; `create_always` makes a new record even if one exists.
    fn write(&self, external_id: &str, lead: &Value, create_always: bool) -> (bool, String) {
        let mut inner = self.inner.lock().expect("mock lock");
        if !create_always {
            if let Some(&i) = inner.by_external.get(external_id).and_then(|v| v.first()) {
                inner.records[i].writes += 1;
                inner.records[i].lead = lead.clone();
                return (false, inner.records[i].id.clone());
            }
        }
        let id = format!("crm-{}", inner.records.len() + inner.forgotten + 1);
        let index = inner.records.len();
        inner.records.push(Record {
            id: id.clone(),
            external_id: external_id.to_string(),
            lead: lead.clone(),
            writes: 1,
        });
        inner.by_external.entry(external_id.to_string()).or_default().push(index);
        (true, id)
    }
}

fn error_response(status: u16, retry_after: Option<u64>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match status {
        401 => json!({"status": "error", "category": "INVALID_AUTHENTICATION",
                      "message": "Authentication credentials not found or expired. Reconnect the integration."}),
        403 => json!({"status": "error", "category": "MISSING_SCOPES",
                      "message": "This app hasn't been granted all required scopes to make this call."}),
        429 => json!({"status": "error", "errorType": "RATE_LIMIT", "policyName": "SECONDLY",
                      "message": "You have reached your secondly limit."}),
        503 => {
            json!({"status": "error", "message": "Scheduled maintenance: the CRM is temporarily unavailable."})
        }
        _ => json!({"status": "error", "message": format!("mock CRM error {status}")}),
    };
    let response = (code, Json(body)).into_response();
    match retry_after.filter(|_| matches!(status, 429 | 503)) {
        Some(s) => with_retry_after(response, &s.to_string()),
        None => response,
    }
}

/// `response` with `Retry-After: value` (seconds or an HTTP date).
fn with_retry_after(mut response: Response, value: &str) -> Response {
    if let Ok(v) = value.parse() {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
    }
    response
}

/// The field-format check that the demo's "field-format change" turns on.
fn phone_problem(envelope: &Value) -> Option<Response> {
    let phone = envelope.pointer("/lead/phone").and_then(Value::as_str)?;
    let ok = phone.starts_with('+') && phone.len() > 7 && phone[1..].chars().all(|c| c.is_ascii_digit());
    (!ok).then(|| {
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({
                "status": "error", "category": "VALIDATION_ERROR",
                "message": format!("Property values were not valid: phone '{phone}' is not in E.164 format (+4915112345678)"),
                "errors": [{"message": "INVALID_PHONE_NUMBER", "in": "phone"}]
            })),
        )
            .into_response()
    })
}

async fn pass(crm: &MockCrm, envelope: &Value, is_write: bool) -> Result<Option<Duration>, Response> {
    match crm.gate(is_write) {
        Gate::Answer(r) => Err(r),
        Gate::AnswerAfter(r, latency) => {
            tokio::time::sleep(latency).await;
            Err(r)
        }
        Gate::Pass { hang, latency } => {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            if is_write && crm.behaviour().strict_phone {
                if let Some(r) = phone_problem(envelope) {
                    return Err(r);
                }
            }
            Ok(hang)
        }
    }
}

fn external_id_of(envelope: &Value) -> Option<String> {
    envelope.get("external_id").and_then(Value::as_str).map(str::to_string)
}

async fn create(State(crm): State<MockCrm>, headers: HeaderMap, Json(envelope): Json<Value>) -> Response {
    if let Some(token) = crm.behaviour().require_bearer {
        let sent = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if sent != Some(token.as_str()) {
            crm.inner.lock().expect("mock lock").requests += 1;
            // A refusal takes the network's time too (tests race a reload of secrets against it).
            tokio::time::sleep(Duration::from_millis(crm.behaviour().latency_ms)).await;
            return error_response(401, None);
        }
    }
    let key = headers.get("Idempotency-Key").and_then(|v| v.to_str().ok()).map(str::to_string);
    if let (Some(k), Some(e)) = (&key, external_id_of(&envelope)) {
        crm.inner.lock().expect("mock lock").keys_seen.push((e, k.clone()));
    }
    let hang = match pass(&crm, &envelope, true).await {
        Ok(h) => h,
        Err(r) => return r,
    };
    let Some(external_id) = external_id_of(&envelope) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"message": "external_id is required"}))).into_response();
    };
    let fingerprint = envelope.to_string();
    if let Some(k) = &key {
        let mut inner = crm.inner.lock().expect("mock lock");
        match inner.idempotency.get(k).cloned() {
            Some((print, _, _)) if print != fingerprint => {
                let body =
                    json!({"status": "error", "message": "Idempotency-Key reused with a different request body"});
                return (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response();
            }
            Some((_, None, _)) => {
                let body = json!({"status": "error", "message": "a request with this Idempotency-Key is still being processed"});
                return (StatusCode::CONFLICT, Json(body)).into_response();
            }
            Some((_, Some(_), ready)) if Instant::now() < ready => {
                let body = json!({"status": "error", "message": "a request with this Idempotency-Key is still being processed"});
                return (StatusCode::CONFLICT, Json(body)).into_response();
            }
            Some((_, Some((status, body)), _)) => {
                let mut r = (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), Json(body)).into_response();
                r.headers_mut().insert("Idempotent-Replayed", "true".parse().expect("ascii"));
                return r;
            }
            None => {
                inner.idempotency.insert(k.clone(), (fingerprint.clone(), None, Instant::now()));
            }
        }
    }
    // Keyed or not, a create makes a new record: only the key protects against a repeat.
    let (created, id) = crm.write(&external_id, &envelope.get("lead").cloned().unwrap_or_default(), true);
    let body = json!({"id": id, "new": created});
    if let Some(k) = key {
        let ready = Instant::now() + hang.unwrap_or_default();
        crm.inner.lock().expect("mock lock").idempotency.insert(k, (fingerprint, Some((201, body.clone())), ready));
    }
    if let Some(h) = hang {
        tokio::time::sleep(h).await;
    }
    (StatusCode::CREATED, Json(body)).into_response()
}

async fn create_plain(State(crm): State<MockCrm>, Json(envelope): Json<Value>) -> Response {
    let hang = match pass(&crm, &envelope, true).await {
        Ok(h) => h,
        Err(r) => return r,
    };
    let Some(external_id) = external_id_of(&envelope) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"message": "external_id is required"}))).into_response();
    };
    let (_, id) = crm.write(&external_id, &envelope.get("lead").cloned().unwrap_or_default(), true);
    if let Some(h) = hang {
        tokio::time::sleep(h).await;
    }
    (StatusCode::CREATED, Json(json!({"id": id}))).into_response()
}

async fn upsert(State(crm): State<MockCrm>, Path(external_id): Path<String>, Json(envelope): Json<Value>) -> Response {
    let hang = match pass(&crm, &envelope, true).await {
        Ok(h) => h,
        Err(r) => return r,
    };
    let (created, id) = crm.write(&external_id, &envelope.get("lead").cloned().unwrap_or_default(), false);
    if let Some(h) = hang {
        tokio::time::sleep(h).await;
    }
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    (status, Json(json!({"id": id, "new": created}))).into_response()
}

async fn search(State(crm): State<MockCrm>, Path(external_id): Path<String>) -> Response {
    if let Err(r) = pass(&crm, &Value::Null, false).await {
        return r;
    }
    let inner = crm.inner.lock().expect("mock lock");
    let results: Vec<Value> = inner
        .by_external
        .get(&external_id)
        .into_iter()
        .flatten()
        .map(|&i| json!({"id": inner.records[i].id, "external_id": external_id}))
        .collect();
    Json(json!({"total": results.len(), "results": results})).into_response()
}

async fn notify(State(crm): State<MockCrm>, Path(external_id): Path<String>, Json(envelope): Json<Value>) -> Response {
    let hang = match pass(&crm, &Value::Null, true).await {
        Ok(h) => h,
        Err(r) => return r,
    };
    if envelope.pointer("/previous_steps/crm/crm_id").and_then(Value::as_str).is_none() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "previous_steps.crm.crm_id is required", "field": "crm_id"})),
        )
            .into_response();
    }
    let first = {
        let mut inner = crm.inner.lock().expect("mock lock");
        let n = inner.notifications.entry(external_id).or_default();
        *n += 1;
        *n == 1
    };
    if let Some(h) = hang {
        tokio::time::sleep(h).await;
    }
    let status = if first { StatusCode::CREATED } else { StatusCode::OK };
    (status, Json(json!({"id": "sms-queued"}))).into_response()
}

async fn task(State(crm): State<MockCrm>, Path(external_id): Path<String>) -> Response {
    if let Err(r) = pass(&crm, &Value::Null, true).await {
        return r;
    }
    let mut inner = crm.inner.lock().expect("mock lock");
    let n = inner.tasks.entry(external_id.clone()).or_default();
    *n += 1;
    (StatusCode::OK, Json(json!({"id": format!("task-{external_id}")}))).into_response()
}

async fn stats(State(crm): State<MockCrm>) -> Json<Value> {
    Json(json!({"crm": crm.stats(), "hubspot": crm.hubspot.stats()}))
}

#[derive(serde::Deserialize)]
struct ListQuery {
    access_token: Option<String>,
    filtering: Option<String>,
    since: Option<i64>,
    after: Option<usize>,
}

/// Leads of `list` created after `since`, from position `after`: one page and whether more follow.
fn page(crm: &MockCrm, list: &str, since: i64, after: usize) -> (Vec<(String, i64, Value)>, bool) {
    let inner = crm.inner.lock().expect("mock lock");
    let all: Vec<(String, i64, Value)> = inner
        .listed
        .iter()
        .filter(|(l, _, created, _)| l == list && *created > since)
        .map(|(_, id, created, payload)| (id.clone(), *created, payload.clone()))
        .collect();
    let more = all.len() > after + PAGE;
    (all.into_iter().skip(after).take(PAGE).collect(), more)
}

/// The Graph gate: logs the request, then answers as the current [`GraphBehaviour`] says, or lets it through.
fn graph_gate(crm: &MockCrm, path: String, token: Option<&str>) -> Option<Response> {
    let mut inner = crm.inner.lock().expect("mock lock");
    inner.graph_log.push((chrono::Utc::now(), path));
    let g = inner.graph.clone();
    if let Some((r, retry_after)) = g.refusal.and_then(|r| Some((r, r.retry_after(chrono::Utc::now())?))) {
        // Graph's transient error (code 2, "is_transient": true), as a maintenance or an overloaded backend answers.
        let body = json!({"error": {"message": "Service temporarily unavailable", "type": "OAuthException",
            "code": 2, "is_transient": true, "fbtrace_id": "mock"}});
        let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        return Some(with_retry_after((status, Json(body)).into_response(), &retry_after));
    }
    if g.token_expired || token != Some(GRAPH_TOKEN) {
        let body = json!({"error": {"message": "Error validating access token: Session has expired.",
            "type": "OAuthException", "code": 190, "error_subcode": 463, "fbtrace_id": "mock"}});
        return Some((StatusCode::BAD_REQUEST, Json(body)).into_response());
    }
    if let Some(t) = g.throttled {
        let body = json!({"error": {"message": "Application request limit reached", "type": "OAuthException",
            "code": t.code, "is_transient": true, "fbtrace_id": "mock"}});
        let mut response = (StatusCode::BAD_REQUEST, Json(body)).into_response();
        if let Some(minutes) = t.regain_minutes {
            let usage = json!({"1234567890": [{"type": "pages", "call_count": 100, "total_cputime": 20,
                "total_time": 20, "estimated_time_to_regain_access": minutes}]});
            response.headers_mut().insert("x-business-use-case-usage", usage.to_string().parse().expect("json"));
        }
        return Some(response);
    }
    None
}

/// A listed lead as Graph's lead object.
fn graph_lead_object(form_id: &str, id: &str, created: i64, payload: &Value) -> Value {
    let created = chrono::DateTime::from_timestamp(created, 0).unwrap_or_default();
    json!({"id": id, "created_time": created.format("%Y-%m-%dT%H:%M:%S+0000").to_string(),
           "ad_id": payload.get("ad_id").and_then(crate::features::graph::id_text), "form_id": form_id,
           "field_data": payload.get("field_data").cloned().unwrap_or_else(|| json!([]))})
}

async fn graph_lead(
    State(crm): State<MockCrm>,
    Path((version, leadgen_id)): Path<(String, String)>,
    axum::extract::Query(q): axum::extract::Query<ListQuery>,
) -> Response {
    let latency = crm.inner.lock().expect("mock lock").graph.latency_ms;
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    if let Some(r) = graph_gate(&crm, format!("/graph/{version}/{leadgen_id}"), q.access_token.as_deref()) {
        return r;
    }
    if leadgen_id == "me" {
        // `GET /me` with a page token answers the page (Graph API "Page" node).
        return Json(json!({"id": "1234567890", "name": "Leadline demo page"})).into_response();
    }
    let found = {
        let inner = crm.inner.lock().expect("mock lock");
        inner.listed.iter().find(|(_, id, _, _)| *id == leadgen_id).cloned()
    };
    match found {
        Some((form, id, created, payload)) => Json(graph_lead_object(&form, &id, created, &payload)).into_response(),
        None => {
            let body = json!({"error": {"message": format!("Unsupported get request. Object with ID '{leadgen_id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation."),
                "type": "GraphMethodException", "code": 100, "error_subcode": 33, "fbtrace_id": "mock"}});
            (StatusCode::BAD_REQUEST, Json(body)).into_response()
        }
    }
}

async fn graph_leads(
    State(crm): State<MockCrm>,
    Path((version, form_id)): Path<(String, String)>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<ListQuery>,
) -> Response {
    if let Some(r) = graph_gate(&crm, format!("/graph/{version}/{form_id}/leads"), q.access_token.as_deref()) {
        return r;
    }
    let since = q
        .filtering
        .as_deref()
        .and_then(|f| serde_json::from_str::<Value>(f).ok())
        .and_then(|f| f.get(0).and_then(|c| c.get("value")).and_then(Value::as_i64))
        .unwrap_or(0);
    let after = q.after.unwrap_or(0);
    let (leads, more) = page(&crm, &form_id, since, after);
    let data: Vec<Value> =
        leads.into_iter().map(|(id, created, payload)| graph_lead_object(&form_id, &id, created, &payload)).collect();
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    // Graph's cursor-based paging: `after` points past the page's last lead (here simply its position), and
    // `next` carries it; a poller keeps the cursor to go on from there after a restart.
    let cursors = json!({"before": after.to_string(), "after": (after + data.len()).to_string()});
    let mut body = json!({"data": data, "paging": {"cursors": cursors}});
    if more {
        let filtering = q.filtering.unwrap_or_default();
        let next = reqwest::Url::parse_with_params(
            &format!("http://{host}/graph/{version}/{form_id}/leads"),
            &[("access_token", GRAPH_TOKEN), ("filtering", &filtering), ("after", &(after + PAGE).to_string())],
        )
        .map(|u| u.to_string())
        .unwrap_or_default();
        body["paging"]["next"] = Value::String(next);
    }
    Json(body).into_response()
}

async fn source_leads(
    State(crm): State<MockCrm>,
    Path(name): Path<String>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<ListQuery>,
) -> Response {
    let since = q.since.unwrap_or(0);
    let after = q.after.unwrap_or(0);
    let (leads, more) = page(&crm, &name, since, after);
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    let next = more.then(|| format!("http://{host}/source/{name}/leads?since={since}&after={}", after + PAGE));
    Json(json!({"items": leads.into_iter().map(|l| l.2).collect::<Vec<_>>(), "next": next})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_long_demo_forgets_old_records_and_keys_but_counts_on() {
        let (crm, _) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        for n in 0..10 {
            crm.write(&format!("e{n}"), &json!({"n": n}), false);
        }
        crm.inner.lock().unwrap().idempotency.insert("old".into(), ("f".into(), None, Instant::now()));
        crm.forget_old(4, Duration::ZERO);
        assert_eq!(crm.stats().records, 10, "the count goes on: records created, not kept");
        assert!(crm.lead_for("e5").is_none(), "an old record is forgotten");
        assert_eq!(crm.lead_for("e9"), Some(json!({"n": 9})), "a new one is kept, and found by its external id");
        assert!(crm.inner.lock().unwrap().idempotency.is_empty(), "a key past its retention is forgotten");
        // A write to a kept record updates it; a new one gets the next id, never one already given.
        assert_eq!(crm.write("e9", &json!({"n": 99}), false), (false, "crm-10".to_string()));
        assert_eq!(crm.write("e10", &json!({"n": 10}), false), (true, "crm-11".to_string()));
        assert_eq!(crm.lead_for("e9"), Some(json!({"n": 99})));
    }
}
