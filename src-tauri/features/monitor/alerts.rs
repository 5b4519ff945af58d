//! Alerts: open → acknowledged → resolved, at most one unresolved alert per (kind, key). Raising an alert that
//! is already open only counts another occurrence, so a person hears of an incident once, not once per lead.
//! The alerts are kept by the store ([`crate::store::Store::raise_alert`] and its neighbours).

use chrono::{DateTime, Utc};

use crate::store::Store;
pub use crate::store::{Alert, AlertKind, AlertSpec, AlertState, Held, Severity};

/// Opens the alert, or counts another occurrence of the unresolved one. Returns the alert and whether it is new.
pub async fn raise(store: &Store, spec: &AlertSpec, now: DateTime<Utc>) -> anyhow::Result<(Alert, bool)> {
    let alert = store.raise_alert(spec, now).await?;
    let new = alert.occurrences == 1;
    Ok((alert, new))
}

/// Keeps the figures of the unresolved alert of (kind, key) current (a silence that goes on: "for 25 min", not
/// the 10 it had when raised), without counting an occurrence or announcing anything. Returns whether one was open.
pub async fn refresh(store: &Store, kind: AlertKind, key: &str, title: &str, detail: &str) -> anyhow::Result<bool> {
    store.refresh_alert(kind, key, title, detail).await
}

/// Resolves the unresolved alert of (kind, key), if any. Returns whether one was resolved.
pub async fn resolve(
    store: &Store,
    kind: AlertKind,
    key: &str,
    note: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<bool> {
    store.resolve_alert(kind, key, note, now).await
}

/// Acknowledges an alert: someone is on it. `None` when there is no such alert.
pub async fn acknowledge(store: &Store, id: i64, by: &str, now: DateTime<Utc>) -> anyhow::Result<Option<Alert>> {
    store.acknowledge_alert(id, by, now).await
}

/// Unresolved alerts first (newest first), then the most recent resolved ones.
pub async fn list(store: &Store, limit: u32) -> anyhow::Result<Vec<Alert>> {
    store.alerts(limit).await
}

/// Every unresolved alert, most severe and newest first.
pub async fn unresolved(store: &Store) -> anyhow::Result<Vec<Alert>> {
    store.unresolved_alerts().await
}

/// Keys of the unresolved alerts of one kind.
pub async fn unresolved_keys(store: &Store, kind: AlertKind) -> anyhow::Result<Vec<String>> {
    store.unresolved_alert_keys(kind).await
}

/// Records that the alert was announced now.
pub async fn mark_notified(store: &Store, id: i64, now: DateTime<Utc>) -> anyhow::Result<()> {
    store.mark_alert_notified(id, now).await
}

/// Keeps the alert for the next digest.
pub async fn hold(store: &Store, id: i64, why: Held) -> anyhow::Result<()> {
    store.hold_alert(id, why).await
}

/// The alerts held for `why`, oldest first, marked as announced at `now` in the same transaction.
pub async fn take_held(store: &Store, why: Held, now: DateTime<Utc>) -> anyhow::Result<Vec<Alert>> {
    store.take_held_alerts(why, now).await
}

/// Unresolved alerts that are neither acknowledged nor waiting for a digest: candidates for re-notification.
pub async fn unacknowledged(store: &Store) -> anyhow::Result<Vec<Alert>> {
    store.unacknowledged_alerts().await
}
