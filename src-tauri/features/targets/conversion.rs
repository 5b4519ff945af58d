//! What the conversion steps (`meta_conversions`, `google_ads_conversions`) send: a lead's stage, read from a job.
//!
//! A conversion step sees two kinds of jobs. A lead travelling its own source's route (the step after the CRM)
//! is the stage `lead`, at the lead's creation time. A stage change from a `crm_stage` source carries the stage,
//! when it was reached and the lead it belongs to (see [`STAGE_EVENT`]). Both become a [`Conversion`]; its
//! [`Conversion::key`] (`{source}:{source_ref}:{stage}` of the lead) is Meta's `event_id` and Google's `orderId`,
//! so the platform drops a repeat of the same stage. Pure: no I/O, time passed in.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::model::Job;

/// The stage of a lead reaching a conversion step along its own source's route.
pub const LEAD_STAGE: &str = "lead";

/// The shape of a `crm_stage` source's stored event (`features::ingest::stage`):
/// `{"stage", "changed_at", "crm", "value", "currency", "crm_id", "lead_source", "lead_ref", "lead_at", "lead"}`.
pub const STAGE_EVENT: &str = "stage";

/// One stage of one lead, ready for a platform.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversion {
    /// The CRM's stage name, as the CRM sent it (the key of the target's `stages`).
    pub stage: String,
    /// When the lead reached the stage.
    pub event_time: DateTime<Utc>,
    /// When the lead came in (stands for the ad click: a lead form is sent within minutes of its click).
    pub lead_time: DateTime<Utc>,
    /// The lead as its source stored it (the Meta or Google lead shape, or a generic body).
    pub lead: Value,
    /// `{source}:{source_ref}` of the lead.
    pub lead_key: String,
    /// The CRM's name, when the stage webhook's source gives one.
    pub crm: Option<String>,
    /// The conversion's value and currency, when the stage event carries them.
    pub value: Option<f64>,
    pub currency: Option<String>,
}

impl Conversion {
    /// The conversion's own idempotency key: the same stage of the same lead is one conversion.
    pub fn key(&self) -> String {
        format!("{}:{}", self.lead_key, self.stage)
    }

    /// The lead's answer under `names` (in `fields`, else at the top), as text.
    pub fn answer(&self, names: &[&str]) -> Option<String> {
        names.iter().find_map(|n| {
            self.lead.get("fields").and_then(|f| f.get(*n)).or_else(|| self.lead.get(*n)).and_then(|v| match v {
                Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
                Value::Array(a) => a.first().and_then(Value::as_str).map(str::to_string),
                _ => None,
            })
        })
    }

    /// Meta's lead id (a Meta lead's `leadgen_id`).
    pub fn meta_lead_id(&self) -> Option<String> {
        self.lead.get("leadgen_id").and_then(crate::features::graph::id_text)
    }

    /// Google's click id (a Google lead's `gcl_id`, or a `gclid` a web form carried).
    pub fn gclid(&self) -> Option<String> {
        ["gcl_id", "gclid"]
            .iter()
            .find_map(|k| self.lead.get(*k).and_then(Value::as_str))
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().to_string())
    }
}

/// The conversion a job stands for.
pub fn of_job(job: &Job) -> Conversion {
    let p = &job.payload;
    let stage_event = p.get(STAGE_EVENT).and_then(Value::as_str).is_some() && p.get("lead").is_some();
    if stage_event {
        let time = |k: &str| {
            p.get(k).and_then(Value::as_str).and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.to_utc())
        };
        let text = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
        Conversion {
            stage: text(STAGE_EVENT).unwrap_or_default(),
            event_time: time("changed_at").unwrap_or(job.received_at),
            lead_time: time("lead_at").unwrap_or(job.received_at),
            lead: p.get("lead").cloned().unwrap_or(Value::Null),
            lead_key: format!("{}:{}", text("lead_source").unwrap_or_default(), text("lead_ref").unwrap_or_default()),
            crm: text("crm"),
            value: p.get("value").and_then(|v| v.as_f64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))),
            currency: text("currency"),
        }
    } else {
        let lead_time = crate::model::lead_time(job.received_at, p);
        Conversion {
            stage: LEAD_STAGE.to_string(),
            event_time: lead_time,
            lead_time,
            lead: p.clone(),
            lead_key: job.external_id(),
            crm: None,
            value: None,
            currency: None,
        }
    }
}

/// Why `at` is past a platform's window of `days` at `now` ("too old for Meta's 7-day window"), or `None`.
pub fn too_old(at: DateTime<Utc>, now: DateTime<Utc>, days: u32, platform: &str, counted_from: &str) -> Option<String> {
    let age = now - at;
    (age > chrono::Duration::days(i64::from(days))).then(|| {
        format!(
            "reported: too old for {platform}'s {days}-day window ({counted_from} {}, {} days ago): not sent",
            at.format("%Y-%m-%d %H:%M UTC"),
            age.num_days()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn job(source: &str, payload: Value) -> Job {
        let t = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap();
        Job {
            id: 1,
            event_id: 1,
            step_index: 0,
            target: "capi".into(),
            attempts: 0,
            pending_since: t,
            lease_token: 1,
            in_doubt: false,
            dropped: Vec::new(),
            trigger: "new".into(),
            replay_generation: 0,
            key_revision: 1,
            source: source.into(),
            source_ref: "r-1".into(),
            received_at: t,
            revision: 1,
            payload,
            previous: Default::default(),
        }
    }

    #[test]
    fn a_lead_on_its_own_route_is_its_lead_stage() {
        let j = job(
            "meta",
            json!({"leadgen_id": "123", "created_time": "2026-12-01T09:00:00Z", "fields": {"email": "a@b.c"}}),
        );
        let c = of_job(&j);
        assert_eq!(c.stage, LEAD_STAGE);
        assert_eq!(c.key(), "meta:r-1:lead");
        assert_eq!(c.event_time, Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap());
        assert_eq!(c.meta_lead_id().as_deref(), Some("123"));
        assert_eq!(c.answer(&["email"]).as_deref(), Some("a@b.c"));
        assert_eq!(c.gclid(), None);
    }

    #[test]
    fn a_stage_event_names_its_lead_and_time() {
        let j = job(
            "hubspot_stages",
            json!({"stage": "customer", "changed_at": "2026-12-03T12:00:00Z", "crm": "HubSpot", "value": "1200.5",
                   "lead_source": "google", "lead_ref": "GL-1", "lead_at": "2026-11-20T08:00:00Z",
                   "lead": {"gcl_id": "Cj0", "fields": {"email": "x@y.z"}}}),
        );
        let c = of_job(&j);
        assert_eq!(c.key(), "google:GL-1:customer");
        assert_eq!(c.gclid().as_deref(), Some("Cj0"));
        assert_eq!(c.value, Some(1200.5));
        assert_eq!(c.crm.as_deref(), Some("HubSpot"));
        assert_eq!(c.lead_time, Utc.with_ymd_and_hms(2026, 11, 20, 8, 0, 0).unwrap());
    }

    #[test]
    fn the_window_is_counted_in_whole_days_past() {
        let now = Utc.with_ymd_and_hms(2026, 12, 10, 0, 0, 0).unwrap();
        assert_eq!(too_old(now - chrono::Duration::days(7), now, 7, "Meta", "event"), None);
        let old = too_old(now - chrono::Duration::days(8), now, 7, "Meta", "event").unwrap();
        assert!(old.starts_with("reported: too old for Meta's 7-day window (event 2026-12-02"), "{old}");
    }
}
