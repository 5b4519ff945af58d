//! One request's attempt and the fate of each of its leads: the connector sends (one lead, or a batch), the
//! request is counted once by the breaker and the pacer, then each lead is decided — delivered, retried (when, and
//! whether it used an attempt), or dead-lettered — and a rate limit or a refused credential holds the target.

use chrono::{DateTime, Utc};

use super::target::TargetRuntime;
use super::team::report_transition;
use super::{HoldReason, WorkerEvent, WorkerHandle};
use crate::clock::Clock;
use crate::features::delivery::backoff::{decide_retry, RetryDecision, RetryInput};
use crate::features::delivery::breaker::Health;
use crate::features::delivery::missing_data::fields_to_drop;
use crate::features::delivery::pacing::Outcome;
use crate::features::targets::{AttemptReport, ContactBook, Exchange, LinkBook};
use crate::model::{ContactMessage, ContactStatus, ErrorClass, Job, Verdict};
use crate::store::{AttemptRecord, Completion, JobOutcome, MissingTask, Store};

/// Sends `jobs` in one request (one lead, or a batch for a batch-capable target) and decides each one's fate. The
/// breaker and the pacer count the request once, not once per lead. One completion per job, in order. Never
/// fails: every path ends in completions to write.
#[tracing::instrument(name = "deliver", skip_all, fields(target = target.name(), n = jobs.len(), delivery_id = jobs.first().map(|j| j.id)))]
pub(super) async fn run_request(
    store: &Store,
    handle: &WorkerHandle,
    target: &TargetRuntime,
    jobs: Vec<Job>,
) -> Vec<Completion> {
    let links = StoreLinks { store, target: target.name(), clock: &handle.clock };
    let contacts = StoreContacts { store, clock: &handle.clock };
    let watch = target.watch_request();
    let cx = Exchange { now: handle.clock.now(), answers: &watch, links: &links, contacts: &contacts };
    // A request held back (the target was held while it was prepared) was not sent: its leads go back to the queue
    // without using an attempt, and neither the breaker nor the pacer counts it.
    let reports: Vec<Option<AttemptReport>> =
        target.connector().deliver(&jobs, &cx).await.into_iter().map(|r| r.filter(|r| !r.held_back)).collect();
    let now = handle.clock.now();
    let batch = target.batch_capacity().is_some();
    // A report that sent nothing now (a first contact held by quiet hours, or waiting for its receipt) says
    // nothing about the target's health or pace.
    let sent = || reports.iter().flatten().filter(|r| r.not_before.is_none() && !r.run_fallback);
    let health = if batch { batch_health(sent()) } else { sent().next().map(|r| health_of(&r.verdict)) };
    // A 503 that says when to come back is the target declaring itself down (a maintenance window), unless the
    // same request delivered something.
    let unavailable = sent().any(|r| r.http_status == Some(503) && r.retry_after.is_some());
    let health = match health {
        Some(Health::Unhealthy) if unavailable => Some(Health::Unavailable),
        other => other,
    };
    if let (Some(health), Some(job)) = (health, jobs.first()) {
        let transition = target.breaker.lock().expect("breaker lock").record(health, now, &target.config().breaker);
        if let Some(t) = transition {
            report_transition(store, handle, &job.target, t).await;
        }
    }
    {
        let mut pacer = target.pacer.lock().expect("pacer lock");
        match pace_outcome(sent()) {
            Some(outcome) => pacer.record(now, outcome),
            // Nothing reached the target (the mapping refused every lead, or it was held back): the request after
            // a hold is still due — unless a hold came since this one was let through (that hold's own first request
            // may be out already).
            None if pacer.holds() == watch.holds() => pacer.probe_unused(),
            None => {}
        }
    }
    let mut out = Vec::with_capacity(jobs.len());
    for (job, report) in jobs.iter().zip(reports) {
        out.push(match report {
            Some(report) => decide(store, handle, target, job, report).await,
            None => release(job, handle.clock.now()),
        });
    }
    out
}

/// A job given back to the queue, due at `now`, without using an attempt.
pub(super) fn release(job: &Job, now: DateTime<Utc>) -> Completion {
    Completion::of(job, JobOutcome::Released { at: now }, None, now)
}

/// Performs one job and decides its fate (what a test drives directly).
pub async fn execute(store: &Store, handle: &WorkerHandle, target: &TargetRuntime, job: Job) -> Completion {
    run_request(store, handle, target, vec![job]).await.pop().expect("one completion per job")
}

