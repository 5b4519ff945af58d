//! Meta Lead Ads webhook bodies: one event per `entry[].changes[]` whose field is `leadgen`.

use serde_json::Value;

/// A lead notification extracted from a Meta webhook body.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaLead {
    /// `leadgen_id` as a string (Meta may send ids as JSON numbers).
    pub leadgen_id: String,
    /// The change's `value`, with the entry's page id and time added when the value lacks them.
    pub payload: Value,
}

#[derive(Debug, PartialEq, Eq)]
pub enum MetaBodyError {
    NotAnObject,
    /// A `leadgen` change without a usable `leadgen_id`.
    MissingLeadgenId {
        entry: usize,
        change: usize,
    },
}

fn id_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Extracts the leads of a notification. Other fields (feed, mention...) are ignored.
pub fn leads(body: &Value) -> Result<Vec<MetaLead>, MetaBodyError> {
    let obj = body.as_object().ok_or(MetaBodyError::NotAnObject)?;
    let mut out = Vec::new();
    let entries = obj.get("entry").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    for (ei, entry) in entries.iter().enumerate() {
        let changes = entry.get("changes").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        for (ci, change) in changes.iter().enumerate() {
            if change.get("field").and_then(Value::as_str) != Some("leadgen") {
                continue;
            }
            let value = change.get("value").cloned().unwrap_or(Value::Null);
            let leadgen_id = value
                .get("leadgen_id")
                .and_then(id_string)
                .ok_or(MetaBodyError::MissingLeadgenId { entry: ei, change: ci })?;
            let mut payload = match value {
                Value::Object(m) => m,
                _ => serde_json::Map::new(),
            };
            // Normalise ids to strings so downstream never sees 1e15-style numbers.
            for key in ["leadgen_id", "page_id", "form_id", "adgroup_id", "ad_id"] {
                if let Some(s) = payload.get(key).and_then(id_string) {
                    payload.insert(key.into(), Value::String(s));
                }
            }
            if !payload.contains_key("page_id") {
                if let Some(page) = entry.get("id").and_then(id_string) {
                    payload.insert("page_id".into(), Value::String(page));
                }
            }
            if !payload.contains_key("created_time") {
                if let Some(t) = entry.get("time") {
                    payload.insert("created_time".into(), t.clone());
                }
            }
            // One lead shape whatever the path: times as RFC 3339 text, like the Graph API's lead object.
            if let Some(t) = payload.get("created_time").and_then(crate::graph::time_text) {
                payload.insert("created_time".into(), Value::String(t));
            }
            out.push(MetaLead { leadgen_id, payload: Value::Object(payload) });
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
        let leads = leads(&body).unwrap();
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
    fn missing_leadgen_id_is_an_error_and_non_objects_are_rejected() {
        let body = json!({"entry": [{"changes": [{"field": "leadgen", "value": {"form_id": 1}}]}]});
        assert_eq!(leads(&body), Err(MetaBodyError::MissingLeadgenId { entry: 0, change: 0 }));
        assert_eq!(leads(&json!([1, 2])), Err(MetaBodyError::NotAnObject));
        assert_eq!(leads(&json!({"object": "page"})).unwrap(), vec![]);
    }
}
