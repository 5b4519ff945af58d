//! Monitoring: alerts raised from what the worker reports and from the queue's state, chart samples, and the
//! live health feed the UI listens to.
//!
//! Alert kinds so far:
//! - `permanent_config` (critical, per target): a lead died because our setup is wrong (credentials, a deleted
//!   field). Every later lead to that target will fail the same way. Resolves when no such dead letter is open.
//! - `breaker_open` (critical, per target): Leadline stopped sending to a target that looks down. Resolves when
//!   the breaker closes.
//! - `oldest_pending` (warning, overall): a lead has waited longer than `monitor.oldest_pending_alert_seconds`.
//!   Resolves when the queue catches up.

pub mod alerts;
pub mod metrics;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::api::{self, App, LiveEvent};
use crate::delivery::breaker::BreakerState;
use crate::delivery::classify::ErrorClass;
use crate::delivery::worker::WorkerEvent;
use alerts::{Alert, AlertSpec, Severity};

/// Where new alerts are announced: desktop notifications in the app, the log in `leadline serve`.
pub trait Notifier: Send + Sync + 'static {
    fn notify(&self, alert: &Alert);
}

/// Announces alerts in the log only.
pub struct LogNotifier;

impl Notifier for LogNotifier {
    fn notify(&self, alert: &Alert) {
        tracing::warn!(kind = %alert.kind, key = %alert.key, title = %alert.title, "alert opened");
    }
}

async fn raise(app: &App, notifier: &dyn Notifier, spec: AlertSpec) {
    match alerts::raise(&app.store, &spec, Utc::now()).await {
        Ok((alert, true)) => {
            notifier.notify(&alert);
            let _ = app.live.send(LiveEvent::AlertsChanged);
        }
        Ok((_, false)) => {}
        Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot raise alert"),
    }
}

async fn resolve(app: &App, kind: &str, key: &str, note: &str) {
    match alerts::resolve(&app.store, kind, key, note, Utc::now()).await {
        Ok(true) => {
            let _ = app.live.send(LiveEvent::AlertsChanged);
        }
        Ok(false) => {}
        Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot resolve alert"),
    }
}

async fn on_worker_event(app: &App, notifier: &dyn Notifier, event: WorkerEvent) {
    match event {
        WorkerEvent::DeadLettered { target, class: ErrorClass::PermanentConfig, reason, .. } => {
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: "permanent_config",
                    key: target.clone(),
                    severity: Severity::Critical,
                    title: format!("Leads to {target} are being rejected: check the connection settings"),
                    detail: format!(
                        "{}. Every lead to {target} will fail the same way until the setup is fixed; \
                         then replay the permanent_config dead letters.",
                        reason.trim_end_matches('.')
                    ),
                },
            )
            .await
        }
        WorkerEvent::Breaker { target, to: BreakerState::Open, reason, .. } => {
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: "breaker_open",
                    key: target.clone(),
                    severity: Severity::Critical,
                    title: format!("{target} looks down: Leadline paused sending to it"),
                    detail: format!(
                        "{}. Leads keep queueing safely and are sent, oldest first, when {target} answers again.",
                        reason.trim_end_matches('.')
                    ),
                },
            )
            .await
        }
        WorkerEvent::Breaker { target, to: BreakerState::Closed, .. } => {
            resolve(app, "breaker_open", &target, "the target answers again").await
        }
        _ => {}
    }
}

/// Runs until aborted: reacts to worker events, samples the queue, pushes live health. One task, so that
/// aborting it releases everything it holds.
pub async fn run(app: App, notifier: Arc<dyn Notifier>) {
    let mut events = app.worker.as_ref().map(|w| w.events.subscribe());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last: Option<serde_json::Value> = None;
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            event = next_event(&mut events) => {
                if let Some(e) = event {
                    on_worker_event(&app, notifier.as_ref(), e).await;
                }
                continue;
            }
            _ = tick.tick() => {}
        }
        n += 1;
        let health = match api::health(&app).await {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "cannot compute health");
                continue;
            }
        };
        // Push only changes (the timestamp alone is not a change).
        let mut fingerprint = serde_json::to_value(&health).unwrap_or_default();
        if let Some(o) = fingerprint.as_object_mut() {
            o.remove("generated_at");
        }
        if last.as_ref() != Some(&fingerprint) {
            let _ = app.live.send(LiveEvent::Health(Box::new(health.clone())));
            last = Some(fingerprint);
        }
        if n % 5 == 1 {
            if let Err(e) = metrics::record_sample(&app.store, &health.queue).await {
                tracing::error!(error = %format!("{e:#}"), "cannot record sample");
            }
            check_queue(&app, notifier.as_ref(), &health.queue).await;
        }
    }
}

/// The next worker event; pends forever when there is no worker (or its channel closed).
async fn next_event(events: &mut Option<tokio::sync::broadcast::Receiver<WorkerEvent>>) -> Option<WorkerEvent> {
    let Some(rx) = events else { return std::future::pending().await };
    match rx.recv().await {
        Ok(e) => Some(e),
        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
            tracing::warn!(missed = n, "monitor fell behind worker events");
            None
        }
        Err(_) => {
            *events = None;
            None
        }
    }
}

async fn check_queue(app: &App, notifier: &dyn Notifier, queue: &crate::store::QueueHealth) {
    let limit = app.config.monitor.oldest_pending_alert_seconds as f64;
    match queue.overall.oldest_pending_age_seconds {
        Some(age) if age > limit => {
            let oldest_target = queue
                .targets
                .iter()
                .filter(|t| t.oldest_pending_age_seconds.is_some())
                .max_by(|a, b| {
                    a.oldest_pending_age_seconds
                        .partial_cmp(&b.oldest_pending_age_seconds)
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
                .map(|t| t.target.clone())
                .unwrap_or_default();
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: "oldest_pending",
                    key: "*".into(),
                    severity: Severity::Warning,
                    title: format!("A lead has been waiting {} for delivery", human_duration(age)),
                    detail: format!(
                        "The oldest undelivered lead (to {oldest_target}) has waited longer than {}. Check that target's breaker, rate limits and pause state.",
                        human_duration(limit)
                    ),
                },
            )
            .await
        }
        _ => resolve(app, "oldest_pending", "*", "the queue caught up").await,
    }
    // permanent_config alerts resolve once no such dead letter is open for their target.
    if let Ok(keys) = alerts::unresolved_keys(&app.store, "permanent_config").await {
        for key in keys {
            let open = queue
                .targets
                .iter()
                .find(|t| t.target == key)
                .and_then(|t| t.dead_open_by_class.get("permanent_config"))
                .copied()
                .unwrap_or(0);
            if open == 0 {
                resolve(app, "permanent_config", &key, "no configuration dead letter is open any more").await;
            }
        }
    }
}

/// "3 min", "1 h 20 min", "45 s".
pub fn human_duration(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min", s / 60)
    } else if s % 3600 < 60 {
        format!("{} h", s / 3600)
    } else {
        format!("{} h {} min", s / 3600, (s % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::human_duration;

    #[test]
    fn durations_read_like_a_person_would_say_them() {
        assert_eq!(human_duration(12.7), "12 s");
        assert_eq!(human_duration(125.0), "2 min");
        assert_eq!(human_duration(7200.0), "2 h");
        assert_eq!(human_duration(4800.0), "1 h 20 min");
    }
}
