//! The delivery worker.
//!
//! A dispatcher ([`dispatch`]) claims due jobs per target (as many as the target's free concurrency slots, and
//! only what its circuit breaker and pacer admit), runs each request as a task ([`attempt`]: the connector sends,
//! then the outcome is decided), and hands the finished jobs to the writer ([`writer`]), which writes completions
//! and the dispatcher's claims together in shared transactions (one disk sync for the group). A rescuer
//! ([`rescuer`]) returns jobs whose lease expired; in team mode [`team`] follows the team's shared control state.
//! On shutdown the dispatcher stops claiming, in-flight jobs get `shutdown_grace_seconds` to finish, and the rest
//! are released back to `pending` without using an attempt.
//!
//! The worker speaks to every target through the [`Connector`](crate::features::targets::Connector) trait: no
//! vendor is named here.

mod attempt;
mod dispatch;
mod rescuer;
mod target;
mod team;
mod writer;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, watch, Notify};
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::config::{Config, WorkerConfig};
use crate::features::delivery::breaker::BreakerState;
use crate::model::ErrorClass;
pub use crate::model::{Hold, HoldReason};
use crate::store::{Completion, JobOutcome, Store};
pub use attempt::{execute, execute_batch};
pub use target::{TargetMap, TargetRuntime, TargetSet};

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
    /// The target refused its own setup (a template, a region): its leads wait, a person must fix the step.
    SetupRefused {
        target: String,
        reason: String,
    },
    /// A target that had refused its setup sent a lead again.
    SetupAccepted {
        target: String,
    },
    /// A request with a credential that had been refused succeeded again.
    CredentialAccepted {
        target: String,
        credential: String,
    },
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

impl WorkerHandle {
    /// Puts the targets of `config` in force without stopping the worker. A target whose section did not change
    /// keeps its runtime (its breaker, learned rate limit and hold); a changed one gets a new runtime built from
    /// its new section, keeping its pause; a removed one is no longer claimed for (its leads wait, nothing is
    /// dropped). Jobs in flight finish on the runtime they were sent with. Fails, changing nothing, when a target
    /// cannot be built (a missing secret).
    pub fn reconfigure(&self, config: &Config) -> anyhow::Result<()> {
        let old = self.targets.current();
        let mut fresh = BTreeMap::new();
        for (name, tc) in &config.targets {
            let kept = old.get(name).filter(|r| format!("{:?}", r.config()) == format!("{tc:?}"));
            fresh.insert(name.clone(), kept.cloned());
        }
        let mut built = target::build_targets(config, &self.clock)?;
        for (name, kept) in fresh {
            if let Some(runtime) = kept {
                built.insert(name, runtime);
            } else if let (Some(new), Some(previous)) = (built.get(&name), old.get(&name)) {
                new.set_paused(previous.is_paused());
            }
        }
        self.targets.replace(built);
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
        let targets = target::build_targets(config, &clock)?;
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
        let (claim_tx, claim_rx) = mpsc::channel::<writer::Claim>(64);
        let completer = tokio::spawn(writer::writer(store.clone(), done_rx, claim_rx, handle.wake.clone()));
        let rescuer = tokio::spawn(rescuer::rescuer(store.clone(), cfg.clone(), handle.clone()));
        let mut shutdown = handle.shutdown.subscribe();
        let mut in_flight: JoinSet<()> = JoinSet::new();
        let mut released_on_shutdown: Vec<Completion> = Vec::new();
        // Jobs sent to a task and not finished, as the release each would get at shutdown (no lead's data: only
        // what a release writes).
        let running: Arc<Mutex<BTreeMap<i64, Completion>>> = Arc::default();

        tracing::info!(owner = %owner, targets = handle.targets.current().len(), team = handle.team, "worker started");
        // Team mode: take the team's control state before the first claim, then follow it.
        let team = if handle.team {
            if let Err(e) = team::follow_team(&store, &handle, None).await {
                tracing::error!(error = %format!("{e:#}"), "cannot read the team's control state");
            }
            Some(tokio::spawn(team::team_loop(store.clone(), handle.clone())))
        } else {
            None
        };
        loop {
            if *shutdown.borrow() {
                break;
            }
            let mut next_wake = None;
            let claimed = dispatch::dispatch_once(
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
