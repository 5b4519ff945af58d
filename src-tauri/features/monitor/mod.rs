//! Monitoring: alerts raised from what the worker reports, from the queue's state and from each source's volume;
//! metric history; the live health feed the UI listens to.
//!
//! Alert kinds (what each means for an operator: `docs/operators.md`):
//! - `volume_drop` (warning, per source): improbably few leads for this hour of the week ([`volume`]).
//! - `silence` (critical, per source): nothing at all while the baseline expected traffic ([`volume`]).
//! - `permanent_config` (critical, per target): a lead died because our setup is wrong (credentials, a deleted
//!   field). Resolves when no such dead letter is open.
//! - `dead_letter_growth` (warning, per target): `monitor.dead_letter_growth_per_hour` or more dead letters in the
//!   last hour. Resolves below half of that.
//! - `oldest_pending` (warning, overall): a lead has waited longer than `monitor.oldest_pending_alert_seconds`.
//! - `breaker_open` (critical, per target): Leadline stopped sending to a target that looks down.
//! - `retry_budget` (warning, per target): leads projected to run out of their retry time ([`budget`]): their
//!   target's hold or open breaker outlasts what is left of their budget, or their next try comes in its last
//!   part. They will be dead-lettered unless the target recovers. Resolves when no lead is projected to.
//! - `reconciliation_found` (warning, per source): the source listed leads whose webhooks never arrived
//!   ([`crate::features::reconcile`]); they were ingested. Resolves when a later run finds none missing.
//! - `credentials` (critical, per credential — the environment variable holding it): a target or a source
//!   refused Leadline's token (Meta's expired page token). The leads wait; resolves when a request with it
//!   works again.
//! - `source_failing` (per source): reconciliation has failed for `failing_alert_minutes` (unreachable:
//!   critical; throttled: warning), so lost webhooks are not being recovered. Resolves after a good run.
//!
//! How each is announced (immediately, in a digest, in quiet hours, again when nobody acknowledged it) is decided
//! by [`notify`].

pub mod alerts;
pub mod budget;
pub mod channels;
pub mod glance;
pub mod health;
pub mod metrics;
pub mod notify;
pub mod sources;
pub mod volume;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::features::app::{App, LiveEvent};
use crate::features::delivery::breaker::BreakerState;
use crate::features::delivery::worker::WorkerEvent;
use crate::model::ErrorClass;
use alerts::{AlertKind, AlertSpec, Held, Severity};
use notify::Announce;

pub use crate::runtime::Notifier;
use health::{situation, verdict, BreakerView, HealthView};

/// The health view at `now`: the queue, each target's situation as this process's worker sees it, the verdict.
pub async fn health(app: &App, now: DateTime<Utc>) -> anyhow::Result<HealthView> {
    let targets: Vec<String> = app.config.targets.keys().cloned().collect();
    let queue = app.store.queue_health(now, &targets).await?;
    let breakers: Vec<BreakerView> = app
        .worker
        .as_ref()
        .map(|w| {
            w.targets
                .current()
                .iter()
                .map(|(name, t)| {
                    let (state, opened_at) = t.breaker_state();
                    let situation = situation(t.is_paused(), t.hold(now), state, opened_at);
                    BreakerView { target: name.clone(), state, opened_at, situation }
                })
                .collect()
        })
        .unwrap_or_default();
    let situations: Vec<_> = breakers.iter().map(|b| (b.target.clone(), b.situation.clone())).collect();
    let open = alerts::unresolved(&app.store).await?;
    let verdict = channels::with_troubles(verdict(&open, &situations, &queue), &channels::troubles(app).await);
    Ok(HealthView { queue, breakers, verdict })
}

/// Announces alerts in the log only.
pub struct LogNotifier;

impl Notifier for LogNotifier {
    fn notify(&self, title: &str, body: &str) {
        tracing::warn!(title, body, "alert");
    }
}

fn quiet_now(app: &App, now: DateTime<Utc>) -> bool {
    let m = &app.config.monitor;
    m.quiet_hours.as_ref().is_some_and(|q| q.contains(now.with_timezone(&m.tz()).time()))
}

