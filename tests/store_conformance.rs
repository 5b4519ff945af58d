//! The store's conformance suite: every case is written once, as a function taking a fresh [`Store`], and run
//! against both backends — SQLite (a file in a temporary folder) and PostgreSQL (a fresh database on the test
//! cluster, see `common/pg.rs`). PostgreSQL cases are never skipped: if no server can be started they fail
//! saying why.
//!
//! Adding a case: write `async fn my_case(store: Store)` below and add its name to the `conformance!` list at
//! the bottom.

mod common;

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Duration, TimeZone, Utc};
use leadline::model::ErrorClass;
use leadline::store::{
    AttemptRecord, Completion, DeadLetterFilter, GaugeReading, InsertOutcome, Job, JobOutcome, LeadStatus,
    MetricsRecord, MetricsRetention, NewEvent, NewReplay, OnChange, PreviewCategory, ReplaySelection, Resolution,
    ResolveOutcome, StartOutcome, Store, Via,
};

/// A fixed start time: the cases pass times explicitly, never the wall clock.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 5, 9, 0, 0).unwrap()
}

fn at(seconds: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(seconds)
}

fn event(source_ref: &str, route: &[&str]) -> NewEvent {
    NewEvent {
        source: "webform".into(),
        source_ref: source_ref.into(),
        payload: serde_json::json!({"id": source_ref, "email": format!("{source_ref}@example.com")}),
        route: route.iter().map(|t| t.to_string()).collect(),
        received_at: t0(),
        via: Via::Webhook,
        lead_at: None,
        on_change: Default::default(),
    }
}

async fn insert(store: &Store, n: usize, prefix: &str, route: &[&str]) -> Vec<i64> {
    let events: Vec<NewEvent> = (0..n).map(|i| event(&format!("{prefix}-{i}"), route)).collect();
    store
        .insert_events(&events)
        .await
        .unwrap()
        .into_iter()
        .map(|o| match o {
            InsertOutcome::Inserted(id) => id,
            other => panic!("{other:?} is not new"),
        })
        .collect()
}

async fn claim(store: &Store, target: &str, limit: u32, now: DateTime<Utc>) -> Vec<Job> {
    store.claim(target, limit, "conformance", now, now + Duration::seconds(60)).await.unwrap()
}

/// `job` finished with `outcome` at `now`, after one attempt.
fn finished(job: &Job, outcome: JobOutcome, now: DateTime<Utc>) -> Completion {
    let (class, status) = match &outcome {
        JobOutcome::Dead { class, http_status, .. } => (Some(*class), *http_status),
        JobOutcome::Retry { .. } => (Some(ErrorClass::Transient), Some(503)),
        _ => (None, Some(200)),
    };
    Completion {
        job_id: job.id,
        event_id: job.event_id,
        step_index: job.step_index,
        lease_token: job.lease_token,
        trigger: job.trigger.clone(),
        outcome,
        attempt: Some(AttemptRecord {
            started_at: now,
            duration_ms: 12,
            http_status: status,
            class,
            reason: "conformance".into(),
            response_excerpt: None,
        }),
        now,
        missing_task: None,
    }
}

fn delivered(crm_id: &str) -> JobOutcome {
    JobOutcome::Delivered { result: serde_json::json!({"crm_id": crm_id}), link: None, payload: None }
}

fn dead(class: ErrorClass) -> JobOutcome {
    JobOutcome::Dead { class, http_status: Some(422), reason: "email 'x@y' is invalid".into(), field: None }
}

/// What queue health reports for `target` (from the kept tally), as recount buckets.
async fn kept(store: &Store) -> BTreeMap<(String, String), i64> {
    let h = store.queue_health(at(3600), &[]).await.unwrap();
    let mut out = BTreeMap::new();
    for t in &h.targets {
        for (bucket, n) in
            [("waiting", t.waiting), ("pending", t.pending), ("running", t.running), ("delivered", t.delivered)]
        {
            if n != 0 {
                out.insert((t.target.clone(), bucket.to_string()), n);
            }
        }
        for (class, n) in &t.dead_open_by_class {
            if *n != 0 {
                out.insert((t.target.clone(), format!("dead:{class}")), *n);
            }
        }
    }
    out
}

/// The real counts, without `dead_resolved` (queue health does not report it) and empty buckets.
async fn real(store: &Store) -> BTreeMap<(String, String), i64> {
    let mut r = store.recount_deliveries().await.unwrap();
    r.retain(|(_, bucket), n| bucket != "dead_resolved" && *n != 0);
    r
}

// ─── cases ───────────────────────────────────────────────────────────────────────────────────────────────

/// Several tasks claim (and complete what they claimed, in the same transaction as their next claim) in a loop
/// on one database: no job is claimed twice, and together they claim all.
async fn concurrent_claimers_never_share_a_job(store: Store) {
    const JOBS: usize = 300;
    insert(&store, JOBS, "c", &["crm"]).await;
    let mut tasks = Vec::new();
    for worker in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let now = at(1);
            let owner = format!("worker-{worker}");
            let request = leadline::store::ClaimRequest {
                target: "crm".into(),
                limit: 7,
                owner,
                now,
                lease_until: now + Duration::seconds(60),
            };
            let mut mine = Vec::new();
            let mut finishing: Vec<Completion> = Vec::new();
            loop {
                let (applied, mut claimed) =
                    store.write_batch(&finishing, std::slice::from_ref(&request)).await.unwrap();
                assert_eq!(applied, finishing.len(), "every completion under a live lease applies");
                let jobs = claimed.pop().unwrap();
                if jobs.is_empty() {
                    break;
                }
                finishing = jobs.iter().map(|j| finished(j, delivered(&format!("r{}", j.id)), now)).collect();
                mine.extend(jobs.iter().map(|j| j.id));
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "a job was claimed twice");
    assert_eq!(all.len(), JOBS, "together the claimers claim every job");
    let h = store.queue_health(at(2), &[]).await.unwrap();
    assert_eq!(h.overall.pending, 0);
    assert_eq!(h.overall.running + h.overall.delivered, JOBS as i64);
}

