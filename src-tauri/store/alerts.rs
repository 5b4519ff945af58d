//! `alert`: open → acknowledged → resolved, at most one unresolved alert per (kind, key) (a partial unique
//! index), and their announcements (when last announced, how often, whether held for a digest or quiet hours).

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{from_ms, ms, Store};
use crate::model::{decode, AlertKind, AlertState, Held, Place, Severity};

/// What to raise.
#[derive(Debug, Clone)]
pub struct AlertSpec {
    pub kind: AlertKind,
    /// What it is about (a target name, `*`).
    pub key: String,
    pub severity: Severity,
    pub title: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct Alert {
    pub id: i64,
    pub kind: AlertKind,
    pub key: String,
    pub severity: Severity,
    pub title: String,
    pub detail: String,
    pub opened_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub occurrences: i64,
    pub acknowledged_at: Option<DateTime<Utc>>,
    pub acknowledged_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution_note: Option<String>,
    pub state: AlertState,
    /// When it was last announced (notification or digest); `null` while not announced.
    pub notified_at: Option<DateTime<Utc>>,
    /// How many times it was announced (re-notifications included).
    pub notifications: i64,
    /// Waiting to be announced: in the next digest, or when quiet hours end.
    pub held: Option<Held>,
    /// Where a person acts on it (derived from kind and key, not stored).
    pub place: Place,
}

/// How a hold is stored in `alert.digest_pending` (0 is "not held").
fn held_code(why: Held) -> i64 {
    match why {
        Held::Digest => 1,
        Held::QuietHours => 2,
    }
}

pub(super) type Row = (
    i64,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
    i64,
    i64,
);
pub(super) const COLUMNS: &str =
    "id, kind, key, severity, title, detail, opened_at, last_seen_at, occurrences, acknowledged_at,
                       acknowledged_by, resolved_at, resolution_note, notified_at, notifications, digest_pending";

pub(super) fn to_alert(r: Row) -> anyhow::Result<Alert> {
    let state = if r.11.is_some() {
        AlertState::Resolved
    } else if r.9.is_some() {
        AlertState::Acknowledged
    } else {
        AlertState::Open
    };
    let kind: AlertKind = decode(&r.1)?;
    Ok(Alert {
        id: r.0,
        kind,
        place: Place::of_alert(kind, &r.2),
        key: r.2,
        severity: decode(&r.3)?,
        title: r.4,
        detail: r.5,
        opened_at: from_ms(r.6),
        last_seen_at: from_ms(r.7),
        occurrences: r.8,
        acknowledged_at: r.9.map(from_ms),
        acknowledged_by: r.10,
        resolved_at: r.11.map(from_ms),
        resolution_note: r.12,
        state,
        notified_at: r.13.map(from_ms),
        notifications: r.14,
        held: match r.15 {
            0 => None,
            1 => Some(Held::Digest),
            2 => Some(Held::QuietHours),
            n => anyhow::bail!("unexpected value in the database: alert {} is held for `{n}`", r.0),
        },
    })
}

impl Store {
    /// Opens the alert of (kind, key), or counts another occurrence of the unresolved one (its title and detail
    /// become the new ones). Returns the alert as stored now: `occurrences == 1` when it just opened.
    pub async fn raise_alert(&self, spec: &AlertSpec, now: DateTime<Utc>) -> anyhow::Result<Alert> {
        dispatch!(self, raise_alert(spec, now))
    }

    /// Sets the title and detail of the unresolved alert of (kind, key) without counting an occurrence. Returns
    /// whether one was open with other figures.
    pub async fn refresh_alert(&self, kind: AlertKind, key: &str, title: &str, detail: &str) -> anyhow::Result<bool> {
        dispatch!(self, refresh_alert(kind, key, title, detail))
    }