/// Opens the alert (or counts another occurrence) and announces a new one according to its kind's policy.
/// Alerts quote CRMs' messages: e-mail addresses and phone numbers in them are masked before the alert is stored,
/// shown or sent (see `privacy`).
pub async fn raise(app: &App, notifier: &dyn Notifier, mut spec: AlertSpec, now: DateTime<Utc>) {
    spec.title = crate::model::privacy::mask_text(&spec.title);
    spec.detail = crate::model::privacy::mask_text(&spec.detail);
    let alert = match alerts::raise(&app.store, &spec, now).await {
        Ok((alert, true)) => alert,
        Ok((_, false)) => return,
        Err(e) => return tracing::error!(error = %format!("{e:#}"), "cannot raise alert"),
    };
    let m = &app.config.monitor;
    let decision =
        notify::on_open(&m.policy(alert.kind), alert.severity, quiet_now(app, now), m.quiet_hours_hold_critical);
    let result = match decision {
        Announce::Now => {
            notifier.notify_at(&alert.title, &alert.detail, &alert.place);
            alerts::mark_notified(&app.store, alert.id, now).await
        }
        Announce::Hold(why) => alerts::hold(&app.store, alert.id, why).await,
        Announce::Never => Ok(()),
    };
    if let Err(e) = result {
        tracing::error!(error = %format!("{e:#}"), "cannot record how the alert was announced");
    }
    // Slack, e-mail, webhooks: each channel decides on its own and its task sends (never here, never blocking).
    channels::on_open(app, &alert, now).await;
    let _ = app.live.send(LiveEvent::AlertsChanged);
}

pub async fn resolve(app: &App, kind: AlertKind, key: &str, note: &str, now: DateTime<Utc>) {
    match alerts::resolve(&app.store, kind, key, note, now).await {
        Ok(true) => {
            let _ = app.live.send(LiveEvent::AlertsChanged);
        }
        Ok(false) => {}
        Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot resolve alert"),
    }
}

/// Digest and re-notification, run every few seconds. `last_digest` is when the last digest went out.
pub async fn announce_due(app: &App, notifier: &dyn Notifier, now: DateTime<Utc>, last_digest: &mut DateTime<Utc>) {
    let m = &app.config.monitor;
    let quiet = quiet_now(app, now);
    let mut held = Vec::new();
    if !quiet {
        match alerts::take_held(&app.store, Held::QuietHours, now).await {
            Ok(a) => held.extend(a),
            Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot read alerts held over quiet hours"),
        }
        if now - *last_digest >= chrono::Duration::minutes(m.digest_interval_minutes as i64) {
            *last_digest = now;
            match alerts::take_held(&app.store, Held::Digest, now).await {
                Ok(a) => held.extend(a),
                Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot read the digest"),
            }
        }
    }
    if !held.is_empty() {
        let (title, body) = notify::digest_text(&held);
        // One alert's digest opens on its place; several open on the alerts page.
        let place = match held.as_slice() {
            [one] => one.place.clone(),
            _ => crate::model::Place::page(crate::model::Page::Alerts),
        };
        notifier.notify_at(&title, &body, &place);
    }
    let open = match alerts::unacknowledged(&app.store).await {
        Ok(a) => a,
        Err(e) => return tracing::error!(error = %format!("{e:#}"), "cannot read open alerts"),
    };
    for alert in open {
        if notify::renotify_due(&m.policy(alert.kind), &alert, now, quiet, m.quiet_hours_hold_critical) {
            let since = human_duration((now - alert.opened_at).num_seconds() as f64);
            notifier.notify_at(
                &format!("Still open: {}", alert.title),
                &format!("Open for {since}, not acknowledged. {}", alert.detail),
                &alert.place,
            );
            if let Err(e) = alerts::mark_notified(&app.store, alert.id, now).await {
                tracing::error!(error = %format!("{e:#}"), "cannot record re-notification");
            }
        }
    }
}

