//! The worker against the mock CRM: every accepted lead ends delivered exactly once or in the DLQ with a
//! reason; counted at the CRM.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use leadline::delivery::worker::WorkerEvent;
use leadline::demo::mock_crm::Behaviour;
use leadline::demo::waits::Refusal;
use leadline::dlq::{self, DeadLetterFilter};
use reqwest::StatusCode;
use serde_json::json;

/// A refusal made when its round begins (its times count from then).
type NewRefusal = fn() -> Refusal;

fn plain_crm(crm: SocketAddr) -> String {
    // No idempotency at all: a second send makes a second record, so duplicates are visible.
    format!(
        r#"
[targets.crm]
url = "http://{crm}/crm/plain"
strategy = "none"
timeout_ms = 300
concurrency = 8
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 50, failure_ratio = 0.0 }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_faults_every_lead_is_delivered_once_or_dead_with_a_reason() {
    let app = spawn().await;
    // Blips, timeouts after the write, and the field-format change all at once.
    app.crm.set_behaviour(Behaviour {
        blip_ratio: 0.15,
        hang_after_write_ratio: 0.1,
        hang_ms: 700,
        strict_phone: true,
        ..Default::default()
    });
    let n = 150;
    let mut bad_phone = 0;
    for i in 0..n {
        let mut body = lead(&format!("F-{i}"));
        if i % 10 == 0 {
            body["phone"] = json!("0151 1234 5678");
            bad_phone += 1;
        }
        assert_eq!(app.post_webform(&body).await, StatusCode::ACCEPTED);
    }
    let h = app.wait_settled(Duration::from_secs(60)).await;
    let stats = app.crm.stats();
    // Nothing lost: every lead is in the CRM or in the DLQ.
    let dead =
        dlq::list(&app.server.app.store, &DeadLetterFilter { limit: Some(1000), ..Default::default() }).await.unwrap();
    let dead_crm: Vec<_> = dead.iter().filter(|d| d.target == "crm").collect();
    assert_eq!(stats.records + dead_crm.len(), n, "records {} + dead {}", stats.records, dead_crm.len());
    // Nothing duplicated, despite retries after timeouts that happened after the write.
    assert_eq!(stats.duplicated_external_ids, 0);
    // The bad phones, and only they, are dead as permanent_data with the CRM's message and field.
    assert_eq!(dead_crm.len(), bad_phone, "{dead_crm:#?}");
    for d in &dead_crm {
        assert_eq!(d.class.unwrap().as_str(), "permanent_data");
        assert_eq!(d.http_status, Some(422));
        assert!(d.reason.contains("E.164"), "{}", d.reason);
        assert_eq!(d.field.as_deref(), Some("phone"));
    }
    // Every lead in the CRM got its follow-up step, which needed the CRM id.
    assert_eq!(stats.notifications, stats.records);
    assert_eq!(h.overall.delivered as usize, stats.records * 2);
    // The follow-up steps of dead leads wait behind them (they run if the lead is fixed and replayed).
    assert_eq!(h.overall.waiting as usize, bad_phone);
    assert_eq!(h.overall.dead_open_by_class.get("permanent_data"), Some(&(bad_phone as i64)));
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_missing_permission_dead_letters_at_once_with_the_crm_message() {
    let app = spawn().await;
    app.crm.set_behaviour(Behaviour { fail_with: Some(403), ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "T-1", "phone": "+4912345678"})).await, StatusCode::ACCEPTED);
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open_by_class.get("permanent_config"), Some(&1));
    let api = leadline::api::dead_letters(&app.server.app, &DeadLetterFilter::default()).await.unwrap();
    let d = &api.items[0];
    assert_eq!(d.class.unwrap().as_str(), "permanent_config");
    assert_eq!(d.http_status, Some(403));
    assert_eq!(d.attempts, 1, "a permanent failure is not retried");
    assert!(d.reason.contains("hasn't been granted all required scopes"), "{}", d.reason);
    let detail = leadline::api::dead_letter(&app.server.app, d.delivery_id).await.unwrap();
    assert_eq!(detail.detail.attempts_timeline.len(), 1);
    assert_eq!(detail.detail.attempts_timeline[0].http_status, Some(403));
    assert!(detail.detail.attempts_timeline[0].response_excerpt.as_deref().unwrap().contains("MISSING_SCOPES"));
    assert_eq!(detail.detail.payload["id"], "T-1");
    // Over HTTP too.
    let r = app.api_get("/api/dead-letters?class=permanent_config").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["items"][0]["source_ref"], "T-1");
    let r = app.api_get("/api/dead-letters?class=bogus").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    app.server.shutdown().await.unwrap();
}

