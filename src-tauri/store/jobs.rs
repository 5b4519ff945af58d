//! `delivery` and `attempt`: claiming due jobs under a lease, recording outcomes, rescuing expired leases.

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{from_ms, ms, Store};
use crate::model::ErrorClass;
pub use crate::model::Job;

/// One stored attempt.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub http_status: Option<u16>,
    pub class: Option<ErrorClass>,
    pub reason: String,
    pub response_excerpt: Option<String>,
}

/// What became of a job.
#[derive(Debug, Clone)]
pub enum JobOutcome {
    Delivered {
        result: serde_json::Value,
        /// search_then_create: remember which CRM record holds this external id.
        link: Option<(String, String)>,
        /// The lead as stored from now on (a `meta_lead` step fetched its answers), written in the same commit.
        payload: Option<serde_json::Value>,
    },
    Retry {
        at: DateTime<Utc>,
        counts: bool,
        /// The CRM may have the lead: look it up before sending again.
        in_doubt: bool,
    },
    Dead {
        class: ErrorClass,
        http_status: Option<u16>,
        reason: String,
        field: Option<String>,
    },
    /// Ended without sending, for good (a conversion too old for the platform's window, a stage the target does
    /// not map): state `reported`, a final state of its own — not delivered, not a dead letter, never tried again.
    /// `result` holds the words (`{"reported": "reported: too old for Meta's 7-day window …"}`). The route's next
    /// step becomes due as after a delivery.
    Reported {
        result: serde_json::Value,
    },
    /// Put back without using an attempt (shutdown, a deferred probe): due again at `at`.
    Released {
        at: DateTime<Utc>,
    },
    /// Not sent: the lead is too old for this time-sensitive step, which runs `to` (its fallback) instead, due
    /// now, with no attempts used; the step remembers its own target (`fallback_of`).
    Diverted {
        to: String,
    },
    /// Refused only for a field the target's `missing_data` lets it go without: due again at `at` (at once)
    /// without the fields `dropped`, no attempt used; `field` is remembered with the refusal's `reason`.
    WithoutFields {
        at: DateTime<Utc>,
        dropped: Vec<String>,
        field: String,
        reason: String,
    },
}

/// Who checks a lead delivered without some fields (a target's `missing_data`).
#[derive(Debug, Clone, PartialEq)]
pub enum MissingTask {
    /// Leadline lists it as "Needs a person".
    Person,
    /// A follow-up step to this target is added to the lead's route, due at once (a call task in the CRM).
    FollowUp(String),
}

impl JobOutcome {
    /// The outcome an attempt with this result is stored with (`attempt.outcome`).
    pub fn attempt_outcome(&self) -> &'static str {
        match self {
            JobOutcome::Delivered { .. } => "delivered",
            JobOutcome::Reported { .. } => "reported",
            JobOutcome::Retry { .. } | JobOutcome::WithoutFields { .. } => "retry",
            JobOutcome::Dead { .. } => "dead",
            JobOutcome::Released { .. } | JobOutcome::Diverted { .. } => "released",
        }
    }
}

/// A finished job, ready to be written. `attempt` is `None` when no request was made.
#[derive(Debug, Clone)]
pub struct Completion {
    pub job_id: i64,
    pub event_id: i64,
    pub step_index: i64,
    pub lease_token: i64,
    pub trigger: String,
    pub outcome: JobOutcome,
    pub attempt: Option<AttemptRecord>,
    pub now: DateTime<Utc>,
    /// Delivered without some fields: who checks it (written with the delivery, in the same commit).
    pub missing_task: Option<MissingTask>,
}

type ClaimRow = (i64, i64, i64, String, i64, i64, i64, i64, String, i64, i64, Option<String>);

impl Completion {
    /// What `job` came to: `outcome`, with the attempt made for it (if one was), written at `now`.
    pub fn of(job: &Job, outcome: JobOutcome, attempt: Option<AttemptRecord>, now: DateTime<Utc>) -> Completion {
        Completion {
            job_id: job.id,
            event_id: job.event_id,
            step_index: job.step_index,
            lease_token: job.lease_token,
            trigger: job.trigger.clone(),
            outcome,
            attempt,
            now,
            missing_task: None,
        }
    }
}

/// The fields a step goes without, as `delivery.dropped_fields` stores them (a JSON list; NULL for none).
fn dropped_of(stored: Option<&str>) -> Vec<String> {
    stored.and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default()
}

/// A claim to make: up to `limit` due jobs of `target`, oldest due first, leased to `owner` until `lease_until`.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub target: String,
    pub limit: u32,
    pub owner: String,
    pub now: DateTime<Utc>,
    pub lease_until: DateTime<Utc>,
}

