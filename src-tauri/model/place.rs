//! Where a person acts on something: a page of the desk and, when it is about one thing, that thing (a target,
//! a source, a cause of dead letters). An alert and the Overview's verdict carry one, so "Open …" leads to the
//! target's row, the source's row or the cause group, not to a page the person must then search.

use serde::{Deserialize, Serialize};

use super::AlertKind;

/// A page of the desk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum Page {
    Alerts,
    Targets,
    Sources,
    DeadLetters,
}

/// A page, and what on it the thing is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ts_rs::TS)]
pub struct Place {
    pub page: Page,
    /// The target the thing is about (its row on Targets, or the dead letters' target filter).
    pub target: Option<String>,
    /// The source the thing is about (its row on Sources).
    pub source: Option<String>,
    /// The cause group on Dead letters (with `target`).
    pub cause: Option<String>,
}

impl Place {
    pub fn page(page: Page) -> Place {
        Place { page, target: None, source: None, cause: None }
    }

    pub fn target(name: &str) -> Place {
        Place { target: Some(name.to_string()), ..Place::page(Page::Targets) }
    }

    pub fn source(name: &str) -> Place {
        Place { source: Some(name.to_string()), ..Place::page(Page::Sources) }
    }

    /// Where an alert of `kind` with `key` is acted on. The keys are those the monitor raises with: a target's
    /// name, a source's name, `target: cause` for a new cause, a credential's name (several targets may share
    /// it: the Targets page), `replay-N` for an automatic replay, `*` for the queue as a whole.
    pub fn of_alert(kind: AlertKind, key: &str) -> Place {
        match kind {
            AlertKind::PermanentConfig | AlertKind::BreakerOpen | AlertKind::RetryBudget => Place::target(key),
            AlertKind::Credentials | AlertKind::OldestPending => Place::page(Page::Targets),
            AlertKind::Silence | AlertKind::VolumeDrop | AlertKind::SourceFailing | AlertKind::ReconciliationFound => {
                Place::source(key)
            }
            AlertKind::NewCause => match key.split_once(": ") {
                Some((target, cause)) => Place {
                    target: Some(target.to_string()),
                    cause: Some(cause.to_string()),
                    ..Place::page(Page::DeadLetters)
                },
                None => Place::page(Page::DeadLetters),
            },
            AlertKind::DeadLetterGrowth => Place { target: Some(key.to_string()), ..Place::page(Page::DeadLetters) },
            AlertKind::AutoReplay => Place::page(Page::DeadLetters),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alert_leads_to_the_thing_it_is_about() {
        assert_eq!(Place::of_alert(AlertKind::BreakerOpen, "crm"), Place::target("crm"));
        assert_eq!(Place::of_alert(AlertKind::Silence, "partner_api"), Place::source("partner_api"));
        let cause = Place::of_alert(AlertKind::NewCause, "crm: Property values were not valid: phone \"…\"");
        assert_eq!(cause.page, Page::DeadLetters);
        assert_eq!(cause.target.as_deref(), Some("crm"));
        assert_eq!(cause.cause.as_deref(), Some("Property values were not valid: phone \"…\""));
        assert_eq!(Place::of_alert(AlertKind::DeadLetterGrowth, "sms").target.as_deref(), Some("sms"));
        assert_eq!(Place::of_alert(AlertKind::Credentials, "HUBSPOT_TOKEN"), Place::page(Page::Targets));
        for kind in AlertKind::ALL {
            assert_ne!(Place::of_alert(*kind, "x").page, Page::Alerts, "{kind}: an alert must lead somewhere else");
        }
    }
}
