//! The dispatcher: one pass over the targets claims what each may take now (its free connections, what its
//! breaker admits, the slots its pacer grants) and starts one task per request. Each request is checked again just
//! before it is sent ([`SendTerms`]): claimed ahead of a 429, a breaker opening or a pause, it goes back to the queue
//! unsent.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::attempt::{release, run_request};
use super::target::{SendTerms, TargetRuntime};
use super::team::report_transition;
use super::writer::{claim, Claim};
use super::WorkerHandle;
use crate::clock::Clock;
use crate::config::{TargetConfig, WorkerConfig};
use crate::features::delivery::breaker::Admission;
use crate::features::delivery::pacing::Admit;
use crate::model::Job;
use crate::store::{ClaimRequest, Completion, JobOutcome, Store};

/// One pass over all targets: claim what each may take now and start it. Returns how many jobs were claimed;
/// `next_wake` learns the earliest moment a held or paced target may send again.
#[allow(clippy::too_many_arguments)]
pub(super) async fn dispatch_once(
    store: &Store,
    cfg: &WorkerConfig,
    owner: &str,
    handle: &WorkerHandle,
    claim_tx: &mpsc::Sender<Claim>,
    done_tx: &mpsc::Sender<Completion>,
    in_flight: &mut JoinSet<()>,
    running: &Arc<Mutex<BTreeMap<i64, Completion>>>,
    next_wake: &mut Option<DateTime<Utc>>,
) -> usize {
    let mut claimed_total = 0;
    for (name, target) in handle.targets.current().iter() {
        // Requests claimed and not finished (sending, or waiting for their slot or a connection).
        let busy = target.outstanding.load(Ordering::SeqCst);
        let now = handle.clock.now();
        let (paced, free) = {
            let pacer = target.pacer.lock().expect("pacer lock");
            let paced = pacer.effective_rate().is_some();
            // Up to two rounds of requests more than there are connections (a paced target: one round, waiting
            // for its slots): a request waiting for a connection is sent the moment one frees, instead of after
            // the next claim's commit. Each is checked again just before it is sent (`SendTerms`): claimed ahead
            // of a 429, a breaker opening or a pause, it goes back to the queue unsent. A target whose 429s cut
            // its connections gets no round ahead until they are all back: a held-back round would go out as one
            // burst the moment its hold ends.
            let allowed = if paced {
                2 * target.config().concurrency
            } else if pacer.concurrency() < target.config().concurrency {
                pacer.concurrency()
            } else {
                ROUNDS_AHEAD * pacer.concurrency()
            };
            (paced, allowed.saturating_sub(busy))
        };
        if target.is_paused() || free == 0 {
            continue;
        }
        // A paced target's slots are reserved ahead in chunks: the next chunk once half of the reserved time
        // has passed, so leads are claimed several to a commit even at a slow pace.
        if paced {
            let cursor = *target.pace_cursor.lock().expect("pace cursor lock");
            if let Some(c) = cursor.filter(|c| *c > now + PACE_HORIZON / 2) {
                let refill = c - PACE_HORIZON / 2;
                *next_wake = Some(next_wake.map_or(refill, |w| w.min(refill)));
                continue;
            }
        }
        if let Some(hold) = target.hold(now) {
            *next_wake = Some(next_wake.map_or(hold.until, |w| w.min(hold.until)));
            continue;
        }
        let per_request = target.batch_capacity().map(|c| c.min(cfg.batch_size as usize).max(1));
        let (admission, transition) = target.breaker.lock().expect("breaker lock").admit(now, &target.config().breaker);
        if let Some(t) = transition {
            if !report_transition(store, handle, name, t).await {
                // Another process of the team moved the breaker first (it carries the probe): its state is taken.
                continue;
            }
        }
        // What these requests are claimed under, read now (not after the claim's commit, when a breaker that opened
        // meanwhile would pass for the claim's own state).
        let terms = target.send_terms();
        let wanted = match admission {
            Admission::Deny => continue,
            Admission::Probe => 1,
            // A refused credential is probed with one lead at a time until a request with it works again.
            Admission::Allow if target.refused_credential().is_some() => 1,
            // A paced target takes what its reserved slots allow (its requests then wait for a free connection).
            Admission::Allow if paced => free.min(cfg.batch_size).saturating_mul(per_request.unwrap_or(1) as u32),
            // A batch-capable target takes up to one full request per free slot.
            Admission::Allow => match per_request {
                Some(n) => free.saturating_mul(n as u32),
                None => free.min(cfg.batch_size),
            },
        };
        // Each request takes a slot of the target's budget first: no window carries more than it allows. A batch
        // request is one request, whatever the number of leads it carries. Slots are reserved up to PACE_HORIZON
        // ahead, each at its own time, so a paced target is claimed in batches (one commit for several leads)
        // and each request waits for its slot; without a declared or learned rate every slot is "now".
        let per = per_request.unwrap_or(1) as u32;
        let requests_wanted = wanted.div_ceil(per);
        let mut slots: Vec<DateTime<Utc>> = Vec::new();
        // Team mode: a paced target's budget is the team's. Slots are reserved from it in the store (each process
        // in turn, `spacing` apart), then this process's own pacer admits each (its holds, what it learned).
        let team_spacing = if handle.team && paced {
            target.pacer.lock().expect("pacer lock").effective_rate().map(crate::features::delivery::pacing::spacing)
        } else {
            None
        };
        let team_grant = match team_spacing {
            Some(gap) => match store.reserve_pace(name, now, requests_wanted, gap, now + PACE_HORIZON).await {
                Ok(grant) => {
                    if grant.slots.is_empty() {
                        let at = (grant.next_free - PACE_HORIZON / 2).max(now + chrono::Duration::milliseconds(1));
                        *next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
                    }
                    Some(grant.slots)
                }
                Err(e) => {
                    tracing::error!(target = %name, error = %format!("{e:#}"), "cannot reserve from the team's budget");
                    Some(Vec::new())
                }
            },
            None => None,
        };
        if let Some(reserved) = team_grant {
            let mut pacer = target.pacer.lock().expect("pacer lock");
            let mut cursor = target.pace_cursor.lock().expect("pace cursor lock");
            for at in reserved {
                match pacer.admit(at) {
                    Admit::Go => {
                        slots.push(at);
                        *cursor = Some(at);
                    }
                    Admit::WaitUntil(next) => {
                        *next_wake = Some(next_wake.map_or(next, |w| w.min(next)));
                        break;
                    }
                }
            }
        } else {
            let mut pacer = target.pacer.lock().expect("pacer lock");
            let mut cursor = target.pace_cursor.lock().expect("pace cursor lock");
            let horizon = now + PACE_HORIZON;
            let mut at = cursor.map_or(now, |c| c.max(now));
            while (slots.len() as u32) < requests_wanted && at <= horizon {
                match pacer.admit(at) {
                    Admit::Go => {
                        slots.push(at);
                        *cursor = Some(at);
                    }
                    Admit::WaitUntil(next) if next > at && next <= horizon => at = next,
                    Admit::WaitUntil(next) => {
                        *next_wake = Some(next_wake.map_or(next, |w| w.min(next)));
                        break;
                    }
                }
            }
        }
        let requests = slots.len() as u32;
        let limit = (requests * per).min(wanted);
        if limit == 0 {
            if admission == Admission::Probe {
                target.breaker.lock().expect("breaker lock").probe_unused();
            }
            continue;
        }
        let lease_until = now + chrono::Duration::seconds(cfg.lease_seconds as i64);
        let request = ClaimRequest { target: name.clone(), limit, owner: owner.to_string(), now, lease_until };
        let jobs = match claim(claim_tx, request).await {
            Ok(jobs) => jobs,
            Err(e) => {
                tracing::error!(target = %name, error = %format!("{e:#}"), "claim failed");
                if admission == Admission::Probe {
                    target.breaker.lock().expect("breaker lock").probe_unused();
                }
                continue;
            }
        };
        if jobs.is_empty() && admission == Admission::Probe {
            target.breaker.lock().expect("breaker lock").probe_unused();
        }
        if jobs.is_empty() {
            // Nothing was due after all: a slot let through as the first request after a hold was not used.
            target.pacer.lock().expect("pacer lock").probe_unused();
        }
        claimed_total += jobs.len();
        // One task per request: a batch of up to `per_request` leads for a batch connector, else one lead.
        let mut slots = slots.into_iter();
        let mut jobs = jobs;
        while !jobs.is_empty() {
            let send_at = slots.next().unwrap_or(now);
            let rest = jobs.split_off(jobs.len().min(per_request.unwrap_or(1)));
            let chunk = std::mem::replace(&mut jobs, rest);
            {
                let mut running = running.lock().expect("running lock");
                for job in &chunk {
                    running.insert(job.id, release(job, now));
                }
            }
            let store = store.clone();
            let handle = handle.clone();
            let target = target.clone();
            let done_tx = done_tx.clone();
            let running = running.clone();
            let probe = admission == Admission::Probe;
            target.outstanding.fetch_add(1, Ordering::SeqCst);
            in_flight.spawn(async move {
                let _outstanding = Outstanding(&target.outstanding);
                // A lead too old for a time-sensitive step runs its fallback instead: decided before anything is
                // sent, so it takes no slot of this target.
                let (chunk, mut completions) = divert_too_old(chunk, target.config(), handle.clock.now());
                let mut permit = None;
                if chunk.is_empty() {
                    // The breaker's probe (or the first request after a hold) went to the fallback: the next claim
                    // probes again.
                    not_sent(&target, probe, terms);
                }
                if !chunk.is_empty() {
                    let (p, unsent) = wait_for_slot(&target, send_at, terms, &handle.clock).await;
                    permit = Some(p);
                    if unsent.is_some() {
                        not_sent(&target, probe, terms);
                    }
                    completions.extend(match unsent {
                        Some(until) => chunk.iter().map(|job| release(job, until)).collect(),
                        None => {
                            let done = run_request(&store, &handle, &target, chunk).await;
                            if done.iter().all(|c| matches!(c.outcome, JobOutcome::Released { .. })) {
                                // Nothing reached the target (held back by a hold that came while the request was
                                // prepared): the breaker's probe, or the first request after the hold, is another's.
                                not_sent(&target, probe, terms);
                            }
                            done
                        }
                    });
                }
                for completion in completions {
                    running.lock().expect("running lock").remove(&completion.job_id);
                    let _ = done_tx.send(completion).await;
                }
                drop(permit);
            });
        }
    }
    claimed_total
}

