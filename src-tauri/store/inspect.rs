//! Diagnostic reads: the stored rows as they are, for tests, benchmarks and support ("what state is the delivery
//! of this lead to that target in, and what was tried"). They read whole tables in id order and are meant for
//! small databases or a support session, not for the product's screens (those have their own operations).

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{from_ms, Store};

/// A delivery step as stored, with its lead's identity.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    pub id: i64,
    pub event_id: i64,
    /// The lead's source and its id there.
    pub source: String,
    pub source_ref: String,
    pub step_index: i64,
    pub target: String,
    /// `waiting`, `pending`, `running`, `delivered`, `dead` or `reported` (ended without sending: final).
    pub state: String,
    /// Counted attempts.
    pub attempts: i64,
    pub lease_owner: Option<String>,
    pub in_doubt: bool,
    /// What the target answered (JSON text), once delivered.
    pub result: Option<String>,
    pub dead_class: Option<String>,
    pub dead_status: Option<i64>,
    pub dead_reason: Option<String>,
    pub dead_field: Option<String>,
    pub resolution: Option<String>,
    /// The step's own target when a replay ran its fallback instead.
    pub fallback_of: Option<String>,
}

/// One recorded attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEntry {
    pub id: i64,
    pub delivery_id: i64,
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub http_status: Option<i64>,
    /// `delivered`, `retry`, `dead`, `released` or `rescued`.
    pub outcome: String,
    pub class: Option<String>,
    pub reason: String,
    /// `scheduled` or `manual`.
    pub trigger: String,
}

/// A stored lead.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub id: i64,
    pub source: String,
    pub source_ref: String,
    pub received_at: DateTime<Utc>,
    /// `webhook` or `reconciliation`.
    pub via: String,
    pub payload: serde_json::Value,
    pub purged: bool,
}

/// A recorded change of a target's circuit breaker.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerTransitionRecord {
    pub target: String,
    pub at: DateTime<Utc>,
    pub from_state: String,
    pub to_state: String,
    pub reason: String,
}

/// Which CRM record holds a lead (look-up-then-create targets).
#[derive(Debug, Clone, PartialEq)]
pub struct CrmLinkRecord {
    pub target: String,
    pub external_id: String,
    pub crm_id: String,
}

/// A step a replay took in, with the class and reason it had before.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayItemRecord {
    pub delivery_id: i64,
    pub prior_class: Option<String>,
    pub prior_reason: Option<String>,
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    event_id: i64,
    source: String,
    source_ref: String,
    step_index: i64,
    target: String,
    state: String,
    attempts: i64,
    lease_owner: Option<String>,
    in_doubt: i64,
    result: Option<String>,
    dead_class: Option<String>,
    dead_status: Option<i64>,
    dead_reason: Option<String>,
    dead_field: Option<String>,
    resolution: Option<String>,
    fallback_of: Option<String>,
}

fn to_delivery(r: DeliveryRow) -> DeliveryRecord {
    DeliveryRecord {
        id: r.id,
        event_id: r.event_id,
        source: r.source,
        source_ref: r.source_ref,
        step_index: r.step_index,
        target: r.target,
        state: r.state,
        attempts: r.attempts,
        lease_owner: r.lease_owner,
        in_doubt: r.in_doubt != 0,
        result: r.result,
        dead_class: r.dead_class,
        dead_status: r.dead_status,
        dead_reason: r.dead_reason,
        dead_field: r.dead_field,
        resolution: r.resolution,
        fallback_of: r.fallback_of,
    }
}

type EventRow = (i64, String, String, i64, String, String, Option<i64>);

type AttemptRow = (i64, i64, i64, i64, Option<i64>, String, Option<String>, String, String);

impl Store {
    /// Every delivery step, in id order.
    pub async fn deliveries(&self) -> anyhow::Result<Vec<DeliveryRecord>> {
        dispatch!(self, deliveries())
    }

    /// The delivery of the lead `source_ref` of `source` to `target`, if it has one.
    pub async fn delivery_of(
        &self,
        source: &str,
        source_ref: &str,
        target: &str,
    ) -> anyhow::Result<Option<DeliveryRecord>> {
        Ok(self
            .deliveries()
            .await?
            .into_iter()
            .find(|d| d.source == source && d.source_ref == source_ref && d.target == target))
    }

    /// The delivery step with this id.
    pub async fn delivery(&self, id: i64) -> anyhow::Result<Option<DeliveryRecord>> {
        Ok(self.deliveries().await?.into_iter().find(|d| d.id == id))
    }

    /// Every recorded attempt (of all deliveries), in the order they were written.
    pub async fn all_attempts(&self) -> anyhow::Result<Vec<AttemptEntry>> {
        dispatch!(self, all_attempts())
    }

    /// Every stored lead, in id order.
    pub async fn stored_events(&self) -> anyhow::Result<Vec<EventRecord>> {
        dispatch!(self, stored_events())
    }

    /// Every recorded breaker transition of `target`, oldest first.
    pub async fn breaker_transitions(&self, target: &str) -> anyhow::Result<Vec<BreakerTransitionRecord>> {
        dispatch!(self, breaker_transitions(target))
    }

    /// Every recorded breaker transition, of all targets, oldest first.
    pub async fn all_breaker_transitions(&self) -> anyhow::Result<Vec<BreakerTransitionRecord>> {
        dispatch!(self, all_breaker_transitions())
    }

