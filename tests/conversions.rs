//! The chain back: a lead's CRM stages reach the ad platforms as conversions. The real server and worker, the
//! HubSpot mock as the CRM, the Graph mock for Meta's lead fetch, and mocks here of the two conversion APIs and
//! Google's OAuth endpoint, each answering as its vendor documents:
//!
//! - Meta's Conversions API for CRM leads: `POST /{version}/{dataset_id}/events` with `{"data": [event…]}`,
//!   answered `{"events_received": n, "messages": [], "fbtrace_id"}`; a bad event fails the whole request with a
//!   Graph error (`{"error": {"message", "type": "OAuthException", "code": 100, "error_subcode", "fbtrace_id"}}`).
//! - Google Ads REST `customers/{id}:uploadClickConversions` with `partialFailure`: `results[]` (an empty object
//!   for a failed row) and `partialFailureError.details[].errors[]` naming each row (`EVENT_NOT_FOUND`);
//!   `401 UNAUTHENTICATED` for an expired access token.
//! - Google's OAuth 2.0 token endpoint: form `grant_type=refresh_token` → `{access_token, expires_in, token_type}`.
//! - A HubSpot contact workflow's "Send a webhook" body: `{"vid", "portal-id", "properties": {"lifecyclestage":
//!   {"value", "timestamp"}, "leadline_id": {"value"}}}`.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Form, Json, Router};
use chrono::{DateTime, Utc};
use common::{TestApp, GOOGLE_KEY, SECRET};
use leadline::demo::mock_crm::MockCrm;
use leadline::demo::mock_hubspot::MockHubspot;
use leadline::server::Server;
use serde_json::{json, Value};

const DATASET: &str = "880011";
const CUSTOMER: &str = "1234567890";
const MANAGER: &str = "9998887776";

/// What the conversion mocks saw and how they answer.
#[derive(Default)]
struct Platforms {
    /// Every CAPI request's events, in arrival order.
    capi_requests: Vec<Vec<Value>>,
    /// Events Meta stored (from requests it accepted).
    capi_events: Vec<Value>,
    /// An event whose `user_data.em` is one of these makes Meta refuse its whole request.
    capi_bad_em: Vec<String>,
    /// A `Lead` event whose `user_data.em` is one of these makes Meta answer a transient error (Graph code 2,
    /// `is_transient`) for its whole request, until the test takes it out.
    capi_unavailable_em: Vec<String>,
    tokens_issued: u32,
    /// The access token Google accepts now.
    valid_token: Option<String>,
    /// Every upload request's headers of interest: (login-customer-id, developer-token present).
    upload_headers: Vec<(Option<String>, bool)>,
    /// Conversions Google stored, by orderId.
    uploaded: BTreeMap<String, Value>,
    /// Rows refused (orderId, error code).
    refused_rows: Vec<(String, String)>,
}

type Shared = Arc<Mutex<Platforms>>;

async fn capi(
    State(p): State<Shared>,
    Path((_v, dataset)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    assert_eq!(dataset, DATASET);
    let events = body["data"].as_array().cloned().unwrap_or_default();
    let mut p = p.lock().unwrap();
    p.capi_requests.push(events.clone());
    let bad = events.iter().any(|e| {
        e["user_data"]["em"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .is_some_and(|h| p.capi_bad_em.iter().any(|b| b == h))
    });
    let unavailable = events.iter().any(|e| {
        e["event_name"] == "Lead"
            && e["user_data"]["em"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .is_some_and(|h| p.capi_unavailable_em.iter().any(|b| b == h))
    });
    if unavailable {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": {"message": "An unexpected error has occurred. Please retry your request later.",
                "type": "OAuthException", "is_transient": true, "code": 2, "fbtrace_id": "AbC"}})),
        );
    }
    if bad || events.len() > 1000 {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": "Invalid parameter", "type": "OAuthException", "code": 100,
                "error_subcode": 2804003, "error_user_msg": "The event has an invalid user_data parameter", "fbtrace_id": "AbC"}})),
        );
    }
    p.capi_events.extend(events.iter().cloned());
    (StatusCode::OK, Json(json!({"events_received": events.len(), "messages": [], "fbtrace_id": "AbC"})))
}

