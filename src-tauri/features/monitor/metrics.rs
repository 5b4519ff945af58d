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
//!
//! **Speed to CRM** (received → delivered) is charted per source as a median and a slow end (the 90th
//! percentile). A lead counts once, when its first CRM step is delivered: the first step of its route that is not
//! a Meta fetch (`kind = "meta_lead"`, see [`Recorder::for_config`]) — step 1 of a Meta source, step 0 of any
//! other; later steps (an SMS after the CRM) do not count. It is charted in the bucket of its delivery.
//!
//! Percentiles do not add up: an hour's median is not the mean, nor the highest, of its minutes' medians. So the
//! recording keeps a *mergeable* summary instead of percentiles: per minute and source, a histogram of speeds in
//! fixed log-spaced buckets ([`crate::store::speed_edges_ms`]: 50 ms × 2^(k/4), up to about 11.6 days), stored as
//! counters (`speed`) beside the others, recounted from the raw rows like them and summed on roll-up. A chart
//! bucket's histogram is the exact sum of its minutes' (or hours') histograms, so its percentiles are those of
//! every raw delivery in it, to the histogram's resolution: the reported value is the geometric middle of the
//! bucket that holds the nearest-rank percentile, within ±9 % (2^(1/8)) of the raw percentile; under 50 ms it
//! reads 50 ms (an upper bound), from 11.6 days on 11.6 days (a lower bound). Scanning the raw deliveries at read time instead would be exact, but the charts are
//! read every few seconds and 7 d can hold a million deliveries; the histogram keeps the read bounded by the
//! range's metric rows (the `metric_point_time` index) and the record pass by the recount window (the
//! `delivery_delivered` index).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::{Config, MetricsConfig, TargetKind};
use crate::model::ErrorClass;
use crate::store::{
    from_ms, ms, speed_edges_ms, GaugeReading, MetricBucket, MetricsRecord, MetricsRetention, QueueHealth, Store,
    METRIC_COUNTERS, SPEED_EDGE_COUNT,
};

pub const MINUTE: i64 = 60_000;
pub const HOUR: i64 = 3_600_000;

/// Counter metrics (summed when rolled up); every other metric is a gauge (highest value kept).
pub const COUNTERS: [&str; 6] = METRIC_COUNTERS;

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
    /// Speed to CRM (received → first CRM step delivered), seconds, by source: the median of the leads delivered
    /// in the bucket (`null`: none was). From a histogram, within ±9 % (see the module docs).
    pub speed_p50_by_source: BTreeMap<String, Vec<Option<f64>>>,
    /// The slow end: the 90th percentile, seconds, by source.
    pub speed_p90_by_source: BTreeMap<String, Vec<Option<f64>>>,
    /// Leads that reached the CRM in the last hour, all sources together: the 60 complete minutes before the
    /// current one, whatever the chart's range (read from the per-minute history).
    pub speed_last_hour_delivered: f64,
    /// Their median speed to CRM, seconds (`null`: none did).
    pub speed_last_hour_p50: Option<f64>,
    /// Their 90th percentile, seconds (`null`: none did).
    pub speed_last_hour_p90: Option<f64>,
}

/// Speeds counted per histogram bucket (index: bucket of [`speed_edges_ms`], the last one open-ended).
pub type SpeedHistogram = [f64; SPEED_EDGE_COUNT + 1];

/// The speed a histogram bucket stands for, seconds: the geometric middle of its edges (the first edge for the
/// first bucket, so that "within" stays true; the last edge for the open-ended last one).
pub fn speed_of_bucket(bucket: usize) -> f64 {
    let edges = speed_edges_ms();
    let ms = match bucket {
        0 => edges[0],
        b if b >= SPEED_EDGE_COUNT => edges[SPEED_EDGE_COUNT - 1],
        b => (edges[b - 1] * edges[b]).sqrt(),
    };
    ms / 1000.0
}

/// The nearest-rank `p`th percentile (0–100) of the speeds in a histogram, seconds (the same rank as
/// `figures::percentile` over the raw values); `None` when it is empty.
pub fn histogram_percentile(histogram: &SpeedHistogram, p: f64) -> Option<f64> {
    let total: f64 = histogram.iter().sum();
    if total < 1.0 {
        return None;
    }
    let rank = ((p / 100.0) * total).ceil().max(1.0);
    let mut seen = 0.0;
    for (bucket, n) in histogram.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(speed_of_bucket(bucket));
        }
    }
    Some(speed_of_bucket(SPEED_EDGE_COUNT))
}