    /// Every CRM link.
    pub async fn crm_links(&self) -> anyhow::Result<Vec<CrmLinkRecord>> {
        dispatch!(self, crm_links())
    }

    /// The steps replay `replay_id` took in, in delivery id order.
    pub async fn replay_items(&self, replay_id: i64) -> anyhow::Result<Vec<ReplayItemRecord>> {
        dispatch!(self, replay_items(replay_id))
    }

    /// The stored points of one metric series at one resolution (60 or 3600 seconds), oldest first.
    pub async fn metric_points(
        &self,
        metric: &str,
        key: &str,
        resolution_seconds: i64,
    ) -> anyhow::Result<Vec<(DateTime<Utc>, f64)>> {
        dispatch!(self, metric_points(metric, key, resolution_seconds))
    }
}

backends! {
    shared {
        pub async fn deliveries(db: &Db) -> anyhow::Result<Vec<DeliveryRecord>> {
            let rows: Vec<DeliveryRow> = sqlx::query_as(
                "SELECT d.id, d.event_id, e.source, e.source_ref, d.step_index, d.target, d.state, d.attempts,
                        d.lease_owner, d.in_doubt, d.result, d.dead_class, d.dead_status, d.dead_reason, d.dead_field,
                        d.resolution, d.fallback_of
                   FROM delivery d JOIN inbound_event e ON e.id = d.event_id ORDER BY d.id",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read deliveries")?;
            Ok(rows.into_iter().map(to_delivery).collect())
        }

        pub async fn all_attempts(db: &Db) -> anyhow::Result<Vec<AttemptEntry>> {
            let rows: Vec<AttemptRow> = sqlx::query_as(
                "SELECT id, delivery_id, started_at, duration_ms, http_status, outcome, class, reason, trigger
                   FROM attempt ORDER BY id",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read attempts")?;
            Ok(rows
                .into_iter()
                .map(|a| AttemptEntry {
                    id: a.0,
                    delivery_id: a.1,
                    started_at: from_ms(a.2),
                    duration_ms: a.3,
                    http_status: a.4,
                    outcome: a.5,
                    class: a.6,
                    reason: a.7,
                    trigger: a.8,
                })
                .collect())
        }

        pub async fn stored_events(db: &Db) -> anyhow::Result<Vec<EventRecord>> {
            let rows: Vec<EventRow> = sqlx::query_as(
                "SELECT id, source, source_ref, received_at, via, payload, purged_at FROM inbound_event ORDER BY id",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read events")?;
            Ok(rows
                .into_iter()
                .map(|r| EventRecord {
                    id: r.0,
                    source: r.1,
                    source_ref: r.2,
                    received_at: from_ms(r.3),
                    via: r.4,
                    payload: serde_json::from_str(&r.5).unwrap_or(serde_json::Value::Null),
                    purged: r.6.is_some(),
                })
                .collect())
        }

        pub async fn breaker_transitions(db: &Db, target: &str) -> anyhow::Result<Vec<BreakerTransitionRecord>> {
            Ok(all_breaker_transitions(db).await?.into_iter().filter(|t| t.target == target).collect())
        }

        pub async fn all_breaker_transitions(db: &Db) -> anyhow::Result<Vec<BreakerTransitionRecord>> {
            let rows: Vec<(String, i64, String, String, String)> = sqlx::query_as(
                "SELECT target, at, from_state, to_state, reason FROM breaker_transition ORDER BY id",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read breaker transitions")?;
            Ok(rows
                .into_iter()
                .map(|r| BreakerTransitionRecord {
                    target: r.0,
                    at: from_ms(r.1),
                    from_state: r.2,
                    to_state: r.3,
                    reason: r.4,
                })
                .collect())
        }

        pub async fn crm_links(db: &Db) -> anyhow::Result<Vec<CrmLinkRecord>> {
            let rows: Vec<(String, String, String)> =
                sqlx::query_as("SELECT target, external_id, crm_id FROM crm_link ORDER BY target, external_id")
                    .fetch_all(db.reader())
                    .await
                    .context("cannot read crm links")?;
            Ok(rows.into_iter().map(|r| CrmLinkRecord { target: r.0, external_id: r.1, crm_id: r.2 }).collect())
        }

        pub async fn replay_items(db: &Db, replay_id: i64) -> anyhow::Result<Vec<ReplayItemRecord>> {
            let rows: Vec<(i64, Option<String>, Option<String>)> = sqlx::query_as(
                "SELECT delivery_id, prior_class, prior_reason FROM replay_item WHERE replay_id = $1
                  ORDER BY delivery_id",
            )
            .bind(replay_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read replay items")?;
            Ok(rows
                .into_iter()
                .map(|r| ReplayItemRecord { delivery_id: r.0, prior_class: r.1, prior_reason: r.2 })
                .collect())
        }

        pub async fn metric_points(
            db: &Db,
            metric: &str,
            key: &str,
            resolution_seconds: i64,
        ) -> anyhow::Result<Vec<(DateTime<Utc>, f64)>> {
            let rows: Vec<(i64, f64)> = sqlx::query_as(
                "SELECT at, value FROM metric_point WHERE metric = $1 AND key = $2 AND resolution = $3 ORDER BY at",
            )
            .bind(metric)
            .bind(key)
            .bind(resolution_seconds)
            .fetch_all(db.reader())
            .await
            .context("cannot read metric points")?;
            Ok(rows.into_iter().map(|r| (from_ms(r.0), r.1)).collect())
        }
    }
}
