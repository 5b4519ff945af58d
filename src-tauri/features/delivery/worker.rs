//! The delivery worker.
//!
//! A dispatcher claims due jobs per target (as many as the target's free concurrency slots, and only what its
//! circuit breaker admits), runs each as a task, and hands the finished job to the writer, which writes
//! completions and the dispatcher's claims together in shared transactions (one disk sync for the group). A
//! rescuer returns jobs whose lease expired. On shutdown the dispatcher stops claiming, in-flight jobs get
//! `shutdown_grace_seconds` to finish, and the rest are released back to `pending` without using an attempt.
//!
//! `execute` (one job → one `Completion`) holds all decisions and is what tests exercise directly.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, oneshot, watch, Notify, Semaphore};
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::config::TargetKind;
use crate::config::{Config, Strategy, TargetConfig, WorkerConfig};
use crate::features::delivery::backoff::{decide_retry, RetryDecision, RetryInput};
use crate::features::delivery::breaker::{Admission, Breaker, BreakerState, Health, TeamBreaker, Transition};
use crate::features::delivery::classify::Failure;
use crate::features::delivery::classify::{ErrorClass, Verdict};
use crate::features::delivery::pacing::{Admit, Pacer};
use crate::features::targets::hubspot::HubspotTarget;
use crate::features::targets::meta_lead::MetaLeadStep;
use crate::features::targets::pipedrive::PipedriveTarget;
use crate::features::targets::salesforce::SalesforceTarget;
use crate::features::targets::{AttemptReport, ConnectionCheck, HttpTarget, RequestPreview};
use crate::store::{AttemptRecord, ClaimRequest, Completion, Job, JobOutcome, Signal, Store, TargetControl};

/// Something the rest of the app may want to react to (notifications, live UI).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkerEvent {
    Delivered {
        target: String,
        delivery_id: i64,
    },
    DeadLettered {
        target: String,
        delivery_id: i64,
        class: ErrorClass,
        reason: String,
    },
    Breaker {
        target: String,
        from: BreakerState,
        to: BreakerState,
        reason: String,
        at: DateTime<Utc>,
    },
    /// The target refused a credential (the environment variable naming it): its leads wait, a person must
    /// renew it.
    CredentialRefused {
        target: String,
        credential: String,
        reason: String,
    },
    /// A request with a credential that had been refused succeeded again.
    CredentialAccepted {
        target: String,
        credential: String,
    },
}

/// How a target is spoken to.
pub enum Connector {
    Http(HttpTarget),
    MetaLead(MetaLeadStep),
    Pipedrive(PipedriveTarget),
    Salesforce(Box<SalesforceTarget>),
    /// HubSpot's batch upsert: several leads in one request.
    Hubspot(HubspotTarget),
}

impl Connector {
    /// Builds the connector of target `name`, reading its credentials now; it reads the time on `clock`.
    pub fn new(name: &str, config: &TargetConfig, all: &Config, clock: Clock) -> anyhow::Result<Connector> {
        Ok(match config.kind {
            TargetKind::Http => Connector::Http(HttpTarget::new(name, config, all, clock)?),
            TargetKind::MetaLead => Connector::MetaLead(MetaLeadStep::new(name, config, all, clock)?),
            TargetKind::Pipedrive => Connector::Pipedrive(PipedriveTarget::new(name, config, all, clock)?),
            TargetKind::Salesforce => Connector::Salesforce(Box::new(SalesforceTarget::new(name, config, all, clock)?)),
            TargetKind::Hubspot => Connector::Hubspot(HubspotTarget::new(name, config, all, clock)?),
        })
    }
}