async fn on_worker_event(app: &App, notifier: &dyn Notifier, event: WorkerEvent) {
    let now = app.clock.now();
    match event {
        WorkerEvent::DeadLettered { target, class: ErrorClass::PermanentConfig, reason, .. } => {
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: AlertKind::PermanentConfig,
                    key: target.clone(),
                    severity: Severity::Critical,
                    title: format!("Leads to {target} are being rejected: check the connection settings"),
                    detail: format!(
                        "{}. Every lead to {target} will fail the same way until the setup is fixed; \
                         then replay its dead letters of the class \"setup problem\".",
                        reason.trim_end_matches('.')
                    ),
                },
                now,
            )
            .await
        }
        WorkerEvent::Breaker { target, to: BreakerState::Open, reason, .. } => {
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: AlertKind::BreakerOpen,
                    key: target.clone(),
                    severity: Severity::Critical,
                    title: format!("{target} looks down: Leadline paused sending to it"),
                    detail: format!(
                        "{}. Leads keep queueing safely and are sent, oldest first, when {target} answers again.",
                        reason.trim_end_matches('.')
                    ),
                },
                now,
            )
            .await
        }
        WorkerEvent::DeadLettered {
            target,
            class: class @ (ErrorClass::PermanentData | ErrorClass::Ambiguous),
            reason,
            ..
        } => {
            // The first dead letter of a cause reaches a person; more of the same cause are the same alert.
            let cause = crate::features::dlq::cause_of(&reason);
            let what = if class == ErrorClass::PermanentData { "bad lead data" } else { "an unknown outcome" };
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: AlertKind::NewCause,
                    key: format!("{target}: {cause}"),
                    severity: Severity::Warning,
                    title: format!("A new cause of dead letters at {target}: {what}"),
                    detail: format!(
                        "{}. Leads with this problem are parked, not lost. Open the cause group: \"Fix data and \
                         replay\" corrects a field and sends them again; if the mapping is wrong, correct it in the \
                         configuration (the Targets page shows it), then replay the group.",
                        cause.trim_end_matches('.')
                    ),
                },
                now,
            )
            .await
        }
        WorkerEvent::Breaker { target, to: BreakerState::Closed, .. } => {
            resolve(app, AlertKind::BreakerOpen, &target, "the target answers again", now).await
        }
        WorkerEvent::CredentialRefused { target, credential, reason } => {
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: AlertKind::Credentials,
                    key: credential.clone(),
                    severity: Severity::Critical,
                    title: format!("{target} refused its credential ({credential}): its leads are waiting"),
                    detail: format!(
                        "{}. Put a new token in {credential} (the secrets file or the environment), then reload \
                         secrets: the button on the Targets page, `leadline reload`, or SIGHUP — no restart. The \
                         leads wait without using attempts (nothing is dead-lettered) and go on by themselves once \
                         the token works.",
                        reason.trim_end_matches('.')
                    ),
                },
                now,
            )
            .await
        }
        WorkerEvent::SetupRefused { target, reason } => {
            raise(
                app,
                notifier,
                AlertSpec {
                    kind: AlertKind::PermanentConfig,
                    key: target.clone(),
                    severity: Severity::Critical,
                    title: format!("{target} refuses its own setup: its leads are waiting"),
                    detail: format!(
                        "{}. Every lead to {target} would fail the same way, so none is dead-lettered: they wait \
                         without using attempts, one lead tries again after each pause, and all go on by themselves \
                         once the settings of {target} are fixed (the Targets page shows them).",
                        reason.trim_end_matches('.')
                    ),
                },
                now,
            )
            .await
        }
        WorkerEvent::SetupAccepted { target } => {
            resolve(app, AlertKind::PermanentConfig, &target, "the step sent a lead again", now).await
        }
        WorkerEvent::CredentialAccepted { credential, .. } => {
            resolve(app, AlertKind::Credentials, &credential, "a request with the credential worked again", now).await
        }
        _ => {}
    }
}

/// Team mode: what the desks connected to this process must hear although another process did it — the leader
/// raises, escalates and resolves alerts and paces replays, and a person's acknowledgement or replay may reach
/// any process. Each second this process compares a digest of the alerts and of the recent replays with the last
/// one and tells its own live feed when either moved, so a desk on any process of the team stays live. (On SQLite
/// one process does everything and tells its feed itself.)
#[derive(Default)]
struct TeamFeed {
    alerts: Option<String>,
    replays: Option<String>,
}

impl TeamFeed {
    async fn follow(&mut self, app: &App) {
        if let Ok(list) = app.store.alerts(200).await {
            let digest = list
                .iter()
                .map(|a| {
                    format!(
                        "{}:{}:{}:{}:{:?}:{:?}:{:?}",
                        a.id,
                        a.kind.as_str(),
                        a.occurrences,
                        a.last_seen_at.timestamp_millis(),
                        a.acknowledged_at,
                        a.resolved_at,
                        a.notified_at
                    )
                })
                .collect::<Vec<_>>()
                .join(";");
            if self.alerts.as_ref().is_some_and(|d| *d != digest) {
                let _ = app.live.send(LiveEvent::AlertsChanged);
            }
            self.alerts = Some(digest);
        }
        if let Ok(list) = crate::features::replay::recent(&app.store, 20).await {
            let digest = serde_json::to_string(&list).unwrap_or_default();
            if let Some(before) = &self.replays {
                if *before != digest {
                    let replay_id = list.first().map(|r| r.replay_id).unwrap_or(0);
                    let _ = app.live.send(LiveEvent::ReplayChanged { replay_id });
                }
            }
            self.replays = Some(digest);
        }
    }
}