/// Performs several jobs in one request and decides each one's fate.
pub async fn execute_batch(
    store: &Store,
    handle: &WorkerHandle,
    target: &TargetRuntime,
    jobs: Vec<Job>,
) -> Vec<Completion> {
    run_request(store, handle, target, jobs).await
}

/// What one request told the pacer about the target's capacity: a success, a refusal for load (timed, or naming
/// nothing: the pace is then learned), or nothing about capacity. `None` when nothing reached the target.
fn pace_outcome<'a>(reports: impl Iterator<Item = &'a AttemptReport>) -> Option<Outcome> {
    let mut outcome = None;
    for r in reports {
        let rate_limited = matches!(&r.verdict, Verdict::Failed(f) if f.class == ErrorClass::RateLimited);
        if rate_limited && !r.quota_wait && (r.slow_down || r.http_status == Some(429)) {
            return Some(match r.retry_after {
                None if r.slow_down => Outcome::TooMany,
                retry_after => Outcome::RateLimited { retry_after },
            });
        }
        let this = match r.http_status {
            Some(status) if (200..300).contains(&status) => Outcome::Success,
            Some(_) => Outcome::Other,
            // No answer, or no connection: the target was tried.
            None if matches!(&r.verdict, Verdict::Failed(f) if matches!(f.class, ErrorClass::Transient | ErrorClass::Ambiguous)) => {
                Outcome::Other
            }
            // Nothing was sent for this lead (its data, a link found locally).
            None => continue,
        };
        if outcome != Some(Outcome::Success) {
            outcome = Some(this);
        }
    }
    outcome
}

/// The worker's side of a connector's [`ContactBook`]: the store's `contact_message` and `contact_opt_out`.
struct StoreContacts<'a> {
    store: &'a Store,
    clock: &'a Clock,
}

#[async_trait::async_trait]
impl ContactBook for StoreContacts<'_> {
    async fn message(&self, step_key: &str) -> anyhow::Result<Option<ContactMessage>> {
        self.store.contact_message(step_key).await
    }
    async fn sending(&self, message: &ContactMessage) -> anyhow::Result<()> {
        self.store.contact_sending(message, self.clock.now()).await
    }
    async fn answered(
        &self,
        step_key: &str,
        status: ContactStatus,
        provider_id: Option<&str>,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        self.store.contact_answered(step_key, status, provider_id, error_code, at).await
    }
    async fn opted_out(&self, recipient: &str) -> anyhow::Result<bool> {
        self.store.opted_out(recipient).await
    }
    async fn opt_out(&self, recipient: &str, reason: &str, at: DateTime<Utc>) -> anyhow::Result<()> {
        self.store.opt_out(recipient, reason, at).await
    }
}

/// The worker's side of a connector's [`LinkBook`]: the store's `crm_link` table of this target.
struct StoreLinks<'a> {
    store: &'a Store,
    target: &'a str,
    clock: &'a Clock,
}

#[async_trait::async_trait]
impl LinkBook for StoreLinks<'_> {
    async fn linked(&self, external_id: &str) -> anyhow::Result<Option<String>> {
        self.store.crm_link(self.target, external_id).await
    }

    async fn remember(&self, external_id: &str, crm_id: &str) -> anyhow::Result<String> {
        self.store.link(self.target, external_id, crm_id, self.clock.now()).await
    }
}

fn health_of(verdict: &Verdict) -> Health {
    match verdict {
        Verdict::Delivered => Health::Healthy,
        Verdict::Failed(f) => match f.class {
            ErrorClass::Transient | ErrorClass::Ambiguous => Health::Unhealthy,
            ErrorClass::RateLimited | ErrorClass::PermanentData => Health::Healthy,
            ErrorClass::PermanentConfig => Health::Neutral,
        },
    }
}

/// How a batch request went, for the breaker: healthy when it delivered anything, else unhealthy when any lead
/// failed for a transient reason, else by the rest. `None` when nothing was sent (the mapping refused every lead).
fn batch_health<'a>(reports: impl Iterator<Item = &'a AttemptReport>) -> Option<Health> {
    let (mut healthy, mut unhealthy, mut neutral) = (false, false, false);
    for r in reports {
        let never_sent = r.http_status.is_none() && matches!(&r.verdict, Verdict::Failed(f) if f.class.is_permanent());
        if never_sent {
            continue;
        }
        if r.verdict == Verdict::Delivered {
            return Some(Health::Healthy);
        }
        match health_of(&r.verdict) {
            Health::Healthy => healthy = true,
            Health::Unhealthy | Health::Unavailable => unhealthy = true,
            Health::Neutral => neutral = true,
        }
    }
    match (unhealthy, healthy, neutral) {
        (true, _, _) => Some(Health::Unhealthy),
        (_, true, _) => Some(Health::Healthy),
        (_, _, true) => Some(Health::Neutral),
        _ => None,
    }
}

