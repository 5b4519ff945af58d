//! `metric_point`: per-minute samples (gauges written as read, counters recomputed from `inbound_event` and
//! `attempt`), their hourly roll-ups, retention, the series the charts read, and the per-source event counts
//! the volume monitor reads.
//!
//! Buckets are integer arithmetic on the millisecond columns (`at / 60000 * 60000`), the same in both backends.
//!
//! Speed to CRM is kept as a histogram: metric `speed`, key `{bucket}:{source}`, the number of leads of `source`
//! whose first CRM step was delivered in the minute with a speed (received → delivered) in histogram bucket
//! `bucket` of [`SPEED_EDGES_MS`]. A counter like the others: recomputed from `delivery` (the `delivery_delivered`
//! index) and summed on roll-up, so an hour's histogram is exactly the sum of its minutes'.

use std::collections::HashMap;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{from_ms, ms, Store};

/// Counter metrics (summed when rolled up); every other metric is a gauge (highest value kept).
pub const METRIC_COUNTERS: [&str; 6] = ["events", "delivered", "failed", "rate_limited", "dead_lettered", "speed"];

/// How many upper edges the speed histogram has: bucket 0 is `[0, e0)`, bucket `k` is `[e(k-1), e(k))`, and the
/// last bucket, `SPEED_EDGE_COUNT`, is everything from the last edge on.
pub const SPEED_EDGE_COUNT: usize = 98;

/// The speed histogram's bucket edges, milliseconds: 50 ms × 2^(k/4) for k = 0..=97 (50 ms to about 11.6 days),
/// so every bucket but the first and the last spans a factor of 2^(1/4) ≈ 1.19.
pub fn speed_edges_ms() -> [f64; SPEED_EDGE_COUNT] {
    let steps = [1.0, 2f64.powf(0.25), 2f64.sqrt(), 2f64.powf(0.75)];
    std::array::from_fn(|k| 50.0 * 2f64.powi((k / 4) as i32) * steps[k % 4])
}

/// The histogram bucket of a speed in milliseconds (what the recording SQL computes).
pub fn speed_bucket(speed_ms: i64) -> usize {
    speed_edges_ms().iter().take_while(|e| speed_ms as f64 >= **e).count()
}

/// The SQL expression of the histogram bucket of `speed` (milliseconds): a `CASE` over the fixed edges, the same
/// text on both backends.
fn speed_bucket_sql(speed: &str) -> String {
    let mut sql = String::from("CASE");
    for (k, edge) in speed_edges_ms().iter().enumerate() {
        sql.push_str(&format!(" WHEN {speed} < {edge} THEN {k}"));
    }
    sql.push_str(&format!(" ELSE {SPEED_EDGE_COUNT} END"));
    sql
}

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// A gauge's value in the current minute.
#[derive(Debug, Clone)]
pub struct GaugeReading {
    pub metric: &'static str,
    pub key: String,
    pub value: f64,
    /// Keep the highest value seen in the minute (else the latest).
    pub keep_highest: bool,
}

/// History older than these is deleted.
#[derive(Debug, Clone, Copy)]
pub struct MetricsRetention {
    pub minutes_before: DateTime<Utc>,
    pub hours_before: DateTime<Utc>,
}

/// One recording pass, written in one commit.
#[derive(Debug, Clone)]
pub struct MetricsRecord {
    /// The current minute (its start).
    pub minute: DateTime<Utc>,
    pub gauges: Vec<GaugeReading>,
    /// Counters are recomputed from the raw tables for every minute from this one on, and the hours they touch
    /// rolled up again.
    pub recount_from: DateTime<Utc>,
    /// Delete old history in the same pass.
    pub prune: Option<MetricsRetention>,
    /// Targets that are not a CRM (Meta fetch steps, `kind = "meta_lead"`): a lead's speed to CRM is measured at
    /// its first route step to any other target.
    pub fetch_targets: Vec<String>,
}

/// How many rows a pass pruned: (minutes, hours).
pub type Pruned = (u64, u64);

/// Per bucket, metric and key: the sum of the stored values and the highest.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricBucket {
    pub at: DateTime<Utc>,
    pub metric: String,
    pub key: String,
    pub sum: f64,
    pub max: f64,
}

