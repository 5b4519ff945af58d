//! The `pipedrive` target against a mock of Pipedrive's API: the real server and worker, counting the mock's
//! persons and leads. A lead becomes one person and one lead — through a crash between the two creates, a
//! timeout after the lead create, a rate limit and a revoked token on the search.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::process::Child;
use std::time::{Duration, Instant};

use common::*;
use leadline::demo::mock_crm::MockCrm;
use leadline::demo::mock_pipedrive::{Faults, MockPipedrive, FIELD_KEY, TOKEN};
use leadline::demo::waits::Refusal;

/// A refusal made when its round begins (its times count from then).
type NewRefusal = fn() -> Refusal;

const TOKEN_ENV: &str = "TEST_PIPEDRIVE_TOKEN";

/// The `crm` target as a Pipedrive connector on the mock at `pd`, mapping the test lead
/// (`{id, name, email, phone}`) onto a person and a lead.
fn pipedrive_target(pd: SocketAddr, timeout_ms: u64, concurrency: u32) -> String {
    format!(
        r#"
[targets.crm]
kind = "pipedrive"
url = "http://{pd}"
api_token_env = "{TOKEN_ENV}"
person_field_key = "{FIELD_KEY}"
timeout_ms = {timeout_ms}
concurrency = {concurrency}
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}

[[targets.crm.mapping]]
to = "/person/name"
from = "name"
required = true

[[targets.crm.mapping]]
to = "/person/email"
from = "email"

[[targets.crm.mapping]]
to = "/person/phone"
from = "phone"

[[targets.crm.mapping]]
to = "/lead/title"
constant = "Web form lead"
"#
    )
}

struct PdApp {
    app: TestApp,
    pd: MockPipedrive,
}

async fn spawn_pd(timeout_ms: u64, concurrency: u32) -> PdApp {
    let (pd, pd_addr) = MockPipedrive::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let app = spawn_changed(&pipedrive_target(pd_addr, timeout_ms, concurrency), |config| {
        config.inline_secrets.insert(TOKEN_ENV.into(), TOKEN.into());
    })
    .await;
    PdApp { app, pd }
}

fn ext(id: &str) -> String {
    format!("plain:{id}")
}

async fn post_all(app: &TestApp, ids: &[String]) {
    for id in ids {
        assert_eq!(app.post_plain(&lead(id)).await, reqwest::StatusCode::ACCEPTED);
    }
}

fn assert_each_once(pd: &MockPipedrive, ids: &[String]) {
    for id in ids {
        assert_eq!(pd.persons_for(&ext(id)), 1, "persons for {id}");
        assert_eq!(pd.leads_for(&ext(id)), 1, "leads for {id}");
    }
    assert_eq!(pd.persons().len(), ids.len());
    assert_eq!(pd.leads().len(), ids.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_leads_make_a_hundred_persons_and_leads_each_once() {
    let PdApp { app, pd } = spawn_pd(2_000, 8).await;
    let ids: Vec<String> = (0..100).map(|i| format!("P-{i}")).collect();
    post_all(&app, &ids).await;
    let h = app.wait_settled(Duration::from_secs(60)).await;
    assert_eq!(h.overall.delivered, 100);
    assert_eq!(h.overall.dead_open, 0);
    assert_each_once(&pd, &ids);
    let c = pd.counts();
    assert_eq!((c.searches, c.person_creates, c.lead_creates, c.lead_lookups), (100, 100, 100, 0), "{c:?}");

    // The person carries the lead's data and the external id; the lead its person and origin.
    let person = pd.persons().into_iter().find(|p| p.body["custom_fields"][FIELD_KEY] == ext("P-7")).unwrap();
    assert_eq!(person.body["name"], "Ada Lovelace");
    assert_eq!(person.body["emails"][0]["value"], "P-7@example.com");
    assert_eq!(person.body["phones"][0]["value"], "+4915112345678");
    let lead = pd.leads().into_iter().find(|l| l.person_id == person.id).unwrap();
    assert_eq!(lead.body["title"], "Web form lead");
    assert_eq!(lead.origin_id.as_deref(), Some(ext("P-7").as_str()));
    // The step's crm_id is the lead's id; the link table holds the person's.
    let steps = app.server.app.store.deliveries().await.unwrap();
    let result = steps.into_iter().find(|d| d.source_ref == "P-7").and_then(|d| d.result).expect("the step's result");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&result).unwrap()["crm_id"], lead.id.as_str());
    assert_eq!(
        app.server.app.store.crm_link("crm", &ext("P-7")).await.unwrap().as_deref(),
        Some(person.id.to_string().as_str())
    );
    app.server.shutdown().await.unwrap();
}