/// Why nothing is sent to a target for a while, whatever lead is due.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HoldReason {
    /// The target (or Graph) said when to come back (`Retry-After`, usage headers).
    RateLimited,
    /// The target refused the credential in this environment variable; one probe is let through at `until`.
    Credentials { credential: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct Hold {
    pub until: DateTime<Utc>,
    pub reason: HoldReason,
}

/// A target as the worker sees it: how to reach it, its breaker, its concurrency slots.
pub struct TargetRuntime {
    name: String,
    /// How to reach it, with the credentials read at start or at the last reload of secrets.
    connector: RwLock<Arc<Connector>>,
    /// The clock its connector reads the time on (kept for rebuilding it at a reload of secrets).
    clock: Clock,
    config: TargetConfig,
    breaker: Mutex<Breaker>,
    slots: Arc<Semaphore>,
    /// An operator paused this target: nothing is claimed for it until resumed.
    paused: AtomicBool,
    /// Nothing is claimed for this target before the hold's time: every worker task respects it, so a target
    /// that said "come back at 10:42" gets no request before 10:42 from any lead.
    hold: Mutex<Option<Hold>>,
    /// The credential this target last refused, until a request with it succeeds again.
    refused_credential: Mutex<Option<String>>,
    /// When the credentials were last read again (a reload of secrets): a refusal of a request sent before then
    /// answered the credential that was replaced, and holds nothing.
    credentials_read_at: Mutex<Option<DateTime<Utc>>>,
    /// The target's request budget: the declared rate, what its headers say, and how many requests may be in
    /// flight (lowered on 429s).
    pacer: Mutex<Pacer>,
    /// The latest request slot reserved from the pacer (slots are reserved in time order, up to
    /// `PACE_HORIZON` ahead).
    pace_cursor: Mutex<Option<DateTime<Utc>>>,
    /// Requests claimed and not finished: sending, or waiting for their slot or a connection.
    outstanding: AtomicU32,
    /// Team mode: the latest hold this process told the team about (a later one is told again).
    told_hold: Mutex<Option<DateTime<Utc>>>,
}

impl TargetRuntime {
    pub fn new(name: &str, config: &TargetConfig, all: &Config, clock: Clock) -> anyhow::Result<TargetRuntime> {
        Ok(TargetRuntime {
            name: name.to_string(),
            connector: RwLock::new(Arc::new(Connector::new(name, config, all, clock.clone())?)),
            clock,
            config: config.clone(),
            breaker: Mutex::new(Breaker::default()),
            slots: Arc::new(Semaphore::new(config.concurrency as usize)),
            paused: AtomicBool::new(false),
            hold: Mutex::new(None),
            refused_credential: Mutex::new(None),
            credentials_read_at: Mutex::new(None),
            pacer: Mutex::new(Pacer::new(config.rate, config.concurrency)),
            pace_cursor: Mutex::new(None),
            outstanding: AtomicU32::new(0),
            told_hold: Mutex::new(None),
        })
    }

    pub fn config(&self) -> &TargetConfig {
        &self.config
    }

    /// How the target is spoken to now (a reload of secrets may replace it between two requests).
    pub fn connector(&self) -> Arc<Connector> {
        self.connector.read().expect("connector lock").clone()
    }

    /// Reads this target's credentials again (secrets file, then environment) and uses them from the next request
    /// on. A target that was refusing its credential is let through at once (its hold ends, one lead probes the
    /// new credential). On error (a secret missing, not a valid header value) the target keeps what it had.
    /// Returns whether the target was refusing its credential.
    pub fn reload(&self, all: &Config, store: &Store) -> anyhow::Result<bool> {
        let connector = Connector::new(&self.name, &self.config, all, self.clock.clone())?;
        if let Connector::Pipedrive(p) = &connector {
            p.attach_store(store.clone());
        }
        *self.connector.write().expect("connector lock") = Arc::new(connector);
        *self.credentials_read_at.lock().expect("credentials lock") = Some(self.clock.now());
        let refusing = self.refused_credential().is_some();
        let mut hold = self.hold.lock().expect("hold lock");
        if matches!(hold.as_ref(), Some(Hold { reason: HoldReason::Credentials { .. }, .. })) {
            *hold = None;
        }
        Ok(refusing)
    }

    /// The hold in force at `now`, if any: this target's own, or Graph's for a `meta_lead` step (Graph
    /// throttles the app and page, so reconciliation's answers hold the step too).
    pub fn hold(&self, now: DateTime<Utc>) -> Option<Hold> {
        let own = self.hold.lock().expect("hold lock").clone().filter(|h| h.until > now);
        let graph = match &*self.connector() {
            Connector::MetaLead(m) => crate::features::graph::held_until(m.base(), now),
            Connector::Http(_) => None,
            Connector::Pipedrive(_) => None,
            // An org near its daily API limit: one request per pacing interval (targets::salesforce::Pacing).
            Connector::Salesforce(s) => s.paced_until(now),
            Connector::Hubspot(_) => None,
        };
        match (own, graph) {
            (Some(h), Some(g)) if g > h.until => Some(Hold { until: g, reason: HoldReason::RateLimited }),
            (Some(h), _) => Some(h),
            (None, Some(g)) => Some(Hold { until: g, reason: HoldReason::RateLimited }),
            (None, None) => None,
        }
    }

    /// Holds the target until `until` (a shorter hold never cuts a longer one short).
    pub fn hold_until(&self, until: DateTime<Utc>, reason: HoldReason) {
        let mut hold = self.hold.lock().expect("hold lock");
        if hold.as_ref().is_none_or(|h| h.until < until) {
            *hold = Some(Hold { until, reason });
        }
    }

    /// How many requests may be in flight now, and the rate paced to (for the Targets page).
    pub fn pace(&self) -> (u32, Option<String>) {
        let pacer = self.pacer.lock().expect("pacer lock");
        (pacer.concurrency(), pacer.effective_rate().map(|r| r.to_string()))
    }

    /// The credential this target refused and that has not worked since.
    /// Whether a request started at `started_at` may have gone out with credentials a reload of secrets has
    /// replaced since. A report's start is read before its connector, so a request started after the reload
    /// surely carried the new credentials; one started before may have carried either (at worst, a refusal of the
    /// new one is sent once more before it holds the target).
    fn sent_with_replaced_credentials(&self, started_at: DateTime<Utc>) -> bool {
        self.credentials_read_at.lock().expect("credentials lock").is_some_and(|read_at| started_at < read_at)
    }

    pub fn refused_credential(&self) -> Option<String> {
        self.refused_credential.lock().expect("credential lock").clone()
    }

    /// The request this target would send for `job` (a dry run: nothing is sent).
    pub fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        match &*self.connector() {
            Connector::Http(h) => h.preview(job),
            Connector::MetaLead(m) => Ok(m.preview(job)),
            Connector::Pipedrive(p) => p.preview(job),
            Connector::Salesforce(s) => s.preview(job),
            Connector::Hubspot(h) => h.preview(job),
        }
    }

    /// Test connection: one harmless authenticated request, in plain words.
    pub async fn check(&self) -> ConnectionCheck {
        match &*self.connector() {
            Connector::Http(h) => h.check().await,
            Connector::MetaLead(m) => m.check().await,
            Connector::Pipedrive(p) => p.check().await,
            Connector::Salesforce(s) => s.check().await,
            Connector::Hubspot(h) => h.check().await,
        }
    }

    async fn perform(&self, job: &Job, linked: Option<String>, now: DateTime<Utc>) -> AttemptReport {
        match &*self.connector() {
            Connector::Http(h) => h.deliver(job, linked, now).await,
            Connector::MetaLead(m) => m.fetch(job, now).await,
            Connector::Pipedrive(p) => p.deliver(job, linked, now).await,
            Connector::Salesforce(s) => s.deliver(job, now).await,
            Connector::Hubspot(h) => {
                h.deliver_batch(std::slice::from_ref(job), now).await.pop().flatten().unwrap_or_else(|| {
                    // Cannot happen (a lone lead has no duplicate in its batch); never claim it was delivered.
                    let mut r = AttemptReport::new(now);
                    r.verdict = Verdict::Failed(crate::features::delivery::classify::Failure {
                        class: ErrorClass::Transient,
                        reason: "not sent; retried".into(),
                        field: None,
                    });
                    r
                })
            }
        }
    }

    /// Most leads one request to this target carries, for a connector that sends several at once (HubSpot's
    /// batch upsert); `None`: one lead per request.
    pub fn batch_capacity(&self) -> Option<usize> {
        match &*self.connector() {
            Connector::Hubspot(_) => Some(crate::features::targets::hubspot::MAX_BATCH),
            _ => None,
        }
    }

    /// One report per job (`None`: not sent this time, back to the queue without an attempt).
    async fn perform_batch(&self, jobs: &[Job], now: DateTime<Utc>) -> Vec<Option<AttemptReport>> {
        match &*self.connector() {
            Connector::Hubspot(h) => h.deliver_batch(jobs, now).await,
            _ => {
                let mut out = Vec::with_capacity(jobs.len());
                for job in jobs {
                    out.push(Some(self.perform(job, None, now).await));
                }
                out
            }
        }
    }

    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    pub fn breaker_state(&self) -> (BreakerState, Option<DateTime<Utc>>) {
        let b = self.breaker.lock().expect("breaker lock");
        (b.state(), b.opened_at())
    }

    /// Team mode: takes the team's control state of this target — its pause, its hold, its breaker (see
    /// [`Breaker::adopt`]; `force` when this process's own move of the breaker lost). `stale_after`: how long a
    /// probe may be under way before its process is taken for dead.
    pub fn follow(
        &self,
        control: Option<&TargetControl>,
        paused: bool,
        now: DateTime<Utc>,
        stale_after: chrono::Duration,
        force: bool,
    ) {
        self.set_paused(paused);
        let Some(c) = control else { return };
        if let Some(until) = c.hold_until.filter(|u| *u > now) {
            let reason = match &c.hold_credential {
                Some(credential) => HoldReason::Credentials { credential: credential.clone() },
                None => HoldReason::RateLimited,
            };
            self.hold_until(until, reason);
            let mut told = self.told_hold.lock().expect("told hold lock");
            *told = (*told).max(Some(until));
        }
        let team = TeamBreaker {
            state: c.breaker,
            opened_at: c.opened_at,
            changed_at: c.changed_at,
            stale: c.breaker == BreakerState::HalfOpen && c.changed_at + stale_after < now,
        };
        self.breaker.lock().expect("breaker lock").adopt(team, now, &self.config.breaker, force);
    }

    /// Team mode: whether `until` is a hold the team has not heard of from this process (and notes it as told).
    fn hold_to_tell(&self, until: DateTime<Utc>) -> bool {
        let mut told = self.told_hold.lock().expect("told hold lock");
        if told.is_some_and(|t| t >= until) {
            return false;
        }
        *told = Some(until);
        true
    }
}

