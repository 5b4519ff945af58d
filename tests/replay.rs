//! Dead-letter operations at scale against a real server, database and mock CRM: staged and paced replays
//! through rate limits and an outage, preview = replay, cancelling, fixing data before a replay, time-sensitive
//! fallbacks, resolving by hand with retention, and auto-replay after a target recovers.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use common::{config_head, wait_for};
use serde_json::json;

use leadline::api::{self, ApiError, FixAndReplayRequest, FixRequest, ReplayRequest, ResolveRequest, ScriptedConfirm};
use leadline::config::Config;
use leadline::demo::mock_crm::{Behaviour, MockCrm};
use leadline::dlq::{DeadLetterFilter, DeadLetterGroup};
use leadline::model::ErrorClass;
use leadline::replay::fix::{FieldFix, FieldOp};
use leadline::replay::{ReplayOptions, ReplaySelection};
use leadline::server::Server;
use leadline::store::{LeadFixture, StepFixture, StepFixtureState};

struct Setup {
    server: Server,
    crm: MockCrm,
    _dir: tempfile::TempDir,
}

/// A `plain` source routed to `crm`, and a `form` source routed to `crm` then `sms`, whose fallback for leads
/// older than 30 minutes is `call_task`.
async fn start(extra_crm: &str) -> Setup {
    start_with(extra_crm, None).await
}

/// As [`start`], on the given clock (a manual one moves time on at the test's word).
async fn start_with(extra_crm: &str, clock: Option<leadline::api::Clock>) -> Setup {
    let (crm, addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = config_head(&dir.path().join("leadline.db"))
        + &format!(
            r#"batch_size = 200

[sources.plain]
route = ["crm"]
[sources.form]
route = ["crm", "sms"]

[targets.crm]
url = "http://{addr}/crm/leads"
strategy = "idempotency_key"
search_url = "http://{addr}/crm/leads/search/{{external_id}}"
timeout_ms = 2000
concurrency = 32
backoff = {{ base_ms = 20, cap_ms = 300, max_attempts = 50, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
{extra_crm}

[targets.sms]
url = "http://{addr}/notify/{{external_id}}"
strategy = "upsert"
max_lead_age_minutes = 30
fallback = "call_task"
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 10, budget_seconds = 600 }}

[targets.call_task]
url = "http://{addr}/tasks/{{external_id}}"
strategy = "upsert"
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 10, budget_seconds = 600 }}
"#
        );
    let config = Config::parse(&text, std::path::Path::new("test.toml")).expect("valid test config");
    let options = leadline::server::StartOptions { clock, ..Default::default() };
    let server = Server::start_with(config, options).await.unwrap();
    Setup { server, crm, _dir: dir }
}

/// `n` open dead letters of `plain` → `crm`, written straight to the database as a long outage would leave them:
/// class permanent_config, the CRM's 401. Lead `i` (from 0) has event and delivery id `i + 1`.
async fn seed_dead_letters(setup: &Setup, n: i64, received_minutes_ago: i64) {
    seed_dead_letters_purging(setup, n, received_minutes_ago, |_| false).await
}

/// As [`seed_dead_letters`]; the leads whose event id `purged` picks lost their data to retention.
async fn seed_dead_letters_purging(setup: &Setup, n: i64, received_minutes_ago: i64, purged: impl Fn(i64) -> bool) {
    let now = Utc::now();
    let received = now - chrono::Duration::minutes(received_minutes_ago);
    let leads: Vec<LeadFixture> = (0..n)
        .map(|i| LeadFixture {
            source: "plain".into(),
            source_ref: format!("dl-{i}"),
            received_at: received,
            payload: json!({"id": format!("dl-{i}"), "email": format!("lead{i}@example.com")}),
            purged: purged(i + 1),
            steps: vec![StepFixture {
                target: "crm".into(),
                attempts: 1,
                state: StepFixtureState::Dead {
                    at: now,
                    class: ErrorClass::PermanentConfig,
                    http_status: Some(401),
                    reason: "HTTP 401: token expired".into(),
                    field: None,
                    resolution: "open".parse().unwrap(),
                },
            }],
        })
        .collect();
    setup.server.app.store.insert_lead_fixtures(&leads).await.unwrap();
}

fn class(c: &str) -> ReplaySelection {
    ReplaySelection {
        ids: None,
        filter: Some(DeadLetterFilter { class: Some(c.parse().unwrap()), ..Default::default() }),
    }
}

/// A cause group as the Dead letters page selects it (its class, target and cause).
fn cause_group(group: &DeadLetterGroup) -> ReplaySelection {
    ReplaySelection {
        ids: None,
        filter: Some(DeadLetterFilter {
            class: Some(group.class),
            target: Some(group.target.clone()),
            cause: Some(group.cause.clone()),
            ..Default::default()
        }),
    }
}

/// German national phone numbers to E.164, the fix the strict mock CRM needs.
fn phone_to_e164() -> FieldFix {
    FieldFix { field: "phone".into(), op: FieldOp::NormalizePhone { country_code: "+49".into() } }
}