impl Store {
    /// Claims up to `limit` due jobs of `target`, oldest due first, leasing them to `owner` until `lease_until`.
    pub async fn claim(
        &self,
        target: &str,
        limit: u32,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> anyhow::Result<Vec<Job>> {
        let request = ClaimRequest { target: target.to_string(), limit, owner: owner.to_string(), now, lease_until };
        let (_, mut claimed) = self.write_batch(&[], std::slice::from_ref(&request)).await?;
        Ok(claimed.pop().unwrap_or_default())
    }

    /// Writes a batch of finished jobs in one transaction. A completion whose lease token no longer matches
    /// (the lease expired and someone else holds the job) changes no state, but its attempt is still recorded:
    /// it happened. Returns how many completions were applied.
    pub async fn complete(&self, batch: &[Completion]) -> anyhow::Result<usize> {
        Ok(self.write_batch(batch, &[]).await?.0)
    }

    /// Writes finished jobs, then makes claims, all in one transaction: one commit (one disk sync) for the whole
    /// group, and a claim sees the steps the completions made due. Returns how many completions were applied
    /// and, per claim request, the jobs it got. Nothing is claimed unless everything is committed.
    pub async fn write_batch(
        &self,
        completions: &[Completion],
        claims: &[ClaimRequest],
    ) -> anyhow::Result<(usize, Vec<Vec<Job>>)> {
        dispatch!(self, write_batch(completions, claims))
    }

    /// Returns jobs whose lease expired (their worker died or hung) to `pending`, marked in doubt: the
    /// attempt may have reached the CRM. Returns how many were rescued.
    pub async fn rescue_expired(&self, now: DateTime<Utc>) -> anyhow::Result<u64> {
        dispatch!(self, rescue_expired(now))
    }

    /// Makes every pending job of `target` due by `now` (after its credential was renewed: the leads that waited
    /// for it go at once). Returns how many jobs of the target wait: pending, or under way (a probe in flight).
    pub async fn make_due(&self, target: &str, now: DateTime<Utc>) -> anyhow::Result<u64> {
        dispatch!(self, make_due(target, now))
    }

    /// The time at which the next pending job of `target` becomes due, if any.
    pub async fn next_due(&self, target: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        dispatch!(self, next_due(target))
    }

    /// The outcomes of a delivery's attempts (`delivered`, `retry`, `dead`, `released`, `rescued`), oldest first.
    pub async fn attempt_outcomes(&self, delivery_id: i64) -> anyhow::Result<Vec<String>> {
        dispatch!(self, attempt_outcomes(delivery_id))
    }

    /// A lead as a job for `target`, without claiming anything: what a dry run of that target needs. The lead is
    /// found by its external id (`source:source_ref`); its delivered steps' results are `previous`.
    pub async fn job_preview(&self, external_id: &str, target: &str) -> anyhow::Result<Option<Job>> {
        dispatch!(self, job_preview(external_id, target))
    }
}

backends! {
    shared {
        pub async fn rescue_expired(db: &Db, now: DateTime<Utc>) -> anyhow::Result<u64> {
            let mut tx = db.begin_write().await?;
            let rescued: Vec<(i64, String)> = sqlx::query_as(
                "UPDATE delivery SET state = 'pending', next_attempt_at = $1, in_doubt = 1, lease_owner = NULL,
                        lease_until = NULL
                  WHERE state = 'running' AND lease_until < $2
              RETURNING id, trigger",
            )
            .bind(ms(now))
            .bind(ms(now))
            .fetch_all(&mut *tx)
            .await
            .context("cannot rescue expired leases")?;
            for (id, trigger) in &rescued {
                sqlx::query(
                    "INSERT INTO attempt (delivery_id, started_at, duration_ms, outcome, reason, trigger)
                     VALUES ($1, $2, 0, 'rescued', 'lease expired: the worker stopped mid-attempt; the lead will be checked before it is sent again', $3)",
                )
                .bind(id)
                .bind(ms(now))
                .bind(trigger)
                .execute(&mut *tx)
                .await
                .context("cannot record rescue")?;
            }
            tx.commit().await.context("cannot commit rescue")?;
            Ok(rescued.len() as u64)
        }

        pub async fn make_due(db: &Db, target: &str, now: DateTime<Utc>) -> anyhow::Result<u64> {
            // One transaction, so that a lead claimed meanwhile (due once its target's hold ended) is counted
            // once: as pending or as under way.
            let mut tx = db.begin_write().await?;
            sqlx::query(
                "UPDATE delivery SET next_attempt_at = CASE WHEN next_attempt_at > $1 THEN $2 ELSE next_attempt_at END
                 WHERE state = 'pending' AND target = $3",
            )
            .bind(ms(now))
            .bind(ms(now))
            .bind(target)
            .execute(&mut *tx)
            .await
            .context("cannot make jobs due")?;
            // A lead under way counts too: the probe the hold let through is in flight, and it goes again if the
            // old credential is refused once more.
            let waiting: (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM delivery WHERE state IN ('pending', 'running') AND target = $1",
            )
            .bind(target)
            .fetch_one(&mut *tx)
            .await
            .context("cannot count waiting jobs")?;
            tx.commit().await.context("cannot commit making jobs due")?;
            Ok(waiting.0 as u64)
        }

        pub async fn next_due(db: &Db, target: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
            let row: (Option<i64>,) =
                sqlx::query_as("SELECT MIN(next_attempt_at) FROM delivery WHERE state = 'pending' AND target = $1")
                    .bind(target)
                    .fetch_one(db.reader())
                    .await
                    .context("cannot read next due time")?;
            Ok(row.0.map(from_ms))
        }

        pub async fn attempt_outcomes(db: &Db, delivery_id: i64) -> anyhow::Result<Vec<String>> {
            let rows: Vec<(String,)> = sqlx::query_as("SELECT outcome FROM attempt WHERE delivery_id = $1 ORDER BY id")
                .bind(delivery_id)
                .fetch_all(db.reader())
                .await
                .context("cannot read attempts")?;
            Ok(rows.into_iter().map(|r| r.0).collect())
        }

        pub async fn job_preview(db: &Db, external_id: &str, target: &str) -> anyhow::Result<Option<Job>> {
            let Some((source, source_ref)) = external_id.split_once(':') else {
                return Ok(None);
            };
            let event: Option<(i64, i64, String, i64)> = sqlx::query_as(
                "SELECT id, received_at, payload, revision FROM inbound_event WHERE source = $1 AND source_ref = $2",
            )
            .bind(source)
            .bind(source_ref)
            .fetch_optional(db.reader())
            .await
            .context("cannot read the lead")?;
            let Some((event_id, received_at, payload, revision)) = event else {
                return Ok(None);
            };
            let previous: Vec<(String, Option<String>)> =
                sqlx::query_as("SELECT target, result FROM delivery WHERE event_id = $1 AND state = 'delivered'")
                    .bind(event_id)
                    .fetch_all(db.reader())
                    .await
                    .context("cannot read earlier steps")?;
            let mut prev = serde_json::Map::new();
            for (t, result) in previous {
                prev.insert(t, result.as_deref().and_then(|r| serde_json::from_str(r).ok()).unwrap_or_default());
            }
            Ok(Some(Job {
                id: 0,
                event_id,
                step_index: 0,
                target: target.to_string(),
                attempts: 0,
                pending_since: from_ms(received_at),
                lease_token: 0,
                in_doubt: false,
                trigger: "scheduled".into(),
                replay_generation: 0,
                key_revision: revision,
                source: source.to_string(),
                source_ref: source_ref.to_string(),
                received_at: from_ms(received_at),
                revision,
                payload: serde_json::from_str(&payload).unwrap_or_default(),
                previous: prev,
                dropped: Vec::new(),
            }))
        }

        /// Links the lead of job `job_id` to its CRM record for the job's target (the first link wins).
        async fn link_in(tx: &mut Conn, job_id: i64, external_id: &str, crm_id: &str, now: i64) -> anyhow::Result<()> {
            sqlx::query(
                "INSERT INTO crm_link (target, external_id, crm_id, linked_at)
                 SELECT target, $1, $2, $3 FROM delivery WHERE id = $4
                 ON CONFLICT (target, external_id) DO NOTHING",
            )
            .bind(external_id)
            .bind(crm_id)
            .bind(now)
            .bind(job_id)
            .execute(&mut *tx)
            .await
            .context("cannot record crm_link")?;
            Ok(())
        }

        /// Applies a job that did not deliver (a retry, a dead letter, a release) if it still runs under the
        /// presented lease. Returns how many rows changed (0: it changed hands meanwhile). Deliveries are applied
        /// for the whole batch at once, by each backend.
        async fn finish_undelivered_in(tx: &mut Conn, c: &Completion) -> anyhow::Result<u64> {
            let now = ms(c.now);
            let done = match &c.outcome {
                JobOutcome::Delivered { .. } | JobOutcome::Reported { .. } => {
                    anyhow::bail!("a delivered or reported job is applied with its batch")
                }
                JobOutcome::Retry { at, counts, in_doubt } => sqlx::query(
                    "UPDATE delivery SET state = 'pending', next_attempt_at = $1, attempts = attempts + $2,
                            lease_owner = NULL, lease_until = NULL, in_doubt = $3
                      WHERE id = $4 AND lease_token = $5 AND state = 'running'",
                )
                .bind(ms(*at))
                .bind(i64::from(*counts))
                .bind(i64::from(*in_doubt))
                .bind(c.job_id)
                .bind(c.lease_token)
                .execute(&mut *tx)
                .await
                .context("cannot schedule retry")?,
                JobOutcome::Dead { class, http_status, reason, field } => sqlx::query(
                    "UPDATE delivery SET state = 'dead', dead_at = $1, dead_class = $2, dead_status = $3, dead_reason = $4,
                            dead_cause = $5, dead_field = $6, resolution = 'open', attempts = attempts + $7,
                            lease_owner = NULL, lease_until = NULL
                      WHERE id = $8 AND lease_token = $9 AND state = 'running'",
                )
                .bind(now)
                .bind(class.as_str())
                .bind(http_status.map(i64::from))
                .bind(reason)
                .bind(crate::model::cause_of(reason))
                .bind(field)
                .bind(i64::from(c.attempt.is_some() && *class != ErrorClass::RateLimited))
                .bind(c.job_id)
                .bind(c.lease_token)
                .execute(&mut *tx)
                .await
                .context("cannot dead-letter job")?,
                JobOutcome::Released { at } => sqlx::query(
                    "UPDATE delivery SET state = 'pending', next_attempt_at = $1, lease_owner = NULL, lease_until = NULL
                      WHERE id = $2 AND lease_token = $3 AND state = 'running'",
                )
                .bind(ms(*at))
                .bind(c.job_id)
                .bind(c.lease_token)
                .execute(&mut *tx)
                .await
                .context("cannot release job")?,
                // SET sees the row as it was: `fallback_of` gets the step's own target.
                JobOutcome::Diverted { to } => sqlx::query(
                    "UPDATE delivery SET state = 'pending', fallback_of = target, target = $1, next_attempt_at = $2,
                            pending_since = $2, attempts = 0, in_doubt = 0, lease_owner = NULL, lease_until = NULL
                      WHERE id = $3 AND lease_token = $4 AND state = 'running'",
                )
                .bind(to)
                .bind(now)
                .bind(c.job_id)
                .bind(c.lease_token)
                .execute(&mut *tx)
                .await
                .context("cannot divert job to its fallback")?,
                JobOutcome::WithoutFields { at, dropped, field, reason } => {
                    let done = sqlx::query(
                        "UPDATE delivery SET state = 'pending', next_attempt_at = $1, dropped_fields = $2,
                                lease_owner = NULL, lease_until = NULL
                          WHERE id = $3 AND lease_token = $4 AND state = 'running'",
                    )
                    .bind(ms(*at))
                    .bind(serde_json::to_string(dropped)?)
                    .bind(c.job_id)
                    .bind(c.lease_token)
                    .execute(&mut *tx)
                    .await
                    .context("cannot send the job again without a field")?;
                    if done.rows_affected() > 0 {
                        sqlx::query(
                            "INSERT INTO missing_field (delivery_id, field, reason, at) VALUES ($1, $2, $3, $4)
                             ON CONFLICT (delivery_id, field) DO UPDATE SET reason = excluded.reason, at = excluded.at",
                        )
                        .bind(c.job_id)
                        .bind(field)
                        .bind(reason)
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .context("cannot record the missing field")?;
                    }
                    done
                }
            };
            Ok(done.rows_affected())
        }

        /// A delivered step that went without some fields: who checks it. A follow-up step is added to the
        /// lead's route after its last step, due at once; otherwise the step is listed as "Needs a person".
        async fn missing_task_in(tx: &mut Conn, c: &Completion, task: &MissingTask) -> anyhow::Result<()> {
            let now = ms(c.now);
            let state = match task {
                MissingTask::Person => "open",
                MissingTask::FollowUp(_) => "follow_up",
            };
            sqlx::query("UPDATE delivery SET missing_task = $1 WHERE id = $2 AND dropped_fields IS NOT NULL")
                .bind(state)
                .bind(c.job_id)
                .execute(&mut *tx)
                .await
                .context("cannot record the missing-data task")?;
            if let MissingTask::FollowUp(target) = task {
                sqlx::query(
                    "INSERT INTO delivery (event_id, step_index, target, state, created_at, pending_since, next_attempt_at)
                     SELECT $1, MAX(step_index) + 1, $2, 'pending', $3, $3, $3 FROM delivery WHERE event_id = $1",
                )
                .bind(c.event_id)
                .bind(target)
                .bind(now)
                .execute(&mut *tx)
                .await
                .context("cannot add the follow-up step")?;
            }
            Ok(())
        }
    }
    sqlite {
        pub async fn write_batch(
            db: &Db,
            completions: &[Completion],
            claims: &[ClaimRequest],
        ) -> anyhow::Result<(usize, Vec<Vec<Job>>)> {
            let mut tx = db.begin_write().await?;
            let applied = complete_in(&mut tx, completions).await?;
            let mut claimed = Vec::with_capacity(claims.len());
            for request in claims {
                claimed.push(claim_in(&mut tx, request).await?);
            }
            tx.commit().await.context("cannot commit completions and claims")?;
            Ok((applied, claimed))
        }

        /// Claims due jobs inside `tx` and reads their leads and earlier steps' results (one statement each).
        /// A step is not claimed while a step of an earlier event of the same lead (`lead_key`) to the same target
        /// is unfinished (waiting, pending or running — a dead letter does not hold it): a lead's stages reach a
        /// conversion step in the order they came in, across retries. One seek of `delivery_lead_order` each.
        pub(super) async fn claim_in(tx: &mut sqlx::SqliteConnection, request: &ClaimRequest) -> anyhow::Result<Vec<Job>> {
            let rows: Vec<ClaimRow> = sqlx::query_as(
                "UPDATE delivery
                    SET state = 'running', lease_owner = $1, lease_until = $2, lease_token = lease_token + 1
                  WHERE id IN (SELECT d.id FROM delivery d
                                WHERE d.state = 'pending' AND d.target = $3 AND d.next_attempt_at <= $4
                                  AND NOT EXISTS (SELECT 1 FROM delivery b
                                                   WHERE b.target = d.target AND b.lead_key = d.lead_key
                                                     AND b.event_id < d.event_id
                                                     AND b.state IN ('waiting', 'pending', 'running'))
                                ORDER BY d.next_attempt_at LIMIT $5)
              RETURNING id, event_id, step_index, target, attempts, pending_since, lease_token, in_doubt, trigger,
                        replay_generation, key_revision, dropped_fields",
            )
            .bind(&request.owner)
            .bind(ms(request.lease_until))
            .bind(&request.target)
            .bind(ms(request.now))
            .bind(request.limit as i64)
            .fetch_all(&mut *tx)
            .await
            .context("cannot claim jobs")?;
            if rows.is_empty() {
                return Ok(Vec::new());
            }
            let event_ids: Vec<i64> = rows.iter().map(|r| r.1).collect();
            // Each lead with the results of its delivered steps as one JSON object by target (`{}` for a first step).
            let events: Vec<(i64, String, String, i64, String, String, i64)> = sqlx::query_as(
                "SELECT e.id, e.source, e.source_ref, e.received_at, e.payload,
                        (SELECT json_group_object(p.target, CASE WHEN json_valid(p.result) THEN json(p.result) END)
                           FROM delivery p WHERE p.event_id = e.id AND p.state = 'delivered'),
                        e.revision
                   FROM inbound_event e
                  WHERE e.id IN (SELECT value FROM json_each($1))",
            )
            .bind(serde_json::to_string(&event_ids)?)
            .fetch_all(&mut *tx)
            .await
            .context("cannot read claimed events")?;
            let events: std::collections::HashMap<i64, (String, String, i64, String, String, i64)> =
                events.into_iter().map(|(id, s, r, at, p, prev, rev)| (id, (s, r, at, p, prev, rev))).collect();
            let mut jobs = Vec::with_capacity(rows.len());
            for (id, event_id, step_index, target, attempts, pending_since, lease_token, in_doubt, trigger, generation, key_revision, dropped) in
                rows
            {
                let (source, source_ref, received_at, payload, previous, revision) =
                    events.get(&event_id).with_context(|| format!("delivery {id} refers to missing event {event_id}"))?;
                jobs.push(Job {
                    id,
                    event_id,
                    step_index,
                    target,
                    attempts: attempts as u32,
                    pending_since: from_ms(pending_since),
                    lease_token,
                    in_doubt: in_doubt != 0,
                    trigger,
                    replay_generation: generation,
                    key_revision,
                    source: source.clone(),
                    source_ref: source_ref.clone(),
                    received_at: from_ms(*received_at),
                    revision: *revision,
                    payload: serde_json::from_str(payload).unwrap_or(serde_json::Value::Null),
                    previous: serde_json::from_str(previous).unwrap_or_default(),
                    dropped: dropped_of(dropped.as_deref()),
                });
            }
            Ok(jobs)
        }

        /// Applies finished jobs inside `tx`. Deliveries, the steps they make due and all attempts are written with one
        /// statement each for the whole batch; the rarer outcomes (retry, dead letter, release) one statement per job.
        pub(super) async fn complete_in(tx: &mut sqlx::SqliteConnection, batch: &[Completion]) -> anyhow::Result<usize> {
            let mut applied = 0;
            let mut delivered = Vec::new();
            for c in batch {
                let now = ms(c.now);
                let changed = match &c.outcome {
                    JobOutcome::Delivered { result, link, .. } => {
                        if let Some((external_id, crm_id)) = link {
                            link_in(tx, c.job_id, external_id, crm_id, now).await?;
                        }
                        delivered.push(serde_json::json!([c.job_id, c.lease_token, result.to_string(), now, "delivered"]));
                        continue;
                    }
                    JobOutcome::Reported { result } => {
                        delivered.push(serde_json::json!([c.job_id, c.lease_token, result.to_string(), now, "reported"]));
                        continue;
                    }
                    _ => finish_undelivered_in(tx, c).await?,
                };
                applied += changed as usize;
            }

            if !delivered.is_empty() {
                // Only a job still running under the presented lease is delivered; the rest changed hands meanwhile.
                let done: Vec<(i64, i64, i64)> = sqlx::query_as(
                    "UPDATE delivery SET state = v.state, result = v.result, delivered_at = v.now,
                            attempts = attempts + 1, lease_owner = NULL, lease_until = NULL, in_doubt = 0
                       FROM (SELECT value ->> 0 AS id, value ->> 1 AS token, value ->> 2 AS result, value ->> 3 AS now,
                                    value ->> 4 AS state
                               FROM json_each($1)) AS v
                      WHERE delivery.id = v.id AND delivery.lease_token = v.token AND delivery.state = 'running'
                  RETURNING delivery.id, delivery.event_id, delivery.step_index",
                )
                .bind(serde_json::Value::Array(delivered).to_string())
                .fetch_all(&mut *tx)
                .await
                .context("cannot mark delivered")?;
                applied += done.len();
                let done_ids: std::collections::HashSet<i64> = done.iter().map(|d| d.0).collect();
                let mut next_steps = Vec::with_capacity(done.len());
                for c in batch {
                    let payload = match &c.outcome {
                        JobOutcome::Delivered { payload, .. } => payload,
                        JobOutcome::Reported { .. } => &None,
                        _ => continue,
                    };
                    if !done_ids.contains(&c.job_id) {
                        continue;
                    }
                    if let Some(p) = payload {
                        sqlx::query("UPDATE inbound_event SET payload = $1 WHERE id = $2")
                            .bind(p.to_string())
                            .bind(c.event_id)
                            .execute(&mut *tx)
                            .await
                            .context("cannot store the fetched lead")?;
                    }
                    next_steps.push(serde_json::json!([c.event_id, c.step_index + 1, ms(c.now)]));
                    if let Some(task) = &c.missing_task {
                        missing_task_in(tx, c, task).await?;
                    }
                }
                // The next step of each route becomes due now that its input exists.
                sqlx::query(
                    "UPDATE delivery SET state = 'pending', pending_since = v.now, next_attempt_at = v.now
                       FROM (SELECT value ->> 0 AS event_id, value ->> 1 AS step_index, value ->> 2 AS now
                               FROM json_each($1)) AS v
                      WHERE delivery.event_id = v.event_id AND delivery.step_index = v.step_index
                        AND delivery.state = 'waiting'",
                )
                .bind(serde_json::Value::Array(next_steps).to_string())
                .execute(&mut *tx)
                .await
                .context("cannot activate next steps")?;
            }

            // Every attempt, in the batch's order.
            let attempts: Vec<serde_json::Value> = batch
                .iter()
                .filter_map(|c| {
                    let a = c.attempt.as_ref()?;
                    Some(serde_json::json!([
                        c.job_id,
                        ms(a.started_at),
                        a.duration_ms,
                        a.http_status,
                        c.outcome.attempt_outcome(),
                        a.class.map(|c| c.as_str()),
                        a.reason,
                        a.response_excerpt,
                        c.trigger
                    ]))
                })
                .collect();
            if !attempts.is_empty() {
                sqlx::query(
                    "INSERT INTO attempt (delivery_id, started_at, duration_ms, http_status, outcome, class, reason,
                                          response_excerpt, trigger)
                     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6,
                            value ->> 7, value ->> 8
                       FROM json_each($1) ORDER BY key",
                )
                .bind(serde_json::Value::Array(attempts).to_string())
                .execute(&mut *tx)
                .await
                .context("cannot record attempts")?;
            }
            Ok(applied)
        }
    }
    postgres {
        /// As on SQLite, in one transaction. Concurrent workers may lock the same tally rows (the triggers' counts)
        /// in different orders and deadlock; PostgreSQL then aborts one transaction, which is retried whole (it
        /// changed nothing).
        pub async fn write_batch(
            db: &Db,
            completions: &[Completion],
            claims: &[ClaimRequest],
        ) -> anyhow::Result<(usize, Vec<Vec<Job>>)> {
            let mut tries = 0;
            loop {
                match try_write_batch(db, completions, claims).await {
                    Err(e) if tries < 8 && is_transient(&e) => {
                        tries += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(5 * tries)).await;
                    }
                    other => return other,
                }
            }
        }