/// An expired token pauses the target instead of dead-lettering the world: its leads wait (no dead letter, no
/// attempt used, one probe per breaker cooldown), one `credentials` alert names the secret. A new token written
/// to the secrets file and a reload of secrets (no restart) send the waiting leads, and the alert resolves.
#[tokio::test]
async fn an_expired_token_holds_the_target_and_a_reload_of_secrets_sends_the_waiting_leads() {
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets.env");
    std::fs::write(&secrets, "# the CRM token\nTEST_CRM_TOKEN=expired-token\n").unwrap();
    // A long cooldown: nothing but the reload can let the leads go within this test.
    let target = idempotent_crm(crm_addr).replace("cooldown_ms = 300", "cooldown_ms = 60000")
        + "auth = { bearer_env = \"TEST_CRM_TOKEN\" }\n";
    let mut config = parse_config(&config_text(crm_addr, &dir.path().join("leadline.db"), &target));
    config.secrets_file = Some(secrets.clone());
    let server = leadline::server::Server::start(config).await.unwrap();
    let app = TestApp { server, crm, crm_addr, http: reqwest::Client::new(), dir };
    app.crm.set_behaviour(Behaviour { require_bearer: Some("renewed-token".into()), ..Default::default() });
    let a = &app.server.app;

    for i in 0..20 {
        assert_eq!(app.post_plain(&json!({"id": format!("X-{i}")})).await, StatusCode::ACCEPTED);
    }
    wait_for("the credentials alert", Duration::from_secs(10), || async {
        leadline::api::alerts(a)
            .await
            .unwrap()
            .iter()
            .any(|al| al.kind.as_str() == "credentials" && al.state.as_str() == "open")
    })
    .await;
    // Requests already on their way when the first refusal came back are answered too; after it, the hold lets
    // nothing through (the cooldown is a minute): give the worker time to (wrongly) send more.
    let attempts_now = || async {
        let attempts = a.store.all_attempts().await.unwrap().len();
        let counted: i64 = a.store.deliveries().await.unwrap().iter().map(|d| d.attempts).sum();
        (attempts, counted)
    };
    wait_for("the requests in flight answered", Duration::from_secs(10), async || {
        app.health().await.overall.running == 0
    })
    .await;
    let (held_at, counted) = attempts_now().await;
    app.worker_passes(5).await;
    let h = app.health().await.overall;
    assert_eq!((h.dead_open, h.delivered, h.pending + h.running), (0, 0, 20), "{h:?}");
    assert_eq!(attempts_now().await.0, held_at, "nothing is sent while the target is held");
    assert!((1..=8).contains(&held_at), "at most the requests in flight (concurrency 8): {held_at}");
    assert_eq!(counted, 0, "a refused credential uses no attempt");
    let alerts: Vec<_> =
        leadline::api::alerts(a).await.unwrap().into_iter().filter(|al| al.kind.as_str() == "credentials").collect();
    assert_eq!(alerts.len(), 1, "one alert for the incident: {alerts:?}");
    assert!(alerts[0].title.contains("TEST_CRM_TOKEN"), "{}", alerts[0].title);
    assert!(alerts[0].detail.contains("reload"), "{}", alerts[0].detail);
    let view = leadline::api::targets(a).await.unwrap().into_iter().find(|t| t.name == "crm").unwrap();
    assert!(
        matches!(view.hold.map(|h| h.reason), Some(leadline::delivery::worker::HoldReason::Credentials { .. })),
        "the Targets page says the target refuses its credential"
    );

    // The operator renews the token in the secrets file and reloads: no restart.
    std::fs::write(&secrets, "TEST_CRM_TOKEN=renewed-token\n").unwrap();
    let report = leadline::api::reload_secrets(a, "test").await.unwrap();
    let crm_line = report.iter().find(|r| r.target == "crm").unwrap();
    assert!(crm_line.ok && crm_line.message.contains("20 waiting leads go now"), "{crm_line:?}");
    let h = app.wait_settled(Duration::from_secs(15)).await.overall;
    assert_eq!((h.delivered, h.dead_open), (20, 0), "{h:?}");
    assert_eq!(app.crm.distinct_leads(), 20);
    assert_eq!(app.crm.stats().duplicated_external_ids, 0);
    wait_for("the alert resolves", Duration::from_secs(10), || async {
        leadline::api::alerts(a)
            .await
            .unwrap()
            .iter()
            .any(|al| al.kind.as_str() == "credentials" && al.state.as_str() == "resolved")
    })
    .await;

    // A secret that cannot be read leaves the target with what it had, and says so.
    std::fs::write(&secrets, "OTHER=1\n").unwrap();
    let report = leadline::api::reload_secrets(a, "test").await.unwrap();
    let crm_line = report.iter().find(|r| r.target == "crm").unwrap();
    assert!(!crm_line.ok && crm_line.message.contains("TEST_CRM_TOKEN"), "{crm_line:?}");
    assert_eq!(app.post_plain(&json!({"id": "after"})).await, StatusCode::ACCEPTED);
    let h = app.wait_settled(Duration::from_secs(10)).await.overall;
    assert_eq!(h.delivered, 21, "the renewed token is still used");
    app.server.shutdown().await.unwrap();
}

