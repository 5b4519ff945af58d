//! Personal data leaves the store masked: API answers, desktop commands, logs and notifications show
//! `j•••@e••••••.com` and `+49•••••••78`, enough to recognise a lead, not enough to copy it. Revealing a lead is
//! an explicit request that is written to the audit (`api::reveal_dead_letter`).
//!
//! Two kinds of data, two rules (both pure):
//! - **Structured data** (a lead's payload, the CRM's record, the values of a fix) is masked by field name:
//!   every value under a key that names personal data ([`is_personal_field`]: `email`, `first_name`,
//!   `phone_number`, `FirstName`, `address.street`…), however deeply nested, and the answers of a Meta lead's
//!   `field_data` (`{"name": "email", "values": [...]}`) and of a Google form's `user_column_data`
//!   (`{"column_id": "EMAIL", "string_value": ...}`) by the label they carry. Ids, forms, products, consent
//!   flags and the like stay readable.
//! - **Free text** (a CRM's error message, a response excerpt, an alert) is masked by shape
//!   ([`mask_text`]): e-mail addresses and numbers of seven or more digits (phone numbers, written with spaces,
//!   dashes, dots or brackets or not). Names inside free text cannot be told from other words; the detail view
//!   keeps free text short and the lead's own fields carry the names.

use serde_json::{Map, Value};

/// The words that mark a field as personal, matched against each word of a field name (`first_name` →
/// `first`, `name`; `FirstName` → `first`, `name`; `phone-number` → `phone`, `number`).
const PERSONAL_WORDS: &[&str] = &[
    "name",
    "firstname",
    "lastname",
    "fullname",
    "email",
    "mail",
    "phone",
    "mobile",
    "tel",
    "telephone",
    "fax",
    "address",
    "street",
    "city",
    "zip",
    "postal",
    "postcode",
    "birth",
    "birthday",
    "dob",
    "ssn",
    "iban",
    "ip",
];

/// The words of a field name: split at anything not alphanumeric and where a lower-case letter meets an upper-case
/// one, all lower case.
fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Whether a field of this name holds personal data.
pub fn is_personal_field(key: &str) -> bool {
    let words = words(key);
    words.iter().any(|w| PERSONAL_WORDS.contains(&w.as_str()))
        // Written as one word: `firstname`, `emailaddress`, `phonenumber`.
        || words.iter().any(|w| {
            ["email", "phone", "firstname", "lastname", "fullname", "address", "mobile"]
                .iter()
                .any(|p| w.starts_with(p) || w.ends_with(p))
        })
}

/// One personal value, masked: `a•••@e••••••.com` for an e-mail address, otherwise the first three and last two
/// characters around dots (`+49•••••••78`, `Jan••••en`); four characters or fewer become dots only.
pub fn mask_str(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if let Some(at) = chars.iter().position(|&c| c == '@').filter(|&at| at > 0) {
        let local = &chars[..at];
        let domain = &chars[at + 1..];
        let dot = domain.iter().rposition(|&c| c == '.').filter(|&d| d > 0);
        let (host, tld) = match dot {
            Some(d) => (&domain[..d], &domain[d..]),
            None => (domain, &domain[domain.len()..]),
        };
        let dots = |n: usize| "•".repeat(n.max(2));
        return format!(
            "{}{}@{}{}{}",
            local[0],
            dots(local.len().saturating_sub(1)),
            host.first().map(|c| c.to_string()).unwrap_or_default(),
            dots(host.len().saturating_sub(1)),
            tld.iter().collect::<String>()
        );
    }
    if chars.len() <= 4 {
        return "•".repeat(chars.len());
    }
    let head: String = chars[..3].iter().collect();
    let tail: String = chars[chars.len() - 2..].iter().collect();
    format!("{head}{}{tail}", "•".repeat(chars.len() - 5))
}

/// Every leaf of a personal value masked: strings and numbers; `null` and booleans say nothing about a person.
fn mask_all(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(mask_str(s)),
        Value::Number(n) => Value::String(mask_str(&n.to_string())),
        Value::Array(items) => Value::Array(items.iter().map(mask_all).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), mask_all(v))).collect()),
        other => other.clone(),
    }
}

