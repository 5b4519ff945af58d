//! What the delivery figures are computed from: delivered steps with their lead's arrival, dead letters per
//! route (counted from their attempts, so replaying or purging one does not rewrite history) and breaker
//! transitions. Read from the raw tables (the `delivery_delivered` and `attempt_started` indexes).

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{from_ms, ms, Store};

/// A step delivered in a period.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveredStep {
    pub source: String,
    pub target: String,
    /// When Leadline received the lead.
    pub received_at: DateTime<Utc>,
    pub delivered_at: DateTime<Utc>,
    /// Counted attempts, the delivering one included.
    pub attempts: i64,
    /// `scheduled`, or a replay's trigger.
    pub trigger: String,
}

/// Dead letters of one route (source → target) in a period.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteDeadLetters {
    pub source: String,
    pub target: String,
    pub dead_letters: i64,
    /// Of which dead-lettered by a scheduled attempt (not a replay).
    pub scheduled: i64,
}

/// A target's breaker over a period.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BreakerHistory {
    /// The state it was in when the period began (`None`: no transition before it).
    pub state_at_start: Option<String>,
    /// Its transitions in the period, in order: (when, new state).
    pub transitions: Vec<(DateTime<Utc>, String)>,
}

impl Store {
    /// Steps delivered in `[since, until)`, with their source and when their lead arrived.
    pub async fn delivered_steps(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> anyhow::Result<Vec<DeliveredStep>> {
        dispatch!(self, delivered_steps(since, until))
    }

    /// Attempts that dead-lettered a step in `[since, until)`, counted per route.
    pub async fn dead_letters_by_route(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> anyhow::Result<Vec<RouteDeadLetters>> {
        dispatch!(self, dead_letters_by_route(since, until))
    }

    /// The breaker of `target` over `[since, until)`: its state at `since` and its transitions.
    pub async fn breaker_history(
        &self,
        target: &str,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> anyhow::Result<BreakerHistory> {
        dispatch!(self, breaker_history(target, since, until))
    }
}

backends! {
    shared {
        pub async fn delivered_steps(db: &Db, since: DateTime<Utc>, until: DateTime<Utc>) -> anyhow::Result<Vec<DeliveredStep>> {
            let rows: Vec<(String, String, i64, i64, i64, String)> = sqlx::query_as(
                "SELECT e.source, d.target, e.received_at, d.delivered_at, d.attempts, d.trigger
                   FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                  WHERE d.state = 'delivered' AND d.delivered_at >= $1 AND d.delivered_at < $2",
            )
            .bind(ms(since))
            .bind(ms(until))
            .fetch_all(db.reader())
            .await
            .context("cannot read delivered steps")?;
            Ok(rows
                .into_iter()
                .map(|(source, target, received_at, delivered_at, attempts, trigger)| DeliveredStep {
                    source,
                    target,
                    received_at: from_ms(received_at),
                    delivered_at: from_ms(delivered_at),
                    attempts,
                    trigger,
                })
                .collect())
        }

        pub async fn dead_letters_by_route(
            db: &Db,
            since: DateTime<Utc>,
            until: DateTime<Utc>,
        ) -> anyhow::Result<Vec<RouteDeadLetters>> {
            let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(
                "SELECT e.source, d.target, COUNT(*),
                        CAST(COALESCE(SUM(CASE WHEN a.trigger = 'scheduled' THEN 1 ELSE 0 END), 0) AS BIGINT)
                   FROM attempt a JOIN delivery d ON d.id = a.delivery_id JOIN inbound_event e ON e.id = d.event_id
                  WHERE a.started_at >= $1 AND a.started_at < $2 AND a.outcome = 'dead'
                  GROUP BY e.source, d.target",
            )
            .bind(ms(since))
            .bind(ms(until))
            .fetch_all(db.reader())
            .await
            .context("cannot count dead letters")?;
            Ok(rows
                .into_iter()
                .map(|(source, target, dead_letters, scheduled)| RouteDeadLetters { source, target, dead_letters, scheduled })
                .collect())
        }

        pub async fn breaker_history(
            db: &Db,
            target: &str,
            since: DateTime<Utc>,
            until: DateTime<Utc>,
        ) -> anyhow::Result<BreakerHistory> {
            let (before,): (Option<String>,) = sqlx::query_as(
                "SELECT (SELECT to_state FROM breaker_transition WHERE target = $1 AND at < $2
                          ORDER BY at DESC, id DESC LIMIT 1)",
            )
            .bind(target)
            .bind(ms(since))
            .fetch_one(db.reader())
            .await
            .context("cannot read breaker state")?;
            let transitions: Vec<(i64, String)> = sqlx::query_as(
                "SELECT at, to_state FROM breaker_transition WHERE target = $1 AND at >= $2 AND at < $3
                  ORDER BY at, id",
            )
            .bind(target)
            .bind(ms(since))
            .bind(ms(until))
            .fetch_all(db.reader())
            .await
            .context("cannot read breaker transitions")?;
            Ok(BreakerHistory {
                state_at_start: before,
                transitions: transitions.into_iter().map(|(at, s)| (from_ms(at), s)).collect(),
            })
        }
    }
}