/// Decides the fate of `job` after its attempt: delivered, retried (when, and whether it used an attempt), or
/// dead-lettered; holds the target for a rate limit or a refused credential. `record_health`: count the attempt
/// in the breaker (a batch counts its request once, in [`run_request`]).
pub(super) async fn decide(
    store: &Store,
    handle: &WorkerHandle,
    target: &TargetRuntime,
    job: &Job,
    report: AttemptReport,
) -> Completion {
    let now = handle.clock.now();
    if let (true, Some(to)) = (report.run_fallback, target.config().fallback.clone()) {
        let reason = report.note.clone().unwrap_or_else(|| format!("too old for this step: running {to}"));
        return Completion::of(
            job,
            JobOutcome::Diverted { to },
            Some(AttemptRecord {
                started_at: report.started_at,
                duration_ms: report.duration_ms,
                http_status: None,
                class: None,
                reason,
                response_excerpt: None,
            }),
            now,
        );
    }
    if let Some(at) = report.not_before {
        // Nothing was sent now and nothing failed (quiet hours; a first contact in doubt waiting for its receipt):
        // due again at `at`, without using an attempt; the attempt row tells the story ("scheduled", "in doubt").
        let class = match &report.verdict {
            Verdict::Failed(f) => Some(f.class),
            Verdict::Delivered => None,
        };
        let reason = report.note.clone().unwrap_or_else(|| "not sent now".into());
        return Completion::of(
            job,
            JobOutcome::Retry { at, counts: false, in_doubt: report.in_doubt },
            Some(AttemptRecord {
                started_at: report.started_at,
                duration_ms: report.duration_ms,
                http_status: report.http_status,
                class,
                reason,
                response_excerpt: report.excerpt,
            }),
            now,
        );
    }
    // What holds the target for the team (team mode): a Retry-After, or rate-limit headers saying the budget is
    // used up.
    // (The pacer learnt from the answer's headers when they arrived: `RequestWatch`.)
    let mut team_hold = target.pacer.lock().expect("pacer lock").held_until(now);
    if let (Some(until), Verdict::Failed(f)) = (report.retry_after, &report.verdict) {
        if f.class == ErrorClass::RateLimited {
            target.hold_until(until, HoldReason::RateLimited);
            team_hold = team_hold.max(Some(until));
        }
    }
    if let Some(until) = team_hold.filter(|u| handle.team && target.hold_to_tell(*u)) {
        if let Err(e) = store.share_hold(&job.target, until, None).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot tell the team about the hold");
        }
    }
    if let (Some(_), Verdict::Failed(f)) = (&report.credential_refused, &report.verdict) {
        if target.sent_with_replaced_credentials(report.started_at) {
            // The refusal answers the credential a reload of secrets replaced while the request was on its way:
            // no hold, no alert — the lead goes again at once, with what was read.
            let reason = format!("{} — sent before the secrets were read again; sent again with them", f.reason);
            return due_without_an_attempt(job, report, reason, now);
        }
    }
    if let (Some(credential), Verdict::Failed(f)) = (&report.credential_refused, &report.verdict) {
        // An expired credential: a person renews it (and reloads the secrets).
        let first = target.refused_credential.lock().expect("credential lock").replace(credential.clone()).is_none();
        if first {
            tracing::warn!(target = %job.target, credential = %credential, "credential refused: holding the target");
        }
        let _ = handle.events.send(WorkerEvent::CredentialRefused {
            target: job.target.clone(),
            credential: credential.clone(),
            reason: f.reason.clone(),
        });
        let hold = HoldReason::Credentials { credential: credential.clone() };
        let reason = format!("{} — the lead waits until the credential works again", f.reason);
        return hold_for_a_person(store, handle, target, job, report, hold, reason, now).await;
    }
    if let (Some(why), Verdict::Failed(_)) = (&report.setup_refused, &report.verdict) {
        // The step's own setup was refused (a first contact's template, its region): a person fixes it, and its
        // leads go on by themselves once a probe passes.
        let first = target.refused_setup.lock().expect("setup lock").replace(why.clone()).is_none();
        if first {
            tracing::warn!(target = %job.target, reason = %why, "setup refused: holding the target");
        }
        let _ = handle.events.send(WorkerEvent::SetupRefused { target: job.target.clone(), reason: why.clone() });
        let hold = HoldReason::Setup { reason: why.clone() };
        let reason = format!("{} — the lead waits until the step's setup is fixed", why.trim_end_matches('.'));
        return hold_for_a_person(store, handle, target, job, report, hold, reason, now).await;
    }
    if report.verdict == Verdict::Delivered && target.refused_setup.lock().expect("setup lock").take().is_some() {
        let _ = handle.events.send(WorkerEvent::SetupAccepted { target: job.target.clone() });
    }
    if report.verdict == Verdict::Delivered {
        if let Some(credential) = target.refused_credential.lock().expect("credential lock").take() {
            let _ = handle.events.send(WorkerEvent::CredentialAccepted { target: job.target.clone(), credential });
        }
    }
    if let (true, Some(until), Verdict::Failed(f)) = (report.quota_wait, report.retry_after, &report.verdict) {
        // A used-up quota (HubSpot's daily limit) is not the lead's failure: it waits for the reset, the target
        // is held until then (above), and neither an attempt nor the time budget is used.
        return Completion::of(
            job,
            JobOutcome::Retry { at: until, counts: false, in_doubt: job.in_doubt },
            Some(AttemptRecord {
                started_at: report.started_at,
                duration_ms: report.duration_ms,
                http_status: report.http_status,
                class: Some(f.class),
                reason: f.reason.clone(),
                response_excerpt: report.excerpt,
            }),
            now,
        );
    }

    let (outcome, class, reason) = match &report.verdict {
        Verdict::Delivered => {
            let mut result = serde_json::Map::new();
            if let Some(id) = &report.crm_id {
                result.insert("crm_id".into(), id.clone().into());
            }
            if let Some(status) = report.http_status {
                result.insert("status".into(), status.into());
            }
            if let Some(note) = &report.note {
                result.insert("note".into(), note.clone().into());
            }
            if !job.dropped.is_empty() {
                // What a follow-up step maps (`/$previous_steps/<target>/without`).
                result.insert("without".into(), job.dropped.clone().into());
            }
            if let Some(why) = &report.reported {
                // Nothing was sent and nothing will be: the step ends in its own final state, `reported` — not
                // delivered, not a dead letter, never tried again. The words are what the lead's story shows.
                result.insert("reported".into(), why.clone().into());
                return Completion::of(
                    job,
                    JobOutcome::Reported { result: result.into() },
                    Some(AttemptRecord {
                        started_at: report.started_at,
                        duration_ms: report.duration_ms,
                        http_status: report.http_status,
                        class: None,
                        reason: why.clone(),
                        response_excerpt: report.excerpt,
                    }),
                    now,
                );
            }
            let reason = report.note.clone().unwrap_or_else(|| match report.http_status {
                Some(s) => format!("delivered (HTTP {s})"),
                None => "delivered".into(),
            });
            let _ = handle.events.send(WorkerEvent::Delivered { target: job.target.clone(), delivery_id: job.id });
            (
                JobOutcome::Delivered {
                    result: result.into(),
                    link: report.link.clone(),
                    payload: report.payload.clone(),
                },
                None,
                reason,
            )
        }
        Verdict::Failed(failure) => {
            let missing_data = target.config().missing_data.as_ref();
            let upsert_key = target.config().upsert_key_field();
            if let Some(dropped) = fields_to_drop(missing_data, upsert_key, &job.dropped, failure) {
                // Refused only for a field the target may go without: the lead goes again at once without it
                // (tagged, under a key of its own), no attempt used, instead of dying.
                let field = dropped.last().cloned().unwrap_or_default();
                tracing::info!(delivery_id = job.id, field = %field, "sent again without a refused field");
                return Completion::of(
                    job,
                    JobOutcome::WithoutFields {
                        at: now,
                        dropped: dropped.clone(),
                        field: field.clone(),
                        reason: failure.reason.clone(),
                    },
                    Some(AttemptRecord {
                        started_at: report.started_at,
                        duration_ms: report.duration_ms,
                        http_status: report.http_status,
                        class: Some(failure.class),
                        reason: format!(
                            "{} — sent again at once without {} (missing data)",
                            failure.reason,
                            dropped.join(", ")
                        ),
                        response_excerpt: report.excerpt,
                    }),
                    now,
                );
            }
            let decision = decide_retry(
                &RetryInput {
                    failure,
                    attempts_before: job.attempts,
                    pending_since: job.pending_since,
                    retry_after: report.retry_after,
                    now,
                },
                &target.config().backoff,
                &mut rand::rng(),
            );
            match decision {
                RetryDecision::Retry { at, counts } => (
                    JobOutcome::Retry { at, counts, in_doubt: report.in_doubt },
                    Some(failure.class),
                    failure.reason.clone(),
                ),
                RetryDecision::Dead { .. }
                    if failure.class == ErrorClass::PermanentData && target.config().on_failure.is_some() =>
                {
                    // Another way to reach the lead (`on_failure`: SMS when the number is not on WhatsApp): the
                    // step runs that target now, with fresh attempts, instead of becoming a dead letter.
                    let to = target.config().on_failure.clone().unwrap_or_default();
                    tracing::info!(delivery_id = job.id, target = %job.target, on_failure = %to, "step failed for the lead: trying its on_failure target");
                    (
                        JobOutcome::Diverted { to: to.clone() },
                        Some(failure.class),
                        format!("{}: trying {to} instead", failure.reason),
                    )
                }
                RetryDecision::Dead { why } => {
                    let reason = if failure.class.is_permanent() || failure.class == ErrorClass::Ambiguous {
                        failure.reason.clone()
                    } else {
                        format!("{why}; last error: {}", failure.reason)
                    };
                    tracing::warn!(
                        delivery_id = job.id,
                        class = %failure.class,
                        reason = %crate::model::privacy::mask_text(&reason),
                        "dead-lettered"
                    );
                    let _ = handle.events.send(WorkerEvent::DeadLettered {
                        target: job.target.clone(),
                        delivery_id: job.id,
                        class: failure.class,
                        reason: reason.clone(),
                    });
                    (
                        JobOutcome::Dead {
                            class: failure.class,
                            http_status: report.http_status,
                            reason: reason.clone(),
                            field: failure.field.clone(),
                        },
                        Some(failure.class),
                        reason,
                    )
                }
            }
        }
    };
    let delivered = matches!(outcome, JobOutcome::Delivered { .. });
    let mut completion = Completion::of(
        job,
        outcome,
        Some(AttemptRecord {
            started_at: report.started_at,
            duration_ms: report.duration_ms,
            http_status: report.http_status,
            class,
            reason,
            response_excerpt: report.excerpt,
        }),
        now,
    );
    if delivered && !job.dropped.is_empty() {
        completion.missing_task = Some(match target.config().missing_data.as_ref().and_then(|m| m.task.clone()) {
            Some(step) => MissingTask::FollowUp(step),
            None => MissingTask::Person,
        });
    }
    completion
}

