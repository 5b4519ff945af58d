//! A mock of Pipedrive's API on loopback, for the `pipedrive` target's tests: it keeps persons and leads, counts
//! requests, and misbehaves on command (a revoked token, a rate limit, lead creates that hang).
//!
//! Endpoints, following developers.pipedrive.com (API reference v1/v2, "Rate limiting", "Authentication"):
//! - `GET /api/v2/persons/search?term&fields=custom_fields&exact_match=true` — "Search persons" (v2);
//! - `POST /api/v2/persons` — "Add a new person" (v2);
//! - `POST /v1/leads` — "Add a lead"; `GET /v1/leads?person_id=` — "Get all leads" filtered by person;
//! - `GET /v1/users/me` — "Get current user data"; `GET /v1/personFields` — "Get all person fields".
//!
//! Every request needs the token in `x-api-token`; a wrong or revoked one gets 401. Every request, every
//! `Retry-After` the mock gave and the requests that arrived inside it are kept in a [`WaitLedger`]
//! (`demo/waits.rs`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::waits::{Refusal, WaitLedger};

/// The API token the mock accepts.
pub const TOKEN: &str = "pipedrive-test-token";
/// The key of the custom person field holding Leadline's external id.
pub const FIELD_KEY: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678";

#[derive(Debug, Clone)]
pub struct Person {
    pub id: u64,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct Lead {
    pub id: String,
    pub person_id: u64,
    pub origin_id: Option<String>,
    pub body: Value,
}

/// How the mock misbehaves right now. `Default` is healthy.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The token was revoked: every request gets 401.
    pub token_revoked: bool,
    /// Person searches are answered 429 until this instant (`x-ratelimit-reset` says how long is left).
    pub search_limited_until: Option<Instant>,
    /// Lead creates store the lead, then answer only after this long (a timeout after the write).
    pub hang_after_lead_create: Option<Duration>,
    /// Lead creates wait, writing nothing, while this is set; released ones are refused with 503.
    pub hold_lead_creates: bool,
    /// Every request is refused (`503`, or `429` "Request over limit") with `Retry-After` while this lasts.
    pub refusal: Option<Refusal>,
    /// Person creates with a value containing `.1` in their body field `.0` (`phones`, `emails`) are refused with
    /// 400 "Validation failed: <field>: …", as Pipedrive refuses a value its field does not take.
    pub refuse_person_values: Vec<(String, String)>,
}

/// Request counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub requests: u64,
    pub searches: u64,
    pub person_creates: u64,
    pub lead_creates: u64,
    pub lead_lookups: u64,
    pub rate_limited: u64,
    pub unauthorized: u64,
    /// Lead creates waiting under [`Faults::hold_lead_creates`] right now.
    pub held: u64,
}

#[derive(Default)]
struct Inner {
    persons: Vec<Person>,
    leads: Vec<Lead>,
    faults: Faults,
    counts: Counts,
    /// Every request: when, method and path, status answered.
    log: Vec<(Instant, String, u16)>,
}

#[derive(Clone, Default)]
pub struct MockPipedrive {
    inner: Arc<Mutex<Inner>>,
    waits: WaitLedger,
}

