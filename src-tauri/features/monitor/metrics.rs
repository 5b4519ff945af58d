//! Metric history for the charts and the volume baselines, in `metric_point`.
//!
//! Every few seconds [`record`] writes the current minute: gauges from the live queue health (pending and
//! oldest-pending age per target and overall, open dead letters per class; the highest value seen in the
//! minute is kept) and counters recomputed from the raw tables (events per source; delivered, failed and
//! dead-lettered attempts per target). Recomputing instead of incrementing means a restart, a late commit or a
//! crash never leaves a wrong count: the next run simply writes the right one. Each touched hour is rolled up
//! from its minutes (counters summed, gauges at their highest). Per-minute rows are kept
//! `monitor.metrics.minute_retention_hours`, hourly rows `monitor.metrics.hourly_retention_days`.
//!
//! The charts read minutes for 1 h (1-minute buckets) and 24 h (15-minute buckets), hours for 7 d.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::MetricsConfig;
use crate::features::delivery::classify::ErrorClass;
use crate::store::{
    from_ms, ms, GaugeReading, MetricBucket, MetricsRecord, MetricsRetention, QueueHealth, Store, METRIC_COUNTERS,
};

pub const MINUTE: i64 = 60_000;
pub const HOUR: i64 = 3_600_000;

/// Counter metrics (summed when rolled up); every other metric is a gauge (highest value kept).
pub const COUNTERS: [&str; 5] = METRIC_COUNTERS;

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

    /// How far back the range reaches.
    pub fn span(self) -> chrono::Duration {
        chrono::Duration::seconds(self.plan().0)
    }

    /// (span, bucket) in seconds, and the stored resolution read.
    fn plan(self) -> (i64, i64, i64) {
        match self {
            Range::Hour => (3600, 60, 60),
            Range::Day => (86_400, 900, 60),
            Range::Week => (7 * 86_400, 3600, 3600),
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
    /// Failed attempts (retried or dead-lettered) per bucket, rate-limited answers excepted.
    pub failed: Vec<f64>,
    /// Attempts answered "slow down" (rate-limited) per bucket: not failures.
    pub rate_limited: Vec<f64>,
    /// Buckets starting at or after this time (Unix seconds) are still being counted: their counters are
    /// incomplete and must not be read as a dip.
    pub complete_until: i64,
    /// Open dead letters by class (highest in the bucket).
    pub dead_open_by_class: BTreeMap<String, Vec<Option<f64>>>,
    /// Events received per bucket, by source.
    pub volume_by_source: BTreeMap<String, Vec<f64>>,
}

/// What the recorder remembers between runs: up to which minute counters are final.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Counters before this minute (Unix ms) were written after the minute ended.
    counted_until: Option<i64>,
    /// The hour whose retention pass ran last.
    pruned_hour: Option<i64>,
}

/// How far back counters are recomputed on each run: attempts are stored when they finish, so an attempt that
/// started two minutes ago can still land in its start minute.
const RECOUNT_MINUTES: i64 = 3;

/// Writes the current minute's gauges and recomputes recent counters and their hours (see the module docs).
pub async fn record(
    store: &Store,
    recorder: &mut Recorder,
    health: &QueueHealth,
    retention: &MetricsConfig,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let now_ms = ms(now);
    let minute = now_ms / MINUTE * MINUTE;
    // On the first run, rebuild the minutes the process was away for (within retention, at most 48 h).
    let from = match recorder.counted_until {
        Some(until) => until.min(minute - RECOUNT_MINUTES * MINUTE),
        None => minute - (retention.minute_retention_hours.min(48) as i64) * HOUR,
    };
    let mut gauges = Vec::new();
    for t in std::iter::once(&health.overall).chain(&health.targets) {
        let gauge = |metric, value| GaugeReading { metric, key: t.target.clone(), value, keep_highest: true };
        gauges.push(gauge("pending", t.pending as f64));
        gauges.push(gauge("oldest_age_s", t.oldest_pending_age_seconds.unwrap_or(0.0)));
    }
    for class in ErrorClass::ALL {
        let n = health.overall.dead_open_by_class.get(class.as_str()).copied().unwrap_or(0);
        gauges.push(GaugeReading {
            metric: "dead_open",
            key: class.as_str().to_string(),
            value: n as f64,
            keep_highest: false,
        });
    }
    let hour = minute / HOUR * HOUR;
    let prune = (recorder.pruned_hour != Some(hour)).then(|| MetricsRetention {
        minutes_before: from_ms(now_ms - retention.minute_retention_hours as i64 * HOUR),
        hours_before: from_ms(now_ms - retention.hourly_retention_days as i64 * 24 * HOUR),
    });
    let (minutes, hours) = store
        .record_metrics(&MetricsRecord { minute: from_ms(minute), gauges, recount_from: from_ms(from), prune })
        .await?;
    if minutes + hours > 0 {
        tracing::debug!(minutes, hours, "pruned metric history");
    }
    recorder.counted_until = Some(minute);
    recorder.pruned_hour = Some(hour);
    Ok(())
}

