//! Writes that only tests and benchmarks make (hidden from the documentation): leads stored as a long history
//! would have left them, bulk fills of a million jobs, and edits that put a step in a state the delivery path
//! cannot produce on demand. The product never calls them.

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{ms, Store};
use crate::model::ErrorClass;

/// A lead to store with its steps already in a final state.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct LeadFixture {
    pub source: String,
    pub source_ref: String,
    pub received_at: DateTime<Utc>,
    pub payload: serde_json::Value,
    /// Its data was purged by retention (the payload is kept here all the same).
    pub purged: bool,
    /// Its steps, in route order (step 0 first); each was created when the lead was received.
    pub steps: Vec<StepFixture>,
}

#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct StepFixture {
    pub target: String,
    /// Counted attempts.
    pub attempts: i64,
    pub state: StepFixtureState,
}

#[doc(hidden)]
#[derive(Debug, Clone)]
pub enum StepFixtureState {
    Delivered {
        at: DateTime<Utc>,
        result: serde_json::Value,
    },
    Dead {
        at: DateTime<Utc>,
        class: ErrorClass,
        http_status: Option<u16>,
        reason: String,
        field: Option<String>,
        /// `open`, `replayed`, `fixed_manually` or `discarded`.
        resolution: String,
    },
}

/// What a benchmark fills the database with: `total` events of source `bench` (ids 1…total, one step each).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchFill {
    /// Delivered to `sink`, one delivered attempt each: a long delivery history.
    DeliveredHistory,
    /// To `crm`, `notify` and `erp` in turn: 1% pending, 0.5% dead (three classes), the rest delivered.
    QueueMix,
    /// Every step an open dead letter: three targets and classes, ten causes, and 1% (id % 100 = 7) with a
    /// cause of their own (`cause special`).
    DeadLetters,
}

impl Store {
    /// Stores leads and their finished steps in one transaction; returns the leads' event ids, in order.
    #[doc(hidden)]
    pub async fn insert_lead_fixtures(&self, leads: &[LeadFixture]) -> anyhow::Result<Vec<i64>> {
        dispatch!(self, insert_lead_fixtures(leads))
    }

    /// Fills an empty database with `total` jobs of the given shape, in one transaction.
    #[doc(hidden)]
    pub async fn bench_fill(&self, fill: BenchFill, total: u64) -> anyhow::Result<()> {
        dispatch!(self, bench_fill(fill, total))
    }

    /// Marks a step in doubt (as the rescuer does when a lease expires mid-attempt) and rewrites every answer
    /// recorded for it as `http_status`/`class`/`reason`: only the doubt is left to say that the CRM may have
    /// the lead.
    #[doc(hidden)]
    pub async fn rewrite_as_in_doubt(
        &self,
        delivery_id: i64,
        http_status: u16,
        class: ErrorClass,
        reason: &str,
    ) -> anyhow::Result<()> {
        dispatch!(self, rewrite_as_in_doubt(delivery_id, http_status, class, reason))
    }

    /// Records a schema migration this version does not know, as a newer Leadline that set up the database would
    /// have left it (what start-up must refuse in words).
    #[doc(hidden)]
    pub async fn record_unknown_migration(&self, version: i64) -> anyhow::Result<()> {
        dispatch!(self, record_unknown_migration(version))
    }
}