impl MockPipedrive {
    /// Starts the mock on `addr` (port 0: any free port).
    pub async fn start(addr: SocketAddr) -> anyhow::Result<(MockPipedrive, SocketAddr)> {
        let mock = MockPipedrive::default();
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let app = mock.router();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "mock Pipedrive stopped");
            }
        });
        Ok((mock, local))
    }

    pub fn router(&self) -> Router {
        let api = Router::new()
            .route("/api/v2/persons/search", get(search_persons))
            .route("/api/v2/persons", post(add_person))
            .route("/v1/leads", post(add_lead).get(get_leads))
            .route("/v1/users/me", get(users_me))
            .route("/v1/personFields", get(person_fields))
            .with_state(self.clone());
        self.waits.layer(api)
    }

    /// Every request, the waits the mock announced and the requests that arrived inside them.
    pub fn waits(&self) -> &WaitLedger {
        &self.waits
    }

    pub fn set_faults(&self, f: Faults) {
        self.lock().faults = f;
    }

    pub fn faults(&self) -> Faults {
        self.lock().faults.clone()
    }

    pub fn counts(&self) -> Counts {
        self.lock().counts.clone()
    }

    pub fn persons(&self) -> Vec<Person> {
        self.lock().persons.clone()
    }

    pub fn leads(&self) -> Vec<Lead> {
        self.lock().leads.clone()
    }

    /// Every request so far: when it arrived, `METHOD path`, and the status it got.
    pub fn log(&self) -> Vec<(Instant, String, u16)> {
        self.lock().log.clone()
    }

    /// Persons holding `external_id` in [`FIELD_KEY`].
    pub fn persons_for(&self, external_id: &str) -> usize {
        self.lock().persons.iter().filter(|p| holds(p, external_id)).count()
    }

    /// Leads whose person holds `external_id`.
    pub fn leads_for(&self, external_id: &str) -> usize {
        let inner = self.lock();
        let ids: Vec<u64> = inner.persons.iter().filter(|p| holds(p, external_id)).map(|p| p.id).collect();
        inner.leads.iter().filter(|l| ids.contains(&l.person_id)).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("mock lock")
    }

    /// Counts the request and checks the token; `Some` is the answer when it is refused.
    fn gate(&self, headers: &HeaderMap, what: &str) -> Option<Response> {
        let mut inner = self.lock();
        inner.counts.requests += 1;
        let refused = inner.faults.refusal.and_then(|r| Some((r.status, r.retry_after(chrono::Utc::now())?)));
        if let Some((status, retry_after)) = refused {
            inner.log.push((Instant::now(), what.to_string(), status));
            let (status, message) = match status {
                429 => {
                    inner.counts.rate_limited += 1;
                    (StatusCode::TOO_MANY_REQUESTS, "Request over limit")
                }
                other => (
                    StatusCode::from_u16(other).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
                    "Service temporarily unavailable",
                ),
            };
            let mut r = error(status, message);
            if let Ok(v) = retry_after.parse() {
                r.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
            }
            return Some(r);
        }
        let ok = headers.get("x-api-token").and_then(|v| v.to_str().ok()) == Some(TOKEN);
        if ok && !inner.faults.token_revoked {
            return None;
        }
        inner.counts.unauthorized += 1;
        inner.log.push((Instant::now(), what.to_string(), 401));
        // Shape: the v1 error answer for a missing or wrong token ("Authentication": 401
        // {"success":false,"error":"unauthorized access","errorCode":401,"error_info":"…"}).
        Some(
            (
                StatusCode::UNAUTHORIZED,
                Json(json!({"success": false, "error": "unauthorized access", "errorCode": 401,
                    "error_info": "Please check developers.pipedrive.com for more information about Pipedrive API.",
                    "data": null, "additional_data": null})),
            )
                .into_response(),
        )
    }

    fn logged(&self, what: &str, status: u16) {
        self.lock().log.push((Instant::now(), what.to_string(), status));
    }
}

fn holds(p: &Person, external_id: &str) -> bool {
    p.body
        .pointer(&format!("/custom_fields/{FIELD_KEY}"))
        .and_then(Value::as_str)
        .is_some_and(|v| v.eq_ignore_ascii_case(external_id))
}

fn ok(status: StatusCode, data: Value, additional: Value) -> Response {
    // Shape: every success answer, v1 and v2: {"success":true,"data":…,"additional_data":…}.
    (status, Json(json!({"success": true, "data": data, "additional_data": additional}))).into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    // Shape: the error answer {"success":false,"error","error_info","data":null,"additional_data":null}.
    (
        status,
        Json(json!({"success": false, "error": message,
            "error_info": "Please check developers.pipedrive.com for more information about Pipedrive API.",
            "data": null, "additional_data": null})),
    )
        .into_response()
}

