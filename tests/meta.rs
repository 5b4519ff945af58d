//! Meta leads against a mock of Meta's Graph API: a webhook's lead is fetched before any CRM sees it, a lead has
//! one shape whichever path brought it, and a failing Graph (expired page token, throttling) holds leads without
//! losing them and raises one alert per incident that resolves itself.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{alerts_of, one_alert_resolved, spawn, wait_for, TestApp, SECRET};
use leadline::api;
use leadline::demo::mock_crm::{GraphBehaviour, GraphThrottle};
use leadline::demo::waits::Refusal;
use leadline::ingest::signature::sign;
use serde_json::{json, Value};

/// Lists a lead on form 7 of page 99 with its answers, as Meta keeps it.
fn list(app: &TestApp, id: &str, created: DateTime<Utc>) {
    let answers = json!([
        {"name": "full_name", "values": ["Ada Lovelace"]},
        {"name": "email", "values": [format!("{id}@example.com")]},
        {"name": "phone_number", "values": ["+4915112345678"]},
        {"name": "preferred_time", "values": ["morning"]}
    ]);
    app.crm.list_lead("7", id, created, json!({"ad_id": "6001", "field_data": answers}));
}

/// A signed `leadgen` notification for `ids`, as Meta sends it (ids as JSON numbers, time as Unix seconds).
async fn webhook(app: &TestApp, ids: &[&str], created: DateTime<Utc>) -> reqwest::StatusCode {
    let changes: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"field": "leadgen", "value": {"leadgen_id": id.parse::<u64>().unwrap(), "page_id": 99,
                "form_id": 7, "adgroup_id": 6001, "ad_id": 6001, "created_time": created.timestamp()}})
        })
        .collect();
    let body =
        json!({"object": "page", "entry": [{"id": 99, "time": created.timestamp(), "changes": changes}]}).to_string();
    app.http
        .post(app.url("/ingest/meta"))
        .header("X-Hub-Signature-256", sign(SECRET.as_bytes(), body.as_bytes()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
}

/// Waits for the reconciliation every source runs at start, so a test's own runs do not race it.
async fn startup_reconciliation_done(app: &TestApp) {
    let store = &app.server.app.store;
    wait_for("the start-up reconciliation", Duration::from_secs(10), async || {
        leadline::reconcile::latest(store, "meta").await.unwrap().is_some_and(|r| r.finished_at.is_some())
    })
    .await;
}

#[tokio::test]
async fn a_webhook_lead_reaches_the_crm_with_its_answers() {
    let app = spawn().await;
    let created = Utc::now() - chrono::Duration::minutes(3);
    list(&app, "700000000000000001", created);
    assert_eq!(webhook(&app, &["700000000000000001"], created).await, 202);
    app.wait_settled(Duration::from_secs(10)).await;

    let lead = app.crm.lead_for("meta:700000000000000001").expect("delivered");
    assert_eq!(lead["fields"]["email"], "700000000000000001@example.com");
    assert_eq!(lead["fields"]["full_name"], "Ada Lovelace");
    assert_eq!(lead["fields"]["preferred_time"], "morning");
    assert_eq!(lead["leadgen_id"], "700000000000000001");
    assert_eq!(lead["page_id"], "99");
    assert_eq!(lead["ad_id"], "6001");
    assert_eq!(lead["created_time"], created.format("%Y-%m-%dT%H:%M:%SZ").to_string());
    assert_eq!(lead["field_data"].as_array().map(Vec::len), Some(4), "the raw answer is kept");
    // The stored lead is the fetched one: the dead-letter and lead views show its fields.
    let events = app.server.app.store.stored_events().await.unwrap();
    let stored = events.iter().find(|e| e.source == "meta" && e.source_ref == "700000000000000001").expect("stored");
    assert_eq!(stored.payload, lead);
    // Exactly one Graph request for it: a checkpointed step is never fetched twice.
    let fetches = app.crm.graph_requests().iter().filter(|(_, p)| p.ends_with("/700000000000000001")).count();
    assert_eq!(fetches, 1);
    app.server.shutdown().await.unwrap();
}

/// A 503 from the Graph API with `Retry-After` holds the whole `meta_lead` step. Forty leads wait for their fetch
/// and eight fetches are in flight when Graph starts refusing: no request reaches Graph inside a wait it announced
/// except those already on the wire, after each wait one fetch goes alone, and every lead is fetched once and
/// reaches the CRM once, with its answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_from_graph_holds_every_fetch_until_it_ends() {
    let app = spawn().await;
    let created = Utc::now() - chrono::Duration::minutes(1);
    let ids: Vec<String> = (0..40).map(|i| format!("7500000000000000{i:02}")).collect();
    for id in &ids {
        list(&app, id, created);
    }
    api::set_target_paused(&app.server.app, "meta_fetch", true, "test").await.unwrap();
    for chunk in ids.chunks(10) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        assert_eq!(webhook(&app, &refs, created).await, 202);
    }
    let refusal = Refusal::seconds(503, 1, Duration::from_millis(2_500));
    // Every fetch takes 20 ms: eight are in flight when the first refusal comes back.
    app.crm.set_graph(GraphBehaviour { refusal: Some(refusal), latency_ms: 20, ..Default::default() });
    api::set_target_paused(&app.server.app, "meta_fetch", false, "test").await.unwrap();
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.dead_open, 0, "{h:?}");

    let honoured = app.crm.graph_waits().verdict().unwrap_or_else(|fault| panic!("{fault}"));
    eprintln!("meta_lead (Graph), 503 with Retry-After: 1 for 2.5 s: {honoured}");
    assert!(honoured.inside.waits >= 2 && honoured.reopenings >= 2, "{honoured:?}");
    let fetched = app.crm.graph_waits().requests();
    for id in &ids {
        let good = fetched.iter().filter(|r| r.what.ends_with(id.as_str()) && r.status == Some(200)).count();
        assert_eq!(good, 1, "{id} fetched {good} times");
        assert_eq!(app.crm.records_for(&format!("meta:{id}")), 1, "{id}");
        assert_eq!(app.crm.lead_for(&format!("meta:{id}")).unwrap()["fields"]["full_name"], "Ada Lovelace");
    }
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_lead_that_meta_no_longer_has_is_a_data_dead_letter_not_sent_on_without_data() {
    let app = spawn().await;
    assert_eq!(webhook(&app, &["700000000000000009"], Utc::now()).await, 202);
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open, 1);
    assert_eq!(app.crm.records_for("meta:700000000000000009"), 0, "never sent on without its answers");
    let dead =
        app.server.app.store.deliveries().await.unwrap().into_iter().find(|d| d.state.as_str() == "dead").unwrap();
    let reason = dead.dead_reason.unwrap_or_default();
    assert_eq!(dead.dead_class.as_deref(), Some("permanent_data"));
    assert!(reason.contains("does not exist") && reason.contains("90 days"), "{reason}");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_expired_page_token_holds_the_leads_with_one_alert_and_they_go_on_after_renewal() {
    let app = spawn().await;
    let created = Utc::now() - chrono::Duration::minutes(1);
    let ids: Vec<String> = (0..20).map(|i| format!("7100000000000000{i:02}")).collect();
    for id in &ids {
        list(&app, id, created);
    }
    app.crm.set_graph(GraphBehaviour { token_expired: true, ..Default::default() });
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(webhook(&app, &refs, created).await, 202);

    // Every lead waits; nothing is dead-lettered and no CRM sees a lead without its answers.
    wait_for("the credentials alert", Duration::from_secs(10), async || {
        !alerts_of(&app, "credentials").await.is_empty()
    })
    .await;
    app.worker_passes(10).await;
    let h = app.health().await;
    assert_eq!(h.overall.dead_open, 0);
    assert_eq!(h.overall.pending + h.overall.running, 20);
    assert_eq!(app.crm.stats().records, 0);
    let alerts = alerts_of(&app, "credentials").await;
    assert_eq!(alerts.len(), 1, "one alert for the incident: {alerts:?}");
    assert_eq!(alerts[0].key, "TEST_GRAPH_TOKEN");
    assert!(alerts[0].detail.contains("TEST_GRAPH_TOKEN"), "{}", alerts[0].detail);
    assert!(alerts[0].resolved_at.is_none());
    // While held, only one probe per cooldown (300 ms) reaches Graph, not one request per lead.
    let during = app.crm.graph_requests().len();
    assert!(during < 20, "{during} Graph requests while the token was refused");
    let counted: i64 = app.server.app.store.deliveries().await.unwrap().iter().map(|d| d.attempts).sum();
    assert_eq!(counted, 0, "a refused credential uses no attempts");

    // The token is renewed: the leads go on by themselves, each exactly once, and the alert resolves.
    app.crm.set_graph(GraphBehaviour::default());
    app.wait_settled(Duration::from_secs(15)).await;
    for id in &ids {
        assert_eq!(app.crm.records_for(&format!("meta:{id}")), 1, "{id}");
        assert_eq!(app.crm.lead_for(&format!("meta:{id}")).unwrap()["fields"]["full_name"], "Ada Lovelace");
    }
    one_alert_resolved(&app, "credentials").await;
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn throttled_fetches_wait_without_using_attempts_and_nothing_is_lost() {
    let app = spawn().await;
    let created = Utc::now() - chrono::Duration::minutes(1);
    let ids: Vec<String> = (0..10).map(|i| format!("7200000000000000{i:02}")).collect();
    for id in &ids {
        list(&app, id, created);
    }
    // Throttled without a usage header: Leadline backs off by itself (full jitter).
    app.crm.set_graph(GraphBehaviour {
        throttled: Some(GraphThrottle { code: 4, regain_minutes: None }),
        ..Default::default()
    });
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(webhook(&app, &refs, created).await, 202);
    app.worker_passes(10).await;
    assert_eq!(app.crm.stats().records, 0);
    app.crm.set_graph(GraphBehaviour::default());
    let h = app.wait_settled(Duration::from_secs(15)).await;
    assert_eq!(h.overall.dead_open, 0);
    for id in &ids {
        assert_eq!(app.crm.records_for(&format!("meta:{id}")), 1, "{id}");
    }
    let store = &app.server.app.store;
    let steps = store.deliveries().await.unwrap();
    let counted: i64 = steps.iter().filter(|d| d.target == "meta_fetch").map(|d| d.attempts).sum();
    let limited =
        store.all_attempts().await.unwrap().iter().filter(|a| a.class.as_deref() == Some("rate_limited")).count();
    assert_eq!(counted, 10, "only the successful fetches count as attempts");
    assert!(limited >= 10, "every lead was answered 'throttled' at least once ({limited})");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn webhook_and_reconciliation_give_the_crm_the_same_lead() {
    // The same lead reaches two Leadlines: one by webhook (then fetched), one by reconciliation (listed).
    let by_webhook = spawn().await;
    let by_listing = common::spawn_with_extra(
        common::idempotent_crm,
        "[sources.meta.reconcile]\nform_ids = [\"7\"]\ninterval_seconds = 3600\n",
    )
    .await;
    startup_reconciliation_done(&by_listing).await;
    let created = Utc::now() - chrono::Duration::minutes(2);
    list(&by_webhook, "730000000000000001", created);
    list(&by_listing, "730000000000000001", created);
    assert_eq!(webhook(&by_webhook, &["730000000000000001"], created).await, 202);
    let run = api::reconcile_now(&by_listing.server.app, "meta").await.unwrap();
    assert_eq!((run.listed, run.missing, run.ingested), (1, 1, 1));
    by_webhook.wait_settled(Duration::from_secs(10)).await;
    by_listing.wait_settled(Duration::from_secs(10)).await;
    let a = by_webhook.crm.lead_for("meta:730000000000000001").unwrap();
    let b = by_listing.crm.lead_for("meta:730000000000000001").unwrap();
    assert_eq!(a, b, "one lead shape whatever the path");
    assert_eq!(a["fields"]["email"], "730000000000000001@example.com");
    // The listed lead came with its answers: no fetch was needed.
    assert!(by_listing.crm.graph_requests().iter().all(|(_, p)| p.ends_with("/leads")));
    by_webhook.server.shutdown().await.unwrap();
    by_listing.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failing_reconciliation_alerts_by_the_rules_and_honours_graphs_backoff() {
    let app = common::spawn_with_extra(
        common::idempotent_crm,
        "[sources.meta.reconcile]\nform_ids = [\"7\"]\ninterval_seconds = 3600\n",
    )
    .await;
    let a = &app.server.app;
    let ingest = a.ingest.clone();
    let client = leadline::reconcile::client();
    let notifier = a.notifier.clone();
    // Runs are driven with explicit times (a day ahead, after the real start-up run), so no test sleeps.
    let t0 = Utc::now() + chrono::Duration::days(1);
    let at = |m: i64| t0 + chrono::Duration::minutes(m);
    let run =
        async |m: i64| leadline::reconcile::reconcile(a, &ingest, &client, notifier.as_ref(), "meta", at(m)).await;
    startup_reconciliation_done(&app).await;
    let before = app.crm.graph_requests().len();
    list(&app, "740000000000000001", Utc::now());

    // Throttled with a usage header: Graph says "12 minutes".
    app.crm.set_graph(GraphBehaviour {
        throttled: Some(GraphThrottle { code: 80001, regain_minutes: Some(12) }),
        ..Default::default()
    });
    assert!(run(0).await.is_err());
    let first = app.crm.graph_requests().len();
    assert_eq!(first, before + 1);
    for m in [1, 5, 11] {
        let e = run(m).await.unwrap_err().to_string();
        assert!(e.contains("no request was sent"), "{e}");
    }
    assert_eq!(app.crm.graph_requests().len(), first, "no request inside Graph's announced back-off");
    assert!(alerts_of(&app, "source_failing").await.is_empty(), "not yet: throttling alerts after 15 minutes");
    // After the back-off Graph is asked again; still throttled, and now it has lasted long enough.
    assert!(run(13).await.is_err());
    assert_eq!(app.crm.graph_requests().len(), first + 1);
    assert!(alerts_of(&app, "source_failing").await.is_empty());
    assert!(run(26).await.is_err());
    let failing = alerts_of(&app, "source_failing").await;
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert!(failing[0].title.contains("throttling") && failing[0].title.contains("26 min"), "{}", failing[0].title);
    assert!(run(39).await.is_err());
    assert_eq!(alerts_of(&app, "source_failing").await.len(), 1, "one alert per incident");

    // Graph answers again: the next good run resolves it and recovers the lead.
    app.crm.set_graph(GraphBehaviour::default());
    let ok = run(52).await.unwrap();
    assert_eq!(ok.missing, 1);
    assert!(alerts_of(&app, "source_failing").await.iter().all(|a| a.resolved_at.is_some()));

    // An expired token alerts at once (policy immediate), names where to put the new one, resolves after.
    app.crm.set_graph(GraphBehaviour { token_expired: true, ..Default::default() });
    let e = run(60).await.unwrap_err().to_string();
    assert!(e.contains("190"), "{e}");
    let creds = alerts_of(&app, "credentials").await;
    assert_eq!(creds.len(), 1);
    assert_eq!(creds[0].severity.as_str(), "critical");
    assert!(creds[0].detail.contains("TEST_GRAPH_TOKEN"), "{}", creds[0].detail);
    assert!(creds[0].notifications >= 1, "announced at once");
    app.crm.set_graph(GraphBehaviour::default());
    run(61).await.unwrap();
    assert!(alerts_of(&app, "credentials").await.iter().all(|a| a.resolved_at.is_some()));
    // Nothing lost: the listed lead was stored, once, with its answers.
    let events = app.server.app.store.stored_events().await.unwrap();
    let stored: Vec<_> = events.iter().filter(|e| e.source == "meta" && e.source_ref == "740000000000000001").collect();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].payload["fields"]["full_name"], "Ada Lovelace");
    app.server.shutdown().await.unwrap();
}
