//! Meta Lead Ads webhook bodies: one event per `entry[].changes[]` whose field is `leadgen`.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

use super::id::{self, IdError};

/// A lead notification extracted from a Meta webhook body.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaLead {
    /// `leadgen_id` as a string (Meta may send ids as JSON numbers).
    pub leadgen_id: String,
    /// The change's `value`, with the entry's page id and time added when the value lacks them.
    pub payload: Value,
}

/// What a notification holds: its leads, and the `leadgen` changes that could not be used (each reported, none
/// holding back the valid leads beside it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaNotification {
    pub leads: Vec<MetaLead>,
    pub rejected: Vec<RejectedChange>,
}

/// A `leadgen` change without a usable `leadgen_id`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RejectedChange {
    pub entry: usize,
    pub change: usize,
    pub reason: String,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetaBodyError {
    #[error("the body is not valid JSON: {0}")]
    Malformed(String),
    #[error("expected a JSON object")]
    NotAnObject,
}

/// An id member of a raw object as a string, exactly as sent (numbers keep every digit).
fn raw_id(members: &BTreeMap<String, &RawValue>, key: &str) -> Option<Result<String, IdError>> {
    members.get(key).map(|raw| id::id_text(raw))
}

/// Extracts the leads of a notification from its raw JSON text. Other fields (feed, mention...) are ignored.
pub fn leads(body: &str) -> Result<MetaNotification, MetaBodyError> {
    let root: &RawValue = serde_json::from_str(body).map_err(|e| MetaBodyError::Malformed(e.to_string()))?;
    let root = id::object(root).ok_or(MetaBodyError::NotAnObject)?;
    let mut out = MetaNotification::default();
    let entries = root.get("entry").and_then(|e| id::array(e)).unwrap_or_default();
    for (ei, entry) in entries.iter().enumerate() {
        let Some(entry) = id::object(entry) else { continue };
        let changes = entry.get("changes").and_then(|c| id::array(c)).unwrap_or_default();
        for (ci, change) in changes.iter().enumerate() {
            let Some(change) = id::object(change) else { continue };
            let field = change.get("field").and_then(|f| serde_json::from_str::<String>(f.get()).ok());
            if field.as_deref() != Some("leadgen") {
                continue;
            }
            let members = change.get("value").and_then(|v| id::object(v)).unwrap_or_default();
            let leadgen_id = match raw_id(&members, "leadgen_id").unwrap_or(Err(IdError::Missing)) {
                Ok(id) => id,
                Err(e) => {
                    out.rejected.push(RejectedChange { entry: ei, change: ci, reason: format!("leadgen_id: {e}") });
                    continue;
                }
            };
            let mut payload: serde_json::Map<String, Value> =
                members.iter().filter_map(|(k, v)| Some((k.clone(), serde_json::from_str(v.get()).ok()?))).collect();
            // Ids as strings, digit for digit, so downstream never sees 1e15-style numbers.
            for key in ["leadgen_id", "page_id", "form_id", "adgroup_id", "ad_id"] {
                if let Some(Ok(s)) = raw_id(&members, key) {
                    payload.insert(key.into(), Value::String(s));
                }
            }
            if !payload.contains_key("page_id") {
                if let Some(Ok(page)) = raw_id(&entry, "id") {
                    payload.insert("page_id".into(), Value::String(page));
                }
            }
            if !payload.contains_key("created_time") {
                if let Some(t) = entry.get("time").and_then(|t| serde_json::from_str::<Value>(t.get()).ok()) {
                    payload.insert("created_time".into(), t);
                }
            }
            // One lead shape whatever the path: times as RFC 3339 text, like the Graph API's lead object.
            if let Some(t) = payload.get("created_time").and_then(crate::features::graph::time_text) {
                payload.insert("created_time".into(), Value::String(t));
            }
            out.leads.push(MetaLead { leadgen_id, payload: Value::Object(payload) });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_event_per_leadgen_change_with_numeric_ids() {
        let body = json!({"object": "page", "entry": [
            {"id": 111, "time": 1700000000, "changes": [
                {"field": "leadgen", "value": {"leadgen_id": 444444444444444u64, "page_id": 111, "form_id": 555, "created_time": 1700000001}},
                {"field": "feed", "value": {"post_id": "x"}},
                {"field": "leadgen", "value": {"leadgen_id": "777", "form_id": "555"}}
            ]},
            {"id": "222", "time": 1700000002, "changes": [
                {"field": "leadgen", "value": {"leadgen_id": 888}}
            ]}
        ]});
        let leads = leads(&body.to_string()).unwrap().leads;
        let ids: Vec<_> = leads.iter().map(|l| l.leadgen_id.as_str()).collect();
        assert_eq!(ids, ["444444444444444", "777", "888"]);
        assert_eq!(leads[0].payload["page_id"], "111");
        assert_eq!(leads[0].payload["form_id"], "555");
        assert_eq!(leads[1].payload["page_id"], "111");
        assert_eq!(leads[2].payload["page_id"], "222");
        assert_eq!(leads[2].payload["created_time"], "2023-11-14T22:13:22Z");
        assert_eq!(leads[0].payload["created_time"], "2023-11-14T22:13:21Z");
    }

    #[test]
    fn a_bad_change_is_reported_and_the_valid_ones_kept() {
        let body = r#"{"entry": [{"id": 1, "changes": [
            {"field": "leadgen", "value": {"form_id": 1}},
            {"field": "leadgen", "value": {"leadgen_id": "ok-1"}},
            {"field": "leadgen", "value": {"leadgen_id": "bad\r\nid"}},
            {"field": "leadgen", "value": {"leadgen_id": 123456789012345678901234567890}}
        ]}]}"#;
        let n = leads(body).unwrap();
        let ids: Vec<_> = n.leads.iter().map(|l| l.leadgen_id.as_str()).collect();
        assert_eq!(ids, ["ok-1", "123456789012345678901234567890"]);
        assert_eq!(n.leads[1].payload["leadgen_id"], "123456789012345678901234567890");
        assert_eq!(n.rejected.len(), 2);
        assert_eq!((n.rejected[0].entry, n.rejected[0].change), (0, 0));
        assert!(n.rejected[0].reason.contains("missing"), "{}", n.rejected[0].reason);
        assert_eq!((n.rejected[1].entry, n.rejected[1].change), (0, 2));
        assert!(n.rejected[1].reason.contains("control character"), "{}", n.rejected[1].reason);
    }

    #[test]
    fn non_objects_are_rejected_and_odd_shapes_ignored() {
        assert_eq!(leads("[1, 2]"), Err(MetaBodyError::NotAnObject));
        assert!(matches!(leads("{"), Err(MetaBodyError::Malformed(_))));
        assert_eq!(leads(r#"{"object": "page"}"#).unwrap(), MetaNotification::default());
        assert_eq!(leads(r#"{"entry": 5}"#).unwrap(), MetaNotification::default());
        assert_eq!(leads(r#"{"entry": [1, {"changes": [2, {"field": 3}]}]}"#).unwrap(), MetaNotification::default());
    }
}
