//! The `Idempotency-Key` a keyed target sends, asserted at the CRM: its exact value, the same value on every
//! retry of a step, and a new value only after a replay whose earlier answers were all definite errors.
//!
//! The mock CRM deduplicates keyed creates by the key alone (a new key makes a new record even for an external id
//! it already holds), so a wrong key shows up as a second record, not only as a wrong string. The `crm` target
//! here has no search URL: nothing but the key protects against a repeat. Each test names the mutation of the
//! production code it catches.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use leadline::api::{self, ReplayRequest};
use leadline::delivery::worker::WorkerEvent;
use leadline::demo::mock_crm::Behaviour;
use leadline::dlq::DeadLetterFilter;
use leadline::model::ErrorClass;
use leadline::replay::{ReplayOptions, ReplaySelection};
use reqwest::StatusCode;
use serde_json::json;
use tokio::sync::broadcast;

/// `crm` (and `crm_b`, for a route with two keyed steps) with only the key to protect against a repeat; retries
/// come quickly and `max_attempts` is small, so a step that keeps failing becomes a dead letter in well under a
/// second.
fn keyed_crm(max_attempts: u32) -> impl Fn(SocketAddr) -> String {
    move |crm| {
        let target = |name: &str| {
            format!(
                r#"
[targets.{name}]
url = "http://{crm}/crm/leads"
strategy = "idempotency_key"
timeout_ms = 200
backoff = {{ base_ms = 10, cap_ms = 40, max_attempts = {max_attempts}, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 100, failure_ratio = 0.0 }}
"#
            )
        };
        format!("{}{}", target("crm"), target("crm_b"))
    }
}

const TWO_KEYED_STEPS: &str = r#"
[sources.twice]
route = ["crm", "crm_b"]
"#;

type Events = broadcast::Receiver<WorkerEvent>;

fn events(app: &TestApp) -> Events {
    app.server.app.worker.as_ref().expect("the test server runs a worker").events.subscribe()
}

/// Waits for the step of `target` to be delivered or dead-lettered; returns `None` when delivered, else the
/// dead letter's class. The worker says so on its event channel; it does so before the completion is committed,
/// so the queue is then awaited too (at once settled in practice) before the test reads the database.
async fn outcome(app: &TestApp, events: &mut Events, target: &str) -> Option<ErrorClass> {
    let class = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Ok(WorkerEvent::Delivered { target: t, .. }) if t == target => return None,
                Ok(WorkerEvent::DeadLettered { target: t, class, .. }) if t == target => return Some(class),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => panic!("missed worker events"),
                Err(e) => panic!("worker events ended: {e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no outcome for a step of {target} within 10 s"));
    app.wait_settled(Duration::from_secs(10)).await;
    class
}

/// Replays every open dead letter (no canary, no pacing to speak of).
async fn replay_all(app: &TestApp, expected: i64) {
    let request = ReplayRequest {
        selection: ReplaySelection { ids: None, filter: Some(DeadLetterFilter::default()) },
        expected,
        reason: "test".into(),
        options: ReplayOptions { canary: Some(0), rate_per_second: Some(1000.0) },
    };
    let receipt = api::replay(&app.server.app, &request, "ops").await.unwrap();
    assert_eq!(receipt.queued, expected);
}

/// The key is `source:source_ref:target`, exactly, from the source's own id (the `id` field here).
/// Catches: a random or time-based key; a key missing the source, the event id or the target; the external id
/// (`source:source_ref`) sent as the key; a replay suffix on a step that was never replayed.
#[tokio::test]
async fn the_key_is_source_event_id_and_target() {
    let app = spawn_with_extra(keyed_crm(3), TWO_KEYED_STEPS).await;
    let mut events = events(&app);
    assert_eq!(app.post_plain(&json!({"id": "K-1"})).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, None);
    assert_eq!(app.crm.keys_for("plain:K-1"), vec!["plain:K-1:crm"]);

    assert_eq!(app.post_webform(&lead("W-1")).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, None);
    assert_eq!(app.crm.keys_for("webform:W-1"), vec!["webform:W-1:crm"]);
    assert_eq!(app.crm.records_for("webform:W-1"), 1);
    app.server.shutdown().await.unwrap();
}