/// Shared handle to the running worker: wake it, stop it, watch it.
#[derive(Clone)]
pub struct WorkerHandle {
    pub wake: Arc<Notify>,
    pub events: broadcast::Sender<WorkerEvent>,
    /// The targets in force: the settings page replaces them while the worker runs ([`WorkerHandle::reconfigure`]).
    pub targets: TargetSet,
    /// What time it is for every decision the worker makes.
    pub clock: Clock,
    /// Team mode (a shared PostgreSQL database): breakers, holds, pauses and request budgets are the team's,
    /// kept in the store (`store::team`); other processes' signals wake this worker.
    pub team: bool,
    /// How long a claimed job is leased (`worker.lease_seconds`).
    lease: chrono::Duration,
    shutdown: watch::Sender<bool>,
    /// How many passes over the targets the worker has made (see [`WorkerHandle::watch_passes`]).
    passes: watch::Sender<u64>,
}

/// The worker's targets, swapped whole when the configuration changes: each pass over the targets reads the set
/// in force, while a job already sent keeps the runtime it was sent with (its task holds it) and finishes there.
#[derive(Clone, Default)]
pub struct TargetSet(Arc<RwLock<Arc<TargetMap>>>);

/// Each configured target's runtime, by name.
pub type TargetMap = BTreeMap<String, Arc<TargetRuntime>>;

