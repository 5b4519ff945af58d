//! `inbound_event`: the raw events, and the creation of their delivery steps.

use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::replays::UNCERTAIN;
use super::{ms, Store};

/// An event to store: where it came from, its id at the source, its body, and its route.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub source: String,
    pub source_ref: String,
    pub payload: serde_json::Value,
    /// Target names of the route, in order.
    pub route: Vec<String>,
    pub received_at: DateTime<Utc>,
    /// Whether it arrived as a webhook, was found by reconciliation or was polled.
    pub via: Via,
    /// When the lead came into being, when the lead says so and that is earlier than `received_at` (a lead
    /// recovered hours later): time-sensitive steps age it from then. `None`: from `received_at`.
    pub lead_at: Option<DateTime<Utc>>,
    /// What a repeat of this lead with different content means.
    pub on_change: OnChange,
}

/// What the same source and id sent again with different content means.
#[derive(Debug, Clone, Default)]
pub enum OnChange {
    /// It is a duplicate whatever it holds. Meta notifications (they carry only the lead's id; its answers are
    /// fetched and stored later, so a repeat never matches what is stored) and reconciliation (a listing's shape
    /// differs from the webhook's) never revise a lead.
    #[default]
    Ignore,
    /// It is a new revision of the lead (a form resubmitted with a corrected phone): the stored lead becomes the
    /// new content, and it is delivered again — unfinished and dead-lettered steps send the new content, and
    /// delivered steps go again when their target can update a record (these target names: an upsert, a keyed
    /// request or a connector that updates by external id). An exact repeat stays a duplicate.
    Revise(Arc<[String]>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    #[default]
    Webhook,
    /// Listed by the source but never received: ingested by reconciliation.
    Reconciliation,
    /// Asked for: the source is polled for its new leads (poll mode), no webhook is expected.
    Poll,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Webhook => "webhook",
            Via::Reconciliation => "reconciliation",
            Via::Poll => "poll",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome {
    /// Stored now, with this id; its first step is pending.
    Inserted(i64),
    /// The same source and id were stored before (with this id); nothing new was written.
    Duplicate(i64),
    /// The same source and id with different content ([`OnChange::Revise`]): stored as this revision (2 for the
    /// first change) and made due again.
    Revised {
        id: i64,
        revision: i64,
        /// Steps delivered before whose targets cannot update a record: the CRM keeps the earlier content there.
        not_updated: Vec<String>,
    },
}

impl InsertOutcome {
    /// The stored event's id.
    pub fn event_id(&self) -> i64 {
        match self {
            InsertOutcome::Inserted(id) | InsertOutcome::Duplicate(id) | InsertOutcome::Revised { id, .. } => *id,
        }
    }

    /// Whether something new is due (a new lead or a new revision).
    pub fn is_new(&self) -> bool {
        !matches!(self, InsertOutcome::Duplicate(_))
    }
}

impl Store {
    /// Stores a batch of events and their steps in one transaction (one disk sync for the whole batch).
    /// Events already present — including repeats inside the batch — come back as `Duplicate`, or as `Revised`
    /// when their content changed and their source revises leads ([`OnChange`]).
    pub async fn insert_events(&self, events: &[NewEvent]) -> anyhow::Result<Vec<InsertOutcome>> {
        dispatch!(self, insert_events(events))
    }

    /// Number of stored events (all sources).
    pub async fn count_events(&self) -> anyhow::Result<i64> {
        dispatch!(self, count_events())
    }
}

backends! {
    shared {
        /// An event whose source and id are stored already: a duplicate, or a new revision (see [`OnChange`]).
        /// What the source sent last is compared (before any operator's fix); a purged lead has nothing left to
        /// compare, so a repeat of it is a duplicate.
        async fn repeat_in(tx: &mut Conn, event: &NewEvent) -> anyhow::Result<InsertOutcome> {
            let (id, sent, purged): (i64, String, Option<i64>) = sqlx::query_as(
                "SELECT id, COALESCE(original_payload, payload), purged_at FROM inbound_event
                  WHERE source = $1 AND source_ref = $2",
            )
            .bind(&event.source)
            .bind(&event.source_ref)
            .fetch_one(&mut *tx)
            .await
            .context("cannot read duplicate inbound_event")?;
            let OnChange::Revise(updatable) = &event.on_change else {
                return Ok(InsertOutcome::Duplicate(id));
            };
            let same = serde_json::from_str::<serde_json::Value>(&sent).is_ok_and(|v| v == event.payload);
            if same || purged.is_some() {
                return Ok(InsertOutcome::Duplicate(id));
            }
            let now = ms(event.received_at);
            let (revision,): (i64,) = sqlx::query_as(
                "UPDATE inbound_event SET payload = $1, original_payload = NULL, revision = revision + 1, revised_at = $2
                  WHERE id = $3 RETURNING revision",
            )
            .bind(event.payload.to_string())
            .bind(now)
            .bind(id)
            .fetch_one(&mut *tx)
            .await
            .context("cannot store the lead's new revision")?;
            let steps: Vec<StepRow> = sqlx::query_as(
                "SELECT id, target, state, dead_class, resolution FROM delivery WHERE event_id = $1 ORDER BY step_index",
            )
            .bind(id)
            .fetch_all(&mut *tx)
            .await
            .context("cannot read the lead's steps")?;
            let states: Vec<StepNow> = steps
                .iter()
                .map(|(_, target, state, class, resolution)| StepNow {
                    state: state.as_str(),
                    updatable: updatable.iter().any(|t| t == target),
                    open_dead_letter: resolution.as_deref().unwrap_or("open") == "open"
                        && class.as_deref() != Some("ambiguous"),
                })
                .collect();
            let plan = plan_revision(&states);
            // Unfinished steps send the new content when they next go; their key names the new revision unless an
            // attempt with the old content may have reached the CRM (then a repeat must stay recognisable).
            sqlx::query(&format!(
                "UPDATE delivery SET key_revision = CASE WHEN {UNCERTAIN} THEN key_revision ELSE $1 END
                  WHERE event_id = $2 AND state IN ('pending', 'waiting')"
            ))
            .bind(revision)
            .bind(id)
            .execute(&mut *tx)
            .await
            .context("cannot name the new revision in the steps' keys")?;
            let mut not_updated = Vec::new();
            for ((step_id, target, ..), action) in steps.iter().zip(plan) {
                let state = match action {
                    Rearm::Leave => continue,
                    Rearm::NotUpdatable => {
                        not_updated.push(target.clone());
                        continue;
                    }
                    Rearm::Pending => "pending",
                    Rearm::Waiting => "waiting",
                };
                // A running step's attempt carries the old content: the new content goes after it, under a new
                // lease (the running attempt's answer is still recorded, but changes nothing). A dead letter is
                // resolved as sent again, by the source.
                sqlx::query(&format!(
                    "UPDATE delivery SET state = $1, pending_since = $2, next_attempt_at = $2, attempts = 0,
                            key_revision = CASE WHEN {UNCERTAIN} THEN key_revision ELSE $3 END,
                            in_doubt = CASE WHEN state = 'running' OR {UNCERTAIN} THEN 1 ELSE 0 END,
                            lease_owner = NULL, lease_until = NULL, lease_token = lease_token + 1, trigger = 'scheduled',
                            resolution = CASE WHEN state = 'dead' THEN 'replayed' ELSE resolution END,
                            resolved_at = CASE WHEN state = 'dead' THEN $2 ELSE resolved_at END,
                            resolved_by = CASE WHEN state = 'dead' THEN 'the source' ELSE resolved_by END,
                            resolution_note = CASE WHEN state = 'dead' THEN $4 ELSE resolution_note END
                      WHERE id = $5"
                ))
                .bind(state)
                .bind(now)
                .bind(revision)
                .bind(format!("the source sent the lead again, changed (revision {revision}): sent again"))
                .bind(step_id)
                .execute(&mut *tx)
                .await
                .context("cannot make the lead's steps due again")?;
            }
            Ok(InsertOutcome::Revised { id, revision, not_updated })
        }
        pub async fn count_events(db: &Db) -> anyhow::Result<i64> {
            let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM inbound_event")
                .fetch_one(db.reader())
                .await
                .context("cannot count events")?;
            Ok(n)
        }

        /// Two statements for the whole batch (the leads, then their steps; each backend writes them its own way)
        /// instead of one per lead and per step: each statement is a round trip — to SQLite's connection thread or
        /// to the PostgreSQL server — and those were most of what a webhook cost. A lead whose source and id are
        /// stored already (also earlier in this batch) is then taken as a repeat, in the batch's order, as one at a
        /// time would.
        pub async fn insert_events(db: &Db, events: &[NewEvent]) -> anyhow::Result<Vec<InsertOutcome>> {
            let mut tx = db.begin_write().await?;
            let inserted = insert_leads_in(&mut tx, events).await.context("cannot insert inbound_event")?;
            let (outcomes, steps) = new_steps(events, inserted);
            if !steps.is_empty() {
                insert_steps_in(&mut tx, &steps).await.context("cannot insert delivery")?;
            }
            let mut done = Vec::with_capacity(events.len());
            for (event, outcome) in events.iter().zip(outcomes) {
                done.push(match outcome {
                    Some(inserted) => inserted,
                    None => repeat_in(&mut tx, event).await?,
                });
            }
            tx.commit().await.context("cannot commit events")?;
            Ok(done)
        }
    }
    sqlite {
        /// Inserts the leads that are new (`json_each` in the batch's order); returns `(id, source, source_ref)` of
        /// each, in any order.
        async fn insert_leads_in(tx: &mut Conn, events: &[NewEvent]) -> sqlx::Result<Vec<(i64, String, String)>> {
            let leads: Vec<serde_json::Value> = events
                .iter()
                .map(|e| {
                    serde_json::json!([
                        e.source,
                        e.source_ref,
                        ms(e.received_at),
                        e.payload.to_string(),
                        e.via.as_str(),
                        own_time(e)
                    ])
                })
                .collect();
            // `WHERE true`: SQLite's grammar needs it between a SELECT and an ON CONFLICT.
            sqlx::query_as(
                "INSERT INTO inbound_event (source, source_ref, received_at, payload, via, lead_at)
                 SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5
                   FROM json_each($1) WHERE true ORDER BY key
                 ON CONFLICT (source, source_ref) DO NOTHING
                 RETURNING id, source, source_ref",
            )
            .bind(serde_json::Value::Array(leads).to_string())
            .fetch_all(&mut *tx)
            .await
        }

        async fn insert_steps_in(tx: &mut Conn, steps: &[NewStep]) -> sqlx::Result<()> {
            let steps: Vec<serde_json::Value> = steps
                .iter()
                .map(|s| serde_json::json!([s.event_id, s.index, s.target, s.state(), s.now, s.due(), s.due(), s.lead_key]))
                .collect();
            sqlx::query(
                "INSERT INTO delivery (event_id, step_index, target, state, created_at, pending_since, next_attempt_at,
                                       lead_key)
                 SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6,
                        value ->> 7
                   FROM json_each($1) ORDER BY key",
            )
            .bind(serde_json::Value::Array(steps).to_string())
            .execute(&mut *tx)
            .await?;
            Ok(())
        }
    }
    postgres {
        /// Inserts the leads that are new (arrays unnested in the batch's order); returns `(id, source,
        /// source_ref)` of each, in any order.
        async fn insert_leads_in(tx: &mut Conn, events: &[NewEvent]) -> sqlx::Result<Vec<(i64, String, String)>> {
            sqlx::query_as(
                "INSERT INTO inbound_event (source, source_ref, received_at, payload, via, lead_at)
                 SELECT s, r, a, p, v, l
                   FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::bigint[])
                        WITH ORDINALITY AS u (s, r, a, p, v, l, n)
                  ORDER BY n
                 ON CONFLICT (source, source_ref) DO NOTHING
                 RETURNING id, source, source_ref",
            )
            .bind(events.iter().map(|e| e.source.clone()).collect::<Vec<_>>())
            .bind(events.iter().map(|e| e.source_ref.clone()).collect::<Vec<_>>())
            .bind(events.iter().map(|e| ms(e.received_at)).collect::<Vec<_>>())
            .bind(events.iter().map(|e| e.payload.to_string()).collect::<Vec<_>>())
            .bind(events.iter().map(|e| e.via.as_str().to_string()).collect::<Vec<_>>())
            .bind(events.iter().map(own_time).collect::<Vec<_>>())
            .fetch_all(&mut *tx)
            .await
        }

        async fn insert_steps_in(tx: &mut Conn, steps: &[NewStep]) -> sqlx::Result<()> {
            sqlx::query(
                "INSERT INTO delivery (event_id, step_index, target, state, created_at, pending_since, next_attempt_at,
                                       lead_key)
                 SELECT e, i, t, s, c, d, d, k
                   FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[],
                               $7::text[])
                        WITH ORDINALITY AS u (e, i, t, s, c, d, k, n)
                  ORDER BY n",
            )
            .bind(steps.iter().map(|s| s.event_id).collect::<Vec<_>>())
            .bind(steps.iter().map(|s| s.index).collect::<Vec<_>>())
            .bind(steps.iter().map(|s| s.target.clone()).collect::<Vec<_>>())
            .bind(steps.iter().map(|s| s.state().to_string()).collect::<Vec<_>>())
            .bind(steps.iter().map(|s| s.now).collect::<Vec<_>>())
            .bind(steps.iter().map(|s| s.due()).collect::<Vec<_>>())
            .bind(steps.iter().map(|s| s.lead_key.clone()).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
            Ok(())
        }
    }
}