    /// Turns the unresolved alert of (`from`, `spec.key`) into the alert `spec` describes — its kind, severity,
    /// title and detail; one more occurrence — when no alert of `spec.kind` is open for that key: an incident that
    /// grew (fewer leads than usual, then none at all) stays one alert, with its opening time, its
    /// acknowledgement and its announcements. Returns the alert as stored now; `None` when there was nothing to
    /// turn (no such alert, or one of the new kind is already open).
    pub async fn escalate_alert(
        &self,
        from: AlertKind,
        spec: &AlertSpec,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Option<Alert>> {
        dispatch!(self, escalate_alert(from, spec, now))
    }

    /// Resolves the unresolved alert of (kind, key), if any. Returns whether one was resolved.
    pub async fn resolve_alert(
        &self,
        kind: AlertKind,
        key: &str,
        note: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        dispatch!(self, resolve_alert(kind, key, note, now))
    }

    /// Acknowledges an alert (the first acknowledgement is kept). `None` when there is no such alert.
    pub async fn acknowledge_alert(&self, id: i64, by: &str, now: DateTime<Utc>) -> anyhow::Result<Option<Alert>> {
        dispatch!(self, acknowledge_alert(id, by, now))
    }

    /// Up to `limit` alerts: unresolved ones first (newest first), then the most recent resolved ones.
    pub async fn alerts(&self, limit: u32) -> anyhow::Result<Vec<Alert>> {
        dispatch!(self, alerts(limit))
    }

    /// Every unresolved alert, most severe and newest first.
    pub async fn unresolved_alerts(&self) -> anyhow::Result<Vec<Alert>> {
        dispatch!(self, unresolved_alerts())
    }

    /// Keys of the unresolved alerts of one kind.
    pub async fn unresolved_alert_keys(&self, kind: AlertKind) -> anyhow::Result<Vec<String>> {
        dispatch!(self, unresolved_alert_keys(kind))
    }

    /// Records that the alert was announced at `now` (it is no longer held).
    pub async fn mark_alert_notified(&self, id: i64, now: DateTime<Utc>) -> anyhow::Result<()> {
        dispatch!(self, mark_alert_notified(id, now))
    }

    /// Holds the alert, to be announced later for `why`.
    pub async fn hold_alert(&self, id: i64, why: Held) -> anyhow::Result<()> {
        dispatch!(self, hold_alert(id, why))
    }

    /// The alerts held for `why`, oldest first, marked as announced at `now` in the same commit.
    pub async fn take_held_alerts(&self, why: Held, now: DateTime<Utc>) -> anyhow::Result<Vec<Alert>> {
        dispatch!(self, take_held_alerts(why, now))
    }

    /// Unresolved alerts that were announced and are neither acknowledged nor held: candidates for
    /// re-notification.
    pub async fn unacknowledged_alerts(&self) -> anyhow::Result<Vec<Alert>> {
        dispatch!(self, unacknowledged_alerts())
    }
}

backends! {
    shared {
        pub async fn raise_alert(db: &Db, spec: &AlertSpec, now: DateTime<Utc>) -> anyhow::Result<Alert> {
            let mut tx = db.begin_write().await?;
            // `alert.occurrences`, qualified: PostgreSQL finds a bare name ambiguous beside `excluded`.
            let row: Row = sqlx::query_as(&format!(
                "INSERT INTO alert (kind, key, severity, title, detail, opened_at, last_seen_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (kind, key) WHERE resolved_at IS NULL
                 DO UPDATE SET last_seen_at = excluded.last_seen_at, occurrences = alert.occurrences + 1,
                               detail = excluded.detail, title = excluded.title
                 RETURNING {COLUMNS}"
            ))
            .bind(spec.kind.as_str())
            .bind(&spec.key)
            .bind(spec.severity.as_str())
            .bind(&spec.title)
            .bind(&spec.detail)
            .bind(ms(now))
            .bind(ms(now))
            .fetch_one(&mut *tx)
            .await
            .context("cannot raise alert")?;
            tx.commit().await.context("cannot commit alert")?;
            to_alert(row)
        }

        pub async fn refresh_alert(db: &Db, kind: AlertKind, key: &str, title: &str, detail: &str) -> anyhow::Result<bool> {
            let mut tx = db.begin_write().await?;
            let r = sqlx::query(
                "UPDATE alert SET title = $1, detail = $2 WHERE kind = $3 AND key = $4 AND resolved_at IS NULL
                    AND (title <> $5 OR detail <> $6)",
            )
            .bind(title)
            .bind(detail)
            .bind(kind.as_str())
            .bind(key)
            .bind(title)
            .bind(detail)
            .execute(&mut *tx)
            .await
            .context("cannot refresh alert")?;
            tx.commit().await.context("cannot commit alert refresh")?;
            Ok(r.rows_affected() > 0)
        }

        pub async fn escalate_alert(db: &Db, from: AlertKind, spec: &AlertSpec, now: DateTime<Utc>) -> anyhow::Result<Option<Alert>> {
            let mut tx = db.begin_write().await?;
            let row: Option<Row> = sqlx::query_as(&format!(
                "UPDATE alert SET kind = $1, severity = $2, title = $3, detail = $4, last_seen_at = $5,
                                  occurrences = occurrences + 1
                  WHERE kind = $6 AND key = $7 AND resolved_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM alert other
                                     WHERE other.kind = $8 AND other.key = $9 AND other.resolved_at IS NULL)
                  RETURNING {COLUMNS}"
            ))
            .bind(spec.kind.as_str())
            .bind(spec.severity.as_str())
            .bind(&spec.title)
            .bind(&spec.detail)
            .bind(ms(now))
            .bind(from.as_str())
            .bind(&spec.key)
            .bind(spec.kind.as_str())
            .bind(&spec.key)
            .fetch_optional(&mut *tx)
            .await
            .context("cannot escalate alert")?;
            tx.commit().await.context("cannot commit alert escalation")?;
            row.map(to_alert).transpose()
        }

        pub async fn resolve_alert(db: &Db, kind: AlertKind, key: &str, note: &str, now: DateTime<Utc>) -> anyhow::Result<bool> {
            let mut tx = db.begin_write().await?;
            let r = sqlx::query(
                "UPDATE alert SET resolved_at = $1, resolution_note = $2
                  WHERE kind = $3 AND key = $4 AND resolved_at IS NULL",
            )
            .bind(ms(now))
            .bind(note)
            .bind(kind.as_str())
            .bind(key)
            .execute(&mut *tx)
            .await
            .context("cannot resolve alert")?;
            tx.commit().await.context("cannot commit alert resolution")?;
            Ok(r.rows_affected() > 0)
        }

        pub async fn acknowledge_alert(db: &Db, id: i64, by: &str, now: DateTime<Utc>) -> anyhow::Result<Option<Alert>> {
            let mut tx = db.begin_write().await?;
            let row: Option<Row> = sqlx::query_as(&format!(
                "UPDATE alert SET acknowledged_at = COALESCE(acknowledged_at, $1),
                                  acknowledged_by = COALESCE(acknowledged_by, $2)
                  WHERE id = $3 RETURNING {COLUMNS}"
            ))
            .bind(ms(now))
            .bind(by)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .context("cannot acknowledge alert")?;
            tx.commit().await.context("cannot commit acknowledgement")?;
            row.map(to_alert).transpose()
        }

        pub async fn alerts(db: &Db, limit: u32) -> anyhow::Result<Vec<Alert>> {
            let rows: Vec<Row> = sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM alert ORDER BY resolved_at IS NOT NULL, opened_at DESC, id DESC LIMIT $1"
            ))
            .bind(i64::from(limit))
            .fetch_all(db.reader())
            .await
            .context("cannot list alerts")?;
            rows.into_iter().map(to_alert).collect()
        }