/// A refusal only a person can end — a credential or the step's setup: every lead would fail the same way, so the
/// target holds (one probe per breaker cooldown), the team hears of it, and the lead waits without using an
/// attempt instead of dying. The lead is stored due at once: the hold (in this process, and shared with the team)
/// is what keeps it waiting. Were it stored for the probe time, a reload of secrets that came while this
/// completion was on its way to the database (after the hold, before the write) would end the hold and make the
/// waiting leads due, and this one would then be written to wait out the whole cooldown anyway; a restart after
/// the fix lets it go at once too.
#[allow(clippy::too_many_arguments)]
async fn hold_for_a_person(
    store: &Store,
    handle: &WorkerHandle,
    target: &TargetRuntime,
    job: &Job,
    report: AttemptReport,
    hold: HoldReason,
    reason: String,
    now: DateTime<Utc>,
) -> Completion {
    let probe_at = now + chrono::Duration::milliseconds(target.config().breaker.cooldown_ms as i64);
    let credential = match &hold {
        HoldReason::Credentials { credential } => Some(credential.clone()),
        _ => None,
    };
    target.hold_until(probe_at, hold);
    if handle.team && target.hold_to_tell(probe_at) {
        if let Err(e) = store.share_hold(&job.target, probe_at, credential.as_deref()).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot tell the team about the hold");
        }
    }
    due_without_an_attempt(job, report, reason, now)
}

/// The lead goes again as soon as its target lets it, without using an attempt: its request was refused for a
/// setting of the target (`permanent_config`), not for the lead.
fn due_without_an_attempt(job: &Job, report: AttemptReport, reason: String, now: DateTime<Utc>) -> Completion {
    Completion::of(
        job,
        JobOutcome::Retry { at: now, counts: false, in_doubt: job.in_doubt },
        Some(AttemptRecord {
            started_at: report.started_at,
            duration_ms: report.duration_ms,
            http_status: report.http_status,
            class: Some(ErrorClass::PermanentConfig),
            reason,
            response_excerpt: report.excerpt,
        }),
        now,
    )
}