/// A lead (or any structured data about one) with every personal value masked. See the module's documentation.
pub fn mask_lead(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            // A labelled answer (`{"name": "email", "values": [...]}`, Meta's `field_data`): the label says.
            if let Some(Value::String(label)) = map.get("name") {
                if map.contains_key("values") || map.contains_key("value") {
                    let personal = is_personal_field(label);
                    return Value::Object(
                        map.iter()
                            .map(|(k, v)| {
                                let masked = match k.as_str() {
                                    "name" => v.clone(),
                                    "values" | "value" if personal => mask_all(v),
                                    _ => mask_field(k, v),
                                };
                                (k.clone(), masked)
                            })
                            .collect::<Map<_, _>>(),
                    );
                }
            }
            // A Google Ads form answer (`{"column_id": "EMAIL", "column_name": "User Email", "string_value": …}`,
            // `user_column_data`): its id or its name says. The value's own key says nothing about a person.
            if let (Some(Value::String(id)), true) = (map.get("column_id"), map.contains_key("string_value")) {
                let label = map.get("column_name").and_then(Value::as_str).unwrap_or_default();
                let personal = is_personal_field(id) || is_personal_field(label);
                return Value::Object(
                    map.iter()
                        .map(|(k, v)| {
                            let masked = match k.as_str() {
                                "column_id" | "column_name" => v.clone(),
                                "string_value" if personal => mask_all(v),
                                _ => mask_field(k, v),
                            };
                            (k.clone(), masked)
                        })
                        .collect::<Map<_, _>>(),
                );
            }
            Value::Object(map.iter().map(|(k, v)| (k.clone(), mask_field(k, v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(mask_lead).collect()),
        other => other.clone(),
    }
}

/// The value of one field (`email`, `/lead/phone`), masked as that field would be inside a lead.
pub fn mask_field_value(field: &str, value: &Value) -> Value {
    let name = field.rsplit('/').next().unwrap_or(field);
    mask_field(name, value)
}

fn mask_field(key: &str, value: &Value) -> Value {
    if is_personal_field(key) {
        mask_all(value)
    } else {
        mask_lead(value)
    }
}

/// Free text with e-mail addresses and long numbers (7+ digits, phone numbers written any usual way) masked.
pub fn mask_text(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // A word that may be an e-mail address; a word that does not start like a number is passed whole.
        if c.is_alphanumeric() || "._%+-".contains(c) {
            let start = i;
            let mut end = i;
            while end < chars.len() && (chars[end].is_alphanumeric() || "._%+-@".contains(chars[end])) {
                end += 1;
            }
            let mut word_end = end;
            while word_end > start && chars[word_end - 1] == '.' {
                word_end -= 1;
            }
            let word: String = chars[start..word_end].iter().collect();
            if let Some(at) = word.find('@') {
                if at > 0 && word[at + 1..].contains('.') {
                    out.push_str(&mask_str(&word));
                    i = word_end;
                    continue;
                }
            }
            if !(c.is_ascii_digit() || c == '+') {
                out.extend(&chars[start..end]);
                i = end;
                continue;
            }
        }
        // A number, perhaps with separators: `+49 151 2345678`, `(030) 123-4567`, `0151.2345.678`.
        if let Some((end, digits)) = crate::model::number_at(&chars, i) {
            let stop = if chars.get(end) == Some(&')') { end + 1 } else { end };
            let run: String = chars[i..stop].iter().collect();
            let date = run.len() == 10 && run.as_bytes()[4] == b'-' && run.as_bytes()[7] == b'-';
            if digits >= 7 && !date {
                out.push_str(&mask_str(&run));
            } else {
                out.push_str(&run);
            }
            i = stop;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A CRM's answer or a response excerpt: JSON is masked as structured data and its strings as free text; other
/// text as free text.
pub fn mask_answer(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ (Value::Object(_) | Value::Array(_))) => mask_strings(&mask_lead(&value)).to_string(),
        _ => mask_text(text),
    }
}

fn mask_strings(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(mask_text(s)),
        Value::Array(items) => Value::Array(items.iter().map(mask_strings).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), mask_strings(v))).collect()),
        other => other.clone(),
    }
}

