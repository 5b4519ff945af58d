//! Replay: dead letters back through the normal delivery path — previewed, staged, paced, audited.
//!
//! **Preview** counts what a selection (explicit dead letters, or every one matching a filter) would do: how many
//! are eligible, per target; how many are not and why (already resolved, data purged, queued in another running
//! replay, unknown); which time-sensitive steps will run their fallback because the lead is too old. It is one
//! aggregate query, so it stays fast over a million dead letters.
//!
//! **Start** records the replay (who, when, why, the selection, canary size and pace) and its items — each with
//! its prior class and reason, in a fixed order — in one transaction, and refuses when the selection no longer
//! matches the preview (`expected`). Nothing is sent yet.
//!
//! **The runner** ([`runner`]) then sends items back in the background: the canary first (default 10); the rest
//! only once every canary lead was delivered, at `rate_per_second`, never while the target's breaker is open, the
//! target is paused or it rate-limited us in the last seconds, and with a bounded number in flight. Sending back
//! is the normal path: state `pending`, attempts reset, trigger `manual`, replay generation + 1 (fresh
//! idempotency keys, so a CRM that stores answers per key cannot replay a stale error). A replay can be cancelled
//! (what was not sent back stays an open dead letter, untouched) or paused and resumed; every step is an event.
//!
//! **Report**: delivered, failed again with the same reason, failed with a new reason — each item linked to its
//! dead letter.

pub mod fix;
pub mod runner;

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::dlq::{self, DeadLetterFilter};
use crate::store::{from_ms, ms, Store};

/// What to act on: explicit dead letters, or all that match a filter.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(default)]
pub struct ReplaySelection {
    pub ids: Option<Vec<i64>>,
    pub filter: Option<DeadLetterFilter>,
}

/// A time-sensitive step that will run its fallback for leads too old for it.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct FallbackPlan {
    pub target: String,
    pub fallback: String,
    pub max_lead_age_minutes: u64,
    /// Eligible leads older than that.
    pub count: i64,
}

