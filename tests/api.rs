//! The `api` layer the desktop commands and HTTP routes adapt: replay with a scripted confirmation, alerts,
//! pause and resume, browser-mode protection.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use leadline::api::{self, ApiError, ReplayRequest, ScriptedConfirm};
use leadline::demo::mock_crm::Behaviour;
use leadline::dlq::DeadLetterFilter;
use leadline::replay::ReplaySelection;
use reqwest::StatusCode;
use serde_json::json;

/// Dead letters of a configuration problem: the CRM refuses the integration a permission (403).
async fn dead_letters_from_missing_permission(app: &TestApp, n: usize) {
    app.crm.set_behaviour(Behaviour { fail_with: Some(403), ..Default::default() });
    for i in 0..n {
        assert_eq!(app.post_plain(&json!({"id": format!("E-{i}")})).await, StatusCode::ACCEPTED);
    }
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open, n as i64);
    app.crm.set_behaviour(Behaviour::default());
}

/// Waits until the background runner has sent back every item of the replay and each has finished. The runner
/// announces each committed step, its finish included, on the live channel: the progress is read again on each
/// announcement, not on a timer.
async fn wait_replay_done(a: &leadline::api::App, id: i64) {
    let mut live = a.live.subscribe();
    tokio::time::timeout(Duration::from_secs(20), async {
        while !api::replay_progress(a, id).await.unwrap().done {
            let _ = live.recv().await;
        }
    })
    .await
    .expect("the replay finished");
}

fn class_filter(class: &str) -> ReplaySelection {
    ReplaySelection {
        ids: None,
        filter: Some(DeadLetterFilter { class: Some(class.parse().unwrap()), ..Default::default() }),
    }
}