/// What a purged CRM answer keeps: its ids (`id`, `crm_id`, `…_id`, `…Id`) at the top level, nothing else.
pub fn ids_only(answer: &Value) -> Value {
    match answer {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| {
                    (k.as_str() == "id" || k.ends_with("_id") || k.ends_with("Id")) && (v.is_string() || v.is_number())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn personal_fields_are_known_by_their_words() {
        for key in [
            "email",
            "Email",
            "e_mail",
            "first_name",
            "FirstName",
            "lastname",
            "full_name",
            "phone_number",
            "Phone",
            "MobilePhone",
            "street",
            "zip",
            "postal_code",
            "date_of_birth",
            "emailAddress",
            "name",
            "city",
        ] {
            assert!(is_personal_field(key), "{key} is personal");
        }
        for key in ["id", "form", "consent", "product", "leadgen_id", "ad_id", "created_time", "source", "company"] {
            assert!(!is_personal_field(key), "{key} is not personal");
        }
    }

    #[test]
    fn values_are_masked_so_that_they_can_be_recognised_not_copied() {
        assert_eq!(mask_str("ada.lovelace@example.com"), "a•••••••••••@e••••••.com");
        assert_eq!(mask_str("+4915112345678"), "+49•••••••••78");
        assert_eq!(mask_str("Ada"), "•••");
        assert_eq!(mask_str("Lovelace"), "Lov•••ce");
    }

    #[test]
    fn a_lead_is_masked_by_field_name_however_deeply_nested_and_meta_answers_by_their_label() {
        let lead = json!({
            "id": "wf-1", "form": "contact-us", "consent": true, "score": 42,
            "lead": {"ref": "P-1", "name": "Ada Lovelace", "phone": "0151 2345 6789", "contact": {"email": "ada@example.com"}},
            "field_data": [
                {"name": "email", "values": ["ada@example.com"]},
                {"name": "when_should_we_call?", "values": ["morning"]}
            ],
            "phones": ["+4915112345678", 4915112345678u64]
        });
        let masked = mask_lead(&lead);
        assert_eq!(masked["id"], "wf-1");
        assert_eq!(masked["form"], "contact-us");
        assert_eq!(masked["consent"], true);
        assert_eq!(masked["score"], 42);
        assert_eq!(masked["lead"]["ref"], "P-1");
        assert_eq!(masked["lead"]["name"], "Ada•••••••ce");
        assert_eq!(masked["lead"]["phone"], "015•••••••••89");
        assert_eq!(masked["lead"]["contact"]["email"], "a••@e••••••.com");
        assert_eq!(masked["field_data"][0]["name"], "email");
        assert_eq!(masked["field_data"][0]["values"][0], "a••@e••••••.com");
        assert_eq!(masked["field_data"][1]["values"][0], "morning");
        assert_eq!(masked["phones"][0], "+49•••••••••78");
        assert_eq!(masked["phones"][1], "491••••••••78");
        let text = masked.to_string();
        for secret in ["Lovelace", "ada@example.com", "2345", "15112345678"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    /// Google's lead form webhook keeps the answers in `user_column_data`, labelled by `column_id` and
    /// `column_name`; the value sits under `string_value`, a key that names nothing personal.
    #[test]
    fn google_answers_are_masked_by_their_column() {
        let lead = json!({
            "lead_id": "GL-1", "gcl_id": "Cj0KCQ-1",
            "user_column_data": [
                {"column_id": "FULL_NAME", "column_name": "Full Name", "string_value": "Clara Berg"},
                {"column_id": "EMAIL", "column_name": "User Email", "string_value": "clara@example.com"},
                {"column_id": "PHONE_NUMBER", "column_name": "User Phone", "string_value": "+4915184727150"},
                {"column_id": "budget", "column_name": "What is your budget?", "string_value": "10k"}
            ]
        });
        let masked = mask_lead(&lead);
        let answers = &masked["user_column_data"];
        assert_eq!(answers[0]["column_name"], "Full Name");
        assert_eq!(answers[0]["string_value"], "Cla•••••rg");
        assert_eq!(answers[1]["column_id"], "EMAIL");
        assert_eq!(answers[1]["string_value"], "c••••@e••••••.com");
        assert_eq!(answers[3]["string_value"], "10k");
        assert_eq!(masked["lead_id"], "GL-1");
        let text = masked.to_string();
        for secret in ["Clara Berg", "clara@example.com", "84727150"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn free_text_masks_addresses_and_phone_numbers_and_keeps_the_rest() {
        assert_eq!(mask_text("contact ada.lovelace@example.com exists."), "contact a•••••••••••@e••••••.com exists.");
        assert_eq!(mask_text("phone 0151 2345 6789 is not valid"), "phone 015•••••••••89 is not valid");
        assert_eq!(mask_text("call (030) 123-4567 now"), "call (03•••••••••67 now");
        assert_eq!(mask_text("+49 151 2345678."), "+49••••••••••78.");
        assert_eq!(mask_text("HTTP 422 after 5 attempts at 2026-11-30"), "HTTP 422 after 5 attempts at 2026-11-30");
        assert_eq!(mask_text("record 0065g00000XyZ12AAB"), "record 0065g00000XyZ12AAB");
        assert_eq!(
            mask_text("crm refused its credential (LEADLINE_TOKEN)"),
            "crm refused its credential (LEADLINE_TOKEN)"
        );
        assert_eq!(mask_text("…"), "…");
    }

    #[test]
    fn a_purged_crm_answer_keeps_its_ids_only() {
        let answer = json!({"crm_id": "901", "id": 7, "properties": {"email": "ada@example.com"}, "AccountId": "001x"});
        assert_eq!(ids_only(&answer), json!({"crm_id": "901", "id": 7, "AccountId": "001x"}));
        assert_eq!(ids_only(&json!("text")), Value::Null);
    }

    #[test]
    fn a_crm_answer_is_masked_as_data_and_as_text() {
        let answer = r#"{"id":"901","properties":{"email":"ada@example.com","firstname":"Ada"},"message":"0151 2345 6789 is not a valid phone number"}"#;
        let masked: Value = serde_json::from_str(&mask_answer(answer)).unwrap();
        assert_eq!(masked["id"], "901");
        assert_eq!(masked["properties"]["email"], "a••@e••••••.com");
        assert_eq!(masked["properties"]["firstname"], "•••");
        assert_eq!(masked["message"], "015•••••••••89 is not a valid phone number");
        assert_eq!(mask_answer("not json: ada@example.com"), "not json: a••@e••••••.com");
    }
}
