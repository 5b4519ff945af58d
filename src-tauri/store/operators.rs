//! What the operator's console keeps beside the delivery model: the operators' tokens (`api_token`, only their
//! SHA-256: the browser token `default` and one per person), target pauses (`target_pause`), the CRM record a delivered step left, and the audit of leads
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

/// An operator's token, as `leadline token list` shows it (never the token itself: only its hash is stored).
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorToken {
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
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

    /// The name of the operator whose token has this SHA-256 (hex), unless there is none or it was revoked.
    pub async fn operator_of(&self, sha256: &str) -> anyhow::Result<Option<String>> {
        dispatch!(self, operator_of(sha256))
    }

    /// Stores a new token for `name` (a revoked one of that name is replaced). `false` when `name` already has a
    /// token that works: revoke it first.
    pub async fn add_operator_token(&self, name: &str, sha256: &str, now: DateTime<Utc>) -> anyhow::Result<bool> {
        dispatch!(self, add_operator_token(name, sha256, now))
    }

    /// Revokes `name`'s token at `now`. `false` when there is no working token of that name.
    pub async fn revoke_operator_token(&self, name: &str, now: DateTime<Utc>) -> anyhow::Result<bool> {
        dispatch!(self, revoke_operator_token(name, now))
    }

    /// Every token, working or revoked, by name.
    pub async fn operator_tokens(&self) -> anyhow::Result<Vec<OperatorToken>> {
        dispatch!(self, operator_tokens())
    }

    /// Every paused target.
    pub async fn target_pauses(&self) -> anyhow::Result<Vec<TargetPause>> {
        dispatch!(self, target_pauses())
    }

    /// Pauses `target` (a pause already there is kept, with its time and author).
    pub async fn pause_target(&self, target: &str, by: &str, now: DateTime<Utc>) -> anyhow::Result<()> {
        dispatch!(self, pause_target(target, by, now))?;
        self.signal(super::Signal::Control).await
    }

    /// Resumes `target` (nothing happens when it is not paused).
    pub async fn resume_target(&self, target: &str) -> anyhow::Result<()> {
        dispatch!(self, resume_target(target))?;
        self.signal(super::Signal::Control).await
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
                 ON CONFLICT (name) DO UPDATE SET token_sha256 = excluded.token_sha256, created_at = excluded.created_at,
                     revoked_at = NULL",
            )
            .bind(sha256)
            .bind(ms(now))
            .execute(db.writer())
            .await
            .context("cannot store api_token")?;
            Ok(())
        }

        pub async fn operator_of(db: &Db, sha256: &str) -> anyhow::Result<Option<String>> {
            let row: Option<(String,)> =
                sqlx::query_as("SELECT name FROM api_token WHERE token_sha256 = $1 AND revoked_at IS NULL")
                    .bind(sha256)
                    .fetch_optional(db.reader())
                    .await
                    .context("cannot read api_token")?;
            Ok(row.map(|r| r.0))
        }

        pub async fn add_operator_token(db: &Db, name: &str, sha256: &str, now: DateTime<Utc>) -> anyhow::Result<bool> {
            let done = sqlx::query(
                "INSERT INTO api_token (name, token_sha256, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET token_sha256 = excluded.token_sha256, created_at = excluded.created_at,
                     revoked_at = NULL
                 WHERE api_token.revoked_at IS NOT NULL",
            )
            .bind(name)
            .bind(sha256)
            .bind(ms(now))
            .execute(db.writer())
            .await
            .context("cannot store the token")?;
            Ok(done.rows_affected() == 1)
        }

        pub async fn revoke_operator_token(db: &Db, name: &str, now: DateTime<Utc>) -> anyhow::Result<bool> {
            let done = sqlx::query("UPDATE api_token SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL")
                .bind(name)
                .bind(ms(now))
                .execute(db.writer())
                .await
                .context("cannot revoke the token")?;
            Ok(done.rows_affected() == 1)
        }

        pub async fn operator_tokens(db: &Db) -> anyhow::Result<Vec<OperatorToken>> {
            let rows: Vec<(String, i64, Option<i64>)> =
                sqlx::query_as("SELECT name, created_at, revoked_at FROM api_token ORDER BY name")
                    .fetch_all(db.reader())
                    .await
                    .context("cannot read api_token")?;
            Ok(rows
                .into_iter()
                .map(|(name, created, revoked)| OperatorToken {
                    name,
                    created_at: from_ms(created),
                    revoked_at: revoked.map(from_ms),
                })
                .collect())
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
