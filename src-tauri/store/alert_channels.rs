//! `alert_channel`: how far each alert channel (Slack, e-mail, a webhook) is with announcing each alert. Every
//! channel decides on its own (its policy, its quiet hours, its digest), so an alert announced on Slack may still
//! be held for the e-mail digest. A send is claimed with a lease first, so two processes on one database never
//! send the same announcement twice; a failed send keeps the row's state and counts the failure, for the next
//! pass to retry.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::alerts::{to_alert, Row, COLUMNS};
use super::{from_ms, ms, Store};
use crate::model::Held;
use crate::store::Alert;

/// Where one alert stands on one channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelState {
    /// To be sent on its own as soon as possible (a failed send stays due).
    Due,
    /// Waits for this channel's digest or the end of its quiet hours.
    Held(Held),
    /// Announced.
    Sent,
}

impl ChannelState {
    fn as_str(self) -> &'static str {
        match self {
            ChannelState::Due => "due",
            ChannelState::Held(Held::Digest) => "digest",
            ChannelState::Held(Held::QuietHours) => "quiet_hours",
            ChannelState::Sent => "sent",
        }
    }

    fn parse(s: &str) -> anyhow::Result<ChannelState> {
        Ok(match s {
            "due" => ChannelState::Due,
            "digest" => ChannelState::Held(Held::Digest),
            "quiet_hours" => ChannelState::Held(Held::QuietHours),
            "sent" => ChannelState::Sent,
            other => anyhow::bail!("unexpected value in the database: alert channel state `{other}`"),
        })
    }
}

/// An alert as one channel has it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelEntry {
    pub alert: Alert,
    pub state: ChannelState,
    /// When this channel last announced it.
    pub notified_at: Option<DateTime<Utc>>,
    /// How often this channel announced it.
    pub notifications: i64,
    /// Failed sends since the last success.
    pub failures: i64,
    pub last_error: Option<String>,
    pub last_attempt_at: Option<DateTime<Utc>>,
}

/// A channel that could not deliver: what it still has to send and why the last send failed.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct ChannelTrouble {
    pub channel: String,
    /// Announcements waiting after at least one failed send.
    pub failing: i64,
    pub last_error: String,
    pub last_attempt_at: DateTime<Utc>,
}

/// What a channel has done: for the channel list.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct ChannelSummary {
    pub channel: String,
    /// Announcements not sent yet (held for a digest or quiet hours, due, or failing).
    pub waiting: i64,
    /// When this channel last delivered something.
    pub last_sent_at: Option<DateTime<Utc>>,
}

type EntryRow = (i64, String, Option<i64>, i64, i64, Option<String>, Option<i64>);

/// Rows of `channel` a pass may act on: not leased by a send under way, and either still to be announced or
/// announced but open and unacknowledged (`with_sent`: candidates for re-notification).
const ACTIONABLE: &str = "channel = $1 AND (lease_until IS NULL OR lease_until <= $2)
    AND (state <> 'sent' OR ($3 = 1 AND alert_id IN
         (SELECT id FROM alert WHERE resolved_at IS NULL AND acknowledged_at IS NULL)))";

impl Store {
    /// Records how each channel is to announce a new alert (`(channel, state)`); a channel named twice keeps the
    /// first.
    pub async fn queue_alert_for_channels(
        &self,
        alert_id: i64,
        entries: &[(String, ChannelState)],
    ) -> anyhow::Result<()> {
        dispatch!(self, queue_alert_for_channels(alert_id, entries))
    }

    /// The alerts `channel` may have to announce at `now`: not sent yet, or (with `with_sent`) sent and still open
    /// and unacknowledged. Oldest first.
    pub async fn channel_entries(
        &self,
        channel: &str,
        with_sent: bool,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<ChannelEntry>> {
        dispatch!(self, channel_entries(channel, with_sent, now))
    }

    /// Takes the lease on the announcements of `alert_ids` on `channel` until `until`; returns the ids it got
    /// (another process may be sending the others).
    pub async fn claim_channel_entries(
        &self,
        channel: &str,
        alert_ids: &[i64],
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> anyhow::Result<Vec<i64>> {
        dispatch!(self, claim_channel_entries(channel, alert_ids, now, until))
    }

    /// Ends a claimed send: on success the announcements are sent at `now`; on failure they keep their state,
    /// count the failure and keep its message (without secrets: the caller's) for a later pass to retry.
    pub async fn finish_channel_entries(
        &self,
        channel: &str,
        alert_ids: &[i64],
        now: DateTime<Utc>,
        error: Option<&str>,
    ) -> anyhow::Result<()> {
        dispatch!(self, finish_channel_entries(channel, alert_ids, now, error))
    }

    /// Channels whose last send failed and that still have announcements to make, most recent failure first.
    pub async fn channel_troubles(&self) -> anyhow::Result<Vec<ChannelTrouble>> {
        dispatch!(self, channel_troubles())
    }

    /// Per channel that ever had something to announce: how much waits, when it last delivered.
    pub async fn channel_summaries(&self) -> anyhow::Result<Vec<ChannelSummary>> {
        dispatch!(self, channel_summaries())
    }
}

backends! {
    shared {
        pub async fn queue_alert_for_channels(db: &Db, alert_id: i64, entries: &[(String, ChannelState)]) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            for (channel, state) in entries {
                sqlx::query(
                    "INSERT INTO alert_channel (alert_id, channel, state) VALUES ($1, $2, $3)
                     ON CONFLICT (alert_id, channel) DO NOTHING",
                )
                .bind(alert_id)
                .bind(channel)
                .bind(state.as_str())
                .execute(&mut *tx)
                .await
                .context("cannot queue an alert for its channels")?;
            }
            tx.commit().await.context("cannot commit an alert's channels")?;
            Ok(())
        }

        pub async fn channel_entries(db: &Db, channel: &str, with_sent: bool, now: DateTime<Utc>) -> anyhow::Result<Vec<ChannelEntry>> {
            let rows: Vec<EntryRow> = sqlx::query_as(&format!(
                "SELECT alert_id, state, notified_at, notifications, failures, last_error, last_attempt_at
                   FROM alert_channel WHERE {ACTIONABLE} ORDER BY alert_id"
            ))
            .bind(channel)
            .bind(ms(now))
            .bind(i64::from(with_sent))
            .fetch_all(db.reader())
            .await
            .context("cannot read a channel's announcements")?;
            if rows.is_empty() {
                return Ok(Vec::new());
            }
            let alerts: Vec<Row> = sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM alert WHERE id IN (SELECT alert_id FROM alert_channel WHERE {ACTIONABLE})"
            ))
            .bind(channel)
            .bind(ms(now))
            .bind(i64::from(with_sent))
            .fetch_all(db.reader())
            .await
            .context("cannot read a channel's alerts")?;
            let mut alerts: std::collections::HashMap<i64, Alert> = alerts
                .into_iter()
                .map(|r| to_alert(r).map(|a| (a.id, a)))
                .collect::<anyhow::Result<_>>()?;
            let mut entries = Vec::with_capacity(rows.len());
            for r in rows {
                // Read apart from the rows: an alert whose row changed in between is taken up by the next pass.
                let Some(alert) = alerts.remove(&r.0) else { continue };
                entries.push(ChannelEntry {
                    alert,
                    state: ChannelState::parse(&r.1)?,
                    notified_at: r.2.map(from_ms),
                    notifications: r.3,
                    failures: r.4,
                    last_error: r.5,
                    last_attempt_at: r.6.map(from_ms),
                });
            }
            Ok(entries)
        }