backends! {
    shared {
        pub async fn insert_lead_fixtures(db: &Db, leads: &[LeadFixture]) -> anyhow::Result<Vec<i64>> {
            let mut tx = db.begin_write().await?;
            let mut ids = Vec::with_capacity(leads.len());
            for lead in leads {
                let received = ms(lead.received_at);
                let (event_id,): (i64,) = sqlx::query_as(
                    "INSERT INTO inbound_event (source, source_ref, received_at, payload, purged_at, lead_at)
                     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                )
                .bind(&lead.source)
                .bind(&lead.source_ref)
                .bind(received)
                .bind(lead.payload.to_string())
                .bind(lead.purged.then_some(received))
                .bind(Some(crate::model::lead_time(lead.received_at, &lead.payload)).filter(|t| *t < lead.received_at).map(ms))
                .fetch_one(&mut *tx)
                .await
                .context("cannot insert the lead")?;
                for (index, step) in lead.steps.iter().enumerate() {
                    match &step.state {
                        StepFixtureState::Delivered { at, result } => sqlx::query(
                            "INSERT INTO delivery (event_id, step_index, target, state, attempts, created_at,
                                                   delivered_at, result)
                             VALUES ($1, $2, $3, 'delivered', $4, $5, $6, $7)",
                        )
                        .bind(event_id)
                        .bind(index as i64)
                        .bind(&step.target)
                        .bind(step.attempts)
                        .bind(received)
                        .bind(ms(*at))
                        .bind(result.to_string())
                        .execute(&mut *tx)
                        .await
                        .context("cannot insert a delivered step")?,
                        StepFixtureState::Dead { at, class, http_status, reason, field, resolution } => sqlx::query(
                            "INSERT INTO delivery (event_id, step_index, target, state, attempts, created_at, dead_at,
                                                   dead_class, dead_status, dead_reason, dead_cause, dead_field,
                                                   resolution)
                             VALUES ($1, $2, $3, 'dead', $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                        )
                        .bind(event_id)
                        .bind(index as i64)
                        .bind(&step.target)
                        .bind(step.attempts)
                        .bind(received)
                        .bind(ms(*at))
                        .bind(class.as_str())
                        .bind(http_status.map(i64::from))
                        .bind(reason)
                        .bind(crate::model::cause_of(reason))
                        .bind(field)
                        .bind(resolution)
                        .execute(&mut *tx)
                        .await
                        .context("cannot insert a dead step")?,
                    };
                }
                ids.push(event_id);
            }
            tx.commit().await.context("cannot commit the leads")?;
            Ok(ids)
        }

        /// Portable SQL: a recursive CTE counts 1…total in both backends; ids are assigned in that order on an
        /// empty database. Runs inside `tx`; the backend wraps it (PostgreSQL counts the tallies afterwards).
        async fn bench_fill_in(tx: &mut Conn, fill: BenchFill, total: u64) -> anyhow::Result<()> {
            sqlx::query(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
                 INSERT INTO inbound_event (source, source_ref, received_at, payload)
                 SELECT 'bench', 'r-' || i, 1764460800000 + i, '{\"id\":1}' FROM n",
            )
            .bind(total as i64)
            .execute(&mut *tx)
            .await
            .context("cannot fill events")?;
            let steps = match fill {
                BenchFill::DeliveredHistory => {
                    "INSERT INTO delivery (event_id, step_index, target, state, attempts, created_at, pending_since,
                                           next_attempt_at, lease_token, result, delivered_at)
                     SELECT id, 0, 'sink', 'delivered', 1, received_at, received_at, received_at, 1,
                            '{\"status\":200}', received_at + 40 FROM inbound_event"
                }
                BenchFill::QueueMix => {
                    "INSERT INTO delivery (event_id, step_index, target, state, created_at, pending_since,
                                           next_attempt_at, dead_at, dead_class, dead_reason, resolution)
                     SELECT id, 0, CASE id % 3 WHEN 0 THEN 'crm' WHEN 1 THEN 'notify' ELSE 'erp' END,
                            CASE WHEN id % 100 = 0 THEN 'pending' WHEN id % 200 = 1 THEN 'dead' ELSE 'delivered' END,
                            received_at, received_at, received_at,
                            CASE WHEN id % 200 = 1 THEN received_at END,
                            CASE WHEN id % 200 = 1 THEN CASE id % 3 WHEN 0 THEN 'transient' WHEN 1 THEN 'permanent_data'
                                                                    ELSE 'permanent_config' END END,
                            CASE WHEN id % 200 = 1 THEN 'bench' END,
                            CASE WHEN id % 200 = 1 THEN 'open' END
                       FROM inbound_event"
                }
                BenchFill::DeadLetters => {
                    "INSERT INTO delivery (event_id, step_index, target, state, created_at, dead_at, dead_class,
                                           dead_status, dead_reason, dead_cause, resolution)
                     SELECT id, 0, CASE id % 3 WHEN 0 THEN 'crm' WHEN 1 THEN 'notify' ELSE 'erp' END, 'dead',
                            received_at, received_at,
                            CASE id % 3 WHEN 0 THEN 'transient' WHEN 1 THEN 'permanent_data' ELSE 'permanent_config' END,
                            422, 'cause ' || CASE WHEN id % 100 = 7 THEN 'special' ELSE CAST(id % 10 AS TEXT) END,
                            'cause ' || CASE WHEN id % 100 = 7 THEN 'special' ELSE CAST(id % 10 AS TEXT) END, 'open'
                       FROM inbound_event"
                }
            };
            sqlx::query(steps).execute(&mut *tx).await.context("cannot fill steps")?;
            if fill == BenchFill::DeliveredHistory {
                sqlx::query(
                    "INSERT INTO attempt (delivery_id, started_at, duration_ms, http_status, outcome, reason, trigger)
                     SELECT id, delivered_at - 20, 20, 200, 'delivered', 'delivered (HTTP 200)', 'scheduled'
                       FROM delivery",
                )
                .execute(&mut *tx)
                .await
                .context("cannot fill attempts")?;
            }
            Ok(())
        }

        pub async fn rewrite_as_in_doubt(
            db: &Db,
            delivery_id: i64,
            http_status: u16,
            class: ErrorClass,
            reason: &str,
        ) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            sqlx::query("UPDATE delivery SET in_doubt = 1 WHERE id = $1")
                .bind(delivery_id)
                .execute(&mut *tx)
                .await
                .context("cannot mark the step in doubt")?;
            sqlx::query("UPDATE attempt SET http_status = $1, reason = $2, class = $3 WHERE delivery_id = $4")
                .bind(i64::from(http_status))
                .bind(reason)
                .bind(class.as_str())
                .bind(delivery_id)
                .execute(&mut *tx)
                .await
                .context("cannot rewrite the answers")?;
            tx.commit().await.context("cannot commit the rewrite")?;
            Ok(())
        }

        pub async fn record_unknown_migration(db: &Db, version: i64) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            sqlx::query(
                "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
                 VALUES ($1, 'from the future', TRUE, $2, 1)",
            )
            .bind(version)
            .bind(vec![0u8])
            .execute(&mut *tx)
            .await
            .context("cannot record the migration")?;
            tx.commit().await.context("cannot commit the migration")?;
            Ok(())
        }
    }
    sqlite {
        pub async fn bench_fill(db: &Db, fill: BenchFill, total: u64) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            bench_fill_in(&mut tx, fill, total).await?;
            tx.commit().await.context("cannot commit the fill")?;
            Ok(())
        }
    }
    postgres {
        /// With the row triggers, every inserted step updates the same few tally rows, and PostgreSQL keeps every
        /// version of a row updated again and again in one transaction: the fill would grow with the square of its
        /// size. So the insert triggers are off during the fill and the tallies are counted once, from the rows it
        /// added, in the same transaction (what the triggers would have added, row by row).
        pub async fn bench_fill(db: &Db, fill: BenchFill, total: u64) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            let (before,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(id), 0) FROM delivery")
                .fetch_one(&mut *tx)
                .await
                .context("cannot read the last step")?;
            for statement in [
                "ALTER TABLE delivery DISABLE TRIGGER delivery_tally_insert",
                "ALTER TABLE delivery DISABLE TRIGGER dead_letter_tally_insert",
            ] {
                sqlx::query(statement).execute(&mut *tx).await.context("cannot pause the tally triggers")?;
            }
            bench_fill_in(&mut tx, fill, total).await?;
            sqlx::query(
                "INSERT INTO delivery_tally (target, bucket, n)
                 SELECT target, delivery_bucket(state, resolution, dead_class), COUNT(*) FROM delivery
                  WHERE id > $1 GROUP BY 1, 2
                 ON CONFLICT (target, bucket) DO UPDATE SET n = delivery_tally.n + excluded.n",
            )
            .bind(before)
            .execute(&mut *tx)
            .await
            .context("cannot count the filled steps")?;
            sqlx::query(
                "INSERT INTO dead_letter_tally (target, class, cause, cause_null, resolution, status, source, purged, n)
                 SELECT d.target, COALESCE(d.dead_class, ''), COALESCE(d.dead_cause, ''),
                        CASE WHEN d.dead_cause IS NULL THEN 1 ELSE 0 END, COALESCE(d.resolution, ''),
                        COALESCE(d.dead_status, -1), e.source, CASE WHEN e.purged_at IS NOT NULL THEN 1 ELSE 0 END,
                        COUNT(*)
                   FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                  WHERE d.state = 'dead' AND d.id > $1
                  GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
                 ON CONFLICT (target, class, cause, cause_null, resolution, status, source, purged)
                 DO UPDATE SET n = dead_letter_tally.n + excluded.n",
            )
            .bind(before)
            .execute(&mut *tx)
            .await
            .context("cannot count the filled dead letters")?;
            // Fresh statistics, as autovacuum would gather on a database that grew over months: without them
            // the planner guesses about a million rows it has never seen.
            for statement in [
                "ALTER TABLE delivery ENABLE TRIGGER delivery_tally_insert",
                "ALTER TABLE delivery ENABLE TRIGGER dead_letter_tally_insert",
                "ANALYZE inbound_event",
                "ANALYZE delivery",
                "ANALYZE attempt",
                "ANALYZE delivery_tally",
                "ANALYZE dead_letter_tally",
            ] {
                sqlx::query(statement).execute(&mut *tx).await.context("cannot resume the tally triggers or analyze")?;
            }
            tx.commit().await.context("cannot commit the fill")?;
            Ok(())
        }
    }
}
