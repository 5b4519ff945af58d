//! Each source's volume against its baseline: the assessment behind `volume_drop` and `silence` alerts and the
//! Sources page.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::alerts::{AlertKind, AlertSpec, Severity};
use super::volume::{self, Assessment, Baseline, Verdict};
use super::{human_duration, metrics, raise, resolve, Notifier};
use crate::runtime::App;
use crate::store::Store;

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct SourceStatus {
    pub source: String,
    /// `normal`, `drop`, `silent`, `learning` (not enough history), `low` (too little traffic expected now to
    /// judge) or `starting` (Leadline has been listening for less than the shortest window).
    pub state: String,
    pub assessment: Assessment,
    pub last_event_at: Option<DateTime<Utc>>,
    /// Events per hour the baseline expects at this hour.
    pub expected_per_hour_now: Option<f64>,
}

/// Assesses one source at `now` from its metric history and its recent events.
pub async fn assess_source(app: &App, source: &str, now: DateTime<Utc>) -> anyhow::Result<SourceStatus> {
    let m = &app.config.monitor;
    let tz = m.tz();
    let weeks = m.volume.baseline_weeks as i64;
    let hourly = metrics::hourly_events(&app.store, source, now - chrono::Duration::weeks(weeks)).await?;
    let first = metrics::first_hour(&app.store, source).await?;
    let baseline = Baseline::from_history(&hourly, first, now, tz, &m.volume, &m.business_hours);
    // Only windows Leadline was listening for all along: after a restart, the minutes it was down say nothing
    // about the source.
    let uptime_minutes = (now - app.started_at).num_minutes().max(0) as u64;
    let mut counts = Vec::new();
    for minutes in volume::windows(&m.volume).into_iter().filter(|w| *w <= uptime_minutes) {
        counts.push((minutes, count_since(&app.store, source, now - chrono::Duration::minutes(minutes as i64)).await?));
    }
    let last = last_event(&app.store, source).await?;
    let assessment = volume::assess(&baseline, &counts, last, Some(app.started_at), now, &m.volume);
    let state = if counts.is_empty() {
        "starting"
    } else if assessment.silence == Verdict::Raise {
        "silent"
    } else if assessment.drop == Verdict::Raise {
        "drop"
    } else if baseline.kind == volume::BaselineKind::Learning {
        "learning"
    } else if assessment.p_value.is_none() {
        "low"
    } else {
        "normal"
    };
    Ok(SourceStatus {
        source: source.to_string(),
        state: state.into(),
        assessment,
        last_event_at: last,
        expected_per_hour_now: baseline.rate_at(now),
    })
}

/// Events of `source` received since `since` (webhooks only: leads recovered by reconciliation are old news).
async fn count_since(store: &Store, source: &str, since: DateTime<Utc>) -> anyhow::Result<u64> {
    store.webhook_events_since(source, since).await
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

/// Raises or resolves the alerts an assessment calls for.
pub async fn apply(app: &App, notifier: &dyn Notifier, status: &SourceStatus, now: DateTime<Utc>) {
    let a = &status.assessment;
    let source = &status.source;
    let threshold = app.config.monitor.volume.silence_minutes as f64;
    let silent_for = a.silent_minutes.filter(|m| *m >= threshold);
    // Silent as far as the alert goes: raised now, or raised earlier and still open (a quiet hour keeps it).
    let silent = a.silence == Verdict::Raise || (silent_for.is_some() && a.silence != Verdict::Clear);
    if let Some(minutes) = silent_for.filter(|_| silent) {
        let spec = AlertSpec {
            kind: AlertKind::Silence,
            key: source.clone(),
            severity: Severity::Critical,
            title: format!("No leads from {source} for {}", human_duration(minutes * 60.0)),
            detail: format!(
                "About {:.0} were expected in that time. A webhook subscription may have dropped, a form or its \
                 script may be broken, or the campaign was stopped. Reconciliation, where set up, recovers leads \
                 the source still lists.",
                a.expected_during_silence.unwrap_or(0.0)
            ),
        };
        match a.silence {
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
