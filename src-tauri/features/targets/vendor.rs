//! What the vendor adapters (HubSpot, Salesforce, Pipedrive) share: the verdict on one answer, a header look-up
//! that works on a real `HeaderMap` and on a test slice alike, masking of the CRM's own words, and URL encoding.
//!
//! The vendor modules are pure: they build requests and read answers, and never perform I/O. The worker sends
//! the request, then hands status, body and headers to the module and acts on the [`VendorVerdict`].
//!
//! Invariant: a `reason` never carries the lead's personal values. Reasons end up in logs, in the attempt
//! history and as dead-letter causes, so every CRM message passes through [`mask`] (or [`mask_known`] when the
//! caller knows values the CRM may echo) before it is quoted.

use chrono::{DateTime, Utc};

use crate::model::{parse_retry_after, truncate_chars, ErrorClass, Failure, Verdict};

/// Longest CRM message quoted in a reason, in characters.
pub const MESSAGE_CHARS: usize = 300;

/// What one vendor answer means for one lead.
#[derive(Debug, Clone, PartialEq)]
pub struct VendorVerdict {
    /// `None`: the CRM has the lead (created, updated, or found to exist). `Some`: it does not, and why.
    pub class: Option<ErrorClass>,
    /// What happened, in words a person understands; never the lead's personal values.
    pub reason: String,
    /// The field the CRM blamed, where it named one.
    pub field: Option<String>,
    /// The CRM's record id, where the answer gave one.
    pub crm_id: Option<String>,
    /// Whether the CRM created the record (`Some(true)`) or updated an existing one (`Some(false)`), where it said.
    pub created: Option<bool>,
    /// No request to this CRM before this instant (a rate limit the CRM announced, or a daily quota).
    pub hold_until: Option<DateTime<Utc>>,
    /// The CRM refused for load without saying for how long or at what rate: slow the target down (its pace is
    /// learned) rather than hold it for a fixed time.
    pub slow_down: bool,
    /// The credentials are the problem (expired or revoked token): refresh once where the vendor allows it,
    /// otherwise a person must reconnect.
    pub credential_problem: bool,
    /// A person should be told now (daily quota exhausted, credentials refused), not only when leads pile up.
    pub alert: bool,
}

impl VendorVerdict {
    /// The CRM has the lead.
    pub fn delivered(crm_id: Option<String>, reason: impl Into<String>) -> VendorVerdict {
        VendorVerdict {
            class: None,
            reason: reason.into(),
            field: None,
            crm_id,
            created: None,
            hold_until: None,
            slow_down: false,
            credential_problem: false,
            alert: false,
        }
    }

    /// The CRM does not have the lead, for `reason`.
    pub fn failed(class: ErrorClass, reason: impl Into<String>) -> VendorVerdict {
        VendorVerdict {
            class: Some(class),
            reason: reason.into(),
            field: None,
            crm_id: None,
            created: None,
            hold_until: None,
            slow_down: false,
            credential_problem: false,
            alert: false,
        }
    }

    pub fn with_field(mut self, field: Option<String>) -> VendorVerdict {
        self.field = field;
        self
    }

    pub fn with_created(mut self, created: Option<bool>) -> VendorVerdict {
        self.created = created;
        self
    }

    pub fn hold(mut self, until: Option<DateTime<Utc>>) -> VendorVerdict {
        self.hold_until = until;
        self
    }

    /// Marks a refusal for load that names no rate and no time: the pacer finds the pace the CRM keeps.
    pub fn slow_down(mut self) -> VendorVerdict {
        self.slow_down = true;
        self
    }

    /// Marks a credential problem; a person is alerted, since no lead reaches this CRM until it is fixed.
    pub fn credentials(mut self) -> VendorVerdict {
        self.credential_problem = true;
        self.alert = true;
        self
    }

    pub fn alerting(mut self) -> VendorVerdict {
        self.alert = true;
        self
    }

    pub fn is_delivered(&self) -> bool {
        self.class.is_none()
    }

    /// The worker's verdict type (`model::Verdict`), for the retry decision and the attempt record.
    pub fn verdict(&self) -> Verdict {
        match self.class {
            None => Verdict::Delivered,
            Some(class) => Verdict::Failed(Failure { class, reason: self.reason.clone(), field: self.field.clone() }),
        }
    }
}

/// Reads one response header by name, case-insensitively. Implemented for `reqwest`'s `HeaderMap` (the worker)
/// and for slices of name/value pairs (tests and the mock CRM), so the parsers never need a real response.
pub trait HeaderLookup {
    fn header(&self, name: &str) -> Option<&str>;
}

