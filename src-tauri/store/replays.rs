//! Replays (`replay`, `replay_item`, `replay_event`): starting a replay with its items, the runner's state (counts,
//! pacing, sending items back, canary and finish), the report and history. What a replay would do is counted in
//! `previews.rs`; fixes to a lead's data are `fixes.rs`.
//!
//! Selections are turned into SQL by `dead_letters.rs`'s builders; lists of ids are `json_each` on SQLite and
//! `= ANY` on PostgreSQL.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::dead_letters::{open_condition, push_selection, Dialect, ReplaySelection, Sql, QUEUED_IN_REPLAY};
use super::previews::{push_fallback_case, FallbackRule};
use super::{from_ms, ms, Store};
use crate::model::{decode, ErrorClass, ReplayEventKind, ReplayOutcome, ReplayPhase, ReplayStatus};

// ---------------------------------------------------------------------------------------------------------------
// Types

/// A replay to record.
#[derive(Debug, Clone)]
pub struct NewReplay<'a> {
    pub selection: &'a ReplaySelection,
    /// What the preview promised: the replay is recorded only if the selection still holds exactly that many.
    pub expected: i64,
    pub actor: &'a str,
    pub reason: &'a str,
    /// Canary size (0: none).
    pub canary: u32,
    pub rate_per_second: f64,
    pub auto: bool,
    pub fallbacks: &'a [FallbackRule],
    /// The `started` event's detail.
    pub detail: &'a str,
    pub now: DateTime<Utc>,
}

/// How recording a replay went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOutcome {
    Started {
        replay_id: i64,
        queued: i64,
    },
    /// The selection holds `found` eligible dead letters, not the expected number: nothing was recorded.
    Changed {
        found: i64,
    },
    /// The selection holds no eligible dead letter: nothing was recorded.
    NothingEligible,
}

/// How a status change went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusChange {
    Changed,
    NotFound,
    /// The replay's status was this, not one the change starts from: nothing changed.
    Refused(ReplayStatus),
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayEvent {
    pub at: DateTime<Utc>,
    pub kind: ReplayEventKind,
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
    pub status: ReplayStatus,
    pub phase: ReplayPhase,
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
    /// Leads whose data a person corrected (a fix-and-replay's, or fixed before).
    pub fixed: i64,
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
    pub outcome: ReplayOutcome,
    pub prior_reason: Option<String>,
    /// The reason it failed this time, when it did.
    pub reason: Option<String>,
    pub fallback_to: Option<String>,
    /// A person corrected the lead's data before it went again.
    pub fixed: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayHistoryEntry {
    pub replay_id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub reason: String,
    pub prior_class: Option<ErrorClass>,
    pub prior_reason: Option<String>,
}

/// A running replay as the runner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningReplay {
    pub id: i64,
    pub phase: ReplayPhase,
    pub canary_size: i64,
    pub rate_per_second: f64,
    pub waiting_for: Option<String>,
    pub auto: bool,
}

/// A replay's items counted for the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayItemCounts {
    /// Sent back.
    pub sent: i64,
    /// Sent back and not finished.
    pub unfinished: i64,
    /// Sent back and dead again (open).
    pub failed: i64,
    /// Not sent back yet.
    pub queued: i64,
}

/// An item waiting to be sent back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedItem {
    pub delivery_id: i64,
    pub target: String,
    pub fallback_to: Option<String>,
}

type Head = (i64, String, String, String, String, String, i64, f64, Option<String>, i64, Option<i64>);
type Counts = (i64, i64, i64, i64, i64, i64, i64, i64, i64);
type ItemRow = (i64, String, String, String, String, Option<String>, Option<String>, Option<String>, Option<i64>);
type HistoryRow = (i64, i64, String, String, Option<String>, Option<String>);

/// `1` when `condition` holds, else `0`, summed as BIGINT (portable: PostgreSQL sums no booleans).
fn count_if(condition: &str) -> String {
    format!("CAST(COALESCE(SUM(CASE WHEN {condition} THEN 1 ELSE 0 END), 0) AS BIGINT)")
}