/// A step of a revised lead as read: id, target, state, dead-letter class and resolution.
type StepRow = (i64, String, String, Option<String>, Option<String>);

/// A step of a revised lead as it stands.
/// When a lead says it came into being, stored only when earlier than its reception (Unix milliseconds).
fn own_time(event: &NewEvent) -> Option<i64> {
    event.lead_at.filter(|at| *at < event.received_at).map(ms)
}

/// A step of a new lead, to insert: the first step of a route is due at once, the others wait for the one before.
struct NewStep {
    event_id: i64,
    index: i64,
    target: String,
    now: i64,
    /// The lead the event belongs to ([`crate::model::lead_key`]): a later event's step of the same lead and
    /// target is not claimed while this one is unfinished.
    lead_key: String,
}

impl NewStep {
    fn state(&self) -> &'static str {
        if self.index == 0 {
            "pending"
        } else {
            "waiting"
        }
    }

    /// When it is due (`pending_since` and `next_attempt_at`): now for a first step, not yet for the others.
    fn due(&self) -> Option<i64> {
        (self.index == 0).then_some(self.now)
    }
}

/// Which leads of a batch are new, from what the insert returned (`(id, source, source_ref)`, in any order): each
/// new lead's outcome and its steps. The first lead of a batch with a given source and id is the new one; the
/// others are repeats (`None`, settled after the steps are in).
fn new_steps(events: &[NewEvent], inserted: Vec<(i64, String, String)>) -> (Vec<Option<InsertOutcome>>, Vec<NewStep>) {
    let mut new: std::collections::HashMap<(String, String), i64> =
        inserted.into_iter().map(|(id, source, source_ref)| ((source, source_ref), id)).collect();
    let mut outcomes = Vec::with_capacity(events.len());
    let mut steps = Vec::new();
    for event in events {
        let Some(id) = new.remove(&(event.source.clone(), event.source_ref.clone())) else {
            outcomes.push(None);
            continue;
        };
        let now = ms(event.received_at);
        let lead_key = crate::model::lead_key(&event.source, &event.source_ref, &event.payload);
        for (index, target) in event.route.iter().enumerate() {
            steps.push(NewStep {
                event_id: id,
                index: index as i64,
                target: target.clone(),
                now,
                lead_key: lead_key.clone(),
            });
        }
        outcomes.push(Some(InsertOutcome::Inserted(id)));
    }
    (outcomes, steps)
}