/// Two keyed steps of one lead are two different requests: each gets its own key, and the CRM makes a record
/// for each. Catches: a key without the target (the second step would get the first step's stored answer, and
/// its request would never be carried out: one record instead of two).
#[tokio::test]
async fn two_keyed_steps_of_one_lead_have_two_keys() {
    let app = spawn_with_extra(keyed_crm(3), TWO_KEYED_STEPS).await;
    let mut events = events(&app);
    assert_eq!(app.http.post(app.url("/ingest/twice")).json(&json!({"id": "T-1"})).send().await.unwrap().status(), 202);
    assert_eq!(outcome(&app, &mut events, "crm_b").await, None);
    assert_eq!(app.crm.keys_for("twice:T-1"), vec!["twice:T-1:crm", "twice:T-1:crm_b"]);
    assert_eq!(app.crm.records_for("twice:T-1"), 2, "each step's request was carried out");
    app.server.shutdown().await.unwrap();
}

/// Every retry of a step sends the key of its first attempt. Three 500s use the three attempts; the dead letter
/// says so. Catches: an attempt number, a time or a random part in the key.
#[tokio::test]
async fn every_retry_of_a_step_sends_the_same_key() {
    let app = spawn_with(keyed_crm(3)).await;
    let mut events = events(&app);
    app.crm.set_behaviour(Behaviour { fail_with: Some(500), ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "R-1"})).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, Some(ErrorClass::Transient));
    assert_eq!(app.crm.keys_for("plain:R-1"), vec!["plain:R-1:crm"; 3]);
    app.server.shutdown().await.unwrap();
}

/// The CRM stores the lead and answers after the timeout; the retries with the same key meet "still being
/// processed" (409) and then the stored answer: one record, every attempt with the one key. Catches: a new key
/// per attempt (the retry would create a second record), and treating a 409 as final (the step would be dead).
#[tokio::test]
async fn retries_after_a_timeout_after_the_write_send_the_same_key_and_create_one_record() {
    let app = spawn_with(keyed_crm(30)).await;
    let mut events = events(&app);
    // Written at once, answered after 500 ms; the client gives up after 200 ms.
    app.crm.set_behaviour(Behaviour { hang_after_write_ratio: 1.0, hang_ms: 500, ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "H-1"})).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, None);
    let keys = app.crm.keys_for("plain:H-1");
    assert!(keys.len() >= 2, "the first attempt timed out, so there was a retry: {keys:?}");
    assert!(keys.iter().all(|k| k == "plain:H-1:crm"), "{keys:?}");
    assert_eq!(app.crm.records_for("plain:H-1"), 1);
    let attempts = leadline::dlq::attempts(&app.server.app.store, 1).await.unwrap();
    assert!(attempts[0].reason.contains("no answer"), "{:?}", attempts[0]);
    assert_eq!(attempts.last().unwrap().outcome.as_str(), "delivered");
    app.server.shutdown().await.unwrap();
}