/// A completion presenting an old lease token changes nothing, but its attempt is recorded.
async fn stale_lease_token_is_ignored(store: Store) {
    insert(&store, 1, "s", &["crm"]).await;
    let job = claim(&store, "crm", 10, at(1)).await.pop().expect("one job");
    let mut stale = finished(&job, delivered("stale"), at(2));
    stale.lease_token = job.lease_token - 1;
    assert_eq!(store.complete(&[stale]).await.unwrap(), 0, "a stale completion applies nothing");
    let h = store.queue_health(at(2), &[]).await.unwrap();
    assert_eq!((h.overall.running, h.overall.delivered), (1, 0), "the job is still running under its lease");
    assert_eq!(store.attempt_outcomes(job.id).await.unwrap(), vec!["delivered"], "the attempt is recorded");
    // Every other outcome is ignored as well.
    for outcome in [
        JobOutcome::Retry { at: at(5), counts: true, in_doubt: false },
        dead(ErrorClass::PermanentData),
        JobOutcome::Released { at: at(5) },
    ] {
        let mut c = finished(&job, outcome, at(3));
        c.lease_token += 1;
        assert_eq!(store.complete(&[c]).await.unwrap(), 0);
    }
    assert_eq!(store.queue_health(at(3), &[]).await.unwrap().overall.running, 1);
    // The holder of the live lease completes it.
    assert_eq!(store.complete(&[finished(&job, delivered("live"), at(4))]).await.unwrap(), 1);
    assert_eq!(store.queue_health(at(4), &[]).await.unwrap().overall.delivered, 1);
}

/// A job whose lease expired comes back pending and in doubt; its old holder can no longer complete it.
async fn rescued_job_comes_back_in_doubt(store: Store) {
    insert(&store, 1, "r", &["crm"]).await;
    let job = store.claim("crm", 1, "dies", at(1), at(2)).await.unwrap().pop().expect("one job");
    assert!(!job.in_doubt);
    assert_eq!(store.rescue_expired(at(1)).await.unwrap(), 0, "a live lease is not rescued");
    assert_eq!(store.rescue_expired(at(3)).await.unwrap(), 1);
    let h = store.queue_health(at(3), &[]).await.unwrap();
    assert_eq!((h.overall.pending, h.overall.running), (1, 0));
    let again = claim(&store, "crm", 1, at(3)).await.pop().expect("the rescued job is due");
    assert_eq!(again.id, job.id);
    assert!(again.in_doubt, "the CRM may have the lead: the job is in doubt");
    assert!(again.lease_token > job.lease_token);
    assert_eq!(store.attempt_outcomes(job.id).await.unwrap(), vec!["rescued"]);
    assert_eq!(store.complete(&[finished(&job, delivered("late"), at(4))]).await.unwrap(), 0);
    assert_eq!(store.complete(&[finished(&again, delivered("ok"), at(4))]).await.unwrap(), 1);
}

