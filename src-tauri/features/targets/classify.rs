//! Outcome classification of the generic `http` target: one function decides what an answer means.
//!
//! The default mapping is the table in docs/operators.md ("Error classes"); a target can override it by status
//! code and by a field of the response body (Salesforce reports an exhausted API limit as `403` with
//! `errorCode: REQUEST_LIMIT_EXCEEDED`, which is a rate limit, not a configuration error). The body mapping wins
//! over the status mapping because it is the more specific statement of the CRM.

use crate::config::ClassifyConfig;
use crate::model::{default_class_for_status, truncate_chars, ErrorClass, Failure, Observed, Verdict};

/// Classifies one attempt. Pure: the same input always gives the same verdict.
pub fn classify(observed: &Observed<'_>, rules: &ClassifyConfig) -> Verdict {
    match observed {
        Observed::NotSent => Verdict::Failed(Failure {
            class: ErrorClass::Transient,
            reason: "could not connect to the target".into(),
            field: None,
        }),
        Observed::NoAnswer => Verdict::Failed(Failure {
            class: ErrorClass::Ambiguous,
            reason: "request sent but no answer (timeout or connection reset)".into(),
            field: None,
        }),
        Observed::Response { status, body } => {
            let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
            let body_class = rules.body_field.as_deref().and_then(|ptr| {
                let value = json.as_ref()?.pointer(ptr)?;
                let code = match value {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                rules.body_values.get(&code).copied()
            });
            if (200..300).contains(status) && body_class.is_none() {
                return Verdict::Delivered;
            }
            let class = body_class
                .or_else(|| rules.status.get(&status.to_string()).copied())
                .unwrap_or_else(|| default_class_for_status(*status));
            let message = json.as_ref().and_then(|j| crm_message(j, rules.message_pointer.as_deref()));
            let field = json.as_ref().and_then(|j| crm_field(j, rules.field_pointer.as_deref()));
            let reason = match message {
                Some(m) => format!("HTTP {status}: {m}"),
                None => format!("HTTP {status} {}", status_text(*status)),
            };
            Verdict::Failed(Failure { class, reason, field })
        }
    }
}

fn status_text(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("")
}

/// Where CRMs put their human message: HubSpot `/message`, Graph `/error/message`, Salesforce `/0/message`,
/// Pipedrive `/error`, and lists of errors.
const MESSAGE_POINTERS: &[&str] =
    &["/message", "/error/message", "/0/message", "/errors/0/message", "/error", "/detail"];
/// Where CRMs name the offending field: HubSpot `/errors/0/in`, Salesforce `/0/fields/0`, others.
const FIELD_POINTERS: &[&str] = &["/errors/0/in", "/0/fields/0", "/errors/0/field", "/field", "/error/field"];

fn crm_message(json: &serde_json::Value, configured: Option<&str>) -> Option<String> {
    first_string(json, configured, MESSAGE_POINTERS).map(|m| truncate_chars(&m, 300))
}

fn crm_field(json: &serde_json::Value, configured: Option<&str>) -> Option<String> {
    first_string(json, configured, FIELD_POINTERS)
}

fn first_string(json: &serde_json::Value, configured: Option<&str>, guesses: &[&str]) -> Option<String> {
    configured.into_iter().chain(guesses.iter().copied()).find_map(|ptr| match json.pointer(ptr)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_message_is_passed_over_for_the_next_place_crms_put_one() {
        let json = serde_json::json!({"message": "", "error": {"message": "phone is invalid"}, "field": ""});
        assert_eq!(crm_message(&json, None).as_deref(), Some("phone is invalid"));
        assert_eq!(crm_field(&json, None), None);
    }
    use std::collections::BTreeMap;
    use ErrorClass::*;

    fn failed(v: Verdict) -> Failure {
        match v {
            Verdict::Failed(f) => f,
            Verdict::Delivered => panic!("expected a failure"),
        }
    }

    #[test]
    fn default_status_table() {
        let table: &[(u16, Option<ErrorClass>)] = &[
            (200, None),
            (201, None),
            (204, None),
            (300, Some(PermanentData)),
            (301, Some(PermanentConfig)),
            (400, Some(PermanentData)),
            (401, Some(PermanentConfig)),
            (403, Some(PermanentConfig)),
            (404, Some(PermanentConfig)),
            (408, Some(Transient)),
            (409, Some(Transient)),
            (410, Some(PermanentConfig)),
            (413, Some(PermanentData)),
            (422, Some(PermanentData)),
            (429, Some(RateLimited)),
            (500, Some(Transient)),
            (502, Some(Transient)),
            (503, Some(Transient)),
            (504, Some(Transient)),
            (599, Some(Transient)),
        ];
        let rules = ClassifyConfig::default();
        for &(status, expected) in table {
            let v = classify(&Observed::Response { status, body: b"" }, &rules);
            match expected {
                None => assert_eq!(v, Verdict::Delivered, "status {status}"),
                Some(class) => assert_eq!(failed(v).class, class, "status {status}"),
            }
        }
    }

    #[test]
    fn transport_failures() {
        let rules = ClassifyConfig::default();
        assert_eq!(failed(classify(&Observed::NotSent, &rules)).class, Transient);
        assert_eq!(failed(classify(&Observed::NoAnswer, &rules)).class, Ambiguous);
    }

    #[test]
    fn status_override_and_body_override() {
        let rules = ClassifyConfig {
            status: BTreeMap::from([("404".to_string(), PermanentData)]),
            body_field: Some("/0/errorCode".into()),
            body_values: BTreeMap::from([
                ("REQUEST_LIMIT_EXCEEDED".to_string(), RateLimited),
                ("INVALID_SESSION_ID".to_string(), PermanentConfig),
            ]),
            ..Default::default()
        };
        let v = classify(&Observed::Response { status: 404, body: b"{}" }, &rules);
        assert_eq!(failed(v).class, PermanentData);

        let sf = br#"[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]"#;
        let f = failed(classify(&Observed::Response { status: 403, body: sf }, &rules));
        assert_eq!(f.class, RateLimited);
        assert_eq!(f.reason, "HTTP 403: TotalRequests Limit exceeded.");

        // Without the override, the same 403 is a configuration error.
        let plain = ClassifyConfig::default();
        assert_eq!(failed(classify(&Observed::Response { status: 403, body: sf }, &plain)).class, PermanentConfig);
    }

    #[test]
    fn body_value_can_fail_a_2xx() {
        // Some CRMs answer 200 with {"success": false}; a body rule can catch it.
        let rules = ClassifyConfig {
            body_field: Some("/success".into()),
            body_values: BTreeMap::from([("false".to_string(), PermanentData)]),
            ..Default::default()
        };
        let v =
            classify(&Observed::Response { status: 200, body: br#"{"success":false,"error":"bad phone"}"# }, &rules);
        let f = failed(v);
        assert_eq!(f.class, PermanentData);
        assert_eq!(f.reason, "HTTP 200: bad phone");
        let ok = classify(&Observed::Response { status: 200, body: br#"{"success":true}"# }, &rules);
        assert_eq!(ok, Verdict::Delivered);
    }

    #[test]
    fn crm_message_and_field_are_extracted() {
        let rules = ClassifyConfig::default();
        let hubspot = br#"{"status":"error","message":"Property values were not valid","category":"VALIDATION_ERROR","errors":[{"message":"Invalid phone","in":"phone"}]}"#;
        let f = failed(classify(&Observed::Response { status: 400, body: hubspot }, &rules));
        assert_eq!(f.reason, "HTTP 400: Property values were not valid");
        assert_eq!(f.field.as_deref(), Some("phone"));

        let salesforce = br#"[{"message":"Session expired or invalid","errorCode":"INVALID_SESSION_ID","fields":[]}]"#;
        let f = failed(classify(&Observed::Response { status: 401, body: salesforce }, &rules));
        assert_eq!(f.reason, "HTTP 401: Session expired or invalid");
        assert_eq!(f.field, None);

        let text = failed(classify(&Observed::Response { status: 503, body: b"<html>down</html>" }, &rules));
        assert_eq!(text.reason, "HTTP 503 Service Unavailable");
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate_chars("héllo", 2), "hé…");
        assert_eq!(truncate_chars("hi", 5), "hi");
    }
}
