//! First contacts: `contact_message` (what each `whatsapp` / `sms` step sent, written before it leaves),
//! `contact_receipt` (what the providers said since) and `contact_opt_out` (numbers never texted again).

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{from_ms, ms, Store};
use crate::model::{ContactMessage, ContactStatus, Receipt};

/// What a receipt changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReceiptApplied {
    /// The message it is about, when Leadline sent it (by the provider's id, else the step's key).
    pub step_key: Option<String>,
    pub delivery_id: Option<i64>,
    /// A later failure of a step that had been delivered: the step now runs its `on_failure` target (named), …
    pub fallback_started: Option<String>,
    /// … or, without one, is an open dead letter.
    pub step_failed: bool,
    /// A failure arrived while the step is being sent (its answer not yet written): nothing was applied; the
    /// caller applies it again once the step is written.
    pub step_running: bool,
}

/// A receipt as the lead's story shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, ts_rs::TS)]
pub struct ReceiptEntry {
    pub delivery_id: i64,
    pub provider_id: String,
    /// `sent`, `delivered`, `read` or `failed`.
    pub status: String,
    pub error_code: Option<String>,
    pub error_title: Option<String>,
    pub at: DateTime<Utc>,
}

/// How fast first contacts went out, per source: from the lead's arrival to the provider's acceptance and to its
/// delivery receipt (milliseconds), one entry per message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContactTimes {
    pub source: String,
    pub accepted_ms: Vec<i64>,
    pub delivered_ms: Vec<i64>,
}

type ReceiptRow = (i64, String, String, Option<String>, Option<String>, i64);

type MessageRow = (String, i64, String, String, String, String, Option<String>, Option<String>, i64, i64);

fn message_of(r: MessageRow) -> ContactMessage {
    ContactMessage {
        step_key: r.0,
        delivery_id: r.1,
        target: r.2,
        channel: r.3,
        recipient: r.4,
        status: ContactStatus::parse(&r.5).unwrap_or(ContactStatus::Sending),
        provider_id: r.6,
        error_code: r.7,
        sent_at: from_ms(r.8),
        generation: r.9,
    }
}

impl Store {
    /// The message of step `step_key`, if one was sent or tried.
    pub async fn contact_message(&self, step_key: &str) -> anyhow::Result<Option<ContactMessage>> {
        dispatch!(self, contact_message(step_key))
    }

    /// Records, committed, that `message` is leaving (status `sending`); a message of the same step that was
    /// refused, failed or in doubt (a person's replay) is replaced.
    pub async fn contact_sending(&self, message: &ContactMessage, now: DateTime<Utc>) -> anyhow::Result<()> {
        dispatch!(self, contact_sending(message, now))
    }

    /// Records the answer to the send of `step_key`.
    pub async fn contact_answered(
        &self,
        step_key: &str,
        status: ContactStatus,
        provider_id: Option<&str>,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        dispatch!(self, contact_answered(step_key, status, provider_id, error_code, at))
    }

    /// A person's answer to "did this lead get our message?" for a message still in doubt (`sending`): it arrived
    /// (`delivered`: never sent again; no delivery time, so the speed figures count only measured ones) or it
    /// did not (`refused`: the step's next try sends it). Returns whether the message was in doubt.
    pub async fn settle_contact_doubt(
        &self,
        step_key: &str,
        arrived: bool,
        now: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        dispatch!(self, settle_contact_doubt(step_key, arrived, now))
    }

    /// Whether `recipient` opted out.
    pub async fn opted_out(&self, recipient: &str) -> anyhow::Result<bool> {
        dispatch!(self, opted_out(recipient))
    }

    /// Marks `recipient` opted out (the first reason is kept).
    pub async fn opt_out(&self, recipient: &str, reason: &str, at: DateTime<Utc>) -> anyhow::Result<()> {
        dispatch!(self, opt_out(recipient, reason, at))
    }

