//! A CRM's stage-change webhook (`kind = "crm_stage"`): which lead reached which stage, read with the source's
//! `stage_webhook` pointers. The defaults read a HubSpot contact workflow's "Send a webhook" body — the enrolled
//! contact with its properties, each `{"value": …, "timestamp": <ms>}`:
//!
//! ```json
//! {"vid": 1501, "portal-id": 62515,
//!  "properties": {"lifecyclestage": {"value": "customer", "timestamp": 1796472000000},
//!                 "leadline_id": {"value": "google:GL-1"}, "amount": {"value": "1200"}}}
//! ```
//!
//! Any JSON with the lead's external id (or the CRM record id a delivered step got back) and the new stage works
//! with pointers of its own. Pure: the lead is looked up by the caller.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::config::StageWebhookConfig;

/// One stage change, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct StageChange {
    /// Leadline's external id of the lead (`{source}:{source_ref}`), when the body carries it.
    pub external_id: Option<String>,
    /// The CRM's record id, when the body carries it.
    pub crm_id: Option<String>,
    pub stage: String,
    pub changed_at: DateTime<Utc>,
    pub value: Option<f64>,
}

fn text(body: &Value, pointer: &str) -> Option<String> {
    match body.pointer(pointer)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads a stage change; the error says what is missing, naming the pointer.
pub fn read(body: &Value, cfg: &StageWebhookConfig, received_at: DateTime<Utc>) -> Result<StageChange, String> {
    let stage = text(body, &cfg.stage_pointer)
        .ok_or_else(|| format!("no stage at {} (stage_webhook.stage_pointer)", cfg.stage_pointer))?;
    let external_id = text(body, &cfg.lead_pointer);
    let crm_id = text(body, &cfg.crm_id_pointer);
    if external_id.is_none() && crm_id.is_none() {
        return Err(format!(
            "no lead: neither {} (Leadline's id of the lead) nor {} (the CRM record id) is in the body",
            cfg.lead_pointer, cfg.crm_id_pointer
        ));
    }
    let changed_at = match body.pointer(&cfg.changed_at_pointer) {
        Some(Value::Number(n)) => n.as_i64().and_then(DateTime::from_timestamp_millis),
        Some(Value::String(s)) => DateTime::parse_from_rfc3339(s)
            .map(|t| t.to_utc())
            .ok()
            .or_else(|| s.parse::<i64>().ok().and_then(DateTime::from_timestamp_millis)),
        _ => None,
    }
    // A stage is never reached in the future: a skewed CRM clock counts as now.
    .map_or(received_at, |t| t.min(received_at));
    let value = text(body, &cfg.value_pointer).and_then(|v| v.parse::<f64>().ok());
    Ok(StageChange { external_id, crm_id, stage, changed_at, value })
}

/// What a `crm_stage` source's settings must be: webhooks only (no listing), a signature header if signed, and
/// a route of conversion steps only. Run by `features::checks` after the configuration's own validation.
pub fn check(
    key: &str,
    source: &crate::config::SourceConfig,
    config: &crate::config::Config,
) -> Result<(), crate::config::ConfigError> {
    use crate::config::{SignatureScheme, TargetKind};
    fn invalid(key: impl Into<String>, message: impl Into<String>) -> crate::config::ConfigError {
        crate::config::ConfigError::invalid(key, message)
    }
    if source.reconcile.is_some() || source.poll.is_some() {
        return Err(invalid(
            format!("{key}.reconcile"),
            "does not apply to kind = \"crm_stage\" (stage changes come by webhook)",
        ));
    }
    if let Some(sig) = source.signature() {
        match sig.scheme {
            SignatureScheme::HmacSha256 => {
                if sig.header.is_empty() {
                    return Err(invalid(format!("{key}.signature.header"), "must not be empty"));
                }
                if sig.url.is_some() {
                    return Err(invalid(format!("{key}.signature.url"), "applies only to scheme = \"hubspot_v3\""));
                }
            }
            SignatureScheme::HubspotV3 => {
                let url = sig.url.as_deref().unwrap_or_default();
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(invalid(
                        format!("{key}.signature.url"),
                        "is required for scheme = \"hubspot_v3\": the webhook URL exactly as HubSpot calls it \
                         (https://…/ingest/<name>), which the signature covers",
                    ));
                }
                if sig.header != crate::config::default_signature_header() {
                    return Err(invalid(
                        format!("{key}.signature.header"),
                        "does not apply to scheme = \"hubspot_v3\": HubSpot's headers are X-HubSpot-Signature-v3 and \
                         X-HubSpot-Request-Timestamp",
                    ));
                }
            }
        }
    }
    for t in &source.route {
        let kind = config.targets.get(t).map(|t| t.kind());
        if !matches!(kind, Some(TargetKind::MetaConversions | TargetKind::GoogleAdsConversions)) {
            return Err(invalid(
                format!("{key}.route"),
                format!(
                    "`{t}` is not a conversion step: a crm_stage source routes only to kind = \"meta_conversions\" \
                     or \"google_ads_conversions\""
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    #[test]
    fn a_hubspot_workflow_body_is_read_with_the_defaults() {
        let now = Utc.with_ymd_and_hms(2026, 12, 5, 13, 0, 0).unwrap();
        let body = json!({"vid": 1501, "portal-id": 62515, "properties": {
            "lifecyclestage": {"value": "customer", "timestamp": 1_796_472_000_000i64},
            "leadline_id": {"value": "google:GL-1"}, "amount": {"value": "1200"}}});
        let c = read(&body, &StageWebhookConfig::default(), now).unwrap();
        assert_eq!(c.external_id.as_deref(), Some("google:GL-1"));
        assert_eq!(c.crm_id.as_deref(), Some("1501"));
        assert_eq!(c.stage, "customer");
        assert_eq!(c.changed_at, Utc.with_ymd_and_hms(2026, 12, 5, 12, 0, 0).unwrap());
        assert_eq!(c.value, Some(1200.0));
    }

    #[test]
    fn what_is_missing_is_named() {
        let now = Utc.with_ymd_and_hms(2026, 12, 5, 13, 0, 0).unwrap();
        let cfg = StageWebhookConfig::default();
        let e = read(&json!({"vid": 1}), &cfg, now).unwrap_err();
        assert!(e.contains("/properties/lifecyclestage/value"), "{e}");
        let e = read(&json!({"properties": {"lifecyclestage": {"value": "lead"}}}), &cfg, now).unwrap_err();
        assert!(e.contains("no lead"), "{e}");
        let c = read(&json!({"vid": 7, "properties": {"lifecyclestage": {"value": "lead"}}}), &cfg, now).unwrap();
        assert_eq!((c.changed_at, c.external_id), (now, None));
    }

    /// `scheme = "hubspot_v3"` needs the URL HubSpot calls and takes no header of its own; a generic source
    /// cannot use it.
    #[test]
    fn a_hubspot_v3_signature_needs_its_url_and_only_on_crm_stage_sources() {
        let text = |kind: &str, signature: &str| {
            format!(
                r#"
                [sources.stages]
                kind = "{kind}"
                route = ["capi"]
                signature = {signature}
                [targets.capi]
                kind = "meta_conversions"
                url = "http://127.0.0.1:9/graph"
                access_token_env = "CAPI_TOKEN"
                dataset_id = "1"
                lead_event_source = "HubSpot"
                stages = {{ customer = "Purchase" }}
                "#
            )
        };
        let check = |kind: &str, signature: &str| {
            crate::features::checks::parse(&text(kind, signature), std::path::Path::new("t.toml")).map(|_| ())
        };
        let url = r#"url = "https://leads.example.com/ingest/stages""#;
        assert!(check("crm_stage", &format!(r#"{{ scheme = "hubspot_v3", secret_env = "S", {url} }}"#)).is_ok());
        let no_url = check("crm_stage", r#"{ scheme = "hubspot_v3", secret_env = "S" }"#).unwrap_err().to_string();
        assert!(no_url.starts_with("sources.stages.signature.url:"), "{no_url}");
        let header =
            check("crm_stage", &format!(r#"{{ scheme = "hubspot_v3", secret_env = "S", header = "X-Sig", {url} }}"#))
                .unwrap_err()
                .to_string();
        assert!(header.starts_with("sources.stages.signature.header:"), "{header}");
        let hmac_url = check("crm_stage", &format!(r#"{{ secret_env = "S", {url} }}"#)).unwrap_err().to_string();
        assert!(hmac_url.starts_with("sources.stages.signature.url:"), "{hmac_url}");
        let generic = check("generic", &format!(r#"{{ scheme = "hubspot_v3", secret_env = "S", {url} }}"#))
            .unwrap_err()
            .to_string();
        assert!(generic.starts_with("sources.stages.signature.scheme:"), "{generic}");
    }
}
