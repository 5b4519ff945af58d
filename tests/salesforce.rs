//! The Salesforce connector against a mock org: leads upserted by external id, each exactly once, through an
//! expiring session (one refresh), a revoked refresh token (held, one alert, delivered after renewal), records
//! that need a person to merge them, a used-up API limit (held without using attempts) and an org near its limit
//! (requests spaced).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{alerts_of, lead, one_alert_resolved, wait_for, TestApp};
use leadline::api;
use leadline::delivery::worker::{HoldReason, TargetRuntime};
use leadline::demo::mock_salesforce::{self as mock, MockSalesforce, SalesforceBehaviour};
use leadline::demo::waits::Refusal;
use leadline::targets::salesforce::{Pacing, SalesforceTarget};
use leadline::targets::Connector;

/// `crm` is the Salesforce org: the `plain` source's leads go there. `name` → LastName/FirstName (not required:
/// a lead without it reaches Salesforce, which refuses it), `email` → Email.
fn salesforce_target(sf: SocketAddr) -> String {
    format!(
        r#"
[targets.crm]
kind = "salesforce"
url = "http://{sf}"
external_id_field = "Leadline_Id__c"
client_id_env = "TEST_SF_CLIENT_ID"
client_secret_env = "TEST_SF_CLIENT_SECRET"
refresh_token_env = "TEST_SF_REFRESH_TOKEN"
timeout_ms = 1000
concurrency = 8
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
mapping = [
    {{ to = "LastName", from = "name", transform = ["last_name"] }},
    {{ to = "FirstName", from = "name", transform = ["first_name"] }},
    {{ to = "Email", from = "email" }},
    {{ to = "Company", constant = "Unknown" }},
    {{ to = "LeadSource", from = "$source" }},
]
"#
    )
}

async fn spawn() -> (TestApp, MockSalesforce) {
    let (sf, sf_addr) = MockSalesforce::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let app = common::spawn_changed(&salesforce_target(sf_addr), |config| {
        config.inline_secrets.insert("TEST_SF_CLIENT_ID".into(), mock::CLIENT_ID.into());
        config.inline_secrets.insert("TEST_SF_CLIENT_SECRET".into(), mock::CLIENT_SECRET.into());
        config.inline_secrets.insert("TEST_SF_REFRESH_TOKEN".into(), mock::REFRESH_TOKEN.into());
    })
    .await;
    (app, sf)
}

fn runtime(app: &TestApp) -> Arc<TargetRuntime> {
    app.server.app.worker.as_ref().expect("worker").targets.get("crm").unwrap()
}

fn connector(app: &TestApp) -> Arc<dyn Connector> {
    runtime(app).connector()
}

fn as_sf(connector: &Arc<dyn Connector>) -> &SalesforceTarget {
    connector.as_any().downcast_ref().expect("crm is a Salesforce target")
}

/// The org's API usage as the target's pacer last read it (`Sforce-Limit-Info`).
fn api_usage(app: &TestApp) -> Option<(u64, u64)> {
    runtime(app).daily_usage()
}

/// Whether the target is paced (near the org's limit: one request per interval).
fn is_paced(app: &TestApp) -> bool {
    runtime(app).pace().1.is_some()
}

async fn post(app: &TestApp, ids: impl IntoIterator<Item = String>) {
    for id in ids {
        assert_eq!(app.post_plain(&lead(&id)).await, 202);
    }
}

async fn attempts_counted(app: &TestApp) -> i64 {
    let steps = app.server.app.store.deliveries().await.unwrap();
    steps.iter().filter(|d| d.target == "crm").map(|d| d.attempts).sum()
}

/// Every id in `ids` is one record in the org, written once.
fn each_once(sf: &MockSalesforce, ids: &[String]) {
    for id in ids {
        let r = sf.record(&format!("plain:{id}")).unwrap_or_else(|| panic!("{id} was not delivered"));
        assert_eq!(r.writes, 1, "{id} written {} times", r.writes);
    }
    assert_eq!(sf.records(), ids.len());
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:03}")).collect()
}