/// A reload of secrets while a request with the old token is on its way: the refusal that comes back answers the
/// token that was replaced, so it neither holds the target for the cooldown (a minute here) nor raises the
/// credentials alert — the lead goes again at once with the new token.
#[tokio::test]
async fn a_refusal_of_the_token_a_reload_replaced_holds_nothing() {
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    // Each answer, the refusal too, takes 1.5 s: time for the reload while the first request is on its way.
    crm.set_behaviour(Behaviour {
        require_bearer: Some("renewed-token".into()),
        latency_ms: 1_500,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets.env");
    std::fs::write(&secrets, "TEST_CRM_TOKEN=expired-token\n").unwrap();
    let target = idempotent_crm(crm_addr)
        .replace("cooldown_ms = 300", "cooldown_ms = 60000")
        .replace("timeout_ms = 500", "timeout_ms = 5000")
        + "auth = { bearer_env = \"TEST_CRM_TOKEN\" }\n";
    let mut config = parse_config(&config_text(crm_addr, &dir.path().join("leadline.db"), &target));
    config.secrets_file = Some(secrets.clone());
    let server = leadline::server::Server::start(config).await.unwrap();
    let app = TestApp { server, crm, crm_addr, http: reqwest::Client::new(), dir };
    let a = &app.server.app;

    assert_eq!(app.post_plain(&json!({"id": "ON-THE-WAY"})).await, StatusCode::ACCEPTED);
    wait_for("the request with the old token", Duration::from_secs(10), || async { app.crm.stats().requests >= 1 })
        .await;
    std::fs::write(&secrets, "TEST_CRM_TOKEN=renewed-token\n").unwrap();
    let report = leadline::api::reload_secrets(a, "test").await.unwrap();
    let crm_line = report.iter().find(|r| r.target == "crm").unwrap();
    assert_eq!(crm_line.message, "credentials read again", "the refusal had not come back yet: {crm_line:?}");

    // Without the check the lead would wait out the minute's hold.
    let h = app.wait_settled(Duration::from_secs(15)).await.overall;
    assert_eq!((h.delivered, h.dead_open), (1, 0), "{h:?}");
    assert_eq!(app.crm.distinct_leads(), 1);
    let attempts = a.store.all_attempts().await.unwrap();
    assert_eq!(attempts.len(), 2, "the refused request and the one with the new token: {attempts:?}");
    assert!(attempts.iter().any(|t| t.reason.contains("sent before the secrets were read again")), "{attempts:?}");
    let counted: i64 = a.store.deliveries().await.unwrap().iter().map(|d| d.attempts).sum();
    assert_eq!(counted, 1, "the refusal of the replaced token used no attempt");
    let alerts = leadline::api::alerts(a).await.unwrap();
    assert!(!alerts.iter().any(|al| al.kind.as_str() == "credentials"), "no credentials alert: {alerts:?}");
    let view = leadline::api::targets(a).await.unwrap().into_iter().find(|t| t.name == "crm").unwrap();
    assert!(view.hold.is_none(), "the target is not held: {:?}", view.hold);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn retry_after_is_honoured_and_a_rate_limit_is_not_a_wasted_attempt() {
    let app = spawn().await;
    app.crm.set_behaviour(Behaviour { fail_with: Some(429), retry_after_secs: Some(1), ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "R-1"})).await, StatusCode::ACCEPTED);
    // Wait for the first (rate-limited) attempt, then let the CRM recover at once.
    let store = app.server.app.store.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while dlq::attempts(&store, 1).await.unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no first attempt");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    app.crm.set_behaviour(Behaviour::default());
    app.wait_settled(Duration::from_secs(10)).await;
    let attempts = dlq::attempts(&store, 1).await.unwrap();
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    assert_eq!(attempts[0].class.map(|c| c.as_str()), Some("rate_limited"));
    assert_eq!(attempts[1].outcome.as_str(), "delivered");
    let gap = attempts[1].started_at - attempts[0].started_at;
    assert!(gap >= chrono::Duration::milliseconds(1000), "retried after {gap} despite Retry-After: 1");
    let d = dlq::detail(&store, 1).await.unwrap().unwrap();
    assert_eq!(d.letter.attempts, 1, "the 429 did not count as an attempt");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_ambiguous_outcome_without_a_lookup_is_parked_never_blind_retried() {
    let app = spawn_with(plain_crm).await;
    app.crm.set_behaviour(Behaviour { hang_after_write_ratio: 1.0, hang_ms: 1_000, ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "A-1"})).await, StatusCode::ACCEPTED);
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open_by_class.get("ambiguous"), Some(&1));
    app.worker_passes(5).await;
    assert_eq!(app.crm.records_for("plain:A-1"), 1, "written once, and never sent again");
    let d = &leadline::api::dead_letters(&app.server.app, &DeadLetterFilter::default()).await.unwrap().items[0];
    assert!(d.reason.contains("may have the lead"), "{}", d.reason);
    app.server.shutdown().await.unwrap();
}

/// `crm` as a plain POST (a repeat makes a second record) that looks the lead up before each create
/// (`search_then_create`), with `settings` (its timeout, its concurrency) added.
fn search_then_create(crm: SocketAddr, settings: &str) -> String {
    format!(
        r#"
[targets.crm]
url = "http://{crm}/crm/plain"
strategy = "search_then_create"
search_url = "http://{crm}/crm/leads/search/{{external_id}}"
{settings}
backoff = {{ base_ms = 20, cap_ms = 100, max_attempts = 30, budget_seconds = 600 }}
"#
    )
}

