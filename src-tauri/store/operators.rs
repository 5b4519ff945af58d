//! What the operator's console keeps beside the delivery model: the browser token (`api_token`, only its
//! SHA-256), target pauses (`target_pause`), the CRM record a delivered step left, and the audit of leads
//! revealed unmasked (`lead_reveal`).

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{from_ms, ms, Store};

/// A target an operator paused.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetPause {
    pub target: String,
    pub paused_at: DateTime<Utc>,
    pub paused_by: String,
}

/// One time a lead's personal data was shown unmasked.
#[derive(Debug, Clone, PartialEq, serde::Serialize, ts_rs::TS)]
pub struct Reveal {
    pub at: DateTime<Utc>,
    pub actor: String,
    pub reason: String,
}

impl Store {
    /// Writes to the audit that `actor` had the lead of delivery `delivery_id` shown unmasked, and why. `false`
    /// when there is no such delivery.
    pub async fn record_reveal(
        &self,
        delivery_id: i64,
        actor: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        dispatch!(self, record_reveal(delivery_id, actor, reason, now))
    }

    /// Who had the lead of delivery `delivery_id` shown unmasked (any of its steps), newest first, at most 20.
    pub async fn reveals(&self, delivery_id: i64) -> anyhow::Result<Vec<Reveal>> {
        dispatch!(self, reveals(delivery_id))
    }

    /// The SHA-256 (hex) of the browser token, if one was made.
    pub async fn api_token_hash(&self) -> anyhow::Result<Option<String>> {
        dispatch!(self, api_token_hash())
    }

    /// Replaces the browser token by the one with this SHA-256 (hex).
    pub async fn set_api_token_hash(&self, sha256: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
        dispatch!(self, set_api_token_hash(sha256, now))
    }

    /// Every paused target.
    pub async fn target_pauses(&self) -> anyhow::Result<Vec<TargetPause>> {
        dispatch!(self, target_pauses())
    }

    /// Pauses `target` (a pause already there is kept, with its time and author).
    pub async fn pause_target(&self, target: &str, by: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
        dispatch!(self, pause_target(target, by, now))
    }

    /// Resumes `target` (nothing happens when it is not paused).
    pub async fn resume_target(&self, target: &str) -> anyhow::Result<()> {
        dispatch!(self, resume_target(target))
    }

    /// The CRM's answer to a delivered step (the record it made), if the step is delivered and has one.
    pub async fn delivered_record(&self, delivery_id: i64) -> anyhow::Result<Option<serde_json::Value>> {
        dispatch!(self, delivered_record(delivery_id))
    }
}

backends! {
    shared {
        pub async fn api_token_hash(db: &Db) -> anyhow::Result<Option<String>> {
            let row: Option<(String,)> = sqlx::query_as("SELECT token_sha256 FROM api_token WHERE name = 'default'")
                .fetch_optional(db.reader())
                .await
                .context("cannot read api_token")?;
            Ok(row.map(|r| r.0))
        }

        pub async fn set_api_token_hash(db: &Db, sha256: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
            sqlx::query(
                "INSERT INTO api_token (name, token_sha256, created_at) VALUES ('default', $1, $2)
                 ON CONFLICT (name) DO UPDATE SET token_sha256 = excluded.token_sha256, created_at = excluded.created_at",
            )
            .bind(sha256)
            .bind(ms(now))
            .execute(db.writer())
            .await
            .context("cannot store api_token")?;
            Ok(())
        }

        pub async fn target_pauses(db: &Db) -> anyhow::Result<Vec<TargetPause>> {
            let rows: Vec<(String, i64, String)> =
                sqlx::query_as("SELECT target, paused_at, paused_by FROM target_pause")
                    .fetch_all(db.reader())
                    .await
                    .context("cannot read target pauses")?;
            Ok(rows
                .into_iter()
                .map(|(target, at, by)| TargetPause { target, paused_at: from_ms(at), paused_by: by })
                .collect())
        }

        pub async fn pause_target(db: &Db, target: &str, by: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
            sqlx::query(
                "INSERT INTO target_pause (target, paused_at, paused_by) VALUES ($1, $2, $3)
                 ON CONFLICT (target) DO NOTHING",
            )
            .bind(target)
            .bind(ms(now))
            .bind(by)
            .execute(db.writer())
            .await
            .context("cannot pause target")?;
            Ok(())
        }

        pub async fn resume_target(db: &Db, target: &str) -> anyhow::Result<()> {
            sqlx::query("DELETE FROM target_pause WHERE target = $1")
                .bind(target)
                .execute(db.writer())
                .await
                .context("cannot resume target")?;
            Ok(())
        }

        pub async fn record_reveal(
            db: &Db,
            delivery_id: i64,
            actor: &str,
            reason: &str,
            now: DateTime<Utc>,
        ) -> anyhow::Result<bool> {
            let mut tx = db.begin_write().await?;
            let n = sqlx::query(
                "INSERT INTO lead_reveal (event_id, delivery_id, at, actor, reason)
                 SELECT event_id, id, $1, $2, $3 FROM delivery WHERE id = $4",
            )
            .bind(ms(now))
            .bind(actor)
            .bind(reason)
            .bind(delivery_id)
            .execute(&mut *tx)
            .await
            .context("cannot write the reveal to the audit")?
            .rows_affected();
            tx.commit().await.context("cannot commit the reveal")?;
            Ok(n > 0)
        }

        pub async fn reveals(db: &Db, delivery_id: i64) -> anyhow::Result<Vec<Reveal>> {
            let rows: Vec<(i64, String, String)> = sqlx::query_as(
                "SELECT r.at, r.actor, r.reason FROM lead_reveal r
                  WHERE r.event_id = (SELECT event_id FROM delivery WHERE id = $1)
                  ORDER BY r.at DESC, r.id DESC LIMIT 20",
            )
            .bind(delivery_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read the reveals of a lead")?;
            Ok(rows.into_iter().map(|(at, actor, reason)| Reveal { at: from_ms(at), actor, reason }).collect())
        }

        pub async fn delivered_record(db: &Db, delivery_id: i64) -> anyhow::Result<Option<serde_json::Value>> {
            let row: Option<(Option<String>,)> =
                sqlx::query_as("SELECT result FROM delivery WHERE id = $1 AND state = 'delivered'")
                    .bind(delivery_id)
                    .fetch_optional(db.reader())
                    .await
                    .context("cannot read the delivered record")?;
            Ok(row.and_then(|r| r.0).and_then(|r| serde_json::from_str(&r).ok()))
        }
    }
}