/// Why selected dead letters cannot be replayed.
#[derive(Debug, Clone, Default, Serialize, PartialEq, ts_rs::TS)]
pub struct NotEligible {
    /// Replayed, discarded or fixed by hand before.
    pub already_resolved: i64,
    /// The lead's data was purged (retention).
    pub payload_purged: i64,
    /// Waiting in another replay that is still running.
    pub queued_in_another_replay: i64,
    /// Chosen ids that are not dead letters.
    pub unknown: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayPreview {
    /// Open dead letters that will be sent back.
    pub eligible: i64,
    pub by_target: BTreeMap<String, i64>,
    /// Selected but not eligible (the sum of `reasons`).
    pub not_eligible: i64,
    pub reasons: NotEligible,
    pub fallbacks: Vec<FallbackPlan>,
    /// Eligible leads received more than 24 h ago.
    pub older_than_24h: i64,
    /// The sentence the confirmation shows.
    pub summary: String,
}

/// How to pace a replay; the configured defaults (`[replay]`) apply when left out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(default)]
pub struct ReplayOptions {
    /// Leads sent first; the rest wait until all of these were delivered. 0: no canary.
    pub canary: Option<u32>,
    /// Leads sent back per second after the canary.
    pub rate_per_second: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayReceipt {
    pub replay_id: i64,
    /// Items the replay will send back.
    pub queued: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayEvent {
    pub at: DateTime<Utc>,
    /// `started`, `canary_sent`, `canary_passed`, `canary_failed`, `waiting`, `resumed`, `paused`, `cancelled`,
    /// `finished`.
    pub kind: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayProgress {
    pub replay_id: i64,
    pub created_at: DateTime<Utc>,
    pub actor: String,
    pub reason: String,
    /// The selection as the operator made it (filter or ids).
    #[ts(type = "unknown")]
    pub selection: serde_json::Value,
    /// `running`, `paused`, `cancelled` or `finished`.
    pub status: String,
    /// `canary`, `canary_failed` (paused: a canary lead failed again) or `rest`.
    pub phase: String,
    pub canary_size: i64,
    pub rate_per_second: f64,
    /// Why it is not sending right now, while running (breaker open, rate-limited, paused target).
    pub waiting_for: Option<String>,
    /// Started by Leadline after the target recovered.
    pub auto: bool,
    pub total: i64,
    /// Not sent back yet.
    pub queued: i64,
    pub delivered: i64,
    pub in_progress: i64,
    /// Failed again with the same reason as before.
    pub failed_same_reason: i64,
    /// Failed again, but for a different reason.
    pub failed_new_reason: i64,
    /// Discarded or fixed by hand while the replay ran.
    pub resolved_by_hand: i64,
    /// Ran a time-sensitive step's fallback instead.
    pub fallbacks: i64,
    pub done: bool,
    pub finished_at: Option<DateTime<Utc>>,
    pub events: Vec<ReplayEvent>,
}

/// One item of a replay's report.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayReportItem {
    pub delivery_id: i64,
    pub source: String,
    pub source_ref: String,
    pub target: String,
    /// `delivered`, `in_progress`, `queued`, `failed_same_reason`, `failed_new_reason`, `resolved_by_hand`.
    pub outcome: String,
    pub prior_reason: Option<String>,
    /// The reason it failed this time, when it did.
    pub reason: Option<String>,
    pub fallback_to: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayHistoryEntry {
    pub replay_id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub reason: String,
    pub prior_class: Option<String>,
    pub prior_reason: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("nothing selected: choose dead letters or a filter")]
    EmptySelection,
    #[error("the selection changed since the preview ({expected} expected, {found} now): preview again")]
    SelectionChanged { expected: i64, found: i64 },
    #[error("nothing to replay: none of the selected leads is an open dead letter")]
    NothingEligible,
    #[error("{0}")]
    Invalid(String),
    #[error("no replay with id {0}")]
    NotFound(i64),
    #[error(transparent)]
    Storage(#[from] anyhow::Error),
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Whether any replay is running or paused (only then can a dead letter be queued in one).
async fn any_active(store: &Store) -> anyhow::Result<bool> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM replay WHERE status IN ('running', 'paused')")
        .fetch_one(store.read_pool())
        .await
        .context("cannot read replays")?;
    Ok(n > 0)
}

/// Appends `FROM … WHERE` for the selection's dead letters, whatever their resolution.
fn push_selection(
    q: &mut sqlx::QueryBuilder<'_, sqlx::Sqlite>,
    selection: &ReplaySelection,
) -> Result<(), ReplayError> {
    q.push(" FROM delivery d JOIN inbound_event e ON e.id = d.event_id");
    match (&selection.ids, &selection.filter) {
        (Some(ids), _) if ids.is_empty() => return Err(ReplayError::EmptySelection),
        (Some(ids), filter) => {
            let filter = DeadLetterFilter {
                resolution: Some("all".into()),
                limit: None,
                before_id: None,
                ..filter.clone().unwrap_or_default()
            };
            dlq::push_where(q, &filter);
            q.push(" AND d.id IN (SELECT value FROM json_each(")
                .push_bind(serde_json::to_string(ids).context("ids")?)
                .push("))");
        }
        (None, Some(filter)) => {
            let filter =
                DeadLetterFilter { resolution: Some("all".into()), limit: None, before_id: None, ..filter.clone() };
            dlq::push_where(q, &filter);
        }
        (None, None) => return Err(ReplayError::EmptySelection),
    }
    Ok(())
}

/// The SQL condition (over `d`, `e`) for an open dead letter not waiting in a running replay; with
/// `with_payload`, also one whose data was not purged (a replay needs it, resolving by hand does not).
fn open_condition(check_queued: bool, with_payload: bool) -> String {
    let mut c = String::from("d.resolution = 'open'");
    if with_payload {
        c.push_str(" AND e.purged_at IS NULL");
    }
    if check_queued {
        c.push_str(&format!(" AND {} IS NULL", dlq::QUEUED_IN_REPLAY));
    }
    c
}

/// Time-sensitive targets: (target, fallback, max age in minutes).
fn time_sensitive(config: &Config) -> Vec<(String, String, u64)> {
    config
        .targets
        .iter()
        .filter_map(|(name, t)| Some((name.clone(), t.fallback.clone()?, t.max_lead_age_minutes?)))
        .collect()
}

/// Appends `CASE d.target WHEN … THEN <fallback if the lead is too old> END`.
fn push_fallback_case(
    q: &mut sqlx::QueryBuilder<'_, sqlx::Sqlite>,
    plans: &[(String, String, u64)],
    now: DateTime<Utc>,
) {
    if plans.is_empty() {
        q.push("NULL");
        return;
    }
    q.push("CASE d.target");
    for (target, fallback, minutes) in plans {
        q.push(" WHEN ")
            .push_bind(target.clone())
            .push(" THEN CASE WHEN e.received_at < ")
            .push_bind(ms(now - chrono::Duration::minutes(*minutes as i64)))
            .push(" THEN ")
            .push_bind(fallback.clone())
            .push(" END");
    }
    q.push(" END");
}

/// One line of a preview: (target, category, count, of which received more than 24 h ago, fallback target).
/// Categories: `eligible`, `resolved`, `purged`, `queued`.
type PreviewRow = (String, String, i64, i64, Option<String>);

/// The preview's counts by scanning the selected dead letters (any selection).
async fn preview_by_scan(
    store: &Store,
    selection: &ReplaySelection,
    check_queued: bool,
    plans: &[(String, String, u64)],
    now: DateTime<Utc>,
) -> Result<Vec<PreviewRow>, ReplayError> {
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
        "SELECT d.target, CASE WHEN d.resolution != 'open' THEN 'resolved' WHEN e.purged_at IS NOT NULL THEN 'purged'",
    );
    if check_queued {
        q.push(format!(" WHEN {} IS NOT NULL THEN 'queued'", dlq::QUEUED_IN_REPLAY));
    }
    q.push(" ELSE 'eligible' END AS category, COUNT(*), COALESCE(SUM(e.received_at < ")
        .push_bind(ms(now - chrono::Duration::hours(24)))
        .push("), 0), ");
    push_fallback_case(&mut q, plans, now);
    q.push(" AS fallback");
    push_selection(&mut q, selection)?;
    q.push(" GROUP BY d.target, category, fallback");
    Ok(q.build_query_as().fetch_all(store.read_pool()).await.context("cannot preview replay")?)
}

/// The same counts for a filter the kept `dead_letter_tally` answers, without reading every dead letter: the
/// tally gives the counts by target, resolution and purge; only the dead letters queued in a running replay and
/// those received recently (to tell which are older than 24 h or than a fallback's age) are read, from their
/// own indexes. Equal to [`preview_by_scan`] by construction (`older = eligible − recent`).
async fn preview_by_tally(
    store: &Store,
    filter: &DeadLetterFilter,
    check_queued: bool,
    plans: &[(String, String, u64)],
    now: DateTime<Utc>,
) -> Result<Vec<PreviewRow>, ReplayError> {
    let filter = DeadLetterFilter { resolution: Some("all".into()), limit: None, before_id: None, ..filter.clone() };
    // A NULL resolution counts as open, as in the scan (`d.resolution != 'open'` is not true for it).
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
        "SELECT t.target, CASE WHEN t.resolution NOT IN ('open', '') THEN 'resolved' WHEN t.purged THEN 'purged'
                ELSE 'open' END AS category, SUM(t.n)
           FROM dead_letter_tally t WHERE",
    );
    dlq::push_tally_where(&mut q, &filter, None);
    q.push(" GROUP BY 1, 2");
    let counts: Vec<(String, String, i64)> =
        q.build_query_as().fetch_all(store.read_pool()).await.context("cannot preview replay")?;

    let open_unpurged = " AND COALESCE(d.resolution, 'open') = 'open' AND e.purged_at IS NULL";
    let mut queued: BTreeMap<String, i64> = BTreeMap::new();
    if check_queued {
        let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "SELECT d.target, COUNT(*) FROM delivery d JOIN inbound_event e ON e.id = d.event_id",
        );
        dlq::push_where(&mut q, &filter);
        q.push(open_unpurged);
        q.push(
            " AND d.id IN (SELECT ri.delivery_id FROM replay r JOIN replay_item ri ON ri.replay_id = r.id
                            WHERE r.status IN ('running', 'paused') AND ri.requeued_at IS NULL)
              GROUP BY d.target",
        );
        let rows: Vec<(String, i64)> =
            q.build_query_as().fetch_all(store.read_pool()).await.context("cannot preview replay")?;
        queued.extend(rows);
    }