async fn search_persons(
    State(mock): State<MockPipedrive>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    if let Some(r) = mock.gate(&headers, "GET /api/v2/persons/search") {
        return r;
    }
    let mut inner = mock.lock();
    inner.counts.searches += 1;
    if let Some(until) = inner.faults.search_limited_until {
        let now = Instant::now();
        if now < until {
            inner.counts.rate_limited += 1;
            let reset = (until - now).as_secs_f64().ceil().max(1.0) as u64;
            inner.log.push((now, "GET /api/v2/persons/search".into(), 429));
            // Shape: "Rate limiting": 429 {"success":false,"error":"Request over limit","errorCode":429} with
            // x-ratelimit-limit / -remaining / -reset (seconds until the window resets) and x-daily-requests-left.
            let body = json!({"success": false, "error": "Request over limit", "errorCode": 429,
                "error_info": "Please check developers.pipedrive.com for more information about Pipedrive API.",
                "data": null, "additional_data": null});
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [
                    ("x-ratelimit-limit", "80".to_string()),
                    ("x-ratelimit-remaining", "0".to_string()),
                    ("x-ratelimit-reset", reset.to_string()),
                    ("x-daily-requests-left", "9000".to_string()),
                ],
                Json(body),
            )
                .into_response();
        }
    }
    inner.log.push((Instant::now(), "GET /api/v2/persons/search".into(), 200));
    let term = q.get("term").cloned().unwrap_or_default();
    let exact = q.get("exact_match").map(String::as_str) == Some("true");
    let items: Vec<Value> = inner
        .persons
        .iter()
        .filter(|p| {
            let v = p.body.pointer(&format!("/custom_fields/{FIELD_KEY}")).and_then(Value::as_str).unwrap_or("");
            if exact {
                v.eq_ignore_ascii_case(&term)
            } else {
                v.to_lowercase().contains(&term.to_lowercase())
            }
        })
        .map(|p| {
            let custom: Vec<Value> = p
                .body
                .get("custom_fields")
                .and_then(Value::as_object)
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default();
            let emails: Vec<Value> =
                p.body["emails"].as_array().into_iter().flatten().map(|e| e["value"].clone()).collect();
            // Shape: v2 search item {"result_score","item":{"id","type":"person","name","phones","emails",
            // "visible_to","owner","organization","custom_fields":[values],"notes"}}.
            json!({"result_score": 1.0, "item": {"id": p.id, "type": "person", "name": p.body["name"],
                "phones": [], "emails": emails, "visible_to": 3, "owner": {"id": 1}, "organization": null,
                "custom_fields": custom, "notes": []}})
        })
        .collect();
    ok(StatusCode::OK, json!({"items": items}), json!({"next_cursor": null}))
}

async fn add_person(State(mock): State<MockPipedrive>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if let Some(r) = mock.gate(&headers, "POST /api/v2/persons") {
        return r;
    }
    let mut inner = mock.lock();
    inner.counts.person_creates += 1;
    if body.get("name").and_then(Value::as_str).is_none_or(|n| n.trim().is_empty()) {
        inner.log.push((Instant::now(), "POST /api/v2/persons".into(), 400));
        return error(StatusCode::BAD_REQUEST, "Validation failed: name: Required");
    }
    let holds = |field: &str, text: &str| match body.get(field) {
        // v2 lists: `[{"value", "primary", "label"}]`.
        Some(Value::Array(items)) => {
            items.iter().any(|i| i.get("value").and_then(Value::as_str).is_some_and(|v| v.contains(text)))
        }
        _ => false,
    };
    if let Some((field, _)) = inner.faults.refuse_person_values.iter().find(|(f, text)| holds(f, text)) {
        // Shape: the documented error answer; the message names the field as v1's validation errors do.
        let message = format!("Validation failed: {field}: the value is not valid for this field");
        inner.log.push((Instant::now(), "POST /api/v2/persons".into(), 400));
        return error(StatusCode::BAD_REQUEST, &message);
    }
    let id = inner.persons.len() as u64 + 1;
    let mut data = body.as_object().cloned().unwrap_or_default();
    data.insert("id".into(), id.into());
    inner.persons.push(Person { id, body: Value::Object(data.clone()) });
    inner.log.push((Instant::now(), "POST /api/v2/persons".into(), 200));
    // Shape: "Add a new person" (v2): {"success":true,"data":{"id",…the person…},"additional_data":null}.
    ok(StatusCode::OK, Value::Object(data), Value::Null)
}

