//! Team mode: what must be one decision for the team (breakers, holds, pauses) is read from the store and taken
//! into every target's runtime; breaker moves are compare-and-set there.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{WorkerEvent, WorkerHandle};
use crate::features::delivery::breaker::Transition;
use crate::store::{Signal, Store};

/// Team mode: how long a breaker's probe may be under way before its process is taken for dead (a lease and a
/// cooldown: the probe's own lease has run out by then).
pub(super) fn stale_after(handle: &WorkerHandle, target: &str) -> chrono::Duration {
    let cooldown = handle.targets.get(target).map_or(0, |t| t.config().breaker.cooldown_ms);
    handle.lease + chrono::Duration::milliseconds(cooldown as i64)
}

/// How often a team process reads the team's control state when no signal came (signals can be lost while the
/// listening connection is reopened).
const TEAM_FOLLOW_INTERVAL: Duration = Duration::from_millis(500);

/// Team mode: takes the team's control state (breakers, holds, pauses) into every target's runtime. `force`: this
/// target's breaker takes the team's state whatever its time (this process's own move lost).
pub(super) async fn follow_team(store: &Store, handle: &WorkerHandle, force: Option<&str>) -> anyhow::Result<()> {
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
pub(super) async fn team_loop(store: Store, handle: WorkerHandle) {
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

/// Records a move of `target`'s breaker and announces it. In team mode the move is the team's only if the breaker
/// is still where this process saw it (compare-and-set in the store): when another process moved it first, this
/// one takes the team's state instead and reports nothing (the other process did). Returns whether the move
/// stands.
pub(super) async fn report_transition(store: &Store, handle: &WorkerHandle, target: &str, t: Transition) -> bool {
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
