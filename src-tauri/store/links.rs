//! `crm_link` (which CRM record holds a lead, for look-up-then-create targets) and `breaker_transition`.

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{ms, Store};
use crate::model::Transition;

impl Store {
    /// Records a breaker transition of a target.
    pub async fn record_breaker_transition(&self, target: &str, t: &Transition) -> anyhow::Result<()> {
        dispatch!(self, record_breaker_transition(target, t))
    }

    /// The CRM record id linked to an external id (strategy `search_then_create`).
    pub async fn crm_link(&self, target: &str, external_id: &str) -> anyhow::Result<Option<String>> {
        dispatch!(self, crm_link(target, external_id))
    }

    /// Links `external_id` to `crm_id` for `target` in a commit of its own, before the step completes: a connector
    /// that makes two records for one lead (Pipedrive: the person, then the lead) checkpoints the first, so a
    /// retry after a crash reuses it instead of creating it again. An existing link is kept (the first record
    /// wins); returns the id that is linked now. `now` is when it was linked.
    pub async fn link(
        &self,
        target: &str,
        external_id: &str,
        crm_id: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<String> {
        dispatch!(self, link(target, external_id, crm_id, now))
    }

    /// The stored lead `source`/`source_ref` (its event id).
    pub async fn event_of(&self, source: &str, source_ref: &str) -> anyhow::Result<Option<i64>> {
        dispatch!(self, event_of(source, source_ref))
    }

    /// The lead a CRM record came from: a delivered step whose answer named `crm_id`, or a link to it.
    pub async fn lead_of_crm_record(&self, crm_id: &str) -> anyhow::Result<Option<i64>> {
        dispatch!(self, lead_of_crm_record(crm_id))
    }
}

backends! {
    shared {
        pub async fn event_of(db: &Db, source: &str, source_ref: &str) -> anyhow::Result<Option<i64>> {
            let row: Option<(i64,)> = sqlx::query_as("SELECT id FROM inbound_event WHERE source = $1 AND source_ref = $2")
                .bind(source)
                .bind(source_ref)
                .fetch_optional(db.reader())
                .await
                .context("cannot read the lead")?;
            Ok(row.map(|r| r.0))
        }

        pub async fn lead_of_crm_record(db: &Db, crm_id: &str) -> anyhow::Result<Option<i64>> {
            // A step's result is JSON text written by serde_json (no spaces): `{"crm_id":"123",…}`.
            let answered = format!("%\"crm_id\":{}%", serde_json::Value::String(crm_id.to_string()));
            let row: Option<(i64,)> = sqlx::query_as(
                "SELECT event_id FROM delivery WHERE state = 'delivered' AND result LIKE $1
                 UNION ALL
                 SELECT e.id FROM crm_link l JOIN inbound_event e ON l.external_id = e.source || ':' || e.source_ref
                  WHERE l.crm_id = $2
                 LIMIT 1",
            )
            .bind(answered)
            .bind(crm_id)
            .fetch_optional(db.reader())
            .await
            .context("cannot look up the CRM record's lead")?;
            Ok(row.map(|r| r.0))
        }

        pub async fn record_breaker_transition(db: &Db, target: &str, t: &Transition) -> anyhow::Result<()> {
            sqlx::query(
                "INSERT INTO breaker_transition (target, at, from_state, to_state, reason) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(target)
            .bind(ms(t.at))
            .bind(t.from.as_str())
            .bind(t.to.as_str())
            .bind(&t.reason)
            .execute(db.writer())
            .await
            .context("cannot record breaker transition")?;
            Ok(())
        }

        pub async fn crm_link(db: &Db, target: &str, external_id: &str) -> anyhow::Result<Option<String>> {
            let row: Option<(String,)> =
                sqlx::query_as("SELECT crm_id FROM crm_link WHERE target = $1 AND external_id = $2")
                    .bind(target)
                    .bind(external_id)
                    .fetch_optional(db.reader())
                    .await
                    .context("cannot read crm_link")?;
            Ok(row.map(|r| r.0))
        }

        pub async fn link(
            db: &Db,
            target: &str,
            external_id: &str,
            crm_id: &str,
            now: DateTime<Utc>,
        ) -> anyhow::Result<String> {
            sqlx::query(
                "INSERT INTO crm_link (target, external_id, crm_id, linked_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (target, external_id) DO NOTHING",
            )
            .bind(target)
            .bind(external_id)
            .bind(crm_id)
            .bind(ms(now))
            .execute(db.writer())
            .await
            .context("cannot record crm_link")?;
            let (linked,): (String,) =
                sqlx::query_as("SELECT crm_id FROM crm_link WHERE target = $1 AND external_id = $2")
                    .bind(target)
                    .bind(external_id)
                    .fetch_one(db.writer())
                    .await
                    .context("cannot read crm_link")?;
            Ok(linked)
        }
    }
}
