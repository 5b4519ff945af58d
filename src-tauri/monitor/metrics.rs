//! Time series for the charts: queue samples, deliveries and failures, volume per source — bucketed on one
//! shared time axis so the UI can plot them directly.

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::delivery::classify::ErrorClass;
use crate::store::{ms, QueueHealth, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    Hour,
    Day,
    Week,
}

impl Range {
    pub fn parse(s: &str) -> Option<Range> {
        match s {
            "1h" => Some(Range::Hour),
            "24h" => Some(Range::Day),
            "7d" => Some(Range::Week),
            _ => None,
        }
    }

    /// (span, bucket) in seconds.
    fn span_and_bucket(self) -> (i64, i64) {
        match self {
            Range::Hour => (3600, 30),
            Range::Day => (86_400, 900),
            Range::Week => (7 * 86_400, 3600),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct MetricSeries {
    pub bucket_seconds: i64,
    /// Bucket start times, Unix seconds.
    pub at: Vec<i64>,
    /// Highest pending count seen in the bucket (`null`: no sample).
    pub pending: Vec<Option<f64>>,
    /// Highest oldest-pending age in the bucket, seconds.
    pub oldest_age_seconds: Vec<Option<f64>>,
    /// Successful attempts per bucket.
    pub delivered: Vec<f64>,
    /// Failed attempts (retried or dead-lettered) per bucket.
    pub failed: Vec<f64>,
    /// Open dead letters by class at the end of each bucket.
    pub dead_open_by_class: BTreeMap<String, Vec<Option<f64>>>,
    /// Events received per bucket, by source.
    pub volume_by_source: BTreeMap<String, Vec<f64>>,
}

/// Stores one queue sample (overall) for the charts.
pub async fn record_sample(store: &Store, health: &QueueHealth) -> anyhow::Result<()> {
    let o = &health.overall;
    sqlx::query(
        "INSERT INTO queue_sample (at, pending, running, oldest_age_s, dead_by_class) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (at) DO NOTHING",
    )
    .bind(ms(health.generated_at))
    .bind(o.pending)
    .bind(o.running)
    .bind(o.oldest_pending_age_seconds)
    .bind(serde_json::to_string(&o.dead_open_by_class)?)
    .execute(store.write_pool())
    .await
    .context("cannot record queue sample")?;
    Ok(())
}

/// Runs a per-bucket aggregate whose SQL takes `?1` = bucket length and `?2` = range start, both in milliseconds.
async fn bucketed<T>(store: &Store, sql: &str, bucket_ms: i64, start_ms: i64) -> Result<Vec<T>, sqlx::Error>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    sqlx::query_as(sql).bind(bucket_ms).bind(start_ms).fetch_all(store.read_pool()).await
}

pub async fn series(store: &Store, range: Range, now: DateTime<Utc>) -> anyhow::Result<MetricSeries> {
    let (span, bucket) = range.span_and_bucket();
    let end = now.timestamp() / bucket * bucket + bucket;
    let start = end - span;
    let n = (span / bucket) as usize;
    let index = |t_ms: i64| -> Option<usize> {
        let i = (t_ms / 1000 - start) / bucket;
        (0..n as i64).contains(&i).then_some(i as usize)
    };
    let at: Vec<i64> = (0..n as i64).map(|i| start + i * bucket).collect();
    let b_ms = bucket * 1000;
    let start_ms = start * 1000;

    let mut pending = vec![None; n];
    let mut oldest = vec![None; n];
    let mut dead: BTreeMap<String, Vec<Option<f64>>> =
        ErrorClass::ALL.iter().map(|c| (c.as_str().to_string(), vec![None; n])).collect();
    let class_cols: String = ErrorClass::ALL
        .iter()
        .map(|c| format!(", MAX(COALESCE(json_extract(dead_by_class, '$.{0}'), 0))", c.as_str()))
        .collect();
    // Bucket, max pending, max oldest age, then the open dead letters of each class in ErrorClass::ALL order.
    type SampleRow = (i64, i64, Option<f64>, i64, i64, i64, i64, i64);
    let sql = format!(
        "SELECT at / ?1 * ?1, MAX(pending), MAX(oldest_age_s){class_cols}
           FROM queue_sample WHERE at >= ?2 GROUP BY at / ?1"
    );
    let rows: Vec<SampleRow> = bucketed(store, &sql, b_ms, start_ms).await.context("cannot read queue samples")?;
    for (t, p, o, c0, c1, c2, c3, c4) in rows {
        if let Some(i) = index(t) {
            pending[i] = Some(p as f64);
            oldest[i] = Some(o.unwrap_or(0.0));
            for (class, v) in ErrorClass::ALL.iter().zip([c0, c1, c2, c3, c4]) {
                if let Some(series) = dead.get_mut(class.as_str()) {
                    series[i] = Some(v as f64);
                }
            }
        }
    }

    let mut delivered = vec![0.0; n];
    let mut failed = vec![0.0; n];
    let rows: Vec<(i64, i64, i64)> = bucketed(
        store,
        "SELECT started_at / ?1 * ?1, COALESCE(SUM(outcome = 'delivered'), 0), COALESCE(SUM(outcome IN ('retry', 'dead')), 0)
           FROM attempt WHERE started_at >= ?2 GROUP BY started_at / ?1",
        b_ms,
        start_ms,
    )
    .await
    .context("cannot read attempts per bucket")?;
    for (t, ok, bad) in rows {
        if let Some(i) = index(t) {
            delivered[i] = ok as f64;
            failed[i] = bad as f64;
        }
    }

    let mut volume: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let rows: Vec<(i64, String, i64)> = bucketed(
        store,
        "SELECT received_at / ?1 * ?1, source, COUNT(*) FROM inbound_event WHERE received_at >= ?2
          GROUP BY received_at / ?1, source",
        b_ms,
        start_ms,
    )
    .await
    .context("cannot read volume per source")?;
    for (t, source, count) in rows {
        if let Some(i) = index(t) {
            volume.entry(source).or_insert_with(|| vec![0.0; n])[i] = count as f64;
        }
    }
    Ok(MetricSeries {
        bucket_seconds: bucket,
        at,
        pending,
        oldest_age_seconds: oldest,
        delivered,
        failed,
        dead_open_by_class: dead,
        volume_by_source: volume,
    })
}
