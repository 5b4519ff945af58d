//! What a channel says: one announcement (an alert that opened, a reminder, a digest), with the words and links
//! every kind of channel renders its own way. Pure.

use chrono::{DateTime, Utc};
use sha2::Digest;

use crate::features::targets::vendor::encode_component;
use crate::model::{Page, Place};
use crate::store::{Alert, AlertState, Severity};

use super::super::notify::{self, Occasion};

/// What is announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Opened,
    Reminder,
    Digest,
}

impl What {
    /// The word receivers of the generic webhook read (`type`).
    pub fn as_str(self) -> &'static str {
        match self {
            What::Opened => "alert",
            What::Reminder => "reminder",
            What::Digest => "digest",
        }
    }
}

impl From<Occasion> for What {
    fn from(o: Occasion) -> What {
        match o {
            Occasion::Opened => What::Opened,
            Occasion::Reminder => What::Reminder,
        }
    }
}

/// One announcement on one channel.
#[derive(Debug, Clone)]
pub struct Announcement {
    pub channel: String,
    pub what: What,
    pub alerts: Vec<Alert>,
    /// The same for every try of this announcement, different for the next one: receivers dedupe on it.
    pub idempotency_key: String,
    pub sent_at: DateTime<Utc>,
    /// The desk's address (`monitor.public_url`), for links to where each alert is acted on.
    pub public_url: Option<String>,
}

impl Announcement {
    /// `alerts` with how often `channel` announced each before (`(alert, notifications)`).
    pub fn new(
        channel: &str,
        what: What,
        alerts: Vec<(Alert, i64)>,
        sent_at: DateTime<Utc>,
        public_url: Option<&str>,
    ) -> Announcement {
        let idempotency_key = match (what, alerts.as_slice()) {
            (What::Opened | What::Reminder, [(a, n)]) => format!("leadline-{channel}-{}-{}", a.id, n + 1),
            _ => {
                let listed: Vec<String> = alerts.iter().map(|(a, n)| format!("{}:{}", a.id, n + 1)).collect();
                let digest = hex::encode(sha2::Sha256::digest(listed.join(",").as_bytes()));
                format!("leadline-{channel}-digest-{}", &digest[..16])
            }
        };
        Announcement {
            channel: channel.to_string(),
            what,
            alerts: alerts.into_iter().map(|(a, _)| a).collect(),
            idempotency_key,
            sent_at,
            public_url: public_url.map(|u| u.trim_end_matches('/').to_string()),
        }
    }

    /// The one line it is about: the alert's title ("Still open: …" for a reminder), or for a digest "Leadline:
    /// 3 alerts" (one alert's title when it holds one, as the desktop's digest).
    pub fn headline(&self) -> String {
        match (self.what, self.alerts.as_slice()) {
            (What::Reminder, [a]) => format!("Still open: {}", a.title),
            (What::Digest, alerts) => notify::digest_text(alerts).0,
            (_, [a, ..]) => a.title.clone(),
            (_, []) => "Leadline".to_string(),
        }
    }

    /// The alert's detail, for a reminder prefixed with how long it has been open.
    pub fn detail(&self, alert: &Alert) -> String {
        match self.what {
            What::Reminder => {
                let since = super::super::human_duration((self.sent_at - alert.opened_at).num_seconds() as f64);
                format!("Open for {since}, not acknowledged. {}", alert.detail)
            }
            _ => alert.detail.clone(),
        }
    }

    /// The desk's link to where `alert` is acted on, when the desk's address is configured.
    pub fn link(&self, alert: &Alert) -> Option<String> {
        self.public_url.as_ref().map(|base| format!("{base}/{}", place_hash(&alert.place)))
    }
}

/// What a person does next, in the desk's words ("Open crm on Targets"), as the UI labels the same place.
pub fn place_label(p: &Place) -> String {
    match (p.page, &p.target, &p.source, &p.cause) {
        (Page::DeadLetters, _, _, Some(_)) => "Open the cause group on Dead letters".into(),
        (Page::DeadLetters, Some(t), _, None) => format!("Open {t}'s dead letters"),
        (Page::DeadLetters, None, _, None) => "Open Dead letters".into(),
        (Page::Targets, Some(t), _, _) => format!("Open {t} on Targets"),
        (Page::Targets, None, _, _) => "Open Targets".into(),
        (Page::Sources, _, Some(s), _) => format!("Open {s} on Sources"),
        (Page::Sources, _, None, _) => "Open Sources".into(),
        (Page::Alerts, ..) => "Open Alerts".into(),
    }
}

