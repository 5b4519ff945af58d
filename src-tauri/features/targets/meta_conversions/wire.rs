//! Meta's Conversions API for CRM leads, as Meta documents it ("Conversions API for CRM", the server event
//! parameters): `POST /{api_version}/{dataset_id}/events` with `{"data": [event…]}`, at most 1,000 events a
//! request. Each event:
//!
//! ```json
//! {"event_name": "Qualified", "event_time": 1764950400, "action_source": "system_generated",
//!  "event_id": "meta:1234:marketingqualifiedlead",
//!  "user_data": {"lead_id": 1234567890123456, "em": ["<sha256>"], "ph": ["<sha256>"]},
//!  "custom_data": {"event_source": "crm", "lead_event_source": "HubSpot"}}
//! ```
//!
//! `em` is the SHA-256 of the trimmed, lower-cased e-mail; `ph` of the phone's digits with the country code and no
//! leading zeros. The answer is `{"events_received": n, "fbtrace_id"}`; errors are Graph's
//! (`features::graph::classify_error`). Pure: no I/O.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::features::targets::conversion::Conversion;

/// Most events Meta takes in one request.
pub const MAX_EVENTS: usize = 1_000;

/// Meta's window for CRM events: up to 7 days after `event_time`.
pub const WINDOW_DAYS: u32 = 7;

/// Lower-case hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// An e-mail as Meta hashes it: trimmed, lower case.
pub fn normalized_email(raw: &str) -> Option<String> {
    let e = raw.trim().to_lowercase();
    e.contains('@').then_some(e)
}

/// A phone as Meta hashes it: digits only, the country code included, no leading zeros (`+49 151 …` →
/// `49151…`; a national number without its country code cannot be matched and is sent as it is).
pub fn normalized_phone(raw: &str) -> Option<String> {
    let digits: String = raw.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_start_matches('0').to_string();
    (digits.len() >= 6).then_some(digits)
}

/// The event for `c`, named `event_name`; `None` when nothing in the lead lets Meta match it (no Meta lead id,
/// e-mail or phone).
pub fn event(c: &Conversion, event_name: &str, lead_event_source: &str) -> Option<Value> {
    let mut user = serde_json::Map::new();
    if let Some(id) = c.meta_lead_id() {
        // Meta documents lead_id as a 15–17 digit integer.
        user.insert("lead_id".into(), id.parse::<u64>().map(Value::from).unwrap_or(Value::String(id)));
    }
    if let Some(e) = c.answer(&["email", "work_email"]).as_deref().and_then(normalized_email) {
        user.insert("em".into(), json!([sha256_hex(&e)]));
    }
    if let Some(p) = c.answer(&["phone_number", "phone"]).as_deref().and_then(normalized_phone) {
        user.insert("ph".into(), json!([sha256_hex(&p)]));
    }
    if user.is_empty() {
        return None;
    }
    Some(json!({
        "event_name": event_name,
        "event_time": c.event_time.timestamp(),
        "action_source": "system_generated",
        "event_id": c.key(),
        "user_data": user,
        "custom_data": {"event_source": "crm", "lead_event_source": lead_event_source},
    }))
}

/// The request body for `events`.
pub fn body(events: &[Value]) -> Value {
    json!({ "data": events })
}

/// How many events Meta said it received, from a success answer.
pub fn events_received(body: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Value>(body).ok()?.get("events_received")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn conversion(lead: Value) -> Conversion {
        let t = Utc.with_ymd_and_hms(2026, 12, 5, 12, 0, 0).unwrap();
        Conversion {
            stage: "customer".into(),
            event_time: t,
            lead_time: t,
            lead,
            lead_key: "meta:1234".into(),
            crm: Some("HubSpot".into()),
            value: None,
            currency: None,
        }
    }

    #[test]
    fn an_event_follows_the_documented_crm_shape() {
        let c = conversion(json!({"leadgen_id": "1234567890123456",
            "fields": {"email": " Ada@Example.com ", "phone_number": "+49 151 1234-5678"}}));
        let e = event(&c, "Purchase", "HubSpot").unwrap();
        assert_eq!(e["event_name"], "Purchase");
        assert_eq!(e["event_time"], 1_796_472_000);
        assert_eq!(e["action_source"], "system_generated");
        assert_eq!(e["event_id"], "meta:1234:customer");
        assert_eq!(e["user_data"]["lead_id"], 1_234_567_890_123_456u64);
        assert_eq!(e["user_data"]["em"][0], sha256_hex("ada@example.com"));
        assert_eq!(e["user_data"]["ph"][0], sha256_hex("4915112345678"));
        assert_eq!(e["custom_data"], json!({"event_source": "crm", "lead_event_source": "HubSpot"}));
        assert!(!e.to_string().contains("ada@"), "no personal data in clear");
    }

    #[test]
    fn a_lead_with_nothing_to_match_makes_no_event() {
        assert_eq!(event(&conversion(json!({"fields": {"full_name": "Ada"}})), "Lead", "CRM"), None);
        let e = event(&conversion(json!({"email": "x@y.z"})), "Lead", "CRM").unwrap();
        assert!(e["user_data"].get("lead_id").is_none());
        assert_eq!(normalized_phone("0049 151 12345678").as_deref(), Some("4915112345678"));
        assert_eq!(normalized_email("not-an-email"), None);
    }
}