/// Waits until `check` holds for a replay's progress. The replay runner announces every step it commits (items
/// sent back, the canary passed, the replay finished) on the live channel, so `check` runs again on each
/// announcement instead of on a timer; worker outcomes wake it too (the last items of a cancelled replay finish
/// in the worker), and the live health push (every second) backs up an outcome whose commit lands just after its
/// event.
async fn wait_replay<F, Fut>(app: &leadline::api::App, what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut live = app.live.subscribe();
    let mut worker = app.worker.as_ref().expect("a worker").events.subscribe();
    tokio::time::timeout(within, async {
        while !check().await {
            tokio::select! {
                _ = live.recv() => {}
                _ = worker.recv() => {}
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for: {what}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_dead_letters_replayed_paced_through_rate_limits_and_an_outage_arrive_exactly_once() {
    const N: i64 = 10_000;
    const RATE: f64 = 800.0;
    let setup = start("").await;
    let app = &setup.server.app;
    seed_dead_letters(&setup, N, 10).await;

    let selection = class("permanent_config");
    let preview = api::replay_preview(app, &selection).await.unwrap();
    assert_eq!((preview.eligible, preview.not_eligible), (N, 0));
    assert_eq!(preview.summary, "Replay 10000 leads to crm?");
    let started = std::time::Instant::now();
    let request = ReplayRequest {
        selection: selection.clone(),
        expected: preview.eligible,
        reason: "HubSpot token renewed".into(),
        options: ReplayOptions { canary: Some(10), rate_per_second: Some(RATE) },
    };
    let receipt = api::replay(app, &request, "desktop user `ops`").await.unwrap();
    assert_eq!(receipt.queued, N);

    // The canary goes first; nothing else is sent until all ten are delivered.
    wait_replay(app, "the canary passes", Duration::from_secs(20), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().phase.as_str() == "rest"
    })
    .await;
    let after_canary = api::replay_progress(app, receipt.replay_id).await.unwrap();
    assert!(after_canary.events.iter().any(|e| e.kind.as_str() == "canary_passed"), "{:?}", after_canary.events);

    // Mid-replay (after the first thousand) the CRM rate-limits until the runner holds back for it, then goes down
    // (503) until the runner, its hold over, meets the outage itself (whether the worker still had leads to fail
    // with before that depends on how fast it drained them); then it recovers. Each phase ends on the runner's own
    // word (its `waiting` event), not after a while: under load a phase timed in seconds could end before the
    // runner had seen it.
    let id = receipt.replay_id;
    let waited_for = async |cause: &str| {
        let p = api::replay_progress(app, id).await.unwrap();
        p.events.iter().any(|e| e.kind.as_str() == "waiting" && e.detail.contains(cause))
    };
    wait_replay(app, "a thousand sent back", Duration::from_secs(60), || async {
        api::replay_progress(app, id).await.unwrap().delivered >= 1_000
    })
    .await;
    setup.crm.set_behaviour(Behaviour {
        rate_limit_per_sec: Some(100),
        retry_after_secs: Some(1),
        ..Default::default()
    });
    wait_replay(app, "the runner holds back for the rate limit", Duration::from_secs(60), || {
        waited_for("rate-limiting")
    })
    .await;
    setup.crm.set_behaviour(Behaviour { fail_with: Some(503), retry_after_secs: Some(1), ..Default::default() });
    wait_replay(app, "the runner meets the outage", Duration::from_secs(60), || waited_for("looks down")).await;
    setup.crm.set_behaviour(Behaviour::default());
    wait_replay(app, "the replay finishes", Duration::from_secs(180), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    let elapsed = started.elapsed();

    // Every lead exactly once in the CRM.
    let stats = setup.crm.stats();
    assert_eq!(stats.records, N as usize);
    assert_eq!(stats.duplicated_external_ids, 0);
    for i in 0..N {
        assert_eq!(setup.crm.records_for(&format!("plain:dl-{i}")), 1, "plain:dl-{i}");
    }
    // Paced: 10,000 at 800 a second cannot take less than 12.5 s.
    assert!(elapsed >= Duration::from_secs_f64(N as f64 / RATE), "{elapsed:?}");

    // The report is exact and the pauses it took by itself are visible.
    let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
    assert_eq!((p.total, p.delivered, p.queued, p.in_progress), (N, N, 0, 0));
    assert_eq!((p.failed_same_reason, p.failed_new_reason, p.resolved_by_hand), (0, 0, 0));
    assert_eq!(p.status.as_str(), "finished");
    let kinds: Vec<&str> = p.events.iter().map(|e| e.kind.as_str()).collect();
    println!("replay of {N} took {elapsed:?}; events: {:#?}", p.events);
    for k in ["started", "canary_sent", "canary_passed", "waiting", "continued", "finished"] {
        assert!(kinds.contains(&k), "no `{k}` event in {kinds:?}");
    }
    let waits: Vec<&str> =
        p.events.iter().filter(|e| e.kind.as_str() == "waiting").map(|e| e.detail.as_str()).collect();
    assert!(waits.iter().any(|d| d.contains("rate-limiting")), "{waits:?}");
    assert!(waits.iter().any(|d| d.contains("looks down")), "{waits:?}");
    assert_eq!(
        p.events.last().unwrap().detail,
        "10000 delivered, 0 failed again with the same reason, 0 with a new reason"
    );
    assert!(api::replay_report(app, receipt.replay_id, Some("failed_new_reason")).await.unwrap().is_empty());
    let delivered = api::replay_report(app, receipt.replay_id, Some("delivered")).await.unwrap();
    assert_eq!(delivered.len(), 500, "the report pages at 500");
    assert!(delivered.iter().all(|i| i.prior_reason.as_deref() == Some("HTTP 401: token expired")));

    // The audit: who, when, why, which filter; each item with its prior class; the dead letter's history.
    assert_eq!(p.actor, "desktop user `ops`");
    assert_eq!(p.reason, "HubSpot token renewed");
    assert_eq!(p.selection["filter"]["class"], "permanent_config");
    let items = app.store.replay_items(receipt.replay_id).await.unwrap();
    let prior = items.iter().filter(|i| i.prior_class.as_deref() == Some("permanent_config")).count() as i64;
    let items = items.len() as i64;
    assert_eq!((items, prior), (N, N));
    let view = api::dead_letter(app, delivered[0].delivery_id).await.unwrap();
    assert_eq!(view.replays[0].actor, "desktop user `ops`");
    let last = view.detail.attempts_timeline.last().unwrap();
    assert_eq!((last.outcome.as_str(), last.trigger.as_str()), ("delivered", "manual"));
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_counts_what_the_replay_does_and_a_cancelled_replay_leaves_the_rest_untouched() {
    let setup = start("").await;
    let app = &setup.server.app;
    // 100 were discarded before, 20 lost their data to retention.
    seed_dead_letters_purging(&setup, 300, 10, |event| (101..=120).contains(&event)).await;
    let discard = ReplaySelection { ids: Some((1..=100).collect()), filter: None };
    let r = ResolveRequest {
        selection: discard,
        resolution: "discarded".parse().unwrap(),
        note: "test leads".into(),
        expected: Some(100),
    };
    assert_eq!(api::resolve_dead_letters(app, &r, "ops").await.unwrap(), 100);

    let selection = ReplaySelection {
        ids: None,
        filter: Some(DeadLetterFilter { class: Some("permanent_config".parse().unwrap()), ..Default::default() }),
    };
    let preview = api::replay_preview(app, &selection).await.unwrap();
    assert_eq!(preview.eligible, 180);
    assert_eq!((preview.reasons.already_resolved, preview.reasons.payload_purged), (100, 20));
    assert!(preview.summary.contains("Skipped: 100 already resolved, 20 with purged data."), "{}", preview.summary);

    // A slow replay (10 a second after a canary of 10), cancelled once it has sent some.
    let request = ReplayRequest {
        selection: selection.clone(),
        expected: preview.eligible,
        reason: "check".into(),
        options: ReplayOptions { canary: Some(10), rate_per_second: Some(10.0) },
    };
    let receipt = api::replay(app, &request, "ops").await.unwrap();
    assert_eq!(receipt.queued, preview.eligible, "the replay takes exactly what the preview counted");
    wait_replay(app, "30 sent back", Duration::from_secs(20), || async {
        let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
        p.total - p.queued >= 30
    })
    .await;
    let p = api::control_replay(app, receipt.replay_id, "cancel", "ops").await.unwrap();
    assert_eq!(p.status.as_str(), "cancelled");
    wait_replay(app, "the sent ones finish", Duration::from_secs(20), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    wait_replay(app, "the worker finishes them", Duration::from_secs(20), || async {
        let o = api::health(app).await.unwrap().queue.overall;
        o.pending + o.running == 0
    })
    .await;
    let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
    let sent = p.total - p.queued;
    assert_eq!(p.delivered, sent);
    assert!(p.queued > 100, "most were never sent: {}", p.queued);
    // The rest is untouched: still open dead letters, never sent to the CRM, eligible again.
    assert_eq!(setup.crm.stats().records as i64, sent);
    let health = api::health(app).await.unwrap().queue.overall;
    assert_eq!(health.dead_open, p.queued + 20);
    let again = api::replay_preview(app, &selection).await.unwrap();
    assert_eq!(again.eligible, p.queued);
    assert!(p.events.iter().any(|e| e.kind.as_str() == "cancelled" && e.detail == "cancelled by ops"));
    // A cancelled replay cannot be resumed.
    assert!(matches!(api::control_replay(app, receipt.replay_id, "resume", "ops").await, Err(ApiError::BadRequest(_))));
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_group_by_cause_get_fixed_before_replay_and_keep_their_original() {
    let setup = start("").await;
    let app = &setup.server.app;
    let http = reqwest::Client::new();
    // The CRM starts rejecting national phone numbers: 15 leads die, each with its own number in the reason;
    // 5 more die of an expired token.
    setup.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });
    for i in 0..15 {
        let lead = json!({"id": format!("p-{i}"), "phone": format!("0151 {:04} {:04}", 1000 + i, 2000 + i)});
        http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&lead).send().await.unwrap();
    }
    wait_for("15 dead letters", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 15
    })
    .await;
    setup.crm.set_behaviour(Behaviour { fail_with: Some(403), strict_phone: true, ..Default::default() });
    for i in 0..5 {
        let lead = json!({"id": format!("t-{i}"), "phone": "+4915100000000"});
        http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&lead).send().await.unwrap();
    }
    wait_for("20 dead letters", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 20
    })
    .await;
    setup.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });

    // 20 failures, 2 problems: 2 groups.
    let groups = api::dead_letter_groups(app, &DeadLetterFilter::default()).await.unwrap();
    assert_eq!(groups.len(), 2, "{groups:#?}");
    assert_eq!((groups[0].count, groups[0].class.as_str()), (15, "permanent_data"));
    assert!(groups[0].cause.contains("'…'"), "{}", groups[0].cause);
    assert_eq!(groups[1].count, 5);
    // Filters by HTTP status and by a field of the lead.
    let by_status = DeadLetterFilter { http_status: Some(403), ..Default::default() };
    assert_eq!(api::dead_letters(app, &by_status).await.unwrap().items.len(), 5);
    let by_field = DeadLetterFilter {
        lead_field: Some("phone".into()),
        lead_value: Some("0151 1003".into()),
        ..Default::default()
    };
    assert_eq!(api::dead_letters(app, &by_field).await.unwrap().items.len(), 1);

    // Fix the phone format for the whole group: a dry run shows what changes, then it is applied.
    let group = ReplaySelection {
        ids: None,
        filter: Some(DeadLetterFilter { cause: Some(groups[0].cause.clone()), ..Default::default() }),
    };
    let fix = phone_to_e164();
    let dry = FixRequest { selection: group.clone(), fix: fix.clone(), reason: String::new(), dry_run: true };
    let report = api::fix_dead_letters(app, &dry, "ops").await.unwrap();
    assert_eq!((report.changed, report.unchanged), (15, 0));
    // The examples show the change, masked like the phone they are (the middle digits are nobody's business).
    assert_eq!(report.samples[0].before, json!("015•••••••••00"));
    assert_eq!(report.samples[0].after, json!("+49•••••••••00"));
    let id_fix = FixRequest { fix: FieldFix { field: "id".into(), op: FieldOp::Trim }, ..dry.clone() };
    assert!(
        matches!(api::fix_dead_letters(app, &id_fix, "ops").await, Err(ApiError::BadRequest(_))),
        "ids are never changed"
    );
    let apply = FixRequest { reason: "CRM wants E.164".into(), dry_run: false, ..dry };
    assert_eq!(api::fix_dead_letters(app, &apply, "ops").await.unwrap().changed, 15);
    let one = groups[0].example_id;
    let masked = api::dead_letter(app, one).await.unwrap();
    assert!(!masked.revealed);
    assert!(masked.detail.payload["phone"].as_str().unwrap().starts_with("+49•••"));
    let why = api::RevealRequest { reason: "check the fixed phone".into() };
    let view = api::reveal_dead_letter(app, one, &why, "ops").await.unwrap();
    assert!(view.revealed);
    assert!(view.detail.payload["phone"].as_str().unwrap().starts_with("+49151"));
    assert!(view.detail.original_payload.as_ref().unwrap()["phone"].as_str().unwrap().starts_with("0151 "));
    assert_eq!(view.detail.fixes.len(), 1);
    assert_eq!((view.detail.fixes[0].actor.as_str(), view.detail.fixes[0].reason.as_str()), ("ops", "CRM wants E.164"));

    // Edit one of the others by hand (its id cannot change).
    let t0 = groups[1].example_id;
    let why = api::RevealRequest { reason: "add a note".into() };
    let mut lead = api::reveal_dead_letter(app, t0, &why, "ops").await.unwrap().detail.payload;
    lead["note"] = json!("checked by phone");
    let edit = api::EditRequest { payload: lead.clone(), reason: "added note".into() };
    api::edit_dead_letter(app, t0, &edit, "ops").await.unwrap();
    lead["id"] = json!("other");
    let bad = api::EditRequest { payload: lead, reason: "x".into() };
    assert!(matches!(api::edit_dead_letter(app, t0, &bad, "ops").await, Err(ApiError::BadRequest(_))));

    // Replay the group, as a whole: the strict CRM accepts all 15 now.
    let preview = api::replay_preview(app, &group).await.unwrap();
    assert_eq!(preview.eligible, 15);
    let request =
        ReplayRequest { selection: group, expected: 15, reason: "phones fixed".into(), options: Default::default() };
    let receipt = api::replay(app, &request, "ops").await.unwrap();
    wait_replay(app, "the group is delivered", Duration::from_secs(30), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
    assert_eq!((p.delivered, p.failed_same_reason, p.failed_new_reason), (15, 0, 0));
    assert_eq!(setup.crm.stats().records, 15);
    setup.server.shutdown().await.unwrap();
}

/// Fixing a cause group and replaying it is one act: one preview (the fix's before/after and the replay's counts),
/// one reason, one confirmation; exactly the leads the fix changed go again, a lead it cannot help stays parked,
/// and the fixed leads are marked as such in the replay's figures and report.
#[tokio::test]
async fn fixing_a_cause_group_and_replaying_it_is_one_act() {
    let setup = start("").await;
    let app = &setup.server.app;
    let http = reqwest::Client::new();
    setup.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });
    for i in 0..6 {
        let lead = json!({"id": format!("f-{i}"), "phone": format!("0151 {:04} {:04}", 3000 + i, 4000 + i)});
        http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&lead).send().await.unwrap();
    }
    let hopeless = json!({"id": "f-x", "phone": "ask at the desk"});
    http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&hopeless).send().await.unwrap();
    wait_for("7 dead letters", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 7
    })
    .await;
    let groups = api::dead_letter_groups(app, &DeadLetterFilter::default()).await.unwrap();
    assert_eq!(groups.len(), 1, "one cause: {groups:#?}");
    assert_eq!(groups[0].field.as_deref(), Some("phone"), "the group names the field the CRM blamed");
    let group = cause_group(&groups[0]);
    let fix = phone_to_e164();
    let preview = api::fix_and_replay_preview(app, &group, &fix, "ops").await.unwrap();
    assert_eq!((preview.fix.changed, preview.fix.unchanged), (6, 1));
    let replay = preview.replay.expect("a replay of the changed leads");
    assert_eq!((replay.eligible, replay.by_target.get("crm").copied()), (6, Some(6)));
    let request = FixAndReplayRequest {
        selection: group.clone(),
        fix: fix.clone(),
        reason: "CRM wants E.164".into(),
        expected_changed: 6,
        options: ReplayOptions { canary: Some(2), rate_per_second: Some(50.0) },
    };

    // "No" in the dialog changes nothing.
    let no = Arc::new(ScriptedConfirm::always(false));
    let refused = api::fix_and_replay_confirmed(app, &request, "ops", no).await;
    assert!(matches!(refused, Err(ApiError::Cancelled)), "{refused:?}");
    let parked = api::dead_letters(app, &DeadLetterFilter::default()).await.unwrap().items;
    assert!(parked.iter().all(|d| !d.fixed), "nothing fixed after a no");
    // A count the person did not see is refused (the browser sends the count it showed).
    let stale = FixAndReplayRequest { expected_changed: 5, ..request.clone() };
    assert!(matches!(api::fix_and_replay(app, &stale, "ops").await, Err(ApiError::Conflict(_))));

    // "Yes", once: the one question names the field, the count, the target, the canary and the reason.
    let yes = Arc::new(ScriptedConfirm::always(true));
    let receipt = api::fix_and_replay_confirmed(app, &request, "ops", yes.clone()).await.unwrap();
    assert_eq!(receipt.fixed, 6);
    let asked = yes.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "one confirmation: {asked:?}");
    for words in ["Change `phone` in 6 leads", "to crm", "2 go first", "CRM wants E.164"] {
        assert!(asked[0].contains(words), "{words:?} missing from {:?}", asked[0]);
    }
    wait_replay(app, "the fixed leads are delivered", Duration::from_secs(30), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
    assert_eq!((p.total, p.delivered, p.failed_same_reason, p.failed_new_reason, p.fixed), (6, 6, 0, 0, 6));
    assert_eq!((p.actor.as_str(), p.reason.as_str()), ("ops", "CRM wants E.164"));
    assert_eq!(setup.crm.stats().records, 6, "the strict CRM took the six fixed leads, once each");
    let report = api::replay_report(app, receipt.replay_id, None).await.unwrap();
    assert_eq!(report.len(), 6);
    assert!(report.iter().all(|item| item.fixed), "{report:#?}");
    // The lead the fix could not help is still parked, unfixed, and was not sent again.
    let left = api::dead_letters(app, &DeadLetterFilter::default()).await.unwrap().items;
    assert_eq!(left.iter().map(|d| (d.source_ref.as_str(), d.fixed)).collect::<Vec<_>>(), [("f-x", false)]);
    assert_eq!(left[0].attempts, 1);
    setup.server.shutdown().await.unwrap();
}

