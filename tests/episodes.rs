//! Dead-letter episodes (issue #38): each death of a step is its own record — when, class, reason, field, what
//! became of it, who, how, and the replay that followed — never overwritten by the next death; counts by class and
//! cause count the open episodes through replay, fix and resolve; and a database filled by the schema before
//! migration 0013 keeps every death its attempts recorded. On SQLite, and on PostgreSQL with
//! `LEADLINE_TEST_BACKEND=postgres`.

mod common;

use std::time::Duration;

use common::TestApp;
use leadline::api::{self, ReplayRequest, ResolveRequest};
use leadline::demo::mock_crm::Behaviour;
use leadline::dlq::DeadLetterFilter;
use leadline::replay::fix::{FieldFix, FieldOp};
use leadline::replay::{ReplayOptions, ReplaySelection};
use leadline::store::Store;
use serde_json::json;

/// Open episodes by (class, cause) against the dead-letter groups' counts (the tallies the pages read): equal.
async fn assert_counts_agree(app: &TestApp, open: i64) {
    let mut episodes: Vec<(String, String, i64)> = (app.server.app.store.open_episode_counts().await.unwrap())
        .into_iter()
        .map(|c| (c.class, c.cause, c.n))
        .collect();
    let mut groups: Vec<(String, String, i64)> =
        (api::dead_letter_groups(&app.server.app, &DeadLetterFilter::default()).await.unwrap())
            .into_iter()
            .map(|g| (g.class.as_str().to_string(), g.cause, g.count))
            .collect();
    episodes.sort();
    groups.sort();
    assert_eq!(episodes, groups, "open episodes and dead-letter groups");
    assert_eq!(episodes.iter().map(|e| e.2).sum::<i64>(), open);
    assert_eq!(app.health().await.overall.dead_open, open);
}

async fn wait_dead(app: &TestApp, id: &str) -> i64 {
    common::wait_for("the step dies", Duration::from_secs(20), async || {
        let step = app.server.app.store.delivery_of("plain", id, "crm").await.unwrap().unwrap();
        step.state == "dead" && step.resolution.as_deref() == Some("open")
    })
    .await;
    app.server.app.store.delivery_of("plain", id, "crm").await.unwrap().unwrap().id
}

#[tokio::test]
async fn a_step_that_dies_is_replayed_dies_again_and_is_resolved_keeps_both_deaths() {
    let app = common::spawn().await;
    let store = &app.server.app.store;
    app.crm.set_behaviour(Behaviour { strict_phone: true, ..Default::default() });
    let mut lead = common::lead("E-1");
    lead["phone"] = json!("0151 1234567");
    assert_eq!(app.post_plain(&lead).await, 202);
    let step = wait_dead(&app, "E-1").await;
    assert_counts_agree(&app, 1).await;

    // A fix changes the lead, not the dead letter: the counts stay.
    let fix = FieldFix { field: "phone".into(), op: FieldOp::NormalizePhone { country_code: "+49".into() } };
    let request = api::FixRequest {
        selection: ReplaySelection { ids: Some(vec![step]), filter: None },
        fix,
        reason: "national numbers".into(),
        dry_run: false,
    };
    assert_eq!(api::fix_dead_letters(&app.server.app, &request, "ops").await.unwrap().changed, 1);
    assert_counts_agree(&app, 1).await;

    // Replayed while the CRM refuses the token: it dies again, for another reason.
    app.crm.set_behaviour(Behaviour { fail_with: Some(403), ..Default::default() });
    let request = ReplayRequest {
        selection: ReplaySelection { ids: Some(vec![step]), filter: None },
        expected: 1,
        reason: "phone fixed".into(),
        options: ReplayOptions::default(),
    };
    let receipt = api::replay(&app.server.app, &request, "ops").await.unwrap();
    common::wait_for("the replay ends", Duration::from_secs(20), async || {
        api::replay_progress(&app.server.app, receipt.replay_id).await.unwrap().done
    })
    .await;
    wait_dead(&app, "E-1").await;
    assert_counts_agree(&app, 1).await;

    let resolve = ResolveRequest {
        selection: ReplaySelection { ids: Some(vec![step]), filter: None },
        resolution: "fixed_manually".parse().unwrap(),
        note: "entered in the CRM by hand".into(),
        expected: Some(1),
    };
    assert_eq!(api::resolve_dead_letters(&app.server.app, &resolve, "grace").await.unwrap(), 1);
    assert_counts_agree(&app, 0).await;

    // The story: died (data), replayed by ops, died again (configuration), fixed by hand by grace.
    let event_id = store.delivery_of("plain", "E-1", "crm").await.unwrap().unwrap().event_id;
    let story = api::lead_story(&app.server.app, event_id).await.unwrap();
    let e = &story.episodes;
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(e[0].class.map(|c| c.as_str()), Some("permanent_data"));
    assert_eq!(e[0].http_status, Some(422));
    assert_eq!(e[0].resolution, "replayed");
    assert_eq!(e[0].replay_id, Some(receipt.replay_id));
    assert_eq!(e[0].resolved_by.as_deref(), Some("ops"));
    assert_eq!(e[0].resolution_note.as_deref(), Some("phone fixed"));
    assert_eq!(e[1].class.map(|c| c.as_str()), Some("permanent_config"));
    assert_eq!(e[1].http_status, Some(403));
    assert_eq!(e[1].resolution, "fixed_manually");
    assert_eq!(e[1].resolved_by.as_deref(), Some("grace"));
    assert_eq!(e[1].resolution_note.as_deref(), Some("entered in the CRM by hand"));
    assert_eq!(e[1].replay_id, None);
    // Three moments, in order: the first death, the replay after it, the second death (resolved since).
    assert!(e[0].died_at <= e[0].resolved_at.unwrap() && e[0].resolved_at.unwrap() <= e[1].died_at);
    assert!(e[1].died_at <= e[1].resolved_at.unwrap());
    // The story masks what the CRM quoted of the lead; the store keeps the same two episodes.
    assert!(!e[0].reason.as_deref().unwrap_or_default().contains("1234567"), "{:?}", e[0].reason);
    let stored: Vec<i64> = store.episodes(step).await.unwrap().iter().map(|e| e.id).collect();
    assert_eq!(stored, e.iter().map(|e| e.id).collect::<Vec<_>>());
    app.server.shutdown().await.unwrap();
}