        pub async fn unresolved_alerts(db: &Db) -> anyhow::Result<Vec<Alert>> {
            let rows: Vec<Row> = sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM alert WHERE resolved_at IS NULL
                  ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, opened_at DESC, id DESC"
            ))
            .fetch_all(db.reader())
            .await
            .context("cannot read unresolved alerts")?;
            rows.into_iter().map(to_alert).collect()
        }

        pub async fn unresolved_alert_keys(db: &Db, kind: AlertKind) -> anyhow::Result<Vec<String>> {
            let rows: Vec<(String,)> = sqlx::query_as("SELECT key FROM alert WHERE kind = $1 AND resolved_at IS NULL")
                .bind(kind.as_str())
                .fetch_all(db.reader())
                .await
                .context("cannot read alerts")?;
            Ok(rows.into_iter().map(|r| r.0).collect())
        }

        pub async fn mark_alert_notified(db: &Db, id: i64, now: DateTime<Utc>) -> anyhow::Result<()> {
            sqlx::query(
                "UPDATE alert SET notified_at = $1, notifications = notifications + 1, digest_pending = 0 WHERE id = $2",
            )
            .bind(ms(now))
            .bind(id)
            .execute(db.writer())
            .await
            .context("cannot record notification")?;
            Ok(())
        }

        pub async fn hold_alert(db: &Db, id: i64, why: Held) -> anyhow::Result<()> {
            sqlx::query("UPDATE alert SET digest_pending = $1 WHERE id = $2")
                .bind(held_code(why))
                .bind(id)
                .execute(db.writer())
                .await
                .context("cannot hold alert for the digest")?;
            Ok(())
        }

        pub async fn take_held_alerts(db: &Db, why: Held, now: DateTime<Utc>) -> anyhow::Result<Vec<Alert>> {
            let mut tx = db.begin_write().await?;
            let rows: Vec<Row> = sqlx::query_as(&format!(
                "UPDATE alert SET digest_pending = 0, notified_at = $1, notifications = notifications + 1
                  WHERE digest_pending = $2 RETURNING {COLUMNS}"
            ))
            .bind(ms(now))
            .bind(held_code(why))
            .fetch_all(&mut *tx)
            .await
            .context("cannot take held alerts")?;
            tx.commit().await.context("cannot commit digest")?;
            let mut alerts = rows.into_iter().map(to_alert).collect::<anyhow::Result<Vec<Alert>>>()?;
            alerts.sort_by_key(|a| a.id);
            Ok(alerts)
        }

        pub async fn unacknowledged_alerts(db: &Db) -> anyhow::Result<Vec<Alert>> {
            let rows: Vec<Row> = sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM alert
                  WHERE resolved_at IS NULL AND acknowledged_at IS NULL AND digest_pending = 0
                    AND notified_at IS NOT NULL"
            ))
            .fetch_all(db.reader())
            .await
            .context("cannot read unacknowledged alerts")?;
            rows.into_iter().map(to_alert).collect()
        }
    }
}