    // Eligible dead letters received after the earliest cut-off (24 h, or a fallback's age): per target, how many
    // are younger than 24 h and how many are younger than the target's fallback age.
    let day = ms(now - chrono::Duration::hours(24));
    let cutoff = |minutes: u64| ms(now - chrono::Duration::minutes(minutes as i64));
    let earliest = plans.iter().map(|(_, _, m)| cutoff(*m)).fold(day, i64::min);
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new("SELECT d.target, SUM(e.received_at >= ");
    q.push_bind(day).push("), ");
    if plans.is_empty() {
        q.push("0");
    } else {
        q.push("SUM(CASE d.target");
        for (target, _, minutes) in plans {
            q.push(" WHEN ").push_bind(target.clone()).push(" THEN e.received_at >= ").push_bind(cutoff(*minutes));
        }
        q.push(" ELSE 0 END)");
    }
    // The lead's table drives (its time index), each lead's steps are looked up by event.
    q.push(" FROM inbound_event e CROSS JOIN delivery d");
    dlq::push_where(&mut q, &filter);
    q.push(" AND d.event_id = e.id AND e.received_at >= ").push_bind(earliest);
    q.push(open_unpurged);
    if check_queued {
        q.push(format!(" AND {} IS NULL", dlq::QUEUED_IN_REPLAY));
    }
    q.push(" GROUP BY d.target");
    let recent: Vec<(String, i64, i64)> =
        q.build_query_as().fetch_all(store.read_pool()).await.context("cannot preview replay")?;
    let recent: BTreeMap<String, (i64, i64)> = recent.into_iter().map(|(t, day, fb)| (t, (day, fb))).collect();