/// Counts a request as outstanding for as long as its task lives (also when it is aborted at shutdown).
struct Outstanding<'a>(&'a AtomicU32);

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many rounds of an unpaced target's connections are claimed at most: one sending, two waiting. In the
/// engine benchmark (one drain each, small / large history) 1 gave 8,540 / 7,939 deliveries/s, 2 gave 10,283 /
/// 9,668 and 3 gave 10,916 / 9,568; more only holds leads longer before they are sent.
const ROUNDS_AHEAD: u32 = 3;

/// How far ahead a paced target's request slots are reserved (and its leads claimed) in one dispatch pass.
const PACE_HORIZON: chrono::Duration = chrono::Duration::milliseconds(500);

/// Waits until a request's reserved slot, then for one of the target's connections (its concurrency). If what the
/// request was claimed under no longer holds ([`SendTerms::still_hold`]: a hold after a 429 or a refused
/// credential, a breaker that moved, a pause, a learned rate), the request is not sent: the second value says
/// when its jobs may be tried again (they go back to the queue without using an attempt).
async fn wait_for_slot(
    target: &TargetRuntime,
    send_at: DateTime<Utc>,
    claimed: SendTerms,
    clock: &Clock,
) -> (Option<tokio::sync::OwnedSemaphorePermit>, Option<DateTime<Utc>>) {
    let wait = (send_at - clock.now()).to_std().unwrap_or_default();
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    // The semaphore is never closed; should it be, the request goes ahead without a permit rather than be lost.
    let permit = target.slots.clone().acquire_owned().await.ok();
    let now = clock.now();
    let unsent = match target.hold(now).map(|h| h.until) {
        Some(until) => Some(until),
        None if !claimed.still_hold(target.send_terms()) => Some(now),
        None => None,
    };
    (permit, unsent)
}

