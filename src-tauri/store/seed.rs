//! History written from outside the delivery path: event counts per source for the volume baselines and charts,
//! and delivered counts per target for the charts (the demo gives its sources weeks of past so volume-drop and
//! silence detection work from its first minutes, and that past was delivered).

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{ms, Store};

/// How many events a source received in one bucket of the metric history.
#[derive(Debug, Clone, PartialEq)]
pub struct EventCountPoint {
    pub source: String,
    /// The bucket's length in seconds: 60 (per minute) or 3600 (per hour).
    pub resolution_seconds: i64,
    /// The bucket's start.
    pub at: DateTime<Utc>,
    pub events: f64,
}

impl Store {
    /// Writes event counts into the metric history (`events` per source), in one transaction. A bucket that
    /// already has a value keeps it.
    pub async fn seed_event_history(&self, points: &[EventCountPoint]) -> anyhow::Result<()> {
        dispatch!(self, seed_history("events", points))
    }

    /// Writes delivered counts into the metric history (`delivered` per target; a point's `source` names the
    /// target and `events` is the count), as [`Store::seed_event_history`] does for events.
    pub async fn seed_delivered_history(&self, points: &[EventCountPoint]) -> anyhow::Result<()> {
        dispatch!(self, seed_history("delivered", points))
    }
}

backends! {
    shared {
        pub async fn seed_history(db: &Db, metric: &str, points: &[EventCountPoint]) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            for p in points {
                sqlx::query(
                    "INSERT INTO metric_point (metric, key, resolution, at, value) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT DO NOTHING",
                )
                .bind(metric)
                .bind(&p.source)
                .bind(p.resolution_seconds)
                .bind(ms(p.at))
                .bind(p.events)
                .execute(&mut *tx)
                .await
                .with_context(|| format!("cannot write {metric} history"))?;
            }
            tx.commit().await.with_context(|| format!("cannot commit {metric} history"))?;
            Ok(())
        }
    }
}
