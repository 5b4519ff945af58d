//! The data fallback (`missing_data` on a target): a lead the CRM — or the mapping, before any request — refuses
//! only for a field on the target's drop list goes again at once without that field, tagged, instead of waiting
//! in the dead-letter queue for a person. Anything else still dies as before: a refusal of any other field, of
//! the field the target finds its record by, or of a field already left out.
//!
//! Pure: the worker asks [`fields_to_drop`] about each failed attempt and writes what it answers.

use crate::config::MissingDataConfig;
use crate::model::{ErrorClass, Failure};

/// The fields the step goes without from now on, when `failure` allows the fallback: `already` (what the step
/// went without this time) and the refused field. `None`: the failure takes its usual course.
///
/// `upsert_key`: the field the target finds its record by (HubSpot's `id_property`, Salesforce's external id
/// field): a lead whose key is bad is not written without it.
pub fn fields_to_drop(
    config: Option<&MissingDataConfig>,
    upsert_key: Option<&str>,
    already: &[String],
    failure: &Failure,
) -> Option<Vec<String>> {
    let config = config?;
    if failure.class != ErrorClass::PermanentData {
        return None;
    }
    let field = failure.field.as_deref()?;
    if Some(field) == upsert_key || already.iter().any(|f| f == field) || !config.drop.iter().any(|f| f == field) {
        return None;
    }
    let mut dropped = already.to_vec();
    dropped.push(field.to_string());
    Some(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(drop: &[&str]) -> MissingDataConfig {
        MissingDataConfig { drop: drop.iter().map(|s| s.to_string()).collect(), tag: None, task: None }
    }

    fn refused(class: ErrorClass, field: Option<&str>) -> Failure {
        Failure { class, reason: "HubSpot rejected property".into(), field: field.map(String::from) }
    }

    #[test]
    fn only_a_data_refusal_of_a_field_on_the_list_is_dropped() {
        let c = config(&["phone", "website"]);
        let phone = refused(ErrorClass::PermanentData, Some("phone"));
        assert_eq!(fields_to_drop(Some(&c), Some("email"), &[], &phone), Some(vec!["phone".to_string()]));
        // Opt-in: no configuration, no fallback.
        assert_eq!(fields_to_drop(None, Some("email"), &[], &phone), None);
        // A field not on the list, or none named.
        assert_eq!(fields_to_drop(Some(&c), None, &[], &refused(ErrorClass::PermanentData, Some("email"))), None);
        assert_eq!(fields_to_drop(Some(&c), None, &[], &refused(ErrorClass::PermanentData, None)), None);
        // Not a data refusal: a property missing from the account is configuration, a 5xx is retried.
        assert_eq!(fields_to_drop(Some(&c), None, &[], &refused(ErrorClass::PermanentConfig, Some("phone"))), None);
        assert_eq!(fields_to_drop(Some(&c), None, &[], &refused(ErrorClass::Transient, Some("phone"))), None);
    }

    #[test]
    fn the_upsert_key_and_a_field_already_left_out_are_never_dropped() {
        let c = config(&["phone", "email"]);
        let email = refused(ErrorClass::PermanentData, Some("email"));
        assert_eq!(fields_to_drop(Some(&c), Some("email"), &[], &email), None);
        let phone = refused(ErrorClass::PermanentData, Some("phone"));
        // Refused again for a field already left out (the tag, a CRM naming it wrongly): it dies as before.
        assert_eq!(fields_to_drop(Some(&c), Some("leadline_id"), &["phone".into()], &phone), None);
        // A second field on the list: both are left out.
        assert_eq!(
            fields_to_drop(Some(&c), Some("leadline_id"), &["phone".into()], &email),
            Some(vec!["phone".to_string(), "email".to_string()])
        );
    }
}
