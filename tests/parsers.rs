//! Property tests for every parser that takes outside input: event ids from webhook bodies, Meta notifications,
//! signatures, `Retry-After`, the config file, dead-letter filters and the privacy masks. Whatever the input,
//! none panics, and every rejection is an error that says something.

use chrono::{TimeZone, Utc};
use leadline::ingest::{id, meta, signature};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Arbitrary JSON: scalars (big numbers and odd strings included), arrays and objects, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        ".{0,20}".prop_map(Value::String),
        "[0-9]{15,30}".prop_map(|digits| serde_json::from_str(&digits).unwrap_or(Value::Null)),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}|id|leadgen_id|entry|changes|value|field", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn an_event_id_is_taken_or_refused_with_a_reason_never_a_panic(body in ".{0,200}", field in ".{0,20}") {
        match id::event_id(&body, &field) {
            Ok(id) => prop_assert!(id::validate(&id).is_ok()),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn any_json_body_gives_a_valid_id_or_a_reason(body in any_json(), field in "id|/lead/ref|/a/0|x") {
        match id::event_id(&body.to_string(), &field) {
            Ok(id) => prop_assert!(id::validate(&id).is_ok()),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn printable_ids_and_big_numbers_come_back_exactly(text in "[ -~]{0,20}[!-~]", digits in "[1-9][0-9]{0,39}") {
        let body = json!({"id": text, "name": "x"}).to_string();
        prop_assert_eq!(id::event_id(&body, "id").unwrap(), text.trim());
        let body = format!(r#"{{"lead": {{"ref": {digits}}}}}"#);
        prop_assert_eq!(id::event_id(&body, "/lead/ref").unwrap(), digits);
    }

    #[test]
    fn control_characters_and_overlong_ids_are_refused(
        head in "[a-z]{1,5}", control in "[\u{0}-\u{1f}\u{7f}]", tail in "[a-z]{1,5}", n in 201usize..400
    ) {
        let body = json!({"id": format!("{head}{control}{tail}")}).to_string();
        let refused = matches!(id::event_id(&body, "id"), Err(id::IdError::ControlCharacter(_)));
        prop_assert!(refused);
        let body = json!({"id": "x".repeat(n)}).to_string();
        prop_assert_eq!(id::event_id(&body, "id"), Err(id::IdError::TooLong(n)));
    }

    #[test]
    fn a_meta_notification_is_parsed_or_refused_never_a_panic(body in any_json(), junk in ".{0,100}") {
        for text in [body.to_string(), junk] {
            match meta::leads(&text) {
                Ok(n) => {
                    for r in &n.rejected {
                        prop_assert!(!r.reason.is_empty());
                    }
                    for lead in &n.leads {
                        prop_assert!(id::validate(&lead.leadgen_id).is_ok());
                    }
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }

    #[test]
    fn one_bad_change_of_a_meta_notification_leaves_the_good_ones(ids in prop::collection::vec(1u64..u64::MAX, 1..6), bad in 0usize..6) {
        let mut changes: Vec<Value> = ids
            .iter()
            .map(|id| json!({"field": "leadgen", "value": {"leadgen_id": id, "form_id": 1, "page_id": 2}}))
            .collect();
        let bad = bad.min(changes.len());
        changes.insert(bad, json!({"field": "leadgen", "value": {"leadgen_id": "bad\u{7}id"}}));
        let body = json!({"object": "page", "entry": [{"id": "2", "time": 1, "changes": changes}]}).to_string();
        let n = meta::leads(&body).unwrap();
        prop_assert_eq!(n.leads.len(), ids.len());
        prop_assert_eq!(n.rejected.len(), 1);
        prop_assert_eq!(n.rejected[0].change, bad);
    }

    #[test]
    fn a_signature_verifies_its_body_only(secret in prop::collection::vec(any::<u8>(), 1..40), body in prop::collection::vec(any::<u8>(), 0..200), flip in any::<prop::sample::Index>(), header in ".{0,80}") {
        let sig = signature::sign(&secret, &body);
        prop_assert!(signature::verify(&secret, &body, Some(&sig)).is_ok());
        prop_assert!(signature::verify(&secret, &body, Some(sig.trim_start_matches("sha256="))).is_ok());
        prop_assert!(signature::verify(&secret, &body, None).is_err());
        if !body.is_empty() {
            let mut changed = body.clone();
            changed[flip.index(body.len())] ^= 1;
            prop_assert!(signature::verify(&secret, &changed, Some(&sig)).is_err());
        }
        // Any header at all: an answer, never a panic; a random one does not verify.
        prop_assert!(header == sig || signature::verify(&secret, &body, Some(&header)).is_err());
    }

    #[test]
    fn retry_after_is_a_time_not_before_now_or_nothing(value in ".{0,40}", seconds in 0u64..100_000_000) {
        if let Some(at) = leadline::model::parse_retry_after(&value, now()) {
            prop_assert!(at >= now());
        }
        let at = leadline::model::parse_retry_after(&seconds.to_string(), now()).unwrap();
        prop_assert_eq!(at, now() + chrono::Duration::seconds(seconds as i64));
        let date = (now() + chrono::Duration::seconds((seconds % 86_400) as i64)).format("%a, %d %b %Y %H:%M:%S GMT");
        let at = leadline::model::parse_retry_after(&date.to_string(), now()).unwrap();
        prop_assert_eq!(at, now() + chrono::Duration::seconds((seconds % 86_400) as i64));
    }

    #[test]
    fn a_config_file_is_read_or_refused_with_its_key_never_a_panic(text in ".{0,200}", key in "[a-z_]{1,12}", value in "[a-z0-9\"]{0,8}") {
        for text in [text, format!("[server]\n{key} = {value}\n"), format!("[targets.crm]\nurl = \"http://x\"\n{key} = {value}\n")] {
            if let Err(e) = leadline::config::Config::parse(&text, std::path::Path::new("leadline.toml")) {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn a_dead_letter_filter_is_parsed_or_refused(body in any_json(), field in ".{0,30}") {
        if let Err(e) = serde_json::from_value::<leadline::dlq::DeadLetterFilter>(body) {
            prop_assert!(!e.to_string().is_empty());
        }
        if let Some(parts) = leadline::store::lead_field_path(&field) {
            prop_assert!(!parts.is_empty());
            prop_assert!(parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-')));
        }
    }

    #[test]
    fn masked_text_keeps_no_address_or_phone_number(
        local in "[a-z]{3,10}", host in "[a-z]{3,10}", phone in "0[1-9][0-9]{2} [0-9]{4} [0-9]{3,4}", words in "[A-Za-z ,.:]{0,30}"
    ) {
        let email = format!("{local}@{host}.com");
        let text = format!("{words} {email} {words} {phone}.");
        let masked = leadline::privacy::mask_text(&text);
        prop_assert!(!masked.contains(&email), "{}", masked);
        prop_assert!(!masked.contains(&phone), "{}", masked);
        let lead = json!({"email": email, "nested": {"phone": phone}, "id": local});
        let masked = leadline::privacy::mask_lead(&lead).to_string();
        prop_assert!(!masked.contains(&email) && !masked.contains(&phone), "{}", masked);
        prop_assert!(masked.contains(&format!("\"id\":\"{local}\"")), "{}", masked);
    }
}