    let mut rows = Vec::new();
    for (target, category, n) in counts {
        if category != "open" {
            if n > 0 {
                rows.push((target, category, n, 0, None));
            }
            continue;
        }
        let queued_n = queued.get(&target).copied().unwrap_or(0);
        if queued_n > 0 {
            rows.push((target.clone(), "queued".to_string(), queued_n, 0, None));
        }
        let eligible = n - queued_n;
        let (young, young_for_fallback) = recent.get(&target).copied().unwrap_or((0, 0));
        let old = eligible - young;
        let plan = plans.iter().find(|(t, _, _)| *t == target);
        let to_fallback = plan.map_or(0, |_| eligible - young_for_fallback);
        // Rows with a count only, as the scan's GROUP BY gives; `old` rides on either (only its sum is used).
        let stays = eligible - to_fallback;
        if stays > 0 {
            rows.push((target.clone(), "eligible".to_string(), stays, old, None));
        }
        if let (Some((_, fallback, _)), true) = (plan, to_fallback > 0) {
            let old = if stays > 0 { 0 } else { old };
            rows.push((target, "eligible".to_string(), to_fallback, old, Some(fallback.clone())));
        }
    }
    Ok(rows)
}

pub async fn preview(
    store: &Store,
    config: &Config,
    selection: &ReplaySelection,
    now: DateTime<Utc>,
) -> Result<ReplayPreview, ReplayError> {
    let check_queued = any_active(store).await?;
    let plans = time_sensitive(config);
    let rows = match (&selection.ids, &selection.filter) {
        (None, Some(filter)) if dlq::tally_answers(filter) => {
            preview_by_tally(store, filter, check_queued, &plans, now).await?
        }
        _ => preview_by_scan(store, selection, check_queued, &plans, now).await?,
    };

    let mut by_target: BTreeMap<String, i64> = BTreeMap::new();
    let mut reasons = NotEligible::default();
    let mut older = 0;
    let mut fallback_counts: BTreeMap<String, i64> = BTreeMap::new();
    let mut found = 0;
    for (target, category, n, old, fallback) in rows {
        found += n;
        match category.as_str() {
            "eligible" => {
                *by_target.entry(target.clone()).or_default() += n;
                older += old;
                if fallback.is_some() {
                    *fallback_counts.entry(target).or_default() += n;
                }
            }
            "resolved" => reasons.already_resolved += n,
            "purged" => reasons.payload_purged += n,
            _ => reasons.queued_in_another_replay += n,
        }
    }
    if let Some(ids) = &selection.ids {
        let distinct: std::collections::BTreeSet<i64> = ids.iter().copied().collect();
        reasons.unknown = (distinct.len() as i64 - found).max(0);
    }
    let fallbacks: Vec<FallbackPlan> = plans
        .iter()
        .filter_map(|(target, fallback, minutes)| {
            let count = fallback_counts.get(target).copied().unwrap_or(0);
            (count > 0).then(|| FallbackPlan {
                target: target.clone(),
                fallback: fallback.clone(),
                max_lead_age_minutes: *minutes,
                count,
            })
        })
        .collect();
    let eligible: i64 = by_target.values().sum();
    let not_eligible =
        reasons.already_resolved + reasons.payload_purged + reasons.queued_in_another_replay + reasons.unknown;
    let summary = summarize(eligible, &by_target, &reasons, &fallbacks, older);
    Ok(ReplayPreview { eligible, by_target, not_eligible, reasons, fallbacks, older_than_24h: older, summary })
}