async fn token(State(p): State<Shared>, Form(form): Form<BTreeMap<String, String>>) -> (StatusCode, Json<Value>) {
    if form.get("grant_type").map(String::as_str) != Some("refresh_token")
        || form.get("refresh_token").map(String::as_str) != Some("refresh-me")
    {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant", "error_description": "Bad Request"})));
    }
    let mut p = p.lock().unwrap();
    p.tokens_issued += 1;
    let t = format!("ya29.access-{}", p.tokens_issued);
    p.valid_token = Some(t.clone());
    (
        StatusCode::OK,
        Json(
            json!({"access_token": t, "expires_in": 3599, "token_type": "Bearer", "scope": "https://www.googleapis.com/auth/adwords"}),
        ),
    )
}

async fn upload(
    State(p): State<Shared>,
    Path((_v, rest)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    assert_eq!(rest, format!("{CUSTOMER}:uploadClickConversions"));
    assert_eq!(body["partialFailure"], true);
    let mut p = p.lock().unwrap();
    let given = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    if Some(format!("Bearer {}", p.valid_token.clone().unwrap_or_default())) != Some(given) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(
                json!({"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}),
            ),
        );
    }
    p.upload_headers.push((
        headers.get("login-customer-id").and_then(|v| v.to_str().ok()).map(str::to_string),
        headers.contains_key("developer-token"),
    ));
    let mut results = Vec::new();
    let mut errors = Vec::new();
    for (i, row) in body["conversions"].as_array().cloned().unwrap_or_default().into_iter().enumerate() {
        let order = row["orderId"].as_str().unwrap_or_default().to_string();
        let gclid = row["gclid"].as_str().unwrap_or_default();
        let code = if gclid.starts_with("unknown") {
            Some("EVENT_NOT_FOUND")
        } else if p.uploaded.contains_key(&order) {
            Some("CLICK_CONVERSION_ALREADY_EXISTS")
        } else {
            None
        };
        match code {
            Some(code) => {
                p.refused_rows.push((order, code.into()));
                results.push(json!({}));
                errors
                    .push(json!({"errorCode": {"conversionUploadError": code}, "message": "The click was not found.",
                    "location": {"fieldPathElements": [{"fieldName": "conversions", "index": i}]}}));
            }
            None => {
                results.push(json!({"gclid": gclid, "conversionAction": row["conversionAction"], "conversionDateTime": row["conversionDateTime"]}));
                p.uploaded.insert(order, row);
            }
        }
    }
    let mut answer = json!({"results": results});
    if !errors.is_empty() {
        answer["partialFailureError"] = json!({"code": 3, "message": "Multiple errors in 'details'.", "details": [
            {"@type": "type.googleapis.com/google.ads.googleads.v22.errors.GoogleAdsFailure", "errors": errors, "requestId": "r1"}]});
    }
    (StatusCode::OK, Json(answer))
}

async fn start_platforms() -> (Shared, SocketAddr) {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route("/graph/{version}/{dataset}/events", post(capi))
        .route("/oauth/token", post(token))
        .route("/gads/{version}/customers/{rest}", post(upload))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (shared, addr)
}

struct Chain {
    app: TestApp,
    hubspot: MockHubspot,
    platforms: Shared,
}

fn config(crm: SocketAddr, hubspot: SocketAddr, platforms: SocketAddr, db: &std::path::Path) -> String {
    let fast = r#"timeout_ms = 2000
backoff = { base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }
breaker = { consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }"#;
    format!(
        r#"
[server]
listen = "127.0.0.1:0"

[database]
url = "{db}"

[worker]
lease_seconds = 5
poll_interval_ms = 20
rescue_interval_seconds = 1
batch_size = 1000

[sources.google]
kind = "google_ads"
route = ["crm"]
key_env = "TEST_GOOGLE_KEY"

[sources.meta]
kind = "meta"
route = ["meta_fetch", "crm", "capi"]
app_secret_env = "TEST_META_SECRET"
verify_token_env = "TEST_META_VERIFY"
page_id = "99"

[sources.web]
route = ["capi"]

[sources.form]
route = ["crm", "capi"]

[sources.hubspot_stages]
kind = "crm_stage"
route = ["capi", "gads"]

[sources.hubspot_signed]
kind = "crm_stage"
route = ["gads"]
signature = {{ scheme = "hubspot_v3", secret_env = "TEST_HUBSPOT_CLIENT_SECRET", url = "{SIGNED_URL}" }}

[targets.meta_fetch]
kind = "meta_lead"
url = "http://{crm}/graph"
access_token_env = "TEST_GRAPH_TOKEN"
{fast}

[targets.crm]
kind = "hubspot"
url = "http://{hubspot}"
auth = {{ bearer_env = "TEST_HUBSPOT_TOKEN" }}
id_property = "leadline_id"
{fast}

[[targets.crm.mapping]]
to = "email"
from = ["email", "/fields/email"]
transform = ["trim", "lowercase"]
required = true

[[targets.crm.mapping]]
to = "firstname"
from = ["name", "/fields/full_name"]
transform = ["first_name"]

[targets.capi]
kind = "meta_conversions"
url = "http://{platforms}/graph"
access_token_env = "TEST_CAPI_TOKEN"
dataset_id = "{DATASET}"
lead_event_source = "HubSpot"
stages = {{ lead = "Lead", marketingqualifiedlead = "Qualified", customer = "Purchase" }}
timeout_ms = 2000
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 10000, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}

[targets.gads]
kind = "google_ads_conversions"
url = "http://{platforms}/gads"
api_version = "v22"
token_url = "http://{platforms}/oauth/token"
customer_id = "{CUSTOMER}"
login_customer_id = "{MANAGER}"
client_id_env = "TEST_GADS_CLIENT_ID"
client_secret_env = "TEST_GADS_CLIENT_SECRET"
refresh_token_env = "TEST_GADS_REFRESH"
stages = {{ customer = "customers/{CUSTOMER}/conversionActions/555" }}
{fast}
"#,
        db = common::database_url(db)
    )
}