/// Delivering a step makes the next step of its route pending in the same commit: an observer never sees a
/// delivered first step whose second step is still waiting. The next step gets the earlier result.
async fn next_step_pending_in_same_commit(store: Store) {
    const N: usize = 60;
    insert(&store, N, "n", &["fetch", "crm"]).await;
    let observer = {
        let store = store.clone();
        tokio::spawn(async move {
            for _ in 0..400 {
                let h = store.queue_health(at(2), &[]).await.unwrap();
                let get = |t: &str| h.targets.iter().find(|x| x.target == t).cloned().unwrap_or_default();
                let (fetch, crm) = (get("fetch"), get("crm"));
                assert_eq!(fetch.delivered, crm.pending + crm.running + crm.delivered, "{fetch:?} {crm:?}");
                assert_eq!(crm.waiting + crm.pending + crm.running + crm.delivered, N as i64);
                if crm.pending == N as i64 {
                    break;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    loop {
        let jobs = claim(&store, "fetch", 5, at(1)).await;
        if jobs.is_empty() {
            break;
        }
        let done: Vec<Completion> =
            jobs.iter().map(|j| finished(j, delivered(&format!("f{}", j.event_id)), at(2))).collect();
        assert_eq!(store.complete(&done).await.unwrap(), jobs.len());
    }
    observer.await.unwrap();
    let h = store.queue_health(at(2), &[]).await.unwrap();
    let crm = h.targets.iter().find(|t| t.target == "crm").unwrap();
    assert_eq!((crm.waiting, crm.pending), (0, N as i64));
    let jobs = claim(&store, "crm", N as u32, at(2)).await;
    assert_eq!(jobs.len(), N);
    for j in &jobs {
        assert_eq!(j.step_index, 1);
        assert_eq!(j.pending_since, at(2), "the step became due when its predecessor was delivered");
        assert_eq!(j.previous.get("fetch"), Some(&serde_json::json!({"crm_id": format!("f{}", j.event_id)})));
    }
}

/// A fetched lead replaces the stored payload in the delivery's commit; the next step sees it.
async fn fetched_payload_replaces_the_lead(store: Store) {
    insert(&store, 1, "p", &["fetch", "crm"]).await;
    let job = claim(&store, "fetch", 1, at(1)).await.pop().unwrap();
    let fetched = serde_json::json!({"id": "p-0", "email": "fetched@example.com", "answers": [1, 2]});
    let outcome = JobOutcome::Delivered { result: serde_json::json!({}), link: None, payload: Some(fetched.clone()) };
    assert_eq!(store.complete(&[finished(&job, outcome, at(2))]).await.unwrap(), 1);
    let next = claim(&store, "crm", 1, at(2)).await.pop().unwrap();
    assert_eq!(next.payload, fetched);
}

/// A repeated event (same source and id), in another batch or in the same one, stores nothing new.
async fn duplicate_event_stores_nothing(store: Store) {
    let first = store.insert_events(&[event("d-1", &["crm", "notify"])]).await.unwrap();
    let InsertOutcome::Inserted(id) = first[0] else { panic!("first insert: {first:?}") };
    let again = store
        .insert_events(&[event("d-1", &["crm", "notify"]), event("d-2", &["crm"]), event("d-2", &["crm"])])
        .await
        .unwrap();
    assert_eq!(again[0], InsertOutcome::Duplicate(id));
    let InsertOutcome::Inserted(id2) = again[1] else { panic!("{again:?}") };
    assert_eq!(again[2], InsertOutcome::Duplicate(id2));
    assert_eq!(store.count_events().await.unwrap(), 2);
    let h = store.queue_health(at(1), &[]).await.unwrap();
    assert_eq!((h.overall.pending, h.overall.waiting), (2, 1));
    assert_eq!(real(&store).await, kept(&store).await);
}

/// A lead sent again with different content by a source that revises: a new revision, due again where it must
/// go (a delivered step of a target that can update, an open dead letter), kept where a second request would
/// create a second record; an exact repeat stays a duplicate, and a source that does not revise never revises.
async fn a_changed_lead_is_a_new_revision(store: Store) {
    let revise = OnChange::Revise(vec!["crm".to_string()].into());
    let lead = |source_ref: &str, email: &str, route: &[&str], on_change: &OnChange| NewEvent {
        payload: serde_json::json!({"id": source_ref, "email": email}),
        on_change: on_change.clone(),
        ..event(source_ref, route)
    };
    // r-1: delivered to `crm` (can update) and `notify` (cannot).
    let first = store.insert_events(&[lead("r-1", "ada@old.example", &["crm", "notify"], &revise)]).await.unwrap();
    let InsertOutcome::Inserted(id) = first[0] else { panic!("{first:?}") };
    let job = claim(&store, "crm", 1, at(1)).await.pop().unwrap();
    assert_eq!((job.revision, job.idempotency_key()), (1, "webform:r-1:crm".to_string()));
    store.complete(&[finished(&job, delivered("c-1"), at(2))]).await.unwrap();
    let job = claim(&store, "notify", 1, at(3)).await.pop().unwrap();
    store.complete(&[finished(&job, delivered("n-1"), at(4))]).await.unwrap();

    let again = lead("r-1", "ada@old.example", &["crm", "notify"], &revise);
    assert_eq!(store.insert_events(&[again]).await.unwrap(), [InsertOutcome::Duplicate(id)], "exact repeat");
    let ignored = lead("r-1", "ada@new.example", &["crm", "notify"], &OnChange::Ignore);
    assert_eq!(store.insert_events(&[ignored]).await.unwrap(), [InsertOutcome::Duplicate(id)], "not revised");

    let changed = lead("r-1", "ada@new.example", &["crm", "notify"], &revise);
    let outcome = store.insert_events(std::slice::from_ref(&changed)).await.unwrap();
    assert_eq!(outcome, [InsertOutcome::Revised { id, revision: 2, not_updated: vec!["notify".into()] }]);
    assert_eq!(store.insert_events(&[changed]).await.unwrap(), [InsertOutcome::Duplicate(id)], "repeat of rev 2");
    let job = claim(&store, "crm", 1, at(5)).await.pop().expect("the CRM step is due again");
    assert_eq!(job.revision, 2);
    assert_eq!(job.payload["email"], "ada@new.example");
    assert_eq!(job.idempotency_key(), "webform:r-1:crm:rev-2");
    assert!(claim(&store, "notify", 1, at(5)).await.is_empty(), "a create is not sent again");
    store.complete(&[finished(&job, delivered("c-1"), at(6))]).await.unwrap();
    assert!(claim(&store, "notify", 1, at(7)).await.is_empty(), "its delivery does not re-open the next step");

    // r-2: a data error; the corrected lead goes again under a new key, the dead letter resolved by the source.
    store.insert_events(&[lead("r-2", "not-an-email", &["notify"], &revise)]).await.unwrap();
    let job = claim(&store, "notify", 1, at(8)).await.pop().unwrap();
    store.complete(&[finished(&job, dead(ErrorClass::PermanentData), at(9))]).await.unwrap();
    let outcome = store.insert_events(&[lead("r-2", "bo@example.com", &["notify"], &revise)]).await.unwrap();
    assert!(
        matches!(outcome[0], InsertOutcome::Revised { revision: 2, ref not_updated, .. } if not_updated.is_empty())
    );
    let job = claim(&store, "notify", 1, at(10)).await.pop().expect("the dead letter goes again");
    assert_eq!((job.idempotency_key().as_str(), job.attempts, job.in_doubt), ("webform:r-2:notify:rev-2", 0, false));
    let step = store.deliveries().await.unwrap().into_iter().find(|d| d.id == job.id).unwrap();
    assert_eq!(step.resolution.as_deref(), Some("replayed"));

    // r-3: its first attempt went unanswered; the new content goes under the old key, recognisable as a repeat.
    store.insert_events(&[lead("r-3", "cy@old.example", &["notify"], &revise)]).await.unwrap();
    let job = claim(&store, "notify", 1, at(11)).await.pop().unwrap();
    let retry = JobOutcome::Retry { at: at(11), counts: true, in_doubt: true };
    store.complete(&[finished(&job, retry, at(11))]).await.unwrap();
    store.insert_events(&[lead("r-3", "cy@new.example", &["notify"], &revise)]).await.unwrap();
    let job = claim(&store, "notify", 1, at(12)).await.pop().unwrap();
    assert_eq!((job.revision, job.idempotency_key().as_str()), (2, "webform:r-3:notify"));
    assert_eq!(job.payload["email"], "cy@new.example");
    assert_eq!(real(&store).await, kept(&store).await);
}

/// One batch read as one lead at a time, in its order (ingest commits concurrent webhooks together, SQLite in
/// two statements for the whole batch): a lead, its changed content and its exact repeat in the same batch are
/// stored, revised and taken as a duplicate; the same id from another source is another lead; each lead's steps
/// are made (the first due, the next waiting) and a lead's own time is kept.
async fn a_batch_is_read_as_one_lead_at_a_time(store: Store) {
    let revise = OnChange::Revise(vec!["crm".to_string()].into());
    let lead = |email: &str| NewEvent {
        payload: serde_json::json!({"id": "b-1", "email": email}),
        on_change: revise.clone(),
        ..event("b-1", &["crm", "notify"])
    };
    let other_source = NewEvent { source: "meta".into(), ..event("b-1", &["crm"]) };
    let recovered = NewEvent { lead_at: Some(t0() - Duration::hours(3)), ..event("b-2", &["crm"]) };
    let outcome = store
        .insert_events(&[
            lead("ada@old.example"),
            other_source,
            lead("ada@new.example"),
            lead("ada@new.example"),
            recovered,
        ])
        .await
        .unwrap();
    let InsertOutcome::Inserted(id) = outcome[0] else { panic!("{outcome:?}") };
    let InsertOutcome::Inserted(meta_id) = outcome[1] else { panic!("{outcome:?}") };
    assert_ne!(id, meta_id, "the same id from another source is another lead");
    assert_eq!(outcome[2], InsertOutcome::Revised { id, revision: 2, not_updated: vec![] });
    assert_eq!(outcome[3], InsertOutcome::Duplicate(id));
    let InsertOutcome::Inserted(_) = outcome[4] else { panic!("{outcome:?}") };
    assert_eq!(store.count_events().await.unwrap(), 3);
    let h = store.queue_health(at(1), &[]).await.unwrap();
    assert_eq!((h.overall.pending, h.overall.waiting), (3, 1));
    let jobs = claim(&store, "crm", 10, at(1)).await;
    assert_eq!(jobs.len(), 3);
    let first = jobs.iter().find(|j| j.event_id == id).unwrap();
    assert_eq!((first.revision, first.payload["email"].as_str()), (2, Some("ada@new.example")));
    assert_eq!(first.idempotency_key(), "webform:b-1:crm:rev-2");
    let story = store.lead_story(jobs.iter().find(|j| j.source_ref == "b-2").unwrap().event_id).await.unwrap();
    assert_eq!(story.map(|s| s.lead_at), Some(Some(t0() - Duration::hours(3))));
    assert_eq!(real(&store).await, kept(&store).await);
}

/// The benchmark's bulk fill leaves the kept counts exact, on each backend (PostgreSQL counts them after the fill
/// instead of row by row).
async fn bench_fill_keeps_counts_exact(store: Store) {
    store.bench_fill(leadline::store::BenchFill::QueueMix, 1_000).await.unwrap();
    assert_eq!(real(&store).await, kept(&store).await);
    let groups = store.dead_letter_groups(&DeadLetterFilter::default()).await.unwrap();
    assert_eq!(groups.iter().map(|g| g.count).sum::<i64>(), 5, "{groups:?}");
    // The triggers are back on: the next change is counted as it happens.
    insert(&store, 1, "after", &["crm"]).await;
    assert_eq!(real(&store).await, kept(&store).await);
}

/// The desk's other reads and writes answer alike on both backends: an alert's life (raised, raised again,
/// acknowledged, resolved, raised anew), a target's pause, the figures' delivered steps and dead letters per
/// route, and a breaker's history.
async fn the_desks_reads_answer_alike(store: Store) {
    use leadline::model::{AlertKind, BreakerState, Severity, Transition};
    use leadline::store::AlertSpec;
    let spec = |title: &str| AlertSpec {
        kind: AlertKind::BreakerOpen,
        key: "crm".into(),
        severity: Severity::Critical,
        title: title.into(),
        detail: "503 from the CRM".into(),
    };
    let first = store.raise_alert(&spec("crm is down"), at(1)).await.unwrap();
    let again = store.raise_alert(&spec("crm is still down"), at(2)).await.unwrap();
    assert_eq!((again.id, again.occurrences, again.opened_at), (first.id, 2, at(1)), "one alert per incident");
    let acked = store.acknowledge_alert(first.id, "ops", at(3)).await.unwrap().unwrap();
    assert_eq!((acked.acknowledged_by.as_deref(), acked.acknowledged_at), (Some("ops"), Some(at(3))));
    assert!(store.resolve_alert(AlertKind::BreakerOpen, "crm", "closed again", at(4)).await.unwrap());
    assert!(!store.resolve_alert(AlertKind::BreakerOpen, "crm", "closed again", at(5)).await.unwrap());
    let next = store.raise_alert(&spec("crm is down"), at(6)).await.unwrap();
    assert_ne!(next.id, first.id, "a new incident is a new alert");
    let listed = store.alerts(10).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(store.unresolved_alerts().await.unwrap().iter().map(|a| a.id).collect::<Vec<_>>(), [next.id]);

    store.pause_target("crm", "ops", at(7)).await.unwrap();
    let pauses = store.target_pauses().await.unwrap();
    assert_eq!((pauses[0].target.as_str(), pauses[0].paused_by.as_str(), pauses[0].paused_at), ("crm", "ops", at(7)));
    store.resume_target("crm").await.unwrap();
    assert!(store.target_pauses().await.unwrap().is_empty());

    insert(&store, 3, "f", &["crm"]).await;
    let jobs = claim(&store, "crm", 3, at(10)).await;
    store.complete(&[finished(&jobs[0], delivered("c-1"), at(11))]).await.unwrap();
    store.complete(&[finished(&jobs[1], dead(ErrorClass::PermanentData), at(12))]).await.unwrap();
    let steps = store.delivered_steps(at(0), at(100)).await.unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!((steps[0].source.as_str(), steps[0].target.as_str(), steps[0].delivered_at), ("webform", "crm", at(11)));
    let dead_routes = store.dead_letters_by_route(at(0), at(100)).await.unwrap();
    assert_eq!((dead_routes[0].target.as_str(), dead_routes[0].dead_letters), ("crm", 1));

    let open =
        Transition { from: BreakerState::Closed, to: BreakerState::Open, at: at(20), reason: "5 failures".into() };
    store.record_breaker_transition("crm", &open).await.unwrap();
    let history = store.breaker_history("crm", at(30), at(40)).await.unwrap();
    assert_eq!(history.state_at_start.as_deref(), Some("open"));
    assert!(history.transitions.is_empty());
    assert_eq!(store.breaker_history("crm", at(0), at(40)).await.unwrap().transitions.len(), 1);
}

/// After a mixed workload (deliveries, retries, dead letters of every class, releases, stale completions,
/// rescues, multi-step routes), the counts kept by the triggers equal the real counts.
async fn kept_counts_equal_real_counts(store: Store) {
    insert(&store, 40, "a", &["crm", "notify"]).await;
    insert(&store, 30, "b", &["notify"]).await;
    insert(&store, 20, "c", &["fetch", "crm", "notify"]).await;
    let classes = [
        ErrorClass::Transient,
        ErrorClass::RateLimited,
        ErrorClass::PermanentData,
        ErrorClass::PermanentConfig,
        ErrorClass::Ambiguous,
    ];
    let mut now = 1;
    for round in 0..4 {
        for target in ["fetch", "crm", "notify"] {
            let jobs = store.claim(target, 25, "mixed", at(now), at(now + 5)).await.unwrap();
            let mut batch = Vec::new();
            for (i, j) in jobs.iter().enumerate() {
                let outcome = match (i + round) % 7 {
                    0..=2 => delivered(&format!("{target}-{}", j.id)),
                    3 => JobOutcome::Retry { at: at(now), counts: i % 2 == 0, in_doubt: false },
                    4 => dead(classes[i % classes.len()]),
                    5 => JobOutcome::Released { at: at(now) },
                    _ => continue, // left running: rescued later
                };
                let mut c = finished(j, outcome, at(now));
                if i % 11 == 10 {
                    c.lease_token += 7; // stale: ignored
                }
                batch.push(c);
            }
            store.complete(&batch).await.unwrap();
            assert_eq!(real(&store).await, kept(&store).await, "round {round}, target {target}");
        }
        now += 10;
        assert!(store.rescue_expired(at(now)).await.unwrap() > 0 || round > 0);
        assert_eq!(real(&store).await, kept(&store).await, "after rescue, round {round}");
    }
    let total: i64 = store.recount_deliveries().await.unwrap().values().sum();
    assert_eq!(total, 40 * 2 + 30 + 20 * 3);
}

/// The first CRM record linked to an external id wins: a later link (direct or by a completion) keeps it.
async fn crm_link_first_wins(store: Store) {
    assert_eq!(store.crm_link("crm", "webform:x").await.unwrap(), None);
    assert_eq!(store.link("crm", "webform:x", "111", t0()).await.unwrap(), "111");
    assert_eq!(store.link("crm", "webform:x", "222", t0()).await.unwrap(), "111");
    assert_eq!(store.link("other", "webform:x", "333", t0()).await.unwrap(), "333", "links are per target");
    assert_eq!(store.crm_link("crm", "webform:x").await.unwrap().as_deref(), Some("111"));

    insert(&store, 2, "l", &["crm"]).await;
    let jobs = claim(&store, "crm", 2, at(1)).await;
    let linked = |j: &Job, crm_id: &str| {
        finished(
            j,
            JobOutcome::Delivered {
                result: serde_json::json!({"crm_id": crm_id}),
                link: Some(("webform:shared".into(), crm_id.into())),
                payload: None,
            },
            at(2),
        )
    };
    assert_eq!(store.complete(&[linked(&jobs[0], "first"), linked(&jobs[1], "second")]).await.unwrap(), 2);
    assert_eq!(store.crm_link("crm", "webform:shared").await.unwrap().as_deref(), Some("first"));
}

/// `make_due` and `next_due`: a pending job's due time, brought forward to now.
async fn make_due_brings_jobs_forward(store: Store) {
    insert(&store, 3, "m", &["crm"]).await;
    let jobs = claim(&store, "crm", 3, at(1)).await;
    let later: Vec<Completion> = jobs
        .iter()
        .map(|j| finished(j, JobOutcome::Retry { at: at(600), counts: true, in_doubt: false }, at(1)))
        .collect();
    assert_eq!(store.complete(&later).await.unwrap(), 3);
    assert_eq!(store.next_due("crm").await.unwrap(), Some(at(600)));
    assert!(claim(&store, "crm", 3, at(2)).await.is_empty());
    assert_eq!(store.make_due("crm", at(2)).await.unwrap(), 3);
    assert_eq!(store.next_due("crm").await.unwrap(), Some(at(2)));
    let again = claim(&store, "crm", 3, at(2)).await;
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|j| j.attempts == 1));
    // Under way (a probe in flight when a credential is renewed) counts among the leads that wait for it.
    assert_eq!(store.make_due("crm", at(3)).await.unwrap(), 3);
    assert_eq!(store.next_due("crm").await.unwrap(), None);
}

// ─── both backends ───────────────────────────────────────────────────────────────────────────────────────

/// A store on a fresh database of the backend, and what keeps that database alive.
struct Fresh {
    store: Store,
    _dir: Option<tempfile::TempDir>,
}

async fn sqlite() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("sqlite://{}", dir.path().join("conformance.db").display())).await.unwrap();
    assert_eq!(store.backend_name(), "sqlite");
    Fresh { store, _dir: Some(dir) }
}

async fn postgres() -> Fresh {
    let url = common::pg::fresh_database_url().await;
    let store = Store::open(&url).await.unwrap_or_else(|e| panic!("cannot open the PostgreSQL store at {url}: {e:#}"));
    assert_eq!(store.backend_name(), "postgres");
    Fresh { store, _dir: None }
}
/// Dead letters of `target` from `n` new leads of `prefix`, all answered 422 at `at(2)`.
async fn dead_letters(store: &Store, n: usize, prefix: &str) -> Vec<Job> {
    insert(store, n, prefix, &["crm"]).await;
    let jobs = claim(store, "crm", n as u32, at(1)).await;
    let dead: Vec<Completion> = jobs
        .iter()
        .map(|j| {
            let outcome = JobOutcome::Dead {
                class: ErrorClass::PermanentData,
                http_status: Some(422),
                reason: "422: email is invalid".into(),
                field: Some("email".into()),
            };
            finished(j, outcome, at(2))
        })
        .collect();
    assert_eq!(store.complete(&dead).await.unwrap(), n);
    jobs
}

fn all_of_crm() -> ReplaySelection {
    ReplaySelection { ids: None, filter: Some(DeadLetterFilter { target: Some("crm".into()), ..Default::default() }) }
}

/// A replay is recorded for exactly the dead letters its preview counted: if the selection changed since (one more
/// dead letter), it is refused and nothing is recorded; recorded, its dead letters are due again.
async fn replay_refuses_a_changed_selection(store: Store) {
    dead_letters(&store, 3, "rp").await;
    let selection = all_of_crm();
    let preview = store.replay_preview(&selection, &[], at(3)).await.unwrap();
    let eligible: i64 = preview.iter().filter(|p| p.category == PreviewCategory::Eligible).map(|p| p.count).sum();
    assert_eq!(eligible, 3, "{preview:?}");
    dead_letters(&store, 1, "late").await;
    let replay = |expected| NewReplay {
        selection: &selection,
        expected,
        actor: "conformance",
        reason: "fixed the form",
        canary: 0,
        rate_per_second: 10.0,
        auto: false,
        fallbacks: &[],
        detail: "",
        now: at(4),
    };
    assert_eq!(store.start_replay(&replay(3)).await.unwrap(), StartOutcome::Changed { found: 4 });
    assert!(store.recent_replay_ids(10).await.unwrap().is_empty(), "a refused replay records nothing");
    match store.start_replay(&replay(4)).await.unwrap() {
        StartOutcome::Started { queued, .. } => assert_eq!(queued, 4),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.recent_replay_ids(10).await.unwrap().len(), 1);
    assert_eq!(store.start_replay(&replay(4)).await.unwrap(), StartOutcome::Changed { found: 0 }, "already replayed");
}

/// Purging resolved leads empties their data but keeps every row and count: the queue health, the dead letters
/// per route and the lead that was not resolved are as before.
async fn purge_keeps_statistics(store: Store) {
    let jobs = dead_letters(&store, 3, "pg").await;
    let two = ReplaySelection { ids: Some(vec![jobs[0].id, jobs[1].id]), filter: None };
    let resolved =
        store.resolve_dead_letters(&two, Resolution::Discarded, "spam", "conformance", Some(2), at(3)).await.unwrap();
    assert_eq!(resolved, ResolveOutcome::Resolved(2));
    let health = store.queue_health(at(10), &[]).await.unwrap();
    let by_route = store.dead_letters_by_route(t0(), at(100)).await.unwrap();
    assert_eq!(store.purge_resolved_leads(at(5), at(10)).await.unwrap(), 2);
    assert_eq!(store.purge_resolved_leads(at(5), at(11)).await.unwrap(), 0, "purged once");
    assert_eq!(store.queue_health(at(10), &[]).await.unwrap(), health);
    assert_eq!(store.dead_letters_by_route(t0(), at(100)).await.unwrap(), by_route);
    let events = store.stored_events().await.unwrap();
    let purged: Vec<bool> = events.iter().map(|e| e.purged).collect();
    assert_eq!(purged, vec![true, true, false]);
    assert_eq!(events[0].payload, serde_json::json!({}));
    assert_eq!(events[2].payload["email"], "pg-2@example.com");
}

/// Counters are recounted from the stored rows and rolled up per hour (summed); a gauge keeps the highest value of
/// its minute; retention deletes only history older than its cut-offs.
async fn metrics_roll_up_and_retention(store: Store) {
    insert(&store, 3, "m", &["crm"]).await;
    let gauge = |value| GaugeReading { metric: "pending", key: "crm".into(), value, keep_highest: true };
    let record = |minute, value, prune| MetricsRecord {
        minute,
        gauges: vec![gauge(value)],
        recount_from: t0(),
        prune,
        fetch_targets: vec![],
    };
    store.record_metrics(&record(t0(), 5.0, None)).await.unwrap();
    store.record_metrics(&record(t0(), 2.0, None)).await.unwrap();
    assert_eq!(store.metric_points("events", "webform", 60).await.unwrap(), vec![(t0(), 3.0)]);
    assert_eq!(store.metric_points("events", "webform", 3600).await.unwrap(), vec![(t0(), 3.0)]);
    assert_eq!(store.metric_points("pending", "crm", 60).await.unwrap(), vec![(t0(), 5.0)], "highest kept");
    // Two days later, with retention of one day for minutes and thirty for hours.
    let later = t0() + Duration::days(2);
    let prune =
        MetricsRetention { minutes_before: later - Duration::days(1), hours_before: later - Duration::days(30) };
    store.record_metrics(&record(later, 1.0, Some(prune))).await.unwrap();
    let minutes = store.metric_points("pending", "crm", 60).await.unwrap();
    assert_eq!(minutes, vec![(later, 1.0)], "the old minute is gone");
    assert_eq!(store.metric_points("events", "webform", 3600).await.unwrap(), vec![(t0(), 3.0)], "the hour stays");
}

/// Speed to CRM is a histogram counter (`speed`, key `{bucket}:{source}`) of each lead's first step that is not a
/// fetch, in the minute it was delivered: a fetch step and a later SMS step are not counted, a recount changes
/// nothing, and the hour is the sum of its minutes.
async fn speed_histogram_counts_first_crm_steps(store: Store) {
    use leadline::store::speed_bucket;
    insert(&store, 2, "sf", &["fetch", "crm", "notify"]).await;
    insert(&store, 3, "sc", &["crm"]).await;
    let deliver = |target: &'static str, when: DateTime<Utc>| {
        let store = store.clone();
        async move {
            let jobs = claim(&store, target, 10, when).await;
            let done: Vec<Completion> =
                jobs.iter().map(|j| finished(j, delivered(&format!("{target}{}", j.event_id)), when)).collect();
            assert_eq!(store.complete(&done).await.unwrap(), jobs.len());
            jobs.len()
        }
    };
    assert_eq!(deliver("fetch", at(1)).await, 2);
    assert_eq!(deliver("crm", at(3)).await, 5, "received at t0, delivered 3 s later");
    assert_eq!(deliver("notify", at(70)).await, 2);
    let record = MetricsRecord {
        minute: at(120),
        gauges: vec![],
        recount_from: t0(),
        prune: None,
        fetch_targets: vec!["fetch".into()],
    };
    for _ in 0..2 {
        store.record_metrics(&record).await.unwrap();
        let speeds: Vec<(DateTime<Utc>, String, f64)> = store
            .metric_buckets(60, 60, t0())
            .await
            .unwrap()
            .into_iter()
            .filter(|b| b.metric == "speed")
            .map(|b| (b.at, b.key, b.sum))
            .collect();
        assert_eq!(speeds, vec![(t0(), format!("{}:webform", speed_bucket(3000)), 5.0)]);
        let hours = store.metric_points("speed", &format!("{}:webform", speed_bucket(3000)), 3600).await.unwrap();
        assert_eq!(hours, vec![(t0(), 5.0)]);
    }
}

