//! A mock Salesforce org on loopback: the OAuth token endpoint, the sObject upsert by external id and the
//! describe resource, with switches for what goes wrong (a revoked refresh token, an expired session, several
//! records matching, the org's API limit used up). It keeps every record by external id and counts requests, so a
//! test can check at the end that no lead was lost or written twice.
//!
//! The shapes follow Salesforce's documentation (REST API Developer Guide: "Insert or Update (Upsert) a Record
//! Using an External ID", "sObject Rows by External ID", "Status Codes and Error Responses", "Limit Info Header",
//! "sObject Describe"; Salesforce Help: "OAuth 2.0 Refresh Token Flow for Renewed Sessions"). Each answer below
//! names the one it follows.
//!
//! The REST API's routes (not the login host's token endpoint) keep a [`WaitLedger`] (`demo/waits.rs`): every
//! request, every `Retry-After` they gave and the requests that arrived inside it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Form, Json, Router};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::waits::{Refusal, WaitLedger};

/// The connected app's consumer key and secret, and the refresh token the mock accepts at first.
pub const CLIENT_ID: &str = "3MVG9mock-consumer-key";
pub const CLIENT_SECRET: &str = "mock-consumer-secret";
pub const REFRESH_TOKEN: &str = "5Aep861mock-refresh-token";
/// The object and its External ID field the mock knows.
pub const OBJECT: &str = "Lead";
pub const EXTERNAL_ID_FIELD: &str = "Leadline_Id__c";

/// What goes wrong right now. `Default` is a healthy org.
#[derive(Debug, Clone, Default)]
pub struct SalesforceBehaviour {
    /// Refresh-token rotation: every refresh answers a new refresh token, and the old one stops working.
    pub rotate_refresh_tokens: bool,
    /// The refresh token was revoked (and with it the sessions it gave): refreshes get `invalid_grant`.
    pub revoked: bool,
    /// Every upsert finds several records with the external id (300).
    pub duplicates: bool,
    /// The org's rolling 24-hour API allowance is used up (403 `REQUEST_LIMIT_EXCEEDED`).
    pub limit_exceeded: bool,
    /// Updates answer 204 without a body (as before API 46.0) instead of 200.
    pub update_204: bool,
    /// Every API request is refused (`503` `SERVER_UNAVAILABLE`, or `429`) with `Retry-After` while this lasts.
    pub refusal: Option<Refusal>,
    /// The concurrent-request limit as a token bucket `(requests per second, burst)`: an API request that finds it
    /// empty is refused with 403 `REQUEST_LIMIT_EXCEEDED` "ConcurrentPerOrgLongTxn Limit exceeded.", which names
    /// neither a rate nor a time.
    pub concurrent_limit: Option<(f64, f64)>,
    /// The org's validation: a write whose field holds a value one of these refuses is answered 400 with the
    /// rule's error, nothing written.
    pub validation: Vec<SfValidation>,
}

/// One refusal of the org's: a value of `field` containing `refuses` is answered `400` with
/// `[{"message", "errorCode", "fields": [field]}]`, the error shape of every Salesforce REST API refusal
/// ("Status Codes and Error Responses"): `FIELD_CUSTOM_VALIDATION_EXCEPTION` for a validation rule whose error is
/// shown at the field, `INVALID_EMAIL_ADDRESS` for an Email field, `INVALID_FIELD` for a lookup by an external id
/// that finds nothing.
#[derive(Debug, Clone)]
pub struct SfValidation {
    pub field: String,
    pub error_code: String,
    pub message: String,
    pub refuses: String,
}

/// A record as the mock keeps it.
#[derive(Debug, Clone)]
pub struct SfRecord {
    pub id: String,
    pub fields: Map<String, Value>,
    /// How many upserts wrote it (1: created once, never updated).
    pub writes: usize,
}

#[derive(Default)]
struct OrgState {
    behaviour: SalesforceBehaviour,
    base_url: String,
    refresh_token: String,
    access_token: Option<String>,
    issued: u64,
    token_requests: usize,
    records: BTreeMap<String, SfRecord>,
    /// Arrival time of every upsert (PATCH) request.
    patches: Vec<DateTime<Utc>>,
    api_used: u64,
    api_max: u64,
    /// The concurrent-request bucket: tokens left and when they were counted.
    bucket: Option<(f64, Instant)>,
}