/// The confirmation's sentence: what will happen, in words.
pub fn summarize(
    eligible: i64,
    by_target: &BTreeMap<String, i64>,
    reasons: &NotEligible,
    fallbacks: &[FallbackPlan],
    older: i64,
) -> String {
    let targets = by_target
        .iter()
        .map(|(t, c)| if by_target.len() == 1 { t.clone() } else { format!("{t} ({c})") })
        .collect::<Vec<_>>()
        .join(" and ");
    let mut s = if eligible == 0 {
        "Nothing to replay: no selected lead is an open dead letter.".to_string()
    } else {
        format!("Replay {} to {targets}?", plural(eligible, "lead", "leads"))
    };
    for f in fallbacks {
        s.push_str(&format!(
            " {} older than {} min for {}: they get {} instead.",
            plural(f.count, "lead is", "leads are"),
            f.max_lead_age_minutes,
            f.target,
            f.fallback
        ));
    }
    if older > 0 && fallbacks.is_empty() {
        s.push_str(&format!(" {} older than 24 h.", plural(older, "lead is", "leads are")));
    }
    let skipped: Vec<String> = [
        (reasons.already_resolved, "already resolved"),
        (reasons.payload_purged, "with purged data"),
        (reasons.queued_in_another_replay, "queued in another replay"),
        (reasons.unknown, "unknown"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, why)| format!("{n} {why}"))
    .collect();
    if !skipped.is_empty() {
        s.push_str(&format!(" Skipped: {}.", skipped.join(", ")));
    }
    s
}

/// Records the replay and its items (nothing is sent yet; the runner does that). `expected` is the preview's
/// `eligible`: if the selection changed since, nothing happens and `SelectionChanged` says so.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    store: &Store,
    config: &Config,
    selection: &ReplaySelection,
    expected: i64,
    options: &ReplayOptions,
    actor: &str,
    reason: &str,
    auto: bool,
    now: DateTime<Utc>,
) -> Result<ReplayReceipt, ReplayError> {
    let canary = options.canary.unwrap_or(config.replay.canary_size);
    let rate = options.rate_per_second.unwrap_or(config.replay.rate_per_second);
    if !(rate > 0.0 && rate <= 10_000.0) {
        return Err(ReplayError::Invalid("the pace must be between 0 and 10,000 leads a second".into()));
    }
    let check_queued = any_active(store).await?;
    let plans = time_sensitive(config);
    let mut tx = store.begin_write().await?;
    let (replay_id,): (i64,) = sqlx::query_as(
        "INSERT INTO replay (created_at, actor, reason, selection, requested, requeued, status, phase, canary_size,
                             rate_per_second, auto)
         VALUES (?, ?, ?, ?, ?, 0, 'running', ?, ?, ?, ?) RETURNING id",
    )
    .bind(ms(now))
    .bind(actor)
    .bind(reason)
    .bind(serde_json::to_string(selection).context("selection")?)
    .bind(expected)
    .bind(if canary > 0 { "canary" } else { "rest" })
    .bind(i64::from(canary))
    .bind(rate)
    .bind(auto)
    .fetch_one(&mut *tx)
    .await
    .context("cannot record replay")?;
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
        "INSERT INTO replay_item (replay_id, delivery_id, prior_class, prior_reason, seq, fallback_to) SELECT ",
    );
    q.push_bind(replay_id).push(", d.id, d.dead_class, d.dead_reason, ROW_NUMBER() OVER (ORDER BY d.id), ");
    push_fallback_case(&mut q, &plans, now);
    push_selection(&mut q, selection)?;
    q.push(format!(" AND {}", open_condition(check_queued, true)));
    let queued = q.build().execute(&mut *tx).await.context("cannot record replay items")?.rows_affected() as i64;
    if queued != expected {
        // Dropping the transaction rolls everything back.
        return Err(ReplayError::SelectionChanged { expected, found: queued });
    }
    if queued == 0 {
        return Err(ReplayError::NothingEligible);
    }
    sqlx::query("UPDATE replay SET requeued = ? WHERE id = ?")
        .bind(queued)
        .bind(replay_id)
        .execute(&mut *tx)
        .await
        .context("cannot finish replay record")?;
    let detail = format!(
        "{} queued by {actor}: {}; {}, then {rate} a second.",
        plural(queued, "lead", "leads"),
        reason,
        if canary > 0 { format!("canary of {canary} first") } else { "no canary".into() }
    );
    event(&mut tx, replay_id, now, "started", &detail).await?;
    tx.commit().await.context("cannot commit replay")?;
    tracing::info!(replay_id, queued, actor, reason, "replay started");
    Ok(ReplayReceipt { replay_id, queued })
}

