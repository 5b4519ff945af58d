//! Leads delivered with missing data (a target's `missing_data` fallback: written without a field the CRM refused,
//! tagged, with a task for a person) and dead-letter episodes (each death of a step, never overwritten).
//!
//! `delivery.dropped_fields` says which fields a step goes (or went) without; `missing_field` why each was left
//! out; `delivery.missing_task` who checks it. `dead_letter_episode` is written by the database's triggers
//! (migration 0013) whenever a step dies or its dead letter is resolved, whichever code path does it.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{from_ms, ms, Store};
use crate::model::{decode, ErrorClass};

/// A step delivered without some fields, with what a person needs to check it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct MissingDataLead {
    pub delivery_id: i64,
    pub event_id: i64,
    pub source: String,
    pub source_ref: String,
    pub target: String,
    pub delivered_at: Option<DateTime<Utc>>,
    /// The CRM record it became.
    pub crm_id: Option<String>,
    /// Each field left out and the refusal that dropped it.
    pub fields: Vec<MissingField>,
    /// `open` ("Needs a person"), `follow_up` (a follow-up step asks), `done` (checked), `corrected`.
    pub task: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct MissingField {
    pub field: String,
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// How many leads are delivered with missing data: overall, open tasks, and per target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ts_rs::TS)]
pub struct MissingDataCounts {
    pub delivered: i64,
    /// Of those, waiting for a person in Leadline ("Needs a person").
    pub needs_a_person: i64,
    /// Per target: (target, delivered with missing data).
    pub by_target: Vec<(String, i64)>,
}

/// One death of a step: when, why, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct Episode {
    pub id: i64,
    pub delivery_id: i64,
    pub target: String,
    pub died_at: DateTime<Utc>,
    pub class: Option<ErrorClass>,
    pub http_status: Option<i64>,
    pub reason: Option<String>,
    pub cause: Option<String>,
    pub field: Option<String>,
    /// `open`, `replayed`, `fixed_manually` or `discarded`.
    pub resolution: String,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolved_by: Option<String>,
    /// How: the operator's note, or the replay's reason.
    pub resolution_note: Option<String>,
    /// The replay that sent the step again after this death.
    pub replay_id: Option<i64>,
}

/// Open episodes counted by class and cause.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct EpisodeCount {
    pub class: String,
    pub cause: String,
    pub n: i64,
}

