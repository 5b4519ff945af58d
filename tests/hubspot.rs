//! HubSpot: the real server and worker against the HubSpot mock. Leads go out in batches (one request for up to
//! 100), each lead gets its own fate from the batch answer, and HubSpot's limits and refusals hold leads without
//! losing them, dead-lettering them or writing any twice.

mod common;

use std::time::Duration;

use chrono::Utc;
use common::{alerts_of, one_alert_resolved, wait_for, TestApp};
use leadline::api;
use leadline::config::Config;
use leadline::delivery::worker::HoldReason;
use leadline::demo::mock_hubspot::{HubspotBehaviour, MockHubspot, Secondly};
use leadline::demo::waits::Refusal;
use leadline::store::{AttemptEntry, DeliveryRecord};
use serde_json::json;

const TOKEN_ENV: &str = "TEST_HUBSPOT_TOKEN";

/// A dead letter: source_ref, class, reason, field, HTTP status.
type DeadRow = (String, String, String, Option<String>, Option<i64>);

/// The `crm` target as HubSpot: upsert by the custom unique property `leadline_id` (the lead's external id).
fn hubspot_target(addr: std::net::SocketAddr) -> String {
    format!(
        r#"
[targets.crm]
kind = "hubspot"
url = "http://{addr}"
auth = {{ bearer_env = "{TOKEN_ENV}" }}
id_property = "leadline_id"
timeout_ms = 2000
concurrency = 1
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}

[[targets.crm.mapping]]
to = "email"
from = "email"
transform = ["trim", "lowercase"]
required = true

[[targets.crm.mapping]]
to = "firstname"
from = "name"
transform = ["first_name"]

[[targets.crm.mapping]]
to = "lastname"
from = "name"
transform = ["last_name"]

[[targets.crm.mapping]]
to = "phone"
from = "phone"
"#
    )
}

async fn spawn(behaviour: HubspotBehaviour) -> (TestApp, MockHubspot) {
    spawn_changed(behaviour, |_| {}).await
}

/// [`spawn`], with the configuration changed by `change` before the server starts.
async fn spawn_changed(behaviour: HubspotBehaviour, change: impl FnOnce(&mut Config)) -> (TestApp, MockHubspot) {
    let (hubspot, hubspot_addr) = MockHubspot::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    hubspot.set(behaviour);
    let app = common::spawn_changed(&hubspot_target(hubspot_addr), |config| {
        change(config);
        config.inline_secrets.insert(TOKEN_ENV.into(), leadline::demo::mock_hubspot::TOKEN.into());
    })
    .await;
    (app, hubspot)
}

/// Pauses or resumes HubSpot as a person does (through the API: on PostgreSQL the pause is the team's, kept in the
/// database, and a flag set in this process alone would be overruled by it).
async fn pause(app: &TestApp, paused: bool) {
    api::set_target_paused(&app.server.app, "crm", paused, "test").await.unwrap();
}

/// Posts leads `{prefix}-000`… to the `plain` source (routed to HubSpot alone).
async fn post_leads(app: &TestApp, prefix: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("{prefix}-{i:03}");
        assert_eq!(app.post_plain(&common::lead(&id)).await, 202);
        ids.push(id);
    }
    ids
}

/// Counted attempts of the steps to `crm` that `which` keeps.
async fn counted_attempts(app: &TestApp, which: impl Fn(&DeliveryRecord) -> bool) -> i64 {
    let steps = app.server.app.store.deliveries().await.unwrap();
    steps.iter().filter(|d| d.target == "crm" && which(d)).map(|d| d.attempts).sum()
}

/// Answers recorded as rate-limited.
async fn rate_limited_answers(app: &TestApp) -> Vec<AttemptEntry> {
    let attempts = app.server.app.store.all_attempts().await.unwrap();
    attempts.into_iter().filter(|a| a.class.as_deref() == Some("rate_limited")).collect()
}

/// Every lead is a HubSpot contact, written exactly once.
fn assert_each_once(hubspot: &MockHubspot, ids: &[String]) {
    for id in ids {
        let c = hubspot.contact("leadline_id", &format!("plain:{id}")).unwrap_or_else(|| panic!("{id} missing"));
        assert_eq!(c.writes, 1, "{id} written {} times", c.writes);
        assert_eq!(c.properties["email"], format!("{}@example.com", id.to_lowercase()));
        assert_eq!(c.properties["firstname"], "Ada");
        assert_eq!(c.properties["lastname"], "Lovelace");
    }
}