        /// Deadlock detected (40P01) or serialization failure (40001): the transaction was rolled back.
        fn is_transient(e: &anyhow::Error) -> bool {
            e.chain().filter_map(|c| c.downcast_ref::<sqlx::Error>()).any(|e| {
                matches!(e.as_database_error().and_then(|d| d.code()).as_deref(), Some("40P01") | Some("40001"))
            })
        }

        async fn try_write_batch(
            db: &Db,
            completions: &[Completion],
            claims: &[ClaimRequest],
        ) -> anyhow::Result<(usize, Vec<Vec<Job>>)> {
            let mut tx = db.begin_write().await?;
            let applied = complete_in(&mut tx, completions).await?;
            let mut claimed = Vec::with_capacity(claims.len());
            for request in claims {
                claimed.push(claim_in(&mut tx, request).await?);
            }
            tx.commit().await.context("cannot commit completions and claims")?;
            Ok((applied, claimed))
        }

        /// Claims due jobs inside `tx`: rows another transaction holds are skipped (`FOR UPDATE SKIP LOCKED`), so
        /// concurrent claimers neither wait for each other nor take the same job. Then reads their leads and the
        /// results of their earlier steps.
        async fn claim_in(tx: &mut sqlx::PgConnection, request: &ClaimRequest) -> anyhow::Result<Vec<Job>> {
            let rows: Vec<ClaimRow> = sqlx::query_as(
                "UPDATE delivery
                    SET state = 'running', lease_owner = $1, lease_until = $2, lease_token = lease_token + 1
                  WHERE id IN (SELECT d.id FROM delivery d
                                WHERE d.state = 'pending' AND d.target = $3 AND d.next_attempt_at <= $4
                                  AND NOT EXISTS (SELECT 1 FROM delivery b
                                                   WHERE b.target = d.target AND b.lead_key = d.lead_key
                                                     AND b.event_id < d.event_id
                                                     AND b.state IN ('waiting', 'pending', 'running'))
                                ORDER BY d.next_attempt_at LIMIT $5
                                FOR UPDATE OF d SKIP LOCKED)
              RETURNING id, event_id, step_index, target, attempts, pending_since, lease_token, in_doubt, trigger,
                        replay_generation, key_revision, dropped_fields",
            )
            .bind(&request.owner)
            .bind(ms(request.lease_until))
            .bind(&request.target)
            .bind(ms(request.now))
            .bind(request.limit as i64)
            .fetch_all(&mut *tx)
            .await
            .context("cannot claim jobs")?;
            if rows.is_empty() {
                return Ok(Vec::new());
            }
            let event_ids: Vec<i64> = rows.iter().map(|r| r.1).collect();
            let events: Vec<(i64, String, String, i64, String, i64)> = sqlx::query_as(
                "SELECT id, source, source_ref, received_at, payload, revision FROM inbound_event WHERE id = ANY($1)",
            )
            .bind(&event_ids)
            .fetch_all(&mut *tx)
            .await
            .context("cannot read claimed events")?;
            // The results of their delivered steps by target (a result that is not JSON reads as null, as on SQLite).
            let earlier: Vec<(i64, String, Option<String>)> = sqlx::query_as(
                "SELECT event_id, target, result FROM delivery WHERE event_id = ANY($1) AND state = 'delivered'",
            )
            .bind(&event_ids)
            .fetch_all(&mut *tx)
            .await
            .context("cannot read earlier steps")?;
            let mut previous: std::collections::HashMap<i64, serde_json::Map<String, serde_json::Value>> =
                std::collections::HashMap::new();
            for (event_id, target, result) in earlier {
                let value = result.as_deref().and_then(|r| serde_json::from_str(r).ok()).unwrap_or_default();
                previous.entry(event_id).or_default().insert(target, value);
            }
            let events: std::collections::HashMap<i64, (String, String, i64, String, i64)> =
                events.into_iter().map(|(id, s, r, at, p, rev)| (id, (s, r, at, p, rev))).collect();
            let mut jobs = Vec::with_capacity(rows.len());
            for (id, event_id, step_index, target, attempts, pending_since, lease_token, in_doubt, trigger, generation, key_revision, dropped) in
                rows
            {
                let (source, source_ref, received_at, payload, revision) =
                    events.get(&event_id).with_context(|| format!("delivery {id} refers to missing event {event_id}"))?;
                jobs.push(Job {
                    id,
                    event_id,
                    step_index,
                    target,
                    attempts: attempts as u32,
                    pending_since: from_ms(pending_since),
                    lease_token,
                    in_doubt: in_doubt != 0,
                    trigger,
                    replay_generation: generation,
                    key_revision,
                    source: source.clone(),
                    source_ref: source_ref.clone(),
                    received_at: from_ms(*received_at),
                    revision: *revision,
                    payload: serde_json::from_str(payload).unwrap_or(serde_json::Value::Null),
                    previous: previous.remove(&event_id).unwrap_or_default(),
                    dropped: dropped_of(dropped.as_deref()),
                });
            }
            Ok(jobs)
        }