/// A step whose every answer was a definite error gets a new key on each replay (`:replay-1`, `:replay-2`), so a
/// CRM that stored an error under the old key cannot answer the replay with it. Catches: a replay that keeps the
/// old key after definite errors, a generation that is not counted up (or counted from the wrong place), and a
/// suffix that differs from the one `targets/mod.rs` documents.
#[tokio::test]
async fn each_replay_after_only_definite_errors_sends_a_new_key() {
    let app = spawn_with(keyed_crm(2)).await;
    let mut events = events(&app);
    app.crm.set_behaviour(Behaviour { fail_with: Some(500), ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "D-1"})).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, Some(ErrorClass::Transient));

    // The first replay meets the same outage.
    replay_all(&app, 1).await;
    assert_eq!(outcome(&app, &mut events, "crm").await, Some(ErrorClass::Transient));
    // The second meets a healthy CRM.
    app.crm.set_behaviour(Behaviour::default());
    replay_all(&app, 1).await;
    assert_eq!(outcome(&app, &mut events, "crm").await, None);

    let k = "plain:D-1:crm";
    let r1 = format!("{k}:replay-1");
    let r2 = format!("{k}:replay-2");
    assert_eq!(app.crm.keys_for("plain:D-1"), vec![k, k, &r1, &r1, &r2]);
    assert_eq!(app.crm.records_for("plain:D-1"), 1);
    app.server.shutdown().await.unwrap();
}

/// A step whose attempt reached the CRM without an answer keeps its key on replay, even when later attempts
/// got definite errors: the CRM answers the old key with the record it made, and the replay creates nothing.
/// Here the first attempt is written and answered after 1.5 s, the retry meets 409 ("still being processed")
/// and uses the last attempt up; the replay comes after the CRM finished. Catches: a replay that judges
/// only the last answer (or the dead letter's class) and gives a new key: that makes a second record.
#[tokio::test]
async fn a_replay_after_an_unanswered_attempt_keeps_the_key_and_makes_no_second_record() {
    let app = spawn_with(keyed_crm(2)).await;
    let mut events = events(&app);
    let hang = Duration::from_millis(1500);
    app.crm.set_behaviour(Behaviour {
        hang_after_write_ratio: 1.0,
        hang_ms: hang.as_millis() as u64,
        ..Default::default()
    });
    let posted = tokio::time::Instant::now();
    assert_eq!(app.post_plain(&json!({"id": "U-1"})).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, Some(ErrorClass::Transient));
    let attempts = leadline::dlq::attempts(&app.server.app.store, 1).await.unwrap();
    let statuses: Vec<Option<i64>> = attempts.iter().map(|a| a.http_status).collect();
    assert_eq!(statuses, vec![None, Some(409)], "{attempts:#?}");
    assert_eq!(app.crm.records_for("plain:U-1"), 1, "the unanswered attempt was written");

    // The mock CRM's own processing time, not Leadline's work: until then it would answer the key with 409.
    tokio::time::sleep_until(posted + hang + Duration::from_millis(100)).await;
    app.crm.set_behaviour(Behaviour::default());
    replay_all(&app, 1).await;
    assert_eq!(outcome(&app, &mut events, "crm").await, None);
    assert_eq!(app.crm.keys_for("plain:U-1"), vec!["plain:U-1:crm"; 3]);
    assert_eq!(app.crm.records_for("plain:U-1"), 1, "the replay got the stored answer, not a second record");
    app.server.shutdown().await.unwrap();
}

/// A step the rescuer marked in doubt (its lease expired while its request was out) keeps its key on replay,
/// even when every stored answer is a definite error: the doubt alone says the CRM may hold the lead.
/// Catches: a replay that ignores `in_doubt`.
#[tokio::test]
async fn a_replay_of_a_step_in_doubt_keeps_its_key() {
    let app = spawn_with(keyed_crm(1)).await;
    let mut events = events(&app);
    // One attempt, written and answered only after 300 ms: the step is dead (attempts used up).
    let hang = Duration::from_millis(300);
    app.crm.set_behaviour(Behaviour {
        hang_after_write_ratio: 1.0,
        hang_ms: hang.as_millis() as u64,
        ..Default::default()
    });
    let posted = tokio::time::Instant::now();
    assert_eq!(app.post_plain(&json!({"id": "A-1"})).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, Some(ErrorClass::Transient));
    // Only the doubt remains to say that the attempt may have reached the CRM: its answer becomes a definite 500.
    let store = &app.server.app.store;
    store.rewrite_as_in_doubt(1, 500, ErrorClass::Transient, "HTTP 500").await.unwrap();
    // The mock CRM's own processing time, not Leadline's work: until then it would answer the key with 409.
    tokio::time::sleep_until(posted + hang + Duration::from_millis(100)).await;
    app.crm.set_behaviour(Behaviour::default());
    replay_all(&app, 1).await;
    assert_eq!(outcome(&app, &mut events, "crm").await, None);
    assert_eq!(app.crm.keys_for("plain:A-1"), vec!["plain:A-1:crm"; 2]);
    assert_eq!(app.crm.records_for("plain:A-1"), 1);
    app.server.shutdown().await.unwrap();
}