type EpisodeRow = (
    i64,
    i64,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

fn episode(r: EpisodeRow) -> Episode {
    Episode {
        id: r.0,
        delivery_id: r.1,
        target: r.2,
        died_at: from_ms(r.3),
        class: r.4.as_deref().and_then(|c| decode(c).ok()),
        http_status: r.5,
        reason: r.6,
        cause: r.7,
        field: r.8,
        resolution: r.9,
        resolved_at: r.10.map(from_ms),
        resolved_by: r.11,
        resolution_note: r.12,
        replay_id: r.13,
    }
}

type MissingRow = (i64, i64, String, String, String, Option<i64>, Option<String>, Option<String>);

impl Store {
    /// Leads delivered with missing data, counted overall, as open "Needs a person" tasks, and per target.
    pub async fn missing_data_counts(&self) -> anyhow::Result<MissingDataCounts> {
        dispatch!(self, missing_data_counts())
    }

    /// Steps delivered with missing data (or corrected since), newest first, at most `limit`.
    pub async fn missing_data_leads(&self, limit: u32) -> anyhow::Result<Vec<MissingDataLead>> {
        dispatch!(self, missing_data_leads(-1, -1, limit))
    }

    /// The steps of one lead that went without a field.
    pub async fn missing_data_of_lead(&self, event_id: i64) -> anyhow::Result<Vec<MissingDataLead>> {
        dispatch!(self, missing_data_leads(-1, event_id, 1000))
    }

    /// The missing data of one step, if it went without a field.
    pub async fn missing_data_of(&self, delivery_id: i64) -> anyhow::Result<Option<MissingDataLead>> {
        Ok(dispatch!(self, missing_data_leads(delivery_id, -1, 1))?.pop())
    }

    /// A person checked a lead delivered with missing data: its task is done. False when there was no open task.
    pub async fn close_missing_task(&self, delivery_id: i64) -> anyhow::Result<bool> {
        dispatch!(self, close_missing_task(delivery_id))
    }

    /// Sends a step delivered without some fields again with all of them (its lead was corrected): due `now`,
    /// under a new replay generation (a key of its own), as an update of the record it made. False when the step
    /// is not delivered with missing data.
    pub async fn send_corrected(&self, delivery_id: i64, now: DateTime<Utc>) -> anyhow::Result<bool> {
        dispatch!(self, send_corrected(delivery_id, now))
    }

    /// Every death of a step, oldest first.
    pub async fn episodes(&self, delivery_id: i64) -> anyhow::Result<Vec<Episode>> {
        dispatch!(self, episodes(delivery_id, -1))
    }

    /// Every death of every step of a lead, oldest first.
    pub async fn episodes_of_lead(&self, event_id: i64) -> anyhow::Result<Vec<Episode>> {
        dispatch!(self, episodes(-1, event_id))
    }

    /// Open episodes by class and cause.
    pub async fn open_episode_counts(&self) -> anyhow::Result<Vec<EpisodeCount>> {
        dispatch!(self, open_episode_counts())
    }
}

backends! {
    shared {
        pub async fn missing_data_counts(db: &Db) -> anyhow::Result<MissingDataCounts> {
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(
                "SELECT target, COUNT(*), CAST(SUM(CASE WHEN missing_task = 'open' THEN 1 ELSE 0 END) AS BIGINT)
                   FROM delivery WHERE dropped_fields IS NOT NULL AND state = 'delivered'
                  GROUP BY target ORDER BY target",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot count leads delivered with missing data")?;
            let mut counts = MissingDataCounts::default();
            for (target, n, open) in rows {
                counts.delivered += n;
                counts.needs_a_person += open;
                counts.by_target.push((target, n));
            }
            Ok(counts)
        }

        /// `delivery_id` and `event_id` narrow the list when not negative.
        pub async fn missing_data_leads(
            db: &Db,
            delivery_id: i64,
            event_id: i64,
            limit: u32,
        ) -> anyhow::Result<Vec<MissingDataLead>> {
            let rows: Vec<MissingRow> = sqlx::query_as(
                "SELECT d.id, d.event_id, e.source, e.source_ref, d.target, d.delivered_at, d.result, d.missing_task
                   FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                  WHERE d.id IN (SELECT DISTINCT delivery_id FROM missing_field)
                    AND ($1 < 0 OR d.id = $1) AND ($2 < 0 OR d.event_id = $2)
                  ORDER BY d.delivered_at DESC, d.id DESC LIMIT $3",
            )
            .bind(delivery_id)
            .bind(event_id)
            .bind(i64::from(limit))
            .fetch_all(db.reader())
            .await
            .context("cannot read leads delivered with missing data")?;
            let mut out = Vec::with_capacity(rows.len());
            for (delivery_id, event_id, source, source_ref, target, delivered_at, result, task) in rows {
                let fields: Vec<(String, String, i64)> = sqlx::query_as(
                    "SELECT field, reason, at FROM missing_field WHERE delivery_id = $1 ORDER BY at, field",
                )
                .bind(delivery_id)
                .fetch_all(db.reader())
                .await
                .context("cannot read missing fields")?;
                let crm_id = result
                    .as_deref()
                    .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
                    .and_then(|r| r.get("crm_id").and_then(|v| v.as_str()).map(String::from));
                out.push(MissingDataLead {
                    delivery_id,
                    event_id,
                    source,
                    source_ref,
                    target,
                    delivered_at: delivered_at.map(from_ms),
                    crm_id,
                    fields: fields
                        .into_iter()
                        .map(|(field, reason, at)| MissingField { field, reason, at: from_ms(at) })
                        .collect(),
                    task,
                });
            }
            Ok(out)
        }

        pub async fn close_missing_task(db: &Db, delivery_id: i64) -> anyhow::Result<bool> {
            let done = sqlx::query(
                "UPDATE delivery SET missing_task = 'done'
                  WHERE id = $1 AND missing_task IN ('open', 'follow_up') AND dropped_fields IS NOT NULL",
            )
            .bind(delivery_id)
            .execute(db.writer())
            .await
            .context("cannot close the missing-data task")?;
            Ok(done.rows_affected() > 0)
        }

        pub async fn send_corrected(db: &Db, delivery_id: i64, now: DateTime<Utc>) -> anyhow::Result<bool> {
            let done = sqlx::query(
                "UPDATE delivery
                    SET state = 'pending', dropped_fields = NULL, missing_task = 'corrected',
                        replay_generation = replay_generation + 1, trigger = 'manual', attempts = 0, in_doubt = 0,
                        pending_since = $1, next_attempt_at = $1
                  WHERE id = $2 AND state = 'delivered' AND dropped_fields IS NOT NULL",
            )
            .bind(ms(now))
            .bind(delivery_id)
            .execute(db.writer())
            .await
            .context("cannot send the corrected lead")?;
            Ok(done.rows_affected() > 0)
        }

        /// One step's episodes (`delivery_id` not negative), or one lead's.
        pub async fn episodes(db: &Db, delivery_id: i64, event_id: i64) -> anyhow::Result<Vec<Episode>> {
            let rows: Vec<EpisodeRow> = sqlx::query_as(
                "SELECT id, delivery_id, target, died_at, class, http_status, reason, cause, field, resolution,
                        resolved_at, resolved_by, resolution_note, replay_id
                   FROM dead_letter_episode
                  WHERE delivery_id = $1 OR delivery_id IN (SELECT id FROM delivery WHERE event_id = $2)
                  ORDER BY died_at, id",
            )
            .bind(delivery_id)
            .bind(event_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read dead-letter episodes")?;
            Ok(rows.into_iter().map(episode).collect())
        }

        pub async fn open_episode_counts(db: &Db) -> anyhow::Result<Vec<EpisodeCount>> {
            let rows: Vec<(Option<String>, Option<String>, i64)> = sqlx::query_as(
                "SELECT class, cause, COUNT(*) FROM dead_letter_episode WHERE resolution = 'open'
                  GROUP BY class, cause ORDER BY class, cause",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot count open episodes")?;
            Ok(rows
                .into_iter()
                .map(|(class, cause, n)| EpisodeCount {
                    class: class.unwrap_or_default(),
                    cause: cause.unwrap_or_default(),
                    n,
                })
                .collect())
        }
    }
}