/// The database of a test, filled by the schema before 0013: a step that died twice and was discarded, and one
/// that died, was replayed and delivered.
const BEFORE_0013: &[&str] = &[
    "INSERT INTO inbound_event (id, source, source_ref, received_at, payload)
     VALUES (1, 'plain', 'M-1', 1000, '{\"id\":\"M-1\"}'), (2, 'plain', 'M-2', 1000, '{\"id\":\"M-2\"}')",
    "INSERT INTO replay (id, created_at, actor, reason, selection, requested, requeued)
     VALUES (7, 2500, 'ops', 'phones fixed', '{}', 2, 2)",
    "INSERT INTO delivery (id, event_id, step_index, target, state, attempts, created_at, pending_since, delivered_at,
                           dead_at, dead_class, dead_status, dead_reason, dead_cause, dead_field, resolution,
                           resolved_at, resolved_by, resolution_note)
     VALUES (1, 1, 0, 'crm', 'dead', 2, 1000, 2500, NULL, 5000, 'permanent_config', 403, 'forbidden', 'forbidden',
             NULL, 'discarded', 6000, 'grace', 'a test lead'),
            (2, 2, 0, 'crm', 'delivered', 2, 1000, 2500, 3000, 2000, 'permanent_data', 422, 'phone invalid',
             'phone invalid', 'phone', 'replayed', NULL, NULL, NULL)",
    "INSERT INTO replay_item (replay_id, delivery_id, prior_class, prior_reason)
     VALUES (7, 1, NULL, NULL), (7, 2, NULL, NULL)",
    "INSERT INTO attempt (delivery_id, started_at, duration_ms, http_status, outcome, class, reason, trigger)
     VALUES (1, 1900, 100, 422, 'dead', 'permanent_data', 'phone invalid', 'scheduled'),
            (1, 4900, 100, 403, 'dead', 'permanent_config', 'forbidden', 'manual'),
            (2, 1900, 100, 422, 'dead', 'permanent_data', 'phone invalid', 'scheduled'),
            (2, 2900, 100, 200, 'delivered', NULL, 'delivered', 'manual')",
];

/// The migrations before 0013 of `dir`.
async fn migrator_before_0013(dir: &str) -> sqlx::migrate::Migrator {
    let mut m = sqlx::migrate::Migrator::new(std::path::Path::new(dir)).await.unwrap();
    let before: Vec<sqlx::migrate::Migration> = m.migrations.iter().filter(|m| m.version < 13).cloned().collect();
    assert!(before.len() < m.migrations.len(), "0013 is among {dir}");
    m.migrations = before.into();
    m
}

#[tokio::test]
async fn a_database_filled_by_the_previous_schema_keeps_every_death_as_an_episode() {
    let dir = tempfile::tempdir().unwrap();
    let url = common::database_url(&dir.path().join("old.db"));
    if common::on_postgres() {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        migrator_before_0013("migrations/postgres").await.run(&pool).await.unwrap();
        for statement in BEFORE_0013 {
            sqlx::query(statement).execute(&pool).await.unwrap();
        }
        pool.close().await;
    } else {
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true)).await.unwrap();
        migrator_before_0013("migrations/sqlite").await.run(&pool).await.unwrap();
        for statement in BEFORE_0013 {
            sqlx::query(statement).execute(&pool).await.unwrap();
        }
        pool.close().await;
    }

    // Opening the store applies 0013.
    let store = Store::open(&url).await.unwrap();
    let twice = store.episodes(1).await.unwrap();
    assert_eq!(twice.len(), 2, "{twice:?}");
    assert_eq!(
        (twice[0].class.map(|c| c.as_str()), twice[0].resolution.as_str()),
        (Some("permanent_data"), "replayed")
    );
    assert_eq!(twice[0].died_at.timestamp_millis(), 2000);
    assert_eq!(twice[0].http_status, Some(422));
    assert_eq!(
        (twice[1].class.map(|c| c.as_str()), twice[1].resolution.as_str()),
        (Some("permanent_config"), "discarded")
    );
    assert_eq!(twice[1].died_at.timestamp_millis(), 5000);
    assert_eq!(twice[1].resolved_by.as_deref(), Some("grace"));
    assert_eq!(twice[1].resolution_note.as_deref(), Some("a test lead"));
    let once = store.episodes(2).await.unwrap();
    assert_eq!(once.len(), 1, "{once:?}");
    assert_eq!(once[0].field.as_deref(), Some("phone"));
    assert_eq!(once[0].resolution, "replayed");
    assert_eq!(once[0].replay_id, Some(7));
    assert_eq!(once[0].resolved_at.map(|t| t.timestamp_millis()), Some(2500));
    // Nothing of the old schema is open: no open episode.
    assert!(store.open_episode_counts().await.unwrap().is_empty());
    store.close().await;
}
