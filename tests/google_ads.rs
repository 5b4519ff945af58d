//! Google Ads lead forms: the real server takes Google's webhook as Google documents it, checks the key in its
//! body before storing anything, gives the lead the shape a Meta lead has, and keeps test leads out of the CRM.
//!
//! Every body here follows Google's `WebhookLead` schema (Google Ads "Webhook implementation guide",
//! developers.google.com/google-ads/webhook/docs/implementation): `lead_id`, `user_column_data[]` of
//! `{column_id, string_value, column_name}`, int64 `form_id`/`campaign_id`/`adgroup_id`/`creative_id` as JSON
//! numbers, `gcl_id`, `google_key`, `is_test`, `api_version`.

mod common;

use std::time::Duration;

use common::{TestApp, GOOGLE_KEY};
use leadline::api;
use serde_json::{json, Value};

const EXTRA: &str = r#"
[sources.google]
kind = "google_ads"
route = ["crm"]
key_env = "TEST_GOOGLE_KEY"

[sources.google_tests]
kind = "google_ads"
route = ["crm"]
key_env = "TEST_GOOGLE_KEY"
deliver_test_leads = true
"#;

async fn spawn() -> TestApp {
    common::spawn_with_extra(common::idempotent_crm, EXTRA).await
}

/// A lead as Google posts it, with `key` as its `google_key` (left out when `None`).
fn google_lead(lead_id: &str, key: Option<&str>, is_test: bool) -> Value {
    let mut body = json!({
        "lead_id": lead_id,
        "user_column_data": [
            {"column_name": "Full Name", "string_value": "Grace Hopper", "column_id": "FULL_NAME"},
            {"column_name": "User Email", "string_value": format!("{lead_id}@example.com"), "column_id": "EMAIL"},
            {"column_name": "User Phone", "string_value": "+4915112345678", "column_id": "PHONE_NUMBER"},
            {"column_name": "Which product?", "string_value": "heat pump", "column_id": "PRODUCT_QUESTION_1"}
        ],
        "api_version": "1.0",
        "form_id": 40000000001u64,
        "campaign_id": 50000000002u64,
        "adgroup_id": 60000000003u64,
        "creative_id": 70000000004u64,
        "gcl_id": format!("Cj0KCQ-{lead_id}"),
        "is_test": is_test
    });
    if let Some(key) = key {
        body["google_key"] = key.into();
    }
    body
}

