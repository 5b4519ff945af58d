//! The replay runner: sends queued replay items back — the canary first, then paced — and holds back while a
//! target cannot take them. Also starts auto-replays after a target recovers, and purges, once an hour, the
//! data of leads resolved by hand or delivered once their retention has passed.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{start, ReplayOptions, ReplaySelection};
use crate::features::app::{App, LiveEvent};
use crate::features::delivery::breaker::BreakerState;
use crate::features::monitor::alerts::{AlertKind, AlertSpec, Severity};
use crate::store::{ReplayEventKind, ReplayPhase, RunningReplay};

/// What the runner knows about a target right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetSignal {
    pub configured: bool,
    pub paused: bool,
    pub breaker: BreakerState,
    /// The target answered "slow down" in the last few seconds.
    pub rate_limited: bool,
}

/// Why nothing should be sent back to `target` now, if anything holds it back.
pub fn holdback(target: &str, s: &TargetSignal) -> Option<String> {
    if !s.configured {
        Some(format!("{target} is not configured any more"))
    } else if s.paused {
        Some(format!("{target} is paused"))
    } else if s.breaker != BreakerState::Closed {
        Some(format!("{target} looks down (breaker {})", s.breaker.as_str().replace('_', "-")))
    } else if s.rate_limited {
        Some(format!("{target} is rate-limiting"))
    } else {
        None
    }
}

/// Token bucket: how many items may be sent after `elapsed` at `rate` a second, given the fraction carried over.
/// At most one second's worth at once. Returns (items, new carry).
pub fn allowance(rate: f64, elapsed: Duration, carry: f64) -> (usize, f64) {
    let available = (carry + rate * elapsed.as_secs_f64()).min(rate.max(1.0));
    let n = available.floor().max(0.0);
    (n as usize, available - n)
}

/// Most items of one replay in flight (sent back, not finished) at once.
fn max_in_flight(rate: f64) -> i64 {
    ((rate * 10.0) as i64).max(50)
}

#[derive(Default)]
pub struct RunnerState {
    buckets: HashMap<i64, (tokio::time::Instant, f64)>,
    last_auto: Option<tokio::time::Instant>,
    last_purge: Option<tokio::time::Instant>,
}

/// Runs until aborted.
pub async fn run(app: App) {
    let mut state = RunnerState::default();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        if let Err(e) = step(&app, &mut state, app.clock.now()).await {
            tracing::error!(error = %format!("{e:#}"), "replay runner");
        }
    }
}

async fn signals(app: &App, now: DateTime<Utc>) -> anyhow::Result<BTreeMap<String, TargetSignal>> {
    let limited: std::collections::BTreeSet<String> =
        app.store.rate_limited_targets(now - chrono::Duration::seconds(5)).await?.into_iter().collect();
    Ok(app
        .config
        .targets
        .keys()
        .map(|name| {
            let runtime = app.worker.as_ref().and_then(|w| w.targets.get(name));
            let signal = TargetSignal {
                configured: true,
                paused: runtime.as_ref().is_some_and(|t| t.is_paused()),
                breaker: runtime.map(|t| t.breaker_state().0).unwrap_or(BreakerState::Closed),
                rate_limited: limited.contains(name),
            };
            (name.clone(), signal)
        })
        .collect())
}

/// One pass over the running replays (and, now and then, auto-replay and purging).
pub async fn step(app: &App, state: &mut RunnerState, now: DateTime<Utc>) -> anyhow::Result<()> {
    // One process of a team advances replays (two would double their pace): the leader (runtime::leadership).
    if !app.leadership.is_leader() {
        return Ok(());
    }
    let running = app.store.running_replays().await?;
    if !running.is_empty() {
        let signals = signals(app, now).await?;
        for replay in running {
            let id = replay.id;
            if advance(app, state, &signals, replay, now).await? {
                let _ = app.live.send(LiveEvent::ReplayChanged { replay_id: id });
            }
        }
    }
    let instant = tokio::time::Instant::now();
    if state.last_auto.is_none_or(|t| instant - t >= Duration::from_secs(15)) {
        state.last_auto = Some(instant);
        auto_replay(app, now).await?;
    }
    if state.last_purge.is_none_or(|t| instant - t >= Duration::from_secs(3600)) {
        state.last_purge = Some(instant);
        super::purge_resolved(&app.store, app.config.replay.resolved_payload_retention_days, now).await?;
        super::purge_delivered(&app.store, app.config.privacy.delivered_payload_retention_days, now).await?;
    }
    Ok(())
}

