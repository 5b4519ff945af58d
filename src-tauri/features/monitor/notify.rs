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

/// Whether `now` lies in the quiet hours `span`, read on the wall clock of `tz`.
pub fn quiet_at(span: Option<&crate::config::TimeSpan>, tz: chrono_tz::Tz, now: DateTime<Utc>) -> bool {
    span.is_some_and(|q| q.contains(now.with_timezone(&tz).time()))
}

/// Why an alert is announced on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion {
    /// It opened (and its policy is immediate).
    Opened,
    /// It is still open and nobody acknowledged it.
    Reminder,
}

/// What one alert channel sends in one pass: alerts on their own, and the alerts of one digest.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ChannelPlan {
    pub single: Vec<(i64, Occasion)>,
    pub digest: Vec<i64>,
}

/// How a channel stands at the instant of a pass: the facts [`plan_channel`] decides with.
#[derive(Debug, Clone, Copy)]
pub struct ChannelMoment {
    pub now: DateTime<Utc>,
    /// The channel's quiet hours are on.
    pub quiet_now: bool,
    pub hold_critical: bool,
    /// The channel's digest interval has passed since its last digest.
    pub digest_due: bool,
}

/// How long a channel waits before sending again after `failures` failed sends in a row: 15 s, doubling, at most
/// 10 minutes. A receiver that is down is not hammered every few seconds, and one that recovers hears within
/// minutes.
pub fn retry_delay(failures: i64) -> chrono::Duration {
    let doubled = 15i64.saturating_mul(1i64 << (failures - 1).clamp(0, 10));
    chrono::Duration::seconds(doubled.min(600))
}