fn start_child(config: &std::path::Path) -> Child {
    serve_command(config).env(TOKEN_ENV, TOKEN).spawn().expect("start leadline")
}

/// Every `Retry-After` holds the whole target — a 503 in seconds, a 429 as an HTTP date — across Pipedrive's three
/// requests per lead. Eight leads are in flight when each refusal begins: no request reaches Pipedrive inside a
/// wait it announced except those already on the wire, after each wait one request goes alone (the rest only after
/// its answer), and every lead is one person and one lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_retry_after_holds_every_request_until_it_ends() {
    let PdApp { app, pd } = spawn_pd(2_000, 8).await;
    let refusals: [(&str, NewRefusal); 2] = [
        ("503, Retry-After: 1 for 2.5 s", || Refusal::seconds(503, 1, Duration::from_millis(2_500))),
        ("429, Retry-After: <HTTP date> 1.5 s ahead", || {
            Refusal::until_date(429, chrono::Utc::now() + chrono::Duration::milliseconds(1_500))
        }),
    ];
    let mut ids = Vec::new();
    for (round, (what, refusal)) in refusals.into_iter().enumerate() {
        leadline::api::set_target_paused(&app.server.app, "crm", true, "test").await.unwrap();
        let batch: Vec<String> = (0..30).map(|i| format!("W{round}-{i}")).collect();
        post_all(&app, &batch).await;
        ids.extend(batch);
        pd.set_faults(Faults { refusal: Some(refusal()), ..Default::default() });
        leadline::api::set_target_paused(&app.server.app, "crm", false, "test").await.unwrap();
        let h = app.wait_settled(Duration::from_secs(30)).await;
        assert_eq!(h.overall.dead_open, 0, "{what}: {h:?}");
        let honoured = pd.waits().verdict().unwrap_or_else(|fault| panic!("{what}: {fault}"));
        eprintln!("pipedrive, {what}: {honoured}");
    }
    let honoured = pd.waits().verdict().unwrap();
    assert!(honoured.inside.waits >= 2 && honoured.reopenings >= 2, "{honoured:?}");
    assert_each_once(&pd, &ids);
    app.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_person_and_the_lead_makes_no_second_person() {
    let (_crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (pd, pd_addr) = MockPipedrive::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("leadline.db");
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let concurrency = 8;
    let text = config_text(crm_addr, &db, &pipedrive_target(pd_addr, 30_000, concurrency))
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""))
        .replace("lease_seconds = 5", "lease_seconds = 3");
    let config = dir.path().join("leadline.toml");
    std::fs::write(&config, text).unwrap();
    let token = preset_token(&db).await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    // Every lead create waits: the process dies after op 1 (person created and linked), before op 2.
    pd.set_faults(Faults { hold_lead_creates: true, ..Default::default() });
    let mut child = start_child(&config);
    wait_up(&http, &base).await;
    let ids: Vec<String> = (0..30).map(|i| format!("C-{i}")).collect();
    for id in &ids {
        let r = http.post(format!("{base}/ingest/plain")).json(&lead(id)).send().await.unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    }
    wait_for("every slot to wait on a lead create", Duration::from_secs(20), async || {
        pd.counts().held == u64::from(concurrency)
    })
    .await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = pd.counts();
    assert_eq!(pd.persons().len(), concurrency as usize, "{at_kill:?}");
    assert!(pd.leads().is_empty());
    // The persons were linked durably before their leads were asked for.
    {
        let store = leadline::store::Store::open(&database_url(&db)).await.unwrap();
        let links = store.crm_links().await.unwrap().len();
        assert_eq!(links, concurrency as usize);
        store.close().await;
    }
    // The held requests are refused (nothing written) once released; the dead process never sees it.
    pd.set_faults(Faults::default());

    let mut child = start_child(&config);
    wait_up(&http, &base).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let h: serde_json::Value =
            http.get(format!("{base}/api/health")).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
        let o = &h["overall"];
        if o["pending"] == 0 && o["running"] == 0 {
            assert_eq!(o["delivered"], ids.len(), "{h}");
            assert_eq!(o["dead_open"], 0, "{h}");
            break;
        }
        assert!(Instant::now() < deadline, "did not finish after restart: {h}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();

    assert_each_once(&pd, &ids);
    let c = pd.counts();
    // The linked persons were reused without searching again; their leads were looked up before being created.
    assert_eq!(c.searches, ids.len() as u64, "{c:?}");
    assert_eq!(c.person_creates, ids.len() as u64, "{c:?}");
    assert!(c.lead_lookups >= u64::from(concurrency), "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_after_the_lead_was_written_is_looked_up_not_created_twice() {
    let PdApp { app, pd } = spawn_pd(400, 4).await;
    pd.set_faults(Faults { hang_after_lead_create: Some(Duration::from_millis(1_500)), ..Default::default() });
    let ids: Vec<String> = (0..6).map(|i| format!("T-{i}")).collect();
    post_all(&app, &ids).await;
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.delivered, 6);
    assert_each_once(&pd, &ids);
    let c = pd.counts();
    assert_eq!(c.lead_creates, 6, "never created again: {c:?}");
    assert_eq!(c.lead_lookups, 6, "each timeout was resolved by a look-up: {c:?}");
    let attempts = app.server.app.store.all_attempts().await.unwrap();
    let notes = attempts.iter().filter(|a| a.reason.to_lowercase().contains("look-up found it")).count();
    assert_eq!(notes, 6);
    app.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_search_holds_the_target_until_the_reset_and_uses_no_attempt() {
    let PdApp { app, pd } = spawn_pd(2_000, 4).await;
    pd.set_faults(Faults { search_limited_until: Some(Instant::now() + Duration::from_secs(1)), ..Default::default() });
    let ids: Vec<String> = (0..6).map(|i| format!("R-{i}")).collect();
    post_all(&app, &ids).await;
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.delivered, 6);
    assert_each_once(&pd, &ids);

    let log = pd.log();
    let (first_429, _, _) = log.iter().find(|(_, _, s)| *s == 429).expect("a 429 was answered").clone();
    // x-ratelimit-reset said 1 s: no request in that second, apart from ones already on their way (same burst).
    let early: Vec<_> = log
        .iter()
        .filter(|(t, _, _)| {
            *t > first_429 + Duration::from_millis(100) && *t < first_429 + Duration::from_millis(1_000)
        })
        .collect();
    assert!(early.is_empty(), "requests inside the announced reset: {early:?}");
    let steps = app.server.app.store.deliveries().await.unwrap();
    let max_attempts = steps.iter().filter(|d| d.target == "crm").map(|d| d.attempts).max().expect("steps to crm");
    assert_eq!(max_attempts, 1, "a rate-limited answer uses no attempt");
    let attempts = app.server.app.store.all_attempts().await.unwrap();
    let limited = attempts.iter().filter(|a| a.class.as_deref() == Some("rate_limited")).count();
    assert!(limited >= 1);
    app.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_on_the_search_holds_the_target_with_one_alert_and_loses_nothing() {
    let PdApp { app, pd } = spawn_pd(2_000, 4).await;
    pd.set_faults(Faults { token_revoked: true, ..Default::default() });
    let ids: Vec<String> = (0..5).map(|i| format!("U-{i}")).collect();
    post_all(&app, &ids).await;
    let alerts = async || alerts_of(&app, "credentials").await;
    wait_for("the credentials alert", Duration::from_secs(10), async || !alerts().await.is_empty()).await;
    app.worker_passes(10).await;
    let h = app.health().await;
    assert_eq!(h.overall.dead_open, 0);
    assert_eq!(h.overall.pending + h.overall.running, 5);
    let a = alerts().await;
    assert_eq!(a.len(), 1, "one alert for the incident: {a:?}");
    assert_eq!(a[0].key, TOKEN_ENV);
    assert!(pd.persons().is_empty());
    let c = pd.counts();
    assert_eq!(c.person_creates + c.lead_creates, 0, "nothing but searches: {c:?}");
    assert!(c.unauthorized < 5 + 5, "probed, not hammered: {c:?}");
    let counted: i64 = app.server.app.store.deliveries().await.unwrap().iter().map(|d| d.attempts).sum();
    assert_eq!(counted, 0, "a refused token uses no attempts");

    pd.set_faults(Faults::default());
    let h = app.wait_settled(Duration::from_secs(20)).await;
    assert_eq!(h.overall.delivered, 5);
    assert_each_once(&pd, &ids);
    one_alert_resolved(&app, "credentials").await;
    app.server.shutdown().await.unwrap();
}

fn target_config(pd: SocketAddr, field: &str) -> leadline::config::Config {
    let (crm, db) = ("127.0.0.1:9".parse().unwrap(), std::path::Path::new("/tmp/unused.db"));
    let text = config_text(crm, db, &pipedrive_target(pd, 2_000, 1)).replace(FIELD_KEY, field);
    let mut c = parse_config(&text);
    c.inline_secrets.insert(TOKEN_ENV.into(), TOKEN.into());
    c
}

#[tokio::test]
async fn test_connection_and_preview_say_what_they_do_in_plain_words() {
    use leadline::targets::pipedrive::PipedriveTarget;
    use leadline::targets::Connector;
    let (pd, pd_addr) = MockPipedrive::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let c = target_config(pd_addr, FIELD_KEY);
    let target = PipedriveTarget::new("crm", &c.targets["crm"], &c, leadline::clock::Clock::system()).unwrap();
    let check = target.check().await;
    assert!(check.ok, "{check:?}");
    assert!(check.message.contains("Acme Test") && check.message.contains(FIELD_KEY), "{check:?}");

    let c = target_config(pd_addr, "0000000000000000000000000000000000000000");
    let wrong_field = PipedriveTarget::new("crm", &c.targets["crm"], &c, leadline::clock::Clock::system()).unwrap();
    let check = wrong_field.check().await;
    assert!(!check.ok && check.message.contains("no person field"), "{check:?}");

    pd.set_faults(Faults { token_revoked: true, ..Default::default() });
    let check = target.check().await;
    assert!(!check.ok && check.message.contains(TOKEN_ENV) && check.message.contains("revoked"), "{check:?}");
    pd.set_faults(Faults::default());

    let mut c = target_config("127.0.0.1:9".parse().unwrap(), FIELD_KEY);
    c.targets.get_mut("crm").unwrap().timeout_ms = 300;
    let unreachable = PipedriveTarget::new("crm", &c.targets["crm"], &c, leadline::clock::Clock::system()).unwrap();
    let check = unreachable.check().await;
    assert!(!check.ok && check.message.contains("could not connect"), "{check:?}");

    // The preview: search, person create, lead create — the token masked, nothing sent.
    let before = pd.counts().requests;
    let job = leadline::store::Job {
        id: 1,
        event_id: 1,
        step_index: 0,
        target: "crm".into(),
        attempts: 0,
        pending_since: chrono::Utc::now(),
        lease_token: 1,
        in_doubt: false,
        trigger: "ingest".into(),
        replay_generation: 0,
        revision: 1,
        key_revision: 1,
        source: "plain".into(),
        source_ref: "V-1".into(),
        received_at: chrono::Utc::now(),
        payload: lead("V-1"),
        previous: Default::default(),
        dropped: Vec::new(),
    };
    let p = target.preview(&job).unwrap();
    assert_eq!(p.method, "POST");
    assert!(p.url.ends_with("/api/v2/persons"), "{}", p.url);
    assert!(p.headers.contains(&("x-api-token".into(), "••••".into())));
    assert!(!format!("{p:?}").contains(TOKEN));
    assert_eq!(p.body["custom_fields"][FIELD_KEY], "plain:V-1");
    assert!(p.notes[0].contains("persons/search") && p.notes[0].contains("exact_match=true"), "{:?}", p.notes);
    assert!(p.notes[1].contains("/v1/leads") && p.notes[1].contains("Web form lead"), "{:?}", p.notes);
    assert_eq!(pd.counts().requests, before, "a preview sends nothing");
}