    /// Applies a receipt in one transaction: kept for the story; the message moves forward (never back); a step
    /// waiting on it becomes due now; and a failure of a step already delivered ends it — it runs its
    /// `on_failure` target (`fallbacks`: target → its `on_failure`) with fresh attempts, or becomes an open dead
    /// letter.
    pub async fn apply_receipt(
        &self,
        receipt: &Receipt,
        fallbacks: &BTreeMap<String, String>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<ReceiptApplied> {
        dispatch!(self, apply_receipt(receipt, fallbacks, now))
    }

    /// The receipts of a lead's steps, oldest first.
    pub async fn receipts_of(&self, delivery_ids: &[i64]) -> anyhow::Result<Vec<ReceiptEntry>> {
        let mut out = Vec::new();
        for id in delivery_ids {
            out.extend(dispatch!(self, receipts_of(*id))?);
        }
        out.sort_by_key(|r| r.at);
        Ok(out)
    }

    /// Times from arrival to acceptance and to delivery of the first contacts of leads received since `since`,
    /// per source.
    pub async fn contact_times(&self, since: DateTime<Utc>) -> anyhow::Result<Vec<ContactTimes>> {
        dispatch!(self, contact_times(since))
    }
}

backends! {
    shared {
        pub async fn contact_message(db: &Db, step_key: &str) -> anyhow::Result<Option<ContactMessage>> {
            let row: Option<MessageRow> = sqlx::query_as(
                "SELECT step_key, delivery_id, target, channel, recipient, status, provider_id, error_code, sent_at,
                        generation
                   FROM contact_message WHERE step_key = $1",
            )
            .bind(step_key)
            .fetch_optional(db.writer())
            .await
            .context("cannot read the contact message")?;
            Ok(row.map(message_of))
        }

        pub async fn contact_sending(db: &Db, m: &ContactMessage, now: DateTime<Utc>) -> anyhow::Result<()> {
            sqlx::query(
                "INSERT INTO contact_message (step_key, delivery_id, target, channel, recipient, status, provider_id,
                                              error_code, sent_at, generation, updated_at)
                 VALUES ($1, $2, $3, $4, $5, 'sending', NULL, NULL, $6, $7, $8)
                 ON CONFLICT (step_key) DO UPDATE SET delivery_id = excluded.delivery_id, target = excluded.target,
                        channel = excluded.channel, recipient = excluded.recipient, status = 'sending',
                        provider_id = NULL, error_code = NULL, sent_at = excluded.sent_at,
                        generation = excluded.generation, accepted_at = NULL, delivered_at = NULL,
                        updated_at = excluded.updated_at",
            )
            .bind(&m.step_key)
            .bind(m.delivery_id)
            .bind(&m.target)
            .bind(&m.channel)
            .bind(&m.recipient)
            .bind(ms(m.sent_at))
            .bind(m.generation)
            .bind(ms(now))
            .execute(db.writer())
            .await
            .context("cannot record the message before sending")?;
            Ok(())
        }

        pub async fn settle_contact_doubt(
            db: &Db,
            step_key: &str,
            arrived: bool,
            now: DateTime<Utc>,
        ) -> anyhow::Result<bool> {
            let status = if arrived { ContactStatus::Delivered } else { ContactStatus::Refused };
            let done = sqlx::query(
                "UPDATE contact_message SET status = $1, updated_at = $2 WHERE step_key = $3 AND status = 'sending'",
            )
            .bind(status.as_str())
            .bind(ms(now))
            .bind(step_key)
            .execute(db.writer())
            .await
            .context("cannot record the answer about the message in doubt")?;
            Ok(done.rows_affected() == 1)
        }

        pub async fn contact_answered(
            db: &Db,
            step_key: &str,
            status: ContactStatus,
            provider_id: Option<&str>,
            error_code: Option<&str>,
            at: DateTime<Utc>,
        ) -> anyhow::Result<()> {
            // A receipt may have arrived before the answer (it carries the step's key): never move back.
            let current: Option<(String,)> = sqlx::query_as("SELECT status FROM contact_message WHERE step_key = $1")
                .bind(step_key)
                .fetch_optional(db.writer())
                .await
                .context("cannot read the contact message")?;
            let forward = current
                .and_then(|(s,)| ContactStatus::parse(&s))
                .is_none_or(|c| c == ContactStatus::Sending || status.rank() > c.rank());
            sqlx::query(
                "UPDATE contact_message
                    SET status = CASE WHEN $1 = 1 THEN $2 ELSE status END,
                        provider_id = COALESCE(provider_id, $3), error_code = COALESCE($4, error_code),
                        accepted_at = CASE WHEN $5 = 1 THEN COALESCE(accepted_at, $6) ELSE accepted_at END,
                        updated_at = $7
                  WHERE step_key = $8",
            )
            .bind(i64::from(forward))
            .bind(status.as_str())
            .bind(provider_id)
            .bind(error_code)
            .bind(i64::from(status.went_out()))
            .bind(ms(at))
            .bind(ms(at))
            .bind(step_key)
            .execute(db.writer())
            .await
            .context("cannot record the provider's answer")?;
            Ok(())
        }

        pub async fn opted_out(db: &Db, recipient: &str) -> anyhow::Result<bool> {
            let row: Option<(i64,)> = sqlx::query_as("SELECT at FROM contact_opt_out WHERE recipient = $1")
                .bind(recipient)
                .fetch_optional(db.reader())
                .await
                .context("cannot read the opt-out list")?;
            Ok(row.is_some())
        }

        pub async fn opt_out(db: &Db, recipient: &str, reason: &str, at: DateTime<Utc>) -> anyhow::Result<()> {
            sqlx::query(
                "INSERT INTO contact_opt_out (recipient, at, reason) VALUES ($1, $2, $3)
                 ON CONFLICT (recipient) DO NOTHING",
            )
            .bind(recipient)
            .bind(ms(at))
            .bind(reason)
            .execute(db.writer())
            .await
            .context("cannot record the opt-out")?;
            Ok(())
        }

        pub async fn apply_receipt(
            db: &Db,
            receipt: &Receipt,
            fallbacks: &BTreeMap<String, String>,
            now: DateTime<Utc>,
        ) -> anyhow::Result<ReceiptApplied> {
            let mut tx = db.begin_write().await?;
            let mut found: Option<(String, i64, String, String)> = sqlx::query_as(
                "SELECT step_key, delivery_id, target, status FROM contact_message WHERE provider_id = $1",
            )
            .bind(&receipt.provider_id)
            .fetch_optional(&mut *tx)
            .await
            .context("cannot find the receipt's message")?;
            if found.is_none() {
                if let Some(key) = &receipt.step_key {
                    found = sqlx::query_as(
                        "SELECT step_key, delivery_id, target, status FROM contact_message WHERE step_key = $1",
                    )
                    .bind(key)
                    .fetch_optional(&mut *tx)
                    .await
                    .context("cannot find the receipt's message")?;
                }
            }
            sqlx::query(
                "INSERT INTO contact_receipt (step_key, delivery_id, provider_id, status, error_code, error_title, at,
                                              received_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(found.as_ref().map(|f| f.0.clone()))
            .bind(found.as_ref().map(|f| f.1))
            .bind(&receipt.provider_id)
            .bind(receipt.status.as_str())
            .bind(&receipt.error_code)
            .bind(&receipt.error_title)
            .bind(ms(if receipt.at == DateTime::<Utc>::MIN_UTC { now } else { receipt.at }))
            .bind(ms(now))
            .execute(&mut *tx)
            .await
            .context("cannot keep the receipt")?;
            if let (Some((_, delivery_id, _, _)), ContactStatus::Failed) = (&found, receipt.status) {
                let running: Option<(String,)> =
                    sqlx::query_as("SELECT state FROM delivery WHERE id = $1 AND state = 'running'")
                        .bind(delivery_id)
                        .fetch_optional(&mut *tx)
                        .await
                        .context("cannot read the step")?;
                if running.is_some() {
                    tx.rollback().await.context("cannot roll back")?;
                    return Ok(ReceiptApplied { step_running: true, ..Default::default() });
                }
            }
            let Some((step_key, delivery_id, target, status)) = found else {
                tx.commit().await.context("cannot commit the receipt")?;
                return Ok(ReceiptApplied::default());
            };
            let mut applied =
                ReceiptApplied { step_key: Some(step_key.clone()), delivery_id: Some(delivery_id), ..Default::default() };
            let current = ContactStatus::parse(&status).unwrap_or(ContactStatus::Sending);
            if receipt.status.rank() > current.rank() || current == ContactStatus::Sending {
                let delivered = matches!(receipt.status, ContactStatus::Delivered | ContactStatus::Read);
                sqlx::query(
                    "UPDATE contact_message
                        SET status = $1, provider_id = COALESCE(provider_id, $2), error_code = COALESCE($3, error_code),
                            accepted_at = COALESCE(accepted_at, $4),
                            delivered_at = CASE WHEN $5 = 1 THEN COALESCE(delivered_at, $6) ELSE delivered_at END,
                            updated_at = $7
                      WHERE step_key = $8",
                )
                .bind(receipt.status.as_str())
                .bind(&receipt.provider_id)
                .bind(&receipt.error_code)
                .bind((receipt.status != ContactStatus::Failed).then_some(ms(now)))
                .bind(i64::from(delivered))
                .bind(ms(if receipt.at == DateTime::<Utc>::MIN_UTC { now } else { receipt.at }))
                .bind(ms(now))
                .bind(&step_key)
                .execute(&mut *tx)
                .await
                .context("cannot move the message on")?;
            }
            // A step waiting on this message (in doubt) decides now.
            sqlx::query("UPDATE delivery SET next_attempt_at = $1 WHERE id = $2 AND state = 'pending' AND next_attempt_at > $3")
                .bind(ms(now))
                .bind(delivery_id)
                .bind(ms(now))
                .execute(&mut *tx)
                .await
                .context("cannot make the step due")?;
            if receipt.status == ContactStatus::Failed {
                let code = receipt.error_code.as_deref().map(|c| format!(" (error {c}")).unwrap_or_default();
                let title = match (&receipt.error_title, code.is_empty()) {
                    (Some(t), false) => format!("{code}: {t})"),
                    (None, false) => format!("{code})"),
                    _ => String::new(),
                };
                let reason = format!("the provider reported the message undeliverable{title}");
                let step: Option<(String, String)> =
                    sqlx::query_as("SELECT state, trigger FROM delivery WHERE id = $1 AND target = $2")
                        .bind(delivery_id)
                        .bind(&target)
                        .fetch_optional(&mut *tx)
                        .await
                        .context("cannot read the step")?;
                if let Some((state, trigger)) = step.filter(|(s, _)| s == "delivered") {
                    let _ = state;
                    let (outcome, text) = match fallbacks.get(&target) {
                        Some(to) => {
                            sqlx::query(
                                "UPDATE delivery SET state = 'pending', fallback_of = target, target = $1,
                                        next_attempt_at = $2, pending_since = $2, attempts = 0, in_doubt = 0,
                                        delivered_at = NULL, result = NULL
                                  WHERE id = $3 AND state = 'delivered'",
                            )
                            .bind(to)
                            .bind(ms(now))
                            .bind(delivery_id)
                            .execute(&mut *tx)
                            .await
                            .context("cannot start the step's fallback")?;
                            applied.fallback_started = Some(to.clone());
                            ("released", format!("{reason}: trying {to} instead"))
                        }
                        None => {
                            sqlx::query(
                                "UPDATE delivery SET state = 'dead', dead_at = $1, dead_class = 'permanent_data',
                                        dead_status = NULL, dead_reason = $2, dead_cause = $3, dead_field = 'to',
                                        resolution = 'open'
                                  WHERE id = $4 AND state = 'delivered'",
                            )
                            .bind(ms(now))
                            .bind(&reason)
                            .bind(crate::model::cause_of(&reason))
                            .bind(delivery_id)
                            .execute(&mut *tx)
                            .await
                            .context("cannot dead-letter the step")?;
                            applied.step_failed = true;
                            ("dead", reason.clone())
                        }
                    };
                    sqlx::query(
                        "INSERT INTO attempt (delivery_id, started_at, duration_ms, outcome, class, reason, trigger)
                         VALUES ($1, $2, 0, $3, 'permanent_data', $4, $5)",
                    )
                    .bind(delivery_id)
                    .bind(ms(now))
                    .bind(outcome)
                    .bind(&text)
                    .bind(&trigger)
                    .execute(&mut *tx)
                    .await
                    .context("cannot record the receipt's outcome")?;
                }
            }
            tx.commit().await.context("cannot commit the receipt")?;
            Ok(applied)
        }

        pub async fn receipts_of(db: &Db, delivery_id: i64) -> anyhow::Result<Vec<ReceiptEntry>> {
            let rows: Vec<ReceiptRow> = sqlx::query_as(
                "SELECT delivery_id, provider_id, status, error_code, error_title, at FROM contact_receipt
                  WHERE delivery_id = $1 ORDER BY at, id",
            )
            .bind(delivery_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read receipts")?;
            Ok(rows
                .into_iter()
                .map(|r| ReceiptEntry {
                    delivery_id: r.0,
                    provider_id: r.1,
                    status: r.2,
                    error_code: r.3,
                    error_title: r.4,
                    at: from_ms(r.5),
                })
                .collect())
        }

        pub async fn contact_times(db: &Db, since: DateTime<Utc>) -> anyhow::Result<Vec<ContactTimes>> {
            let rows: Vec<(String, Option<i64>, Option<i64>)> = sqlx::query_as(
                "SELECT e.source, m.accepted_at - e.received_at, m.delivered_at - e.received_at
                   FROM contact_message m
                   JOIN delivery d ON d.id = m.delivery_id
                   JOIN inbound_event e ON e.id = d.event_id
                  WHERE e.received_at >= $1 AND m.accepted_at IS NOT NULL
                  ORDER BY e.source",
            )
            .bind(ms(since))
            .fetch_all(db.reader())
            .await
            .context("cannot read first-contact times")?;
            let mut out: Vec<ContactTimes> = Vec::new();
            for (source, accepted, delivered) in rows {
                if out.last().is_none_or(|t| t.source != source) {
                    out.push(ContactTimes { source: source.clone(), ..Default::default() });
                }
                let t = out.last_mut().expect("pushed above");
                if let Some(a) = accepted {
                    t.accepted_ms.push(a.max(0));
                }
                if let Some(d) = delivered {
                    t.delivered_ms.push(d.max(0));
                }
            }
            Ok(out)
        }
    }
}
