//! Alerts: open → acknowledged → resolved, at most one unresolved alert per (kind, key). Raising an alert that
//! is already open only counts another occurrence, so a person hears of an incident once, not once per lead.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::store::{from_ms, ms, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// What to raise.
#[derive(Debug, Clone)]
pub struct AlertSpec {
    /// `permanent_config`, `breaker_open`, `oldest_pending`, ...
    pub kind: &'static str,
    /// What it is about (a target name, `*`).
    pub key: String,
    pub severity: Severity,
    pub title: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct Alert {
    pub id: i64,
    pub kind: String,
    pub key: String,
    pub severity: String,
    pub title: String,
    pub detail: String,
    pub opened_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub occurrences: i64,
    pub acknowledged_at: Option<DateTime<Utc>>,
    pub acknowledged_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution_note: Option<String>,
    /// `open`, `acknowledged` or `resolved`.
    pub state: String,
    /// When it was last announced (notification or digest); `null` while not announced.
    pub notified_at: Option<DateTime<Utc>>,
    /// How many times it was announced (re-notifications included).
    pub notifications: i64,
    /// Waiting to be announced: in the next digest, or when quiet hours end.
    pub held: Option<String>,
}

type Row = (
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
const COLUMNS: &str = "id, kind, key, severity, title, detail, opened_at, last_seen_at, occurrences, acknowledged_at,
                       acknowledged_by, resolved_at, resolution_note, notified_at, notifications, digest_pending";

fn to_alert(r: Row) -> Alert {
    let state = if r.11.is_some() {
        "resolved"
    } else if r.9.is_some() {
        "acknowledged"
    } else {
        "open"
    };
    Alert {
        id: r.0,
        kind: r.1,
        key: r.2,
        severity: r.3,
        title: r.4,
        detail: r.5,
        opened_at: from_ms(r.6),
        last_seen_at: from_ms(r.7),
        occurrences: r.8,
        acknowledged_at: r.9.map(from_ms),
        acknowledged_by: r.10,
        resolved_at: r.11.map(from_ms),
        resolution_note: r.12,
        state: state.into(),
        notified_at: r.13.map(from_ms),
        notifications: r.14,
        held: match r.15 {
            1 => Some("digest".into()),
            2 => Some("quiet_hours".into()),
            _ => None,
        },
    }
}

/// Opens the alert, or counts another occurrence of the unresolved one. Returns the alert and whether it is new.
pub async fn raise(store: &Store, spec: &AlertSpec, now: DateTime<Utc>) -> anyhow::Result<(Alert, bool)> {
    let mut tx = store.begin_write().await?;
    let row: Row = sqlx::query_as(&format!(
        "INSERT INTO alert (kind, key, severity, title, detail, opened_at, last_seen_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (kind, key) WHERE resolved_at IS NULL
         DO UPDATE SET last_seen_at = excluded.last_seen_at, occurrences = occurrences + 1, detail = excluded.detail,
                       title = excluded.title
         RETURNING {COLUMNS}"
    ))
    .bind(spec.kind)
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
    let alert = to_alert(row);
    let new = alert.occurrences == 1;
    Ok((alert, new))
}

/// Keeps the figures of the unresolved alert of (kind, key) current (a silence that goes on: "for 25 min", not
/// the 10 it had when raised), without counting an occurrence or announcing anything. Returns whether one was open.
pub async fn refresh(store: &Store, kind: &str, key: &str, title: &str, detail: &str) -> anyhow::Result<bool> {
    let mut tx = store.begin_write().await?;
    let r = sqlx::query(
        "UPDATE alert SET title = ?, detail = ? WHERE kind = ? AND key = ? AND resolved_at IS NULL
            AND (title <> ? OR detail <> ?)",
    )
    .bind(title)
    .bind(detail)
    .bind(kind)
    .bind(key)
    .bind(title)
    .bind(detail)
    .execute(&mut *tx)
    .await
    .context("cannot refresh alert")?;
    tx.commit().await.context("cannot commit alert refresh")?;
    Ok(r.rows_affected() > 0)
}

/// Resolves the unresolved alert of (kind, key), if any. Returns whether one was resolved.
pub async fn resolve(store: &Store, kind: &str, key: &str, note: &str, now: DateTime<Utc>) -> anyhow::Result<bool> {
    let mut tx = store.begin_write().await?;
    let r = sqlx::query(
        "UPDATE alert SET resolved_at = ?, resolution_note = ? WHERE kind = ? AND key = ? AND resolved_at IS NULL",
    )
    .bind(ms(now))
    .bind(note)
    .bind(kind)
    .bind(key)
    .execute(&mut *tx)
    .await
    .context("cannot resolve alert")?;
    tx.commit().await.context("cannot commit alert resolution")?;
    Ok(r.rows_affected() > 0)
}

/// Acknowledges an alert: someone is on it. `None` when there is no such alert.
pub async fn acknowledge(store: &Store, id: i64, by: &str, now: DateTime<Utc>) -> anyhow::Result<Option<Alert>> {
    let mut tx = store.begin_write().await?;
    let row: Option<Row> = sqlx::query_as(&format!(
        "UPDATE alert SET acknowledged_at = COALESCE(acknowledged_at, ?), acknowledged_by = COALESCE(acknowledged_by, ?)
          WHERE id = ? RETURNING {COLUMNS}"
    ))
    .bind(ms(now))
    .bind(by)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
    .context("cannot acknowledge alert")?;
    tx.commit().await.context("cannot commit acknowledgement")?;
    Ok(row.map(to_alert))
}

/// Unresolved alerts first (newest first), then the most recent resolved ones.
pub async fn list(store: &Store, limit: u32) -> anyhow::Result<Vec<Alert>> {
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM alert ORDER BY resolved_at IS NOT NULL, opened_at DESC, id DESC LIMIT ?"
    ))
    .bind(i64::from(limit))
    .fetch_all(store.read_pool())
    .await
    .context("cannot list alerts")?;
    Ok(rows.into_iter().map(to_alert).collect())
}