pub(crate) async fn event(
    tx: &mut sqlx::SqliteConnection,
    replay_id: i64,
    at: DateTime<Utc>,
    kind: &str,
    detail: &str,
) -> anyhow::Result<()> {
    sqlx::query("INSERT INTO replay_event (replay_id, at, kind, detail) VALUES (?, ?, ?, ?)")
        .bind(replay_id)
        .bind(ms(at))
        .bind(kind)
        .bind(detail)
        .execute(&mut *tx)
        .await
        .context("cannot record replay event")?;
    Ok(())
}

/// Stops a replay: what was not sent back stays an open dead letter, untouched; what was sent goes on.
pub async fn cancel(store: &Store, replay_id: i64, actor: &str, now: DateTime<Utc>) -> Result<(), ReplayError> {
    set_status(
        store,
        replay_id,
        &["running", "paused"],
        "cancelled",
        "cancelled",
        &format!("cancelled by {actor}"),
        now,
    )
    .await
}

/// Pauses a running replay (nothing more is sent back until resumed).
pub async fn pause(store: &Store, replay_id: i64, actor: &str, now: DateTime<Utc>) -> Result<(), ReplayError> {
    set_status(store, replay_id, &["running"], "paused", "paused", &format!("paused by {actor}"), now).await
}

/// Resumes a paused replay — also one the canary stopped, which then goes on past the canary.
pub async fn resume(store: &Store, replay_id: i64, actor: &str, now: DateTime<Utc>) -> Result<(), ReplayError> {
    set_status(store, replay_id, &["paused"], "running", "resumed", &format!("resumed by {actor}"), now).await
}

async fn set_status(
    store: &Store,
    replay_id: i64,
    from: &[&str],
    to: &str,
    kind: &str,
    detail: &str,
    now: DateTime<Utc>,
) -> Result<(), ReplayError> {
    let mut tx = store.begin_write().await?;
    let current: Option<(String,)> = sqlx::query_as("SELECT status FROM replay WHERE id = ?")
        .bind(replay_id)
        .fetch_optional(&mut *tx)
        .await
        .context("cannot read replay")?;
    let Some((status,)) = current else { return Err(ReplayError::NotFound(replay_id)) };
    if !from.contains(&status.as_str()) {
        return Err(ReplayError::Invalid(format!("replay {replay_id} is {status}: it cannot be {kind}")));
    }
    // A replay the canary stopped goes on past the canary when resumed: a person looked and decided.
    sqlx::query(
        "UPDATE replay SET status = ?1, waiting_for = NULL,
                finished_at = CASE WHEN ?1 = 'cancelled' THEN ?2 ELSE finished_at END,
                phase = CASE WHEN ?1 = 'running' AND phase = 'canary_failed' THEN 'rest' ELSE phase END
          WHERE id = ?3",
    )
    .bind(to)
    .bind(ms(now))
    .bind(replay_id)
    .execute(&mut *tx)
    .await
    .context("cannot change replay status")?;
    event(&mut tx, replay_id, now, kind, detail).await?;
    tx.commit().await.context("cannot commit replay status")?;
    Ok(())
}

type Head = (i64, String, String, String, String, String, i64, f64, Option<String>, bool, Option<i64>);

pub async fn progress(store: &Store, replay_id: i64) -> anyhow::Result<Option<ReplayProgress>> {
    let head: Option<Head> = sqlx::query_as(
        "SELECT created_at, actor, reason, selection, status, phase, canary_size, rate_per_second, waiting_for, auto,
                finished_at FROM replay WHERE id = ?",
    )
    .bind(replay_id)
    .fetch_optional(store.read_pool())
    .await
    .context("cannot read replay")?;
    let Some((created_at, actor, reason, selection, status, phase, canary_size, rate, waiting_for, auto, finished)) =
        head
    else {
        return Ok(None);
    };
    type Counts = (i64, i64, i64, i64, i64, i64, i64, i64);
    let (total, queued, delivered, in_progress, same, new, by_hand, fallbacks): Counts = sqlx::query_as(
        "SELECT COUNT(*),
                COALESCE(SUM(r.requeued_at IS NULL), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND d.state = 'delivered'), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND d.state IN ('pending', 'running', 'waiting')), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND d.state = 'dead' AND d.resolution = 'open'
                             AND d.dead_reason IS r.prior_reason), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND d.state = 'dead' AND d.resolution = 'open'
                             AND d.dead_reason IS NOT r.prior_reason), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND d.state = 'dead' AND d.resolution != 'open'), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND r.fallback_to IS NOT NULL), 0)
           FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
          WHERE r.replay_id = ?",
    )
    .bind(replay_id)
    .fetch_one(store.read_pool())
    .await
    .context("cannot read replay progress")?;
    let events: Vec<(i64, String, String)> =
        sqlx::query_as("SELECT at, kind, detail FROM replay_event WHERE replay_id = ? ORDER BY id DESC LIMIT 100")
            .bind(replay_id)
            .fetch_all(store.read_pool())
            .await
            .context("cannot read replay events")?;
    let done = matches!(status.as_str(), "finished" | "cancelled") && in_progress == 0;
    Ok(Some(ReplayProgress {
        replay_id,
        created_at: from_ms(created_at),
        actor,
        reason,
        selection: serde_json::from_str(&selection).unwrap_or_default(),
        status,
        phase,
        canary_size,
        rate_per_second: rate,
        waiting_for,
        auto,
        total,
        queued,
        delivered,
        in_progress,
        failed_same_reason: same,
        failed_new_reason: new,
        resolved_by_hand: by_hand,
        fallbacks,
        done,
        finished_at: finished.map(from_ms),
        events: events
            .into_iter()
            .rev()
            .map(|(at, kind, detail)| ReplayEvent { at: from_ms(at), kind, detail })
            .collect(),
    }))
}

