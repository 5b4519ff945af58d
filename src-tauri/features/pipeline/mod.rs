//! The pipeline: how an event becomes the ordered steps of its source's route.
//!
//! A route is a list of target names (`route = ["crm", "notify"]`). Step 0 is due at once; step N becomes
//! due only when step N-1 is delivered (in the same transaction), and its request carries the results of the
//! earlier steps (`previous_steps.crm.crm_id`). A delivered step is never sent again; only unfinished steps are
//! retried.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::config::SourceConfig;
use crate::store::NewEvent;

/// Reads an event id: `field` is a top-level key, or a JSON pointer when it starts with `/`.
/// Strings are trimmed; numbers are written as they were sent. Empty, null, objects and arrays give `None`.
pub fn event_id(body: &Value, field: &str) -> Option<String> {
    let v = if field.starts_with('/') { body.pointer(field) } else { body.get(field) }?;
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub fn new_event(
    source: &str,
    config: &SourceConfig,
    source_ref: String,
    payload: Value,
    received_at: DateTime<Utc>,
) -> NewEvent {
    NewEvent {
        source: source.to_string(),
        source_ref,
        lead_at: Some(crate::model::lead_time(received_at, &payload)),
        payload,
        route: config.route.clone(),
        received_at,
        via: Default::default(),
        on_change: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn event_ids() {
        let body = json!({"id": 42, "lead": {"ref": " a-1 "}, "blank": "", "obj": {}});
        assert_eq!(event_id(&body, "id").as_deref(), Some("42"));
        assert_eq!(event_id(&body, "/lead/ref").as_deref(), Some("a-1"));
        assert_eq!(event_id(&body, "blank"), None);
        assert_eq!(event_id(&body, "obj"), None);
        assert_eq!(event_id(&body, "missing"), None);
    }
}