/// Moves one replay forward. Returns whether anything changed.
async fn advance(
    app: &App,
    state: &mut RunnerState,
    signals: &BTreeMap<String, TargetSignal>,
    replay: RunningReplay,
    now: DateTime<Utc>,
) -> anyhow::Result<bool> {
    let RunningReplay { id, phase, canary_size: canary, rate_per_second: rate, waiting_for: waiting, auto } = replay;
    let counts = app.store.replay_item_counts(id).await?;
    let (sent, unfinished, failed, queued) = (counts.sent, counts.unfinished, counts.failed, counts.queued);
    if phase == ReplayPhase::Canary {
        if sent < canary && queued > 0 {
            let (n, hold) = send_back(app, signals, id, (canary - sent) as usize, now).await?;
            note_waiting(app, id, waiting, hold, now).await?;
            if n > 0 && sent + n as i64 >= canary.min(sent + queued) {
                app.store
                    .record_replay_event(
                        id,
                        now,
                        ReplayEventKind::CanarySent,
                        &format!("canary of {} sent; the rest waits for it", sent + n as i64),
                    )
                    .await?;
            }
            return Ok(n > 0);
        }
        if unfinished > 0 {
            return Ok(false);
        }
        if failed > 0 {
            let reasons = app.store.replay_failure_reasons(id, 3).await?;
            let detail = format!(
                "{failed} of {sent} canary leads failed again ({}). The rest is held: fix the cause and resume, or \
                 cancel.",
                reasons.join("; ")
            );
            app.store.end_replay_canary(id, true, &detail, now).await?;
        } else {
            let detail = format!("all {sent} canary leads delivered; sending the rest");
            app.store.end_replay_canary(id, false, &detail, now).await?;
        }
        return Ok(true);
    }
    // After the canary: paced.
    if queued == 0 {
        if unfinished == 0 {
            finish(app, id, auto, now).await?;
            state.buckets.remove(&id);
            return Ok(true);
        }
        return Ok(false);
    }
    let instant = tokio::time::Instant::now();
    let (last, carry) = state.buckets.get(&id).copied().unwrap_or((instant - Duration::from_millis(200), 0.0));
    let (allowed, carry_after) = allowance(rate, instant - last, carry);
    let room = (max_in_flight(rate) - unfinished).max(0) as usize;
    let want = allowed.min(room);
    if want == 0 {
        state.buckets.insert(id, (instant, carry_after));
        return Ok(false);
    }
    let (n, hold) = send_back(app, signals, id, want, now).await?;
    // Unused allowance is not saved up beyond the bucket's cap.
    state.buckets.insert(id, (instant, carry_after + (want - n) as f64));
    let changed = note_waiting(app, id, waiting, hold, now).await?;
    Ok(n > 0 || changed)
}

/// Records a change in what the replay waits for (a pause it took by itself, or its end).
async fn note_waiting(
    app: &App,
    id: i64,
    before: Option<String>,
    now_waiting: Option<String>,
    now: DateTime<Utc>,
) -> anyhow::Result<bool> {
    if before == now_waiting {
        return Ok(false);
    }
    let (kind, detail) = match &now_waiting {
        Some(why) => (ReplayEventKind::Waiting, format!("holding back: {why}")),
        None => (ReplayEventKind::Continued, "the target takes leads again: sending".to_string()),
    };
    app.store.set_replay_waiting(id, now_waiting.as_deref(), kind, &detail, now).await?;
    Ok(true)
}

/// Sends back up to `n` items in order, skipping those whose target cannot take them now. Returns how many were
/// sent and, when some were held back, why.
async fn send_back(
    app: &App,
    signals: &BTreeMap<String, TargetSignal>,
    id: i64,
    n: usize,
    now: DateTime<Utc>,
) -> anyhow::Result<(usize, Option<String>)> {
    let candidates = app.store.queued_replay_items(id, (n * 4).max(50) as u32).await?;
    let mut chosen = Vec::with_capacity(n);
    let mut hold: Option<String> = None;
    for item in candidates {
        let delivery = item.delivery_id;
        let effective = item.fallback_to.unwrap_or(item.target);
        let signal = signals.get(&effective).copied().unwrap_or(TargetSignal {
            configured: false,
            paused: false,
            breaker: BreakerState::Closed,
            rate_limited: false,
        });
        match holdback(&effective, &signal) {
            Some(why) => {
                hold.get_or_insert(why);
            }
            None => chosen.push(delivery),
        }
        if chosen.len() >= n {
            break;
        }
    }
    if chosen.is_empty() {
        return Ok((0, hold));
    }
    // A step whose history has an attempt that may have reached the target without a definite answer keeps its
    // doubt and its idempotency key: it is looked up (or its key answered by the CRM's stored result) before
    // anything is created again. Only a step whose every answer was a definite error gets a fresh key, so a CRM
    // cannot replay a stored error to it.
    app.store.send_back_replay_items(id, &chosen, now).await?;
    if let Some(w) = &app.worker {
        w.wake.notify_one();
    }
    // Something was sent: any hold-back only concerned other targets.
    let hold = if chosen.len() < n { hold } else { None };
    Ok((chosen.len(), hold))
}