#[tokio::test]
async fn a_replay_confirmed_in_the_dialog_requeues_and_delivers_and_a_no_changes_nothing() {
    let app = spawn().await;
    dead_letters_from_missing_permission(&app, 12).await;
    let a = &app.server.app;
    let selection = class_filter("permanent_config");

    // The operator says no: nothing changes.
    let no = Arc::new(ScriptedConfirm::always(false));
    let r =
        api::replay_confirmed(a, &selection, "scope granted", &Default::default(), "desktop user `ops`", no.clone())
            .await;
    assert!(matches!(r, Err(ApiError::Cancelled)), "{r:?}");
    assert_eq!(app.health().await.overall.dead_open, 12);
    // The dialog said exactly what would happen.
    let asked = no.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].starts_with("Replay 12 leads to crm?"), "{}", asked[0]);
    assert!(asked[0].contains("scope granted"), "{}", asked[0]);

    // The operator says yes: all 12 go through normal delivery again and arrive.
    let yes = Arc::new(ScriptedConfirm::always(true));
    let receipt = api::replay_confirmed(a, &selection, "scope granted", &Default::default(), "desktop user `ops`", yes)
        .await
        .unwrap();
    assert_eq!(receipt.queued, 12);
    wait_replay_done(a, receipt.replay_id).await;
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!((h.overall.dead_open, h.overall.delivered), (0, 12));
    assert_eq!(app.crm.stats().records, 12);

    let progress = api::replay_progress(a, receipt.replay_id).await.unwrap();
    assert_eq!((progress.total, progress.delivered, progress.in_progress), (12, 12, 0));
    assert!(progress.done);
    assert_eq!(progress.actor, "desktop user `ops`");

    // Each lead's history tells who replayed it, why, and what it was before; its attempts show the replay.
    let view = api::dead_letter(a, 1).await.unwrap();
    assert_eq!(view.replays.len(), 1);
    assert_eq!(view.replays[0].reason, "scope granted");
    assert_eq!(view.replays[0].prior_class.map(|c| c.as_str()), Some("permanent_config"));
    assert_eq!(view.detail.letter.resolution.as_str(), "replayed");
    assert!(view.crm_record.is_some());
    let last = view.detail.attempts_timeline.last().unwrap();
    assert_eq!((last.outcome.as_str(), last.trigger.as_str()), ("delivered", "manual"));
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_preview_counts_what_the_replay_does_and_a_changed_selection_is_refused() {
    let app = spawn().await;
    dead_letters_from_missing_permission(&app, 5).await;
    let a = &app.server.app;
    let ids = ReplaySelection { ids: Some(vec![1, 2, 999]), filter: None };
    let preview = api::replay_preview(a, &ids).await.unwrap();
    assert_eq!((preview.eligible, preview.not_eligible), (2, 1));
    assert_eq!(preview.by_target.get("crm"), Some(&2));
    assert_eq!(preview.reasons.unknown, 1);
    assert!(preview.summary.ends_with("Skipped: 1 unknown."), "{}", preview.summary);

    // Someone else replays lead 1 meanwhile: the stale count is refused, nothing happens.
    let only_one = ReplayRequest {
        selection: ReplaySelection { ids: Some(vec![1]), filter: None },
        expected: 1,
        reason: "x".into(),
        options: Default::default(),
    };
    api::replay(a, &only_one, "other operator").await.unwrap();
    let stale = ReplayRequest {
        selection: ids.clone(),
        expected: preview.eligible,
        reason: "y".into(),
        options: Default::default(),
    };
    let r = api::replay(a, &stale, "me").await;
    assert!(matches!(r, Err(ApiError::Conflict(_))), "{r:?}");
    let again = api::replay_preview(a, &ids).await.unwrap();
    assert_eq!(again.eligible, 1);
    assert_eq!((again.reasons.queued_in_another_replay, again.reasons.unknown), (1, 1));
    let request = ReplayRequest { selection: ids, expected: 1, reason: "y".into(), options: Default::default() };
    let r = api::replay(a, &request, "me").await.unwrap();
    assert_eq!(r.queued, 1);
    // An empty selection is a clear error, not "replay everything".
    let r = api::replay_preview(a, &ReplaySelection::default()).await;
    assert!(matches!(r, Err(ApiError::BadRequest(_))), "{r:?}");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_configuration_error_opens_one_alert_that_can_be_acknowledged_and_resolves_by_itself() {
    let app = spawn().await;
    dead_letters_from_missing_permission(&app, 8).await;
    let a = &app.server.app;
    // The monitor raises it from the worker's events; eight dead letters are one incident.
    let alert = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let alerts = api::alerts(a).await.unwrap();
            if let Some(x) = alerts.into_iter().find(|x| x.kind.as_str() == "permanent_config") {
                if x.occurrences == 8 {
                    return x;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("one permanent_config alert with 8 occurrences");
    assert_eq!(api::alerts(a).await.unwrap().iter().filter(|x| x.kind.as_str() == "permanent_config").count(), 1);
    assert_eq!(alert.state.as_str(), "open");
    assert_eq!(alert.key, "crm");

    let acked = api::acknowledge_alert(a, alert.id, "desktop user `ops`").await.unwrap();
    assert_eq!(acked.state.as_str(), "acknowledged");
    assert_eq!(acked.acknowledged_by.as_deref(), Some("desktop user `ops`"));
    assert!(matches!(api::acknowledge_alert(a, 9999, "x").await, Err(ApiError::NotFound(_))));

    // Fix and replay: once no configuration dead letter is open, the alert resolves by itself.
    let yes = Arc::new(ScriptedConfirm::always(true));
    let r = api::replay_confirmed(a, &class_filter("permanent_config"), "fixed", &Default::default(), "ops", yes)
        .await
        .unwrap();
    wait_replay_done(a, r.replay_id).await;
    let resolved = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let x = api::alerts(a).await.unwrap().into_iter().find(|x| x.id == alert.id).unwrap();
            if x.state.as_str() == "resolved" {
                return x;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the alert resolves when the cause clears");
    assert!(resolved.resolution_note.unwrap().contains("no configuration dead letter"));
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_paused_target_gets_nothing_until_resumed() {
    let app = spawn().await;
    let a = &app.server.app;
    let t = api::set_target_paused(a, "crm", true, "ops").await.unwrap();
    assert!(t.paused);
    assert_eq!(t.paused_by.as_deref(), Some("ops"));
    for i in 0..5 {
        app.post_plain(&json!({"id": format!("P-{i}")})).await;
    }
    app.worker_passes(5).await;
    assert_eq!(app.crm.stats().requests, 0, "nothing is sent to a paused target");
    assert_eq!(app.health().await.overall.pending, 5);
    assert!(api::targets(a).await.unwrap().iter().any(|t| t.name == "crm" && t.paused));
    assert!(matches!(api::set_target_paused(a, "nope", true, "ops").await, Err(ApiError::NotFound(_))));

    api::set_target_paused(a, "crm", false, "ops").await.unwrap();
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.delivered, 5);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn browser_mode_needs_the_token() {
    let app = spawn().await;
    let token = app.server.new_token.clone().expect("first start creates the token");
    let url = app.url("/api/targets/crm/pause");
    let no_token = app.http.post(&url).send().await.unwrap();
    assert_eq!(no_token.status(), StatusCode::UNAUTHORIZED);
    let wrong = app.http.post(&url).bearer_auth("guess").send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let ok = app.http.post(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let body: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(body["paused"], true);
    assert_eq!(body["paused_by"], "browser token `default`");
    // Reads need the token too, even on loopback; unknown API paths are JSON 404s.
    assert_eq!(app.http.get(app.url("/api/health")).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.api_get("/api/health").send().await.unwrap().status(), StatusCode::OK);
    let missing = app.http.get(app.url("/api/nope")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    // The token is shown once: a restart on the same database does not make a new one.
    assert_eq!(leadline::api::http::ensure_token(&app.server.app.store, chrono::Utc::now()).await.unwrap(), None);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_live_feed_starts_with_the_current_health() {
    let app = spawn().await;
    let mut r = app.api_get("/api/events").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let chunk = tokio::time::timeout(Duration::from_secs(5), r.chunk()).await.unwrap().unwrap().unwrap();
    let text = String::from_utf8_lossy(&chunk);
    assert!(text.starts_with("data: {\"kind\":\"health\""), "{text}");
    // An open live feed does not hold up shutdown: the stream ends when the server stops.
    let started = std::time::Instant::now();
    app.server.shutdown().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(4), "shutdown waited {:?} for the feed", started.elapsed());
    // Events already in flight may still arrive; then the stream ends.
    let ended =
        tokio::time::timeout(Duration::from_secs(2), async { while let Ok(Some(_)) = r.chunk().await {} }).await;
    assert!(ended.is_ok(), "the live feed did not end after shutdown");
}

/// A replay never duplicates: a step whose earlier attempt reached the CRM without an answer keeps its
/// `Idempotency-Key` (the CRM answers it with the stored result: one record); a step whose every answer was a
/// definite error gets a fresh key, so the CRM cannot answer it with a stored error.
#[tokio::test]
async fn a_replay_after_an_unanswered_attempt_keeps_its_key_and_creates_nothing_twice() {
    let app = spawn_with(|crm| {
        idempotent_crm(crm)
            .replace("timeout_ms = 500", "timeout_ms = 300")
            .replace("max_attempts = 30", "max_attempts = 1")
    })
    .await;
    let a = &app.server.app;
    // The CRM stores the lead, then answers too late: the attempt has no answer, and the only attempt is used.
    app.crm.set_behaviour(Behaviour { hang_after_write_ratio: 1.0, hang_ms: 600, ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "committed"})).await, StatusCode::ACCEPTED);
    app.wait_settled(Duration::from_secs(10)).await;
    // The CRM refuses the next lead's data: every answer is a definite error.
    app.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "refused", "phone": "0151 1234"})).await, StatusCode::ACCEPTED);
    let h = app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(h.overall.dead_open, 2);
    assert_eq!(app.crm.records_for("plain:committed"), 1, "the unanswered create was written");
    assert_eq!(app.crm.records_for("plain:refused"), 0);

    // Both are replayed once the CRM is healthy (the refused one with its phone fixed by the CRM's new rules).
    app.crm.set_behaviour(Behaviour::default());
    let all = ReplayRequest {
        selection: ReplaySelection { ids: None, filter: Some(DeadLetterFilter::default()) },
        expected: 2,
        reason: "CRM healthy again".into(),
        options: leadline::replay::ReplayOptions { canary: Some(0), rate_per_second: Some(100.0) },
    };
    let receipt = api::replay(a, &all, "ops").await.unwrap();
    wait_replay_done(a, receipt.replay_id).await;
    app.wait_settled(Duration::from_secs(10)).await;

    assert_eq!(app.crm.records_for("plain:committed"), 1, "not created twice");
    assert_eq!(app.crm.keys_for("plain:committed"), vec!["plain:committed:crm"; 2], "the same key both times");
    assert_eq!(app.crm.records_for("plain:refused"), 1);
    assert_eq!(
        app.crm.keys_for("plain:refused"),
        vec!["plain:refused:crm".to_string(), "plain:refused:crm:replay-1".to_string()],
        "a fresh key after definite errors only"
    );
    app.server.shutdown().await.unwrap();
}

/// The dead letters of a filter and a replay's report as CSV files over HTTP: behind the token, every match
/// (not one page), reasons masked, one row per lead.
#[tokio::test]
async fn dead_letters_and_a_replay_report_export_as_csv() {
    let app = spawn().await;
    dead_letters_from_missing_permission(&app, 3).await;
    assert_eq!(
        app.http.get(app.url("/api/export/dead-letters")).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let answer = app.api_get("/api/export/dead-letters?class=permanent_config&target=crm").send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["content-type"], "text/csv; charset=utf-8");
    let disposition = answer.headers()["content-disposition"].to_str().unwrap().to_string();
    assert!(disposition.starts_with("attachment; filename=\"leadline-dead-letters-"), "{disposition}");
    let text = answer.text().await.unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("delivery_id,parked_at,received_at,source,lead_id,target,class,"));
    let mut ids: Vec<&str> = lines.map(|l| l.split(',').nth(4).unwrap()).collect();
    ids.sort();
    assert_eq!(ids, ["E-0", "E-1", "E-2"]);
    let none = app.api_get("/api/export/dead-letters?class=ambiguous").send().await.unwrap().text().await.unwrap();
    assert_eq!(none.lines().count(), 1, "only the header: {none}");

    let a = &app.server.app;
    let yes = Arc::new(ScriptedConfirm::always(true));
    let receipt = api::replay_confirmed(
        a,
        &class_filter("permanent_config"),
        "permission granted",
        &Default::default(),
        "ops",
        yes,
    )
    .await
    .unwrap();
    wait_replay_done(a, receipt.replay_id).await;
    let report = app.api_get(&format!("/api/export/replays/{}", receipt.replay_id)).send().await.unwrap();
    assert_eq!(report.status(), StatusCode::OK);
    let text = report.text().await.unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.lines().skip(1).all(|l| l.contains(",delivered,")), "{text}");
    let missing = app.api_get("/api/export/replays/999").send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    app.server.shutdown().await.unwrap();
}