async fn post(app: &TestApp, source: &str, body: &Value) -> (u16, Value) {
    let r = app.http.post(app.url(&format!("/ingest/{source}"))).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn stored(app: &TestApp, source_ref: &str) -> Vec<leadline::store::LeadMatch> {
    let found = app.server.app.store.find_leads(source_ref, 10).await.unwrap();
    found.into_iter().filter(|m| m.source_ref == source_ref).collect()
}

#[tokio::test]
async fn a_google_lead_reaches_the_crm_in_the_meta_lead_shape_once() {
    let app = spawn().await;
    let body = google_lead("GL-1", Some(GOOGLE_KEY), false);
    let (status, answer) = post(&app, "google", &body).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["events"][0]["source_ref"], "GL-1");
    // Google posts again when its first post went unanswered: the same lead, stored once.
    let (status, answer) = post(&app, "google", &body).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")));
    app.wait_settled(Duration::from_secs(10)).await;

    let lead = app.crm.lead_for("google:GL-1").expect("delivered to the CRM");
    // Meta's field names: one mapping (`/fields/email`, `/fields/full_name`, `/fields/phone_number`) serves both.
    assert_eq!(lead["fields"]["email"], "GL-1@example.com");
    assert_eq!(lead["fields"]["full_name"], "Grace Hopper");
    assert_eq!(lead["fields"]["phone_number"], "+4915112345678");
    assert_eq!(lead["fields"]["product_question_1"], "heat pump");
    for (key, id) in [
        ("form_id", "40000000001"),
        ("campaign_id", "50000000002"),
        ("adgroup_id", "60000000003"),
        ("creative_id", "70000000004"),
        ("gcl_id", "Cj0KCQ-GL-1"),
        ("lead_id", "GL-1"),
    ] {
        assert_eq!(lead[key], id, "{key}");
    }
    assert_eq!(lead["is_test"], false);
    assert!(lead.get("google_key").is_none(), "the key never leaves Leadline: {lead}");
    let found = stored(&app, "GL-1").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].status, leadline::store::LeadStatus::Delivered);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_missing_or_wrong_key_is_refused_and_nothing_is_stored() {
    let app = spawn().await;
    let (status, answer) = post(&app, "google", &google_lead("GL-nokey", None, false)).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("missing_key")), "{answer}");
    let (status, answer) = post(&app, "google", &google_lead("GL-wrong", Some("google-form-kez"), false)).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("bad_key")), "{answer}");
    let (status, _) = post(&app, "google", &google_lead("GL-empty", Some(""), false)).await;
    assert_eq!(status, 401);
    for id in ["GL-nokey", "GL-wrong", "GL-empty"] {
        assert!(stored(&app, id).await.is_empty(), "{id} was stored");
    }
    assert!(app.server.app.store.deliveries().await.unwrap().is_empty());
    // The same lead with the right key goes in.
    assert_eq!(post(&app, "google", &google_lead("GL-wrong", Some(GOOGLE_KEY), false)).await.0, 202);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_test_lead_is_stored_and_shown_but_reaches_no_crm_unless_the_source_says_so() {
    let app = spawn().await;
    assert_eq!(post(&app, "google", &google_lead("GL-test", Some(GOOGLE_KEY), true)).await.0, 202);
    assert_eq!(post(&app, "google_tests", &google_lead("GL-test-sent", Some(GOOGLE_KEY), true)).await.0, 202);
    assert_eq!(post(&app, "google", &google_lead("GL-real", Some(GOOGLE_KEY), false)).await.0, 202);
    app.wait_settled(Duration::from_secs(10)).await;

    let found = stored(&app, "GL-test").await;
    assert_eq!(found.len(), 1, "the test lead is stored");
    assert_eq!(found[0].status, leadline::store::LeadStatus::Test);
    assert_eq!(found[0].steps, 0);
    let story = api::lead_story(&app.server.app, found[0].event_id).await.unwrap();
    assert_eq!(story.lead.payload["is_test"], true);
    assert!(app.crm.lead_for("google:GL-test").is_none(), "a test lead never reaches the CRM");
    // The source that asks for them delivers its test leads; real leads go as always.
    assert!(app.crm.lead_for("google_tests:GL-test-sent").is_some());
    assert!(app.crm.lead_for("google:GL-real").is_some());
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_sources_page_shows_what_to_paste_into_google_ads() {
    let app = spawn().await;
    let sources = api::sources(&app.server.app).await.unwrap();
    let google = sources.iter().find(|s| s.status.source == "google").expect("listed");
    assert_eq!(google.kind, "google_ads");
    assert!(google.signed);
    let setup = google.webhook.as_ref().expect("a Google source shows its webhook setup");
    assert_eq!(setup.path, "/ingest/google");
    // Masked like every secret: only its last four characters, to tell which key Google Ads holds.
    assert_eq!(setup.key_masked.as_deref(), Some("••••-key"));
    assert!(!setup.delivers_test_leads);
    let meta = sources.iter().find(|s| s.status.source == "meta").unwrap();
    assert!(meta.webhook.is_none());
    let listed = app.api_get("/api/sources").send().await.unwrap().text().await.unwrap();
    assert!(listed.contains("••••-key") && !listed.contains(GOOGLE_KEY), "the list never carries the key");

    // The key itself only by an explicit action, with the operator's credential (a write: same-origin rules).
    let reveal = app.url("/api/sources/google/key");
    let anonymous = app.http.post(&reveal).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let revealed: Value = app.http.post(&reveal).bearer_auth(app.token()).send().await.unwrap().json().await.unwrap();
    assert_eq!(revealed, json!({"source": "google", "key": GOOGLE_KEY}));
    let not_google = app.http.post(app.url("/api/sources/meta/key")).bearer_auth(app.token()).send().await.unwrap();
    assert_eq!(not_google.status(), 400);
    app.server.shutdown().await.unwrap();
}