/// A request claimed under `terms` was not sent: the breaker's probe (`probe`), or the one request the pacer let
/// through after a hold (claimed after the latest hold), is to be made by another.
fn not_sent(target: &TargetRuntime, probe: bool, terms: SendTerms) {
    if probe {
        target.breaker.lock().expect("breaker lock").probe_unused();
    }
    let mut pacer = target.pacer.lock().expect("pacer lock");
    if pacer.holds() == terms.holds {
        pacer.probe_unused();
    }
}

/// Splits claimed jobs into those to send and the completions of those too old for this time-sensitive step
/// (see [`crate::features::delivery::fallback`]), which run the fallback instead.
fn divert_too_old(jobs: Vec<Job>, config: &TargetConfig, now: DateTime<Utc>) -> (Vec<Job>, Vec<Completion>) {
    // A first contact decides by itself: quiet hours that held a lead do not age it (`targets::contact`).
    if config.max_lead_age().is_none() || config.fallback.is_none() || config.kind().is_first_contact() {
        return (jobs, Vec::new());
    }
    let mut send = Vec::with_capacity(jobs.len());
    let mut diverted = Vec::new();
    for job in jobs {
        let born = crate::features::delivery::fallback::lead_time(job.received_at, &job.payload);
        match crate::features::delivery::fallback::fallback_for(config, born, now) {
            Some(to) => {
                tracing::info!(
                    delivery_id = job.id,
                    target = %job.target,
                    fallback = to,
                    age_minutes = (now - born).num_minutes(),
                    "lead too old for a time-sensitive step: running its fallback"
                );
                diverted
                    .push(Completion { outcome: JobOutcome::Diverted { to: to.to_string() }, ..release(&job, now) });
            }
            None => send.push(job),
        }
    }
    (send, diverted)
}