/// Hourly event counts of one source from `since` (bucket start in Unix ms → count). Hours without events
/// have no row: they count as zero.
pub async fn hourly_events(store: &Store, source: &str, since: DateTime<Utc>) -> anyhow::Result<Vec<(i64, f64)>> {
    Ok(store.hourly_source_events(source, since).await?.into_iter().map(|(at, n)| (ms(at), n)).collect())
}

/// The start of the first hour with events of `source` still in the history, if any.
pub async fn first_hour(store: &Store, source: &str) -> anyhow::Result<Option<i64>> {
    Ok(store.first_source_hour(source).await?.map(ms))
}

pub async fn series(store: &Store, range: Range, now: DateTime<Utc>) -> anyhow::Result<MetricSeries> {
    let (span, bucket, resolution) = range.plan();
    let end = now.timestamp() / bucket * bucket + bucket;
    let start = end - span;
    let n = (span / bucket) as usize;
    let at: Vec<i64> = (0..n as i64).map(|i| start + i * bucket).collect();
    let index = |t_ms: i64| -> Option<usize> {
        let i = (t_ms / 1000 - start) / bucket;
        (0..n as i64).contains(&i).then_some(i as usize)
    };
    let buckets = store.metric_buckets(resolution, bucket, from_ms(start * 1000)).await?;

    let mut pending = vec![None; n];
    let mut oldest = vec![None; n];
    let mut delivered = vec![0.0; n];
    let mut failed = vec![0.0; n];
    let mut rate_limited = vec![0.0; n];
    let mut dead: BTreeMap<String, Vec<Option<f64>>> =
        ErrorClass::ALL.iter().map(|c| (c.as_str().to_string(), vec![None; n])).collect();
    let mut volume: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for MetricBucket { at: t, metric, key, sum, max } in buckets {
        let Some(i) = index(ms(t)) else { continue };
        match metric.as_str() {
            "pending" if key == "*" => pending[i] = Some(max),
            "oldest_age_s" if key == "*" => oldest[i] = Some(max),
            "delivered" => delivered[i] += sum,
            "failed" => failed[i] += sum,
            "rate_limited" => rate_limited[i] += sum,
            "dead_open" => {
                if let Some(s) = dead.get_mut(&key) {
                    s[i] = Some(max);
                }
            }
            "events" => volume.entry(key).or_insert_with(|| vec![0.0; n])[i] += sum,
            _ => {}
        }
    }
    Ok(MetricSeries {
        bucket_seconds: bucket,
        at,
        pending,
        oldest_age_seconds: oldest,
        delivered,
        failed,
        rate_limited,
        complete_until: end - bucket,
        dead_open_by_class: dead,
        volume_by_source: volume,
    })
}

/// Per key, the sum of a counter's per-minute values since `since`.
pub async fn sum_since(
    store: &Store,
    metric: &str,
    since: DateTime<Utc>,
) -> anyhow::Result<std::collections::HashMap<String, f64>> {
    store.metric_sums_since(metric, since).await
}