async fn finish(app: &App, id: i64, auto: bool, now: DateTime<Utc>) -> anyhow::Result<()> {
    let p = super::progress(&app.store, id).await?.context("replay vanished")?;
    let detail = format!(
        "{} delivered, {} failed again with the same reason, {} with a new reason{}",
        p.delivered,
        p.failed_same_reason,
        p.failed_new_reason,
        if p.resolved_by_hand > 0 {
            format!(", {} resolved by hand meanwhile", p.resolved_by_hand)
        } else {
            String::new()
        }
    );
    app.store.finish_replay(id, &detail, now).await?;
    tracing::info!(replay_id = id, %detail, "replay finished");
    if auto {
        crate::features::monitor::resolve(app, AlertKind::AutoReplay, &format!("replay-{id}"), &detail, now).await;
    }
    Ok(())
}

/// Targets with `auto_replay = true` that are healthy again get their recent setup and outage dead letters
/// replayed, once each.
async fn auto_replay(app: &App, now: DateTime<Utc>) -> anyhow::Result<()> {
    let targets: Vec<String> =
        app.config.targets.iter().filter(|(_, t)| t.auto_replay).map(|(n, _)| n.clone()).collect();
    if targets.is_empty() {
        return Ok(());
    }
    let signals = signals(app, now).await?;
    for target in targets {
        if signals.get(&target).is_some_and(|s| holdback(&target, s).is_some()) {
            continue;
        }
        let Some(last_ok) = app.store.last_delivered_at(&target).await? else { continue };
        let ids = app.store.auto_replay_candidates(&target, now - chrono::Duration::days(7), last_ok).await?;
        if ids.is_empty() {
            continue;
        }
        let selection = ReplaySelection { ids: Some(ids.clone()), filter: None };
        let reason = format!(
            "{target} is healthy again (a lead was delivered at {}): its setup and outage dead letters are replayed",
            last_ok.format("%H:%M:%S UTC")
        );
        let receipt = match start(
            &app.store,
            &app.config,
            &selection,
            ids.len() as i64,
            &ReplayOptions::default(),
            "Leadline (auto-replay)",
            &reason,
            true,
            now,
        )
        .await
        {
            Ok(r) => r,
            Err(super::ReplayError::SelectionChanged { .. }) => continue,
            Err(e) => return Err(anyhow::anyhow!(e)),
        };
        let spec = AlertSpec {
            kind: AlertKind::AutoReplay,
            key: format!("replay-{}", receipt.replay_id),
            severity: Severity::Info,
            title: format!(
                "Auto-replay: {} to {target} {} sent again",
                if receipt.queued == 1 { "1 lead".to_string() } else { format!("{} leads", receipt.queued) },
                if receipt.queued == 1 { "is being" } else { "are being" }
            ),
            detail: format!(
                "{target} delivers again, so its dead letters from the setup problem or outage are replayed, canary \
                 first and paced (replay {}). This alert resolves with the result.",
                receipt.replay_id
            ),
        };
        crate::features::monitor::raise(app, app.notifier.as_ref(), spec, now).await;
        let _ = app.live.send(LiveEvent::ReplayChanged { replay_id: receipt.replay_id });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_allows_a_second_at_most_and_carries_fractions() {
        assert_eq!(allowance(10.0, Duration::from_millis(200), 0.0), (2, 0.0));
        let (n, carry) = allowance(2.0, Duration::from_millis(200), 0.0);
        assert_eq!(n, 0);
        assert!((carry - 0.4).abs() < 1e-9);
        let (n, carry) = allowance(2.0, Duration::from_millis(300), 0.4);
        assert_eq!(n, 1);
        assert!(carry < 1e-9);
        // A long gap does not build a burst: one second's worth at most.
        assert_eq!(allowance(100.0, Duration::from_secs(60), 0.0).0, 100);
    }

    #[test]
    fn a_target_that_cannot_take_leads_holds_its_items_back() {
        let ok = TargetSignal { configured: true, paused: false, breaker: BreakerState::Closed, rate_limited: false };
        assert_eq!(holdback("crm", &ok), None);
        assert_eq!(
            holdback("crm", &TargetSignal { breaker: BreakerState::Open, ..ok }).unwrap(),
            "crm looks down (breaker open)"
        );
        assert_eq!(holdback("crm", &TargetSignal { rate_limited: true, ..ok }).unwrap(), "crm is rate-limiting");
        assert_eq!(holdback("crm", &TargetSignal { paused: true, ..ok }).unwrap(), "crm is paused");
        assert!(holdback("old", &TargetSignal { configured: false, ..ok }).unwrap().contains("not configured"));
    }
}
