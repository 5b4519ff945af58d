//! The generic `http` target's wire format: the envelope every request carries, the URL of a lead, and where a
//! CRM's answer holds the record's id. Pure: no I/O.

use crate::model::Job;

use super::super::vendor::encode_component as urlencode;

/// The JSON body sent for a job without a mapping (docs/configuration.md, "What a target receives").
pub fn envelope(job: &Job) -> serde_json::Value {
    serde_json::json!({
        "external_id": job.external_id(),
        "idempotency_key": job.idempotency_key(),
        "source": job.source,
        "source_ref": job.source_ref,
        "received_at": job.received_at,
        "revision": job.revision,
        "lead": job.payload,
        "previous_steps": job.previous,
    })
}

/// A URL template with `{external_id}` filled in as one path segment.
pub fn url(template: &str, external_id: &str) -> String {
    template.replace("{external_id}", &urlencode(external_id))
}

pub fn json_id(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub fn crm_id_in(body: &[u8], pointer: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    json.pointer(pointer).and_then(json_id)
}

/// A search answer holds a record when the id is at `pointer`, or in the first element of a list
/// (a bare array, or `results`/`data`/`records` as HubSpot, Pipedrive and Salesforce answer).
pub fn search_hit(body: &[u8], pointer: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    if let Some(id) = json.pointer(pointer).and_then(json_id) {
        return Some(id);
    }
    let first = match &json {
        serde_json::Value::Array(items) => items.first(),
        serde_json::Value::Object(map) => ["results", "data", "records", "items"]
            .iter()
            .find_map(|k| map.get(*k).and_then(|v| v.as_array()).and_then(|a| a.first())),
        _ => None,
    }?;
    first.pointer(pointer).and_then(json_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_hits_in_the_shapes_crms_answer() {
        assert_eq!(search_hit(br#"{"id":"c-1"}"#, "/id").as_deref(), Some("c-1"));
        assert_eq!(search_hit(br#"[{"id":7}]"#, "/id").as_deref(), Some("7"));
        assert_eq!(search_hit(br#"{"results":[{"id":"h"}],"total":1}"#, "/id").as_deref(), Some("h"));
        assert_eq!(search_hit(br#"{"results":[],"total":0}"#, "/id"), None);
        assert_eq!(search_hit(br#"[]"#, "/id"), None);
        assert_eq!(search_hit(b"not json", "/id"), None);
    }

    #[test]
    fn external_ids_are_one_path_segment() {
        assert_eq!(urlencode("meta:123/4 5"), "meta%3A123%2F4%205");
        assert_eq!(url("http://x/leads/{external_id}", "a:b"), "http://x/leads/a%3Ab");
    }
}