/// A `speed` metric key, `{bucket}:{source}`, split.
fn speed_key(key: &str) -> Option<(usize, &str)> {
    let (bucket, source) = key.split_once(':')?;
    let bucket: usize = bucket.parse().ok()?;
    (bucket <= SPEED_EDGE_COUNT).then_some((bucket, source))
}

/// What the recorder remembers between runs: up to which minute counters are final.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Targets that are not a CRM (Meta fetch steps): speed to CRM is measured at a lead's first other step.
    fetch_targets: Vec<String>,
    /// Counters before this minute (Unix ms) were written after the minute ended.
    counted_until: Option<i64>,
    /// The hour whose retention pass ran last.
    pruned_hour: Option<i64>,
}

impl Recorder {
    /// A recorder for `config`'s routes: its `meta_lead` targets are fetch steps, not CRMs.
    pub fn for_config(config: &Config) -> Recorder {
        Recorder::with_fetch_targets(
            config.targets.iter().filter(|(_, t)| t.kind() == TargetKind::MetaLead).map(|(name, _)| name.clone()),
        )
    }

    /// A recorder that does not count steps to `fetch_targets` as reaching the CRM.
    pub fn with_fetch_targets(fetch_targets: impl IntoIterator<Item = String>) -> Recorder {
        Recorder { fetch_targets: fetch_targets.into_iter().collect(), ..Recorder::default() }
    }
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
        .record_metrics(&MetricsRecord {
            minute: from_ms(minute),
            gauges,
            recount_from: from_ms(from),
            prune,
            fetch_targets: recorder.fetch_targets.clone(),
        })
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
    let complete_until = end - bucket;
    // The speed summary covers the 60 complete minutes before the current one: on the 1 h chart its rows, read
    // from a minute earlier; on the others, a read of their own minutes.
    let summary_until = now.timestamp() / 60 * 60;
    let summary_from = summary_until - 3600;
    let by_minute = resolution == 60 && bucket == 60;
    let since = if by_minute { start.min(summary_from) } else { start };
    let buckets = store.metric_buckets(resolution, bucket, from_ms(since * 1000)).await?;
    let mut last_hour: SpeedHistogram = [0.0; SPEED_EDGE_COUNT + 1];
    let in_last_hour = |t: DateTime<Utc>| (summary_from..summary_until).contains(&(ms(t) / 1000));
    if !by_minute {
        for m in store.metric_buckets(60, 60, from_ms(summary_from * 1000)).await? {
            if let Some((b, _)) = speed_key(&m.key).filter(|_| m.metric == "speed" && in_last_hour(m.at)) {
                last_hour[b] += m.sum;
            }
        }
    }

    let mut pending = vec![None; n];
    let mut oldest = vec![None; n];
    let mut delivered = vec![0.0; n];
    let mut failed = vec![0.0; n];
    let mut rate_limited = vec![0.0; n];
    let mut dead: BTreeMap<String, Vec<Option<f64>>> =
        ErrorClass::ALL.iter().map(|c| (c.as_str().to_string(), vec![None; n])).collect();
    let mut volume: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut speeds: BTreeMap<String, Vec<SpeedHistogram>> = BTreeMap::new();
    for MetricBucket { at: t, metric, key, sum, max } in buckets {
        if metric == "speed" {
            let Some((b, source)) = speed_key(&key) else { continue };
            if by_minute && in_last_hour(t) {
                last_hour[b] += sum;
            }
            if let Some(i) = index(ms(t)) {
                speeds.entry(source.to_string()).or_insert_with(|| vec![[0.0; SPEED_EDGE_COUNT + 1]; n])[i][b] += sum;
            }
            continue;
        }
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
        complete_until,
        dead_open_by_class: dead,
        volume_by_source: volume,
        speed_p50_by_source: percentiles(&speeds, 50.0),
        speed_p90_by_source: percentiles(&speeds, 90.0),
        speed_last_hour_delivered: last_hour.iter().sum(),
        speed_last_hour_p50: histogram_percentile(&last_hour, 50.0),
        speed_last_hour_p90: histogram_percentile(&last_hour, 90.0),
    })
}

/// Per source and bucket, the `p`th percentile of the bucket's histogram.
fn percentiles(speeds: &BTreeMap<String, Vec<SpeedHistogram>>, p: f64) -> BTreeMap<String, Vec<Option<f64>>> {
    speeds
        .iter()
        .map(|(source, buckets)| (source.clone(), buckets.iter().map(|h| histogram_percentile(h, p)).collect()))
        .collect()
}

