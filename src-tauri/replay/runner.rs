//! The replay runner: sends queued replay items back — the canary first, then paced — and holds back while a
//! target cannot take them. Also starts auto-replays after a target recovers, and purges the data of leads
//! resolved by hand once their retention has passed.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{event, start, ReplayOptions, ReplaySelection};
use crate::api::{App, LiveEvent};
use crate::delivery::breaker::BreakerState;
use crate::monitor::alerts::{AlertSpec, Severity};
use crate::store::{ms, Store};

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
        if let Err(e) = step(&app, &mut state, Utc::now()).await {
            tracing::error!(error = %format!("{e:#}"), "replay runner");
        }
    }
}

async fn signals(app: &App, now: DateTime<Utc>) -> anyhow::Result<BTreeMap<String, TargetSignal>> {
    let limited: Vec<(String,)> = sqlx::query_as(
        "SELECT DISTINCT d.target FROM attempt a JOIN delivery d ON d.id = a.delivery_id
          WHERE a.started_at >= ? AND a.class = 'rate_limited'",
    )
    .bind(ms(now - chrono::Duration::seconds(5)))
    .fetch_all(app.store.read_pool())
    .await
    .context("cannot read rate limits")?;
    let limited: std::collections::BTreeSet<String> = limited.into_iter().map(|r| r.0).collect();
    Ok(app
        .config
        .targets
        .keys()
        .map(|name| {
            let runtime = app.worker.as_ref().and_then(|w| w.targets.get(name));
            let signal = TargetSignal {
                configured: true,
                paused: runtime.is_some_and(|t| t.is_paused()),
                breaker: runtime.map(|t| t.breaker_state().0).unwrap_or(BreakerState::Closed),
                rate_limited: limited.contains(name),
            };
            (name.clone(), signal)
        })
        .collect())
}