impl TargetSet {
    fn new(targets: TargetMap) -> TargetSet {
        TargetSet(Arc::new(RwLock::new(Arc::new(targets))))
    }

    /// The targets in force now.
    pub fn current(&self) -> Arc<TargetMap> {
        self.0.read().expect("targets lock").clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<TargetRuntime>> {
        self.current().get(name).cloned()
    }
}

/// Builds one runtime per configured target.
fn build_targets(
    store: &Store,
    config: &Config,
    clock: &Clock,
) -> anyhow::Result<BTreeMap<String, Arc<TargetRuntime>>> {
    let mut targets = BTreeMap::new();
    for (name, tc) in &config.targets {
        targets.insert(name.clone(), Arc::new(TargetRuntime::new(name, tc, config, clock.clone())?));
        // Pipedrive commits the person's link before it creates the lead (a checkpoint between the two).
        if let Some(Connector::Pipedrive(p)) = targets.get(name).map(|t| t.connector()).as_deref() {
            p.attach_store(store.clone());
        }
    }
    Ok(targets)
}

impl WorkerHandle {
    /// Puts the targets of `config` in force without stopping the worker. A target whose section did not change
    /// keeps its runtime (its breaker, learned rate limit and hold); a changed one gets a new runtime built from
    /// its new section, keeping its pause; a removed one is no longer claimed for (its leads wait, nothing is
    /// dropped). Jobs in flight finish on the runtime they were sent with. Fails, changing nothing, when a target
    /// cannot be built (a missing secret).
    pub fn reconfigure(&self, store: &Store, config: &Config) -> anyhow::Result<()> {
        let old = self.targets.current();
        let mut fresh = BTreeMap::new();
        for (name, tc) in &config.targets {
            let kept = old.get(name).filter(|r| format!("{:?}", r.config()) == format!("{tc:?}"));
            fresh.insert(name.clone(), kept.cloned());
        }
        let mut built = build_targets(store, config, &self.clock)?;
        for (name, kept) in fresh {
            if let Some(runtime) = kept {
                built.insert(name, runtime);
            } else if let (Some(new), Some(previous)) = (built.get(&name), old.get(&name)) {
                new.set_paused(previous.is_paused());
            }
        }
        *self.targets.0.write().expect("targets lock") = Arc::new(built);
        self.wake.notify_one();
        Ok(())
    }

    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Whether the worker was told to stop (it finishes or releases its in-flight jobs, then ends).
    pub fn is_stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// The number of passes the worker has made over its targets, each claiming what every target may take at
    /// that moment. Whoever must know that something was *not* sent (a paused or held target) waits for a few
    /// passes after the leads became due, instead of waiting for a while.
    pub fn watch_passes(&self) -> watch::Receiver<u64> {
        self.passes.subscribe()
    }
}

pub struct Worker {
    store: Store,
    cfg: WorkerConfig,
    owner: String,
    handle: WorkerHandle,
}

impl Worker {
    pub fn new(store: Store, config: &Config, clock: Clock) -> anyhow::Result<Worker> {
        let targets = build_targets(&store, config, &clock)?;
        let (events, _) = broadcast::channel(1024);
        let (shutdown, _) = watch::channel(false);
        let owner = owner_name();
        let team = store.is_shared();
        Ok(Worker {
            store,
            cfg: config.worker.clone(),
            owner,
            handle: WorkerHandle {
                wake: Arc::new(Notify::new()),
                events,
                targets: TargetSet::new(targets),
                clock,
                team,
                lease: chrono::Duration::seconds(config.worker.lease_seconds as i64),
                shutdown,
                passes: watch::channel(0).0,
            },
        })
    }

    pub fn handle(&self) -> WorkerHandle {
        self.handle.clone()
    }

