//! `inbound_event`: the raw events, and the creation of their delivery steps.

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{ms, Store};

/// An event to store: where it came from, its id at the source, its body, and its route.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub source: String,
    pub source_ref: String,
    pub payload: serde_json::Value,
    /// Target names of the route, in order.
    pub route: Vec<String>,
    pub received_at: DateTime<Utc>,
    /// Whether it arrived as a webhook or was found by reconciliation.
    pub via: Via,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    #[default]
    Webhook,
    /// Listed by the source but never received: ingested by reconciliation.
    Reconciliation,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Webhook => "webhook",
            Via::Reconciliation => "reconciliation",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// Stored now, with this id; its first step is pending.
    Inserted(i64),
    /// The same source and id were stored before (with this id); nothing new was written.
    Duplicate(i64),
}

impl Store {
    /// Stores a batch of events and their steps in one transaction (one disk sync for the whole batch).
    /// Events already present — including repeats inside the batch — come back as `Duplicate`.
    pub async fn insert_events(&self, events: &[NewEvent]) -> anyhow::Result<Vec<InsertOutcome>> {
        dispatch!(self, insert_events(events))
    }

    /// Number of stored events (all sources).
    pub async fn count_events(&self) -> anyhow::Result<i64> {
        dispatch!(self, count_events())
    }
}

backends! {
    shared {
        pub async fn insert_events(db: &Db, events: &[NewEvent]) -> anyhow::Result<Vec<InsertOutcome>> {
            let mut tx = db.begin_write().await?;
            let mut outcomes = Vec::with_capacity(events.len());
            for event in events {
                let inserted: Option<(i64,)> = sqlx::query_as(
                    "INSERT INTO inbound_event (source, source_ref, received_at, payload, via) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (source, source_ref) DO NOTHING RETURNING id",
                )
                .bind(&event.source)
                .bind(&event.source_ref)
                .bind(ms(event.received_at))
                .bind(event.payload.to_string())
                .bind(event.via.as_str())
                .fetch_optional(&mut *tx)
                .await
                .context("cannot insert inbound_event")?;
                let Some((id,)) = inserted else {
                    let (id,): (i64,) = sqlx::query_as("SELECT id FROM inbound_event WHERE source = $1 AND source_ref = $2")
                        .bind(&event.source)
                        .bind(&event.source_ref)
                        .fetch_one(&mut *tx)
                        .await
                        .context("cannot read duplicate inbound_event")?;
                    outcomes.push(InsertOutcome::Duplicate(id));
                    continue;
                };
                let now = ms(event.received_at);
                for (index, target) in event.route.iter().enumerate() {
                    let first = index == 0;
                    sqlx::query(
                        "INSERT INTO delivery (event_id, step_index, target, state, created_at, pending_since, next_attempt_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .bind(id)
                    .bind(index as i64)
                    .bind(target)
                    .bind(if first { "pending" } else { "waiting" })
                    .bind(now)
                    .bind(first.then_some(now))
                    .bind(first.then_some(now))
                    .execute(&mut *tx)
                    .await
                    .context("cannot insert delivery")?;
                }
                outcomes.push(InsertOutcome::Inserted(id));
            }
            tx.commit().await.context("cannot commit events")?;
            Ok(outcomes)
        }

        pub async fn count_events(db: &Db) -> anyhow::Result<i64> {
            let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM inbound_event")
                .fetch_one(db.reader())
                .await
                .context("cannot count events")?;
            Ok(n)
        }
    }
}