#[derive(Debug, Clone, Copy)]
struct StepNow<'a> {
    state: &'a str,
    /// Its target can update a record it created before.
    updatable: bool,
    /// A dead letter still open and not in doubt (an ambiguous one may have reached the CRM).
    open_dead_letter: bool,
}

/// What a revision does to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rearm {
    /// Nothing: it is due or waiting already (it will send the new content), or resolved.
    Leave,
    /// Delivered to a target that cannot update a record: the CRM keeps the earlier content.
    NotUpdatable,
    /// Due now with the new content.
    Pending,
    /// Due when the step before it is delivered.
    Waiting,
}

/// Which steps a new revision sends again, in route order. A step goes again when it was delivered to a target
/// that can update, when it is running with the old content for such a target, or when it is an open dead letter
/// (not ambiguous): the correction may be what it lacked. A step sent (or being sent) to a target that cannot
/// update keeps the old content there. It is due at once when the step before it is settled
/// as delivered; otherwise it waits for that step, whose delivery activates it. Pure.
fn plan_revision(steps: &[StepNow]) -> Vec<Rearm> {
    let mut plan: Vec<Rearm> = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let again = match step.state {
            "delivered" | "running" => step.updatable,
            "dead" => step.open_dead_letter,
            _ => false,
        };
        let action = if !again {
            let sent = matches!(step.state, "delivered" | "running");
            if sent && !step.updatable {
                Rearm::NotUpdatable
            } else {
                Rearm::Leave
            }
        } else {
            // The step before is settled if it is delivered (or ended as reported, which is final) and not sent
            // again (or there is none).
            let before_settled = i == 0
                || (matches!(steps[i - 1].state, "delivered" | "reported")
                    && matches!(plan[i - 1], Rearm::Leave | Rearm::NotUpdatable));
            if before_settled {
                Rearm::Pending
            } else {
                Rearm::Waiting
            }
        };
        plan.push(action);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(state: &str, updatable: bool) -> StepNow<'_> {
        StepNow { state, updatable, open_dead_letter: true }
    }

    #[test]
    fn a_revision_sends_delivered_steps_again_in_route_order() {
        let plan = plan_revision(&[step("delivered", true), step("delivered", true)]);
        assert_eq!(plan, [Rearm::Pending, Rearm::Waiting]);
    }

    #[test]
    fn a_target_that_cannot_update_keeps_the_first_content_and_does_not_block_the_next() {
        let plan = plan_revision(&[step("delivered", false), step("delivered", true)]);
        assert_eq!(plan, [Rearm::NotUpdatable, Rearm::Pending]);
    }

    #[test]
    fn unfinished_steps_send_the_new_content_without_help() {
        let plan = plan_revision(&[step("pending", true), step("waiting", true)]);
        assert_eq!(plan, [Rearm::Leave, Rearm::Leave]);
        let plan = plan_revision(&[step("running", false), step("waiting", true)]);
        assert_eq!(plan, [Rearm::NotUpdatable, Rearm::Leave], "a running create finishes with the old content");
        let plan = plan_revision(&[step("running", true), step("waiting", true)]);
        assert_eq!(plan, [Rearm::Pending, Rearm::Leave]);
    }

    #[test]
    fn an_open_dead_letter_goes_again_but_not_an_ambiguous_or_resolved_one() {
        let plan = plan_revision(&[step("delivered", true), step("dead", false)]);
        assert_eq!(plan, [Rearm::Pending, Rearm::Waiting]);
        let closed = StepNow { state: "dead", updatable: true, open_dead_letter: false };
        assert_eq!(plan_revision(&[closed]), [Rearm::Leave]);
        assert_eq!(plan_revision(&[step("dead", false)]), [Rearm::Pending]);
    }
}