/// Runs until aborted: reacts to worker events, samples the queue, pushes live health, checks sources and
/// announces alerts. One task, so that aborting it releases everything it holds.
pub async fn run(app: App, notifier: Arc<dyn Notifier>) {
    let mut events = app.worker.as_ref().map(|w| w.events.subscribe());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last: Option<serde_json::Value> = None;
    let mut team_feed = TeamFeed::default();
    let mut recorder = metrics::Recorder::for_config(&app.config);
    let mut last_digest = app.clock.now();
    // Each alert channel sends from a task of its own, aborted with this one (dropping the set aborts them).
    let _channels = channels::run(&app);
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
        let now = app.clock.now();
        let health = match health(&app, now).await {
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
        if app.store.is_shared() {
            team_feed.follow(&app).await;
        }
        // The judgements below are the team's: one process makes them (runtime::leadership); every process pushes
        // its own live health above, to the desks connected to it.
        if !app.leadership.is_leader() {
            continue;
        }
        if n % 5 == 1 {
            if let Err(e) =
                metrics::record(&app.store, &mut recorder, &health.queue, &app.config.monitor.metrics, now).await
            {
                tracing::error!(error = %format!("{e:#}"), "cannot record metrics");
            }
            check_queue(&app, notifier.as_ref(), &health.queue, now).await;
            announce_due(&app, notifier.as_ref(), now, &mut last_digest).await;
        }
        if n % 30 == 3 {
            sources::check_sources(&app, notifier.as_ref(), now).await;
            check_targets(&app, notifier.as_ref(), now).await;
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

/// Raises or resolves the `oldest_pending` alert, and resolves `new_cause` alerts whose target has no such dead
/// letter open any more, from the queue's health at `now`. The monitor runs it every few seconds.
pub async fn check_queue(app: &App, notifier: &dyn Notifier, queue: &crate::store::QueueHealth, now: DateTime<Utc>) {
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
                    kind: AlertKind::OldestPending,
                    key: "*".into(),
                    severity: Severity::Warning,
                    title: format!("A lead has been waiting {} for delivery", human_duration(age)),
                    detail: format!(
                        "The oldest undelivered lead (to {oldest_target}) has waited longer than {}. Check that target's breaker, rate limits and pause state.",
                        human_duration(limit)
                    ),
                },
                now,
            )
            .await
        }
        _ => resolve(app, AlertKind::OldestPending, "*", "the queue caught up", now).await,
    }
    // new_cause alerts resolve once their target has no open dead letter of bad data or unknown outcome.
    if let Ok(keys) = alerts::unresolved_keys(&app.store, AlertKind::NewCause).await {
        for key in keys {
            let target = key.split(": ").next().unwrap_or_default();
            let open: i64 = queue
                .targets
                .iter()
                .find(|t| t.target == target)
                .map(|t| {
                    t.dead_open_by_class.get("permanent_data").copied().unwrap_or(0)
                        + t.dead_open_by_class.get("ambiguous").copied().unwrap_or(0)
                })
                .unwrap_or(0);
            if open == 0 {
                resolve(app, AlertKind::NewCause, &key, "no such dead letter is open any more", now).await;
            }
        }
    }
    // permanent_config alerts resolve once no such dead letter is open for their target.
    if let Ok(keys) = alerts::unresolved_keys(&app.store, AlertKind::PermanentConfig).await {
        for key in keys {
            let open = queue
                .targets
                .iter()
                .find(|t| t.target == key)
                .and_then(|t| t.dead_open_by_class.get("permanent_config"))
                .copied()
                .unwrap_or(0);
            // A target holding its leads for its setup keeps its alert until a lead goes through.
            let holding =
                app.worker.as_ref().and_then(|w| w.targets.get(&key)).is_some_and(|t| t.refused_setup().is_some());
            if open == 0 && !holding {
                resolve(app, AlertKind::PermanentConfig, &key, "no configuration dead letter is open any more", now)
                    .await;
            }
        }
    }
}