/// What the dead-letter page asks: the list (newest first, filtered), the groups by cause and one letter's detail
/// with its attempts — the same answers on both backends.
async fn dead_letter_pages_answer_alike(store: Store) {
    let jobs = dead_letters(&store, 3, "ui").await;
    let open = DeadLetterFilter::default();
    let list = store.dead_letters(&open).await.unwrap();
    let ids: Vec<i64> = list.iter().map(|d| d.delivery_id).collect();
    assert_eq!(ids, jobs.iter().rev().map(|j| j.id).collect::<Vec<_>>(), "newest first");
    let text = DeadLetterFilter { text: Some("UI-1".into()), ..Default::default() };
    assert_eq!(store.dead_letters(&text).await.unwrap().len(), 1, "free text matches the event id, any case");
    let groups = store.dead_letter_groups(&open).await.unwrap();
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].count, 3);
    let detail = store.dead_letter_detail(jobs[0].id).await.unwrap().expect("the letter");
    assert_eq!(detail.attempts_timeline.len(), 1);
    assert_eq!(detail.attempts_timeline[0].http_status, Some(422));
}

/// One test per case and backend: `sqlite::case` and `postgres::case`.
/// Any lead is found by its source id, lead id, CRM id, e-mail (any case), phone fragment or name, newest first;
/// its story has its steps with their attempts and CRM ids, and its overall status.
async fn find_leads_and_their_story(store: Store) {
    let lead = |source_ref: &str, email: &str, phone: &str, name: &str| NewEvent {
        payload: serde_json::json!({"email": email, "phone": phone, "name": name}),
        ..event(source_ref, &["crm"])
    };
    let outcomes = store
        .insert_events(&[
            lead("form-1", "Eve1@Example.com", "+49 151 2345678", "Eve Müller"),
            lead("form-2", "bob@example.com", "0171-99 88 77", "Bob O'Brien"),
            lead("form-3", "carol_x@example.com", "", "Carol"),
        ])
        .await
        .unwrap();
    let ids: Vec<i64> = outcomes.iter().map(InsertOutcome::event_id).collect();
    let jobs = claim(&store, "crm", 10, at(1)).await;
    let job = |event_id: i64| jobs.iter().find(|j| j.event_id == event_id).unwrap();
    store
        .complete(&[
            finished(job(ids[0]), delivered("CRM-777"), at(2)),
            finished(job(ids[1]), dead(ErrorClass::PermanentData), at(2)),
        ])
        .await
        .unwrap();

    let found = |q: &'static str| {
        let store = store.clone();
        async move { store.find_leads(q, 50).await.unwrap().into_iter().map(|m| m.event_id).collect::<Vec<_>>() }
    };
    assert_eq!(found("eve1@example.com").await, vec![ids[0]], "an e-mail in any case");
    assert_eq!(found("0151 234").await, vec![ids[0]], "a phone fragment, spaces and trunk 0 ignored");
    assert_eq!(found("99887").await, vec![ids[1]], "phone digits across dashes and spaces");
    assert_eq!(found("form-2").await, vec![ids[1]], "the source's id");
    assert_eq!(found("CRM-777").await, vec![ids[0]], "the CRM's record id");
    assert_eq!(found("o'brien").await, vec![ids[1]], "a name");
    assert_eq!(found("example.com").await, vec![ids[2], ids[1], ids[0]], "newest first");
    assert!(found("carol%").await.is_empty(), "LIKE wildcards are literal");
    assert_eq!(found("carol_x").await, vec![ids[2]]);
    assert_eq!(found(" ").await, Vec::<i64>::new());
    let by_id = store.find_leads(&ids[2].to_string(), 50).await.unwrap();
    assert!(by_id.iter().any(|m| m.event_id == ids[2]), "the lead's own id");
    if ids[2] < 1000 {
        // A short number is an id, not a digit to look for in every lead's data.
        assert_eq!(by_id.iter().map(|m| m.event_id).collect::<Vec<_>>(), vec![ids[2]]);
    }
    assert!(found("Ev").await.is_empty(), "two letters are too few to look inside the data");
    assert_eq!(store.find_leads("example", 2).await.unwrap().len(), 2, "the limit");

    let statuses: Vec<LeadStatus> =
        store.find_leads("example.com", 50).await.unwrap().into_iter().map(|m| m.status).collect();
    assert_eq!(statuses, vec![LeadStatus::Waiting, LeadStatus::DeadLetter, LeadStatus::Delivered]);

    let story = store.lead_story(ids[0]).await.unwrap().unwrap();
    assert_eq!((story.source_ref.as_str(), story.via.as_str(), story.revision), ("form-1", "webhook", 1));
    assert_eq!(story.status, LeadStatus::Delivered);
    assert_eq!(story.payload["email"], "Eve1@Example.com");
    assert_eq!(story.steps.len(), 1);
    let step = &story.steps[0];
    assert_eq!(
        (step.target.as_str(), step.state.as_str(), step.crm_id.as_deref()),
        ("crm", "delivered", Some("CRM-777"))
    );
    assert_eq!(step.attempts_timeline.len(), 1);
    assert_eq!(step.attempts_timeline[0].http_status, Some(200));
    let dead_story = store.lead_story(ids[1]).await.unwrap().unwrap();
    assert_eq!(dead_story.status, LeadStatus::DeadLetter);
    assert_eq!(dead_story.steps[0].dead_class, Some(ErrorClass::PermanentData));
    assert_eq!(dead_story.steps[0].resolution.as_deref(), Some("open"));
    assert!(store.lead_story(ids[2] + 100).await.unwrap().is_none());
}