        pub async fn claim_channel_entries(db: &Db, channel: &str, alert_ids: &[i64], now: DateTime<Utc>, until: DateTime<Utc>) -> anyhow::Result<Vec<i64>> {
            let mut tx = db.begin_write().await?;
            let mut claimed = Vec::with_capacity(alert_ids.len());
            for id in alert_ids {
                let got: Option<(i64,)> = sqlx::query_as(
                    "UPDATE alert_channel SET lease_until = $1
                      WHERE channel = $2 AND alert_id = $3 AND (lease_until IS NULL OR lease_until <= $4)
                      RETURNING alert_id",
                )
                .bind(ms(until))
                .bind(channel)
                .bind(*id)
                .bind(ms(now))
                .fetch_optional(&mut *tx)
                .await
                .context("cannot claim an announcement")?;
                claimed.extend(got.map(|g| g.0));
            }
            tx.commit().await.context("cannot commit a claim of announcements")?;
            Ok(claimed)
        }

        pub async fn finish_channel_entries(db: &Db, channel: &str, alert_ids: &[i64], now: DateTime<Utc>, error: Option<&str>) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            for id in alert_ids {
                let q = match error {
                    None => sqlx::query(
                        "UPDATE alert_channel SET state = 'sent', notified_at = $1, notifications = notifications + 1,
                                failures = 0, last_error = NULL, last_attempt_at = $1, lease_until = NULL
                          WHERE channel = $2 AND alert_id = $3",
                    )
                    .bind(ms(now))
                    .bind(channel)
                    .bind(*id),
                    Some(e) => sqlx::query(
                        "UPDATE alert_channel SET failures = failures + 1, last_error = $1, last_attempt_at = $2,
                                lease_until = NULL
                          WHERE channel = $3 AND alert_id = $4",
                    )
                    .bind(e)
                    .bind(ms(now))
                    .bind(channel)
                    .bind(*id),
                };
                q.execute(&mut *tx).await.context("cannot record a channel's send")?;
            }
            tx.commit().await.context("cannot commit a channel's send")?;
            Ok(())
        }

        pub async fn channel_troubles(db: &Db) -> anyhow::Result<Vec<ChannelTrouble>> {
            let rows: Vec<(String, Option<String>, Option<i64>)> = sqlx::query_as(
                "SELECT channel, last_error, last_attempt_at FROM alert_channel
                  WHERE state <> 'sent' AND failures > 0 ORDER BY last_attempt_at DESC",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read failing channels")?;
            let mut troubles: Vec<ChannelTrouble> = Vec::new();
            for (channel, error, at) in rows {
                match troubles.iter_mut().find(|t| t.channel == channel) {
                    Some(t) => t.failing += 1,
                    None => troubles.push(ChannelTrouble {
                        channel,
                        failing: 1,
                        last_error: error.unwrap_or_default(),
                        last_attempt_at: at.map(from_ms).unwrap_or_default(),
                    }),
                }
            }
            Ok(troubles)
        }

        pub async fn channel_summaries(db: &Db) -> anyhow::Result<Vec<ChannelSummary>> {
            let rows: Vec<(String, i64, Option<i64>)> = sqlx::query_as(
                "SELECT channel, CAST(SUM(CASE WHEN state <> 'sent' THEN 1 ELSE 0 END) AS BIGINT), MAX(notified_at)
                   FROM alert_channel GROUP BY channel ORDER BY channel",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read the channels' figures")?;
            Ok(rows
                .into_iter()
                .map(|(channel, waiting, last)| ChannelSummary { channel, waiting, last_sent_at: last.map(from_ms) })
                .collect())
        }
    }
}