/// A form resubmitted with a corrected phone after the CRM refused the first: the lead's new revision goes under
/// a key naming it, is delivered once with the corrected phone, and an exact repeat of it sends nothing.
/// Catches: a changed lead dropped as a duplicate; the old key sent with the new body (a CRM that stored an
/// answer for the old key refuses or replays it); an exact repeat sent again.
#[tokio::test]
async fn a_corrected_lead_goes_again_under_a_key_naming_its_revision() {
    let app = spawn_with(keyed_crm(3)).await;
    let mut events = events(&app);
    app.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });
    assert_eq!(app.post_plain(&json!({"id": "C-1", "phone": "030 1234567"})).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "crm").await, Some(ErrorClass::PermanentData));

    let corrected = json!({"id": "C-1", "phone": "+49301234567"});
    let answer = app.http.post(app.url("/ingest/plain")).json(&corrected).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::ACCEPTED);
    let answer: serde_json::Value = answer.json().await.unwrap();
    assert_eq!((answer["revised"].as_i64(), answer["events"][0]["revision"].as_i64()), (Some(1), Some(2)));
    assert_eq!(outcome(&app, &mut events, "crm").await, None);
    assert_eq!(app.crm.keys_for("plain:C-1"), vec!["plain:C-1:crm", "plain:C-1:crm:rev-2"]);
    assert_eq!(app.crm.records_for("plain:C-1"), 1);
    assert_eq!(app.crm.lead_for("plain:C-1").unwrap()["phone"], "+49301234567");

    assert_eq!(app.post_plain(&corrected).await, StatusCode::OK, "an exact repeat is a duplicate");
    app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(app.crm.keys_for("plain:C-1").len(), 2, "nothing sent for the repeat");
    app.server.shutdown().await.unwrap();
}

/// A delivered lead that changes: the step whose target upserts (`notify`) writes the new content, the keyed
/// create (`crm`) is not sent again, so the CRM holds one record. Catches: a changed lead dropped as a duplicate
/// (no second write at `notify`); a create sent again for an update (a second record, a second key).
#[tokio::test]
async fn a_changed_lead_updates_where_the_target_can_and_never_creates_twice() {
    let app = spawn().await;
    let mut events = events(&app);
    assert_eq!(app.post_webform(&lead("U-1")).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "notify").await, None);
    let changed = json!({"id": "U-1", "name": "Ada King", "email": "ada@example.com", "phone": "+4915112345678"});
    assert_eq!(app.post_webform(&changed).await, StatusCode::ACCEPTED);
    assert_eq!(outcome(&app, &mut events, "notify").await, None);
    assert_eq!(app.crm.notifications_for("webform:U-1"), 2, "the follow-up step was written again");
    assert_eq!(app.crm.records_for("webform:U-1"), 1);
    assert_eq!(app.crm.keys_for("webform:U-1"), vec!["webform:U-1:crm"], "the create was not sent again");
    assert_eq!(app.post_webform(&changed).await, StatusCode::OK);
    app.wait_settled(Duration::from_secs(10)).await;
    assert_eq!(app.crm.notifications_for("webform:U-1"), 2);
    app.server.shutdown().await.unwrap();
}