#[tokio::test]
async fn two_hundred_fifty_due_leads_go_out_in_three_requests_each_exactly_once() {
    let (app, hubspot) = spawn(HubspotBehaviour::default()).await;
    // A backlog: 250 leads due at once (as after an outage or a burst).
    pause(&app, true).await;
    let ids = post_leads(&app, "A", 250).await;
    pause(&app, false).await;
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.dead_open, 0);

    let stats = hubspot.stats();
    assert_eq!((stats.contacts, stats.creates, stats.updates), (250, 250, 0), "{stats:?}");
    assert!(stats.upsert_requests <= 10, "batching: {} requests for 250 leads", stats.upsert_requests);
    assert_eq!(stats.upsert_requests, 3, "100 + 100 + 50");
    assert_eq!(stats.largest_batch, 100);
    assert_each_once(&hubspot, &ids);
    // The step's result holds HubSpot's record id.
    let step = app.server.app.store.delivery_of("plain", "A-007", "crm").await.unwrap().expect("the step");
    let result = step.result.expect("its result");
    let result: serde_json::Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result["crm_id"], hubspot.contact("leadline_id", "plain:A-007").unwrap().id);
    assert_eq!(result["note"], "created in HubSpot");
    assert_eq!(counted_attempts(&app, |_| true).await, 250);

    // Leads that trickle in one by one go out as they come (no waiting to fill a batch).
    let before = hubspot.stats().upsert_requests;
    let more = post_leads(&app, "T", 50).await;
    app.wait_settled(Duration::from_secs(30)).await;
    assert_each_once(&hubspot, &more);
    let trickled = hubspot.stats().upsert_requests - before;
    assert!(trickled <= 50, "{trickled}");
    eprintln!(
        "figures: 250 due leads -> {} requests; 50 trickling leads -> {trickled} requests",
        stats.upsert_requests
    );
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_invalid_lead_in_a_batch_fails_alone_and_names_the_field() {
    let (app, hubspot) =
        spawn(HubspotBehaviour { reject_emails: vec!["b-bad@example.com".into()], ..Default::default() }).await;
    pause(&app, true).await;
    let good = post_leads(&app, "B", 20).await;
    assert_eq!(app.post_plain(&common::lead("B-bad")).await, 202);
    // No e-mail at all: the mapping refuses it before any request.
    assert_eq!(app.post_plain(&json!({"id": "B-none", "name": "Grace Hopper"})).await, 202);
    pause(&app, false).await;
    let h = app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(h.overall.dead_open, 2);

    let stats = hubspot.stats();
    assert_eq!(stats.upsert_requests, 1, "one batch: 20 good leads and the one HubSpot refuses");
    assert_eq!(stats.largest_batch, 21);
    assert_eq!(stats.contacts, 20);
    assert_each_once(&hubspot, &good);
    let mut dead: Vec<DeadRow> = (app.server.app.store.deliveries().await.unwrap().into_iter())
        .filter(|d| d.state == "dead")
        .map(|d| {
            let (class, reason) = (d.dead_class.unwrap_or_default(), d.dead_reason.unwrap_or_default());
            (d.source_ref, class, reason, d.dead_field, d.dead_status)
        })
        .collect();
    dead.sort();
    let (ref_, class, reason, field, status) = &dead[0];
    assert_eq!((ref_.as_str(), class.as_str(), field.as_deref()), ("B-bad", "permanent_data", Some("email")));
    assert_eq!(*status, Some(207));
    assert!(reason.contains("HubSpot rejected property email") && reason.contains("INVALID_EMAIL"), "{reason}");
    assert!(!reason.contains("b-bad@"), "the reason never quotes the lead: {reason}");
    let (ref_, class, reason, field, status) = &dead[1];
    assert_eq!((ref_.as_str(), class.as_str(), field.as_deref()), ("B-none", "permanent_data", Some("email")));
    assert_eq!(*status, None, "never sent");
    assert!(reason.starts_with("not sent"), "{reason}");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_batch_refused_whole_for_one_lead_delivers_the_others_next() {
    let (app, hubspot) = spawn(HubspotBehaviour {
        reject_emails: vec!["c-bad@example.com".into()],
        reject_whole_batch: true,
        ..Default::default()
    })
    .await;
    pause(&app, true).await;
    let good = post_leads(&app, "C", 10).await;
    assert_eq!(app.post_plain(&common::lead("C-bad")).await, 202);
    pause(&app, false).await;
    let h = app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(h.overall.dead_open, 1);
    assert_each_once(&hubspot, &good);
    // The refused batch, then the others (retried with jitter, so possibly in several requests) without it.
    let requests = hubspot.stats().upsert_requests;
    assert!((2..=11).contains(&requests), "{requests}");
    let dead = app.server.app.store.deliveries().await.unwrap().into_iter().find(|d| d.state == "dead");
    let (field, status) = dead.map(|d| (d.dead_field, d.dead_status)).expect("a dead letter");
    assert_eq!((field.as_deref(), status), (Some("email"), Some(400)));
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_expired_token_holds_the_leads_with_one_alert_and_none_is_written_twice() {
    let (app, hubspot) = spawn(HubspotBehaviour::default()).await;
    let first = post_leads(&app, "D", 30).await;
    app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(hubspot.stats().contacts, 30);

    // The token expires mid-run.
    hubspot.set(HubspotBehaviour { token_expired: true, ..Default::default() });
    let waiting = post_leads(&app, "E", 40).await;
    wait_for("the credentials alert", Duration::from_secs(10), async || {
        !alerts_of(&app, "credentials").await.is_empty()
    })
    .await;
    let refused_at = hubspot.stats().requests;
    app.worker_passes(10).await;
    let h = app.health().await;
    assert_eq!(h.overall.dead_open, 0);
    assert_eq!(h.overall.pending + h.overall.running, 40);
    assert_eq!(hubspot.stats().contacts, 30);
    // Held: one probe per breaker cooldown (300 ms), not one request per lead.
    let probes = hubspot.stats().requests - refused_at;
    assert!(probes <= 5, "{probes} requests while the token was refused");
    assert_eq!(counted_attempts(&app, |d| d.state != "delivered").await, 0, "a refused token uses no attempts");
    let alerts = alerts_of(&app, "credentials").await;
    assert_eq!(alerts.len(), 1, "one alert for the incident: {alerts:?}");
    assert_eq!(alerts[0].key, TOKEN_ENV);
    assert!(alerts[0].resolved_at.is_none());

    // A valid token again: the waiting leads go out by themselves, each once, and the alert resolves.
    hubspot.set(HubspotBehaviour::default());
    let h = app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(h.overall.dead_open, 0);
    let stats = hubspot.stats();
    assert_eq!((stats.contacts, stats.creates, stats.updates), (70, 70, 0), "{stats:?}");
    assert_each_once(&hubspot, &first);
    assert_each_once(&hubspot, &waiting);
    one_alert_resolved(&app, "credentials").await;
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_secondly_limit_is_waited_out_and_nothing_is_lost() {
    // Answers without usage headers: Leadline cannot pace itself from them, meets the limit and waits it out.
    let (app, hubspot) = spawn(HubspotBehaviour {
        secondly: Some(Secondly { max: 1, interval_ms: 700 }),
        quiet_usage_headers: true,
        ..Default::default()
    })
    .await;
    pause(&app, true).await;
    let ids = post_leads(&app, "F", 250).await;
    pause(&app, false).await;
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.dead_open, 0);

    let stats = hubspot.stats();
    assert!(stats.rate_limited >= 1, "the limit was hit: {stats:?}");
    assert_eq!(stats.early_requests, 0, "no request inside a wait HubSpot announced: {stats:?}");
    // Double-check from the log: after every 429, nothing for the announced 700 ms.
    let log = hubspot.requests();
    for (i, (at, status)) in log.iter().enumerate() {
        if *status == 429 {
            if let Some((next, _)) = log.get(i + 1) {
                assert!(*next - *at >= chrono::Duration::milliseconds(700), "{:?} after a 429", *next - *at);
            }
        }
    }
    assert_eq!((stats.contacts, stats.updates), (250, 0));
    assert_each_once(&hubspot, &ids);
    assert_eq!(counted_attempts(&app, |_| true).await, 250, "rate-limited answers use no attempts");
    assert!(rate_limited_answers(&app).await.len() >= 100);
    app.server.shutdown().await.unwrap();
}

/// HubSpot's maintenance window (the demo's: every upsert answered 503 with `Retry-After`) and a 429 with
/// `Retry-After` hold the whole target. Four batch requests of five leads are in flight when each begins: no request
/// reaches HubSpot inside a wait it announced except those already on the wire, after each wait one request goes
/// alone, and every lead is written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_window_and_a_retry_after_hold_every_request_until_they_end() {
    let (app, hubspot) = spawn_changed(HubspotBehaviour::default(), |config| {
        config.worker.batch_size = 5;
        config.targets.get_mut("crm").expect("the crm target").concurrency = 4;
    })
    .await;
    let latency_ms = 20;

    // The maintenance window, until two of its waits have ended with a request that found it still on.
    pause(&app, true).await;
    let mut ids = post_leads(&app, "M", 60).await;
    hubspot.set(HubspotBehaviour { maintenance_retry_after: Some(1), latency_ms, ..Default::default() });
    pause(&app, false).await;
    wait_for("two waits of the maintenance window to end", Duration::from_secs(20), async || {
        hubspot.waits().reopenings().len() >= 2
    })
    .await;
    hubspot.set(HubspotBehaviour { latency_ms, ..Default::default() });
    assert_eq!(app.wait_settled(Duration::from_secs(30)).await.overall.dead_open, 0);
    let honoured = hubspot.waits().verdict().unwrap_or_else(|fault| panic!("maintenance: {fault}"));
    eprintln!("hubspot, maintenance (503, Retry-After: 1): {honoured}");

    // Too many requests: 429 with Retry-After: 1 for 1.5 s.
    pause(&app, true).await;
    ids.extend(post_leads(&app, "R", 60).await);
    let refusal = Refusal::seconds(429, 1, Duration::from_millis(1_500));
    hubspot.set(HubspotBehaviour { refusal: Some(refusal), latency_ms, ..Default::default() });
    pause(&app, false).await;
    assert_eq!(app.wait_settled(Duration::from_secs(30)).await.overall.dead_open, 0);
    let honoured = hubspot.waits().verdict().unwrap_or_else(|fault| panic!("429: {fault}"));
    eprintln!("hubspot, both (the second: 429, Retry-After: 1 for 1.5 s): {honoured}");
    assert!(honoured.inside.waits >= 8 && honoured.reopenings >= 3, "{honoured:?}");

    let stats = hubspot.stats();
    assert_eq!((stats.contacts, stats.creates, stats.updates), (120, 120, 0), "{stats:?}");
    assert_each_once(&hubspot, &ids);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn usage_headers_pace_the_target_below_the_secondly_limit() {
    // HubSpot's answers say the limit (X-HubSpot-RateLimit-Max per -Interval-Milliseconds) and what is left: the
    // pacer keeps under it from the first answer on, so the limit is never hit.
    let (app, hubspot) =
        spawn(HubspotBehaviour { secondly: Some(Secondly { max: 1, interval_ms: 300 }), ..Default::default() }).await;
    pause(&app, true).await;
    let ids = post_leads(&app, "P", 800).await;
    pause(&app, false).await;
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.dead_open, 0);
    assert_each_once(&hubspot, &ids);
    // The first requests go before any answer has told the limit; from the first answer on, none is refused and
    // they are spaced by the interval.
    let log = hubspot.requests();
    let first_ok = log.iter().position(|(_, status)| *status == 200).expect("an upsert went through");
    let told = &log[first_ok..];
    assert!(told.len() >= 8, "{told:?}");
    assert!(told.iter().all(|(_, status)| *status == 200), "refused after the headers told the limit: {told:?}");
    for pair in told.windows(2) {
        assert!(pair[1].0 - pair[0].0 >= chrono::Duration::milliseconds(290), "{:?} apart", pair[1].0 - pair[0].0);
    }
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_daily_limit_holds_the_target_until_the_reset_without_using_attempts() {
    let (app, hubspot) = spawn(HubspotBehaviour { daily_limit_reached: true, ..Default::default() }).await;
    post_leads(&app, "G", 20).await;
    wait_for("the daily limit answer", Duration::from_secs(10), async || hubspot.stats().rate_limited >= 1).await;
    app.worker_passes(10).await;

    assert_eq!(hubspot.stats().upsert_requests, 1, "held after the first refusal: no request per lead");
    let hold =
        app.server.app.worker.as_ref().unwrap().targets.current()["crm"].hold(Utc::now()).expect("the target is held");
    assert_eq!(hold.reason, HoldReason::RateLimited);
    // Until the account's midnight (America/New_York unless configured), at most a day away.
    assert!(hold.until > Utc::now() && hold.until <= Utc::now() + chrono::Duration::hours(25), "{hold:?}");
    let h = app.health().await;
    assert_eq!(h.overall.dead_open, 0, "not dead-lettered, though the wait exceeds the 10 min time budget");
    assert_eq!(h.overall.pending + h.overall.running, 20);
    assert_eq!(counted_attempts(&app, |_| true).await, 0);
    let reason = rate_limited_answers(&app).await.first().expect("a rate-limited answer").reason.clone();
    assert!(reason.contains("daily API limit"), "{reason}");
    app.server.shutdown().await.unwrap();
}
