//! The health view: the queue, each target's situation and the one verdict, from the same facts as the alerts.
//! The types and the pure functions; [`crate::features::monitor::health`] computes it from an app at an instant.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{AlertKind, BreakerState, Hold, HoldReason, Place, Severity};
use crate::store::{Alert, QueueHealth};

#[derive(Debug, Clone, Serialize, Deserialize, ts_rs::TS)]
pub struct BreakerView {
    pub target: String,
    pub state: BreakerState,
    pub opened_at: Option<DateTime<Utc>>,
    /// What the target is doing, all things considered (a person's pause, a hold, the breaker).
    pub situation: TargetSituation,
}

/// What a target is really doing now, in the order a person needs to know it: a person's pause first, then a
/// refused credential, a target that looks down, a rate limit, a probe after failures; otherwise it is sending.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetSituation {
    Sending,
    /// Someone paused it; its leads queue until resumed.
    PausedByPerson,
    /// It refused the credential in this variable; one lead probes at `next_try`.
    RefusingCredentials {
        credential: String,
        next_try: DateTime<Utc>,
    },
    /// It refused its own setup (a template, a region) for this reason; one lead probes at `next_try`.
    RefusingSetup {
        reason: String,
        next_try: DateTime<Utc>,
    },
    /// The breaker opened: it kept failing, sending is paused (since `since`) until a probe succeeds.
    Down {
        since: Option<DateTime<Utc>>,
    },
    /// It said when to come back (or Leadline paces it near its limit): nothing is sent before `until`.
    RateLimited {
        until: DateTime<Utc>,
    },
    /// After failures, one lead tests whether it answers again.
    Testing,
}

/// A target's situation from its facts. Pure.
pub fn situation(
    paused: bool,
    hold: Option<Hold>,
    breaker: BreakerState,
    opened_at: Option<DateTime<Utc>>,
) -> TargetSituation {
    match (paused, hold, breaker) {
        (true, _, _) => TargetSituation::PausedByPerson,
        (_, Some(h), _) if matches!(h.reason, HoldReason::Credentials { .. }) => match h.reason {
            HoldReason::Credentials { credential } => {
                TargetSituation::RefusingCredentials { credential, next_try: h.until }
            }
            _ => unreachable!("matched as credentials"),
        },
        (_, Some(Hold { reason: HoldReason::Setup { reason }, until }), _) => {
            TargetSituation::RefusingSetup { reason, next_try: until }
        }
        (_, _, BreakerState::Open) => TargetSituation::Down { since: opened_at },
        (_, Some(h), _) => TargetSituation::RateLimited { until: h.until },
        (_, None, BreakerState::HalfOpen) => TargetSituation::Testing,
        (_, None, BreakerState::Closed) => TargetSituation::Sending,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ts_rs::TS)]
pub struct HealthView {
    #[serde(flatten)]
    pub queue: QueueHealth,
    /// Breaker state per target, as this process's worker sees it (empty when no worker runs here).
    pub breakers: Vec<BreakerView>,
    /// The one answer to "is everything all right?", from the same facts as the alerts.
    pub verdict: HealthVerdict,
}

/// How things stand, in one level and one sentence, with the page where a person can act.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ts_rs::TS)]
pub struct HealthVerdict {
    pub level: VerdictLevel,
    /// In words: what is wrong (or that nothing is).
    pub reason: String,
    /// Where to act: the alert's place, or the target's row; none when all is well.
    pub link: Option<Place>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum VerdictLevel {
    /// Leads flow; nothing needs anyone.
    AllWell,
    /// Leads are slowed (rate-limited, retrying, a source quieter than usual); Leadline copes by itself.
    Degraded,
    /// Something only a person can fix (a target down or refusing credentials, a silent source, a new cause of
    /// dead letters).
    NeedsPerson,
}

/// The verdict from the open alerts and each target's situation, worst first: a critical alert; a target that
/// refuses its credential or looks down; open dead letters of a new cause (`new_cause`); then what slows leads
/// (a warning, a rate limit, a probe, a person's pause); else all well. Pure.
pub fn verdict(open_alerts: &[Alert], targets: &[(String, TargetSituation)], queue: &QueueHealth) -> HealthVerdict {
    let say = |level, reason: String, link: Place| HealthVerdict { level, reason, link: Some(link) };
    let more = |n: usize| if n > 1 { format!(" (and {} more)", n - 1) } else { String::new() };
    let critical: Vec<&Alert> = open_alerts.iter().filter(|a| a.severity == Severity::Critical).collect();
    if let Some(first) = critical.first() {
        return say(VerdictLevel::NeedsPerson, format!("{}{}", first.title, more(critical.len())), first.place.clone());
    }
    for (name, situation) in targets {
        match situation {
            TargetSituation::RefusingCredentials { credential, .. } => {
                return say(
                    VerdictLevel::NeedsPerson,
                    format!("{name} refuses the credential in {credential}: its leads are waiting"),
                    Place::target(name),
                )
            }
            TargetSituation::RefusingSetup { .. } => {
                return say(
                    VerdictLevel::NeedsPerson,
                    format!("{name} refuses its own setup: its leads are waiting"),
                    Place::target(name),
                )
            }
            TargetSituation::Down { .. } => {
                return say(
                    VerdictLevel::NeedsPerson,
                    format!("{name} looks down: sending is paused by the breaker"),
                    Place::target(name),
                )
            }
            _ => {}
        }
    }
    // Open dead letters of a cause not seen before: Leadline cannot fix a lead's data or the mapping by itself,
    // so however few, a person must look at the cause group (its alert is a warning only for how it is announced).
    let new_causes: Vec<&Alert> = open_alerts.iter().filter(|a| a.kind == AlertKind::NewCause).collect();
    if let Some(first) = new_causes.first() {
        return say(
            VerdictLevel::NeedsPerson,
            format!(
                "{}{} — its leads are parked until a person fixes the cause and replays them",
                first.title,
                more(new_causes.len())
            ),
            first.place.clone(),
        );
    }
    let warnings: Vec<&Alert> =
        open_alerts.iter().filter(|a| a.severity == Severity::Warning && a.kind != AlertKind::NewCause).collect();
    if let Some(first) = warnings.first() {
        return say(VerdictLevel::Degraded, format!("{}{}", first.title, more(warnings.len())), first.place.clone());
    }
    for (name, situation) in targets {
        let reason = match situation {
            TargetSituation::RateLimited { until } => format!(
                "{name} is rate-limited until {} UTC: leads wait and go on by themselves",
                until.format("%H:%M:%S")
            ),
            TargetSituation::Testing => format!("{name} is being tested with one lead after failing"),
            TargetSituation::PausedByPerson => format!("{name} is paused by a person: its leads wait until resumed"),
            _ => continue,
        };
        return say(VerdictLevel::Degraded, reason, Place::target(name));
    }
    let o = &queue.overall;
    let waiting = o.pending + o.running;
    let reason = if waiting == 0 {
        "every lead is delivered".to_string()
    } else {
        format!("{waiting} {} on the way, nothing stuck", if waiting == 1 { "lead" } else { "leads" })
    };
    HealthVerdict { level: VerdictLevel::AllWell, reason, link: None }
}
