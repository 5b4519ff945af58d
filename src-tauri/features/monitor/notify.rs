//! When an alert is announced: the pure decisions behind notifications, digests, quiet hours and re-notification.
//!
//! - On opening, a kind with policy `immediate` is announced at once, unless it opens in quiet hours (then it is
//!   held until they end; critical alerts are announced anyway unless `quiet_hours_hold_critical`). A kind with
//!   policy `digest` waits for the next digest (`digest_interval_minutes`); `none` is never announced.
//! - An announced alert that nobody acknowledged and that is still open is announced again every
//!   `renotify_minutes` of its kind's policy (outside quiet hours, critical excepted as above).
//! - Acknowledging stops re-notification; resolving ends the alert.

use chrono::{DateTime, Utc};

use crate::config::{AlertPolicy, NotifyPolicy};

use super::alerts::{Alert, AlertState, Held, Severity};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    Now,
    Hold(Held),
    Never,
}

/// Whether quiet hours silence an alert of this severity right now.
pub fn silenced(severity: Severity, quiet_now: bool, hold_critical: bool) -> bool {
    quiet_now && (severity != Severity::Critical || hold_critical)
}

/// What to do with an alert that just opened.
pub fn on_open(policy: &AlertPolicy, severity: Severity, quiet_now: bool, hold_critical: bool) -> Announce {
    match policy.notify {
        NotifyPolicy::None => Announce::Never,
        NotifyPolicy::Digest => Announce::Hold(Held::Digest),
        NotifyPolicy::Immediate if silenced(severity, quiet_now, hold_critical) => Announce::Hold(Held::QuietHours),
        NotifyPolicy::Immediate => Announce::Now,
    }
}

/// Whether an open, unacknowledged, announced alert is due to be announced again.
pub fn renotify_due(
    policy: &AlertPolicy,
    alert: &Alert,
    now: DateTime<Utc>,
    quiet_now: bool,
    hold_critical: bool,
) -> bool {
    let (Some(every), Some(last)) = (policy.renotify_minutes, alert.notified_at) else { return false };
    alert.state == AlertState::Open
        && policy.notify != NotifyPolicy::None
        && now - last >= chrono::Duration::minutes(every as i64)
        && !silenced(alert.severity, quiet_now, hold_critical)
}

/// The one notification a digest becomes: a title and up to five lines.
pub fn digest_text(alerts: &[Alert]) -> (String, String) {
    let title = if alerts.len() == 1 { alerts[0].title.clone() } else { format!("Leadline: {} alerts", alerts.len()) };
    let mut lines: Vec<String> = alerts
        .iter()
        .take(5)
        .map(|a| {
            let state = if a.state == AlertState::Resolved { " (resolved since)" } else { "" };
            format!("• {}{state}", a.title)
        })
        .collect();
    if alerts.len() > 5 {
        lines.push(format!("… and {} more in the app", alerts.len() - 5));
    }
    let body = if alerts.len() == 1 { alerts[0].detail.clone() } else { lines.join("\n") };
    (title, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(severity: &str, state: &str, notified_minutes_ago: Option<i64>, now: DateTime<Utc>) -> Alert {
        Alert {
            id: 1,
            kind: super::super::alerts::AlertKind::Silence,
            key: "webform".into(),
            severity: severity.parse().unwrap(),
            title: "t".into(),
            detail: "d".into(),
            opened_at: now,
            last_seen_at: now,
            occurrences: 1,
            acknowledged_at: None,
            acknowledged_by: None,
            resolved_at: None,
            resolution_note: None,
            state: state.parse().unwrap(),
            notified_at: notified_minutes_ago.map(|m| now - chrono::Duration::minutes(m)),
            notifications: 1,
            held: None,
            place: crate::model::Place::source("webform"),
        }
    }

    #[test]
    fn opening_follows_policy_and_quiet_hours() {
        let immediate = AlertPolicy { notify: NotifyPolicy::Immediate, renotify_minutes: Some(60) };
        let digest = AlertPolicy { notify: NotifyPolicy::Digest, renotify_minutes: None };
        let none = AlertPolicy { notify: NotifyPolicy::None, renotify_minutes: None };
        assert_eq!(on_open(&immediate, Severity::Warning, false, false), Announce::Now);
        assert_eq!(on_open(&immediate, Severity::Warning, true, false), Announce::Hold(Held::QuietHours));
        assert_eq!(on_open(&immediate, Severity::Critical, true, false), Announce::Now);
        assert_eq!(on_open(&immediate, Severity::Critical, true, true), Announce::Hold(Held::QuietHours));
        assert_eq!(on_open(&digest, Severity::Critical, false, false), Announce::Hold(Held::Digest));
        assert_eq!(on_open(&none, Severity::Critical, false, false), Announce::Never);
    }

    #[test]
    fn renotification_waits_its_interval_and_stops_when_acknowledged() {
        let now = Utc::now();
        let p = AlertPolicy { notify: NotifyPolicy::Immediate, renotify_minutes: Some(60) };
        assert!(!renotify_due(&p, &alert("warning", "open", Some(59), now), now, false, false));
        assert!(renotify_due(&p, &alert("warning", "open", Some(60), now), now, false, false));
        assert!(!renotify_due(&p, &alert("warning", "acknowledged", Some(90), now), now, false, false));
        assert!(!renotify_due(&p, &alert("warning", "open", Some(90), now), now, true, false));
        assert!(renotify_due(&p, &alert("critical", "open", Some(90), now), now, true, false));
        let once = AlertPolicy { renotify_minutes: None, ..p };
        assert!(!renotify_due(&once, &alert("warning", "open", Some(600), now), now, false, false));
    }

    #[test]
    fn a_digest_is_one_notification() {
        let now = Utc::now();
        let many: Vec<Alert> = (0..7).map(|_| alert("warning", "open", None, now)).collect();
        let (title, body) = digest_text(&many);
        assert_eq!(title, "Leadline: 7 alerts");
        assert_eq!(body.lines().count(), 6);
        assert!(body.ends_with("… and 2 more in the app"));
    }
}