/// During an incident dead letters of one cause keep arriving while the person looks at the preview. What they
/// confirm is what was counted: the selection pinned to the preview's `as_of` fixes and replays exactly those
/// leads, and the newcomer stays parked for the next look (unpinned, the grown group no longer matches the count
/// the person saw, and the server refuses rather than act on leads nobody counted).
#[tokio::test]
async fn a_cause_group_that_grows_after_its_preview_is_fixed_and_replayed_as_counted() {
    let setup = start("").await;
    let app = &setup.server.app;
    let http = reqwest::Client::new();
    setup.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });
    let post = |id: String, phone: String| {
        let http = http.clone();
        let url = format!("http://{}/ingest/plain", setup.server.addr);
        async move { http.post(url).json(&json!({"id": id, "phone": phone})).send().await.unwrap() }
    };
    for i in 0..3 {
        post(format!("g-{i}"), format!("0151 {:04} {:04}", 5000 + i, 6000 + i)).await;
    }
    wait_for("3 dead letters", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 3
    })
    .await;
    let groups = api::dead_letter_groups(app, &DeadLetterFilter::default()).await.unwrap();
    let group = cause_group(&groups[0]);
    let fix = phone_to_e164();
    let fix_preview = api::fix_and_replay_preview(app, &group, &fix, "ops").await.unwrap();
    let replay_preview = api::replay_preview(app, &group).await.unwrap();
    assert_eq!((fix_preview.fix.changed, replay_preview.eligible), (3, 3));

    // A fourth lead of the same cause is parked while the person reads the preview.
    post("g-late".into(), "0151 7000 8000".into()).await;
    wait_for("the fourth dead letter", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 4
    })
    .await;

    // The plain replay of the group, as counted: three.
    let unpinned = ReplayRequest {
        selection: group.clone(),
        expected: 3,
        reason: "as counted".into(),
        options: Default::default(),
    };
    assert!(
        matches!(api::replay(app, &unpinned, "ops").await, Err(ApiError::Conflict(_))),
        "the grown group is not what was counted"
    );
    let mut replay_options = ReplayOptions { canary: Some(0), rate_per_second: Some(50.0) };
    let pinned =
        ReplayRequest { selection: group.as_of(replay_preview.as_of), options: replay_options.clone(), ..unpinned };
    let receipt = api::replay(app, &pinned, "ops").await.unwrap();
    assert_eq!(receipt.queued, 3);
    wait_replay(app, "the replay of three ends", Duration::from_secs(30), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    let left = api::dead_letters(app, &DeadLetterFilter::default()).await.unwrap().items;
    let late = left.iter().find(|d| d.source_ref == "g-late").expect("the newcomer is still parked");
    assert_eq!(late.attempts, 1, "the newcomer was not sent again");

    // The three failed again (the CRM still wants E.164); now fix and replay them as counted, again with a
    // newcomer parked after the preview.
    wait_for("4 open dead letters again", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 4
    })
    .await;
    let fix_preview = api::fix_and_replay_preview(app, &group, &fix, "ops").await.unwrap();
    assert_eq!(fix_preview.fix.changed, 4);
    post("g-later".into(), "0151 7100 8100".into()).await;
    wait_for("the fifth dead letter", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 5
    })
    .await;
    replay_options.canary = Some(1);
    let request = FixAndReplayRequest {
        selection: group.clone(),
        fix,
        reason: "CRM wants E.164".into(),
        expected_changed: 4,
        options: replay_options,
    };
    assert!(matches!(api::fix_and_replay(app, &request, "ops").await, Err(ApiError::Conflict(_))));
    let request = FixAndReplayRequest { selection: group.as_of(fix_preview.as_of), ..request };
    let receipt = api::fix_and_replay(app, &request, "ops").await.unwrap();
    assert_eq!(receipt.fixed, 4);
    wait_replay(app, "the fixed four are delivered", Duration::from_secs(30), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
    assert_eq!((p.total, p.delivered), (4, 4));
    assert_eq!(setup.crm.stats().records, 4, "the four counted leads, once each");
    let left = api::dead_letters(app, &DeadLetterFilter::default()).await.unwrap().items;
    assert_eq!(left.iter().map(|d| (d.source_ref.as_str(), d.fixed)).collect::<Vec<_>>(), [("g-later", false)]);
    setup.server.shutdown().await.unwrap();
}