    /// Runs until `shutdown()` is called on a handle, then finishes or releases in-flight jobs.
    pub async fn run(self) -> anyhow::Result<()> {
        let Worker { store, cfg, owner, handle } = self;
        let (done_tx, done_rx) = mpsc::channel::<Completion>(4096);
        let (claim_tx, claim_rx) = mpsc::channel::<Claim>(64);
        let completer = tokio::spawn(writer(store.clone(), done_rx, claim_rx, handle.wake.clone()));
        let rescuer = tokio::spawn(rescuer(store.clone(), cfg.clone(), handle.clone()));
        let mut shutdown = handle.shutdown.subscribe();
        let mut in_flight: JoinSet<()> = JoinSet::new();
        let mut released_on_shutdown: Vec<Completion> = Vec::new();
        // Jobs sent to a task and not finished, as the release each would get at shutdown (no lead's data: only
        // what a release writes).
        let running: Arc<Mutex<BTreeMap<i64, Completion>>> = Arc::default();

        tracing::info!(owner = %owner, targets = handle.targets.current().len(), team = handle.team, "worker started");
        // Team mode: take the team's control state before the first claim, then follow it.
        let team = if handle.team {
            if let Err(e) = follow_team(&store, &handle, None).await {
                tracing::error!(error = %format!("{e:#}"), "cannot read the team's control state");
            }
            Some(tokio::spawn(team_loop(store.clone(), handle.clone())))
        } else {
            None
        };
        loop {
            if *shutdown.borrow() {
                break;
            }
            let mut next_wake = None;
            let claimed = dispatch_once(
                &store,
                &cfg,
                &owner,
                &handle,
                &claim_tx,
                &done_tx,
                &mut in_flight,
                &running,
                &mut next_wake,
            )
            .await;
            handle.passes.send_modify(|n| *n += 1);
            // Reap finished tasks so the set does not grow.
            while in_flight.try_join_next().is_some() {}
            if claimed == 0 {
                // Sleep until new work, the poll interval, or the moment a held or paced target may send again.
                let mut idle = Duration::from_millis(cfg.poll_interval_ms);
                if let Some(at) = next_wake {
                    idle =
                        idle.min((at - handle.clock.now()).to_std().unwrap_or_default().max(Duration::from_millis(1)));
                }
                tokio::select! {
                    _ = handle.wake.notified() => {}
                    _ = tokio::time::sleep(idle) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }

        drop(claim_tx);
        tracing::info!(in_flight = in_flight.len(), "worker stopping: letting in-flight jobs finish");
        let grace = tokio::time::sleep(Duration::from_secs(cfg.shutdown_grace_seconds));
        tokio::pin!(grace);
        loop {
            tokio::select! {
                next = in_flight.join_next() => if next.is_none() { break },
                _ = &mut grace => {
                    in_flight.abort_all();
                    while in_flight.join_next().await.is_some() {}
                    released_on_shutdown.extend(running.lock().expect("running lock").values().cloned());
                    break;
                }
            }
        }
        let now = handle.clock.now();
        for mut unfinished in released_on_shutdown {
            tracing::warn!(delivery_id = unfinished.job_id, "released at shutdown before it finished");
            unfinished.outcome = JobOutcome::Released { at: now };
            unfinished.now = now;
            let _ = done_tx.send(unfinished).await;
        }
        drop(done_tx);
        rescuer.abort();
        if let Some(team) = team {
            team.abort();
        }
        completer.await??;
        tracing::info!("worker stopped");
        Ok(())
    }
}

/// One pass over all targets: claim what each may take now and start it. Returns how many jobs were claimed;
/// `next_wake` learns the earliest moment a held or paced target may send again.
#[allow(clippy::too_many_arguments)]
async fn dispatch_once(
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
            // A Salesforce org near its daily API limit is sent one lead at a time, spaced (salesforce::Pacing).
            Admission::Allow if matches!(&*target.connector(), Connector::Salesforce(s) if s.is_paced()) => 1,
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
            let batch = per_request.is_some();
            let probe = admission == Admission::Probe;
            target.outstanding.fetch_add(1, Ordering::SeqCst);
            in_flight.spawn(async move {
                let _outstanding = Outstanding(&target.outstanding);
                // A lead too old for a time-sensitive step runs its fallback instead: decided before anything is
                // sent, so it takes no slot of this target.
                let (chunk, mut completions) = divert_too_old(chunk, target.config(), handle.clock.now());
                let mut permit = None;
                if chunk.is_empty() && probe {
                    // The breaker's probe went to the fallback: the next claim probes again.
                    target.breaker.lock().expect("breaker lock").probe_unused();
                }
                if !chunk.is_empty() {
                    let (p, unsent) = wait_for_slot(&target, send_at, terms, &handle.clock).await;
                    permit = Some(p);
                    if unsent.is_some() && probe {
                        target.breaker.lock().expect("breaker lock").probe_unused();
                    }
                    completions.extend(match unsent {
                        Some(until) => chunk.iter().map(|job| release(job, until)).collect(),
                        None if batch => execute_batch(&store, &handle, &target, chunk).await,
                        None => {
                            let mut one = Vec::with_capacity(1);
                            for job in chunk {
                                one.push(execute(&store, &handle, &target, job).await);
                            }
                            one
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
    let pacer_hold = target.pacer.lock().expect("pacer lock").held_until(now);
    let unsent = match target.hold(now).map(|h| h.until).max(pacer_hold) {
        Some(until) => Some(until),
        None if !claimed.still_hold(target.send_terms()) => Some(now),
        None => None,
    };
    (permit, unsent)
}

/// What a target's requests are claimed under, read again just before each is sent: a request claimed ahead (it
/// waited for its slot or a connection) goes out only if nothing that decides sending changed meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SendTerms {
    paused: bool,
    breaker: BreakerState,
    /// Whether a rate (declared, learned or a daily cap) paces the target.
    paced: bool,
    /// How many requests may be in flight (halved by a 429).
    concurrency: u32,
}

impl SendTerms {
    /// Whether a request claimed under `self` may be sent under `now`: not paused, the breaker where it was (a
    /// breaker that opened lets nothing through, and a probe goes alone), the same pacing, and no fewer
    /// connections (a 429 halved them). More connections (a run of successes) change nothing.
    fn still_hold(self, now: SendTerms) -> bool {
        !now.paused && now.breaker == self.breaker && now.paced == self.paced && now.concurrency >= self.concurrency
    }
}

impl TargetRuntime {
    fn send_terms(&self) -> SendTerms {
        let breaker = self.breaker.lock().expect("breaker lock").state();
        let pacer = self.pacer.lock().expect("pacer lock");
        SendTerms {
            paused: self.is_paused(),
            breaker,
            paced: pacer.effective_rate().is_some(),
            concurrency: pacer.concurrency(),
        }
    }
}

/// Splits claimed jobs into those to send and the completions of those too old for this time-sensitive step
/// (see [`super::fallback`]), which run the fallback instead.
fn divert_too_old(jobs: Vec<Job>, config: &TargetConfig, now: DateTime<Utc>) -> (Vec<Job>, Vec<Completion>) {
    if config.max_lead_age_minutes.is_none() {
        return (jobs, Vec::new());
    }
    let mut send = Vec::with_capacity(jobs.len());
    let mut diverted = Vec::new();
    for job in jobs {
        let born = super::fallback::lead_time(job.received_at, &job.payload);
        match super::fallback::fallback_for(config, born, now) {
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

fn release(job: &Job, now: DateTime<Utc>) -> Completion {
    Completion::of(job, JobOutcome::Released { at: now }, None, now)
}

/// Records a move of `target`'s breaker and announces it. In team mode the move is the team's only if the breaker
/// is still where this process saw it (compare-and-set in the store): when another process moved it first, this
/// one takes the team's state instead and reports nothing (the other process did). Returns whether the move
/// stands.
async fn report_transition(store: &Store, handle: &WorkerHandle, target: &str, t: Transition) -> bool {
    if handle.team {
        let stale_before = t.at - stale_after(handle, target);
        match store.move_breaker(target, &t, stale_before).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(target = %target, to = t.to.as_str(), "breaker already moved by another process");
                if let Err(e) = follow_team(store, handle, Some(target)).await {
                    tracing::error!(error = %format!("{e:#}"), "cannot read the team's control state");
                }
                return false;
            }
            // The database is unreachable: this process acts on its own view (it stops sending to a target it
            // sees failing) until it can tell the team.
            Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot record breaker transition"),
        }
    } else if let Err(e) = store.record_breaker_transition(target, &t).await {
        tracing::error!(error = %format!("{e:#}"), "cannot record breaker transition");
    }
    tracing::warn!(target = %target, from = t.from.as_str(), to = t.to.as_str(), reason = %t.reason, "breaker");
    let _ = handle.events.send(WorkerEvent::Breaker {
        target: target.to_string(),
        from: t.from,
        to: t.to,
        reason: t.reason,
        at: t.at,
    });
    true
}

/// Performs one job and decides its fate. Never fails: every path ends in a completion to write.
#[tracing::instrument(name = "deliver", skip_all, fields(delivery_id = job.id, target = %job.target, source = %job.source, source_ref = ?job.source_ref))]
pub async fn execute(store: &Store, handle: &WorkerHandle, target: &TargetRuntime, job: Job) -> Completion {
    let linked = if target.config().strategy() == Strategy::SearchThenCreate {
        match store.crm_link(&job.target, &job.external_id()).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "cannot read crm_link; releasing");
                return release(&job, handle.clock.now() + chrono::Duration::seconds(5));
            }
        }
    } else {
        None
    };
    let report = target.perform(&job, linked, handle.clock.now()).await;
    decide(store, handle, target, &job, report, true).await
}

/// Performs several jobs in one request (a batch-capable target) and decides each one's fate with the same
/// logic as [`execute`]. The breaker counts the request once, not once per lead. One completion per job.
#[tracing::instrument(name = "deliver_batch", skip_all, fields(target = jobs.first().map(|j| j.target.as_str()).unwrap_or_default(), n = jobs.len()))]
pub async fn execute_batch(
    store: &Store,
    handle: &WorkerHandle,
    target: &TargetRuntime,
    jobs: Vec<Job>,
) -> Vec<Completion> {
    let reports = target.perform_batch(&jobs, handle.clock.now()).await;
    let health = batch_health(reports.iter().flatten());
    if let (Some(health), Some(job)) = (health, jobs.first()) {
        let transition =
            target.breaker.lock().expect("breaker lock").record(health, handle.clock.now(), &target.config().breaker);
        if let Some(t) = transition {
            report_transition(store, handle, &job.target, t).await;
        }
    }
    let mut out = Vec::with_capacity(jobs.len());
    for (job, report) in jobs.iter().zip(reports) {
        out.push(match report {
            Some(report) => decide(store, handle, target, job, report, false).await,
            None => release(job, handle.clock.now()),
        });
    }
    out
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
            Health::Unhealthy => unhealthy = true,
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
/// in the breaker (a batch counts its request once, in [`execute_batch`]).
async fn decide(
    store: &Store,
    handle: &WorkerHandle,
    target: &TargetRuntime,
    job: &Job,
    report: AttemptReport,
    record_health: bool,
) -> Completion {
    let now = handle.clock.now();
    // What holds the target for the team (team mode): a Retry-After, or rate-limit headers saying the budget is
    // used up.
    let mut team_hold = None;
    if let Some((status, headers)) = &report.answered {
        if let Ok(status) = reqwest::StatusCode::from_u16(*status) {
            let mut pacer = target.pacer.lock().expect("pacer lock");
            pacer.observe(now, status, headers);
            team_hold = pacer.held_until(now);
        }
    }
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
            return Completion::of(
                job,
                JobOutcome::Retry { at: now, counts: false, in_doubt: job.in_doubt },
                Some(AttemptRecord {
                    started_at: report.started_at,
                    duration_ms: report.duration_ms,
                    http_status: report.http_status,
                    class: Some(ErrorClass::PermanentConfig),
                    reason: format!("{} — sent before the secrets were read again; sent again with them", f.reason),
                    response_excerpt: report.excerpt,
                }),
                now,
            );
        }
    }
    if let (Some(credential), Verdict::Failed(f)) = (&report.credential_refused, &report.verdict) {
        // An expired credential holds the target and asks for a person: its leads wait without using attempts
        // (one probe per breaker cooldown), instead of dying one by one.
        let probe_at = now + chrono::Duration::milliseconds(target.config().breaker.cooldown_ms as i64);
        target.hold_until(probe_at, HoldReason::Credentials { credential: credential.clone() });
        if handle.team && target.hold_to_tell(probe_at) {
            if let Err(e) = store.share_hold(&job.target, probe_at, Some(credential)).await {
                tracing::warn!(error = %format!("{e:#}"), "cannot tell the team about the hold");
            }
        }
        let first = target.refused_credential.lock().expect("credential lock").replace(credential.clone()).is_none();
        if first {
            tracing::warn!(target = %job.target, credential = %credential, "credential refused: holding the target");
        }
        let _ = handle.events.send(WorkerEvent::CredentialRefused {
            target: job.target.clone(),
            credential: credential.clone(),
            reason: f.reason.clone(),
        });
        return Completion::of(
            job,
            JobOutcome::Retry { at: probe_at, counts: false, in_doubt: job.in_doubt },
            Some(AttemptRecord {
                started_at: report.started_at,
                duration_ms: report.duration_ms,
                http_status: report.http_status,
                class: Some(ErrorClass::PermanentConfig),
                reason: format!("{} — the lead waits until the credential works again", f.reason),
                response_excerpt: report.excerpt,
            }),
            now,
        );
    }
    if report.verdict == Verdict::Delivered {
        if let Some(credential) = target.refused_credential.lock().expect("credential lock").take() {
            let _ = handle.events.send(WorkerEvent::CredentialAccepted { target: job.target.clone(), credential });
        }
    }
    if record_health {
        let health = health_of(&report.verdict);
        let transition = target.breaker.lock().expect("breaker lock").record(health, now, &target.config().breaker);
        if let Some(t) = transition {
            report_transition(store, handle, &job.target, t).await;
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
    Completion::of(
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
    )
}

/// A claim for the writer, and where its jobs go once committed.
type Claim = (ClaimRequest, oneshot::Sender<anyhow::Result<Vec<Job>>>);

/// Asks the writer for a claim; the jobs come back once their claim is committed.
async fn claim(claim_tx: &mpsc::Sender<Claim>, request: ClaimRequest) -> anyhow::Result<Vec<Job>> {
    let (reply, answer) = oneshot::channel();
    claim_tx.send((request, reply)).await.map_err(|_| anyhow::anyhow!("the writer has stopped"))?;
    answer.await.map_err(|_| anyhow::anyhow!("the writer has stopped"))?
}

/// Most completions written in one transaction.
const WRITE_BATCH: usize = 1024;

/// The worker's one writer: completions and claims in shared transactions. Whatever has arrived while the
/// previous transaction was being committed — finished jobs and the dispatcher's claims — is written in the next
/// one, completions first (a claim then sees the steps they made due): one disk sync for the group.
async fn writer(
    store: Store,
    mut done_rx: mpsc::Receiver<Completion>,
    mut claim_rx: mpsc::Receiver<Claim>,
    wake: Arc<Notify>,
) -> anyhow::Result<()> {
    let mut batch: Vec<Completion> = Vec::with_capacity(256);
    let mut claims: Vec<Claim> = Vec::new();
    let mut claims_open = true;
    let mut delay = Duration::from_millis(50);
    loop {
        if batch.is_empty() && claims.is_empty() {
            tokio::select! {
                n = done_rx.recv_many(&mut batch, WRITE_BATCH) => if n == 0 { break },
                c = claim_rx.recv(), if claims_open => match c {
                    Some(c) => claims.push(c),
                    None => claims_open = false,
                },
            }
        }
        while batch.len() < WRITE_BATCH {
            match done_rx.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        while let Ok(c) = claim_rx.try_recv() {
            claims.push(c);
        }
        let requests: Vec<ClaimRequest> = claims.iter().map(|(r, _)| r.clone()).collect();
        match store.write_batch(&batch, &requests).await {
            Ok((_, claimed)) => {
                for ((_, reply), jobs) in claims.drain(..).zip(claimed) {
                    // A dispatcher that stopped waiting leaves its jobs leased: the rescuer returns them.
                    let _ = reply.send(Ok(jobs));
                }
                delay = Duration::from_millis(50);
                if !batch.is_empty() {
                    batch.clear();
                    // A delivered step may have made the next step of its route due, and slots are free.
                    wake.notify_one();
                }
            }
            Err(e) => {
                // Never drop a finished job: keep retrying the write (the leases protect the jobs meanwhile). The
                // claims fail (the dispatcher claims again on its next pass), so a failing claim cannot hold the
                // completions back.
                tracing::error!(error = %format!("{e:#}"), n = batch.len(), claims = claims.len(), "cannot write completions and claims; retrying");
                for (_, reply) in claims.drain(..) {
                    let _ = reply.send(Err(anyhow::anyhow!("{e:#}")));
                }
                if !batch.is_empty() {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    // Retry the completions alone.
                    loop {
                        match store.complete(&batch).await {
                            Ok(_) => break,
                            Err(e) => {
                                tracing::error!(error = %format!("{e:#}"), n = batch.len(), "cannot write completions; retrying");
                                tokio::time::sleep(delay).await;
                                delay = (delay * 2).min(Duration::from_secs(5));
                            }
                        }
                    }
                    batch.clear();
                    wake.notify_one();
                }
            }
        }
    }
    Ok(())
}

/// Team mode: how long a breaker's probe may be under way before its process is taken for dead (a lease and a
/// cooldown: the probe's own lease has run out by then).
fn stale_after(handle: &WorkerHandle, target: &str) -> chrono::Duration {
    let cooldown = handle.targets.get(target).map_or(0, |t| t.config().breaker.cooldown_ms);
    handle.lease + chrono::Duration::milliseconds(cooldown as i64)
}

/// How often a team process reads the team's control state when no signal came (signals can be lost while the
/// listening connection is reopened).
const TEAM_FOLLOW_INTERVAL: Duration = Duration::from_millis(500);

/// Team mode: takes the team's control state (breakers, holds, pauses) into every target's runtime. `force`: this
/// target's breaker takes the team's state whatever its time (this process's own move lost).
async fn follow_team(store: &Store, handle: &WorkerHandle, force: Option<&str>) -> anyhow::Result<()> {
    let controls = store.target_controls().await?;
    let paused: std::collections::BTreeSet<String> =
        store.target_pauses().await?.into_iter().map(|p| p.target).collect();
    let now = handle.clock.now();
    for (name, target) in handle.targets.current().iter() {
        let control = controls.iter().find(|c| &c.target == name);
        target.follow(control, paused.contains(name), now, stale_after(handle, name), force == Some(name.as_str()));
    }
    Ok(())
}

/// Team mode: listens for the other processes' signals (new work wakes the dispatcher; a control change is read
/// at once) and reads the control state every [`TEAM_FOLLOW_INTERVAL`] anyway. Runs until aborted.
async fn team_loop(store: Store, handle: WorkerHandle) {
    let control = Arc::new(Notify::new());
    let listener = {
        let (store, wake, control) = (store.clone(), handle.wake.clone(), control.clone());
        tokio::spawn(async move {
            loop {
                let (wake, control) = (wake.clone(), control.clone());
                let heard = store
                    .listen(move |signal| match signal {
                        Signal::Work => wake.notify_one(),
                        Signal::Control => control.notify_one(),
                    })
                    .await;
                if let Err(e) = heard {
                    tracing::warn!(error = %format!("{e:#}"), "cannot listen for the team's signals: polling meanwhile");
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        })
    };
    struct AbortOnDrop(tokio::task::JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _listener = AbortOnDrop(listener);
    loop {
        tokio::select! {
            _ = control.notified() => {}
            _ = tokio::time::sleep(TEAM_FOLLOW_INTERVAL) => {}
        }
        if let Err(e) = follow_team(&store, &handle, None).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot read the team's control state");
        }
        handle.wake.notify_one();
    }
}

async fn rescuer(store: Store, cfg: WorkerConfig, handle: WorkerHandle) {
    let mut tick = tokio::time::interval(Duration::from_secs(cfg.rescue_interval_seconds.max(1)));
    loop {
        tick.tick().await;
        match store.rescue_expired(handle.clock.now()).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::warn!(rescued = n, "returned jobs with expired leases to pending");
                handle.wake.notify_one();
            }
            Err(e) => tracing::error!(error = %format!("{e:#}"), "rescue failed"),
        }
    }
}

/// A new owner name for claims and leases: host, process id and a random part (two servers in one process, or a
/// restarted process with a reused id, are different owners).
pub fn owner_name() -> String {
    format!("{}:{}:{}", hostname(), std::process::id(), rand::random::<u32>())
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAIMED: SendTerms = SendTerms { paused: false, breaker: BreakerState::Closed, paced: false, concurrency: 8 };

    #[test]
    fn a_request_claimed_ahead_goes_out_only_under_the_terms_it_was_claimed_under() {
        assert!(CLAIMED.still_hold(CLAIMED));
        // A run of successes raised the connections: nothing that stops sending.
        assert!(CLAIMED.still_hold(SendTerms { concurrency: 9, ..CLAIMED }));
        // Each of these sends it back to the queue unsent.
        assert!(!CLAIMED.still_hold(SendTerms { paused: true, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { breaker: BreakerState::Open, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { breaker: BreakerState::HalfOpen, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { paced: true, ..CLAIMED }));
        assert!(!CLAIMED.still_hold(SendTerms { concurrency: 4, ..CLAIMED }));
        // A probe (claimed half-open) goes while the breaker still waits for it.
        let probe = SendTerms { breaker: BreakerState::HalfOpen, ..CLAIMED };
        assert!(probe.still_hold(probe));
        assert!(!probe.still_hold(SendTerms { breaker: BreakerState::Closed, ..probe }));
    }
}
