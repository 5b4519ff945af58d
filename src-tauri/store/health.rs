//! Queue health from the trigger-maintained `delivery_tally` and the `delivery_oldest_lead` index:
//! a handful of index lookups, whatever the number of stored jobs.

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{from_ms, ms, Store};

#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq, ts_rs::TS)]
pub struct TargetHealth {
    /// Target name, or `*` for the total over all targets.
    pub target: String,
    /// Age of the oldest lead with a step due or sending (pending or running), counted from when Leadline received
    /// the lead — retries and replays do not reset it — in seconds; `null` when there is none.
    pub oldest_pending_age_seconds: Option<f64>,
    pub pending: i64,
    pub running: i64,
    /// Steps waiting for an earlier step of their route.
    pub waiting: i64,
    pub delivered: i64,
    /// Steps that ended as reported, not sent (a conversion too old for the platform's window, a stage the target
    /// does not map): final, counted apart from delivered and dead letters.
    pub reported: i64,
    /// Open dead letters (not yet replayed, fixed or discarded).
    pub dead_open: i64,
    pub dead_open_by_class: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ts_rs::TS)]
pub struct QueueHealth {
    pub generated_at: DateTime<Utc>,
    pub overall: TargetHealth,
    pub targets: Vec<TargetHealth>,
}

impl Store {
    /// Whether the database answers a query (its schema was brought up to date when the store opened): what a
    /// readiness probe asks.
    pub async fn ping(&self) -> anyhow::Result<()> {
        dispatch!(self, ping())
    }

    /// Queue health per target and overall. `known_targets` are listed even when they have no jobs yet.
    pub async fn queue_health(&self, now: DateTime<Utc>, known_targets: &[String]) -> anyhow::Result<QueueHealth> {
        dispatch!(self, queue_health(now, known_targets))
    }

    /// Deliveries counted per target and bucket by reading every row: what `delivery_tally` keeps (buckets
    /// `waiting`, `pending`, `running`, `delivered`, `reported`, `dead:<class>` for open dead letters, `dead_resolved`), for
    /// checking the kept counts against the real ones. Scans the table: not for the UI.
    pub async fn recount_deliveries(&self) -> anyhow::Result<BTreeMap<(String, String), i64>> {
        dispatch!(self, recount_deliveries())
    }

    /// Undelivered due steps of `target` (pending or running) projected to run out of their retry time
    /// (`monitor::budget::Projection`, whose `as_query` gives the two bounds): those that became due at or before
    /// `started_by`, and those whose own next try is at least `own_wait` after they became due. How many, and when
    /// the oldest of them became due.
    pub async fn running_out_of_budget(
        &self,
        target: &str,
        started_by: DateTime<Utc>,
        own_wait: chrono::Duration,
    ) -> anyhow::Result<(i64, Option<DateTime<Utc>>)> {
        dispatch!(self, running_out_of_budget(target, started_by, own_wait))
    }

    /// Targets that answered "slow down" (an attempt of class `rate_limited`) since `since`.
    pub async fn rate_limited_targets(&self, since: DateTime<Utc>) -> anyhow::Result<Vec<String>> {
        dispatch!(self, rate_limited_targets(since))
    }

    /// When `target` last delivered a lead.
    pub async fn last_delivered_at(&self, target: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        dispatch!(self, last_delivered_at(target))
    }
}