/// Every unresolved alert, most severe and newest first.
pub async fn unresolved(store: &Store) -> anyhow::Result<Vec<Alert>> {
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM alert WHERE resolved_at IS NULL
          ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, opened_at DESC, id DESC"
    ))
    .fetch_all(store.read_pool())
    .await
    .context("cannot read unresolved alerts")?;
    Ok(rows.into_iter().map(to_alert).collect())
}

/// Keys of the unresolved alerts of one kind.
pub async fn unresolved_keys(store: &Store, kind: &str) -> anyhow::Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as("SELECT key FROM alert WHERE kind = ? AND resolved_at IS NULL")
        .bind(kind)
        .fetch_all(store.read_pool())
        .await
        .context("cannot read alerts")?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// Why an alert waits to be announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Its kind's policy is `digest`.
    Digest = 1,
    /// It opened during quiet hours.
    QuietHours = 2,
}

/// Records that the alert was announced now.
pub async fn mark_notified(store: &Store, id: i64, now: DateTime<Utc>) -> anyhow::Result<()> {
    sqlx::query("UPDATE alert SET notified_at = ?, notifications = notifications + 1, digest_pending = 0 WHERE id = ?")
        .bind(ms(now))
        .bind(id)
        .execute(store.write_pool())
        .await
        .context("cannot record notification")?;
    Ok(())
}

/// Keeps the alert for the next digest.
pub async fn hold(store: &Store, id: i64, why: Held) -> anyhow::Result<()> {
    sqlx::query("UPDATE alert SET digest_pending = ? WHERE id = ?")
        .bind(why as i64)
        .bind(id)
        .execute(store.write_pool())
        .await
        .context("cannot hold alert for the digest")?;
    Ok(())
}

/// The alerts held for `why`, oldest first, marked as announced at `now` in the same transaction.
pub async fn take_held(store: &Store, why: Held, now: DateTime<Utc>) -> anyhow::Result<Vec<Alert>> {
    let mut tx = store.begin_write().await?;
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "UPDATE alert SET digest_pending = 0, notified_at = ?, notifications = notifications + 1
          WHERE digest_pending = ? RETURNING {COLUMNS}"
    ))
    .bind(ms(now))
    .bind(why as i64)
    .fetch_all(&mut *tx)
    .await
    .context("cannot take held alerts")?;
    tx.commit().await.context("cannot commit digest")?;
    let mut alerts: Vec<Alert> = rows.into_iter().map(to_alert).collect();
    alerts.sort_by_key(|a| a.id);
    Ok(alerts)
}

/// Unresolved alerts that are neither acknowledged nor waiting for a digest: candidates for re-notification.
pub async fn unacknowledged(store: &Store) -> anyhow::Result<Vec<Alert>> {
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM alert
          WHERE resolved_at IS NULL AND acknowledged_at IS NULL AND digest_pending = 0 AND notified_at IS NOT NULL"
    ))
    .fetch_all(store.read_pool())
    .await
    .context("cannot read unacknowledged alerts")?;
    Ok(rows.into_iter().map(to_alert).collect())
}
