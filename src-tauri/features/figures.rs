//! Delivery figures per source and target over a period: speed to CRM (received → delivered) p50 and p95,
//! first-attempt success rate, dead letters per day, and the time each target's breaker spent open.
//!
//! Read from the raw tables (the `delivery_delivered` and `attempt_started` indexes), so they stay exact; dead
//! letters are counted from their attempts, so replaying or purging one does not rewrite history.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::store::Store;

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct RouteFigures {
    pub source: String,
    pub target: String,
    /// Steps delivered in the period.
    pub delivered: i64,
    /// Received → delivered, seconds (nearest-rank percentiles); `null` when nothing was delivered.
    pub speed_p50_seconds: Option<f64>,
    pub speed_p95_seconds: Option<f64>,
    /// Share of finished scheduled steps delivered by their first counted attempt (0–1).
    pub first_attempt_success: Option<f64>,
    /// Dead-lettered in the period.
    pub dead_letters: i64,
    pub dead_letters_per_day: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct TargetFigures {
    pub target: String,
    /// Time the breaker was not closed (open or probing) in the period, seconds.
    pub breaker_open_seconds: f64,
    /// Times it opened in the period.
    pub breaker_openings: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct DeliveryFigures {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub routes: Vec<RouteFigures>,
    pub targets: Vec<TargetFigures>,
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// Seconds the breaker was not closed in `[since, until)`, and how often it opened, from its transitions
/// (`(at, to_state)`, in order) and the state it was in at `since`.
pub fn breaker_time(
    state_at_start: &str,
    transitions: &[(DateTime<Utc>, String)],
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> (f64, i64) {
    let mut open = 0.0;
    let mut openings = 0;
    let mut state = state_at_start.to_string();
    let mut from = since;
    for (at, to) in transitions.iter().filter(|(at, _)| *at >= since && *at < until) {
        if state != "closed" {
            open += (*at - from).num_milliseconds() as f64 / 1000.0;
        }
        if to == "open" && state == "closed" {
            openings += 1;
        }
        state = to.clone();
        from = *at;
    }
    if state != "closed" {
        open += (until - from).num_milliseconds() as f64 / 1000.0;
    }
    (open, openings)
}

pub async fn figures(
    store: &Store,
    targets: &[String],
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> anyhow::Result<DeliveryFigures> {
    type Key = (String, String);
    let mut speeds: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    let mut first_ok: BTreeMap<Key, i64> = BTreeMap::new();
    let mut finished: BTreeMap<Key, i64> = BTreeMap::new();
    for step in store.delivered_steps(since, until).await? {
        let speed_ms = (step.delivered_at - step.received_at).num_milliseconds();
        let key = (step.source, step.target);
        speeds.entry(key.clone()).or_default().push(speed_ms.max(0) as f64 / 1000.0);
        if step.trigger == "scheduled" {
            *finished.entry(key.clone()).or_default() += 1;
            if step.attempts <= 1 {
                *first_ok.entry(key).or_default() += 1;
            }
        }
    }
    let dead = store.dead_letters_by_route(since, until).await?;
    let mut dead_by: BTreeMap<Key, i64> = BTreeMap::new();
    for route in dead {
        let key = (route.source, route.target);
        *finished.entry(key.clone()).or_default() += route.scheduled;
        dead_by.insert(key, route.dead_letters);
    }
    let days = ((until - since).num_seconds() as f64 / 86_400.0).max(1.0 / 24.0);
    let keys: std::collections::BTreeSet<Key> = speeds.keys().chain(dead_by.keys()).cloned().collect();
    let routes = keys
        .into_iter()
        .map(|key| {
            let mut s = speeds.remove(&key).unwrap_or_default();
            s.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            let done = finished.get(&key).copied().unwrap_or(0);
            let dead = dead_by.get(&key).copied().unwrap_or(0);
            RouteFigures {
                delivered: s.len() as i64,
                speed_p50_seconds: percentile(&s, 50.0),
                speed_p95_seconds: percentile(&s, 95.0),
                first_attempt_success: (done > 0)
                    .then(|| first_ok.get(&key).copied().unwrap_or(0) as f64 / done as f64),
                dead_letters: dead,
                dead_letters_per_day: dead as f64 / days,
                source: key.0,
                target: key.1,
            }
        })
        .collect();
    let mut target_figures = Vec::new();
    for target in targets {
        let history = store.breaker_history(target, since, until).await?;
        let (open, openings) =
            breaker_time(history.state_at_start.as_deref().unwrap_or("closed"), &history.transitions, since, until);
        target_figures.push(TargetFigures {
            target: target.clone(),
            breaker_open_seconds: open,
            breaker_openings: openings,
        });
    }
    Ok(DeliveryFigures { since, until, routes, targets: target_figures })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 95.0), Some(95.0));
        assert_eq!(percentile(&[3.0], 95.0), Some(3.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn breaker_time_counts_open_and_half_open_inside_the_period() {
        let t0 = DateTime::from_timestamp(1_000_000, 0).unwrap();
        let s = |x: i64| t0 + chrono::Duration::seconds(x);
        let transitions = vec![
            (s(100), "open".to_string()),
            (s(130), "half_open".to_string()),
            (s(131), "closed".to_string()),
            (s(500), "open".to_string()),
        ];
        // Open 100–131 (31 s), then from 500 to the end at 600 (100 s); opened twice.
        assert_eq!(breaker_time("closed", &transitions, s(0), s(600)), (131.0, 2));
        // Open when the period starts: counted from its start.
        assert_eq!(breaker_time("open", &[(s(50), "closed".to_string())], s(0), s(600)), (50.0, 0));
    }
}