/// The desk's address of a place: the hash route the UI reads (`ui/src/lib/state.svelte.ts`, `viewHash`).
pub fn place_hash(p: &Place) -> String {
    match p.page {
        Page::DeadLetters => {
            let mut q = Vec::new();
            if let Some(t) = &p.target {
                q.push(format!("target={}", encode_component(t)));
            }
            if let Some(c) = &p.cause {
                q.push(format!("cause={}", encode_component(c)));
            }
            if q.is_empty() {
                "#/dead-letters".into()
            } else {
                format!("#/dead-letters?{}", q.join("&"))
            }
        }
        Page::Targets => p.target.as_ref().map_or("#/targets".into(), |t| format!("#/targets/{}", encode_component(t))),
        Page::Sources => p.source.as_ref().map_or("#/sources".into(), |s| format!("#/sources/{}", encode_component(s))),
        Page::Alerts => "#/alerts".into(),
    }
}

/// "resolved since" for an alert a late announcement carries.
pub fn state_note(a: &Alert) -> &'static str {
    match a.state {
        AlertState::Resolved => " (resolved since)",
        AlertState::Acknowledged => " (acknowledged)",
        AlertState::Open => "",
    }
}

pub fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "Critical",
        Severity::Warning => "Warning",
        Severity::Info => "Info",
    }
}

/// At most `max` characters, with "…" when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut cut: String = s.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::AlertKind;

    pub(crate) fn alert(id: i64, kind: AlertKind, key: &str, severity: Severity) -> Alert {
        let at: DateTime<Utc> = "2026-03-02T10:00:00Z".parse().unwrap();
        Alert {
            id,
            kind,
            key: key.into(),
            severity,
            title: format!("title {id}"),
            detail: format!("detail {id} <b>&"),
            opened_at: at,
            last_seen_at: at,
            occurrences: 1,
            acknowledged_at: None,
            acknowledged_by: None,
            resolved_at: None,
            resolution_note: None,
            state: AlertState::Open,
            notified_at: None,
            notifications: 0,
            held: None,
            place: Place::of_alert(kind, key),
        }
    }

    #[test]
    fn an_announcement_has_one_key_per_alert_and_turn() {
        let at: DateTime<Utc> = "2026-03-02T11:30:00Z".parse().unwrap();
        let a = alert(12, AlertKind::Credentials, "HUBSPOT_TOKEN", Severity::Critical);
        let first = Announcement::new("slack", What::Opened, vec![(a.clone(), 0)], at, None);
        let retry = Announcement::new("slack", What::Opened, vec![(a.clone(), 0)], at, None);
        let reminder = Announcement::new("slack", What::Reminder, vec![(a.clone(), 1)], at, None);
        assert_eq!(first.idempotency_key, "leadline-slack-12-1");
        assert_eq!(first.idempotency_key, retry.idempotency_key, "a retry is the same announcement");
        assert_ne!(first.idempotency_key, reminder.idempotency_key);
        assert_eq!(reminder.headline(), "Still open: title 12");
        assert!(reminder.detail(&a).starts_with("Open for 1 h 30 min, not acknowledged."));
        let b = alert(13, AlertKind::VolumeDrop, "webform", Severity::Warning);
        let digest = Announcement::new("slack", What::Digest, vec![(a, 1), (b, 0)], at, None);
        assert!(digest.idempotency_key.starts_with("leadline-slack-digest-"));
        assert_eq!(digest.headline(), "Leadline: 2 alerts");
    }

    #[test]
    fn links_lead_to_the_place_the_desk_opens() {
        let at: DateTime<Utc> = "2026-03-02T11:30:00Z".parse().unwrap();
        let cause = alert(3, AlertKind::NewCause, "crm: Phone is not valid", Severity::Warning);
        let n = Announcement::new("x", What::Opened, vec![(cause.clone(), 0)], at, Some("https://leads.example.com/"));
        assert_eq!(
            n.link(&cause).as_deref(),
            Some("https://leads.example.com/#/dead-letters?target=crm&cause=Phone%20is%20not%20valid")
        );
        assert_eq!(place_label(&cause.place), "Open the cause group on Dead letters");
        let t = alert(4, AlertKind::BreakerOpen, "crm", Severity::Critical);
        assert_eq!(place_hash(&t.place), "#/targets/crm");
        assert_eq!(place_label(&t.place), "Open crm on Targets");
        assert_eq!(Announcement::new("x", What::Opened, vec![(t.clone(), 0)], at, None).link(&t), None);
    }
}