async fn spawn() -> Chain {
    common::init_test_log();
    let (hubspot, hubspot_addr) = MockHubspot::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (platforms, platforms_addr) = start_platforms().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = common::parse_config(&config(crm_addr, hubspot_addr, platforms_addr, &dir.path().join("l.db")));
    for (k, v) in [
        ("TEST_HUBSPOT_TOKEN", leadline::demo::mock_hubspot::TOKEN),
        ("TEST_CAPI_TOKEN", "capi-token"),
        ("TEST_GADS_CLIENT_ID", "client.apps.googleusercontent.com"),
        ("TEST_GADS_CLIENT_SECRET", "client-secret"),
        ("TEST_GADS_REFRESH", "refresh-me"),
        ("TEST_HUBSPOT_CLIENT_SECRET", HUBSPOT_CLIENT_SECRET),
    ] {
        c.inline_secrets.insert(k.into(), v.into());
    }
    let server = Server::start(c).await.unwrap();
    Chain { app: TestApp { server, crm, crm_addr, http: reqwest::Client::new(), dir }, hubspot, platforms }
}

/// A HubSpot contact workflow's webhook: the contact `vid` with `leadline_id` reached `stage` at `at`.
fn workflow_webhook(vid: &str, leadline_id: Option<&str>, stage: &str, at: DateTime<Utc>) -> Value {
    let mut properties = json!({"lifecyclestage": {"value": stage, "timestamp": at.timestamp_millis()}});
    if let Some(id) = leadline_id {
        properties["leadline_id"] = json!({"value": id});
    }
    json!({"vid": vid.parse::<u64>().unwrap_or(0), "portal-id": 62515, "properties": properties})
}

