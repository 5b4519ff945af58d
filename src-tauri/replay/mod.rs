//! Replay: dead letters back through the normal delivery path.
//!
//! A replay puts each selected open dead letter back to `pending` (attempts reset, trigger `manual`, replay
//! generation + 1 so idempotency keys are fresh), in one transaction with its audit record: who, when, why,
//! which selection, and each item's previous class and reason. Classification, idempotency, the breaker and
//! monitoring then apply as to any delivery. The preview and the replay use the same selection query, and the
//! replay refuses to run when the selection no longer matches what was previewed (`expected`).

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::dlq::{self, DeadLetterFilter};
use crate::store::{from_ms, ms, Store};

/// What to replay: explicit dead letters, or all that match a filter.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(default)]
pub struct ReplaySelection {
    pub ids: Option<Vec<i64>>,
    pub filter: Option<DeadLetterFilter>,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayPreview {
    /// Open dead letters that will be requeued.
    pub eligible: i64,
    pub by_target: BTreeMap<String, i64>,
    /// Chosen ids that are not open dead letters (already replayed, resolved, or unknown).
    pub not_eligible: i64,
    /// Eligible leads received more than 24 h ago (stale for time-sensitive follow-ups).
    pub older_than_24h: i64,
    /// The sentence the confirmation shows.
    pub summary: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayReceipt {
    pub replay_id: i64,
    pub requeued: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayProgress {
    pub replay_id: i64,
    pub created_at: DateTime<Utc>,
    pub actor: String,
    pub reason: String,
    pub total: i64,
    pub delivered: i64,
    pub in_progress: i64,
    /// Failed again with the same reason as before.
    pub failed_same_reason: i64,
    /// Failed again, but for a different reason.
    pub failed_new_reason: i64,
    pub done: bool,
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
    #[error(transparent)]
    Storage(#[from] anyhow::Error),
}

async fn eligible(
    store: &Store,
    selection: &ReplaySelection,
) -> Result<(Vec<(i64, String, DateTime<Utc>)>, i64), ReplayError> {
    let filter = selection.filter.clone().unwrap_or_default();
    let mut rows = dlq::matching(
        store,
        &DeadLetterFilter { resolution: Some("open".into()), limit: None, before_id: None, ..filter },
    )
    .await?;
    match &selection.ids {
        Some(ids) if ids.is_empty() => Err(ReplayError::EmptySelection),
        Some(ids) => {
            let wanted: std::collections::BTreeSet<i64> = ids.iter().copied().collect();
            rows.retain(|r| wanted.contains(&r.0));
            let not_eligible = wanted.len() as i64 - rows.len() as i64;
            Ok((rows, not_eligible))
        }
        None if selection.filter.is_none() => Err(ReplayError::EmptySelection),
        None => Ok((rows, 0)),
    }
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub async fn preview(
    store: &Store,
    selection: &ReplaySelection,
    now: DateTime<Utc>,
) -> Result<ReplayPreview, ReplayError> {
    let (rows, not_eligible) = eligible(store, selection).await?;
    let mut by_target: BTreeMap<String, i64> = BTreeMap::new();
    let mut older = 0;
    for (_, target, received) in &rows {
        *by_target.entry(target.clone()).or_default() += 1;
        if now - *received > chrono::Duration::hours(24) {
            older += 1;
        }
    }
    let n = rows.len() as i64;
    let targets = by_target
        .iter()
        .map(|(t, c)| if by_target.len() == 1 { t.clone() } else { format!("{t} ({c})") })
        .collect::<Vec<_>>()
        .join(" and ");
    let mut summary = if n == 0 {
        "Nothing to replay: no open dead letter matches.".to_string()
    } else {
        format!("Replay {} to {targets}?", plural(n, "lead", "leads"))
    };
    if older > 0 {
        summary.push_str(&format!(" {} older than 24 h.", plural(older, "lead is", "leads are")));
    }
    if not_eligible > 0 {
        summary.push_str(&format!(
            " {} already handled and will be skipped.",
            plural(not_eligible, "selected lead was", "selected leads were")
        ));
    }
    Ok(ReplayPreview { eligible: n, by_target, not_eligible, older_than_24h: older, summary })
}

/// Requeues the selection. `expected` is the preview's `eligible`: if the selection changed since, nothing
/// happens and `SelectionChanged` says so.
pub async fn replay(
    store: &Store,
    selection: &ReplaySelection,
    expected: i64,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<ReplayReceipt, ReplayError> {
    let (rows, _) = eligible(store, selection).await?;
    if rows.len() as i64 != expected {
        return Err(ReplayError::SelectionChanged { expected, found: rows.len() as i64 });
    }
    if rows.is_empty() {
        return Err(ReplayError::NothingEligible);
    }
    let mut tx = store.begin_write().await?;
    let (replay_id,): (i64,) = sqlx::query_as(
        "INSERT INTO replay (created_at, actor, reason, selection, requested, requeued) VALUES (?, ?, ?, ?, ?, 0)
         RETURNING id",
    )
    .bind(ms(now))
    .bind(actor)
    .bind(reason)
    .bind(serde_json::to_string(selection).context("selection")?)
    .bind(expected)
    .fetch_one(&mut *tx)
    .await
    .context("cannot record replay")?;
    let mut requeued = 0i64;
    for chunk in rows.chunks(500) {
        let ids = serde_json::to_string(&chunk.iter().map(|r| r.0).collect::<Vec<_>>()).context("ids")?;
        // Audit first (the prior class and reason), then requeue; both only for still-open dead letters.
        sqlx::query(
            "INSERT INTO replay_item (replay_id, delivery_id, prior_class, prior_reason)
             SELECT ?, id, dead_class, dead_reason FROM delivery
              WHERE id IN (SELECT value FROM json_each(?)) AND state = 'dead' AND resolution = 'open'",
        )
        .bind(replay_id)
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .context("cannot record replay items")?;
        let r = sqlx::query(
            "UPDATE delivery
                SET state = 'pending', resolution = 'replayed', attempts = 0, trigger = 'manual',
                    replay_generation = replay_generation + 1, pending_since = ?, next_attempt_at = ?, in_doubt = 0
              WHERE id IN (SELECT value FROM json_each(?)) AND state = 'dead' AND resolution = 'open'",
        )
        .bind(ms(now))
        .bind(ms(now))
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .context("cannot requeue dead letters")?;
        requeued += r.rows_affected() as i64;
    }
    sqlx::query("UPDATE replay SET requeued = ? WHERE id = ?")
        .bind(requeued)
        .bind(replay_id)
        .execute(&mut *tx)
        .await
        .context("cannot finish replay record")?;
    tx.commit().await.context("cannot commit replay")?;
    tracing::info!(replay_id, requeued, actor, reason, "replay requeued dead letters");
    Ok(ReplayReceipt { replay_id, requeued })
}

pub async fn progress(store: &Store, replay_id: i64) -> anyhow::Result<Option<ReplayProgress>> {
    let head: Option<(i64, String, String)> =
        sqlx::query_as("SELECT created_at, actor, reason FROM replay WHERE id = ?")
            .bind(replay_id)
            .fetch_optional(store.read_pool())
            .await
            .context("cannot read replay")?;
    let Some((created_at, actor, reason)) = head else { return Ok(None) };
    let (total, delivered, in_progress, same, new): (i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT COUNT(*),
                COALESCE(SUM(d.state = 'delivered'), 0),
                COALESCE(SUM(d.state IN ('pending', 'running', 'waiting')), 0),
                COALESCE(SUM(d.state = 'dead' AND d.dead_reason IS r.prior_reason), 0),
                COALESCE(SUM(d.state = 'dead' AND d.dead_reason IS NOT r.prior_reason), 0)
           FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
          WHERE r.replay_id = ?",
    )
    .bind(replay_id)
    .fetch_one(store.read_pool())
    .await
    .context("cannot read replay progress")?;
    Ok(Some(ReplayProgress {
        replay_id,
        created_at: from_ms(created_at),
        actor,
        reason,
        total,
        delivered,
        in_progress,
        failed_same_reason: same,
        failed_new_reason: new,
        done: in_progress == 0,
    }))
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