        /// Applies finished jobs inside `tx`, as SQLite's `complete_in`: deliveries, the steps they make due and
        /// all attempts with one statement each for the whole batch (arrays bound as parameters and `unnest`ed),
        /// the rarer outcomes one statement per job.
        async fn complete_in(tx: &mut sqlx::PgConnection, batch: &[Completion]) -> anyhow::Result<usize> {
            let mut applied = 0;
            let (mut d_id, mut d_token, mut d_result, mut d_at) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut d_state: Vec<&str> = Vec::new();
            for c in batch {
                let now = ms(c.now);
                let changed = match &c.outcome {
                    JobOutcome::Delivered { result, link, .. } => {
                        if let Some((external_id, crm_id)) = link {
                            link_in(tx, c.job_id, external_id, crm_id, now).await?;
                        }
                        d_id.push(c.job_id);
                        d_token.push(c.lease_token);
                        d_result.push(result.to_string());
                        d_at.push(now);
                        d_state.push("delivered");
                        continue;
                    }
                    JobOutcome::Reported { result } => {
                        d_id.push(c.job_id);
                        d_token.push(c.lease_token);
                        d_result.push(result.to_string());
                        d_at.push(now);
                        d_state.push("reported");
                        continue;
                    }
                    _ => finish_undelivered_in(tx, c).await?,
                };
                applied += changed as usize;
            }

            if !d_id.is_empty() {
                // Only a job still running under the presented lease is delivered; the rest changed hands meanwhile.
                let done: Vec<(i64, i64, i64)> = sqlx::query_as(
                    "UPDATE delivery SET state = v.state, result = v.result, delivered_at = v.done_at,
                            attempts = delivery.attempts + 1, lease_owner = NULL, lease_until = NULL, in_doubt = 0
                       FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::text[])
                            AS v(id, token, result, done_at, state)
                      WHERE delivery.id = v.id AND delivery.lease_token = v.token AND delivery.state = 'running'
                  RETURNING delivery.id, delivery.event_id, delivery.step_index",
                )
                .bind(&d_id)
                .bind(&d_token)
                .bind(&d_result)
                .bind(&d_at)
                .bind(&d_state)
                .fetch_all(&mut *tx)
                .await
                .context("cannot mark delivered")?;
                applied += done.len();
                let done_ids: std::collections::HashSet<i64> = done.iter().map(|d| d.0).collect();
                let (mut n_event, mut n_step, mut n_at) = (Vec::new(), Vec::new(), Vec::new());
                for c in batch {
                    let payload = match &c.outcome {
                        JobOutcome::Delivered { payload, .. } => payload,
                        JobOutcome::Reported { .. } => &None,
                        _ => continue,
                    };
                    if !done_ids.contains(&c.job_id) {
                        continue;
                    }
                    if let Some(p) = payload {
                        sqlx::query("UPDATE inbound_event SET payload = $1 WHERE id = $2")
                            .bind(p.to_string())
                            .bind(c.event_id)
                            .execute(&mut *tx)
                            .await
                            .context("cannot store the fetched lead")?;
                    }
                    n_event.push(c.event_id);
                    n_step.push(c.step_index + 1);
                    n_at.push(ms(c.now));
                    if let Some(task) = &c.missing_task {
                        missing_task_in(tx, c, task).await?;
                    }
                }
                // The next step of each route becomes due now that its input exists.
                if !n_event.is_empty() {
                    sqlx::query(
                        "UPDATE delivery SET state = 'pending', pending_since = v.at, next_attempt_at = v.at
                           FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS v(event_id, step_index, at)
                          WHERE delivery.event_id = v.event_id AND delivery.step_index = v.step_index
                            AND delivery.state = 'waiting'",
                    )
                    .bind(&n_event)
                    .bind(&n_step)
                    .bind(&n_at)
                    .execute(&mut *tx)
                    .await
                    .context("cannot activate next steps")?;
                }
            }