#[tokio::test]
async fn search_then_create_resolves_a_timeout_by_looking_the_lead_up() {
    let app = spawn_with(|crm| search_then_create(crm, "timeout_ms = 300")).await;
    // Every create is stored and then not answered in time.
    app.crm.set_behaviour(Behaviour { hang_after_write_ratio: 1.0, hang_ms: 600, ..Default::default() });
    for i in 0..5 {
        assert_eq!(app.post_plain(&json!({"id": format!("S-{i}")})).await, StatusCode::ACCEPTED);
    }
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.delivered, 5);
    assert_eq!(h.overall.dead_open, 0);
    let stats = app.crm.stats();
    assert_eq!((stats.records, stats.duplicated_external_ids), (5, 0));
    // The link is remembered: a look-up is never needed again for these leads.
    for i in 0..5 {
        let linked = app.server.app.store.crm_link("crm", &format!("plain:S-{i}")).await.unwrap();
        assert!(linked.as_deref().is_some_and(|id| id.starts_with("crm-")), "S-{i}: {linked:?}");
    }
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn exhausted_attempts_dead_letter_as_transient_with_the_last_error() {
    let app = spawn_with(|crm| {
        format!(
            r#"
[targets.crm]
url = "http://{crm}/crm/leads"
strategy = "idempotency_key"
timeout_ms = 300
backoff = {{ base_ms = 5, cap_ms = 20, max_attempts = 3, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 100, failure_ratio = 0.0 }}
"#
        )
    })
    .await;
    app.crm.set_behaviour(Behaviour { fail_with: Some(500), ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "X-1"})).await, StatusCode::ACCEPTED);
    app.wait_settled(Duration::from_secs(10)).await;
    let d = &leadline::api::dead_letters(&app.server.app, &DeadLetterFilter::default()).await.unwrap().items[0];
    assert_eq!(d.class.unwrap().as_str(), "transient");
    assert_eq!(d.attempts, 3);
    assert!(d.reason.starts_with("gave up after 3 attempts; last error: HTTP 500"), "{}", d.reason);
    app.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_stops_traffic_to_a_down_target_then_recovers() {
    let app = spawn().await;
    let mut events = app.server.app.worker.as_ref().unwrap().events.subscribe();
    app.crm.set_behaviour(Behaviour { fail_with: Some(503), ..Default::default() });
    for i in 0..40 {
        assert_eq!(app.post_plain(&json!({"id": format!("B-{i}")})).await, StatusCode::ACCEPTED);
    }
    // Wait for the breaker to open.
    let opened = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(WorkerEvent::Breaker { to, .. }) = events.recv().await {
                if to == leadline::delivery::breaker::BreakerState::Open {
                    return;
                }
            }
        }
    })
    .await;
    assert!(opened.is_ok(), "breaker never opened");
    let health = leadline::api::health(&app.server.app).await.unwrap();
    let crm = health.breakers.iter().find(|b| b.target == "crm").unwrap();
    assert_ne!(crm.state, leadline::delivery::breaker::BreakerState::Closed);

    // While open, only probes reach the CRM: one per 300 ms cooldown, not 40 leads' worth of retries. Counted over
    // four cooldowns, each ended by its probe failing (the breaker opening again), not over a wall-clock while.
    let before = app.crm.stats().requests;
    let reopened = tokio::time::timeout(Duration::from_secs(10), async {
        let mut reopenings = 0;
        while reopenings < 4 {
            if let Ok(WorkerEvent::Breaker { to: leadline::delivery::breaker::BreakerState::Open, .. }) =
                events.recv().await
            {
                reopenings += 1;
            }
        }
    })
    .await;
    assert!(reopened.is_ok(), "the breaker's probes did not fail four times");
    let during = app.crm.stats().requests - before;
    assert!(during <= 7, "{during} requests reached a target whose breaker is open");
    // Deferred jobs did not use attempts: nobody is dead yet.
    assert_eq!(app.health().await.overall.dead_open, 0);

    app.crm.set_behaviour(Behaviour::default());
    let h = app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(h.overall.delivered, 40);
    assert_eq!(app.crm.stats().duplicated_external_ids, 0);
    let transitions = app.server.app.store.breaker_transitions("crm").await.unwrap();
    let states: Vec<&str> = transitions.iter().map(|t| t.to_state.as_str()).collect();
    assert_eq!(states.first(), Some(&"open"));
    assert_eq!(states.last(), Some(&"closed"), "{states:?}");
    app.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_one_database_never_deliver_a_job_twice() {
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    crm.set_behaviour(Behaviour { latency_ms: 3, ..Default::default() });
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(crm_addr, &dir.path().join("shared.db"), &plain_crm(crm_addr));
    let a = leadline::server::Server::start(parse_config(&text)).await.unwrap();
    let b = leadline::server::Server::start(parse_config(&text)).await.unwrap();
    let count = |s: &leadline::server::Server| {
        let mut rx = s.app.worker.as_ref().unwrap().events.subscribe();
        tokio::spawn(async move {
            let mut n = 0u32;
            while let Ok(e) = rx.recv().await {
                if matches!(e, WorkerEvent::Delivered { .. }) {
                    n += 1;
                }
            }
            n
        })
    };
    let (count_a, count_b) = (count(&a), count(&b));
    let http = reqwest::Client::new();
    let n = 300;
    for i in 0..n {
        let target = if i % 2 == 0 { a.addr } else { b.addr };
        let r = http
            .post(format!("http://{target}/ingest/plain"))
            .json(&json!({"id": format!("W-{i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::ACCEPTED);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let h = leadline::api::health(&a.app).await.unwrap().queue.overall;
        if h.delivered == n {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not all delivered: {h:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stats = crm.stats();
    assert_eq!(stats.records, n as usize);
    assert_eq!(stats.duplicated_external_ids, 0);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    let (na, nb) = (count_a.await.unwrap(), count_b.await.unwrap());
    assert_eq!(na + nb, n as u32);
    assert!(na > 0 && nb > 0, "both workers took part: {na} and {nb}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_jobs_still_in_flight_after_the_grace_period() {
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    // The CRM takes 3 s to answer; shutdown grants 1 s.
    crm.set_behaviour(Behaviour { latency_ms: 3_000, ..Default::default() });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("leadline.db");
    let text = config_text(crm_addr, &db, &idempotent_crm(crm_addr).replace("timeout_ms = 500", "timeout_ms = 10000"))
        .replace("shutdown_grace_seconds = 5", "shutdown_grace_seconds = 1");
    let server = leadline::server::Server::start(parse_config(&text)).await.unwrap();
    let r = reqwest::Client::new()
        .post(format!("http://{}/ingest/plain", server.addr))
        .json(&json!({"id": "G-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while leadline::api::health(&server.app).await.unwrap().queue.overall.running == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the job never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = std::time::Instant::now();
    server.shutdown().await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(2_500), "shutdown waited {:?}", started.elapsed());

    // Back in the queue, unleased, no attempt used: the next start sends it again (safely, with its key).
    let store = leadline::store::Store::open(&database_url(&db)).await.unwrap();
    let step = store.delivery(1).await.unwrap().expect("the step");
    assert_eq!((step.state.as_str(), step.attempts, step.lease_owner), ("pending", 0, None));
}

/// A target with a field mapping receives the CRM's record, not the envelope; a lead the mapping cannot use is
/// a data dead letter naming the CRM field, and no request is made for it.
#[tokio::test]
async fn a_mapped_target_receives_the_record_and_a_missing_required_field_is_never_sent() {
    let app = spawn_with(|crm| {
        format!(
            r#"
[targets.crm]
url = "http://{crm}/crm/leads/{{external_id}}"
strategy = "upsert"
timeout_ms = 1000
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}

[[targets.crm.mapping]]
to = "/lead/email"
from = "email"
transform = ["trim", "lowercase"]
required = true

[[targets.crm.mapping]]
to = "/lead/phone"
from = "phone"
transform = [{{ phone_e164 = {{ default_country = "+49" }} }}]

[[targets.crm.mapping]]
to = "/lead/first_name"
from = "name"
transform = ["first_name"]

[[targets.crm.mapping]]
to = "/lead/source"
from = "$source"

[[targets.crm.mapping]]
to = "/lead/origin"
constant = "Leadline"
"#
        )
    })
    .await;
    let good = json!({"id": "m-1", "name": "Ada Lovelace", "email": "  Ada@Example.COM ", "phone": "0151 1234 5678"});
    assert_eq!(app.post_plain(&good).await, 202);
    assert_eq!(app.post_plain(&json!({"id": "m-2", "name": "No Mail"})).await, 202);
    let h = app.wait_settled(Duration::from_secs(10)).await;
    let record = app.crm.lead_for("plain:m-1").expect("delivered");
    assert_eq!(
        record,
        json!({"email": "ada@example.com", "phone": "+4915112345678", "first_name": "Ada", "source": "plain",
               "origin": "Leadline"})
    );
    assert_eq!(h.overall.dead_open, 1);
    assert_eq!(app.crm.records_for("plain:m-2"), 0);
    let store = &app.server.app.store;
    let dead =
        store.deliveries().await.unwrap().into_iter().find(|d| d.state.as_str() == "dead").expect("a dead letter");
    let attempts = store.all_attempts().await.unwrap().iter().filter(|a| a.delivery_id == dead.id).count();
    let reason = dead.dead_reason.unwrap_or_default();
    assert_eq!(dead.dead_class.as_deref(), Some("permanent_data"));
    assert_eq!(dead.dead_field.as_deref(), Some("/lead/email"));
    assert!(reason.contains("missing") && reason.contains("email"), "{reason}");
    assert_eq!(attempts, 1, "the failure is recorded as an attempt without an HTTP status");
    app.server.shutdown().await.unwrap();
}

/// A 429 with an HTTP-date `Retry-After` holds the whole target: after the first answer, no request reaches the
/// CRM before that date — from any lead — and nothing is lost or counted as an attempt.
#[tokio::test]
async fn a_retry_after_date_holds_every_lead_of_the_target_until_that_date() {
    let app = spawn_with(|crm| idempotent_crm(crm).replace("concurrency = 8", "concurrency = 1")).await;
    let until = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    app.crm.set_behaviour(Behaviour { limited_until: Some(until), ..Default::default() });
    for i in 0..30 {
        assert_eq!(app.post_plain(&json!({"id": format!("ra-{i}")})).await, StatusCode::ACCEPTED);
    }
    app.wait_settled(Duration::from_secs(15)).await;
    let stats = app.crm.stats();
    assert_eq!(stats.requests_inside_retry_after, 0, "{stats:?}");
    assert_eq!(stats.rate_limited, 1, "one request found the limit; every other lead waited: {stats:?}");
    assert_eq!(app.crm.distinct_leads(), 30);
    assert_eq!(stats.duplicated_external_ids, 0);
    let counted: i64 =
        app.server.app.store.deliveries().await.unwrap().iter().filter(|d| d.target == "crm").map(|d| d.attempts).sum();
    assert_eq!(counted, 30, "the rate-limited answer used no attempt");
    app.server.shutdown().await.unwrap();
}

/// Every `Retry-After` holds the whole target — on a 503 in seconds, on a 429 as an HTTP date. Eight leads are in
/// flight when the CRM starts refusing (the target is resumed with a backlog): no request arrives inside a wait the
/// CRM announced except those already on the wire when it answered, after each wait one request goes alone and the
/// rest follow only after its answer, and every lead is delivered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_retry_after_holds_the_target_and_one_request_goes_first_after_it() {
    let app = spawn().await;
    let refusals: [(&str, NewRefusal); 2] = [
        ("503, Retry-After: 1 for 2.5 s", || Refusal::seconds(503, 1, Duration::from_millis(2_500))),
        ("429, Retry-After: <HTTP date> 1.5 s ahead", || {
            Refusal::until_date(429, chrono::Utc::now() + chrono::Duration::milliseconds(1_500))
        }),
    ];
    for (round, (what, refusal)) in refusals.into_iter().enumerate() {
        leadline::api::set_target_paused(&app.server.app, "crm", true, "test").await.unwrap();
        for i in 0..60 {
            assert_eq!(app.post_plain(&json!({"id": format!("wait-{round}-{i}")})).await, StatusCode::ACCEPTED);
        }
        // Every answer takes 20 ms: the eight requests of the first round are all in flight when the first refusal
        // comes back.
        app.crm.set_behaviour(Behaviour { refusal: Some(refusal()), latency_ms: 20, ..Default::default() });
        leadline::api::set_target_paused(&app.server.app, "crm", false, "test").await.unwrap();
        let h = app.wait_settled(Duration::from_secs(30)).await;
        assert_eq!(h.overall.dead_open, 0, "{what}: {h:?}");
        let honoured = app.crm.waits().verdict().unwrap_or_else(|fault| panic!("{what}: {fault}"));
        eprintln!("generic http target, {what}: {honoured}");
    }
    let honoured = app.crm.waits().verdict().unwrap();
    assert!(honoured.inside.waits >= 2 && honoured.reopenings >= 2, "both refusals announced waits: {honoured:?}");
    let stats = app.crm.stats();
    assert_eq!((stats.records, app.crm.distinct_leads(), stats.duplicated_external_ids), (120, 120, 0), "{stats:?}");
    app.server.shutdown().await.unwrap();
}

/// A declared rate paces every concurrent request of a target: a token-bucket CRM that allows 40 requests a
/// second (burst 5) answers (almost) no request with 429, and nothing is lost. The declared rate keeps a quarter
/// of headroom, as the configuration guide advises: requests paced exactly at the limit arrive bunched on a busy
/// machine (the scheduler, not the pacer, decides when each leaves), and a bucket of five has no room for that.
#[tokio::test]
async fn a_declared_rate_paces_concurrent_requests_below_the_crms_limit() {
    let app =
        spawn_with(|crm| idempotent_crm(crm).replace("concurrency = 8", "concurrency = 8\nrate = \"30/s\"")).await;
    // The CRM gives no rate-limit headers to learn from: only the declared rate keeps requests under its limit.
    app.crm.set_behaviour(Behaviour { token_bucket: Some((40.0, 5.0)), bare_429: true, ..Default::default() });
    for i in 0..80 {
        assert_eq!(app.post_plain(&json!({"id": format!("pace-{i}")})).await, StatusCode::ACCEPTED);
    }
    app.wait_settled(Duration::from_secs(20)).await;
    let stats = app.crm.stats();
    assert_eq!(app.crm.distinct_leads(), 80);
    // Without pacing, eight requests at once into a bucket of five would draw dozens of 429s; paced, only timing
    // jitter on a loaded machine can cause one now and then.
    assert!(stats.rate_limited * 20 < stats.requests, "{stats:?}");
    app.server.shutdown().await.unwrap();
}

/// The search before a create is classified like any other answer: a 429 on it is a rate limit (no attempt
/// used, the whole target held until its date), a 401 a refused credential (the target held, the lead waiting,
/// one alert), never a transient failure retried for hours.
#[tokio::test]
async fn answers_to_the_search_of_search_then_create_are_classified_like_writes() {
    let app = spawn_with(|crm| search_then_create(crm, "timeout_ms = 1000\nconcurrency = 1")).await;
    let until = chrono::Utc::now() + chrono::Duration::milliseconds(1200);
    app.crm.set_behaviour(Behaviour { limited_until: Some(until), ..Default::default() });
    for i in 0..10 {
        assert_eq!(app.post_plain(&json!({"id": format!("sr-{i}")})).await, StatusCode::ACCEPTED);
    }
    app.wait_settled(Duration::from_secs(15)).await;
    let stats = app.crm.stats();
    assert_eq!(stats.requests_inside_retry_after, 0, "{stats:?}");
    assert_eq!(stats.rate_limited, 1, "{stats:?}");
    assert_eq!(app.crm.distinct_leads(), 10);
    assert_eq!(stats.duplicated_external_ids, 0);
    let store = &app.server.app.store;
    let counted: i64 = store.deliveries().await.unwrap().iter().map(|d| d.attempts).sum();
    let limited =
        store.all_attempts().await.unwrap().iter().filter(|a| a.class.as_deref() == Some("rate_limited")).count();
    assert_eq!((counted, limited), (10, 1), "the rate-limited search used no attempt");

    // The search is refused (401): the credential is refused — the target is held, the lead waits, one alert;
    // nothing is created and nothing is dead-lettered.
    app.crm.set_behaviour(Behaviour { fail_with: Some(401), ..Default::default() });
    let mut events = app.server.app.worker.as_ref().unwrap().events.subscribe();
    assert_eq!(app.post_plain(&json!({"id": "sr-refused"})).await, StatusCode::ACCEPTED);
    let refused = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(WorkerEvent::CredentialRefused { reason, .. }) = events.recv().await {
                return reason;
            }
        }
    })
    .await
    .unwrap();
    assert!(refused.contains("could not check whether the CRM already has the lead"), "{refused}");
    let h = app.health().await.overall;
    assert_eq!((h.dead_open, h.pending + h.running), (0, 1), "{h:?}");
    assert_eq!(app.crm.records_for("plain:sr-refused"), 0);
    wait_for("one credentials alert", Duration::from_secs(5), || async {
        leadline::api::alerts(&app.server.app)
            .await
            .unwrap()
            .iter()
            .filter(|a| a.kind.as_str() == "credentials")
            .count()
            == 1
    })
    .await;
    app.server.shutdown().await.unwrap();
}

/// A 409 from the CRM ("already there", or the same key still being processed) is settled by a look-up at once:
/// the lead is delivered with the record the CRM holds, not retried for hours, and never created twice.
#[tokio::test]
async fn a_409_is_resolved_by_looking_the_lead_up() {
    let app = spawn_with(|crm| {
        idempotent_crm(crm)
            .replace("timeout_ms = 500", "timeout_ms = 200")
            .replace("base_ms = 20, cap_ms = 200", "base_ms = 1, cap_ms = 5")
    })
    .await;
    // The create is written, then answered after 1.5 s: the retry with the same key meets "still being processed".
    app.crm.set_behaviour(Behaviour { hang_after_write_ratio: 1.0, hang_ms: 1500, ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "c409"})).await, StatusCode::ACCEPTED);
    app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(app.crm.records_for("plain:c409"), 1);
    let delivered =
        app.server.app.store.deliveries().await.unwrap().into_iter().find(|d| d.state.as_str() == "delivered");
    let result = delivered.and_then(|d| d.result).expect("a delivered step with its result");
    assert!(result.contains("409") && result.contains("crm-1"), "{result}");
    app.server.shutdown().await.unwrap();
}

/// `leadline reload` (SIGHUP to the server named by the pid file beside its database) makes a running
/// `leadline serve` read its secrets file again: leads held by a refused token go on, without a restart.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadline_reload_makes_a_running_server_read_its_secrets_again() {
    use std::process::{Command, Stdio};
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    crm.set_behaviour(Behaviour { require_bearer: Some("renewed-token".into()), ..Default::default() });
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets.env");
    std::fs::write(&secrets, "TEST_CRM_TOKEN=expired-token\nTEST_WEBFORM_SECRET=x\nTEST_META_SECRET=x\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let target = idempotent_crm(crm_addr).replace("cooldown_ms = 300", "cooldown_ms = 60000")
        + "auth = { bearer_env = \"TEST_CRM_TOKEN\" }\n";
    let text = "secrets_file = \"secrets.env\"\n".to_string()
        + &config_text(crm_addr, &dir.path().join("leadline.db"), &target)
            .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""));
    let config = dir.path().join("leadline.toml");
    std::fs::write(&config, text).unwrap();
    let leadline = |args: &[&str]| {
        let mut c = Command::new(leadline_bin());
        c.args(args).arg("--config").arg(&config).env("RUST_LOG", "warn").env("TEST_META_VERIFY", "v");
        c.env("TEST_GRAPH_TOKEN", "g");
        c
    };
    let mut child = leadline(&["serve"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    wait_for("the server", Duration::from_secs(20), || async {
        http.post(format!("{base}/ingest/plain")).json(&json!({"id": "R-0"})).send().await.is_ok()
    })
    .await;
    for i in 1..5 {
        let r = http.post(format!("{base}/ingest/plain")).json(&json!({"id": format!("R-{i}")})).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::ACCEPTED);
    }
    // The token is refused: the leads wait (held for a minute, far beyond this test). The server is another
    // process: its refused attempt, seen at the CRM, says the worker has tried.
    wait_for("an attempt refused", Duration::from_secs(10), || async { crm.stats().requests >= 1 }).await;
    assert_eq!(crm.distinct_leads(), 0);

    std::fs::write(&secrets, "TEST_CRM_TOKEN=renewed-token\nTEST_WEBFORM_SECRET=x\nTEST_META_SECRET=x\n").unwrap();
    let out = leadline(&["reload"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("read its secrets again"));
    wait_for("the waiting leads delivered", Duration::from_secs(15), || async { crm.distinct_leads() == 5 }).await;
    assert_eq!(crm.stats().duplicated_external_ids, 0);

    // SIGTERM: a clean stop removes the pid file, and `reload` then says nothing is running.
    // SAFETY: kill(2) on the child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    let out = leadline(&["reload"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no running `leadline serve` found"), "{out:?}");
}

/// The oldest waiting lead's age counts from when Leadline received it: neither retries nor a replay make it
/// young again (a lead parked for a while and replayed into a failing CRM is old, not seconds old).
#[tokio::test]
async fn the_oldest_waiting_age_counts_from_reception_through_retries_and_replays() {
    let clock = leadline::api::Clock::manual(chrono::Utc::now());
    let app = spawn_on(clock.clone()).await;
    let a = &app.server.app;
    app.crm.set_behaviour(Behaviour { fail_with: Some(403), ..Default::default() });
    let posted = clock.now();
    assert_eq!(app.post_plain(&json!({"id": "OLD-1"})).await, StatusCode::ACCEPTED);
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open, 1);
    // It stays parked for ten minutes.
    clock.advance(chrono::Duration::minutes(10));

    // The CRM now fails transiently: the replayed lead keeps retrying.
    app.crm.set_behaviour(Behaviour { fail_with: Some(500), ..Default::default() });
    let selection = leadline::replay::ReplaySelection { ids: None, filter: Some(DeadLetterFilter::default()) };
    let yes = std::sync::Arc::new(leadline::api::ScriptedConfirm::always(true));
    leadline::api::replay_confirmed(a, &selection, "retry it", &Default::default(), "test", yes).await.unwrap();
    // Each look moves time on by a second, so the retries (due a fraction of a second later) come.
    wait_for("the replayed lead to be retried", Duration::from_secs(10), || async {
        clock.advance(chrono::Duration::seconds(1));
        a.store.all_attempts().await.unwrap().len() >= 3
    })
    .await;
    let h = app.health().await.overall;
    let age = h.oldest_pending_age_seconds.expect("the lead waits");
    let since_post = (clock.now() - posted).num_milliseconds() as f64 / 1000.0;
    assert!(age >= 600.0 && age <= since_post, "age {age} s, posted {since_post} s ago");
    app.server.shutdown().await.unwrap();
}

/// The first dead letter of a new cause reaches a person at once (one alert per cause and target, announced
/// once); more leads with the same cause add to it, a different cause is a second alert, and the alerts
/// resolve by themselves once no such dead letter is open.
#[tokio::test]
async fn the_first_dead_letter_of_a_new_cause_alerts_once() {
    let app = spawn().await;
    let a = &app.server.app;
    let new_cause = || async {
        leadline::api::alerts(a)
            .await
            .unwrap()
            .into_iter()
            .filter(|al| al.kind.as_str() == "new_cause")
            .collect::<Vec<_>>()
    };
    app.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });
    for i in 0..3 {
        let lead = json!({"id": format!("NC-{i}"), "phone": format!("0151 555 {i:04}")});
        assert_eq!(app.post_plain(&lead).await, StatusCode::ACCEPTED);
    }
    app.wait_settled(Duration::from_secs(10)).await;
    wait_for("one new-cause alert, announced once", Duration::from_secs(10), || async {
        let alerts = new_cause().await;
        alerts.len() == 1 && alerts[0].occurrences == 3 && alerts[0].notifications == 1
    })
    .await;
    let first = &new_cause().await[0];
    assert!(first.title.contains("crm") && first.title.contains("bad lead data"), "{}", first.title);
    assert!(!first.detail.contains("0151"), "the alert names the cause, not the lead's data: {}", first.detail);

    // Another cause: a second alert.
    app.crm.set_behaviour(Behaviour { fail_with: Some(400), ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "NC-other"})).await, StatusCode::ACCEPTED);
    app.wait_settled(Duration::from_secs(10)).await;
    wait_for("a second new-cause alert", Duration::from_secs(10), || async { new_cause().await.len() == 2 }).await;

    // A person discards them all: the alerts resolve by themselves.
    let request = leadline::api::ResolveRequest {
        selection: leadline::replay::ReplaySelection { ids: None, filter: Some(DeadLetterFilter::default()) },
        resolution: "discarded".parse().unwrap(),
        note: "test leads".into(),
        expected: None,
    };
    assert_eq!(leadline::api::resolve_dead_letters(a, &request, "test").await.unwrap(), 4);
    wait_for("the new-cause alerts to resolve", Duration::from_secs(15), || async {
        new_cause().await.iter().all(|al| al.state.as_str() == "resolved")
    })
    .await;
    app.server.shutdown().await.unwrap();
}