/// Per key, the sum of a counter's per-minute values since `since`.
pub async fn sum_since(
    store: &Store,
    metric: &str,
    since: DateTime<Utc>,
) -> anyhow::Result<std::collections::HashMap<String, f64>> {
    store.metric_sums_since(metric, since).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::figures::percentile;
    use crate::store::speed_bucket;

    /// The stated resolution: a reported speed is within a factor 2^(1/8) of the raw one (±9 %); under 50 ms
    /// it is 50 ms.
    fn close(reported: f64, raw: f64) -> bool {
        if raw < 0.05 {
            reported == 0.05
        } else {
            let ratio = reported / raw;
            ratio <= 2f64.powf(0.125) + 1e-9 && ratio >= 2f64.powf(-0.125) - 1e-9
        }
    }

    #[test]
    fn metrics_speed_buckets_are_log_spaced_and_cover_every_speed() {
        let edges = speed_edges_ms();
        assert_eq!(edges[0], 50.0);
        assert_eq!(edges[4], 100.0);
        assert_eq!(edges[40], 51_200.0);
        assert!(edges.windows(2).all(|w| w[0] < w[1]));
        assert!(edges[SPEED_EDGE_COUNT - 1] / 1000.0 > 11.0 * 86_400.0, "about 11.6 days");
        assert_eq!(speed_bucket(0), 0);
        assert_eq!(speed_bucket(49), 0);
        assert_eq!(speed_bucket(50), 1);
        assert_eq!(speed_bucket(99), 4);
        assert_eq!(speed_bucket(100), 5);
        assert_eq!(speed_bucket(i64::MAX), SPEED_EDGE_COUNT);
        // Every speed read back from its bucket is within the stated resolution.
        for ms in (0..2_000).chain((2_000..10_000_000).step_by(997)) {
            let s = ms as f64 / 1000.0;
            assert!(
                close(speed_of_bucket(speed_bucket(ms)), s),
                "{ms} ms read back as {}",
                speed_of_bucket(speed_bucket(ms))
            );
        }
    }

    #[test]
    fn metrics_speed_percentiles_of_a_summed_histogram_are_those_of_the_raw_values() {
        // Two minutes with very different speeds: the hour's median is the median of all 30, which neither the
        // mean nor the highest of the two minutes' medians is.
        let fast: Vec<i64> = (1..=20).map(|i| i * 100).collect(); // 0.1 s … 2 s
        let slow: Vec<i64> = (1..=10).map(|i| 60_000 + i * 1_000).collect(); // 61 s … 70 s
        let mut minute_a: SpeedHistogram = [0.0; SPEED_EDGE_COUNT + 1];
        let mut minute_b: SpeedHistogram = [0.0; SPEED_EDGE_COUNT + 1];
        fast.iter().for_each(|ms| minute_a[speed_bucket(*ms)] += 1.0);
        slow.iter().for_each(|ms| minute_b[speed_bucket(*ms)] += 1.0);
        let mut hour = minute_a;
        hour.iter_mut().zip(minute_b).for_each(|(h, b)| *h += b);
        let mut raw: Vec<f64> = fast.iter().chain(&slow).map(|ms| *ms as f64 / 1000.0).collect();
        raw.sort_by(f64::total_cmp);
        for p in [50.0, 90.0, 95.0, 100.0, 1.0] {
            let (reported, exact) = (histogram_percentile(&hour, p).unwrap(), percentile(&raw, p).unwrap());
            assert!(close(reported, exact), "p{p}: {reported} against {exact}");
        }
        let p50 = histogram_percentile(&hour, 50.0).unwrap();
        assert!(close(p50, 1.5), "the 15th of 30 is 1.5 s, got {p50}");
        assert!(close(histogram_percentile(&hour, 90.0).unwrap(), 67.0), "the 27th of 30 is 67 s");
        assert_eq!(histogram_percentile(&[0.0; SPEED_EDGE_COUNT + 1], 50.0), None);
    }

    #[test]
    fn metrics_speed_keys_name_bucket_and_source() {
        assert_eq!(speed_key("12:web:form"), Some((12, "web:form")));
        assert_eq!(speed_key("999:x"), None);
        assert_eq!(speed_key("x:y"), None);
    }
}