/// What a channel sends now, from its alerts as it has them ([`crate::store::ChannelEntry`]) and `policy`, the
/// channel's policy for an alert. Pure.
///
/// - `due` (an immediate alert): on its own, now — quiet hours were weighed when it opened.
/// - held for quiet hours: in one digest once they are over.
/// - held for the digest: in one digest when the channel's digest is due, outside quiet hours.
/// - sent, still open and unacknowledged: a reminder when [`renotify_due`] says so.
/// - after a failed send, nothing before [`retry_delay`] has passed; then it goes again (a failed digest
///   without waiting for the next digest interval).
pub fn plan_channel(
    entries: &[crate::store::ChannelEntry],
    policy: impl Fn(&Alert) -> AlertPolicy,
    at: ChannelMoment,
) -> ChannelPlan {
    use crate::store::ChannelState;
    let mut plan = ChannelPlan::default();
    for e in entries {
        if e.failures > 0 && e.last_attempt_at.is_some_and(|t| at.now - t < retry_delay(e.failures)) {
            continue;
        }
        match e.state {
            ChannelState::Due => plan.single.push((e.alert.id, Occasion::Opened)),
            ChannelState::Held(Held::QuietHours) if !at.quiet_now => plan.digest.push(e.alert.id),
            ChannelState::Held(Held::Digest) if !at.quiet_now && (at.digest_due || e.failures > 0) => {
                plan.digest.push(e.alert.id)
            }
            ChannelState::Held(_) => {}
            ChannelState::Sent => {
                let as_announced = Alert { notified_at: e.notified_at, ..e.alert.clone() };
                if renotify_due(&policy(&e.alert), &as_announced, at.now, at.quiet_now, at.hold_critical) {
                    plan.single.push((e.alert.id, Occasion::Reminder));
                }
            }
        }
    }
    plan
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
        let now: DateTime<Utc> = "2026-12-05T13:00:00Z".parse().unwrap();
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
        let now: DateTime<Utc> = "2026-12-05T13:00:00Z".parse().unwrap();
        let many: Vec<Alert> = (0..7).map(|_| alert("warning", "open", None, now)).collect();
        let (title, body) = digest_text(&many);
        assert_eq!(title, "Leadline: 7 alerts");
        assert_eq!(body.lines().count(), 6);
        assert!(body.ends_with("… and 2 more in the app"));
    }

    fn entry(id: i64, state: crate::store::ChannelState, now: DateTime<Utc>) -> crate::store::ChannelEntry {
        crate::store::ChannelEntry {
            alert: Alert { id, notified_at: None, ..alert("warning", "open", None, now) },
            state,
            notified_at: None,
            notifications: 0,
            failures: 0,
            last_error: None,
            last_attempt_at: None,
        }
    }

    #[test]
    fn a_channel_sends_due_alerts_alone_and_held_ones_in_one_digest() {
        use crate::store::ChannelState::{Due, Held as Waiting, Sent};
        let now: DateTime<Utc> = "2026-12-05T13:00:00Z".parse().unwrap();
        let immediate = |_: &Alert| AlertPolicy { notify: NotifyPolicy::Immediate, renotify_minutes: Some(60) };
        let entries = vec![
            entry(1, Due, now),
            entry(2, Waiting(Held::Digest), now),
            entry(3, Waiting(Held::QuietHours), now),
            entry(4, Sent, now),
        ];
        let at = |quiet_now, digest_due| ChannelMoment { now, quiet_now, hold_critical: false, digest_due };
        // Outside quiet hours, digest not due: the due one, and the one held over the quiet hours that ended.
        let plan = plan_channel(&entries, immediate, at(false, false));
        assert_eq!(plan.single, vec![(1, Occasion::Opened)]);
        assert_eq!(plan.digest, vec![3]);
        // The digest is due: both held ones together.
        assert_eq!(plan_channel(&entries, immediate, at(false, true)).digest, vec![2, 3]);
        // In quiet hours nothing held goes out; a due alert was already weighed against them when it opened.
        let quiet = plan_channel(&entries, immediate, at(true, true));
        assert_eq!((quiet.single, quiet.digest), (vec![(1, Occasion::Opened)], vec![]));
    }

    #[test]
    fn a_channel_reminds_of_open_alerts_by_its_own_last_announcement() {
        let now: DateTime<Utc> = "2026-12-05T13:00:00Z".parse().unwrap();
        let mut sent = entry(7, crate::store::ChannelState::Sent, now);
        sent.notified_at = Some(now - chrono::Duration::minutes(61));
        let at = ChannelMoment { now, quiet_now: false, hold_critical: false, digest_due: false };
        let every_hour = |_: &Alert| AlertPolicy { notify: NotifyPolicy::Immediate, renotify_minutes: Some(60) };
        assert_eq!(plan_channel(&[sent.clone()], every_hour, at).single, vec![(7, Occasion::Reminder)]);
        let once = |_: &Alert| AlertPolicy { notify: NotifyPolicy::Immediate, renotify_minutes: None };
        assert!(plan_channel(&[sent.clone()], once, at).single.is_empty());
        sent.notified_at = Some(now - chrono::Duration::minutes(30));
        assert!(plan_channel(&[sent], every_hour, at).single.is_empty(), "this channel announced it 30 min ago");
    }

    #[test]
    fn a_failed_send_is_retried_after_a_growing_delay() {
        let now: DateTime<Utc> = "2026-12-05T13:00:00Z".parse().unwrap();
        assert_eq!(retry_delay(1), chrono::Duration::seconds(15));
        assert_eq!(retry_delay(3), chrono::Duration::seconds(60));
        assert_eq!(retry_delay(40), chrono::Duration::minutes(10));
        let mut failed = entry(5, crate::store::ChannelState::Held(Held::Digest), now);
        failed.failures = 2;
        failed.last_attempt_at = Some(now - chrono::Duration::seconds(20));
        let policy = |_: &Alert| AlertPolicy { notify: NotifyPolicy::Digest, renotify_minutes: None };
        let at = |now| ChannelMoment { now, quiet_now: false, hold_critical: false, digest_due: false };
        assert!(
            plan_channel(&[failed.clone()], policy, at(now)).digest.is_empty(),
            "20 s after the 2nd failure, which waits 30 s"
        );
        // Then again at once, without waiting for the next digest interval.
        assert_eq!(plan_channel(&[failed], policy, at(now + chrono::Duration::seconds(10))).digest, vec![5]);
    }

    #[test]
    fn quiet_hours_are_read_on_the_monitors_wall_clock() {
        let span = crate::config::TimeSpan { start: "22:00".into(), end: "07:00".into() };
        let berlin: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
        // 21:30 UTC is 22:30 in Berlin in winter.
        let t: DateTime<Utc> = "2026-01-12T21:30:00Z".parse().unwrap();
        assert!(quiet_at(Some(&span), berlin, t));
        assert!(!quiet_at(Some(&span), chrono_tz::UTC, t));
        assert!(!quiet_at(None, berlin, t));
    }
}
