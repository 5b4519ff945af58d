//! The single surface the outside world uses: plain async functions with serde DTOs. The HTTP routes
//! ([`http`]) and the desktop commands are thin adapters over these; tests call them directly.

mod args;
pub mod confirm;
mod connections;
pub mod dto;
pub mod error;
pub mod export;
pub mod http;
mod letters;
pub mod lookup;
mod masking;
pub mod missing_data;
mod monitoring;
pub mod operations;
mod replaying;
pub mod settings;
pub mod tokens;

pub use crate::features::app::{App, LiveEvent};
pub use crate::features::monitor::health::{
    situation, verdict, BreakerView, HealthVerdict, HealthView, TargetSituation, VerdictLevel,
};
pub use crate::runtime::Clock;
pub use confirm::{ask, contact_doubt_question, fix_and_replay_confirmed, replay_confirmed, Confirm, ScriptedConfirm};
pub use connections::{check_target, load_pauses, reload_secrets, set_target_paused, target_preview, targets};
pub use dto::*;
pub use error::{ApiError, ErrorBody};
pub use letters::{
    dead_letter, dead_letter_groups, dead_letters, edit_dead_letter, fix_dead_letters, resolve_dead_letters,
    reveal_dead_letter,
};
pub use lookup::{find_leads, lead_story, reveal_lead};
pub use missing_data::{
    close_missing_task, correct_missing_data, missing_data, missing_data_counts, CorrectionRequest,
};
pub use monitoring::{
    acknowledge_alert, alert_channels, alerts, figures, health, metrics, reconcile_now, session, sources,
};
pub use replaying::{
    answer_contact_doubt, control_replay, fix_and_replay, fix_and_replay_preview, replay, replay_preview,
    replay_progress, replay_report, replays,
};
pub use settings::{save_settings, settings, store_secret};

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    use crate::features::delivery::breaker::BreakerState;
    use crate::features::delivery::worker::{Hold, HoldReason};
    use crate::features::monitor::alerts::Alert;
    use crate::model::Place;
    use crate::store::{QueueHealth, TargetHealth};

    fn alert(kind: &str, severity: &str, title: &str) -> Alert {
        let t = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z").unwrap().to_utc();
        Alert {
            id: 1,
            kind: kind.parse().unwrap(),
            key: "k".into(),
            severity: severity.parse().unwrap(),
            title: title.into(),
            detail: String::new(),
            opened_at: t,
            last_seen_at: t,
            occurrences: 1,
            acknowledged_at: None,
            acknowledged_by: None,
            resolved_at: None,
            resolution_note: None,
            state: crate::store::AlertState::Open,
            notified_at: None,
            notifications: 0,
            held: None,
            place: crate::model::Place::of_alert(kind.parse().unwrap(), "k"),
        }
    }

    /// The instant these tests stand at: the functions under test take their time as an argument.
    fn at() -> DateTime<Utc> {
        "2026-12-05T13:00:00Z".parse().unwrap()
    }

    fn queue(pending: i64) -> QueueHealth {
        QueueHealth {
            generated_at: at(),
            overall: TargetHealth { target: "*".into(), pending, ..Default::default() },
            targets: vec![],
        }
    }

    #[test]
    fn the_verdict_follows_the_worst_fact() {
        let until = at() + chrono::Duration::minutes(2);
        let ok = verdict(&[], &[("crm".into(), TargetSituation::Sending)], &queue(3));
        assert_eq!(
            (ok.level, ok.reason.as_str(), ok.link),
            (VerdictLevel::AllWell, "3 leads on the way, nothing stuck", None)
        );

        let limited = vec![("crm".into(), TargetSituation::RateLimited { until })];
        let v = verdict(&[], &limited, &queue(3));
        assert_eq!(v.level, VerdictLevel::Degraded);
        assert!(v.reason.starts_with("crm is rate-limited until"), "{}", v.reason);

        let quiet = [alert("volume_drop", "warning", "Fewer leads than usual from meta")];
        let v = verdict(&quiet, &limited, &queue(0));
        assert_eq!((v.level, v.link), (VerdictLevel::Degraded, Some(Place::source("k"))));

        let refused = vec![(
            "meta_details".into(),
            TargetSituation::RefusingCredentials { credential: "META_TOKEN".into(), next_try: until },
        )];
        let v = verdict(&quiet, &refused, &queue(0));
        assert_eq!((v.level, v.link), (VerdictLevel::NeedsPerson, Some(Place::target("meta_details"))));
        assert!(v.reason.contains("META_TOKEN"), "{}", v.reason);

        let down = vec![("crm".into(), TargetSituation::Down { since: None })];
        assert_eq!(verdict(&[], &down, &queue(9)).level, VerdictLevel::NeedsPerson);

        let paused = vec![("crm".into(), TargetSituation::PausedByPerson)];
        let v = verdict(&[], &paused, &queue(9));
        assert_eq!(
            (v.level, v.reason.as_str()),
            (VerdictLevel::Degraded, "crm is paused by a person: its leads wait until resumed")
        );

        let silent = [
            alert("silence", "critical", "No leads from partner for 31 min"),
            alert("source_failing", "critical", "Leadline cannot reach meta's lead list"),
            alert("volume_drop", "warning", "Fewer leads"),
        ];
        let v = verdict(&silent, &[], &queue(0));
        assert_eq!(v.level, VerdictLevel::NeedsPerson);
        assert_eq!(v.reason, "No leads from partner for 31 min (and 1 more)");
        assert_eq!(v.link, Some(Place::source("k")));

        // Open dead letters of a new cause need a person (only one can fix the data or the mapping), although
        // the alert is announced as a warning: above a rate limit and a quieter source, linked to the cause group.
        let cause_key = "crm: Property values were not valid: phone \"…\"";
        let new_cause = Alert {
            key: cause_key.into(),
            place: Place::of_alert(crate::store::AlertKind::NewCause, cause_key),
            ..alert("new_cause", "warning", "A new cause of dead letters at crm: bad lead data")
        };
        let v = verdict(&[quiet[0].clone(), new_cause.clone()], &limited, &queue(3));
        assert_eq!(v.level, VerdictLevel::NeedsPerson);
        assert_eq!(
            v.reason,
            "A new cause of dead letters at crm: bad lead data — its leads are parked until a person fixes the \
             cause and replays them"
        );
        let link = v.link.expect("a link to the cause group");
        assert_eq!(link.page, crate::model::Page::DeadLetters);
        assert_eq!(
            (link.target.as_deref(), link.cause.as_deref()),
            (Some("crm"), Some(cause_key.split_once(": ").unwrap().1))
        );
        let two = verdict(&[new_cause.clone(), new_cause.clone()], &[], &queue(0));
        assert!(
            two.reason.starts_with("A new cause of dead letters at crm: bad lead data (and 1 more) — "),
            "{}",
            two.reason
        );
        // What only a person can fix at a target, and critical alerts, come first.
        let v = verdict(std::slice::from_ref(&new_cause), &down, &queue(0));
        assert_eq!(v.link, Some(Place::target("crm")));
        let v = verdict(&[silent[0].clone(), new_cause.clone()], &[], &queue(0));
        assert_eq!(v.reason, "No leads from partner for 31 min");
        // The tray reads the same verdict: red, with the reason beneath the counts.
        let health = crate::features::monitor::health::HealthView {
            queue: queue(0),
            breakers: vec![],
            verdict: verdict(std::slice::from_ref(&new_cause), &[], &queue(0)),
        };
        let glance = crate::features::monitor::glance::glance(&health);
        assert_eq!(glance.level, crate::features::monitor::glance::GlanceLevel::NeedsPerson);
        assert!(glance.tooltip().contains("A new cause of dead letters at crm"), "{}", glance.tooltip());
    }

    #[test]
    fn a_targets_situation_puts_what_a_person_must_know_first() {
        let until = at() + chrono::Duration::minutes(2);
        let credentials = Hold { until, reason: HoldReason::Credentials { credential: "T".into() } };
        let limited = Hold { until, reason: HoldReason::RateLimited };
        let opened = Some(at());
        assert_eq!(
            situation(true, Some(credentials.clone()), BreakerState::Open, opened),
            TargetSituation::PausedByPerson
        );
        assert_eq!(
            situation(false, Some(credentials), BreakerState::Open, opened),
            TargetSituation::RefusingCredentials { credential: "T".into(), next_try: until }
        );
        assert_eq!(
            situation(false, Some(limited.clone()), BreakerState::Open, opened),
            TargetSituation::Down { since: opened }
        );
        assert_eq!(
            situation(false, Some(limited.clone()), BreakerState::HalfOpen, None),
            TargetSituation::RateLimited { until }
        );
        assert_eq!(situation(false, None, BreakerState::HalfOpen, None), TargetSituation::Testing);
        assert_eq!(situation(false, None, BreakerState::Closed, None), TargetSituation::Sending);
    }
}
