//! Fix before replay: correct a lead's data — one lead edited by hand, or one field fixed for every selected
//! lead (normalise phone numbers, trim, set a value) — keeping the original and each change in the audit
//! (`payload_fix`), so a replay sends data that will be accepted and nobody loses what the source sent.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{selected_events, ReplayError, ReplaySelection};
use crate::config::Config;
pub use crate::model::normalize_phone;
use crate::store::{LeadFix, Resolution, Store};

/// What to do to the field.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FieldOp {
    /// Set the field to this value (created when missing).
    Set {
        #[ts(type = "unknown")]
        value: Value,
    },
    /// National phone numbers to E.164: spaces, dashes, dots and brackets removed; `00` becomes `+`; a leading
    /// `0` becomes `country_code` (like `+49`).
    NormalizePhone {
        country_code: String,
    },
    /// Leading and trailing spaces removed.
    Trim,
    Lowercase,
    /// Every `from` replaced by `to`.
    Replace {
        from: String,
        to: String,
    },
    /// The field removed.
    Remove,
}

/// One field fix: which field (a top-level key, or a JSON pointer like `/lead/phone`) and what to do.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, ts_rs::TS)]
pub struct FieldFix {
    pub field: String,
    #[serde(flatten)]
    pub op: FieldOp,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct FixSample {
    pub delivery_id: i64,
    #[ts(type = "unknown")]
    pub before: Value,
    #[ts(type = "unknown")]
    pub after: Value,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct FixReport {
    /// Leads whose data changes (or changed).
    pub changed: i64,
    /// Leads the fix leaves as they are (nothing to fix, or the field is missing).
    pub unchanged: i64,
    /// Up to five examples: the field before and after.
    pub samples: Vec<FixSample>,
    /// The selected dead letters whose lead the fix changes (or changed): what a fix-and-replay sends again.
    #[serde(skip)]
    #[ts(skip)]
    pub changed_deliveries: Vec<i64>,
}

fn pointer(field: &str) -> String {
    if field.starts_with('/') {
        field.to_string()
    } else {
        format!("/{}", field.replace('~', "~0").replace('/', "~1"))
    }
}

/// The field's value after the fix, or `None` when nothing changes. Pure.
pub fn apply(payload: &Value, fix: &FieldFix) -> Option<(Value, Value, Value)> {
    let ptr = pointer(&fix.field);
    let before = payload.pointer(&ptr).cloned();
    let after: Option<Value> = match (&fix.op, &before) {
        (FieldOp::Set { value }, _) => Some(value.clone()),
        (FieldOp::Remove, Some(_)) => None,
        (FieldOp::Remove, None) => return None,
        (_, None) => return None,
        (FieldOp::NormalizePhone { country_code }, Some(Value::String(s))) => {
            Some(Value::String(normalize_phone(s, country_code)?))
        }
        (FieldOp::Trim, Some(Value::String(s))) => Some(Value::String(s.trim().to_string())),
        (FieldOp::Lowercase, Some(Value::String(s))) => Some(Value::String(s.to_lowercase())),
        (FieldOp::Replace { from, to }, Some(Value::String(s))) if !from.is_empty() => {
            Some(Value::String(s.replace(from.as_str(), to)))
        }
        _ => return None,
    };
    if after == before {
        return None;
    }
    let mut fixed = payload.clone();
    let (parent_ptr, key) = ptr.rsplit_once('/')?;
    let key = key.replace("~1", "/").replace("~0", "~");
    let parent = if parent_ptr.is_empty() { Some(&mut fixed) } else { fixed.pointer_mut(parent_ptr) }?;
    let obj = parent.as_object_mut()?;
    match &after {
        Some(v) => {
            obj.insert(key, v.clone());
        }
        None => {
            obj.remove(&key);
        }
    }
    Some((fixed, before.unwrap_or(Value::Null), after.unwrap_or(Value::Null)))
}

/// The source's id field may not be changed: it is how duplicates are recognised.
fn check_field(config: &Config, source: &str, field: &str) -> Result<(), ReplayError> {
    let id_field = config.sources.get(source).map(|s| s.id_field.as_str()).unwrap_or("id");
    if pointer(field) == pointer(id_field) {
        return Err(ReplayError::Invalid(format!(
            "`{field}` is the lead's id at {source}: it cannot be changed (duplicates are recognised by it)"
        )));
    }
    if field.trim().is_empty() || field == "/" {
        return Err(ReplayError::Invalid("name the field to fix".into()));
    }
    Ok(())
}

/// Applies (or, with `dry_run`, only counts) one field fix to every open dead letter of the selection. Each lead
/// is fixed once even when several of its steps are selected.
#[allow(clippy::too_many_arguments)]
pub async fn fix_selection(
    store: &Store,
    config: &Config,
    selection: &ReplaySelection,
    fix: &FieldFix,
    actor: &str,
    reason: &str,
    dry_run: bool,
    now: DateTime<Utc>,
) -> Result<FixReport, ReplayError> {
    if !dry_run && reason.trim().is_empty() {
        return Err(ReplayError::Invalid("say why: the reason is kept with each change".into()));
    }
    let rows = selected_events(store, selection).await?;
    let mut seen = std::collections::BTreeMap::new();
    let mut changes = Vec::new();
    let mut unchanged = 0;
    let mut changed_deliveries = Vec::new();
    for (delivery_id, event_id) in rows {
        if let Some(changed) = seen.get(&event_id) {
            // Another selected step of a lead already looked at: it goes again if its lead changes.
            if *changed {
                changed_deliveries.push(delivery_id);
            }
            continue;
        }
        let (source, payload) = store.lead_data(event_id).await?;
        check_field(config, &source, &fix.field)?;
        match apply(&payload, fix) {
            Some((fixed, before, after)) => {
                changes.push((delivery_id, event_id, fixed, before, after));
                changed_deliveries.push(delivery_id);
                seen.insert(event_id, true);
            }
            None => {
                unchanged += 1;
                seen.insert(event_id, false);
            }
        }
    }
    let samples = changes
        .iter()
        .take(5)
        .map(|(d, _, _, b, a)| FixSample { delivery_id: *d, before: b.clone(), after: a.clone() })
        .collect();
    let report = FixReport { changed: changes.len() as i64, unchanged, samples, changed_deliveries };
    if dry_run || changes.is_empty() {
        return Ok(report);
    }
    let operation = serde_json::to_value(fix).context("fix")?;
    let fixes: Vec<LeadFix> = changes
        .into_iter()
        .map(|(_, event_id, payload, before, after)| LeadFix {
            event_id,
            payload,
            operation: operation.clone(),
            before,
            after,
        })
        .collect();
    store.record_lead_fixes(&fixes, actor, reason.trim(), now).await?;
    tracing::info!(changed = report.changed, field = ?fix.field, actor, "field fix applied");
    Ok(report)
}

/// Replaces one dead letter's lead data with `payload` (a JSON object with the same id), keeping the original.
pub async fn edit(
    store: &Store,
    config: &Config,
    delivery_id: i64,
    payload: &Value,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), ReplayError> {
    if reason.trim().is_empty() {
        return Err(ReplayError::Invalid("say why: the reason is kept with the change".into()));
    }
    if !payload.is_object() {
        return Err(ReplayError::Invalid("the lead's data must be a JSON object".into()));
    }
    let Some(dead) = store.dead_letter_lead(delivery_id).await? else {
        return Err(ReplayError::Invalid(format!("{delivery_id} is not a dead letter")));
    };
    let (event_id, source) = (dead.event_id, dead.source);
    if dead.resolution != Resolution::Open || dead.purged {
        return Err(ReplayError::Invalid("only open dead letters with their data can be edited".into()));
    }
    let (_, current) = store.lead_data(event_id).await?;
    let id_field = config.sources.get(&source).map(|s| s.id_field.clone()).unwrap_or_else(|| "id".into());
    let ptr = pointer(&id_field);
    if current.pointer(&ptr) != payload.pointer(&ptr) {
        return Err(ReplayError::Invalid(format!("the lead's id (`{id_field}`) cannot be changed")));
    }
    if &current == payload {
        return Err(ReplayError::Invalid("nothing changed".into()));
    }
    let fix = LeadFix {
        event_id,
        payload: payload.clone(),
        operation: serde_json::json!({"op": "edit"}),
        before: current,
        after: payload.clone(),
    };
    store.record_lead_fixes(&[fix], actor, reason.trim(), now).await?;
    Ok(())
}

/// Corrects a lead delivered without some fields (a target's `missing_data`): one field of the lead fixed (kept in
/// the audit like any fix, the value as received with it), then the step sent again with every field, under a key
/// of its own, as an update of the CRM record it made (the target upserts by the same key, or finds its link).
pub async fn correct_missing(
    store: &Store,
    config: &Config,
    delivery_id: i64,
    fix: &FieldFix,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<(), ReplayError> {
    if reason.trim().is_empty() {
        return Err(ReplayError::Invalid("say why: the reason is kept with the change".into()));
    }
    let Some(missing) = store.missing_data_of(delivery_id).await? else {
        return Err(ReplayError::Invalid(format!("{delivery_id} was not delivered with missing data")));
    };
    if missing.task.as_deref() == Some("corrected") {
        return Err(ReplayError::Invalid("this lead was corrected already".into()));
    }
    let (source, payload) = store.lead_data(missing.event_id).await?;
    check_field(config, &source, &fix.field)?;
    let Some((fixed, before, after)) = apply(&payload, fix) else {
        return Err(ReplayError::Invalid("the correction changes nothing".into()));
    };
    let change = LeadFix {
        event_id: missing.event_id,
        payload: fixed,
        operation: serde_json::to_value(fix).context("fix")?,
        before,
        after,
    };
    store.record_lead_fixes(&[change], actor, reason.trim(), now).await?;
    if !store.send_corrected(delivery_id, now).await? {
        return Err(ReplayError::Invalid("the step is no longer delivered with missing data".into()));
    }
    tracing::info!(delivery_id, field = ?fix.field, actor, "missing data corrected: sent again as an update");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn phone_numbers_become_e164() {
        assert_eq!(normalize_phone("0151 1234 5678", "+49").as_deref(), Some("+4915112345678"));
        assert_eq!(normalize_phone("(0151) 123-45.67", "+49").as_deref(), Some("+491511234567"));
        assert_eq!(normalize_phone("0049 151 1234567", "+49").as_deref(), Some("+491511234567"));
        assert_eq!(normalize_phone("+44 20 7946 0958", "+49").as_deref(), Some("+442079460958"));
        assert_eq!(normalize_phone("call me", "+49"), None);
        assert_eq!(normalize_phone("12", "+49"), None);
    }

    #[test]
    fn a_fix_changes_one_field_and_reports_before_and_after() {
        let lead = json!({"id": "a", "phone": "0151 1234 5678", "lead": {"email": " Ada@Example.com "}});
        let fix = FieldFix { field: "phone".into(), op: FieldOp::NormalizePhone { country_code: "+49".into() } };
        let (fixed, before, after) = apply(&lead, &fix).unwrap();
        assert_eq!(fixed["phone"], "+4915112345678");
        assert_eq!((before, after), (json!("0151 1234 5678"), json!("+4915112345678")));
        // Already right: nothing to do.
        assert_eq!(apply(&fixed, &fix), None);
        let trim = FieldFix { field: "/lead/email".into(), op: FieldOp::Trim };
        assert_eq!(apply(&lead, &trim).unwrap().0["lead"]["email"], "Ada@Example.com");
        let set = FieldFix { field: "country".into(), op: FieldOp::Set { value: json!("DE") } };
        assert_eq!(apply(&lead, &set).unwrap().0["country"], "DE");
        let remove = FieldFix { field: "phone".into(), op: FieldOp::Remove };
        assert!(apply(&lead, &remove).unwrap().0.get("phone").is_none());
        let missing = FieldFix { field: "fax".into(), op: FieldOp::Trim };
        assert_eq!(apply(&lead, &missing), None);
    }
}