#[tokio::test]
async fn a_hundred_leads_become_a_hundred_records_each_once() {
    let (app, sf) = spawn().await;
    let ids = ids("a", 100);
    post(&app, ids.clone()).await;
    let h = app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(h.overall.dead_open, 0);
    each_once(&sf, &ids);
    let r = sf.record("plain:a-000").unwrap();
    assert_eq!(r.fields["LastName"], "Lovelace");
    assert_eq!(r.fields["FirstName"], "Ada");
    assert_eq!(r.fields["Email"], "a-000@example.com");
    assert_eq!(r.fields["Company"], "Unknown");
    assert_eq!(r.fields["LeadSource"], "plain");
    assert!(!r.fields.contains_key("Leadline_Id__c"), "the external id is in the URL, not the body");
    assert_eq!(sf.token_requests(), 1, "one session for all of them");
    // The CRM id is the step's result.
    let steps = app.server.app.store.deliveries().await.unwrap();
    let result = steps.into_iter().find(|d| d.target == "crm").and_then(|d| d.result).unwrap_or_default();
    assert!(result.contains("00QMOCK"), "{result}");
    assert_eq!(api_usage(&app), Some(sf.api_usage()));
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_expired_session_is_refreshed_once_and_nothing_is_lost_or_doubled() {
    let (app, sf) = spawn().await;
    sf.set_behaviour(SalesforceBehaviour { rotate_refresh_tokens: true, ..Default::default() });
    let first = ids("b", 50);
    post(&app, first.clone()).await;
    // The session ends while leads are in flight.
    wait_for("the first records", Duration::from_secs(10), async || sf.records() >= 10).await;
    sf.expire_access_token();
    let at_expiry = sf.records();
    app.wait_settled(Duration::from_secs(20)).await;
    assert!(at_expiry < first.len(), "the session expired mid-run ({at_expiry} delivered before)");
    assert_eq!(sf.token_requests(), 2, "one refresh for all the requests that saw the session expire");

    // Again, idle: the next refresh must use the refresh token the rotation gave.
    sf.expire_access_token();
    let second = ids("c", 50);
    post(&app, second.clone()).await;
    let h = app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(sf.token_requests(), 3);
    assert_ne!(sf.current_refresh_token(), mock::REFRESH_TOKEN, "rotated twice, each new token used");

    assert_eq!(h.overall.dead_open, 0);
    each_once(&sf, &[first, second].concat());
    assert!(alerts_of(&app, "credentials").await.is_empty(), "a refreshed session is no incident");
    assert_eq!(attempts_counted(&app).await, 100, "the refused requests used no attempt");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_revoked_refresh_token_holds_the_leads_with_one_alert_until_it_works_again() {
    let (app, sf) = spawn().await;
    post(&app, ["warm".to_string()]).await;
    app.wait_settled(Duration::from_secs(10)).await;

    sf.set_behaviour(SalesforceBehaviour { revoked: true, ..Default::default() });
    let waiting = ids("d", 20);
    post(&app, waiting.clone()).await;
    wait_for("the credentials alert", Duration::from_secs(10), async || {
        !alerts_of(&app, "credentials").await.is_empty()
    })
    .await;
    app.worker_passes(10).await;
    let h = app.health().await;
    assert_eq!(h.overall.dead_open, 0);
    assert_eq!(h.overall.pending + h.overall.running, 20, "every lead waits");
    assert_eq!(sf.records(), 1);
    let target = app.server.app.worker.as_ref().unwrap().targets.get("crm").unwrap();
    assert_eq!(target.refused_credential().as_deref(), Some("TEST_SF_REFRESH_TOKEN"));
    assert!(matches!(
        target.hold(chrono::Utc::now() - chrono::Duration::milliseconds(300)).map(|h| h.reason),
        Some(HoldReason::Credentials { .. })
    ));
    let alerts = alerts_of(&app, "credentials").await;
    assert_eq!(alerts.len(), 1, "one alert for the incident: {alerts:?}");
    assert_eq!(alerts[0].key, "TEST_SF_REFRESH_TOKEN");
    assert!(alerts[0].detail.contains("Reconnect Salesforce"), "{}", alerts[0].detail);
    // Held: one probe per cooldown asks for a session, not one request per lead.
    assert!(sf.token_requests() < 12, "{} token requests while refused", sf.token_requests());
    assert_eq!(attempts_counted(&app).await, 1, "a refused credential uses no attempts (1: the warm-up)");

    // The admin restores access: at the next probe the leads go on by themselves, each once.
    sf.set_behaviour(SalesforceBehaviour::default());
    let h = app.wait_settled(Duration::from_secs(15)).await;
    assert_eq!(h.overall.dead_open, 0);
    each_once(&sf, &[vec!["warm".to_string()], waiting].concat());
    one_alert_resolved(&app, "credentials").await;
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn several_matching_records_and_a_missing_required_field_are_data_dead_letters() {
    let (app, sf) = spawn().await;
    sf.set_behaviour(SalesforceBehaviour { duplicates: true, ..Default::default() });
    post(&app, ["dup".to_string()]).await;
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open, 1);
    let dead =
        app.server.app.store.deliveries().await.unwrap().into_iter().find(|d| d.state.as_str() == "dead").unwrap();
    let reason = dead.dead_reason.unwrap_or_default();
    assert_eq!(dead.dead_class.as_deref(), Some("permanent_data"));
    assert!(reason.contains("a person must merge them"), "{reason}");
    assert_eq!(sf.records(), 0, "nothing written");

    // Salesforce refuses a lead without a last name, naming the field.
    sf.set_behaviour(SalesforceBehaviour::default());
    assert_eq!(app.post_plain(&serde_json::json!({"id": "nameless", "email": "x@example.com"})).await, 202);
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open, 2);
    let steps = app.server.app.store.deliveries().await.unwrap();
    let nameless = steps.into_iter().find(|d| d.source_ref == "nameless").expect("the nameless lead's step");
    let (reason, field) = (nameless.dead_reason.unwrap_or_default(), nameless.dead_field);
    assert_eq!(nameless.dead_class.as_deref(), Some("permanent_data"));
    assert!(reason.contains("REQUIRED_FIELD_MISSING"), "{reason}");
    assert_eq!(field.as_deref(), Some("LastName"));
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_used_up_api_limit_holds_the_target_without_using_attempts() {
    let (app, sf) = spawn().await;
    let pacing = Pacing { limit_hold: chrono::Duration::seconds(2), ..Pacing::default() };
    as_sf(&connector(&app)).set_pacing(pacing);
    sf.set_behaviour(SalesforceBehaviour { limit_exceeded: true, ..Default::default() });
    let ids = ids("e", 10);
    post(&app, ids.clone()).await;
    wait_for("the limit to be hit", Duration::from_secs(10), async || !sf.patch_times().is_empty()).await;
    wait_for("the requests in flight answered", Duration::from_secs(10), async || {
        app.health().await.overall.running == 0
    })
    .await;
    let target = app.server.app.worker.as_ref().unwrap().targets.get("crm").unwrap();
    let hold = target.hold(chrono::Utc::now()).expect("held");
    assert_eq!(hold.reason, HoldReason::RateLimited);
    let sent = sf.patch_times().len();
    assert!(sent <= 8, "only the first claimed leads were sent before the hold ({sent})");
    assert_eq!(sf.records(), 0);
    assert_eq!(attempts_counted(&app).await, 0, "a rate limit uses no attempts");
    let h = app.health().await;
    assert_eq!((h.overall.dead_open, h.overall.pending + h.overall.running), (0, 10), "every lead waits");
    app.worker_passes(10).await;
    assert_eq!(sf.patch_times().len(), sent, "nothing is sent while held");

    // The allowance rolls off: after the hold the leads go, each once.
    sf.set_behaviour(SalesforceBehaviour::default());
    sf.set_api_usage(5_000, 100_000);
    let h = app.wait_settled(Duration::from_secs(15)).await;
    assert_eq!(h.overall.dead_open, 0);
    each_once(&sf, &ids);
    assert_eq!(attempts_counted(&app).await, 10, "only the deliveries counted");
    let attempts = app.server.app.store.all_attempts().await.unwrap();
    let limited = attempts.iter().filter(|a| a.class.as_deref() == Some("rate_limited")).count();
    assert_eq!(limited, sent);
    app.server.shutdown().await.unwrap();
}

/// A 503 with `Retry-After` as an HTTP date (an org down for maintenance until a given second) holds the whole
/// target. Eight upserts are in flight when it begins: no request reaches the org inside the wait it announced
/// except those already on the wire, after the wait one request goes alone, and every lead is one record written
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_date_on_a_503_holds_every_request_until_then() {
    let (app, sf) = spawn().await;
    api::set_target_paused(&app.server.app, "crm", true, "test").await.unwrap();
    let ids = ids("m", 60);
    post(&app, ids.clone()).await;
    let until = chrono::Utc::now() + chrono::Duration::milliseconds(1_500);
    sf.set_behaviour(SalesforceBehaviour { refusal: Some(Refusal::until_date(503, until)), ..Default::default() });
    api::set_target_paused(&app.server.app, "crm", false, "test").await.unwrap();
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.dead_open, 0);
    let honoured = sf.waits().verdict().unwrap_or_else(|fault| panic!("{fault}"));
    eprintln!("salesforce, 503 with Retry-After: <HTTP date> 1.5 s ahead: {honoured}");
    assert!(honoured.inside.waits >= 1 && honoured.reopenings >= 1, "{honoured:?}");
    each_once(&sf, &ids);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn above_ninety_percent_of_the_limit_requests_are_spaced() {
    let (app, sf) = spawn().await;
    let interval = Duration::from_millis(250);
    as_sf(&connector(&app)).set_pacing(Pacing { interval, ..Pacing::default() });
    // Below the threshold nothing is slowed down.
    sf.set_api_usage(80_000, 100_000);
    let fast = ids("f", 8);
    post(&app, fast.clone()).await;
    app.wait_settled(Duration::from_secs(10)).await;
    let times = sf.patch_times();
    let span = *times.last().unwrap() - times[0];
    assert!(span < chrono::Duration::milliseconds(8 * 250), "not paced below 90 %: {span}");
    assert!(!is_paced(&app));

    sf.set_api_usage(95_000, 100_000);
    post(&app, ["g-warm".to_string()]).await;
    app.wait_settled(Duration::from_secs(10)).await;
    assert!(is_paced(&app));
    assert_eq!(api_usage(&app), Some((95_001, 100_000)));
    let before = sf.patch_times().len();
    let slow = ids("g", 6);
    post(&app, slow.clone()).await;
    app.wait_settled(Duration::from_secs(20)).await;
    let times = sf.patch_times()[before..].to_vec();
    assert_eq!(times.len(), 6);
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= chrono::Duration::milliseconds(230), "requests {gap} apart; the rule is one per {interval:?}");
    }
    each_once(&sf, &[fast, vec!["g-warm".to_string()], slow].concat());
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_connection_check_speaks_plainly() {
    let (app, sf) = spawn().await;
    let check = as_sf(&connector(&app)).check().await;
    assert!(check.ok, "{}", check.message);
    assert!(
        check.message.contains("Leadline_Id__c") && check.message.contains("API requests used"),
        "{}",
        check.message
    );

    let config = &app.server.app.config;
    let variant = |f: &dyn Fn(&mut leadline::config::TargetConfig)| {
        let mut tc = config.targets["crm"].clone();
        f(&mut tc);
        SalesforceTarget::new("crm", &tc, config, leadline::clock::Clock::system()).unwrap()
    };
    fn salesforce(t: &mut leadline::config::TargetConfig) -> &mut leadline::config::SalesforceSettings {
        match &mut t.settings {
            leadline::config::TargetSettings::Salesforce(s) => s,
            other => panic!("{other:?}"),
        }
    }
    let wrong_object = variant(&|t| salesforce(t).object = Some("Leed".into())).check().await;
    assert!(!wrong_object.ok && wrong_object.message.contains("no object Leed"), "{}", wrong_object.message);
    let wrong_field = variant(&|t| salesforce(t).external_id_field = Some("Email".into())).check().await;
    assert!(!wrong_field.ok && wrong_field.message.contains("not marked"), "{}", wrong_field.message);
    let unreachable = variant(&|t| t.url = "http://127.0.0.1:9".into()).check().await;
    assert!(!unreachable.ok && unreachable.message.contains("cannot reach"), "{}", unreachable.message);

    sf.set_behaviour(SalesforceBehaviour { revoked: true, ..Default::default() });
    let revoked = as_sf(&connector(&app)).check().await;
    assert!(!revoked.ok && revoked.message.contains("invalid_grant"), "{}", revoked.message);
    app.server.shutdown().await.unwrap();
}