async fn add_lead(State(mock): State<MockPipedrive>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if let Some(r) = mock.gate(&headers, "POST /v1/leads") {
        return r;
    }
    let hold = {
        let mut inner = mock.lock();
        inner.counts.lead_creates += 1;
        inner.faults.hold_lead_creates
    };
    if hold {
        mock.lock().counts.held += 1;
        while mock.faults().hold_lead_creates {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        mock.lock().counts.held -= 1;
        mock.logged("POST /v1/leads", 503);
        return error(StatusCode::SERVICE_UNAVAILABLE, "Service temporarily unavailable");
    }
    let (answer, hang) = {
        let mut inner = mock.lock();
        let title = body.get("title").and_then(Value::as_str).unwrap_or("");
        let person_id = body.get("person_id").and_then(Value::as_u64);
        // Shape: "Add a lead": title and a person or organization are required; 400 otherwise.
        if title.trim().is_empty() {
            inner.log.push((Instant::now(), "POST /v1/leads".into(), 400));
            return error(StatusCode::BAD_REQUEST, "Validation failed: title: Required");
        }
        let Some(person_id) = person_id.filter(|id| inner.persons.iter().any(|p| p.id == *id)) else {
            inner.log.push((Instant::now(), "POST /v1/leads".into(), 400));
            return error(StatusCode::BAD_REQUEST, "Validation failed: person_id: Person not found");
        };
        let n = inner.leads.len() as u64 + 1;
        let id = format!("adf21080-0e10-11eb-879b-{n:012x}");
        let mut data = body.as_object().cloned().unwrap_or_else(Map::new);
        data.insert("id".into(), id.clone().into());
        data.insert("source_name".into(), "API".into());
        data.insert("origin".into(), "API".into());
        data.entry("origin_id").or_insert(Value::Null);
        data.insert("is_archived".into(), false.into());
        let origin_id = data.get("origin_id").and_then(Value::as_str).map(String::from);
        inner.leads.push(Lead { id, person_id, origin_id, body: Value::Object(data.clone()) });
        inner.log.push((Instant::now(), "POST /v1/leads".into(), 201));
        // Shape: "Add a lead": 201 {"success":true,"data":{"id":"<uuid>","title","person_id","origin_id",
        // "source_name":"API","origin":"API",…}}.
        (ok(StatusCode::CREATED, Value::Object(data), Value::Null), inner.faults.hang_after_lead_create)
    };
    if let Some(d) = hang {
        tokio::time::sleep(d).await;
    }
    answer
}

async fn get_leads(
    State(mock): State<MockPipedrive>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    if let Some(r) = mock.gate(&headers, "GET /v1/leads") {
        return r;
    }
    let mut inner = mock.lock();
    inner.counts.lead_lookups += 1;
    inner.log.push((Instant::now(), "GET /v1/leads".into(), 200));
    let person = q.get("person_id").and_then(|p| p.parse::<u64>().ok());
    let data: Vec<Value> =
        inner.leads.iter().filter(|l| person.is_none_or(|p| l.person_id == p)).map(|l| l.body.clone()).collect();
    // Shape: "Get all leads": {"success":true,"data":[leads],"additional_data":{"pagination":{"start","limit",
    // "more_items_in_collection"}}}.
    ok(
        StatusCode::OK,
        Value::Array(data),
        json!({"pagination": {"start": 0, "limit": 500, "more_items_in_collection": false}}),
    )
}

async fn users_me(State(mock): State<MockPipedrive>, headers: HeaderMap) -> Response {
    if let Some(r) = mock.gate(&headers, "GET /v1/users/me") {
        return r;
    }
    mock.logged("GET /v1/users/me", 200);
    // Shape: "Get current user data": {"success":true,"data":{"id","name","email","company_id","company_name",
    // "company_domain",…}}.
    ok(
        StatusCode::OK,
        json!({"id": 1, "name": "Leadline Integration", "email": "integration@example.com", "company_id": 7,
            "company_name": "Acme Test", "company_domain": "acme-test", "active_flag": true}),
        Value::Null,
    )
}

async fn person_fields(State(mock): State<MockPipedrive>, headers: HeaderMap) -> Response {
    if let Some(r) = mock.gate(&headers, "GET /v1/personFields") {
        return r;
    }
    mock.logged("GET /v1/personFields", 200);
    // Shape: "Get all person fields": {"success":true,"data":[{"id","key","name","field_type",…}],
    // "additional_data":{"pagination":…}}; built-in fields have plain keys, custom ones 40-character hashes.
    ok(
        StatusCode::OK,
        json!([
            {"id": 1, "key": "name", "name": "Name", "field_type": "varchar"},
            {"id": 2, "key": "email", "name": "Email", "field_type": "varchar"},
            {"id": 3, "key": "phone", "name": "Phone", "field_type": "phone"},
            {"id": 9001, "key": FIELD_KEY, "name": "Leadline external id", "field_type": "varchar"}
        ]),
        json!({"pagination": {"start": 0, "limit": 500, "more_items_in_collection": false}}),
    )
}
