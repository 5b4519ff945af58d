//! Dead letters: the `dead` deliveries, readable — why (class, HTTP status, the CRM's message and field),
//! how many attempts, when — with filters and each one's attempt timeline.

pub use crate::model::cause_of;
use crate::store::{lead_field_path, Store};
pub use crate::store::{Attempt, DeadLetter, DeadLetterDetail, DeadLetterFilter, DeadLetterGroup, PayloadFix};

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
        // Phone numbers written with separators are one value, whoever's they are.
        assert_eq!(cause_of("HTTP 422: 0151 2345 6789 is not a valid phone"), "HTTP 422: … is not a valid phone");
        assert_eq!(cause_of("phone +49 151 2345678."), "phone ….");
        assert_eq!(cause_of("call (030) 123-4567 now"), "call …) now".replace("…)", "…"));
        assert_eq!(cause_of("HTTP 503 after 5 attempts, 12 s"), "HTTP 503 after 5 attempts, 12 s");
        assert_eq!(cause_of("HTTP 500: Internal error (1234567)"), "HTTP 500: Internal error (…)");
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
