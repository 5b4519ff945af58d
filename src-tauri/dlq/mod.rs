//! Dead letters: the `dead` deliveries, readable — why (class, HTTP status, the CRM's message and field),
//! how many attempts, when — with filters and each one's attempt timeline.

use crate::store::{lead_field_path, Store};
pub use crate::store::{Attempt, DeadLetter, DeadLetterDetail, DeadLetterFilter, DeadLetterGroup, PayloadFix};

/// The cause of a failure: its reason with what is specific to one lead masked — quoted values, e-mail
/// addresses, long numbers and ids — so failures with one cause group together.
pub fn cause_of(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let chars: Vec<char> = reason.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // A quoted value: 'x' or "x" (an apostrophe inside a word is not a quote).
        if (c == '\'' || c == '"') && (i == 0 || !chars[i - 1].is_alphanumeric()) {
            if let Some(len) = chars[i + 1..].iter().position(|&q| q == c) {
                out.push(c);
                out.push('…');
                out.push(c);
                i += len + 2;
                continue;
            }
        }
        // A token: masked when it is an e-mail address, or holds 5+ digits, or is a long id.
        if c.is_alphanumeric() || c == '@' || c == '+' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || "@+._-".contains(chars[i])) {
                i += 1;
            }
            // Keep a trailing full stop as punctuation.
            let mut end = i;
            while end > start && chars[end - 1] == '.' {
                end -= 1;
            }
            let token: String = chars[start..end].iter().collect();
            let digits = token.chars().filter(char::is_ascii_digit).count();
            let masked = token.contains('@') && token.contains('.')
                || digits >= 5
                || (token.len() >= 16 && token.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
            out.push_str(if masked { "…" } else { &token });
            out.extend(&chars[end..i]);
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A lead field as an SQLite JSON path: `email` → `$.email`, `/lead/email` → `$.lead.email`, `/items/0` →
/// `$.items[0]`. `None` when a part is not a plain name or index.
pub fn json_path(field: &str) -> Option<String> {
    let mut path = String::from("$");
    for part in lead_field_path(field)? {
        if part.chars().all(|c| c.is_ascii_digit()) {
            path.push_str(&format!("[{part}]"));
        } else {
            path.push_str(&format!(".\"{part}\""));
        }
    }
    Some(path)
}

/// Dead letters matching `filter`, newest first.
pub async fn list(store: &Store, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetter>> {
    store.dead_letters(filter).await
}

/// Whether `filter` only looks at what `dead_letter_tally` is keyed by (class, target, cause, HTTP status,
/// source, resolution): then counts come from the tally instead of a scan of the dead letters.
pub fn tally_answers(filter: &DeadLetterFilter) -> bool {
    filter.tally_answers()
}

/// Dead letters matching `filter`, grouped by class, target and cause, largest group first.
pub async fn groups(store: &Store, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetterGroup>> {
    store.dead_letter_groups(filter).await
}

/// One dead letter (or any delivery) with its payload, fixes and attempt timeline; `None` when there is no such
/// id.
pub async fn detail(store: &Store, delivery_id: i64) -> anyhow::Result<Option<DeadLetterDetail>> {
    store.dead_letter_detail(delivery_id).await
}

/// The attempts of one delivery, oldest first.
pub async fn attempts(store: &Store, delivery_id: i64) -> anyhow::Result<Vec<Attempt>> {
    store.delivery_attempts(delivery_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_mask_what_is_specific_to_one_lead() {
        let a = "HTTP 422: Property values were not valid: phone '0151 1234 5678' is not in E.164 format";
        let b = "HTTP 422: Property values were not valid: phone '0170 999 1234' is not in E.164 format";
        assert_eq!(cause_of(a), cause_of(b));
        assert_eq!(cause_of(a), "HTTP 422: Property values were not valid: phone '…' is not in E.164 format");
        assert_eq!(cause_of("HTTP 409: contact ada.lovelace@example.com exists."), "HTTP 409: contact … exists.");
        assert_eq!(cause_of("HTTP 404: record 0065g00000XyZ12AAB not found"), "HTTP 404: record … not found");
        assert_eq!(cause_of("HTTP 401: token expired"), "HTTP 401: token expired");
        assert_eq!(cause_of("the CRM's answer"), "the CRM's answer");
    }

    #[test]
    fn lead_fields_become_json_paths() {
        assert_eq!(json_path("email").as_deref(), Some("$.\"email\""));
        assert_eq!(json_path("/lead/items/0").as_deref(), Some("$.\"lead\".\"items\"[0]"));
        assert_eq!(json_path("a'b"), None);
        assert_eq!(json_path("/"), None);
    }
}