backends! {
    shared {
        pub async fn ping(db: &Db) -> anyhow::Result<()> {
            let (n,): (i64,) = sqlx::query_as("SELECT CAST(1 AS BIGINT)")
                .fetch_one(db.reader())
                .await
                .context("the database does not answer")?;
            anyhow::ensure!(n == 1, "unexpected answer from the database");
            Ok(())
        }

        pub async fn queue_health(db: &Db, now: DateTime<Utc>, known_targets: &[String]) -> anyhow::Result<QueueHealth> {
            let tallies: Vec<(String, String, i64)> = sqlx::query_as("SELECT target, bucket, n FROM delivery_tally")
                .fetch_all(db.reader())
                .await
                .context("cannot read delivery_tally")?;
            let mut per_target: BTreeMap<String, TargetHealth> = known_targets
                .iter()
                .map(|t| (t.clone(), TargetHealth { target: t.clone(), ..Default::default() }))
                .collect();
            for (target, bucket, n) in tallies {
                let h = per_target.entry(target.clone()).or_insert_with(|| TargetHealth { target, ..Default::default() });
                match bucket.as_str() {
                    "pending" => h.pending += n,
                    "running" => h.running += n,
                    "waiting" => h.waiting += n,
                    "delivered" => h.delivered += n,
                    "reported" => h.reported += n,
                    "dead_resolved" => {}
                    other => {
                        if let Some(class) = other.strip_prefix("dead:") {
                            if n != 0 {
                                *h.dead_open_by_class.entry(class.to_string()).or_default() += n;
                            }
                            h.dead_open += n;
                        }
                    }
                }
            }
            let mut overall = TargetHealth { target: "*".into(), ..Default::default() };
            let mut oldest_overall: Option<i64> = None;
            for h in per_target.values_mut() {
                if h.pending + h.running > 0 {
                    // The age of the oldest undelivered lead, from when Leadline received it: a retry, a replay or the
                    // previous step's delivery does not make a lead young again. A step's created_at is its lead's
                    // reception, so one seek of `delivery_oldest_lead` answers (a join with the leads would read
                    // every unfinished step: 40 ms at 10,000 of them).
                    let (oldest,): (Option<i64>,) = sqlx::query_as(
                        "SELECT MIN(created_at) FROM delivery WHERE state IN ('pending', 'running') AND target = $1",
                    )
                    .bind(&h.target)
                    .fetch_one(db.reader())
                    .await
                    .context("cannot read oldest pending step")?;
                    if let Some(o) = oldest {
                        h.oldest_pending_age_seconds = Some(((ms(now) - o).max(0)) as f64 / 1000.0);
                        oldest_overall = Some(oldest_overall.map_or(o, |x| x.min(o)));
                    }
                }
                overall.pending += h.pending;
                overall.running += h.running;
                overall.waiting += h.waiting;
                overall.delivered += h.delivered;
                overall.reported += h.reported;
                overall.dead_open += h.dead_open;
                for (class, n) in &h.dead_open_by_class {
                    *overall.dead_open_by_class.entry(class.clone()).or_default() += n;
                }
            }
            overall.oldest_pending_age_seconds = oldest_overall.map(|o| ((ms(now) - o).max(0)) as f64 / 1000.0);
            Ok(QueueHealth { generated_at: now, overall, targets: per_target.into_values().collect() })
        }

        pub async fn recount_deliveries(db: &Db) -> anyhow::Result<BTreeMap<(String, String), i64>> {
            let rows: Vec<(String, String, i64)> = sqlx::query_as(
                "SELECT target, bucket, COUNT(*) FROM
                        (SELECT target,
                                CASE WHEN state = 'dead' AND resolution = 'open' THEN 'dead:' || dead_class
                                     WHEN state = 'dead' THEN 'dead_resolved' ELSE state END AS bucket
                           FROM delivery) AS d
                  GROUP BY target, bucket",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot count deliveries")?;
            Ok(rows.into_iter().map(|(t, b, n)| ((t, b), n)).collect())
        }

        pub async fn running_out_of_budget(
            db: &Db,
            target: &str,
            started_by: DateTime<Utc>,
            own_wait: chrono::Duration,
        ) -> anyhow::Result<(i64, Option<DateTime<Utc>>)> {
            let (n, oldest): (i64, Option<i64>) = sqlx::query_as(
                "SELECT COUNT(*), MIN(pending_since) FROM delivery
                  WHERE target = $1 AND state IN ('pending', 'running')
                    AND (pending_since <= $2 OR next_attempt_at - pending_since >= $3)",
            )
            .bind(target)
            .bind(ms(started_by))
            .bind(own_wait.num_milliseconds())
            .fetch_one(db.reader())
            .await
            .context("cannot read steps near their retry budget")?;
            Ok((n, oldest.map(from_ms)))
        }

        pub async fn rate_limited_targets(db: &Db, since: DateTime<Utc>) -> anyhow::Result<Vec<String>> {
            let rows: Vec<(String,)> = sqlx::query_as(
                "SELECT DISTINCT d.target FROM attempt a JOIN delivery d ON d.id = a.delivery_id
                  WHERE a.started_at >= $1 AND a.class = 'rate_limited'",
            )
            .bind(ms(since))
            .fetch_all(db.reader())
            .await
            .context("cannot read rate limits")?;
            Ok(rows.into_iter().map(|r| r.0).collect())
        }

        pub async fn last_delivered_at(db: &Db, target: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
            let (at,): (Option<i64>,) =
                sqlx::query_as("SELECT MAX(delivered_at) FROM delivery WHERE target = $1 AND state = 'delivered'")
                    .bind(target)
                    .fetch_one(db.reader())
                    .await
                    .context("cannot read last delivery")?;
            Ok(at.map(from_ms))
        }
    }
}