/// One pass over the running replays (and, now and then, auto-replay and purging).
pub async fn step(app: &App, state: &mut RunnerState, now: DateTime<Utc>) -> anyhow::Result<()> {
    let running: Vec<(i64, String, i64, f64, Option<String>, bool)> = sqlx::query_as(
        "SELECT id, phase, canary_size, rate_per_second, waiting_for, auto FROM replay WHERE status = 'running'
          ORDER BY id",
    )
    .fetch_all(app.store.read_pool())
    .await
    .context("cannot read running replays")?;
    if !running.is_empty() {
        let signals = signals(app, now).await?;
        for (id, phase, canary, rate, waiting, auto) in running {
            if advance(app, state, &signals, id, &phase, canary, rate, waiting, auto, now).await? {
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
    }
    Ok(())
}

/// Items counted for one replay: (sent back, unfinished, failed again, not sent back yet).
async fn counts(store: &Store, id: i64) -> anyhow::Result<(i64, i64, i64, i64)> {
    let r: (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT COALESCE(SUM(r.requeued_at IS NOT NULL), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND d.state IN ('pending', 'running', 'waiting')), 0),
                COALESCE(SUM(r.requeued_at IS NOT NULL AND d.state = 'dead' AND d.resolution = 'open'), 0),
                COALESCE(SUM(r.requeued_at IS NULL), 0)
           FROM replay_item r JOIN delivery d ON d.id = r.delivery_id WHERE r.replay_id = ?",
    )
    .bind(id)
    .fetch_one(store.read_pool())
    .await
    .context("cannot count replay items")?;
    Ok(r)
}

/// Moves one replay forward. Returns whether anything changed.
#[allow(clippy::too_many_arguments)]
async fn advance(
    app: &App,
    state: &mut RunnerState,
    signals: &BTreeMap<String, TargetSignal>,
    id: i64,
    phase: &str,
    canary: i64,
    rate: f64,
    waiting: Option<String>,
    auto: bool,
    now: DateTime<Utc>,
) -> anyhow::Result<bool> {
    let (sent, unfinished, failed, queued) = counts(&app.store, id).await?;
    if phase == "canary" {
        if sent < canary && queued > 0 {
            let (n, hold) = send_back(app, signals, id, (canary - sent) as usize, now).await?;
            note_waiting(app, id, waiting, hold, now).await?;
            if n > 0 && sent + n as i64 >= canary.min(sent + queued) {
                let mut tx = app.store.begin_write().await?;
                event(
                    &mut tx,
                    id,
                    now,
                    "canary_sent",
                    &format!("canary of {} sent; the rest waits for it", sent + n as i64),
                )
                .await?;
                tx.commit().await?;
            }
            return Ok(n > 0);
        }
        if unfinished > 0 {
            return Ok(false);
        }
        let mut tx = app.store.begin_write().await?;
        if failed > 0 {
            let reasons: Vec<(String,)> = sqlx::query_as(
                "SELECT DISTINCT d.dead_reason FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
                  WHERE r.replay_id = ? AND r.requeued_at IS NOT NULL AND d.state = 'dead' LIMIT 3",
            )
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
            let detail = format!(
                "{failed} of {sent} canary leads failed again ({}). The rest is held: fix the cause and resume, or \
                 cancel.",
                reasons.into_iter().map(|r| r.0).collect::<Vec<_>>().join("; ")
            );
            sqlx::query(
                "UPDATE replay SET status = 'paused', phase = 'canary_failed', waiting_for = NULL WHERE id = ?",
            )
            .bind(id)
            .execute(&mut *tx)
            .await?;
            event(&mut tx, id, now, "canary_failed", &detail).await?;
        } else {
            sqlx::query("UPDATE replay SET phase = 'rest' WHERE id = ?").bind(id).execute(&mut *tx).await?;
            event(&mut tx, id, now, "canary_passed", &format!("all {sent} canary leads delivered; sending the rest"))
                .await?;
        }
        tx.commit().await?;
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
    let mut tx = app.store.begin_write().await?;
    sqlx::query("UPDATE replay SET waiting_for = ? WHERE id = ? AND status = 'running'")
        .bind(&now_waiting)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    match &now_waiting {
        Some(why) => event(&mut tx, id, now, "waiting", &format!("holding back: {why}")).await?,
        None => event(&mut tx, id, now, "continued", "the target takes leads again: sending").await?,
    }
    tx.commit().await?;
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
    let candidates: Vec<(i64, String, Option<String>)> = sqlx::query_as(
        "SELECT r.delivery_id, d.target, r.fallback_to FROM replay_item r JOIN delivery d ON d.id = r.delivery_id
          WHERE r.replay_id = ? AND r.requeued_at IS NULL ORDER BY r.seq LIMIT ?",
    )
    .bind(id)
    .bind((n * 4).max(50) as i64)
    .fetch_all(app.store.read_pool())
    .await
    .context("cannot read queued replay items")?;
    let mut chosen = Vec::with_capacity(n);
    let mut hold: Option<String> = None;
    for (delivery, target, fallback) in candidates {
        let effective = fallback.unwrap_or(target);
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
    let ids = serde_json::to_string(&chosen)?;
    let mut tx = app.store.begin_write().await?;
    // All SET expressions see the row as it was: `fallback_of` gets the step's own target.
    // A step whose history has an attempt that may have reached the target without a definite answer (no answer,
    // a rescued lease, an ambiguous outcome) keeps its doubt and its idempotency key: it is looked up (or its key
    // answered by the CRM's stored result) before anything is created again. Only a step whose every answer was
    // a definite error gets a fresh key, so a CRM cannot replay a stored error to it.
    sqlx::query(
        "UPDATE delivery
            SET state = 'pending', resolution = 'replayed', attempts = 0, trigger = 'manual',
                replay_generation = replay_generation + (1 - (in_doubt OR EXISTS (SELECT 1 FROM attempt a
                    WHERE a.delivery_id = delivery.id
                      AND (a.outcome = 'rescued' OR a.class = 'ambiguous' OR (a.http_status IS NULL AND a.reason LIKE '%no answer (%'))))),
                in_doubt = (in_doubt OR EXISTS (SELECT 1 FROM attempt a
                    WHERE a.delivery_id = delivery.id
                      AND (a.outcome = 'rescued' OR a.class = 'ambiguous' OR (a.http_status IS NULL AND a.reason LIKE '%no answer (%')))),
                pending_since = ?1, next_attempt_at = ?1,
                fallback_of = CASE WHEN (SELECT fallback_to FROM replay_item WHERE replay_id = ?2 AND delivery_id = delivery.id)
                                   IS NOT NULL THEN target END,
                target = COALESCE((SELECT fallback_to FROM replay_item WHERE replay_id = ?2 AND delivery_id = delivery.id), target)
          WHERE id IN (SELECT value FROM json_each(?3)) AND state = 'dead' AND resolution = 'open'",
    )
    .bind(ms(now))
    .bind(id)
    .bind(&ids)
    .execute(&mut *tx)
    .await
    .context("cannot send replay items back")?;
    sqlx::query("UPDATE replay_item SET requeued_at = ? WHERE replay_id = ? AND delivery_id IN (SELECT value FROM json_each(?))")
        .bind(ms(now))
        .bind(id)
        .bind(&ids)
        .execute(&mut *tx)
        .await
        .context("cannot mark replay items")?;
    tx.commit().await.context("cannot commit replay batch")?;
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
    let mut tx = app.store.begin_write().await?;
    sqlx::query("UPDATE replay SET status = 'finished', finished_at = ?, waiting_for = NULL WHERE id = ?")
        .bind(ms(now))
        .bind(id)
        .execute(&mut *tx)
        .await?;
    event(&mut tx, id, now, "finished", &detail).await?;
    tx.commit().await?;
    tracing::info!(replay_id = id, %detail, "replay finished");
    if auto {
        crate::monitor::resolve(app, "auto_replay", &format!("replay-{id}"), &detail, now).await;
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
        let (last_ok,): (Option<i64>,) =
            sqlx::query_as("SELECT MAX(delivered_at) FROM delivery WHERE target = ? AND state = 'delivered'")
                .bind(&target)
                .fetch_one(app.store.read_pool())
                .await?;
        let Some(last_ok) = last_ok else { continue };
        let ids: Vec<(i64,)> = sqlx::query_as(&format!(
            "SELECT d.id FROM delivery d JOIN inbound_event e ON e.id = d.event_id
              WHERE d.state = 'dead' AND d.resolution = 'open' AND d.target = ?
                AND d.dead_class IN ('permanent_config', 'transient', 'rate_limited')
                AND d.dead_at < ? AND d.dead_at >= ? AND e.purged_at IS NULL
                AND {} IS NULL
                AND NOT EXISTS (SELECT 1 FROM replay_item ri JOIN replay r ON r.id = ri.replay_id
                                 WHERE ri.delivery_id = d.id AND r.auto = 1)
              ORDER BY d.id",
            crate::dlq::QUEUED_IN_REPLAY
        ))
        .bind(&target)
        .bind(last_ok)
        .bind(ms(now - chrono::Duration::days(7)))
        .fetch_all(app.store.read_pool())
        .await?;
        if ids.is_empty() {
            continue;
        }
        let selection = ReplaySelection { ids: Some(ids.iter().map(|r| r.0).collect()), filter: None };
        let reason = format!(
            "{target} is healthy again (a lead was delivered at {}): its setup and outage dead letters are replayed",
            crate::store::from_ms(last_ok).format("%H:%M:%S UTC")
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
            kind: "auto_replay",
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
        crate::monitor::raise(app, app.notifier.as_ref(), spec, now).await;
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