/// Whether a step's history has an attempt that may have reached the target without a definite answer (no
/// answer, a rescued lease, an ambiguous outcome), over `delivery`.
pub(super) const UNCERTAIN: &str = "(in_doubt != 0 OR EXISTS (SELECT 1 FROM attempt a
        WHERE a.delivery_id = delivery.id
          AND (a.outcome = 'rescued' OR a.class = 'ambiguous'
               OR (a.http_status IS NULL AND lower(a.reason) LIKE '%no answer (%'))))";

// ---------------------------------------------------------------------------------------------------------------
// Operations

impl Store {
    /// Records a replay and its items (each with its prior class and reason, in delivery-id order) and its
    /// `started` event in one transaction, if the selection still holds exactly `expected` eligible dead
    /// letters. Nothing is sent back yet.
    pub async fn start_replay(&self, replay: &NewReplay<'_>) -> anyhow::Result<StartOutcome> {
        dispatch!(self, start_replay(replay))
    }

    /// Moves a replay from one of `from` to `to` and records the event `kind`, in one transaction. Resuming a
    /// replay the canary stopped moves it past the canary.
    pub async fn change_replay_status(
        &self,
        replay_id: i64,
        from: &[ReplayStatus],
        to: ReplayStatus,
        kind: ReplayEventKind,
        detail: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<StatusChange> {
        dispatch!(self, change_replay_status(replay_id, from, to, kind, detail, now))
    }

    /// A replay with its counts and last 100 events; `None` when there is no such replay.
    pub async fn replay_progress(&self, replay_id: i64) -> anyhow::Result<Option<ReplayProgress>> {
        dispatch!(self, replay_progress(replay_id))
    }

    /// The ids of the most recent replays, newest first.
    pub async fn recent_replay_ids(&self, limit: u32) -> anyhow::Result<Vec<i64>> {
        dispatch!(self, recent_replay_ids(limit))
    }

    /// The items of a replay with their outcome, optionally only one outcome; failures first.
    pub async fn replay_report(
        &self,
        replay_id: i64,
        outcome: Option<ReplayOutcome>,
        limit: u32,
    ) -> anyhow::Result<Vec<ReplayReportItem>> {
        dispatch!(self, replay_report(replay_id, outcome, limit))
    }

    /// The replays a delivery was part of, oldest first.
    pub async fn replay_history(&self, delivery_id: i64) -> anyhow::Result<Vec<ReplayHistoryEntry>> {
        dispatch!(self, replay_history(delivery_id))
    }

    /// The running replays, oldest first.
    pub async fn running_replays(&self) -> anyhow::Result<Vec<RunningReplay>> {
        dispatch!(self, running_replays())
    }

    /// A replay's items counted for the runner.
    pub async fn replay_item_counts(&self, replay_id: i64) -> anyhow::Result<ReplayItemCounts> {
        dispatch!(self, replay_item_counts(replay_id))
    }

    /// Records an event of a replay.
    pub async fn record_replay_event(
        &self,
        replay_id: i64,
        at: DateTime<Utc>,
        kind: ReplayEventKind,
        detail: &str,
    ) -> anyhow::Result<()> {
        dispatch!(self, record_replay_event(replay_id, at, kind, detail))
    }

    /// Up to `limit` distinct reasons of the sent-back items that are dead again.
    pub async fn replay_failure_reasons(&self, replay_id: i64, limit: u32) -> anyhow::Result<Vec<String>> {
        dispatch!(self, replay_failure_reasons(replay_id, limit))
    }

    /// Ends a replay's canary: on to the rest (`canary_passed`), or, when `failed`, paused in phase
    /// `canary_failed` (`canary_failed`); with the event, in one transaction.
    pub async fn end_replay_canary(
        &self,
        replay_id: i64,
        failed: bool,
        detail: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        dispatch!(self, end_replay_canary(replay_id, failed, detail, now))
    }

    /// Records what a running replay waits for now (`None`: nothing) with the event `kind`, in one transaction.
    pub async fn set_replay_waiting(
        &self,
        replay_id: i64,
        waiting_for: Option<&str>,
        kind: ReplayEventKind,
        detail: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        dispatch!(self, set_replay_waiting(replay_id, waiting_for, kind, detail, now))
    }

    /// Up to `limit` items of a replay not sent back yet, in order.
    pub async fn queued_replay_items(&self, replay_id: i64, limit: u32) -> anyhow::Result<Vec<QueuedItem>> {
        dispatch!(self, queued_replay_items(replay_id, limit))
    }

    /// Sends items of a replay back through the normal path in one transaction: each still-open dead letter
    /// becomes pending now with attempts reset, trigger `manual`, on its fallback target if the item has one;
    /// a step whose every answer was a definite error gets a fresh idempotency key (replay generation + 1),
    /// one that may have reached the target keeps its key and its doubt. The items are marked sent.
    pub async fn send_back_replay_items(
        &self,
        replay_id: i64,
        delivery_ids: &[i64],
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        dispatch!(self, send_back_replay_items(replay_id, delivery_ids, now))
    }

    /// Marks a replay finished with its `finished` event, in one transaction.
    pub async fn finish_replay(&self, replay_id: i64, detail: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
        dispatch!(self, finish_replay(replay_id, detail, now))
    }

    /// The open dead letters of `target` an auto-replay takes: setup and outage classes, dead in
    /// `[since, before)`, with their data, not queued in a running replay and never in an auto-replay.
    pub async fn auto_replay_candidates(
        &self,
        target: &str,
        since: DateTime<Utc>,
        before: DateTime<Utc>,
    ) -> anyhow::Result<Vec<i64>> {
        dispatch!(self, auto_replay_candidates(target, since, before))
    }
}

backends! {
    shared {
        pub async fn start_replay(db: &Db, replay: &NewReplay<'_>) -> anyhow::Result<StartOutcome> {
            let check_queued = any_replay_active(db).await?;
            let mut tx = db.begin_write().await?;
            let (replay_id,): (i64,) = sqlx::query_as(
                "INSERT INTO replay (created_at, actor, reason, selection, requested, requeued, status, phase,
                                     canary_size, rate_per_second, auto)
                 VALUES ($1, $2, $3, $4, $5, 0, 'running', $6, $7, $8, $9) RETURNING id",
            )
            .bind(ms(replay.now))
            .bind(replay.actor)
            .bind(replay.reason)
            .bind(serde_json::to_string(replay.selection).context("selection")?)
            .bind(replay.expected)
            .bind(if replay.canary > 0 { ReplayPhase::Canary } else { ReplayPhase::Rest }.as_str())
            .bind(i64::from(replay.canary))
            .bind(replay.rate_per_second)
            .bind(i64::from(replay.auto))
            .fetch_one(&mut *tx)
            .await
            .context("cannot record replay")?;
            let mut items = Sql::new(
                DIALECT,
                "INSERT INTO replay_item (replay_id, delivery_id, prior_class, prior_reason, seq, fallback_to) SELECT ",
            );
            items.bind(replay_id).push(", d.id, d.dead_class, d.dead_reason, ROW_NUMBER() OVER (ORDER BY d.id), ");
            push_fallback_case(&mut items, replay.fallbacks, replay.now);
            push_selection(&mut items, replay.selection)?;
            items.push(&format!(" AND {}", open_condition(check_queued, true)));
            let queued = built(&items).execute(&mut *tx).await.context("cannot record replay items")?.rows_affected() as i64;
            if queued != replay.expected {
                // Dropping the transaction rolls everything back.
                return Ok(StartOutcome::Changed { found: queued });
            }
            if queued == 0 {
                return Ok(StartOutcome::NothingEligible);
            }
            sqlx::query("UPDATE replay SET requeued = $1 WHERE id = $2")
                .bind(queued)
                .bind(replay_id)
                .execute(&mut *tx)
                .await
                .context("cannot finish replay record")?;
            event_in(&mut tx, replay_id, replay.now, ReplayEventKind::Started, replay.detail).await?;
            tx.commit().await.context("cannot commit replay")?;
            Ok(StartOutcome::Started { replay_id, queued })
        }

        async fn event_in(
            tx: &mut sqlx::Transaction<'static, DbKind>,
            replay_id: i64,
            at: DateTime<Utc>,
            kind: ReplayEventKind,
            detail: &str,
        ) -> anyhow::Result<()> {
            sqlx::query("INSERT INTO replay_event (replay_id, at, kind, detail) VALUES ($1, $2, $3, $4)")
                .bind(replay_id)
                .bind(ms(at))
                .bind(kind.as_str())
                .bind(detail)
                .execute(&mut **tx)
                .await
                .context("cannot record replay event")?;
            Ok(())
        }

        pub async fn change_replay_status(
            db: &Db,
            replay_id: i64,
            from: &[ReplayStatus],
            to: ReplayStatus,
            kind: ReplayEventKind,
            detail: &str,
            now: DateTime<Utc>,
        ) -> anyhow::Result<StatusChange> {
            let mut tx = db.begin_write().await?;
            let current: Option<(String,)> = sqlx::query_as("SELECT status FROM replay WHERE id = $1")
                .bind(replay_id)
                .fetch_optional(&mut *tx)
                .await
                .context("cannot read replay")?;
            let Some((status,)) = current else { return Ok(StatusChange::NotFound) };
            let status: ReplayStatus = decode(&status)?;
            if !from.contains(&status) {
                return Ok(StatusChange::Refused(status));
            }
            // A replay the canary stopped goes on past the canary when resumed: a person looked and decided.
            sqlx::query(
                "UPDATE replay SET status = $1, waiting_for = NULL,
                        finished_at = CASE WHEN $1 = 'cancelled' THEN $2 ELSE finished_at END,
                        phase = CASE WHEN $1 = 'running' AND phase = 'canary_failed' THEN 'rest' ELSE phase END
                  WHERE id = $3",
            )
            .bind(to.as_str())
            .bind(ms(now))
            .bind(replay_id)
            .execute(&mut *tx)
            .await
            .context("cannot change replay status")?;
            event_in(&mut tx, replay_id, now, kind, detail).await?;
            tx.commit().await.context("cannot commit replay status")?;
            Ok(StatusChange::Changed)
        }

        pub async fn replay_progress(db: &Db, replay_id: i64) -> anyhow::Result<Option<ReplayProgress>> {
            let head: Option<Head> = sqlx::query_as(
                "SELECT created_at, actor, reason, selection, status, phase, canary_size, rate_per_second, waiting_for,
                        auto, finished_at FROM replay WHERE id = $1",
            )
            .bind(replay_id)
            .fetch_optional(db.reader())
            .await
            .context("cannot read replay")?;
            let Some((created_at, actor, reason, selection, status, phase, canary_size, rate, waiting_for, auto, finished)) =
                head
            else {
                return Ok(None);
            };
            let sent = "r.requeued_at IS NOT NULL";
            let sql = format!(
                "SELECT COUNT(*), {}, {}, {}, {}, {}, {}, {}, {}
                   FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
                   JOIN inbound_event e ON e.id = d.event_id
                  WHERE r.replay_id = $1",
                count_if("r.requeued_at IS NULL"),
                count_if(&format!("{sent} AND d.state = 'delivered'")),
                count_if(&format!("{sent} AND d.state IN ('pending', 'running', 'waiting')")),
                count_if(&format!(
                    "{sent} AND d.state = 'dead' AND d.resolution = 'open' AND d.dead_reason IS NOT DISTINCT FROM r.prior_reason"
                )),
                count_if(&format!(
                    "{sent} AND d.state = 'dead' AND d.resolution = 'open' AND d.dead_reason IS DISTINCT FROM r.prior_reason"
                )),
                count_if(&format!("{sent} AND d.state = 'dead' AND d.resolution != 'open'")),
                count_if(&format!("{sent} AND r.fallback_to IS NOT NULL")),
                count_if("e.original_payload IS NOT NULL"),
            );
            let (total, queued, delivered, in_progress, same, new, by_hand, fallbacks, fixed): Counts = sqlx::query_as(&sql)
                .bind(replay_id)
                .fetch_one(db.reader())
                .await
                .context("cannot read replay progress")?;
            let events: Vec<(i64, String, String)> = sqlx::query_as(
                "SELECT at, kind, detail FROM replay_event WHERE replay_id = $1 ORDER BY id DESC LIMIT 100",
            )
            .bind(replay_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read replay events")?;
            let status: ReplayStatus = decode(&status)?;
            let phase: ReplayPhase = decode(&phase)?;
            let done = matches!(status, ReplayStatus::Finished | ReplayStatus::Cancelled) && in_progress == 0;
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
                auto: auto != 0,
                total,
                queued,
                delivered,
                in_progress,
                failed_same_reason: same,
                failed_new_reason: new,
                resolved_by_hand: by_hand,
                fallbacks,
                fixed,
                done,
                finished_at: finished.map(from_ms),
                events: events
                    .into_iter()
                    .rev()
                    .map(|(at, kind, detail)| Ok(ReplayEvent { at: from_ms(at), kind: decode(&kind)?, detail }))
                    .collect::<anyhow::Result<_>>()?,
            }))
        }

        pub async fn recent_replay_ids(db: &Db, limit: u32) -> anyhow::Result<Vec<i64>> {
            let ids: Vec<(i64,)> = sqlx::query_as("SELECT id FROM replay ORDER BY id DESC LIMIT $1")
                .bind(i64::from(limit))
                .fetch_all(db.reader())
                .await
                .context("cannot list replays")?;
            Ok(ids.into_iter().map(|r| r.0).collect())
        }

        pub async fn replay_report(
            db: &Db,
            replay_id: i64,
            outcome: Option<ReplayOutcome>,
            limit: u32,
        ) -> anyhow::Result<Vec<ReplayReportItem>> {
            let mut q = Sql::new(
                DIALECT,
                "SELECT * FROM (
                       SELECT d.id, e.source, e.source_ref, d.target,
                              CASE WHEN r.requeued_at IS NULL THEN 'queued'
                                   WHEN d.state = 'delivered' THEN 'delivered'
                                   WHEN d.state IN ('pending', 'running', 'waiting') THEN 'in_progress'
                                   WHEN d.resolution != 'open' THEN 'resolved_by_hand'
                                   WHEN d.dead_reason IS NOT DISTINCT FROM r.prior_reason THEN 'failed_same_reason'
                                   ELSE 'failed_new_reason' END AS outcome,
                              r.prior_reason,
                              CASE WHEN d.state = 'dead' THEN d.dead_reason END AS reason,
                              r.fallback_to,
                              CASE WHEN e.original_payload IS NULL THEN NULL ELSE e.id END AS fixed_marker
                         FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
                         JOIN inbound_event e ON e.id = d.event_id
                        WHERE r.replay_id = ",
            );
            q.bind(replay_id).push(") AS items");
            if let Some(outcome) = outcome {
                q.push(" WHERE outcome = ").bind(outcome.as_str());
            }
            q.push(
                " ORDER BY CASE outcome WHEN 'failed_new_reason' THEN 0 WHEN 'failed_same_reason' THEN 1 ELSE 2 END, id
                  LIMIT ",
            )
            .bind(i64::from(limit));
            let rows: Vec<ItemRow> = built_as(&q).fetch_all(db.reader()).await.context("cannot read replay report")?;
            rows.into_iter()
                .map(|(delivery_id, source, source_ref, target, outcome, prior_reason, reason, fallback_to, fixed)| {
                    let outcome = decode(&outcome)?;
                    let fixed = fixed.is_some();
                    Ok(ReplayReportItem {
                        delivery_id,
                        source,
                        source_ref,
                        target,
                        outcome,
                        prior_reason,
                        reason,
                        fallback_to,
                        fixed,
                    })
                })
                .collect()
        }

        pub async fn replay_history(db: &Db, delivery_id: i64) -> anyhow::Result<Vec<ReplayHistoryEntry>> {
            let rows: Vec<HistoryRow> = sqlx::query_as(
                "SELECT r.id, r.created_at, r.actor, r.reason, i.prior_class, i.prior_reason
                   FROM replay_item i JOIN replay r ON r.id = i.replay_id
                  WHERE i.delivery_id = $1 ORDER BY r.id",
            )
            .bind(delivery_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read replay history")?;
            rows.into_iter()
                .map(|(replay_id, at, actor, reason, prior_class, prior_reason)| {
                    Ok(ReplayHistoryEntry {
                        replay_id,
                        at: from_ms(at),
                        actor,
                        reason,
                        prior_class: prior_class.as_deref().map(decode).transpose()?,
                        prior_reason,
                    })
                })
                .collect()
        }

        pub async fn running_replays(db: &Db) -> anyhow::Result<Vec<RunningReplay>> {
            let rows: Vec<(i64, String, i64, f64, Option<String>, i64)> = sqlx::query_as(
                "SELECT id, phase, canary_size, rate_per_second, waiting_for, auto FROM replay WHERE status = 'running'
                  ORDER BY id",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read running replays")?;
            rows.into_iter()
                .map(|(id, phase, canary_size, rate_per_second, waiting_for, auto)| {
                    Ok(RunningReplay {
                        id,
                        phase: decode(&phase)?,
                        canary_size,
                        rate_per_second,
                        waiting_for,
                        auto: auto != 0,
                    })
                })
                .collect()
        }

        pub async fn replay_item_counts(db: &Db, replay_id: i64) -> anyhow::Result<ReplayItemCounts> {
            let sql = format!(
                "SELECT {}, {}, {}, {} FROM replay_item r JOIN delivery d ON d.id = r.delivery_id WHERE r.replay_id = $1",
                count_if("r.requeued_at IS NOT NULL"),
                count_if("r.requeued_at IS NOT NULL AND d.state IN ('pending', 'running', 'waiting')"),
                count_if("r.requeued_at IS NOT NULL AND d.state = 'dead' AND d.resolution = 'open'"),
                count_if("r.requeued_at IS NULL"),
            );
            let (sent, unfinished, failed, queued): (i64, i64, i64, i64) = sqlx::query_as(&sql)
                .bind(replay_id)
                .fetch_one(db.reader())
                .await
                .context("cannot count replay items")?;
            Ok(ReplayItemCounts { sent, unfinished, failed, queued })
        }

        pub async fn record_replay_event(
            db: &Db,
            replay_id: i64,
            at: DateTime<Utc>,
            kind: ReplayEventKind,
            detail: &str,
        ) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            event_in(&mut tx, replay_id, at, kind, detail).await?;
            tx.commit().await.context("cannot commit replay event")?;
            Ok(())
        }

        pub async fn replay_failure_reasons(db: &Db, replay_id: i64, limit: u32) -> anyhow::Result<Vec<String>> {
            let rows: Vec<(Option<String>,)> = sqlx::query_as(
                "SELECT DISTINCT d.dead_reason FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
                  WHERE r.replay_id = $1 AND r.requeued_at IS NOT NULL AND d.state = 'dead' LIMIT $2",
            )
            .bind(replay_id)
            .bind(i64::from(limit))
            .fetch_all(db.reader())
            .await
            .context("cannot read replay failures")?;
            Ok(rows.into_iter().map(|r| r.0.unwrap_or_default()).collect())
        }

        pub async fn end_replay_canary(
            db: &Db,
            replay_id: i64,
            failed: bool,
            detail: &str,
            now: DateTime<Utc>,
        ) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            if failed {
                sqlx::query(
                    "UPDATE replay SET status = 'paused', phase = 'canary_failed', waiting_for = NULL WHERE id = $1",
                )
                .bind(replay_id)
                .execute(&mut *tx)
                .await
                .context("cannot hold replay")?;
                event_in(&mut tx, replay_id, now, ReplayEventKind::CanaryFailed, detail).await?;
            } else {
                sqlx::query("UPDATE replay SET phase = 'rest' WHERE id = $1")
                    .bind(replay_id)
                    .execute(&mut *tx)
                    .await
                    .context("cannot pass canary")?;
                event_in(&mut tx, replay_id, now, ReplayEventKind::CanaryPassed, detail).await?;
            }
            tx.commit().await.context("cannot commit canary")?;
            Ok(())
        }

        pub async fn set_replay_waiting(
            db: &Db,
            replay_id: i64,
            waiting_for: Option<&str>,
            kind: ReplayEventKind,
            detail: &str,
            now: DateTime<Utc>,
        ) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            sqlx::query("UPDATE replay SET waiting_for = $1 WHERE id = $2 AND status = 'running'")
                .bind(waiting_for)
                .bind(replay_id)
                .execute(&mut *tx)
                .await
                .context("cannot record what the replay waits for")?;
            event_in(&mut tx, replay_id, now, kind, detail).await?;
            tx.commit().await.context("cannot commit replay waiting")?;
            Ok(())
        }

        pub async fn queued_replay_items(db: &Db, replay_id: i64, limit: u32) -> anyhow::Result<Vec<QueuedItem>> {
            let rows: Vec<(i64, String, Option<String>)> = sqlx::query_as(
                "SELECT r.delivery_id, d.target, r.fallback_to FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
                  WHERE r.replay_id = $1 AND r.requeued_at IS NULL ORDER BY r.seq LIMIT $2",
            )
            .bind(replay_id)
            .bind(i64::from(limit))
            .fetch_all(db.reader())
            .await
            .context("cannot read queued replay items")?;
            Ok(rows
                .into_iter()
                .map(|(delivery_id, target, fallback_to)| QueuedItem { delivery_id, target, fallback_to })
                .collect())
        }

        pub async fn send_back_replay_items(
            db: &Db,
            replay_id: i64,
            delivery_ids: &[i64],
            now: DateTime<Utc>,
        ) -> anyhow::Result<()> {
            // All SET expressions see the row as it was: `fallback_of` gets the step's own target.
            let mut q = Sql::new(
                DIALECT,
                &format!(
                    "UPDATE delivery
                        SET state = 'pending', resolution = 'replayed', attempts = 0, trigger = 'manual',
                            replay_generation = replay_generation + CASE WHEN {UNCERTAIN} THEN 0 ELSE 1 END,
                            in_doubt = CASE WHEN {UNCERTAIN} THEN 1 ELSE 0 END,
                            pending_since = $1, next_attempt_at = $1,
                            fallback_of = CASE WHEN (SELECT fallback_to FROM replay_item
                                                      WHERE replay_id = $2 AND delivery_id = delivery.id)
                                               IS NOT NULL THEN target END,
                            target = COALESCE((SELECT fallback_to FROM replay_item
                                                WHERE replay_id = $2 AND delivery_id = delivery.id), target)
                      WHERE"
                ),
            );
            // `$1` and `$2` in the text above.
            q.args.push(ms(now).into());
            q.args.push(replay_id.into());
            q.id_in("id", delivery_ids).push(" AND state = 'dead' AND resolution = 'open'");
            let mut mark = Sql::new(DIALECT, "UPDATE replay_item SET requeued_at = ");
            mark.bind(ms(now)).push(" WHERE replay_id = ").bind(replay_id).push(" AND").id_in("delivery_id", delivery_ids);
            let mut tx = db.begin_write().await?;
            built(&q).execute(&mut *tx).await.context("cannot send replay items back")?;
            built(&mark).execute(&mut *tx).await.context("cannot mark replay items")?;
            tx.commit().await.context("cannot commit replay batch")?;
            Ok(())
        }

        pub async fn finish_replay(db: &Db, replay_id: i64, detail: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            sqlx::query("UPDATE replay SET status = 'finished', finished_at = $1, waiting_for = NULL WHERE id = $2")
                .bind(ms(now))
                .bind(replay_id)
                .execute(&mut *tx)
                .await
                .context("cannot finish replay")?;
            event_in(&mut tx, replay_id, now, ReplayEventKind::Finished, detail).await?;
            tx.commit().await.context("cannot commit replay end")?;
            Ok(())
        }

        pub async fn auto_replay_candidates(
            db: &Db,
            target: &str,
            since: DateTime<Utc>,
            before: DateTime<Utc>,
        ) -> anyhow::Result<Vec<i64>> {
            let ids: Vec<(i64,)> = sqlx::query_as(&format!(
                "SELECT d.id FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                  WHERE d.state = 'dead' AND d.resolution = 'open' AND d.target = $1
                    AND d.dead_class IN ('permanent_config', 'transient', 'rate_limited')
                    AND d.dead_at < $2 AND d.dead_at >= $3 AND e.purged_at IS NULL
                    AND {QUEUED_IN_REPLAY} IS NULL
                    AND NOT EXISTS (SELECT 1 FROM replay_item ri JOIN replay r ON r.id = ri.replay_id
                                     WHERE ri.delivery_id = d.id AND r.auto = 1)
                  ORDER BY d.id"
            ))
            .bind(target)
            .bind(ms(before))
            .bind(ms(since))
            .fetch_all(db.reader())
            .await
            .context("cannot read auto-replay candidates")?;
            Ok(ids.into_iter().map(|r| r.0).collect())
        }

    }
    sqlite {
        const DIALECT: Dialect = Dialect::Sqlite;
        use crate::store::dead_letters::on_sqlite::any_replay_active;
        use crate::store::dead_letters::{lite as built, lite_as as built_as};
        type DbKind = sqlx::Sqlite;
    }
    postgres {
        const DIALECT: Dialect = Dialect::Postgres;
        use crate::store::dead_letters::on_postgres::any_replay_active;
        use crate::store::dead_letters::{pg as built, pg_as as built_as};
        type DbKind = sqlx::Postgres;
    }
}