#[derive(Clone)]
pub struct MockSalesforce {
    inner: Arc<Mutex<OrgState>>,
    waits: WaitLedger,
}

impl MockSalesforce {
    /// Starts the mock on `addr` (port 0 for any free port); the login host and the instance are both it.
    pub async fn start(addr: SocketAddr) -> anyhow::Result<(MockSalesforce, SocketAddr)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let mock = MockSalesforce {
            inner: Arc::new(Mutex::new(OrgState {
                base_url: format!("http://{local}"),
                refresh_token: REFRESH_TOKEN.into(),
                api_max: 100_000,
                ..Default::default()
            })),
            waits: WaitLedger::default(),
        };
        let app = mock.router();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "mock Salesforce stopped");
            }
        });
        Ok((mock, local))
    }

    pub fn router(&self) -> Router {
        let api = Router::new()
            .route("/services/data/{version}/sobjects/{object}/describe", get(describe))
            .route("/services/data/{version}/sobjects/{object}/{field}/{value}", patch(upsert))
            .with_state(self.clone());
        Router::new().route("/services/oauth2/token", post(token)).with_state(self.clone()).merge(self.waits.layer(api))
    }

    /// Every REST API request, the waits the API announced and the requests that arrived inside them.
    pub fn waits(&self) -> &WaitLedger {
        &self.waits
    }

    fn state(&self) -> std::sync::MutexGuard<'_, OrgState> {
        self.inner.lock().expect("mock lock")
    }

    pub fn set_behaviour(&self, b: SalesforceBehaviour) {
        let mut s = self.state();
        if b.revoked {
            // Revoking a refresh token also ends the sessions it gave.
            s.access_token = None;
        }
        s.behaviour = b;
    }

    pub fn behaviour(&self) -> SalesforceBehaviour {
        self.state().behaviour.clone()
    }

    /// Ends the current session: the next request with it gets 401 `INVALID_SESSION_ID`.
    pub fn expire_access_token(&self) {
        self.state().access_token = None;
    }

    /// Sets the org's API usage as `Sforce-Limit-Info` reports it (each API request adds one).
    pub fn set_api_usage(&self, used: u64, max: u64) {
        let mut s = self.state();
        s.api_used = used;
        s.api_max = max;
    }

    pub fn api_usage(&self) -> (u64, u64) {
        let s = self.state();
        (s.api_used, s.api_max)
    }

    /// Requests to the token endpoint, answered or refused.
    pub fn token_requests(&self) -> usize {
        self.state().token_requests
    }

    /// The refresh token the mock accepts now (it changes with rotation).
    pub fn current_refresh_token(&self) -> String {
        self.state().refresh_token.clone()
    }

    pub fn patch_times(&self) -> Vec<DateTime<Utc>> {
        self.state().patches.clone()
    }

    pub fn records(&self) -> usize {
        self.state().records.len()
    }

    pub fn record(&self, external_id: &str) -> Option<SfRecord> {
        self.state().records.get(external_id).cloned()
    }

    pub fn all_records(&self) -> Vec<(String, SfRecord)> {
        self.state().records.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// Errors are a JSON array of `{message, errorCode, fields}` ("Status Codes and Error Responses").
fn errors(status: StatusCode, code: &str, message: &str, fields: &[&str]) -> (StatusCode, Json<Value>) {
    (status, Json(json!([{"message": message, "errorCode": code, "fields": fields}])))
}

/// Every REST API answer carries `Sforce-Limit-Info: api-usage=<used>/<max>` ("Limit Info Header").
fn with_usage(s: &OrgState, answer: impl IntoResponse) -> Response {
    let mut r = answer.into_response();
    if let Ok(v) = format!("api-usage={}/{}", s.api_used, s.api_max).parse() {
        r.headers_mut().insert("sforce-limit-info", v);
    }
    r
}

/// Checks the session and the allowance of an API request; counts it.
fn gate(s: &mut OrgState, headers: &HeaderMap) -> Option<Response> {
    s.api_used += 1;
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if s.access_token.is_none() || bearer != s.access_token.as_deref() {
        // An expired or revoked session: 401 with INVALID_SESSION_ID ("Status Codes and Error Responses").
        let answer = errors(StatusCode::UNAUTHORIZED, "INVALID_SESSION_ID", "Session expired or invalid", &[]);
        return Some(with_usage(s, answer));
    }
    if let Some((status, retry_after)) = s.behaviour.refusal.and_then(|r| Some((r.status, r.retry_after(Utc::now())?)))
    {
        // "Status Codes and Error Responses": 503 when the server is down for maintenance or overloaded; the error
        // code is the one Salesforce uses for it.
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let answer = errors(status, "SERVER_UNAVAILABLE", "Server temporarily unavailable. Please try again.", &[]);
        let mut r = with_usage(s, answer);
        if let Ok(v) = retry_after.parse() {
            r.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
        }
        return Some(r);
    }
    if let Some((rate, burst)) = s.behaviour.concurrent_limit {
        let now = Instant::now();
        let (tokens, since) = s.bucket.unwrap_or((burst, now));
        let tokens = (tokens + now.duration_since(since).as_secs_f64() * rate).min(burst);
        let refused = tokens < 1.0;
        s.bucket = Some((if refused { tokens } else { tokens - 1.0 }, now));
        if refused {
            // "API Request Limits and Allocations": too many concurrent long-running requests; it passes in seconds.
            let answer =
                errors(StatusCode::FORBIDDEN, "REQUEST_LIMIT_EXCEEDED", "ConcurrentPerOrgLongTxn Limit exceeded.", &[]);
            return Some(with_usage(s, answer));
        }
    }
    if s.behaviour.limit_exceeded {
        // The org's total request limit: 403 REQUEST_LIMIT_EXCEEDED ("API Request Limits and Allocations").
        s.api_used = s.api_used.max(s.api_max);
        let answer = errors(StatusCode::FORBIDDEN, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.", &[]);
        return Some(with_usage(s, answer));
    }
    None
}

async fn token(State(mock): State<MockSalesforce>, Form(form): Form<BTreeMap<String, String>>) -> Response {
    let mut s = mock.state();
    s.token_requests += 1;
    let field = |k: &str| form.get(k).map(String::as_str).unwrap_or("");
    // Errors of the token endpoint are `{"error", "error_description"}` with 400 ("OAuth 2.0 Refresh Token Flow").
    let refuse = |error: &str, description: &str| {
        (StatusCode::BAD_REQUEST, Json(json!({"error": error, "error_description": description}))).into_response()
    };
    if field("grant_type") != "refresh_token" {
        return refuse("unsupported_grant_type", "grant type not supported");
    }
    if field("client_id") != CLIENT_ID {
        return refuse("invalid_client_id", "client identifier invalid");
    }
    if field("client_secret") != CLIENT_SECRET {
        return refuse("invalid_client", "invalid client credentials");
    }
    if s.behaviour.revoked || field("refresh_token") != s.refresh_token {
        return refuse("invalid_grant", "expired access/refresh token");
    }
    s.issued += 1;
    let access = format!("00DMOCK!AQ{}.session{}", rand::random::<u32>(), s.issued);
    s.access_token = Some(access.clone());
    // The documented answer: access_token, instance_url, id, token_type "Bearer", issued_at (ms), signature; with
    // rotation, a new refresh_token that replaces the old one.
    let mut answer = json!({
        "access_token": access,
        "instance_url": s.base_url,
        "id": format!("{}/id/00DMOCK000000000001/005MOCK000000000001", s.base_url),
        "token_type": "Bearer",
        "issued_at": Utc::now().timestamp_millis().to_string(),
        "signature": "bW9jay1zaWduYXR1cmU=",
        "scope": "api refresh_token",
    });
    if s.behaviour.rotate_refresh_tokens {
        let next = format!("5Aep861mock-rotated-{}", s.issued);
        s.refresh_token = next.clone();
        answer["refresh_token"] = next.into();
    }
    (StatusCode::OK, Json(answer)).into_response()
}

async fn describe(
    State(mock): State<MockSalesforce>,
    Path((_version, object)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let mut s = mock.state();
    if let Some(refused) = gate(&mut s, &headers) {
        return refused;
    }
    if object != OBJECT {
        // An unknown sObject: 404 NOT_FOUND ("Status Codes and Error Responses").
        let answer = errors(StatusCode::NOT_FOUND, "NOT_FOUND", "The requested resource does not exist", &[]);
        return with_usage(&s, answer);
    }
    // "sObject Describe": name, label and `fields[]` with each field's name, type and `externalId` flag (a
    // small subset of the real answer).
    let field = |name: &str, kind: &str, external: bool| json!({"name": name, "type": kind, "externalId": external});
    let answer = json!({
        "name": OBJECT, "label": "Lead", "createable": true, "updateable": true,
        "fields": [
            field("Id", "id", false), field("LastName", "string", false), field("FirstName", "string", false),
            field("Company", "string", false), field("Email", "email", false), field("Phone", "phone", false),
            field("LeadSource", "picklist", false), field(EXTERNAL_ID_FIELD, "string", true),
        ],
    });
    with_usage(&s, (StatusCode::OK, Json(answer)))
}

async fn upsert(
    State(mock): State<MockSalesforce>,
    Path((version, object, field, value)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut s = mock.state();
    s.patches.push(Utc::now());
    if let Some(refused) = gate(&mut s, &headers) {
        return refused;
    }
    if object != OBJECT {
        let answer = errors(StatusCode::NOT_FOUND, "NOT_FOUND", "The requested resource does not exist", &[]);
        return with_usage(&s, answer);
    }
    if field != EXTERNAL_ID_FIELD {
        // "Insert or Update (Upsert) a Record Using an External ID", error responses: an incorrect external id
        // field is 404 NOT_FOUND.
        let message = format!("Provided external ID field does not exist or is not accessible: {field}");
        return with_usage(&s, errors(StatusCode::NOT_FOUND, "NOT_FOUND", &message, &[]));
    }
    if s.behaviour.duplicates {
        // Several records match the external id: 300 with the list of their URLs; nothing written ("sObject Rows
        // by External ID").
        let answer = json!([
            format!("/services/data/{version}/sobjects/{OBJECT}/00QMOCK00000000001"),
            format!("/services/data/{version}/sobjects/{OBJECT}/00QMOCK00000000002"),
        ]);
        return with_usage(&s, (StatusCode::MULTIPLE_CHOICES, Json(answer)));
    }
    let fields = body.as_object().cloned().unwrap_or_default();
    if fields.keys().any(|k| k == "Id" || *k == field) {
        let answer = errors(
            StatusCode::BAD_REQUEST,
            "INVALID_FIELD",
            "Unable to create/update fields: Id. Please check the security settings of this field.",
            &["Id"],
        );
        return with_usage(&s, answer);
    }
    let refused = s.behaviour.validation.iter().find(|rule| {
        fields.get(&rule.field).and_then(Value::as_str).is_some_and(|v| v.contains(rule.refuses.as_str()))
    });
    if let Some(rule) = refused {
        let answer = errors(StatusCode::BAD_REQUEST, &rule.error_code, &rule.message, &[rule.field.as_str()]);
        return with_usage(&s, answer);
    }
    let update_204 = s.behaviour.update_204;
    if let Some(record) = s.records.get_mut(&value) {
        record.fields.extend(fields);
        record.writes += 1;
        let id = record.id.clone();
        // An update: 200 with `created: false` (API 46.0 and later), or 204 without a body (older versions).
        return if update_204 {
            with_usage(&s, StatusCode::NO_CONTENT)
        } else {
            let answer = json!({"id": id, "success": true, "errors": [], "created": false});
            with_usage(&s, (StatusCode::OK, Json(answer)))
        };
    }
    let missing: Vec<&str> = ["LastName", "Company"]
        .into_iter()
        .filter(|f| fields.get(*f).and_then(Value::as_str).is_none_or(|v| v.trim().is_empty()))
        .collect();
    if !missing.is_empty() {
        // A create without a required field: 400 REQUIRED_FIELD_MISSING naming the fields.
        let message = format!("Required fields are missing: [{}]", missing.join(", "));
        return with_usage(&s, errors(StatusCode::BAD_REQUEST, "REQUIRED_FIELD_MISSING", &message, &missing));
    }
    let id = format!("00QMOCK{:011}", s.records.len() + 1);
    s.records.insert(value, SfRecord { id: id.clone(), fields, writes: 1 });
    // Created: 201 `{"id", "success": true, "errors": [], "created": true}`.
    let answer = json!({"id": id, "success": true, "errors": [], "created": true});
    with_usage(&s, (StatusCode::CREATED, Json(answer)))
}