/// A time-sensitive step runs its fallback for a lead that is too old by the time the worker gets to it — held
/// back by a pause or an outage, or recovered long after it was made (its `created_time`) — while a lead in time
/// gets the step itself. Nothing is sent to the step for the old ones, and no attempt is used.
#[tokio::test]
async fn a_lead_too_old_for_a_time_sensitive_step_runs_its_fallback_when_the_worker_gets_to_it() {
    let clock = leadline::api::Clock::manual(Utc::now());
    let setup = start_with("", Some(clock.clone())).await;
    let app = &setup.server.app;
    let post = |body: serde_json::Value| {
        reqwest::Client::new().post(format!("http://{}/ingest/form", setup.server.addr)).json(&body).send()
    };
    api::set_target_paused(app, "sms", true, "ops").await.unwrap();
    assert_eq!(post(json!({"id": "early"})).await.unwrap().status(), 202);
    // Two hours pass with the SMS step paused; then a fresh lead, and one recovered two hours after it was made.
    clock.advance(chrono::Duration::hours(2));
    let made = (clock.now() - chrono::Duration::hours(2)).to_rfc3339();
    assert_eq!(post(json!({"id": "fresh"})).await.unwrap().status(), 202);
    assert_eq!(post(json!({"id": "recovered", "created_time": made})).await.unwrap().status(), 202);
    let steps = || async { app.store.deliveries().await.unwrap() };
    wait_for("the CRM steps", Duration::from_secs(10), async || {
        steps().await.iter().filter(|d| d.target == "crm" && d.state == "delivered").count() == 3
    })
    .await;
    api::set_target_paused(app, "sms", false, "ops").await.unwrap();
    wait_for("every step delivered", Duration::from_secs(10), async || {
        steps().await.iter().all(|d| d.state == "delivered")
    })
    .await;
    let second: std::collections::BTreeMap<String, (String, Option<String>)> = steps()
        .await
        .into_iter()
        .filter(|d| d.step_index == 1)
        .map(|d| (d.source_ref.clone(), (d.target.clone(), d.fallback_of.clone())))
        .collect();
    let fallback = ("call_task".to_string(), Some("sms".to_string()));
    assert_eq!(second["early"], fallback, "held back two hours");
    assert_eq!(second["recovered"], fallback, "made two hours ago");
    assert_eq!(second["fresh"], ("sms".to_string(), None));
    // One attempt each at the CRM and at the step that ran: nothing was sent to the SMS step for the old leads.
    let attempts = app.store.all_attempts().await.unwrap();
    let ids: std::collections::BTreeMap<i64, String> =
        steps().await.into_iter().map(|d| (d.id, d.source_ref)).collect();
    let sent: Vec<&str> = attempts.iter().map(|a| ids[&a.delivery_id].as_str()).collect();
    for lead in ["early", "recovered", "fresh"] {
        assert_eq!(sent.iter().filter(|r| **r == lead).count(), 2, "{lead}: {sent:?}");
    }
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_leads_run_the_fallback_of_a_time_sensitive_step_and_the_preview_says_so() {
    let setup = start("").await;
    let app = &setup.server.app;
    // 8 leads of `form`: delivered to the CRM, their SMS step dead; 4 arrived 2 hours ago, 4 just now — of which
    // 2 were made 2 hours ago (recovered late: their `created_time` says so).
    let now = Utc::now();
    let leads: Vec<LeadFixture> = (0..8i64)
        .map(|i| {
            let received = if i < 4 { now - chrono::Duration::hours(2) } else { now - chrono::Duration::minutes(1) };
            let payload = if i >= 6 {
                json!({"id": format!("f-{i}"), "created_time": (now - chrono::Duration::hours(2)).to_rfc3339()})
            } else {
                json!({"id": format!("f-{i}")})
            };
            LeadFixture {
                source: "form".into(),
                source_ref: format!("f-{i}"),
                received_at: received,
                payload,
                purged: false,
                steps: vec![
                    StepFixture {
                        target: "crm".into(),
                        attempts: 0,
                        state: StepFixtureState::Delivered { at: received, result: json!({"crm_id": "c-1"}) },
                    },
                    StepFixture {
                        target: "sms".into(),
                        attempts: 0,
                        state: StepFixtureState::Dead {
                            at: received,
                            class: ErrorClass::Transient,
                            http_status: Some(503),
                            reason: "HTTP 503: down".into(),
                            field: None,
                            resolution: "open".parse().unwrap(),
                        },
                    },
                ],
            }
        })
        .collect();
    app.store.insert_lead_fixtures(&leads).await.unwrap();
    let selection = class("transient");
    let preview = api::replay_preview(app, &selection).await.unwrap();
    assert_eq!(preview.eligible, 8);
    assert_eq!(preview.fallbacks.len(), 1);
    let f = &preview.fallbacks[0];
    assert_eq!((f.target.as_str(), f.fallback.as_str(), f.max_lead_age_minutes, f.count), ("sms", "call_task", 30, 6));
    assert_eq!(
        preview.summary,
        "Replay 8 leads to sms? 6 leads are older than 30 min for sms: they get call_task instead."
    );

    let request =
        ReplayRequest { selection, expected: 8, reason: "SMS provider back".into(), options: Default::default() };
    let receipt = api::replay(app, &request, "ops").await.unwrap();
    wait_replay(app, "the replay finishes", Duration::from_secs(30), || async {
        api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
    assert_eq!((p.delivered, p.fallbacks), (8, 6));
    let stats = setup.crm.stats();
    assert_eq!((stats.tasks, stats.notifications), (6, 2), "old leads got a call task, new ones their SMS");
    let steps = app.store.deliveries().await.unwrap();
    let moved = steps
        .iter()
        .filter(|d| {
            d.target == "call_task" && d.fallback_of.as_deref() == Some("sms") && d.state.as_str() == "delivered"
        })
        .count();
    assert_eq!(moved, 6);
    // The tallies followed the move.
    let health = api::health(app).await.unwrap().queue;
    let delivered = |t: &str| health.targets.iter().find(|x| x.target == t).unwrap().delivered;
    assert_eq!((delivered("sms"), delivered("call_task")), (2, 6));
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolved_by_hand_dead_letters_keep_their_audit_and_lose_their_data_after_retention() {
    let setup = start("").await;
    let app = &setup.server.app;
    seed_dead_letters(&setup, 10, 5).await;
    let pick = ReplaySelection { ids: Some(vec![1, 2, 3]), filter: None };
    let no_note = ResolveRequest {
        selection: pick.clone(),
        resolution: "discarded".parse().unwrap(),
        note: " ".into(),
        expected: None,
    };
    assert!(matches!(api::resolve_dead_letters(app, &no_note, "ops").await, Err(ApiError::BadRequest(_))));
    let discard = ResolveRequest { note: "spam from a bot".into(), ..no_note };
    assert_eq!(api::resolve_dead_letters(app, &discard, "ops").await.unwrap(), 3);
    let fixed = ResolveRequest {
        selection: ReplaySelection { ids: Some(vec![4]), filter: None },
        resolution: "fixed_manually".parse().unwrap(),
        note: "entered in HubSpot by Anna".into(),
        expected: Some(1),
    };
    assert_eq!(api::resolve_dead_letters(app, &fixed, "anna").await.unwrap(), 1);
    let health = api::health(app).await.unwrap().queue.overall;
    assert_eq!(health.dead_open, 6);
    let view = api::dead_letter(app, 4).await.unwrap().detail;
    assert_eq!(view.letter.resolution.as_str(), "fixed_manually");
    assert_eq!(view.letter.resolved_by.as_deref(), Some("anna"));
    assert_eq!(view.letter.resolution_note.as_deref(), Some("entered in HubSpot by Anna"));

    // Retention (30 days by default): nothing is purged before, the four after; the rows and statistics stay.
    let store = &app.store;
    assert_eq!(leadline::replay::purge_resolved(store, 30, Utc::now() + chrono::Duration::days(29)).await.unwrap(), 0);
    assert_eq!(leadline::replay::purge_resolved(store, 30, Utc::now() + chrono::Duration::days(31)).await.unwrap(), 4);
    let view = api::dead_letter(app, 1).await.unwrap().detail;
    assert!(view.letter.purged);
    assert_eq!(view.payload, json!({}));
    assert_eq!(view.letter.reason, "HTTP 401: token expired");
    let open = api::dead_letter(app, 5).await.unwrap().detail;
    assert!(!open.letter.purged, "open dead letters keep their data");
    let all = DeadLetterFilter { resolution: Some("all".parse().unwrap()), ..Default::default() };
    assert_eq!(api::dead_letters(app, &all).await.unwrap().items.len(), 10);
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_with_auto_replay_gets_its_dead_letters_back_once_it_recovers() {
    let setup = start("auto_replay = true").await;
    let app = &setup.server.app;
    let http = reqwest::Client::new();
    setup.crm.set_behaviour(Behaviour { fail_with: Some(403), ..Default::default() });
    for i in 0..12 {
        http.post(format!("http://{}/ingest/plain", setup.server.addr))
            .json(&json!({"id": format!("a-{i}")}))
            .send()
            .await
            .unwrap();
    }
    wait_for("12 dead letters", Duration::from_secs(20), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 12
    })
    .await;
    // The permission is granted: the next lead goes through, and Leadline replays the 12 by itself.
    setup.crm.set_behaviour(Behaviour::default());
    http.post(format!("http://{}/ingest/plain", setup.server.addr)).json(&json!({"id": "fresh"})).send().await.unwrap();
    wait_for("the auto-replay delivers all", Duration::from_secs(60), || async {
        let h = api::health(app).await.unwrap().queue.overall;
        h.dead_open == 0 && h.delivered == 13
    })
    .await;
    let replays = api::replays(app).await.unwrap();
    assert_eq!(replays.len(), 1);
    let r = &replays[0];
    assert!(r.auto);
    assert_eq!(r.actor, "Leadline (auto-replay)");
    assert_eq!(r.total, 12);
    assert_eq!(setup.crm.stats().records, 13);
    wait_for("the auto-replay alert resolves with the result", Duration::from_secs(10), || async {
        api::alerts(app)
            .await
            .unwrap()
            .iter()
            .any(|a| a.kind.as_str() == "auto_replay" && a.state.as_str() == "resolved")
    })
    .await;
    let alert = api::alerts(app).await.unwrap().into_iter().find(|a| a.kind.as_str() == "auto_replay").unwrap();
    assert_eq!(alert.title, "Auto-replay: 12 leads to crm are being sent again");
    assert_eq!(
        alert.resolution_note.as_deref(),
        Some("12 delivered, 0 failed again with the same reason, 0 with a new reason")
    );
    setup.server.shutdown().await.unwrap();
}

/// A canary is a part of what is replayed, whoever asks for it: the configuration's 10 (what an auto-replay
/// asks for) or a person's 50 for three leads becomes two, and two leads get none — in the replay's record and
/// in its audit.
#[tokio::test]
async fn a_canary_never_exceeds_the_selection() {
    let setup = start("").await;
    let app = &setup.server.app;
    seed_dead_letters(&setup, 8, 10).await;
    let ids = |ids: &[i64]| ReplaySelection { ids: Some(ids.to_vec()), filter: None };
    for (selection, asked, canary, words) in [
        (ids(&[1, 2, 3]), None, 2, "3 leads queued by ops: check; canary of 2 first"),
        (ids(&[4, 5, 6]), Some(50), 2, "3 leads queued by ops: check; canary of 2 first"),
        (ids(&[7, 8]), None, 0, "2 leads queued by ops: check; no canary"),
    ] {
        let preview = api::replay_preview(app, &selection).await.unwrap();
        let request = ReplayRequest {
            selection,
            expected: preview.eligible,
            reason: "check".into(),
            options: ReplayOptions { canary: asked, rate_per_second: Some(50.0) },
        };
        let receipt = api::replay(app, &request, "ops").await.unwrap();
        let p = api::replay_progress(app, receipt.replay_id).await.unwrap();
        assert_eq!((p.total, p.canary_size), (preview.eligible, canary), "asked for {asked:?}");
        let started = p.events.iter().find(|e| e.kind.as_str() == "started").expect("a started event");
        assert!(started.detail.starts_with(words), "{:?}", started.detail);
    }
    wait_for("all eight delivered", Duration::from_secs(30), || async {
        api::health(app).await.unwrap().queue.overall.dead_open == 0
    })
    .await;
    setup.server.shutdown().await.unwrap();
}