async fn post_stage(app: &TestApp, body: &Value) -> (u16, Value) {
    let r = app.http.post(app.url("/ingest/hubspot_stages")).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The HubSpot app's client secret, and the URL HubSpot calls for the `hubspot_signed` source (behind a proxy:
/// Leadline itself listens on 127.0.0.1).
const HUBSPOT_CLIENT_SECRET: &str = "hubspot-app-client-secret";
const SIGNED_URL: &str = "https://leads.example.com/ingest/hubspot_signed";

/// `X-HubSpot-Signature-v3` computed here as HubSpot's "Validating requests" guide gives it, independently of
/// Leadline's code: base64(HMAC-SHA256(client secret, "POST" + URL + body + timestamp)).
fn hubspot_v3(secret: &str, body: &str, timestamp: &str) -> String {
    use base64::Engine as _;
    use hmac::Mac as _;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("POST{SIGNED_URL}{body}{timestamp}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

async fn steps_of(app: &TestApp, target: &str) -> Vec<leadline::store::DeliveryRecord> {
    app.server.app.store.deliveries().await.unwrap().into_iter().filter(|d| d.target == target).collect()
}

#[tokio::test]
async fn a_google_lead_goes_to_hubspot_and_comes_back_to_google_ads_as_a_conversion() {
    let chain = spawn().await;
    let app = &chain.app;
    // Google's WebhookLead (Webhook implementation guide).
    let lead = json!({"lead_id": "GL-7", "api_version": "1.0", "form_id": 40000000001u64, "campaign_id": 50000000002u64,
        "adgroup_id": 60000000003u64, "creative_id": 70000000004u64, "gcl_id": "Cj0KCQ-click-7", "google_key": GOOGLE_KEY,
        "is_test": false, "user_column_data": [
            {"column_name": "Full Name", "string_value": "Grace Hopper", "column_id": "FULL_NAME"},
            {"column_name": "User Email", "string_value": "grace@example.com", "column_id": "EMAIL"}]});
    let r = app.http.post(app.url("/ingest/google")).json(&lead).send().await.unwrap();
    assert_eq!(r.status(), 202);
    app.wait_settled(Duration::from_secs(10)).await;
    let contact = chain.hubspot.contact("leadline_id", "google:GL-7").expect("the lead is a HubSpot contact");
    assert_eq!(contact.properties["email"], "grace@example.com");

    // The salesperson closes the deal: HubSpot's workflow posts the contact's new stage.
    let closed = Utc::now() - chrono::Duration::hours(2);
    let webhook = workflow_webhook(&contact.id, Some("google:GL-7"), "customer", closed);
    let (status, answer) = post_stage(app, &webhook).await;
    assert_eq!(status, 202, "{answer}");
    // HubSpot retries a webhook it thinks failed: the same stage twice is one conversion.
    let (status, answer) = post_stage(app, &webhook).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")), "{answer}");
    app.wait_settled(Duration::from_secs(10)).await;

    {
        let p = chain.platforms.lock().unwrap();
        assert_eq!(p.uploaded.len(), 1, "{:?}", p.uploaded);
        let row = &p.uploaded["google:GL-7:customer"];
        assert_eq!(row["gclid"], "Cj0KCQ-click-7");
        assert_eq!(row["conversionAction"], format!("customers/{CUSTOMER}/conversionActions/555"));
        assert_eq!(row["conversionDateTime"], closed.format("%Y-%m-%d %H:%M:%S+00:00").to_string());
        assert_eq!(p.tokens_issued, 1, "one OAuth refresh for the run");
        assert_eq!(p.upload_headers, vec![(Some(MANAGER.to_string()), false)], "login-customer-id, no developer token");
        // The same stage reached Meta too, matched by the hashed e-mail.
        let purchase: Vec<&Value> = p.capi_events.iter().filter(|e| e["event_name"] == "Purchase").collect();
        assert_eq!(purchase.len(), 1);
        assert_eq!(purchase[0]["event_id"], "google:GL-7:customer");
    }
    println!(
        "figure: google:GL-7 → HubSpot contact {} → stage `customer` → Google Ads conversion orderId google:GL-7:customer (1 upload, duplicate webhook answered 200)",
        contact.id
    );
    chain.app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_meta_leads_stages_reach_the_conversions_api_in_order() {
    let chain = spawn().await;
    let app = &chain.app;
    let created = Utc::now() - chrono::Duration::hours(30);
    app.crm.list_lead(
        "7",
        "700000000000000042",
        created,
        json!({"ad_id": "6001", "field_data": [
        {"name": "full_name", "values": ["Ada Lovelace"]}, {"name": "email", "values": ["ada@example.com"]}]}),
    );
    let body = json!({"object": "page", "entry": [{"id": 99, "time": created.timestamp(), "changes": [{"field": "leadgen",
        "value": {"leadgen_id": 700000000000000042u64, "page_id": 99, "form_id": 7, "created_time": created.timestamp()}}]}]})
    .to_string();
    let r = app
        .http
        .post(app.url("/ingest/meta"))
        .header("X-Hub-Signature-256", leadline::ingest::signature::sign(SECRET.as_bytes(), body.as_bytes()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    app.wait_settled(Duration::from_secs(10)).await;
    let contact = chain.hubspot.contact("leadline_id", "meta:700000000000000042").expect("in HubSpot");
    // The CRM's stages: by the external id, then by the HubSpot record id alone.
    let mql = Utc::now() - chrono::Duration::hours(20);
    let won = Utc::now() - chrono::Duration::hours(1);
    let (s, a) =
        post_stage(app, &workflow_webhook(&contact.id, Some("meta:700000000000000042"), "marketingqualifiedlead", mql))
            .await;
    assert_eq!(s, 202, "{a}");
    let (s, a) = post_stage(app, &workflow_webhook(&contact.id, None, "customer", won)).await;
    assert_eq!(s, 202, "{a}");
    // A stage no step maps is acknowledged and sent nowhere.
    let (s, a) = post_stage(app, &workflow_webhook(&contact.id, None, "evangelist", won)).await;
    assert_eq!((s, a["status"].as_str()), (200, Some("ignored")), "{a}");
    app.wait_settled(Duration::from_secs(10)).await;

    let (names, times) = {
        let p = chain.platforms.lock().unwrap();
        let mine: Vec<&Value> =
            p.capi_events.iter().filter(|e| e["user_data"]["lead_id"] == 700000000000000042u64).collect();
        let names: Vec<String> = mine.iter().map(|e| e["event_name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names, ["Lead", "Qualified", "Purchase"], "every stage, the first lead stage included, in order");
        let times: Vec<i64> = mine.iter().map(|e| e["event_time"].as_i64().unwrap()).collect();
        assert_eq!(times, [created.timestamp(), mql.timestamp(), won.timestamp()]);
        for e in &mine {
            assert_eq!(e["action_source"], "system_generated");
            assert_eq!(e["custom_data"]["event_source"], "crm");
            assert_eq!(e["custom_data"]["lead_event_source"], "HubSpot");
            assert_eq!(
                e["user_data"]["em"][0],
                leadline::targets::meta_conversions::wire::sha256_hex("ada@example.com")
            );
        }
        (names, times)
    };
    // The Meta lead has no Google click: its `customer` stage is reported at the Google step, not sent.
    let gads = steps_of(app, "gads").await;
    assert_eq!(gads.len(), 1);
    assert_eq!(gads[0].state, "reported", "stored as reported, not as delivered");
    assert!(gads[0].result.as_deref().unwrap_or_default().contains("no Google click id"), "{:?}", gads[0].result);
    assert!(chain.platforms.lock().unwrap().uploaded.is_empty());
    println!("figure: meta:700000000000000042 → CAPI events {names:?} at {times:?}");
    chain.app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_later_stage_waits_while_the_leads_earlier_stage_is_retried() {
    let chain = spawn().await;
    let app = &chain.app;
    let em = leadline::targets::meta_conversions::wire::sha256_hex("order@example.com");
    chain.platforms.lock().unwrap().capi_unavailable_em.push(em.clone());
    let mine = |e: &Value| e["user_data"]["em"][0] == em.as_str();
    assert_eq!(app.post_plain_to("form", &json!({"id": "F-1", "email": "order@example.com"})).await, 202);
    // The lead reaches HubSpot; its `lead` stage is refused by Meta for now (a retryable error) and retried.
    common::wait_for("the Lead event to be refused at least twice", Duration::from_secs(10), async || {
        chain.platforms.lock().unwrap().capi_requests.iter().flatten().filter(|e| mine(e)).count() >= 2
    })
    .await;
    let contact = chain.hubspot.contact("leadline_id", "form:F-1").expect("in HubSpot");
    let mql = Utc::now() - chrono::Duration::hours(1);
    let (s, a) = post_stage(app, &workflow_webhook(&contact.id, Some("form:F-1"), "marketingqualifiedlead", mql)).await;
    assert_eq!(s, 202, "{a}");
    // The worker has had its chances to send `Qualified`: it waits behind the `Lead` being retried.
    app.worker_passes(5).await;
    {
        let p = chain.platforms.lock().unwrap();
        let names: Vec<&str> =
            p.capi_requests.iter().flatten().filter(|e| mine(e)).filter_map(|e| e["event_name"].as_str()).collect();
        assert!(names.len() >= 2 && names.iter().all(|n| *n == "Lead"), "only the Lead was tried: {names:?}");
        assert!(p.capi_events.iter().all(|e| !mine(e)), "Meta has nothing of this lead yet");
    }
    let waiting = steps_of(app, "capi").await;
    let qualified = waiting.iter().find(|d| d.source_ref == "form:F-1:marketingqualifiedlead").unwrap();
    assert_eq!((qualified.state.as_str(), qualified.attempts), ("pending", 0), "due, held back, never tried");

    // Meta answers again: the Lead goes, then the Qualified.
    chain.platforms.lock().unwrap().capi_unavailable_em.clear();
    app.wait_settled(Duration::from_secs(10)).await;
    {
        let p = chain.platforms.lock().unwrap();
        let stored: Vec<&str> =
            p.capi_events.iter().filter(|e| mine(e)).filter_map(|e| e["event_name"].as_str()).collect();
        assert_eq!(stored, ["Lead", "Qualified"], "the lead's stages reached Meta in order");
        let first_with =
            |name: &str| p.capi_requests.iter().position(|r| r.iter().any(|e| mine(e) && e["event_name"] == name));
        let lead_refusals =
            p.capi_requests.iter().flatten().filter(|e| mine(e) && e["event_name"] == "Lead").count() - 1;
        assert!(first_with("Lead") < first_with("Qualified"));
        println!("figure: form:F-1 Lead refused {lead_refusals} times (Graph code 2), Qualified held back meanwhile, then sent after it");
    }
    chain.app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_old_stage_is_reported_not_sent_and_an_unknown_lead_is_refused() {
    let chain = spawn().await;
    let app = &chain.app;
    assert_eq!(app.post_plain_to("web", &json!({"id": "W-1", "email": "old@example.com"})).await, 202);
    app.wait_settled(Duration::from_secs(10)).await;
    let sent_before = chain.platforms.lock().unwrap().capi_events.len();
    // A stage reached eight days ago: past Meta's 7-day window.
    let eight_days = Utc::now() - chrono::Duration::days(8);
    let (s, a) = post_stage(app, &workflow_webhook("0", Some("web:W-1"), "customer", eight_days)).await;
    assert_eq!(s, 202, "{a}");
    app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(chain.platforms.lock().unwrap().capi_events.len(), sent_before, "nothing more reached Meta");
    let event_id = a["events"][0]["event_id"].as_i64().unwrap();
    let story = leadline::api::lead_story(&app.server.app, event_id).await.unwrap();
    let capi = story.lead.steps.iter().find(|s| s.target == "capi").unwrap();
    assert_eq!(capi.state, "reported");
    let why = capi.reported.clone().unwrap();
    assert!(why.starts_with("reported: too old for Meta's 7-day window"), "{why}");
    assert!(app.server.app.store.dead_letters(&Default::default()).await.unwrap().is_empty(), "not a dead letter");
    assert_eq!(capi.attempts_timeline.len(), 1, "one decision, not a retry");
    assert_eq!(capi.attempts_timeline[0].http_status, None, "nothing was sent");
    assert_eq!(capi.attempts_timeline[0].outcome, "reported", "the attempt is not a delivery either");
    // Stored as a state of its own: the Targets page counts it apart from deliveries and dead letters, and it is
    // final (nothing due, nothing to retry).
    let stored = steps_of(app, "capi").await;
    let stored = stored.iter().find(|d| d.source_ref == "web:W-1:customer").unwrap();
    assert_eq!((stored.state.as_str(), stored.attempts, stored.lease_owner.as_deref()), ("reported", 1, None));
    let health = app.health().await;
    let capi_health = health.targets.iter().find(|t| t.target == "capi").unwrap();
    assert_eq!(
        (capi_health.reported, capi_health.delivered, capi_health.dead_open, capi_health.pending + capi_health.running),
        (1, 1, 0, 0),
        "the web lead's own `lead` stage delivered, its old `customer` stage reported"
    );
    let counted = app.server.app.store.recount_deliveries().await.unwrap();
    assert_eq!(counted.get(&("capi".to_string(), "reported".to_string())), Some(&1), "the kept tally matches the rows");
    app.worker_passes(3).await;
    assert_eq!(chain.platforms.lock().unwrap().capi_events.len(), sent_before, "never tried again");

    let (s, a) = post_stage(app, &workflow_webhook("4242", Some("google:never-seen"), "customer", Utc::now())).await;
    assert_eq!((s, a["code"].as_str()), (422, Some("unknown_lead")), "{a}");
    assert!(a["message"].as_str().unwrap().contains("google:never-seen"), "{a}");
    println!("figure: web:W-1 stage `customer` 8 days old → {why}");
    chain.app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_bad_event_in_a_batch_of_1000_is_parked_alone() {
    let chain = spawn().await;
    let app = &chain.app;
    let bad = "lead-0637@example.com";
    chain.platforms.lock().unwrap().capi_bad_em.push(leadline::targets::meta_conversions::wire::sha256_hex(bad));
    leadline::api::set_target_paused(&app.server.app, "capi", true, "test").await.unwrap();
    for i in 0..1000 {
        let body = json!({"id": format!("L-{i:04}"), "email": format!("lead-{i:04}@example.com")});
        assert_eq!(app.post_plain_to("web", &body).await, 202);
    }
    leadline::api::set_target_paused(&app.server.app, "capi", false, "test").await.unwrap();
    app.wait_settled(Duration::from_secs(30)).await;

    let steps = steps_of(app, "capi").await;
    let delivered = steps.iter().filter(|d| d.state == "delivered").count();
    let dead: Vec<_> = steps.iter().filter(|d| d.state == "dead").collect();
    assert_eq!((delivered, dead.len()), (999, 1), "{:?}", dead.first().map(|d| &d.dead_reason));
    assert_eq!(dead[0].source_ref, "L-0637");
    assert_eq!(dead[0].dead_class.as_deref(), Some("permanent_data"));
    {
        let p = chain.platforms.lock().unwrap();
        assert_eq!(p.capi_events.len(), 999);
        let first = p.capi_requests.first().map_or(0, Vec::len);
        println!(
        "figure: 1000 events, first request {first} events, {} requests in all, 999 received by Meta, 1 dead letter (L-0637: {})",
        p.capi_requests.len(),
        dead[0].dead_reason.clone().unwrap_or_default()
    );
        assert!(p.capi_requests.len() <= 2 * 10 + 1, "narrowed down by halves: {} requests", p.capi_requests.len());
    }
    chain.app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unknown_click_is_that_leads_data_error_and_an_expired_token_is_refreshed() {
    let chain = spawn().await;
    let app = &chain.app;
    for (id, gclid) in [("GL-a", "Cj0-good-a"), ("GL-b", "unknown-click"), ("GL-c", "Cj0-good-c")] {
        let lead = json!({"lead_id": id, "gcl_id": gclid, "google_key": GOOGLE_KEY, "form_id": 1,
            "user_column_data": [{"column_id": "EMAIL", "string_value": format!("{id}@example.com")}]});
        assert_eq!(app.http.post(app.url("/ingest/google")).json(&lead).send().await.unwrap().status(), 202);
    }
    app.wait_settled(Duration::from_secs(10)).await;
    let stage = async |id: &str| {
        let c = chain.hubspot.contact("leadline_id", &format!("google:{id}")).unwrap();
        let (s, a) =
            post_stage(app, &workflow_webhook(&c.id, Some(&format!("google:{id}")), "customer", Utc::now())).await;
        assert_eq!(s, 202, "{a}");
    };
    stage("GL-a").await;
    app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(chain.platforms.lock().unwrap().tokens_issued, 1);
    // Google revokes the access token Leadline holds: the next upload is refused once, the token refreshed.
    chain.platforms.lock().unwrap().valid_token = Some("revoked".into());
    leadline::api::set_target_paused(&app.server.app, "gads", true, "test").await.unwrap();
    stage("GL-b").await;
    stage("GL-c").await;
    leadline::api::set_target_paused(&app.server.app, "gads", false, "test").await.unwrap();
    app.wait_settled(Duration::from_secs(10)).await;

    let steps = steps_of(app, "gads").await;
    let by_ref = |r: &str| steps.iter().find(|d| d.source_ref == r).cloned().unwrap();
    assert_eq!(by_ref("google:GL-a:customer").state, "delivered");
    assert_eq!(by_ref("google:GL-c:customer").state, "delivered");
    let unknown = by_ref("google:GL-b:customer");
    assert_eq!(unknown.state, "dead", "an unknown click is a data error of that lead alone");
    assert_eq!(unknown.dead_class.as_deref(), Some("permanent_data"));
    assert!(unknown.dead_reason.as_deref().unwrap().contains("EVENT_NOT_FOUND"));
    {
        let p = chain.platforms.lock().unwrap();
        assert_eq!(p.tokens_issued, 2, "refreshed once after the 401");
        assert!(p.uploaded.contains_key("google:GL-a:customer") && p.uploaded.contains_key("google:GL-c:customer"));
        assert_eq!(p.refused_rows, vec![("google:GL-b:customer".to_string(), "EVENT_NOT_FOUND".to_string())]);
    }
    chain.app.server.shutdown().await.unwrap();
}

trait PostTo {
    async fn post_plain_to(&self, source: &str, body: &Value) -> u16;
}

impl PostTo for TestApp {
    async fn post_plain_to(&self, source: &str, body: &Value) -> u16 {
        self.http.post(self.url(&format!("/ingest/{source}"))).json(body).send().await.unwrap().status().as_u16()
    }
}

#[tokio::test]
async fn a_stage_with_hubspots_v3_signature_is_taken_and_a_wrong_or_stale_one_refused_unstored() {
    let chain = spawn().await;
    let app = &chain.app;
    let lead = json!({"lead_id": "GL-v3", "gcl_id": "Cj0-v3", "google_key": GOOGLE_KEY, "form_id": 1,
        "user_column_data": [{"column_id": "EMAIL", "string_value": "v3@example.com"}]});
    assert_eq!(app.http.post(app.url("/ingest/google")).json(&lead).send().await.unwrap().status(), 202);
    app.wait_settled(Duration::from_secs(10)).await;
    let contact = chain.hubspot.contact("leadline_id", "google:GL-v3").expect("the lead is a HubSpot contact");
    let body = workflow_webhook(&contact.id, Some("google:GL-v3"), "customer", Utc::now()).to_string();
    let send = async |signature: Option<String>, timestamp: Option<String>| {
        let mut r = app.http.post(app.url("/ingest/hubspot_signed")).header("content-type", "application/json");
        if let Some(s) = signature {
            r = r.header("X-HubSpot-Signature-v3", s);
        }
        if let Some(t) = timestamp {
            r = r.header("X-HubSpot-Request-Timestamp", t);
        }
        let r = r.body(body.clone()).send().await.unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
    };
    let stored = app.server.app.store.count_events().await.unwrap();
    let now = Utc::now().timestamp_millis().to_string();
    let code = |a: &Value| a["code"].as_str().unwrap_or_default().to_string();

    let (s, a) = send(None, None).await;
    assert_eq!((s, code(&a)), (401, "missing_signature".into()), "{a}");
    // Signed with another secret.
    let (s, a) = send(Some(hubspot_v3("not-the-client-secret", &body, &now)), Some(now.clone())).await;
    assert_eq!((s, code(&a)), (401, "bad_signature".into()), "{a}");
    // Signed, then given a fresher timestamp: the timestamp is part of what is signed.
    let (s, a) = send(Some(hubspot_v3(HUBSPOT_CLIENT_SECRET, &body, "1700000000000")), Some(now.clone())).await;
    assert_eq!((s, code(&a)), (401, "bad_signature".into()), "{a}");
    // Rightly signed six minutes ago: a replay.
    let old = (Utc::now() - chrono::Duration::minutes(6)).timestamp_millis().to_string();
    let (s, a) = send(Some(hubspot_v3(HUBSPOT_CLIENT_SECRET, &body, &old)), Some(old)).await;
    assert_eq!((s, code(&a)), (401, "stale_signature".into()), "{a}");
    assert_eq!(app.server.app.store.count_events().await.unwrap(), stored, "nothing refused is stored");

    let (s, a) = send(Some(hubspot_v3(HUBSPOT_CLIENT_SECRET, &body, &now)), Some(now.clone())).await;
    assert_eq!(s, 202, "{a}");
    assert_eq!(app.server.app.store.count_events().await.unwrap(), stored + 1);
    app.wait_settled(Duration::from_secs(10)).await;
    assert!(
        chain.platforms.lock().unwrap().uploaded.contains_key("google:GL-v3:customer"),
        "the stage went on to Google Ads"
    );
    chain.app.server.shutdown().await.unwrap();
}