impl HeaderLookup for reqwest::header::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| v.to_str().ok())
    }
}

impl<K: AsRef<str>, V: AsRef<str>> HeaderLookup for [(K, V)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k.as_ref().eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

/// `Retry-After` of an answer, as an instant.
pub fn retry_after<H: HeaderLookup + ?Sized>(headers: &H, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    headers.header("retry-after").and_then(|v| parse_retry_after(v, now))
}

/// A header holding a whole number (rate-limit counters, seconds).
pub fn header_u64<H: HeaderLookup + ?Sized>(headers: &H, name: &str) -> Option<u64> {
    headers.header(name).and_then(|v| v.trim().parse().ok())
}

/// Masks what in a CRM message is specific to one lead, and cuts it to [`MESSAGE_CHARS`]:
///
/// - anything from an embedded JSON document on (HubSpot appends per-property details, values included, to
///   "Property values were not valid: [...]");
/// - phone-like runs: digits with spaces, dashes, dots, slashes or brackets between them, 5 digits or more in all
///   (`+49 151 1234 5678` is four short tokens, which a token-wise mask would keep);
/// - then [`crate::features::dlq::cause_of`]: quoted values, e-mail addresses, tokens with 5+ digits, long ids.
///
/// Names in free text cannot be recognised; the adapters therefore write their own words for the errors known to
/// echo a value (Salesforce `STRING_TOO_LONG`, ...) instead of quoting the CRM.
pub fn mask(text: &str) -> String {
    let cut = ["[{", "{\""].iter().filter_map(|p| text.find(p)).min();
    let head = match cut {
        Some(i) => format!("{} …", text[..i].trim_end()),
        None => text.to_string(),
    };
    truncate_chars(crate::model::cause_of(&mask_digit_runs(&mask_at_words(&head))).trim(), MESSAGE_CHARS)
}

/// Masks every word holding an `@`: a malformed address (`ada@example`, `bad@@x`) is still someone's address,
/// and `cause_of` only recognises well-formed ones.
fn mask_at_words(text: &str) -> String {
    text.split_inclusive(char::is_whitespace)
        .map(|word| {
            let core = word.trim_end().trim_end_matches(|c: char| ".,;:!?)]}>".contains(c));
            let core = core.trim_start_matches(|c: char| "([{<".contains(c));
            if core.contains('@') && core.chars().any(char::is_alphanumeric) {
                word.replacen(core, "…", 1)
            } else {
                word.to_string()
            }
        })
        .collect()
}

/// [`mask`], after replacing the values the caller knows belong to the lead (case-insensitively), such as the
/// unique value a batch was keyed by, which may be an e-mail address.
pub fn mask_known(text: &str, known: &[&str]) -> String {
    let mut out = text.to_string();
    for value in known.iter().filter(|v| v.chars().count() >= 2) {
        out = replace_ignore_case(&out, value, "…");
    }
    mask(&out)
}

fn replace_ignore_case(haystack: &str, needle: &str, with: &str) -> String {
    let lower_hay = haystack.to_lowercase();
    let lower_needle = needle.to_lowercase();
    // Lower-casing can change byte lengths outside ASCII; fall back to an exact replacement there.
    if lower_hay.len() != haystack.len() || lower_needle.len() != needle.len() {
        return haystack.replace(needle, with);
    }
    let mut out = String::with_capacity(haystack.len());
    let mut rest = 0;
    for (i, _) in lower_hay.match_indices(&lower_needle) {
        if i < rest {
            continue;
        }
        out.push_str(&haystack[rest..i]);
        out.push_str(with);
        rest = i + needle.len();
    }
    out.push_str(&haystack[rest..]);
    out
}

fn mask_digit_runs(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts = c.is_ascii_digit() || ("+(".contains(c) && chars.get(i + 1).is_some_and(char::is_ascii_digit));
        // A run only starts at a token boundary: "v58.0" and "E164" are not phone numbers.
        let boundary = i == 0 || !chars[i - 1].is_alphanumeric();
        if !(starts && boundary) {
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1; // one past the last digit seen
        let mut j = i + 1;
        while j < chars.len() && (chars[j].is_ascii_digit() || " -./()".contains(chars[j])) {
            if chars[j].is_ascii_digit() {
                end = j + 1;
            }
            j += 1;
        }
        let digits = chars[start..end].iter().filter(|c| c.is_ascii_digit()).count();
        // A run glued to letters ("123abc") is an id token: cause_of decides about it.
        let glued = chars.get(end).is_some_and(|c| c.is_alphabetic());
        if digits >= 5 && !glued {
            out.push('…');
        } else {
            out.extend(&chars[start..end]);
        }
        i = end;
    }
    out
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so a value is always one path segment or one
/// query value (`/`, `?`, `#`, `&`, `+` and spaces cannot change the URL's structure).
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A JSON id as a string: CRMs answer ids as strings (HubSpot, Salesforce) or numbers (Pipedrive).
pub fn json_id(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A non-empty string at `pointer`.
pub fn str_at<'a>(json: &'a serde_json::Value, pointer: &str) -> Option<&'a str> {
    json.pointer(pointer).and_then(|v| v.as_str()).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_contact_details_but_keeps_the_words() {
        assert_eq!(mask("Email address ada.lovelace@example.com is invalid"), "Email address … is invalid");
        assert_eq!(mask("Phone +49 151 1234 5678 is not valid."), "Phone … is not valid.");
        assert_eq!(mask("call (030) 123-4567 now"), "call … now");
        assert_eq!(mask("Email address bad@@example is invalid; <ada@host>."), "Email address … is invalid; <…>.");
        assert_eq!(mask("value '0151 1234' rejected"), "value '…' rejected");
        // Short numbers, versions and limits stay: they explain, they identify nobody.
        assert_eq!(mask("data value too large (max length=80)"), "data value too large (max length=80)");
        assert_eq!(mask("API v58.0 is retired; use E164"), "API v58.0 is retired; use E164");
        assert_eq!(mask("Contact already exists. Existing ID: 123"), "Contact already exists. Existing ID: 123");
    }

    #[test]
    fn embedded_json_details_are_cut() {
        // HubSpot's VALIDATION_ERROR message: the JSON after the colon quotes the rejected values.
        let m = r#"Property values were not valid: [{"isValid":false,"message":"Email address ada@x is invalid","error":"INVALID_EMAIL","name":"email"}]"#;
        assert_eq!(mask(m), "Property values were not valid: …");
    }

    #[test]
    fn known_values_are_masked_whatever_their_case() {
        let m = "Duplicate value Ada.Lovelace@Example.com for lead Lovelace-7";
        assert_eq!(mask_known(m, &["ada.lovelace@example.com", "lovelace-7"]), "Duplicate value … for lead …");
    }

    #[test]
    fn messages_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MESSAGE_CHARS + 50);
        assert_eq!(mask(&long).chars().count(), MESSAGE_CHARS + 1);
    }

    #[test]
    fn components_cannot_change_the_url() {
        assert_eq!(encode_component("meta:123/4 5?x=1&y#z+"), "meta%3A123%2F4%205%3Fx%3D1%26y%23z%2B");
        assert_eq!(encode_component("é"), "%C3%A9");
    }

    #[test]
    fn headers_from_a_slice_and_a_header_map() {
        let slice = [("X-RateLimit-Remaining", "0"), ("Retry-After", "7")];
        assert_eq!(slice.header("x-ratelimit-remaining"), Some("0"));
        assert_eq!(header_u64(&slice[..], "RETRY-AFTER"), Some(7));
        let now: DateTime<Utc> = "2026-12-05T13:00:00Z".parse().unwrap();
        assert_eq!(retry_after(&slice[..], now), Some(now + chrono::Duration::seconds(7)));

        let mut map = reqwest::header::HeaderMap::new();
        map.insert("x-ratelimit-reset", reqwest::header::HeaderValue::from_static("2"));
        assert_eq!(header_u64(&map, "X-RateLimit-Reset"), Some(2));
        assert_eq!(map.header("missing"), None);
    }

    #[test]
    fn verdicts_convert_for_the_worker() {
        assert_eq!(VendorVerdict::delivered(Some("1".into()), "created").verdict(), Verdict::Delivered);
        let v = VendorVerdict::failed(ErrorClass::PermanentData, "bad phone").with_field(Some("phone".into()));
        assert_eq!(
            v.verdict(),
            Verdict::Failed(Failure {
                class: ErrorClass::PermanentData,
                reason: "bad phone".into(),
                field: Some("phone".into())
            })
        );
        let c = VendorVerdict::failed(ErrorClass::PermanentConfig, "token").credentials();
        assert!(c.credential_problem && c.alert && !c.is_delivered());
    }
}
