//! Each source's volume against its baseline: the assessment behind `volume_drop` and `silence` alerts and the
//! Sources page.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::alerts::{Alert, AlertKind, AlertSpec, Severity};
use super::volume::{self, Assessment, Baseline, Verdict};
use super::{human_duration, metrics, raise, resolve, Notifier};
use crate::features::app::App;
use crate::store::Store;

/// What is happening with a source, in one word the Sources page turns into a label.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    /// Volume is what this hour of the week usually brings.
    Normal,
    /// Improbably few leads for this hour: a `volume_drop` alert.
    Drop,
    /// Nothing at all while leads were expected (since `assessment.silent_since`): a `silence` alert.
    Silent,
    /// Not enough history to know what is normal.
    Learning,
    /// Too little traffic is expected now to judge (nights, weekends).
    Low,
    /// Leadline has listened too briefly for any window to be judged; it will be at `assessment.judged_from`.
    Listening,
}

impl SourceState {
    /// The state an assessment amounts to: an alert's verdict first, then why nothing is judged, if it is not.
    pub fn of(a: &Assessment) -> SourceState {
        if a.silence == Verdict::Raise {
            SourceState::Silent
        } else if a.drop == Verdict::Raise {
            SourceState::Drop
        } else if a.baseline == volume::BaselineKind::Learning {
            SourceState::Learning
        } else if a.judged_from.is_some() {
            SourceState::Listening
        } else if a.p_value.is_none() {
            SourceState::Low
        } else {
            SourceState::Normal
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct SourceStatus {
    pub source: String,
    /// What is happening, in one word (see [`SourceState`]).
    pub state: SourceState,
    pub assessment: Assessment,
    pub last_event_at: Option<DateTime<Utc>>,
    /// Events per hour the baseline expects at this hour.
    pub expected_per_hour_now: Option<f64>,
    /// Since when Leadline has been listening to its sources (its start, in a real run).
    pub listening_since: DateTime<Utc>,
}

/// Assesses one source at `now` from its metric history and its recent events.
pub async fn assess_source(app: &App, source: &str, now: DateTime<Utc>) -> anyhow::Result<SourceStatus> {
    let m = &app.config.monitor;
    let tz = m.tz();
    let weeks = m.volume.baseline_weeks as i64;
    // From the start of the hour the baseline's weeks begin with: the oldest week's sample of this hour of the
    // week is in it (read from `now - weeks` it was left out and counted as zero).
    let weeks_ago = (now - chrono::Duration::weeks(weeks)).timestamp_millis();
    let since = DateTime::from_timestamp_millis(weeks_ago - weeks_ago.rem_euclid(3_600_000)).unwrap_or(now);
    let hourly = metrics::hourly_events(&app.store, source, since).await?;
    let first = metrics::first_hour(&app.store, source).await?;
    let baseline = Baseline::from_history(&hourly, first, now, tz, &m.volume, &m.business_hours);
    // Only time Leadline was listening counts: after a restart, the minutes it was down say nothing about the
    // source. The windows are clipped to it, so a few minutes after a start a busy source is judged on those.
    let before = heard_before_start(app, source).await?;
    let mut counts = Vec::new();
    for minutes in volume::listened_windows(&m.volume, Some(app.listening_since), now) {
        let from = now - chrono::Duration::minutes(minutes as i64);
        let since_start = count_since(&app.store, source, from.max(app.started_at)).await?;
        let earlier: f64 = before.iter().filter(|(at, _)| *at >= from).map(|(_, n)| n).sum();
        counts.push((minutes, since_start + earlier.round() as u64));
    }
    // A minute of the history with events had its last one by the minute's end.
    let heard_before = before.iter().filter(|(_, n)| *n > 0.0).map(|(at, _)| *at + chrono::Duration::minutes(1)).max();
    let last = last_event(&app.store, source).await?.max(heard_before);
    let assessment = volume::assess(&baseline, &counts, last, Some(app.listening_since), now, &m.volume);
    Ok(SourceStatus {
        source: source.to_string(),
        state: SourceState::of(&assessment),
        assessment,
        last_event_at: last,
        expected_per_hour_now: baseline.rate_at(now),
        listening_since: app.listening_since,
    })
}

/// What the monitor takes as heard from `source` before this process started: the recorded events per minute
/// from `App::listening_since` to the start, whole minutes only (the minute the process started in is counted
/// from the events themselves). Nothing in a real run, which listens from its start; in the demo started at a
/// point of its schedule, the seeded history of the demo's timeline before the start.
async fn heard_before_start(app: &App, source: &str) -> anyhow::Result<Vec<(DateTime<Utc>, f64)>> {
    if app.listening_since >= app.started_at {
        return Ok(Vec::new());
    }
    let minute = chrono::Duration::minutes(1);
    Ok(app
        .store
        .metric_buckets(60, 60, app.listening_since)
        .await?
        .into_iter()
        .filter(|b| b.metric == "events" && b.key == source && b.at + minute <= app.started_at)
        .map(|b| (b.at, b.sum))
        .collect())
}

/// Events of `source` received since `since`, by webhook or by polling (a polled source's leads are its volume;
/// leads recovered by reconciliation are old news).
async fn count_since(store: &Store, source: &str, since: DateTime<Utc>) -> anyhow::Result<u64> {
    store.live_events_since(source, since).await
}

/// When the last event of `source` arrived.
async fn last_event(store: &Store, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
    store.last_source_event(source).await
}

/// Assesses every configured source and raises or resolves its `volume_drop` and `silence` alerts.
pub async fn check_sources(app: &App, notifier: &dyn Notifier, now: DateTime<Utc>) {
    for source in app.config.sources.keys() {
        let status = match assess_source(app, source, now).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(source, error = %format!("{e:#}"), "cannot assess source volume");
                continue;
            }
        };
        apply(app, notifier, &status, now).await;
    }
}

/// How a silence alert that grew out of a `volume_drop` says so; kept in its detail while the silence lasts.
const GREW_FROM_DROP: &str = "It began as \"Fewer leads than usual\"";

/// Raises or resolves the alerts an assessment calls for. One incident, one alert, one announcement: a source that
/// falls silent gradually first raises `volume_drop` (its count is improbably low well before the silence
/// threshold); when the silence opens, that alert *becomes* the silence ([`Store::escalate_alert`]) — critical, with
/// the silence's words and a sentence that it began as fewer leads than usual — keeping its opening time, its
/// acknowledgement and its announcements. It is announced only if the drop was not (held for a digest or quiet
/// hours, or not announced by its policy); otherwise the person who heard of the drop is not told a second time,
/// and the silence's own policy reminds them while nobody acknowledges it.
pub async fn apply(app: &App, notifier: &dyn Notifier, status: &SourceStatus, now: DateTime<Utc>) {
    let a = &status.assessment;
    let source = &status.source;
    let threshold = app.config.monitor.volume.silence_minutes as f64;
    let silent_for = a.silent_minutes.filter(|m| *m >= threshold);
    // Silent as far as the alert goes: raised now, or raised earlier and still open (a quiet hour keeps it).
    let silent = a.silence == Verdict::Raise || (silent_for.is_some() && a.silence != Verdict::Clear);
    if let Some(minutes) = silent_for.filter(|_| silent) {
        let open = open_alert(&app.store, AlertKind::Silence, source).await;
        // The drop this silence grows out of: the one open now (the silence opens), or the one it already grew from.
        let drop = match &open {
            None if a.silence == Verdict::Raise => open_alert(&app.store, AlertKind::VolumeDrop, source).await,
            _ => None,
        };
        let grew_from =
            drop.as_ref().or(open.as_ref().filter(|o| o.detail.contains(GREW_FROM_DROP))).map(|d| d.opened_at);
        let spec = AlertSpec {
            kind: AlertKind::Silence,
            key: source.clone(),
            severity: Severity::Critical,
            title: format!("No leads from {source} for {}", human_duration(minutes * 60.0)),
            detail: format!(
                "Nothing since {} UTC, while about {:.0} were expected. A webhook subscription may have dropped, a \
                 form or its script may be broken, or the campaign was stopped. Reconciliation, where set up, \
                 recovers leads the source still lists.{}",
                a.silent_since.map(|t| t.format("%H:%M").to_string()).unwrap_or_else(|| "?".into()),
                a.expected_during_silence.unwrap_or(0.0),
                grew_from
                    .map(|at| format!(" {GREW_FROM_DROP} at {} UTC: one incident, one alert.", at.format("%H:%M")))
                    .unwrap_or_default()
            ),
        };
        match a.silence {
            Verdict::Raise if drop.is_some() => escalate(app, notifier, spec, now).await,
            Verdict::Raise => raise(app, notifier, spec, now).await,
            // Still silent: the open alert's figures follow the silence, without a new announcement.
            _ => {
                if let Err(e) =
                    super::alerts::refresh(&app.store, spec.kind, &spec.key, &spec.title, &spec.detail).await
                {
                    tracing::warn!(error = %format!("{e:#}"), "cannot refresh the silence alert");
                }
            }
        }
    }
    if a.silence == Verdict::Clear {
        resolve(app, AlertKind::Silence, source, "leads arrive again", now).await;
    }
    // One incident, one alert: a silence is also "fewer leads than usual", which the silence alert already says.
    if silent {
        resolve(app, AlertKind::VolumeDrop, source, "the source fell silent: see the silence alert", now).await;
        return;
    }
    match a.drop {
        Verdict::Raise => {
            let expected = a.expected.unwrap_or(0.0);
            let spec = AlertSpec {
                kind: AlertKind::VolumeDrop,
                key: source.clone(),
                severity: Severity::Warning,
                title: format!("Fewer leads than usual from {source}"),
                detail: format!(
                    "{} in the last {} min where about {expected:.0} are normal at this hour ({:.0} %). Chance alone \
                     gives a count this low {}. Check the forms, the webhook subscription and the campaigns of \
                     {source}.",
                    a.observed,
                    a.window_minutes,
                    a.observed as f64 / expected.max(1.0) * 100.0,
                    chance_in_words(a.p_value.unwrap_or(0.0))
                ),
            };
            raise(app, notifier, spec, now).await;
        }
        Verdict::Clear => resolve(app, AlertKind::VolumeDrop, source, "volume is back to normal", now).await,
        Verdict::Keep => {}
    }
}

/// The unresolved alert of (kind, key), if any (`None` too when the store cannot say: logged).
async fn open_alert(store: &Store, kind: AlertKind, key: &str) -> Option<Alert> {
    match store.unresolved_alerts().await {
        Ok(open) => open.into_iter().find(|a| a.kind == kind && a.key == key),
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "cannot read open alerts");
            None
        }
    }
}

