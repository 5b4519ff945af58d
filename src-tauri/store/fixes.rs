//! Fixes to a lead's data (`payload_fix`): the lead a dead letter carries, and a fix recorded with its audit (the
//! first fix keeps what was received as `original_payload`).

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{ms, Store};
use crate::model::{decode, Resolution};

/// A dead letter's lead, for an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterLead {
    pub event_id: i64,
    pub source: String,
    pub resolution: Resolution,
    pub purged: bool,
}

/// A fix to one lead's data: its data from now on and the audit of the change.
#[derive(Debug, Clone, PartialEq)]
pub struct LeadFix {
    pub event_id: i64,
    pub payload: serde_json::Value,
    pub operation: serde_json::Value,
    pub before: serde_json::Value,
    pub after: serde_json::Value,
}

impl Store {
    /// A lead's source and data.
    pub async fn lead_data(&self, event_id: i64) -> anyhow::Result<(String, serde_json::Value)> {
        dispatch!(self, lead_data(event_id))
    }

    /// The lead of a dead letter; `None` when the delivery is not a dead letter.
    pub async fn dead_letter_lead(&self, delivery_id: i64) -> anyhow::Result<Option<DeadLetterLead>> {
        dispatch!(self, dead_letter_lead(delivery_id))
    }

    /// Stores fixed leads (the first fix keeps the original) and their audit, in one transaction.
    pub async fn record_lead_fixes(
        &self,
        fixes: &[LeadFix],
        actor: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        dispatch!(self, record_lead_fixes(fixes, actor, reason, now))
    }
}

backends! {
    shared {
        pub async fn lead_data(db: &Db, event_id: i64) -> anyhow::Result<(String, serde_json::Value)> {
            let (source, payload): (String, String) =
                sqlx::query_as("SELECT source, payload FROM inbound_event WHERE id = $1")
                    .bind(event_id)
                    .fetch_one(db.reader())
                    .await
                    .context("cannot read the lead")?;
            Ok((source, serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null)))
        }

        pub async fn dead_letter_lead(db: &Db, delivery_id: i64) -> anyhow::Result<Option<DeadLetterLead>> {
            let row: Option<(i64, String, Option<String>, Option<i64>)> = sqlx::query_as(
                "SELECT e.id, e.source, d.resolution, e.purged_at FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                  WHERE d.id = $1 AND d.state = 'dead'",
            )
            .bind(delivery_id)
            .fetch_optional(db.reader())
            .await
            .context("cannot read the dead letter")?;
            row.map(|(event_id, source, resolution, purged)| {
                Ok(DeadLetterLead {
                    event_id,
                    source,
                    resolution: resolution.as_deref().map(decode).transpose()?.unwrap_or(Resolution::Open),
                    purged: purged.is_some(),
                })
            })
            .transpose()
        }

        pub async fn record_lead_fixes(
            db: &Db,
            fixes: &[LeadFix],
            actor: &str,
            reason: &str,
            now: DateTime<Utc>,
        ) -> anyhow::Result<()> {
            let mut tx = db.begin_write().await?;
            for fix in fixes {
                sqlx::query(
                    "UPDATE inbound_event SET original_payload = COALESCE(original_payload, payload), payload = $1
                      WHERE id = $2",
                )
                .bind(fix.payload.to_string())
                .bind(fix.event_id)
                .execute(&mut *tx)
                .await
                .context("cannot store the fixed lead")?;
                sqlx::query(
                    "INSERT INTO payload_fix (event_id, at, actor, reason, operation, before, after)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(fix.event_id)
                .bind(ms(now))
                .bind(actor)
                .bind(reason)
                .bind(fix.operation.to_string())
                .bind(fix.before.to_string())
                .bind(fix.after.to_string())
                .execute(&mut *tx)
                .await
                .context("cannot record the fix")?;
            }
            tx.commit().await.context("cannot commit the fixes")?;
            Ok(())
        }
    }
}