            // Every attempt, in the batch's order.
            let mut a = AttemptColumns::default();
            for c in batch {
                let Some(at) = c.attempt.as_ref() else { continue };
                a.delivery_id.push(c.job_id);
                a.started_at.push(ms(at.started_at));
                a.duration_ms.push(at.duration_ms);
                a.http_status.push(at.http_status.map(i64::from));
                a.outcome.push(c.outcome.attempt_outcome());
                a.class.push(at.class.map(|c| c.as_str()));
                a.reason.push(at.reason.as_str());
                a.response_excerpt.push(at.response_excerpt.as_deref());
                a.trigger.push(c.trigger.as_str());
            }
            if !a.delivery_id.is_empty() {
                sqlx::query(
                    "INSERT INTO attempt (delivery_id, started_at, duration_ms, http_status, outcome, class, reason,
                                          response_excerpt, trigger)
                     SELECT delivery_id, started_at, duration_ms, http_status, outcome, class, reason, response_excerpt,
                            trigger
                       FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[],
                                   $7::text[], $8::text[], $9::text[])
                            WITH ORDINALITY AS v(delivery_id, started_at, duration_ms, http_status, outcome, class, reason,
                                                 response_excerpt, trigger, n)
                      ORDER BY n",
                )
                .bind(&a.delivery_id)
                .bind(&a.started_at)
                .bind(&a.duration_ms)
                .bind(&a.http_status)
                .bind(&a.outcome)
                .bind(&a.class)
                .bind(&a.reason)
                .bind(&a.response_excerpt)
                .bind(&a.trigger)
                .execute(&mut *tx)
                .await
                .context("cannot record attempts")?;
            }
            Ok(applied)
        }

        /// The attempts of a batch as one array per column.
        #[derive(Default)]
        struct AttemptColumns<'a> {
            delivery_id: Vec<i64>,
            started_at: Vec<i64>,
            duration_ms: Vec<i64>,
            http_status: Vec<Option<i64>>,
            outcome: Vec<&'static str>,
            class: Vec<Option<&'static str>>,
            reason: Vec<&'a str>,
            response_excerpt: Vec<Option<&'a str>>,
            trigger: Vec<&'a str>,
        }
    }
}
