//! Monitoring against a real server and database: the alert lifecycle (open, deduplicate, re-notify,
//! acknowledge, resolve by itself, digest) driven by volume checks at injected times, and reconciliation
//! recovering leads whose webhooks were dropped without duplicating those that arrived.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use leadline::api;
use leadline::monitor::{self, alerts, sources, Notifier};
use leadline::runtime::Clock;
use leadline::server::{Server, StartOptions};
use leadline::store::{EventCountPoint, NewEvent};

/// Keeps every notification, so a test can count them.
#[derive(Default)]
struct Recording(Mutex<Vec<(String, String)>>);

impl Notifier for Recording {
    fn notify(&self, title: &str, body: &str) {
        self.0.lock().unwrap().push((title.to_string(), body.to_string()));
    }
}

impl Recording {
    fn titles(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|n| n.0.clone()).collect()
    }
}

struct Setup {
    server: Server,
    crm: leadline::demo::mock_crm::MockCrm,
    notes: Arc<Recording>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// A fixed instant for tests that drive the manual clock (a Monday morning).
fn t0() -> DateTime<Utc> {
    "2026-03-02T10:00:00Z".parse().unwrap()
}

/// A server on the system clock.
async fn start() -> Setup {
    start_with_clock(None).await
}

/// A server whose every decision takes its time from `clock` (a manual clock the test sets and advances).
async fn start_with_clock(clock: Option<Clock>) -> Setup {
    start_tweaked(clock, |text| text).await
}

/// As [`start_with_clock`], with the config text changed by `tweak` first.
async fn start_tweaked(clock: Option<Clock>, tweak: impl Fn(String) -> String) -> Setup {
    start_listening(clock, Duration::ZERO, tweak).await
}

/// As [`start_tweaked`], the monitor taking itself to have listened for `listened_before` before the start (as
/// the demo started at a point of its timeline does).
async fn start_listening(clock: Option<Clock>, listened_before: Duration, tweak: impl Fn(String) -> String) -> Setup {
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut text = common::config_text(crm_addr, &dir.path().join("leadline.db"), &common::idempotent_crm(crm_addr));
    text.push_str(&format!(
        r#"
[sources.plain.reconcile]
list_url = "http://{crm_addr}/source/plain/leads?since={{since}}"
items_pointer = "/items"
next_pointer = "/next"
interval_seconds = 3600

[sources.meta.reconcile]
form_ids = ["77"]
interval_seconds = 3600

[monitor.alerts.silence]
notify = "immediate"
renotify_minutes = 30
"#
    ));
    let config = common::parse_config(&tweak(text));
    let notes = Arc::new(Recording::default());
    let server = Server::start_with(
        config,
        StartOptions { notifier: notes.clone(), clock, listened_before, ..Default::default() },
    )
    .await
    .unwrap();
    Setup { server, crm, notes, http: reqwest::Client::new(), _dir: dir }
}

/// Four weeks of history for `source`: `per_hour` events every hour.
async fn seed_history(setup: &Setup, source: &str, per_hour: f64) {
    let hour = 3_600_000i64;
    let current = setup.server.app.started_at.timestamp_millis() / hour * hour;
    let points: Vec<EventCountPoint> = (1..=28 * 24)
        .map(|h| EventCountPoint {
            source: source.to_string(),
            resolution_seconds: 3600,
            at: DateTime::from_timestamp_millis(current - h * hour).unwrap(),
            events: per_hour,
        })
        .collect();
    setup.server.app.store.seed_event_history(&points).await.unwrap();
}

async fn insert_plain(setup: &Setup, refs: impl Iterator<Item = String>, at: DateTime<Utc>) {
    let events: Vec<NewEvent> = refs
        .map(|r| NewEvent {
            source: "plain".into(),
            source_ref: r.clone(),
            payload: json!({"id": r}),
            route: vec!["crm".into()],
            received_at: at,
            via: Default::default(),
            lead_at: None,
            on_change: Default::default(),
        })
        .collect();
    setup.server.app.store.insert_events(&events).await.unwrap();
}

async fn alert(setup: &Setup, kind: &str, key: &str) -> Option<alerts::Alert> {
    api::alerts(&setup.server.app).await.unwrap().into_iter().find(|a| a.kind.as_str() == kind && a.key == key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_and_drop_alerts_open_once_renotify_acknowledge_and_resolve_by_themselves() {
    // The server's clock is manual: the background monitor and the checks below see the same time, the one
    // the test sets.
    let setup = start_with_clock(Some(Clock::manual(t0()))).await;
    let app = &setup.server.app;
    let notes = setup.notes.clone();
    seed_history(&setup, "plain", 120.0).await;
    let t0 = app.started_at;
    assert_eq!(t0, self::t0(), "the server started at the manual clock's time");
    let at = |minutes: i64| {
        app.clock.set(t0 + chrono::Duration::minutes(minutes));
        app.clock.now()
    };

    // 45 minutes of listening and nothing from `plain`, which sends 120 an hour: a silence.
    sources::check_sources(app, notes.as_ref(), at(45)).await;
    let silence = alert(&setup, "silence", "plain").await.expect("silence alert");
    assert_eq!(silence.state.as_str(), "open");
    assert_eq!(silence.severity.as_str(), "critical");
    assert_eq!(notes.titles().iter().filter(|t| t.starts_with("No leads from plain")).count(), 1);

    // A check with little listening time behind it (as right after a restart) cannot tell: the alert stays.
    app.clock.set(t0 + chrono::Duration::seconds(30));
    sources::check_sources(app, notes.as_ref(), app.clock.now()).await;
    assert_eq!(alert(&setup, "silence", "plain").await.unwrap().state.as_str(), "open", "a restart is not a lead");

    // The same condition a minute later: the same alert, one more occurrence, no second notification.
    sources::check_sources(app, notes.as_ref(), at(46)).await;
    let again = alert(&setup, "silence", "plain").await.unwrap();
    assert_eq!((again.id, again.occurrences), (silence.id, 2));
    assert_eq!(notes.titles().len(), 1);
    // One incident, one alert: the silence is not announced a second time as "fewer leads than usual".
    let drop = alert(&setup, "volume_drop", "plain").await;
    assert!(drop.as_ref().is_none_or(|d| d.state.as_str() == "resolved"), "{drop:?}");

    // Nobody acknowledged it: 30 minutes after the notification it is announced again, once.
    let mut last_digest = t0;
    monitor::announce_due(app, notes.as_ref(), at(60), &mut last_digest).await;
    assert_eq!(notes.titles().len(), 1, "not yet due");
    monitor::announce_due(app, notes.as_ref(), at(76), &mut last_digest).await;
    monitor::announce_due(app, notes.as_ref(), at(77), &mut last_digest).await;
    let titles = notes.titles();
    assert_eq!(titles.len(), 2, "{titles:?}");
    assert!(titles[1].starts_with("Still open: No leads from plain"), "{titles:?}");

    // A trickle arrives (12 in 15 minutes where 30 are normal): the silence resolves by itself, and the
    // volume is still improbably low: a volume drop opens.
    insert_plain(&setup, (0..12).map(|i| format!("a-{i}")), t0 + chrono::Duration::minutes(64)).await;
    sources::check_sources(app, notes.as_ref(), at(79)).await;
    let silence = alert(&setup, "silence", "plain").await.unwrap();
    assert_eq!(silence.state.as_str(), "resolved");
    assert_eq!(silence.resolution_note.as_deref(), Some("leads arrive again"));
    let drop = alert(&setup, "volume_drop", "plain").await.expect("volume drop alert");
    assert_eq!(drop.state.as_str(), "open");
    assert!(drop.detail.contains("12 in the last"), "{}", drop.detail);

    // Acknowledged: someone is on it, so no re-notification, however long it stays open.
    let acked = api::acknowledge_alert(app, drop.id, "ops@example.com").await.unwrap();
    assert_eq!(acked.state.as_str(), "acknowledged");
    let before = notes.titles().len();
    monitor::announce_due(app, notes.as_ref(), at(300), &mut last_digest).await;
    assert!(notes.titles()[before..].iter().all(|t| !t.contains("Fewer leads")), "{:?}", notes.titles());

    // Normal volume again (130 over the next hour): the drop resolves by itself; history keeps both alerts.
    for m in 0..13 {
        insert_plain(&setup, (0..10).map(|i| format!("b-{m}-{i}")), t0 + chrono::Duration::minutes(80 + m * 5)).await;
    }
    sources::check_sources(app, notes.as_ref(), at(140)).await;
    let drop = alert(&setup, "volume_drop", "plain").await.unwrap();
    assert_eq!(drop.state.as_str(), "resolved", "{drop:?}");
    let history = api::alerts(app).await.unwrap();
    assert_eq!(history.iter().filter(|a| a.key == "plain").count(), 2);
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_falling_silent_gradually_is_one_alert_announced_once() {
    // `plain` sends two leads a minute, as its four weeks of history say, then stops at 10:19. Checked minute by
    // minute, its count becomes improbably low long before the silence threshold (30 min): a volume drop opens
    // and is announced; when the silence opens at 10:49, that same alert becomes the silence — critical, one
    // alert for the source, and no second announcement.
    let setup = start_with_clock(Some(Clock::manual(t0()))).await;
    let app = &setup.server.app;
    let notes = setup.notes.clone();
    seed_history(&setup, "plain", 120.0).await;
    let about_plain = || notes.titles().into_iter().filter(|t| t.contains("plain")).collect::<Vec<_>>();
    let unresolved = || async {
        alerts::unresolved(&app.store).await.unwrap().into_iter().filter(|a| a.key == "plain").collect::<Vec<_>>()
    };
    let mut drop_opened = None;
    for minute in 0..=52i64 {
        let now = t0() + chrono::Duration::minutes(minute);
        if minute < 20 {
            insert_plain(&setup, (0..2).map(|i| format!("g-{minute}-{i}")), now).await;
        }
        app.clock.set(now + chrono::Duration::seconds(30));
        sources::check_sources(app, notes.as_ref(), app.clock.now()).await;
        let open = unresolved().await;
        assert!(open.len() <= 1, "minute {minute}: one incident, one alert: {open:#?}");
        match open.first().map(|a| a.kind.as_str()) {
            Some("volume_drop") => {
                drop_opened.get_or_insert((minute, open[0].opened_at));
            }
            Some("silence") => assert!(minute >= 49, "minute {minute}: silent for less than 30 min"),
            Some(other) => panic!("minute {minute}: unexpected {other}"),
            None => {}
        }
    }
    let (drop_minute, drop_opened) = drop_opened.expect("the count fell improbably low before the silence threshold");
    assert!(drop_minute < 49, "the drop opened at minute {drop_minute}");
    let open = unresolved().await;
    assert_eq!(open.len(), 1, "{open:#?}");
    let silence = &open[0];
    assert_eq!((silence.kind.as_str(), silence.severity.as_str()), ("silence", "critical"));
    assert!(silence.title.starts_with("No leads from plain for 3"), "{}", silence.title);
    assert_eq!(silence.opened_at, drop_opened, "the drop's alert, turned into the silence");
    assert!(silence.detail.contains("Nothing since 10:19 UTC"), "{}", silence.detail);
    assert!(silence.detail.contains("It began as \"Fewer leads than usual\" at 10:"), "{}", silence.detail);
    let titles = about_plain();
    assert_eq!(titles, ["Fewer leads than usual from plain"], "one incident, one announcement");
    // The history holds one alert for the incident, not a resolved drop beside the silence.
    let history = api::alerts(app).await.unwrap();
    assert_eq!(history.iter().filter(|a| a.key == "plain").count(), 1, "{history:#?}");
    // The silence goes on (10:55, 36 min after the last lead at 10:19): its figures follow, its words still say
    // how it began, and nothing is announced.
    app.clock.set(t0() + chrono::Duration::minutes(55));
    sources::check_sources(app, notes.as_ref(), app.clock.now()).await;
    let later = alert(&setup, "silence", "plain").await.unwrap();
    assert!(later.title.starts_with("No leads from plain for 36 min"), "{}", later.title);
    assert!(later.detail.contains("It began as \"Fewer leads than usual\""), "{}", later.detail);
    assert_eq!(about_plain().len(), 1);
    // A lead: the incident ends, as a silence does.
    insert_plain(&setup, std::iter::once("g-back".to_string()), t0() + chrono::Duration::minutes(56)).await;
    app.clock.set(t0() + chrono::Duration::minutes(57));
    sources::check_sources(app, notes.as_ref(), app.clock.now()).await;
    let ended = alert(&setup, "silence", "plain").await.unwrap();
    assert_eq!((ended.state.as_str(), ended.resolution_note.as_deref()), ("resolved", Some("leads arrive again")));
    setup.server.shutdown().await.unwrap();
}

/// `plain`'s history for the hour before `t0()`: two leads a minute until 09:20, then nothing (the hour's
/// roll-up agrees with its minutes), and four weeks of 120 an hour before.
async fn seed_silent_since_0920(setup: &Setup) {
    let at = |minutes: i64| t0() - chrono::Duration::minutes(60 - minutes);
    let point =
        |resolution_seconds, at, events| EventCountPoint { source: "plain".into(), resolution_seconds, at, events };
    let mut points: Vec<EventCountPoint> = (0..20).map(|m| point(60, at(m), 2.0)).collect();
    points.push(point(3600, at(0), 40.0));
    setup.server.app.store.seed_event_history(&points).await.unwrap();
    seed_history(setup, "plain", 120.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silence_that_began_before_the_start_is_judged_at_once_only_where_the_history_stands_for_listening() {
    // A real restart at 10:00, the source silent since 09:20: the minutes before the start are not listening
    // time. One minute in, nothing is judged yet, and the page says when it will be.
    let real = start_with_clock(Some(Clock::manual(t0()))).await;
    seed_silent_since_0920(&real).await;
    let app = &real.server.app;
    assert_eq!(app.listening_since, app.started_at);
    app.clock.set(t0() + chrono::Duration::minutes(1));
    let status = sources::assess_source(app, "plain", app.clock.now()).await.unwrap();
    assert_eq!(status.state, sources::SourceState::Listening, "{status:?}");
    assert_eq!(status.assessment.judged_from, Some(t0() + chrono::Duration::minutes(6)), "{status:?}");
    assert_eq!(status.assessment.silent_since, Some(t0()), "a restart is not a lead, nor the start of a silence");
    sources::check_sources(app, real.notes.as_ref(), app.clock.now()).await;
    assert!(alert(&real, "silence", "plain").await.is_none());
    // Five minutes of listening are judged on five minutes; thirty without a lead are a silence.
    app.clock.set(t0() + chrono::Duration::minutes(6));
    let status = sources::assess_source(app, "plain", app.clock.now()).await.unwrap();
    assert_eq!((status.assessment.window_minutes, status.assessment.judged_from), (6, None), "{status:?}");
    app.clock.set(t0() + chrono::Duration::minutes(31));
    sources::check_sources(app, real.notes.as_ref(), app.clock.now()).await;
    assert_eq!(alert(&real, "silence", "plain").await.unwrap().state.as_str(), "open");
    real.server.shutdown().await.unwrap();

    // The demo's way: the history stands for an hour of listening before the start. The silence that began at
    // 09:20 is judged one minute in, dated from the history's last lead, and raises one alert, not two.
    let demo = start_listening(Some(Clock::manual(t0())), Duration::from_secs(3600), |t| t).await;
    seed_silent_since_0920(&demo).await;
    let app = &demo.server.app;
    assert_eq!(app.listening_since, t0() - chrono::Duration::hours(1));
    app.clock.set(t0() + chrono::Duration::minutes(1));
    let status = sources::assess_source(app, "plain", app.clock.now()).await.unwrap();
    assert_eq!(status.state, sources::SourceState::Silent, "{status:?}");
    assert_eq!(status.assessment.silent_since, Some(t0() - chrono::Duration::minutes(40)));
    assert_eq!(status.last_event_at, Some(t0() - chrono::Duration::minutes(40)));
    // Its windows count the history: 38 in the last hour (the minutes 09:01 to 09:19), none in the last 30.
    assert_eq!(status.assessment.observed, 0, "{status:?}");
    sources::check_sources(app, demo.notes.as_ref(), app.clock.now()).await;
    let silence = alert(&demo, "silence", "plain").await.expect("silence alert");
    assert_eq!(silence.state.as_str(), "open");
    assert!(silence.title.starts_with("No leads from plain for 41 min"), "{}", silence.title);
    let drop = alert(&demo, "volume_drop", "plain").await;
    assert!(drop.as_ref().is_none_or(|d| d.state.as_str() == "resolved"), "{drop:?}");
    demo.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_recovers_dropped_webhooks_without_duplicating_the_ones_that_arrived() {
    let setup = start().await;
    let app = &setup.server.app;
    // The scheduled reconciliation runs at start: let it finish (it finds nothing) so the comparisons below
    // are the ones this test makes.
    for source in ["plain", "meta"] {
        tokio::time::timeout(Duration::from_secs(10), async {
            while leadline::reconcile::latest(&app.store, source).await.unwrap().and_then(|r| r.finished_at).is_none() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the first scheduled reconciliation ran");
    }
    let now = app.clock.now();
    // The generic source lists 60 leads; 50 arrive as webhooks (one of them twice).
    for i in 0..60 {
        let id = format!("p-{i}");
        setup.crm.list_lead("plain", &id, now, json!({"id": id, "name": format!("Lead {i}")}));
    }
    for i in 0..50 {
        let r = setup
            .http
            .post(format!("http://{}/ingest/plain", setup.server.addr))
            .json(&json!({"id": format!("p-{i}")}));
        assert!(r.send().await.unwrap().status().is_success());
    }
    let dup = setup.http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&json!({"id": "p-7"}));
    assert_eq!(dup.send().await.unwrap().status(), 200);
    // Meta lists 30 leads of form 77; 25 webhooks arrive.
    for i in 0..30u64 {
        let id = 555_000 + i;
        let value = json!({"leadgen_id": id, "form_id": 77, "page_id": 1, "created_time": now.timestamp()});
        setup.crm.list_lead("77", &id.to_string(), now, value.clone());
        if i < 25 {
            let body = json!({"object": "page", "entry": [{"id": 1, "time": now.timestamp(),
                "changes": [{"field": "leadgen", "value": value}]}]})
            .to_string();
            let sig = leadline::ingest::signature::sign(common::SECRET.as_bytes(), body.as_bytes());
            let r = setup
                .http
                .post(format!("http://{}/ingest/meta", setup.server.addr))
                .header("X-Hub-Signature-256", sig)
                .header("content-type", "application/json")
                .body(body);
            assert_eq!(r.send().await.unwrap().status(), 202);
        }
    }

    let plain = api::reconcile_now(app, "plain").await.unwrap();
    assert_eq!((plain.listed, plain.missing, plain.ingested), (60, 10, 10), "{plain:?}");
    let mut refs = plain.missing_refs.clone();
    refs.sort();
    assert_eq!(refs, (50..60).map(|i| format!("p-{i}")).collect::<Vec<_>>());
    let meta = api::reconcile_now(app, "meta").await.unwrap();
    assert_eq!((meta.listed, meta.missing, meta.ingested), (30, 5, 5), "{meta:?}");

    // Recovered leads go the normal way: each lead in the CRM exactly once.
    let health = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let h = api::health(app).await.unwrap().queue;
            if h.overall.pending + h.overall.running == 0 && h.overall.delivered >= 90 {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("all 90 leads delivered");
    assert_eq!(health.overall.dead_open, 0);
    assert_eq!(setup.crm.distinct_leads(), 90);
    assert_eq!(setup.crm.stats().duplicated_external_ids, 0);
    for i in 0..60 {
        assert_eq!(setup.crm.records_for(&format!("plain:p-{i}")), 1, "plain:p-{i}");
    }
    for i in 0..30u64 {
        assert_eq!(setup.crm.records_for(&format!("meta:{}", 555_000 + i)), 1);
    }
    let recovered = app.store.stored_events().await.unwrap().iter().filter(|e| e.via == "reconciliation").count();
    assert_eq!(recovered, 15);

    // Missing leads mean webhooks are being lost: an alert per source, announced in the digest (its policy).
    let found = alert(&setup, "reconciliation_found", "plain").await.expect("alert");
    assert_eq!(found.title, "10 leads from plain never arrived as webhooks");
    assert_eq!(found.notifications, 0);
    let mut last_digest = now;
    monitor::announce_due(app, setup.notes.as_ref(), now + chrono::Duration::minutes(61), &mut last_digest).await;
    let notes = setup.notes.0.lock().unwrap().clone();
    let digest = notes.iter().find(|n| n.0 == "Leadline: 2 alerts").expect("one digest for both");
    assert!(digest.1.contains("10 leads from plain") && digest.1.contains("5 leads from meta"), "{digest:?}");

    // A second comparison finds nothing missing (nothing ingested twice) and resolves the alert.
    let again = api::reconcile_now(app, "plain").await.unwrap();
    assert_eq!((again.listed, again.missing), (60, 0));
    assert_eq!(alert(&setup, "reconciliation_found", "plain").await.unwrap().state.as_str(), "resolved");
    let sources = api::sources(app).await.unwrap();
    let plain = sources.iter().find(|s| s.status.source == "plain").unwrap();
    assert_eq!(plain.recovered_7d, 10);
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_growth_alerts_follow_the_queue_and_a_first_failure_is_no_budget_alert() {
    use leadline::demo::mock_crm::Behaviour;
    let setup = start().await;
    let app = &setup.server.app;
    let notes = setup.notes.clone();
    let post =
        |i: String| setup.http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&json!({"id": i}));

    // The CRM rejects every lead's data: 25 dead letters within a minute.
    setup.crm.set_behaviour(Behaviour { fail_with: Some(422), ..Default::default() });
    for i in 0..25 {
        assert_eq!(post(format!("d-{i}")).send().await.unwrap().status(), 202);
    }
    tokio::time::timeout(Duration::from_secs(20), async {
        while api::health(app).await.unwrap().queue.overall.dead_open < 25 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("25 dead letters");
    let mut recorder = leadline::monitor::metrics::Recorder::default();
    let health = api::health(app).await.unwrap().queue;
    leadline::monitor::metrics::record(
        &app.store,
        &mut recorder,
        &health,
        &app.config.monitor.metrics,
        app.clock.now(),
    )
    .await
    .unwrap();
    monitor::check_targets(app, notes.as_ref(), app.clock.now()).await;
    let growth = alert(&setup, "dead_letter_growth", "crm").await.expect("growth alert");
    assert_eq!(growth.title, "25 leads to crm were dead-lettered in the last hour");
    // Its policy is the digest: no notification yet.
    assert!(notes.titles().iter().all(|t| !t.contains("dead-lettered")));

    // The CRM is down (503): leads keep retrying, with most of their 600 s budget ahead. The warning window
    // (30 min) is longer than the budget, and once made every retrying lead "close to running out" at its first
    // failure; none is projected to run out now (the alert's both sides on a manual clock:
    // `retry_budget_alert_fires_when_a_hold_outlasts_what_is_left`).
    setup.crm.set_behaviour(Behaviour { fail_with: Some(503), ..Default::default() });
    for i in 0..3 {
        assert_eq!(post(format!("r-{i}")).send().await.unwrap().status(), 202);
    }
    common::wait_for("the three leads failed once and retrying", Duration::from_secs(10), async || {
        let steps = app.store.deliveries().await.unwrap();
        steps.iter().filter(|d| d.source_ref.starts_with("r-") && d.attempts >= 1 && d.state == "pending").count() == 3
    })
    .await;
    monitor::check_targets(app, notes.as_ref(), app.clock.now()).await;
    assert!(alert(&setup, "retry_budget", "crm").await.is_none(), "a first failure is not running out of time");

    // The CRM recovers: the leads are delivered.
    setup.crm.set_behaviour(Behaviour::default());
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let o = api::health(app).await.unwrap().queue.overall;
            if o.pending + o.running == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the retrying leads were delivered");
    setup.server.shutdown().await.unwrap();
}

/// The `retry_budget` alert is a projection (`monitor::budget`): it fires when a lead's wait outlasts what is
/// left of its budget, not while most of it remains. The test target's budget is 600 s; the warning window
/// (30 min) is capped at a quarter of it (150 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_budget_alert_fires_when_a_hold_outlasts_what_is_left() {
    use leadline::demo::mock_crm::Behaviour;
    let setup = start_with_clock(Some(Clock::manual(t0()))).await;
    let app = &setup.server.app;
    let notes = setup.notes.clone();
    let minutes = |m: i64| t0() + chrono::Duration::minutes(m);
    let post =
        |i: &str| setup.http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&json!({"id": i})).send();
    let held_until = || app.worker.as_ref().unwrap().targets.get("crm").unwrap().hold(app.clock.now()).map(|h| h.until);
    let steps = async |prefix: &str| {
        let all = app.store.deliveries().await.unwrap();
        all.into_iter().filter(|d| d.source_ref.starts_with(prefix)).map(|d| d.state).collect::<Vec<_>>()
    };

    // 1. A hold shorter than what is left: the CRM says "come back in 2 min" at 10:00. One minute into the hold,
    //    the leads have 9 of their 10 min left, and the hold ends with 8 left: no alert.
    setup.crm.set_behaviour(Behaviour { fail_with: Some(429), retry_after_secs: Some(120), ..Default::default() });
    for i in 0..3 {
        assert_eq!(post(&format!("short-{i}")).await.unwrap().status(), 202);
    }
    common::wait_for("the target held until 10:02", Duration::from_secs(10), async || {
        held_until() == Some(minutes(2)) && steps("short-").await.iter().all(|s| s == "pending")
    })
    .await;
    app.clock.set(minutes(1));
    monitor::check_targets(app, notes.as_ref(), app.clock.now()).await;
    assert!(alert(&setup, "retry_budget", "crm").await.is_none(), "a 2 min hold within a 10 min budget");

    // The hold ends and the CRM takes them.
    setup.crm.set_behaviour(Behaviour::default());
    app.clock.set(minutes(2));
    common::wait_for("the first three delivered", Duration::from_secs(10), async || {
        steps("short-").await.iter().all(|s| s == "delivered")
    })
    .await;

    // 2. A hold outlasting what is left: at 10:02 the CRM says "come back in 15 min" (until 10:17) to one lead
    //    (told to wait past its own budget, it is dead-lettered at once: `backoff::decide_retry`). Three leads
    //    arriving meanwhile wait behind the hold; their budgets end at 10:12, before it does.
    setup.crm.set_behaviour(Behaviour { fail_with: Some(429), retry_after_secs: Some(900), ..Default::default() });
    assert_eq!(post("told").await.unwrap().status(), 202);
    common::wait_for("the target held until 10:17", Duration::from_secs(10), async || {
        held_until() == Some(minutes(17)) && steps("told").await == ["dead"]
    })
    .await;
    for i in 0..3 {
        assert_eq!(post(&format!("long-{i}")).await.unwrap().status(), 202);
    }
    // One minute into the hold, with 9 of their 10 min left, they are projected to run out.
    app.clock.set(minutes(3));
    monitor::check_targets(app, notes.as_ref(), app.clock.now()).await;
    let budget = alert(&setup, "retry_budget", "crm").await.expect("retry budget alert");
    assert_eq!(budget.state.as_str(), "open");
    assert!(budget.title.starts_with("3 leads to crm will run out of retry time"), "{}", budget.title);
    assert_eq!(budget.title, "3 leads to crm will run out of retry time before the target's hold ends at 10:17 UTC");
    assert!(budget.detail.contains("the oldest's at 10:12 UTC"), "{}", budget.detail);
    assert!(notes.titles().iter().any(|t| t.contains("will run out of retry time")));
    assert_eq!(steps("long-").await, ["pending"; 3], "nothing was sent during the hold");

    // Two leads arriving at 10:15 have 8 of their 10 min left when the hold ends: they are not counted.
    app.clock.set(minutes(15));
    for i in 0..2 {
        assert_eq!(post(&format!("late-{i}")).await.unwrap().status(), 202);
    }
    monitor::check_targets(app, notes.as_ref(), app.clock.now()).await;
    let budget = alert(&setup, "retry_budget", "crm").await.unwrap();
    assert!(budget.title.starts_with("3 leads to crm"), "{}", budget.title);

    // The hold ends and the CRM recovers: each lead gets its one more try, is delivered, and the alert resolves by
    // itself.
    setup.crm.set_behaviour(Behaviour::default());
    app.clock.set(minutes(17));
    common::wait_for("the waiting leads delivered", Duration::from_secs(10), async || {
        let (long, late) = (steps("long-").await, steps("late-").await);
        long.len() + late.len() == 5 && long.iter().chain(&late).all(|s| s == "delivered")
    })
    .await;
    monitor::check_targets(app, notes.as_ref(), app.clock.now()).await;
    assert_eq!(alert(&setup, "retry_budget", "crm").await.unwrap().state.as_str(), "resolved");
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_history_rolls_minutes_up_to_hours_and_prunes_by_retention() {
    use leadline::monitor::metrics::{self, Range, Recorder};
    let setup = start_with_clock(Some(Clock::manual(t0()))).await;
    let app = &setup.server.app;
    let now = app.clock.now();
    assert_eq!(now, t0());
    // 5 events 2 hours ago, 7 events 30 hours ago, 4 in this minute.
    insert_plain(&setup, (0..5).map(|i| format!("h2-{i}")), now - chrono::Duration::hours(2)).await;
    insert_plain(&setup, (0..7).map(|i| format!("h30-{i}")), now - chrono::Duration::hours(30)).await;
    insert_plain(&setup, (0..4).map(|i| format!("now-{i}")), now).await;
    let mut recorder = Recorder::default();
    let health = api::health(app).await.unwrap().queue;
    metrics::record(&app.store, &mut recorder, &health, &app.config.monitor.metrics, now).await.unwrap();

    let sum = |resolution: i64| {
        let store = app.store.clone();
        async move { store.metric_points("events", "plain", resolution).await.unwrap().iter().map(|p| p.1).sum::<f64>() }
    };
    // Every event is in a minute, and the minutes are rolled up into hours.
    assert!(sum(60).await >= 16.0);
    assert_eq!(sum(60).await, sum(3600).await);
    // The charts: 1 h has the 4 of this minute, 24 h also the 5 of two hours ago, 7 d all of them.
    let volume =
        |s: metrics::MetricSeries| s.volume_by_source.get("plain").map(|v| v.iter().sum::<f64>()).unwrap_or(0.0);
    assert!(volume(metrics::series(&app.store, Range::Hour, now).await.unwrap()) >= 4.0);
    assert!(volume(metrics::series(&app.store, Range::Day, now).await.unwrap()) >= 9.0);
    assert!(volume(metrics::series(&app.store, Range::Week, now).await.unwrap()) >= 16.0);

    // Two days later, the retention pass drops the minutes older than 48 h but keeps their hours.
    app.clock.advance(chrono::Duration::hours(20));
    let later = app.clock.now();
    metrics::record(&app.store, &mut recorder, &health, &app.config.monitor.metrics, later).await.unwrap();
    let minutes = app.store.metric_points("events", "plain", 60).await.unwrap();
    let old_minutes = minutes.iter().filter(|p| p.0 < later - chrono::Duration::hours(48)).count();
    assert_eq!(old_minutes, 0);
    assert!(sum(3600).await >= 16.0, "hourly roll-ups are kept");
    setup.server.shutdown().await.unwrap();
}

/// Speed to CRM per source and chart bucket: 10 leads of `plain` delivered in one minute at known speeds, 10 more
/// in another minute of the same hour, 4 of `webform`, 5 of `plain` two hours earlier, one in the current minute.
/// The 1 h chart has each minute's median and 90th percentile; the 7 d chart's hour has the percentiles of all its
/// raw speeds (not the mean nor the highest of its minutes' medians); the last-hour summary takes the 60
/// complete minutes before the current one, whatever the range. Reported speeds come from a histogram: within its
/// stated resolution, 2^(1/8) (±9 %).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speed_to_crm_series_has_honest_percentiles_per_source_and_bucket() {
    use leadline::figures::percentile;
    use leadline::monitor::metrics::{self, Range, Recorder};
    use leadline::store::{AttemptRecord, Completion, JobOutcome, Store};

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&common::database_url(&dir.path().join("speed.db"))).await.unwrap();
    let t = |s: &str| -> DateTime<Utc> { format!("2026-03-02T{s}Z").parse().unwrap() };
    let now = t("10:00:30");
    // (source, received, speed in seconds). Steps go to `offline`, a target no worker serves: the test delivers.
    let mut leads: Vec<(&str, DateTime<Utc>, i64)> = Vec::new();
    let minute_a = t("09:50:00");
    let minute_b = t("09:20:00");
    let two_hours_earlier = t("07:00:00");
    leads.extend([1, 2, 3, 4, 5, 6, 7, 8, 9, 30].map(|s| ("plain", minute_a, s)));
    leads.extend((10..20).map(|i| ("plain", minute_b, i * 10))); // 100 … 190 s: delivered 09:21:40 … 09:23:10
    leads.extend([20; 4].map(|s| ("webform", minute_a, s)));
    leads.extend([60, 120, 180, 240, 300].map(|s| ("plain", two_hours_earlier, s)));
    leads.push(("plain", t("10:00:00"), 10)); // the current minute: still being counted
    for (i, (source, received, speed)) in leads.iter().enumerate() {
        let lead = NewEvent {
            source: source.to_string(),
            source_ref: format!("speed-{i}"),
            payload: json!({"id": i}),
            route: vec!["offline".into()],
            received_at: *received,
            via: Default::default(),
            lead_at: None,
            on_change: Default::default(),
        };
        store.insert_events(&[lead]).await.unwrap();
        let delivered_at = *received + chrono::Duration::seconds(*speed);
        let jobs =
            store.claim("offline", 1, "test", *received, delivered_at + chrono::Duration::minutes(1)).await.unwrap();
        assert_eq!(jobs.len(), 1);
        let outcome = JobOutcome::Delivered { result: json!({"crm_id": i}), link: None, payload: None };
        let attempt = AttemptRecord {
            started_at: delivered_at,
            duration_ms: 10,
            http_status: Some(200),
            class: None,
            reason: "ok".into(),
            response_excerpt: None,
        };
        store.complete(&[Completion::of(&jobs[0], outcome, Some(attempt), delivered_at)]).await.unwrap();
    }
    let health = store.queue_health(now, &[]).await.unwrap();
    let config = leadline::config::MetricsConfig::default();
    metrics::record(&store, &mut Recorder::with_fetch_targets([]), &health, &config, now).await.unwrap();

    // Within the histogram's resolution of the raw value.
    let close = |reported: Option<f64>, raw: f64| {
        let r = reported.unwrap_or_else(|| panic!("no value where {raw} s was expected"));
        assert!(r / raw <= 2f64.powf(0.125) + 1e-9 && r / raw >= 2f64.powf(-0.125) - 1e-9, "{r} s for {raw} s");
    };
    let raw_percentile = |mut v: Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        percentile(&v, p).unwrap()
    };

    // The last hour, in minutes.
    let hour = metrics::series(&store, Range::Hour, now).await.unwrap();
    let at = |s: &metrics::MetricSeries, when: DateTime<Utc>| s.at.iter().position(|a| *a == when.timestamp()).unwrap();
    let (p50, p90) = (&hour.speed_p50_by_source, &hour.speed_p90_by_source);
    let a = at(&hour, minute_a);
    close(p50["plain"][a], 5.0);
    close(p90["plain"][a], 9.0);
    close(p50["webform"][a], 20.0);
    close(p90["webform"][a], 20.0);
    // Minute B's leads were delivered over three minutes: each minute has the speeds delivered in it.
    close(p50["plain"][at(&hour, t("09:21:00"))], 100.0);
    close(p90["plain"][at(&hour, t("09:22:00"))], 170.0);
    assert_eq!(p50["webform"].iter().filter(|v| v.is_some()).count(), 1, "nothing delivered elsewhere is null");
    assert_eq!(p50["plain"][at(&hour, t("09:30:00"))], None);
    // The current minute has its value, but lies past `complete_until`: the chart does not draw it as final.
    let current = at(&hour, t("10:00:00"));
    close(p50["plain"][current], 10.0);
    assert_eq!(hour.complete_until, t("10:00:00").timestamp());
    // The last complete hour, all sources together: 24 leads, the one of the current minute left out.
    let last_hour: Vec<f64> = leads
        .iter()
        .filter(|(_, received, speed)| {
            let delivered = *received + chrono::Duration::seconds(*speed);
            delivered >= t("09:00:00") && delivered < t("10:00:00")
        })
        .map(|l| l.2 as f64)
        .collect();
    assert_eq!(last_hour.len(), 24);
    assert_eq!(hour.speed_last_hour_delivered, 24.0);
    close(hour.speed_last_hour_p50, raw_percentile(last_hour.clone(), 50.0));
    close(hour.speed_last_hour_p90, raw_percentile(last_hour, 90.0));

    // Seven days, in hours, read from the hourly roll-ups: the 09:00 hour holds minutes A and B.
    let week = metrics::series(&store, Range::Week, now).await.unwrap();
    let nine = at(&week, t("09:00:00"));
    let plain_nine: Vec<f64> = leads
        .iter()
        .filter(|(source, received, _)| *source == "plain" && (*received == minute_a || *received == minute_b))
        .map(|l| l.2 as f64)
        .collect();
    assert_eq!(plain_nine.len(), 20);
    let (median, slow) = (raw_percentile(plain_nine.clone(), 50.0), raw_percentile(plain_nine, 90.0));
    assert_eq!((median, slow), (30.0, 170.0));
    close(week.speed_p50_by_source["plain"][nine], median);
    close(week.speed_p90_by_source["plain"][nine], slow);
    // Not a summary of the minutes' medians: their mean or highest is far from the hour's true median.
    let minute_medians: Vec<f64> = p50["plain"][..current].iter().flatten().copied().collect();
    assert!(minute_medians.iter().all(|m| (m / median - 1.0).abs() > 0.5), "{minute_medians:?}");
    let seven = at(&week, two_hours_earlier);
    close(week.speed_p50_by_source["plain"][seven], 180.0);
    close(week.speed_p90_by_source["plain"][seven], 300.0);
    close(week.speed_p50_by_source["webform"][nine], 20.0);
    assert_eq!(week.speed_p50_by_source["webform"][seven], None);
    // The 24 h chart's 15-minute buckets agree: 09:45–10:00 holds minute A only.
    let day = metrics::series(&store, Range::Day, now).await.unwrap();
    close(day.speed_p50_by_source["plain"][at(&day, t("09:45:00"))], 5.0);
    // The last-hour sentence reads the same 60 minutes whatever the range.
    for other in [&day, &week] {
        let last = (other.speed_last_hour_delivered, other.speed_last_hour_p50, other.speed_last_hour_p90);
        assert_eq!(last, (24.0, hour.speed_last_hour_p50, hour.speed_last_hour_p90));
    }
    // Seven minutes on, the 24 h chart's current bucket (10:00–10:15) is still being counted, but the last hour
    // (09:07–10:07) is complete and takes in the lead of 10:00 too.
    let later = metrics::series(&store, Range::Day, t("10:07:30")).await.unwrap();
    assert_eq!(later.complete_until, t("10:00:00").timestamp());
    assert_eq!(later.speed_last_hour_delivered, 25.0);
}

/// A CRM that goes down opens its breaker, and that reaches a person at once (`breaker_open`, critical); leads
/// left waiting longer than `oldest_pending_alert_seconds` (15 min) raise `oldest_pending`, aged from when they
/// were received. When the CRM answers again the probe closes the breaker, the leads go, and both alerts resolve
/// by themselves. Time is the manual clock's: the breaker's cooldown (an hour here) and the leads' age move only
/// when the test says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_open_and_oldest_pending_alerts_follow_the_target_and_the_queue() {
    let clock = Clock::manual(t0());
    let setup = start_tweaked(Some(clock.clone()), |text| {
        text.replace("cooldown_ms = 300", "cooldown_ms = 3600000")
            .replace("budget_seconds = 600", "budget_seconds = 86400")
    })
    .await;
    let app = &setup.server.app;
    setup.crm.set_behaviour(leadline::demo::mock_crm::Behaviour { fail_with: Some(503), ..Default::default() });
    let post =
        |id: String| setup.http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&json!({"id": id}));
    for i in 0..6 {
        assert_eq!(post(format!("b-{i}")).send().await.unwrap().status(), 202);
    }
    // Retries are due a fraction of a second later: each look moves the clock on by one second, far from the
    // hour-long cooldown.
    common::wait_for("the breaker alert", Duration::from_secs(10), async || {
        if alert(&setup, "breaker_open", "crm").await.is_some() {
            return true;
        }
        clock.advance(chrono::Duration::seconds(1));
        false
    })
    .await;
    let down = alert(&setup, "breaker_open", "crm").await.unwrap();
    assert_eq!((down.state.as_str(), down.severity.as_str()), ("open", "critical"));
    assert_eq!(down.title, "crm looks down: Leadline paused sending to it");
    assert!(setup.notes.titles().contains(&down.title), "announced at once: {:?}", setup.notes.titles());
    assert!(alert(&setup, "oldest_pending", "*").await.is_none(), "nothing has waited 15 min yet");

    // Sixteen minutes on, the leads still wait behind the open breaker.
    clock.advance(chrono::Duration::minutes(16));
    let queue = api::health(app).await.unwrap().queue;
    monitor::check_queue(app, setup.notes.as_ref(), &queue, clock.now()).await;
    let waiting = alert(&setup, "oldest_pending", "*").await.expect("the oldest-pending alert");
    assert_eq!(waiting.state.as_str(), "open");
    assert!(waiting.title.starts_with("A lead has been waiting 16 min"), "{}", waiting.title);
    assert!(waiting.detail.contains("(to crm)"), "{}", waiting.detail);

    // The CRM is back; an hour later the cooldown is over, the probe succeeds, the leads go.
    setup.crm.set_behaviour(leadline::demo::mock_crm::Behaviour::default());
    clock.advance(chrono::Duration::hours(1));
    common::wait_for("every lead delivered", Duration::from_secs(15), async || {
        api::health(app).await.unwrap().queue.overall.delivered == 6
    })
    .await;
    common::wait_for("the breaker alert resolved", Duration::from_secs(10), async || {
        alert(&setup, "breaker_open", "crm").await.is_some_and(|a| a.resolved_at.is_some())
    })
    .await;
    let queue = api::health(app).await.unwrap().queue;
    monitor::check_queue(app, setup.notes.as_ref(), &queue, clock.now()).await;
    let caught_up = alert(&setup, "oldest_pending", "*").await.unwrap();
    assert_eq!(caught_up.resolution_note.as_deref(), Some("the queue caught up"));
    assert_eq!(setup.crm.stats().duplicated_external_ids, 0);
    setup.server.shutdown().await.unwrap();
}