/// The most recent replays, newest first.
pub async fn recent(store: &Store, limit: u32) -> anyhow::Result<Vec<ReplayProgress>> {
    let ids: Vec<(i64,)> = sqlx::query_as("SELECT id FROM replay ORDER BY id DESC LIMIT ?")
        .bind(i64::from(limit))
        .fetch_all(store.read_pool())
        .await
        .context("cannot list replays")?;
    let mut out = Vec::new();
    for (id,) in ids {
        if let Some(p) = progress(store, id).await? {
            out.push(p);
        }
    }
    Ok(out)
}

/// The items of a replay with their outcome, optionally only one outcome; failures first.
pub async fn report(
    store: &Store,
    replay_id: i64,
    outcome: Option<&str>,
    limit: u32,
) -> anyhow::Result<Vec<ReplayReportItem>> {
    type ItemRow = (i64, String, String, String, String, Option<String>, Option<String>, Option<String>);
    let rows: Vec<ItemRow> = sqlx::query_as(
        "SELECT * FROM (
               SELECT d.id, e.source, e.source_ref, d.target,
                      CASE WHEN r.requeued_at IS NULL THEN 'queued'
                           WHEN d.state = 'delivered' THEN 'delivered'
                           WHEN d.state IN ('pending', 'running', 'waiting') THEN 'in_progress'
                           WHEN d.resolution != 'open' THEN 'resolved_by_hand'
                           WHEN d.dead_reason IS r.prior_reason THEN 'failed_same_reason'
                           ELSE 'failed_new_reason' END AS outcome,
                      r.prior_reason,
                      CASE WHEN d.state = 'dead' THEN d.dead_reason END,
                      r.fallback_to
                 FROM replay_item r JOIN delivery d ON d.id = r.delivery_id JOIN inbound_event e ON e.id = d.event_id
                WHERE r.replay_id = ?)
              WHERE ? IS NULL OR outcome = ?
              ORDER BY CASE outcome WHEN 'failed_new_reason' THEN 0 WHEN 'failed_same_reason' THEN 1 ELSE 2 END, id
              LIMIT ?",
    )
    .bind(replay_id)
    .bind(outcome)
    .bind(outcome)
    .bind(i64::from(limit))
    .fetch_all(store.read_pool())
    .await
    .context("cannot read replay report")?;
    Ok(rows
        .into_iter()
        .map(|(delivery_id, source, source_ref, target, outcome, prior_reason, reason, fallback_to)| ReplayReportItem {
            delivery_id,
            source,
            source_ref,
            target,
            outcome,
            prior_reason,
            reason,
            fallback_to,
        })
        .collect())
}

pub async fn history(store: &Store, delivery_id: i64) -> anyhow::Result<Vec<ReplayHistoryEntry>> {
    type HistoryRow = (i64, i64, String, String, Option<String>, Option<String>);
    let rows: Vec<HistoryRow> = sqlx::query_as(
        "SELECT r.id, r.created_at, r.actor, r.reason, i.prior_class, i.prior_reason
           FROM replay_item i JOIN replay r ON r.id = i.replay_id
          WHERE i.delivery_id = ? ORDER BY r.id",
    )
    .bind(delivery_id)
    .fetch_all(store.read_pool())
    .await
    .context("cannot read replay history")?;
    Ok(rows
        .into_iter()
        .map(|(replay_id, at, actor, reason, prior_class, prior_reason)| ReplayHistoryEntry {
            replay_id,
            at: from_ms(at),
            actor,
            reason,
            prior_class,
            prior_reason,
        })
        .collect())
}