/// Per target: dead-letter growth over the last hour, and leads about to run out of retry time.
pub async fn check_targets(app: &App, notifier: &dyn Notifier, now: DateTime<Utc>) {
    let m = &app.config.monitor;
    let growth = match metrics::sum_since(&app.store, "dead_lettered", now - chrono::Duration::hours(1)).await {
        Ok(g) => g,
        Err(e) => return tracing::error!(error = %format!("{e:#}"), "cannot read dead-letter growth"),
    };
    let threshold = m.dead_letter_growth_per_hour as f64;
    for (target, tc) in app.config.targets.iter() {
        let n = growth.get(target).copied().unwrap_or(0.0);
        if n >= threshold {
            let spec = AlertSpec {
                kind: AlertKind::DeadLetterGrowth,
                key: target.clone(),
                severity: Severity::Warning,
                title: format!("{n:.0} leads to {target} were dead-lettered in the last hour"),
                detail: format!(
                    "More than the {threshold:.0} an hour this alert watches for. Open Dead letters, filter by \
                     {target} and look at the groups: one cause usually explains most of them."
                ),
            };
            raise(app, notifier, spec, now).await;
        } else if n < threshold / 2.0 {
            resolve(app, AlertKind::DeadLetterGrowth, target, "dead letters no longer accumulate", now).await;
        }
        check_budget(app, notifier, target, tc, now).await;
    }
}

/// The `retry_budget` alert of one target: raised while any of its waiting leads is projected to run out of its
/// retry time ([`budget`]: a hold or open breaker outlasting what is left, or a next try in the last part of the
/// budget), resolved when none is.
async fn check_budget(
    app: &App,
    notifier: &dyn Notifier,
    target: &str,
    tc: &crate::config::TargetConfig,
    now: DateTime<Utc>,
) {
    let budget = chrono::Duration::seconds(tc.backoff.budget_seconds as i64);
    let warning = chrono::Duration::minutes(app.config.monitor.retry_budget_warning_minutes as i64);
    // What keeps the target from sending, as this process's worker sees it (in team mode it follows the team's
    // holds and breaker; the monitor runs in the leader).
    let blocked = app.worker.as_ref().and_then(|w| w.targets.get(target)).and_then(|t| {
        let (state, opened_at) = t.breaker_state();
        let cooldown = chrono::Duration::milliseconds(t.config().breaker.cooldown_ms as i64);
        budget::blocked(t.hold(now).as_ref(), state, opened_at, cooldown, now)
    });
    let projection = budget::Projection::new(budget, warning, now, blocked.as_ref());
    let (started_by, own_wait) = projection.as_query();
    let (count, oldest) = match app.store.running_out_of_budget(target, started_by, own_wait).await {
        Ok((count, Some(oldest))) if count > 0 => (count, oldest),
        Ok(_) => {
            let note = "no lead is projected to run out of its retry time any more";
            return resolve(app, AlertKind::RetryBudget, target, note, now).await;
        }
        Err(e) => return tracing::error!(error = %format!("{e:#}"), "cannot read retry budgets"),
    };
    let leads = if count == 1 { "lead" } else { "leads" };
    let ends = oldest + budget;
    let (title, detail) = match blocked.filter(|b| b.until >= ends) {
        Some(b) => {
            let until = b.until.format("%H:%M UTC");
            let before = match b.by {
                budget::Blocker::RateLimited => format!("before the target's hold ends at {until}"),
                budget::Blocker::Credentials => format!("before the target's next credential probe at {until}"),
                budget::Blocker::Setup => format!("before the step's next probe of its setup at {until}"),
                budget::Blocker::Breaker => format!("before the target's breaker lets a probe through at {until}"),
            };
            (
                format!("{count} {leads} to {target} will run out of retry time {before}"),
                format!(
                    "Their retry budget ({}) ends before then: the oldest's at {}. Each is tried once more when                      {target} takes requests again, and a lead whose budget has ended is dead-lettered if that try                      fails. Check {target}'s rate limits, credential and breaker on the Targets page.",
                    human_duration(budget.num_seconds() as f64),
                    ends.format("%H:%M UTC"),
                ),
            )
        }
        None => (
            format!(
                "{count} {leads} to {target} will run out of retry time: the oldest's budget ends at {}",
                ends.format("%H:%M UTC")
            ),
            format!(
                "The oldest has {} of its {} retry budget left, too little for more than a last try or two with \
                 the backoff's waits between them; a lead that fails after its budget has ended is dead-lettered. \
                 Check {target}'s breaker, pause state and rate limits.",
                human_duration((ends - now).num_seconds() as f64),
                human_duration(budget.num_seconds() as f64),
            ),
        ),
    };
    let spec =
        AlertSpec { kind: AlertKind::RetryBudget, key: target.to_string(), severity: Severity::Warning, title, detail };
    raise(app, notifier, spec, now).await;
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
