//! A delivery step as the worker hands it to a connector: the lead, its step, and what its keys are made of.

use chrono::{DateTime, Utc};

/// A claimed delivery step with everything needed to perform it.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub event_id: i64,
    pub step_index: i64,
    pub target: String,
    /// Counted attempts before this one.
    pub attempts: u32,
    pub pending_since: DateTime<Utc>,
    pub lease_token: i64,
    /// The previous holder's lease expired mid-attempt: the CRM may already have this lead.
    pub in_doubt: bool,
    pub trigger: String,
    pub replay_generation: i64,
    /// The lead revision this step's key names: the lead's revision when the step last went with new content for
    /// certain; an earlier one while an attempt with the earlier content may have reached the CRM.
    pub key_revision: i64,
    pub source: String,
    pub source_ref: String,
    pub received_at: DateTime<Utc>,
    /// The lead's revision (1 as first received; each changed repeat adds one). `payload` is that revision.
    pub revision: i64,
    pub payload: serde_json::Value,
    /// Results of the earlier, delivered steps of the same event, by target name.
    pub previous: serde_json::Map<String, serde_json::Value>,
    /// The CRM fields this step goes without (the target's `missing_data` fallback: the CRM or the mapping
    /// refused only fields on its drop list). Empty: the whole record.
    pub dropped: Vec<String>,
}

impl Job {
    /// The external id the CRM knows this lead by: `source:source_ref`.
    pub fn external_id(&self) -> String {
        format!("{}:{}", self.source, self.source_ref)
    }

    /// Deterministic idempotency key: `source:source_ref:target`, the same on every retry of a step. Suffixed by
    /// the lead revision the step sends for certain (`:rev-2`, see [`Job::key_revision`]) so that a CRM's stored
    /// answer to the earlier content is not replayed for the new one, and by the replay generation after a manual
    /// replay so that a CRM's stored answer to the earlier attempt (often an error) is not replayed. A step sent
    /// without some fields (see [`Job::dropped`]) is an operation of its own (`:without-phone`): the CRM's stored
    /// refusal of the whole record is not replayed for it, and every resend of it (a crash, a replay) has the
    /// same key.
    pub fn idempotency_key(&self) -> String {
        let mut key = format!("{}:{}:{}", self.source, self.source_ref, self.target);
        if self.key_revision > 1 {
            key.push_str(&format!(":rev-{}", self.key_revision));
        }
        if self.replay_generation != 0 {
            key.push_str(&format!(":replay-{}", self.replay_generation));
        }
        if !self.dropped.is_empty() {
            key.push_str(&format!(":without-{}", self.dropped.join("+")));
        }
        key
    }
}

/// The lead a stored event belongs to, as `{source}:{source_ref}`: a `crm_stage` source's stage event (a `stage`
/// and the `lead` it belongs to, see `features::targets::conversion`) names its lead in `lead_source` and
/// `lead_ref`; any other event is its own lead. Steps of one lead to one target go out in the order their events
/// came in (a lead's stages reach a conversion step in order): the store keeps this key on each step for that.
pub fn lead_key(source: &str, source_ref: &str, payload: &serde_json::Value) -> String {
    let text = |k: &str| payload.get(k).and_then(serde_json::Value::as_str);
    match (text("stage"), payload.get("lead"), text("lead_source"), text("lead_ref")) {
        (Some(_), Some(_), Some(lead_source), Some(lead_ref)) => format!("{lead_source}:{lead_ref}"),
        _ => format!("{source}:{source_ref}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_stage_event_belongs_to_its_lead_and_any_other_event_to_itself() {
        let stage = json!({"stage": "customer", "lead_source": "meta", "lead_ref": "42", "lead": {"leadgen_id": "42"}});
        assert_eq!(super::lead_key("hubspot_stages", "meta:42:customer", &stage), "meta:42");
        assert_eq!(super::lead_key("meta", "42", &json!({"leadgen_id": "42"})), "meta:42");
        // A web form that happens to have a `stage` field is still its own lead.
        assert_eq!(super::lead_key("web", "W-1", &json!({"stage": "new", "email": "a@example.com"})), "web:W-1");
    }
}