/// Marks the selection's open dead letters as resolved by hand — `discarded` (not wanted: spam, a test lead) or
/// `fixed_manually` (someone entered it in the CRM) — with who, when and why. Returns how many.
pub async fn resolve(
    store: &Store,
    selection: &ReplaySelection,
    resolution: &str,
    note: &str,
    actor: &str,
    expected: Option<i64>,
    now: DateTime<Utc>,
) -> Result<i64, ReplayError> {
    if !matches!(resolution, "discarded" | "fixed_manually") {
        return Err(ReplayError::Invalid(format!(
            "`{resolution}` is not a resolution: use discarded or fixed_manually"
        )));
    }
    if note.trim().is_empty() {
        return Err(ReplayError::Invalid("say why: the note is kept with each dead letter".into()));
    }
    let check_queued = any_active(store).await?;
    let mut tx = store.begin_write().await?;
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new("UPDATE delivery SET resolution = ");
    q.push_bind(resolution.to_string())
        .push(", resolved_at = ")
        .push_bind(ms(now))
        .push(", resolved_by = ")
        .push_bind(actor.to_string())
        .push(", resolution_note = ")
        .push_bind(note.trim().to_string())
        .push(" WHERE id IN (SELECT d.id");
    push_selection(&mut q, selection)?;
    q.push(format!(" AND {})", open_condition(check_queued, false)));
    let n = q.build().execute(&mut *tx).await.context("cannot resolve dead letters")?.rows_affected() as i64;
    if let Some(expected) = expected {
        if n != expected {
            return Err(ReplayError::SelectionChanged { expected, found: n });
        }
    }
    tx.commit().await.context("cannot commit resolution")?;
    tracing::info!(resolution, n, actor, "dead letters resolved by hand");
    Ok(n)
}

/// Purges the data of leads whose dead letters were resolved by hand more than `days` ago and that have nothing
/// left to deliver. Rows, attempts and statistics stay; fixes lose their before/after values. Returns how many
/// leads were purged.
pub async fn purge_resolved(store: &Store, days: u64, now: DateTime<Utc>) -> anyhow::Result<u64> {
    if days == 0 {
        return Ok(0);
    }
    let cutoff = ms(now - chrono::Duration::days(days as i64));
    let mut tx = store.begin_write().await?;
    let ids: Vec<(i64,)> = sqlx::query_as(
        "SELECT DISTINCT d.event_id FROM delivery d JOIN inbound_event e ON e.id = d.event_id
          WHERE d.resolved_at IS NOT NULL AND d.resolved_at < ? AND d.state = 'dead'
            AND d.resolution IN ('discarded', 'fixed_manually') AND e.purged_at IS NULL
            AND NOT EXISTS (SELECT 1 FROM delivery o WHERE o.event_id = d.event_id
                             AND (o.state IN ('pending', 'running', 'waiting')
                                  OR (o.state = 'dead' AND o.resolution = 'open')))
          LIMIT 10000",
    )
    .bind(cutoff)
    .fetch_all(&mut *tx)
    .await
    .context("cannot find leads to purge")?;
    let list = serde_json::to_string(&ids.iter().map(|r| r.0).collect::<Vec<_>>()).context("ids")?;
    let n = sqlx::query(
        "UPDATE inbound_event SET payload = '{}', original_payload = NULL, purged_at = ?
          WHERE id IN (SELECT value FROM json_each(?))",
    )
    .bind(ms(now))
    .bind(&list)
    .execute(&mut *tx)
    .await
    .context("cannot purge payloads")?
    .rows_affected();
    sqlx::query(
        "UPDATE payload_fix SET before = 'null', after = 'null' WHERE event_id IN (SELECT value FROM json_each(?))",
    )
    .bind(&list)
    .execute(&mut *tx)
    .await
    .context("cannot purge fixes")?;
    tx.commit().await.context("cannot commit purge")?;
    if n > 0 {
        tracing::info!(leads = n, days, "purged the data of leads resolved by hand");
    }
    Ok(n)
}

/// The open dead letters the selection holds now: (delivery id, event id). For fixes.
pub async fn selected_events(store: &Store, selection: &ReplaySelection) -> Result<Vec<(i64, i64)>, ReplayError> {
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new("SELECT d.id, d.event_id");
    push_selection(&mut q, selection)?;
    q.push(" AND d.resolution = 'open' AND e.purged_at IS NULL ORDER BY d.id");
    Ok(q.build_query_as().fetch_all(store.read_pool()).await.context("cannot read the selection")?)
}