/// Turns the source's open `volume_drop` into the silence `spec` describes, and announces it only if the drop
/// was not announced; falls back to raising the silence if there was nothing to turn (resolved meanwhile).
async fn escalate(app: &App, notifier: &dyn Notifier, spec: AlertSpec, now: DateTime<Utc>) {
    let mut spec = spec;
    spec.title = crate::model::privacy::mask_text(&spec.title);
    spec.detail = crate::model::privacy::mask_text(&spec.detail);
    let alert = match app.store.escalate_alert(AlertKind::VolumeDrop, &spec, now).await {
        Ok(Some(alert)) => alert,
        Ok(None) => return raise(app, notifier, spec, now).await,
        Err(e) => return tracing::error!(error = %format!("{e:#}"), "cannot turn the volume drop into a silence"),
    };
    tracing::info!(source = %spec.key, alert = alert.id, "the volume drop became a silence: the same alert");
    if alert.notified_at.is_none() {
        // The drop was held (a digest, quiet hours) or not announced: the silence is announced as new.
        let m = &app.config.monitor;
        let decision = super::notify::on_open(
            &m.policy(alert.kind),
            alert.severity,
            super::quiet_now(app, now),
            m.quiet_hours_hold_critical,
        );
        let result = match decision {
            super::notify::Announce::Now => {
                notifier.notify_at(&alert.title, &alert.detail, &alert.place);
                super::alerts::mark_notified(&app.store, alert.id, now).await
            }
            super::notify::Announce::Hold(why) => super::alerts::hold(&app.store, alert.id, why).await,
            super::notify::Announce::Never => Ok(()),
        };
        if let Err(e) = result {
            tracing::error!(error = %format!("{e:#}"), "cannot record how the alert was announced");
        }
    }
    // Channels that announced the drop keep that announcement (one per alert and channel); one that did not, as
    // its policy for a silence says.
    super::channels::on_open(app, &alert, now).await;
    let _ = app.live.send(crate::features::app::LiveEvent::AlertsChanged);
}