/// Poll mode's cursor: a list never polled has none; a pass under way and then a completed pass are kept exactly
/// (an upsert per source and form); polled leads are stored as `poll` and count as the source's live volume,
/// reconciled ones do not.
async fn poll_cursor_keeps_its_place(store: Store) {
    assert_eq!(store.poll_cursor("fb", "7").await.unwrap(), None);
    let mut cursor = leadline::store::PollCursor::new("fb", "7", at(0));
    cursor.pass = Some(leadline::store::PollPass { since: at(-60), after: "QVFIUm".into(), newest: Some(at(30)) });
    cursor.last_poll_at = Some(at(40));
    cursor.next_poll_at = Some(at(100));
    cursor.last_found = 2;
    store.save_poll_cursor(&cursor).await.unwrap();
    assert_eq!(store.poll_cursor("fb", "7").await.unwrap().as_ref(), Some(&cursor));
    // The pass completes: the watermark moves, the place is cleared; a failure is kept with its start.
    cursor.since = at(30);
    cursor.pass = None;
    cursor.last_error = Some("Meta asked to wait".into());
    cursor.failing_since = Some(at(100));
    store.save_poll_cursor(&cursor).await.unwrap();
    let other = leadline::store::PollCursor::new("fb", "8", at(5));
    store.save_poll_cursor(&other).await.unwrap();
    assert_eq!(store.poll_cursors("fb").await.unwrap(), vec![cursor.clone(), other]);
    assert!(store.poll_cursors("list").await.unwrap().is_empty());

    let polled = NewEvent { source: "fb".into(), via: Via::Poll, ..event("p-1", &["crm"]) };
    let reconciled = NewEvent { source: "fb".into(), via: Via::Reconciliation, ..event("r-1", &["crm"]) };
    let hooked = NewEvent { source: "fb".into(), ..event("w-1", &["crm"]) };
    store.insert_events(&[polled, reconciled, hooked]).await.unwrap();
    assert_eq!(store.live_events_since("fb", t0()).await.unwrap(), 2, "webhook and poll, not reconciliation");
    assert_eq!(store.polled_since("fb", t0()).await.unwrap(), 1);
    let vias: Vec<(String, String)> = store
        .stored_events()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.source == "fb")
        .map(|e| (e.source_ref, e.via))
        .collect();
    assert!(vias.contains(&("p-1".into(), "poll".into())), "{vias:?}");
}

macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let fresh = super::sqlite().await;
                    super::$case(fresh.store.clone()).await;
                    fresh.store.close().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let fresh = super::postgres().await;
                    super::$case(fresh.store.clone()).await;
                    fresh.store.close().await;
                }
            )*
        }
    };
}

/// Team mode's shared control state: the breaker moves by compare-and-set (one move wins, a stale probe is taken
/// over), holds only lengthen, the request budget hands out each slot once, and a lease has one holder at a time.
async fn the_team_decides_once(store: Store) {
    use leadline::model::{BreakerState, Transition};
    let tr = |from, to, at| Transition { from, to, at, reason: "test".into() };
    let stale = |at: DateTime<Utc>| at - chrono::Duration::seconds(60);
    // Two processes see the CRM failing: the first move lands, the second finds the breaker open already.
    assert!(store
        .move_breaker("crm", &tr(BreakerState::Closed, BreakerState::Open, at(1)), stale(at(1)))
        .await
        .unwrap());
    assert!(!store
        .move_breaker("crm", &tr(BreakerState::Closed, BreakerState::Open, at(2)), stale(at(2)))
        .await
        .unwrap());
    let c = store.target_controls().await.unwrap();
    assert_eq!((c[0].breaker, c[0].opened_at), (BreakerState::Open, Some(at(1))));
    // One process takes the probe; another cannot while it is fresh, and can once it is older than `stale`.
    assert!(store
        .move_breaker("crm", &tr(BreakerState::Open, BreakerState::HalfOpen, at(10)), stale(at(10)))
        .await
        .unwrap());
    assert!(!store
        .move_breaker("crm", &tr(BreakerState::Open, BreakerState::HalfOpen, at(11)), stale(at(11)))
        .await
        .unwrap());
    assert!(store
        .move_breaker("crm", &tr(BreakerState::Open, BreakerState::HalfOpen, at(100)), stale(at(100)))
        .await
        .unwrap());
    let c = store.target_controls().await.unwrap();
    assert_eq!((c[0].breaker, c[0].opened_at, c[0].changed_at), (BreakerState::HalfOpen, Some(at(1)), at(100)));
    assert!(store
        .move_breaker("crm", &tr(BreakerState::HalfOpen, BreakerState::Closed, at(101)), stale(at(101)))
        .await
        .unwrap());
    let moves: Vec<(String, String)> =
        store.breaker_transitions("crm").await.unwrap().into_iter().map(|t| (t.from_state, t.to_state)).collect();
    assert_eq!(moves.len(), 4, "only the moves that landed are recorded: {moves:?}");
    assert_eq!(store.target_controls().await.unwrap()[0].opened_at, None);

    // Holds only lengthen; a credential hold ends on a reload of secrets.
    store.share_hold("crm", at(50), None).await.unwrap();
    store.share_hold("crm", at(40), None).await.unwrap();
    assert_eq!(store.target_controls().await.unwrap()[0].hold_until, Some(at(50)));
    store.share_hold("crm", at(60), Some("CRM_TOKEN")).await.unwrap();
    let c = store.target_controls().await.unwrap();
    assert_eq!((c[0].hold_until, c[0].hold_credential.as_deref()), (Some(at(60)), Some("CRM_TOKEN")));
    store.end_credential_hold("crm").await.unwrap();
    assert_eq!(store.target_controls().await.unwrap()[0].hold_until, None);

    // The request budget: 10 ms apart, up to the horizon; a second process gets the slots after the first's.
    let gap = chrono::Duration::milliseconds(10);
    let first = store.reserve_pace("crm", at(0), 5, gap, at(0) + chrono::Duration::milliseconds(500)).await.unwrap();
    let second = store.reserve_pace("crm", at(0), 5, gap, at(0) + chrono::Duration::milliseconds(500)).await.unwrap();
    let ms = |g: &leadline::store::PaceGrant| -> Vec<i64> {
        g.slots.iter().map(|s| (*s - at(0)).num_milliseconds()).collect()
    };
    assert_eq!(ms(&first), vec![0, 10, 20, 30, 40]);
    assert_eq!(ms(&second), vec![50, 60, 70, 80, 90]);
    let near_horizon =
        store.reserve_pace("crm", at(0), 100, gap, at(0) + chrono::Duration::milliseconds(120)).await.unwrap();
    assert_eq!(ms(&near_horizon), vec![100, 110, 120]);
    assert_eq!(near_horizon.next_free, at(0) + chrono::Duration::milliseconds(130));
    // Later, an idle budget starts from now, not from the past.
    let later = store.reserve_pace("crm", at(30), 1, gap, at(31)).await.unwrap();
    assert_eq!(later.slots, vec![at(30)]);

    // One holder of a lease at a time; it passes on once it has run out, or when given up.
    assert!(store.take_lease("leader", "a", at(0), at(15)).await.unwrap());
    assert!(!store.take_lease("leader", "b", at(5), at(20)).await.unwrap());
    assert!(store.take_lease("leader", "a", at(5), at(20)).await.unwrap(), "the holder renews");
    assert!(!store.take_lease("leader", "b", at(19), at(34)).await.unwrap());
    assert!(store.take_lease("leader", "b", at(21), at(36)).await.unwrap(), "taken over once run out");
    assert_eq!(store.lease_owner("leader").await.unwrap().as_deref(), Some("b"));
    store.give_up_lease("leader", "a").await.unwrap();
    assert_eq!(store.lease_owner("leader").await.unwrap().as_deref(), Some("b"), "only the holder gives it up");
    store.give_up_lease("leader", "b").await.unwrap();
    assert!(store.take_lease("leader", "c", at(22), at(37)).await.unwrap());
}

conformance! {
    concurrent_claimers_never_share_a_job,
    stale_lease_token_is_ignored,
    rescued_job_comes_back_in_doubt,
    next_step_pending_in_same_commit,
    fetched_payload_replaces_the_lead,
    duplicate_event_stores_nothing,
    a_changed_lead_is_a_new_revision,
    a_batch_is_read_as_one_lead_at_a_time,
    kept_counts_equal_real_counts,
    bench_fill_keeps_counts_exact,
    the_desks_reads_answer_alike,
    crm_link_first_wins,
    make_due_brings_jobs_forward,
    replay_refuses_a_changed_selection,
    purge_keeps_statistics,
    metrics_roll_up_and_retention,
    speed_histogram_counts_first_crm_steps,
    dead_letter_pages_answer_alike,
    find_leads_and_their_story,
    poll_cursor_keeps_its_place,
    the_team_decides_once,
}