impl Store {
    /// Writes the current minute's gauges, recomputes the counters of the minutes since `recount_from` and rolls
    /// their hours up (counters summed, gauges at their highest), and prunes old history: one commit.
    pub async fn record_metrics(&self, record: &MetricsRecord) -> anyhow::Result<Pruned> {
        dispatch!(self, record_metrics(record))
    }

    /// Hourly event counts of `source` from `since`, oldest first. Hours without events have no row.
    pub async fn hourly_source_events(
        &self,
        source: &str,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<(DateTime<Utc>, f64)>> {
        dispatch!(self, hourly_source_events(source, since))
    }

    /// The start of the first hour with events of `source` still in the history, if any.
    pub async fn first_source_hour(&self, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        dispatch!(self, first_source_hour(source))
    }

    /// The stored points of one resolution (60 or 3600 seconds) from `since`, grouped into buckets of
    /// `bucket_seconds`.
    pub async fn metric_buckets(
        &self,
        resolution_seconds: i64,
        bucket_seconds: i64,
        since: DateTime<Utc>,
    ) -> anyhow::Result<Vec<MetricBucket>> {
        dispatch!(self, metric_buckets(resolution_seconds, bucket_seconds, since))
    }

    /// Per key, the sum of a metric's per-minute values from the minute `since` falls in.
    pub async fn metric_sums_since(&self, metric: &str, since: DateTime<Utc>) -> anyhow::Result<HashMap<String, f64>> {
        dispatch!(self, metric_sums_since(metric, since))
    }

    /// Events of `source` received live since `since`: by webhook, or by polling a source in poll mode (leads
    /// recovered by reconciliation excepted: they are old news).
    pub async fn live_events_since(&self, source: &str, since: DateTime<Utc>) -> anyhow::Result<u64> {
        dispatch!(self, live_events_since(source, since))
    }

    /// When the last event of `source` arrived.
    pub async fn last_source_event(&self, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        dispatch!(self, last_source_event(source))
    }
}

backends! {
    shared {
        pub async fn record_metrics(db: &Db, record: &MetricsRecord) -> anyhow::Result<Pruned> {
            let minute = ms(record.minute) / MINUTE_MS * MINUTE_MS;
            let from = ms(record.recount_from);
            let mut tx = db.begin_write().await?;
            for g in &record.gauges {
                sqlx::query(if g.keep_highest { UPSERT_GAUGE_HIGHEST } else { UPSERT_GAUGE_LATEST })
                    .bind(g.metric)
                    .bind(&g.key)
                    .bind(minute)
                    .bind(g.value)
                    .execute(&mut *tx)
                    .await
                    .with_context(|| format!("cannot record gauge {}", g.metric))?;
            }
            // Counters, recomputed from the raw tables for every minute in [from, now].
            sqlx::query(
                "INSERT INTO metric_point (metric, key, resolution, at, value)
                 SELECT 'events', source, 60, received_at / 60000 * 60000, COUNT(*) FROM inbound_event
                  WHERE received_at >= $1 GROUP BY source, received_at / 60000 * 60000
                 ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = excluded.value",
            )
            .bind(from)
            .execute(&mut *tx)
            .await
            .context("cannot count events per minute")?;
            for (metric, condition) in [
                ("delivered", "a.outcome = 'delivered'"),
                // A rate-limited answer is the target pacing us, not a failure: counted apart.
                ("failed", "a.outcome IN ('retry', 'dead') AND COALESCE(a.class, '') <> 'rate_limited'"),
                ("rate_limited", "a.class = 'rate_limited'"),
                ("dead_lettered", "a.outcome = 'dead'"),
            ] {
                sqlx::query(&format!(
                    "INSERT INTO metric_point (metric, key, resolution, at, value)
                     SELECT '{metric}', d.target, 60, a.started_at / 60000 * 60000, COUNT(*)
                       FROM attempt a JOIN delivery d ON d.id = a.delivery_id
                      WHERE a.started_at >= $1 AND {condition} GROUP BY d.target, a.started_at / 60000 * 60000
                     ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = excluded.value"
                ))
                .bind(from)
                .execute(&mut *tx)
                .await
                .with_context(|| format!("cannot count {metric} per minute"))?;
            }
            // Speed to CRM: per source and minute of delivery, a histogram of received → delivered for each lead's
            // first step that is not a fetch. Deleted and recounted, so a lead delivered again later (a revision)
            // leaves no stale count behind; recent minutes only (the metric_point_time index).
            sqlx::query("DELETE FROM metric_point WHERE resolution = 60 AND at >= $1 AND metric = 'speed'")
                .bind(from)
                .execute(&mut *tx)
                .await
                .context("cannot clear recent speeds")?;
            sqlx::query(&format!(
                "INSERT INTO metric_point (metric, key, resolution, at, value)
                 SELECT 'speed', CAST(s.b AS TEXT) || ':' || s.source, 60, s.m, COUNT(*) FROM (
                   SELECT e.source AS source, d.delivered_at / 60000 * 60000 AS m, {} AS b
                     FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                    WHERE d.state = 'delivered' AND d.delivered_at >= $1 AND NOT ({})
                      AND NOT EXISTS (SELECT 1 FROM delivery p
                                       WHERE p.event_id = d.event_id AND p.step_index < d.step_index AND NOT ({}))
                 ) s GROUP BY s.source, s.m, s.b
                 ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = excluded.value",
                speed_bucket_sql("(d.delivered_at - e.received_at)"),
                in_list("d.target", 2),
                in_list("p.target", 2),
            ))
            .bind(from)
            .bind(list_arg(&record.fetch_targets))
            .execute(&mut *tx)
            .await
            .context("cannot count speeds per minute")?;
            // Roll the touched hours up from their minutes.
            sqlx::query(&format!(
                "INSERT INTO metric_point (metric, key, resolution, at, value)
                 SELECT metric, key, 3600, at / 3600000 * 3600000,
                        CASE WHEN metric IN ({}) THEN SUM(value) ELSE MAX(value) END
                   FROM metric_point WHERE resolution = 60 AND at >= $1
                  GROUP BY metric, key, at / 3600000 * 3600000
                 ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = excluded.value",
                METRIC_COUNTERS.map(|c| format!("'{c}'")).join(", ")
            ))
            .bind(from / HOUR_MS * HOUR_MS)
            .execute(&mut *tx)
            .await
            .context("cannot roll up hours")?;
            let mut pruned = (0, 0);
            if let Some(retention) = record.prune {
                pruned.0 = sqlx::query("DELETE FROM metric_point WHERE resolution = 60 AND at < $1")
                    .bind(ms(retention.minutes_before))
                    .execute(&mut *tx)
                    .await
                    .context("cannot prune minute metrics")?
                    .rows_affected();
                pruned.1 = sqlx::query("DELETE FROM metric_point WHERE resolution = 3600 AND at < $1")
                    .bind(ms(retention.hours_before))
                    .execute(&mut *tx)
                    .await
                    .context("cannot prune hourly metrics")?
                    .rows_affected();
            }
            tx.commit().await.context("cannot commit metrics")?;
            Ok(pruned)
        }

        pub async fn hourly_source_events(
            db: &Db,
            source: &str,
            since: DateTime<Utc>,
        ) -> anyhow::Result<Vec<(DateTime<Utc>, f64)>> {
            let rows: Vec<(i64, f64)> = sqlx::query_as(
                "SELECT at, value FROM metric_point
                  WHERE metric = 'events' AND key = $1 AND resolution = 3600 AND at >= $2
                  ORDER BY at",
            )
            .bind(source)
            .bind(ms(since))
            .fetch_all(db.reader())
            .await
            .context("cannot read hourly events")?;
            Ok(rows.into_iter().map(|(at, n)| (from_ms(at), n)).collect())
        }

        pub async fn first_source_hour(db: &Db, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
            let (at,): (Option<i64>,) = sqlx::query_as(
                "SELECT MIN(at) FROM metric_point WHERE metric = 'events' AND key = $1 AND resolution = 3600",
            )
            .bind(source)
            .fetch_one(db.reader())
            .await
            .context("cannot read first hour")?;
            Ok(at.map(from_ms))
        }

        pub async fn metric_buckets(
            db: &Db,
            resolution_seconds: i64,
            bucket_seconds: i64,
            since: DateTime<Utc>,
        ) -> anyhow::Result<Vec<MetricBucket>> {
            // One pass: per bucket, metric and key, the sum (counters) and the highest value (gauges).
            let rows: Vec<(i64, String, String, f64, f64)> = sqlx::query_as(
                "SELECT at / $1 * $1, metric, key, SUM(value), MAX(value) FROM metric_point
                  WHERE resolution = $2 AND at >= $3 GROUP BY at / $1 * $1, metric, key",
            )
            .bind(bucket_seconds * 1000)
            .bind(resolution_seconds)
            .bind(ms(since))
            .fetch_all(db.reader())
            .await
            .context("cannot read metric history")?;
            Ok(rows
                .into_iter()
                .map(|(at, metric, key, sum, max)| MetricBucket { at: from_ms(at), metric, key, sum, max })
                .collect())
        }

        pub async fn metric_sums_since(db: &Db, metric: &str, since: DateTime<Utc>) -> anyhow::Result<HashMap<String, f64>> {
            let rows: Vec<(String, f64)> = sqlx::query_as(
                "SELECT key, SUM(value) FROM metric_point WHERE metric = $1 AND resolution = 60 AND at >= $2
                  GROUP BY key",
            )
            .bind(metric)
            .bind(ms(since) / MINUTE_MS * MINUTE_MS)
            .fetch_all(db.reader())
            .await
            .context("cannot sum metric")?;
            Ok(rows.into_iter().collect())
        }

        pub async fn live_events_since(db: &Db, source: &str, since: DateTime<Utc>) -> anyhow::Result<u64> {
            let (n,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM inbound_event WHERE source = $1 AND received_at >= $2 AND via <> 'reconciliation'",
            )
            .bind(source)
            .bind(ms(since))
            .fetch_one(db.reader())
            .await
            .context("cannot count recent events")?;
            Ok(n.max(0) as u64)
        }

        pub async fn last_source_event(db: &Db, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
            let (last,): (Option<i64>,) = sqlx::query_as("SELECT MAX(received_at) FROM inbound_event WHERE source = $1")
                .bind(source)
                .fetch_one(db.reader())
                .await
                .context("cannot read the last event")?;
            Ok(last.map(from_ms))
        }
    }
    sqlite {
        /// `expr IN <the list bound as $n>`: a JSON array read with `json_each`.
        fn in_list(expr: &str, n: usize) -> String {
            format!("{expr} IN (SELECT value FROM json_each(${n}))")
        }
        fn list_arg(names: &[String]) -> String {
            serde_json::Value::from(names.to_vec()).to_string()
        }
        const UPSERT_GAUGE_HIGHEST: &str = "INSERT INTO metric_point (metric, key, resolution, at, value)
             VALUES ($1, $2, 60, $3, $4)
             ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = MAX(metric_point.value, excluded.value)";
        const UPSERT_GAUGE_LATEST: &str = "INSERT INTO metric_point (metric, key, resolution, at, value)
             VALUES ($1, $2, 60, $3, $4)
             ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = excluded.value";
    }
    postgres {
        /// `expr IN <the list bound as $n>`: a `TEXT[]`.
        fn in_list(expr: &str, n: usize) -> String {
            format!("{expr} = ANY(${n})")
        }
        fn list_arg(names: &[String]) -> Vec<String> {
            names.to_vec()
        }
        const UPSERT_GAUGE_HIGHEST: &str = "INSERT INTO metric_point (metric, key, resolution, at, value)
             VALUES ($1, $2, 60, $3, $4)
             ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = GREATEST(metric_point.value, excluded.value)";
        const UPSERT_GAUGE_LATEST: &str = "INSERT INTO metric_point (metric, key, resolution, at, value)
             VALUES ($1, $2, 60, $3, $4)
             ON CONFLICT (metric, key, resolution, at) DO UPDATE SET value = excluded.value";
    }
}