/// How rare a count is, in words a person reads at a glance: "about once in 2,800 such periods".
pub fn chance_in_words(p: f64) -> String {
    if p.is_nan() || p <= 0.0 {
        return "practically never".into();
    }
    let once_in = 1.0 / p;
    if once_in < 2.0 {
        return "often".into();
    }
    // Two significant digits, grouped by thousands: 2,800 rather than 2777.8.
    let magnitude = 10f64.powi((once_in.log10().floor() as i32 - 1).max(0));
    let rounded = ((once_in / magnitude).round() * magnitude) as u64;
    let digits = rounded.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("about once in {grouped} such periods")
}

#[cfg(test)]
mod words_tests {
    use super::chance_in_words;

    #[test]
    fn rare_counts_are_said_in_words_not_exponents() {
        assert_eq!(chance_in_words(3.6e-4), "about once in 2,800 such periods");
        assert_eq!(chance_in_words(0.02), "about once in 50 such periods");
        assert_eq!(chance_in_words(1e-7), "about once in 10,000,000 such periods");
        assert_eq!(chance_in_words(0.0), "practically never");
        assert_eq!(chance_in_words(0.9), "often");
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;
    use volume::BaselineKind;

    fn judged() -> Assessment {
        Assessment {
            baseline: BaselineKind::HourOfWeek,
            window_minutes: 15,
            observed: 30,
            expected: Some(30.0),
            p_value: Some(0.6),
            drop: Verdict::Clear,
            silent_minutes: Some(0.2),
            expected_during_silence: Some(0.4),
            silent_since: None,
            silence: Verdict::Clear,
            heard_since_start: true,
            judged_from: None,
        }
    }

    #[test]
    fn each_state_says_what_is_true_first_an_alert_then_why_nothing_is_judged() {
        assert_eq!(SourceState::of(&judged()), SourceState::Normal);
        let silent = Assessment { silence: Verdict::Raise, drop: Verdict::Keep, ..judged() };
        assert_eq!(SourceState::of(&silent), SourceState::Silent);
        assert_eq!(SourceState::of(&Assessment { drop: Verdict::Raise, ..judged() }), SourceState::Drop);
        let early = "2026-03-02T10:06:00Z".parse().ok();
        let listening = Assessment { p_value: None, drop: Verdict::Keep, judged_from: early, ..judged() };
        assert_eq!(SourceState::of(&listening), SourceState::Listening);
        assert_eq!(SourceState::of(&Assessment { judged_from: None, ..listening.clone() }), SourceState::Low);
        let learning = Assessment { baseline: BaselineKind::Learning, ..listening };
        assert_eq!(SourceState::of(&learning), SourceState::Learning);
    }
}
