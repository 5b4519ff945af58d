//! Field mapping: how a lead (the stored JSON payload, as the source sent it) becomes a CRM's record.
//!
//! A target declares an ordered list of [`FieldRule`]s. Each rule writes one CRM field (`to`) from one lead field
//! (`from`) or a fixed value (`constant`), through optional [`Transform`]s applied in order. The module is pure: no
//! I/O, no clock, no configuration lookups. [`validate`] checks a list once, at configuration load, with errors
//! that name the key (`targets.crm.mapping[2].transform[0]: ...`); [`apply`] builds one record per lead.
//!
//! Invariants worth knowing:
//! - A value is *missing* when the lead field is absent, `null`, blank text (only spaces), an empty list or an
//!   empty object. A transform whose result is blank (the last name of a one-word name) makes it missing too.
//!   A missing value takes the rule's `default`; without one, a `required` rule fails and any other rule writes
//!   nothing (the field is left out of the record, not sent as `null`).
//! - Error texts never contain the lead's values (emails, phone numbers, names): they end up in logs and in the
//!   dead-letter list. They name the CRM field, the lead field and the shape of the value instead.
//!
//! The TOML shapes are documented in `docs/configuration.md`, "Field mapping".

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{normalize_phone, ErrorClass, Failure, Job};

/// One CRM field: where its value comes from, how it is transformed, and what happens when it is missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldRule {
    /// The CRM field: a top-level name (`email`), or a JSON pointer (`/properties/email`) whose segments are
    /// object keys, created as needed, so several rules can fill one nested object.
    pub to: String,
    /// The lead field: a top-level name (`email`), or a JSON pointer (`/fields/email`, `/field_data/0/values/0`);
    /// or a list of them, the first one with a value wins (sources that name a field differently:
    /// `["email", "/lead/email", "/fields/email"]`). Exactly one of `from` and `constant` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<LeadFields>,
    /// A fixed value written as it is (text, number, true/false, list or table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant: Option<Value>,
    /// Applied in order to the lead's value (not to `default`, and not allowed with `constant`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transform: Vec<Transform>,
    /// Written as it is when the value is missing (or blank after a transform). Not allowed with `required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// A missing value is a data error instead of a field left out.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
}

/// Where a rule's value comes from: one lead field, or several tried in order (the first with a value wins).
/// Written in TOML as a text or a list of texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeadFields(pub Vec<String>);

impl From<&str> for LeadFields {
    fn from(field: &str) -> Self {
        LeadFields(vec![field.to_string()])
    }
}

impl std::fmt::Display for LeadFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join("` or `"))
    }
}

impl Serialize for LeadFields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => serializer.serialize_str(one),
            many => many.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for LeadFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "a lead field (text) or a list of lead fields")]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(match OneOrMany::deserialize(deserializer)? {
            OneOrMany::One(one) => LeadFields(vec![one]),
            OneOrMany::Many(many) => LeadFields(many),
        })
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A step applied to a value. In TOML the ones without settings are plain strings (`"trim"`), the others a table
/// with one key, the transform's name (`{ phone_e164 = { default_country = "+49" } }`).
///
/// Every transform but `date` and `map` works on text: numbers and true/false are turned into text first; a list
/// or an object is a data error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Transform {
    /// Leading and trailing whitespace removed.
    Trim,
    Lowercase,
    Uppercase,
    /// The first name of a full name (see [`split_name`]).
    FirstName,
    /// The last name of a full name; blank (so missing) for a one-word name (see [`split_name`]).
    LastName,
    /// A phone number in E.164 (`+4915112345678`). National numbers get `default_country` (`+49`); `00` becomes
    /// `+`. Text that does not look like a phone number is a data error.
    PhoneE164 {
        default_country: String,
    },
    /// A point in time, written with a chrono strftime `format` (`%Y-%m-%d`). Accepted: RFC 3339, ISO 8601 with
    /// a `+0000` offset (Meta), RFC 2822, Unix seconds (number or digits; milliseconds when too large to be
    /// seconds), `YYYY-MM-DD[ HH:MM[:SS]]` (also with `T`) and `DD.MM.YYYY`. Times without an offset are UTC; a
    /// time with an offset is written in that offset, so a date keeps the calendar day the lead gave.
    Date {
        format: String,
    },
    /// The value's text looked up in `values` (exact match: put `trim` or `lowercase` first to loosen it). An
    /// unmapped value takes `default`; without one it is a data error.
    Map {
        values: BTreeMap<String, Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<Value>,
    },
}

impl Transform {
    /// The transform's name as written in the config.
    pub fn name(&self) -> &'static str {
        match self {
            Transform::Trim => "trim",
            Transform::Lowercase => "lowercase",
            Transform::Uppercase => "uppercase",
            Transform::FirstName => "first_name",
            Transform::LastName => "last_name",
            Transform::PhoneE164 { .. } => "phone_e164",
            Transform::Date { .. } => "date",
            Transform::Map { .. } => "map",
        }
    }

    /// The transformed value, or what is wrong with the input — described without quoting it.
    fn apply(&self, value: &Value) -> Result<Value, String> {
        Ok(match self {
            Transform::Trim => Value::String(text(value)?.trim().to_string()),
            Transform::Lowercase => Value::String(text(value)?.to_lowercase()),
            Transform::Uppercase => Value::String(text(value)?.to_uppercase()),
            Transform::FirstName => Value::String(split_name(&text(value)?).0),
            Transform::LastName => Value::String(split_name(&text(value)?).1),
            Transform::PhoneE164 { default_country } => {
                let phone = normalize_phone(&text(value)?, default_country)
                    .ok_or_else(|| format!("not a phone number ({})", describe(value)))?;
                Value::String(phone)
            }
            Transform::Date { format } => {
                let at = parse_time(value).ok_or_else(|| {
                    format!(
                        "not a date or time this mapping can read ({}; expected RFC 3339, Unix seconds, \
                         YYYY-MM-DD or DD.MM.YYYY)",
                        describe(value)
                    )
                })?;
                Value::String(format_time(&at, format).ok_or("the date format is invalid")?)
            }
            Transform::Map { values, default } => {
                let key = text(value)?;
                values
                    .get(&key)
                    .or(default.as_ref())
                    .cloned()
                    .ok_or_else(|| format!("no entry in `map` for this value and no default ({})", describe(value)))?
            }
        })
    }
}

/// A mapping list that cannot be used. Each message starts with the full key of what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("{key}: is empty: list at least one rule, or leave the mapping out")]
    NoRules { key: String },
    #[error("{key}: has both `from` and `constant`: a rule takes its value from exactly one")]
    FromAndConstant { key: String },
    #[error("{key}: needs `from` (a lead field) or `constant` (a fixed value)")]
    NoSource { key: String },
    #[error("{key}: is empty")]
    Empty { key: String },
    #[error("{key}: `{pointer}` is not a valid JSON pointer: {problem}")]
    BadPointer { key: String, pointer: String, problem: String },
    #[error("{key}: `{to}` is already written by {other}")]
    DuplicateTo { key: String, to: String, other: String },
    #[error("{key}: `{to}` overlaps `{other_to}` ({other}): one would be written inside the other")]
    OverlappingTo { key: String, to: String, other_to: String, other: String },
    #[error(
        "{key}: `{format}` is not a valid date format (chrono strftime, like \"%Y-%m-%d\" or \"%Y-%m-%dT%H:%M:%S%:z\")"
    )]
    BadDateFormat { key: String, format: String },
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

/// Why one lead cannot be mapped. Names the CRM field (`to`) and the lead field (`from`), never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MissingOrInvalid {
    /// A required field is missing (absent, null or blank).
    #[error("`{to}` ← `{from}` is missing or empty")]
    Missing { to: String, from: String },
    /// A required field is blank after a transform (`last_name` of a one-word name).
    #[error("`{to}` ← `{from}` is empty after `{transform}`")]
    EmptyAfter { to: String, from: String, transform: &'static str },
    /// A transform cannot apply to the value (not a phone number, not a date, not in the value map...).
    #[error("`{to}` ← `{from}`: {transform}: {problem}")]
    Invalid { to: String, from: String, transform: &'static str, problem: String },
    /// The rules themselves are invalid ([`apply`] checks them; a configuration error, not a data error).
    #[error("the field mapping is invalid: {0}")]
    Rules(#[from] MappingError),
}

impl MissingOrInvalid {
    /// The CRM field the error is about, for the dead letter's "field" (none for a rules error).
    pub fn field(&self) -> Option<&str> {
        match self {
            MissingOrInvalid::Missing { to, .. }
            | MissingOrInvalid::EmptyAfter { to, .. }
            | MissingOrInvalid::Invalid { to, .. } => Some(to),
            MissingOrInvalid::Rules(_) => None,
        }
    }
}

/// Checks a mapping list. `key` is the list's config key (`targets.crm.mapping`); errors name the rule and the
/// part of it that is wrong (`targets.crm.mapping[2].transform[0]: ...`).
pub fn validate(rules: &[FieldRule], key: &str) -> Result<(), MappingError> {
    if rules.is_empty() {
        return Err(MappingError::NoRules { key: key.to_string() });
    }
    // Output paths seen so far, with the rule that writes each.
    let mut written: Vec<(Vec<String>, &str, String)> = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let rule_key = format!("{key}[{i}]");
        let to_key = format!("{rule_key}.to");
        let to = path(&rule.to, &to_key)?;
        for (other, other_to, other_key) in &written {
            if *other == to {
                return Err(MappingError::DuplicateTo { key: to_key, to: rule.to.clone(), other: other_key.clone() });
            }
            if other.starts_with(&to) || to.starts_with(other) {
                return Err(MappingError::OverlappingTo {
                    key: to_key,
                    to: rule.to.clone(),
                    other_to: other_to.to_string(),
                    other: other_key.clone(),
                });
            }
        }
        written.push((to, &rule.to, rule_key.clone()));

        let invalid = |field: &str, message: &str| MappingError::Invalid {
            key: format!("{rule_key}{field}"),
            message: message.to_string(),
        };
        match (&rule.from, &rule.constant) {
            (Some(_), Some(_)) => return Err(MappingError::FromAndConstant { key: rule_key }),
            (None, None) => return Err(MappingError::NoSource { key: rule_key }),
            (Some(from), None) => {
                if from.0.is_empty() {
                    return Err(invalid(".from", "is an empty list: name at least one lead field"));
                }
                for (n, field) in from.0.iter().enumerate() {
                    let key =
                        if from.0.len() == 1 { format!("{rule_key}.from") } else { format!("{rule_key}.from[{n}]") };
                    path(field, &key)?;
                }
            }
            (None, Some(constant)) => {
                // A constant is written as it is: anything else on the rule would be silently ignored.
                if !rule.transform.is_empty() {
                    return Err(invalid(".transform", "not allowed with `constant`: write the final value"));
                }
                if rule.default.is_some() {
                    return Err(invalid(".default", "not allowed with `constant`: a constant is never missing"));
                }
                if rule.required {
                    return Err(invalid(".required", "not allowed with `constant`: a constant is never missing"));
                }
                check_value(constant, &format!("{rule_key}.constant"))?;
            }
        }
        if let Some(default) = &rule.default {
            if rule.required {
                return Err(invalid(
                    ".required",
                    "not allowed with `default`: the default fills a missing value, so it is never missing",
                ));
            }
            check_value(default, &format!("{rule_key}.default"))?;
        }
        for (t, transform) in rule.transform.iter().enumerate() {
            check_transform(transform, &format!("{rule_key}.transform[{t}]"))?;
        }
    }
    Ok(())
}

fn check_transform(transform: &Transform, key: &str) -> Result<(), MappingError> {
    let invalid = |message: &str| MappingError::Invalid { key: key.to_string(), message: message.to_string() };
    match transform {
        Transform::PhoneE164 { default_country } => {
            let digits = default_country.strip_prefix('+').unwrap_or_default();
            let ok = (1..=3).contains(&digits.len())
                && digits.chars().all(|c| c.is_ascii_digit())
                && !digits.starts_with('0');
            if !ok {
                return Err(invalid("phone_e164.default_country: must be `+` and a country code, like \"+49\""));
            }
        }
        Transform::Date { format } => {
            if format.is_empty() || format_time(&DateTime::UNIX_EPOCH.fixed_offset(), format).is_none() {
                return Err(MappingError::BadDateFormat { key: key.to_string(), format: format.clone() });
            }
        }
        Transform::Map { values, default } => {
            if values.is_empty() {
                return Err(invalid("map.values: is empty: list at least one value"));
            }
            for (from, to) in values {
                check_value(to, &format!("{key}.map.values.{from}"))?;
            }
            if let Some(default) = default {
                check_value(default, &format!("{key}.map.default"))?;
            }
        }
        Transform::Trim | Transform::Lowercase | Transform::Uppercase | Transform::FirstName | Transform::LastName => {}
    }
    Ok(())
}

/// The key the `toml` crate uses when a TOML date-time is read into a `serde_json::Value`.
const TOML_DATETIME_KEY: &str = "$__toml_private_datetime";

/// A configured value must be plain JSON. A TOML date-time (`constant = 2026-01-01`) would arrive as an internal
/// object, so it is refused with a hint instead of being sent to the CRM.
fn check_value(value: &Value, key: &str) -> Result<(), MappingError> {
    fn has_datetime(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.contains_key(TOML_DATETIME_KEY) || m.values().any(has_datetime),
            Value::Array(a) => a.iter().any(has_datetime),
            _ => false,
        }
    }
    if has_datetime(value) {
        return Err(MappingError::Invalid {
            key: key.to_string(),
            message: "a TOML date or time: write it as a quoted string, like \"2026-01-01\"".into(),
        });
    }
    if value.is_null() {
        return Err(MappingError::Invalid { key: key.to_string(), message: "is null: leave it out instead".into() });
    }
    Ok(())
}

/// The object keys a `to` or `from` names: a plain name is one key; a JSON pointer (starting with `/`) is split
/// and unescaped (`~1` is `/`, `~0` is `~`). Empty segments are refused: they are typos, not field names.
fn path(field: &str, key: &str) -> Result<Vec<String>, MappingError> {
    if field.trim().is_empty() {
        return Err(MappingError::Empty { key: key.to_string() });
    }
    let Some(rest) = field.strip_prefix('/') else {
        return Ok(vec![field.to_string()]);
    };
    let bad = |problem: &str| MappingError::BadPointer {
        key: key.to_string(),
        pointer: field.to_string(),
        problem: problem.to_string(),
    };
    rest.split('/')
        .map(|segment| {
            if segment.is_empty() {
                return Err(bad("it has an empty segment (`//`, or `/` at the end)"));
            }
            let mut out = String::with_capacity(segment.len());
            let mut chars = segment.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    out.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => out.push('~'),
                    Some('1') => out.push('/'),
                    _ => return Err(bad("`~` must be followed by 0 or 1 (`~0` is `~`, `~1` is `/`)")),
                }
            }
            Ok(out)
        })
        .collect()
}

/// Builds the CRM record for `lead`, rule by rule. The rules are checked first (cheap next to a request), so a
/// list that skipped config validation can never produce a half-built record. The first failing rule, in order,
/// is the error.
pub fn apply(rules: &[FieldRule], lead: &Value) -> Result<Map<String, Value>, MissingOrInvalid> {
    validate(rules, "mapping")?;
    let mut record = Map::new();
    for rule in rules {
        let Some(value) = rule_value(rule, lead)? else {
            continue;
        };
        let to = path(&rule.to, "to")?;
        // Unreachable after `validate` (overlapping fields are refused); an error rather than a panic regardless.
        insert(&mut record, &to, value).ok_or_else(|| MappingError::Invalid {
            key: "mapping".into(),
            message: format!("`{}` overlaps another rule's field", rule.to),
        })?;
    }
    Ok(record)
}

/// One rule's value: `None` when it writes nothing (a missing value, no default, not required).
fn rule_value(rule: &FieldRule, lead: &Value) -> Result<Option<Value>, MissingOrInvalid> {
    if let Some(constant) = &rule.constant {
        return Ok(Some(constant.clone()));
    }
    let Some(from) = &rule.from else {
        return Ok(None); // Unreachable after `validate`: a rule has `from` or `constant`.
    };
    let mut value = from.0.iter().find_map(|f| lookup(lead, f).filter(|v| !is_blank(v))).cloned();
    let mut emptied_by = None;
    if let Some(mut current) = value.take() {
        for transform in &rule.transform {
            current = transform.apply(&current).map_err(|problem| MissingOrInvalid::Invalid {
                to: rule.to.clone(),
                from: from.to_string(),
                transform: transform.name(),
                problem,
            })?;
            if is_blank(&current) {
                emptied_by = Some(transform.name());
                break;
            }
        }
        value = Some(current).filter(|_| emptied_by.is_none());
    }
    match (value, &rule.default) {
        (Some(v), _) => Ok(Some(v)),
        (None, Some(default)) => Ok(Some(default.clone())),
        (None, None) if !rule.required => Ok(None),
        (None, None) => Err(match emptied_by {
            Some(transform) => MissingOrInvalid::EmptyAfter { to: rule.to.clone(), from: from.to_string(), transform },
            None => MissingOrInvalid::Missing { to: rule.to.clone(), from: from.to_string() },
        }),
    }
}

/// The lead's value at `from`: a top-level key, or a JSON pointer (which may index lists).
fn lookup<'a>(lead: &'a Value, from: &str) -> Option<&'a Value> {
    if from.starts_with('/') {
        lead.pointer(from)
    } else {
        lead.get(from)
    }
}

/// Writes `value` at `path`, creating objects on the way. `None` if a non-object is in the way (rules that overlap,
/// which `validate` refuses).
fn insert(record: &mut Map<String, Value>, path: &[String], value: Value) -> Option<()> {
    let (last, parents) = path.split_last()?;
    let mut object = record;
    for key in parents {
        object = object.entry(key.clone()).or_insert_with(|| Value::Object(Map::new())).as_object_mut()?;
    }
    object.insert(last.clone(), value);
    Some(())
}

/// Missing, as far as a mapping is concerned: null, blank text, an empty list or object.
fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// A value as text for the text transforms: numbers and true/false in their JSON spelling.
fn text(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => Err(format!("{}, not text", describe(value))),
    }
}

/// The shape of a value, for error messages that must not quote it (it may be personal data).
fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("text of {} characters", s.chars().count()),
        Value::Number(_) => "a number".into(),
        Value::Bool(_) => "true/false".into(),
        Value::Null => "null".into(),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Splits a full name into (first name, last name). `Last, First` (one comma) is turned around; otherwise the first
/// word is the first name and the remaining words the last name (`Anna Maria von Berg` → `Anna`, `Maria von Berg`):
/// CRMs require a last name far more often than a middle name. A one-word name is a first name only; its last name
/// is empty, which the mapping treats as missing (so the rule's `default` or `required` decides).
pub fn split_name(full: &str) -> (String, String) {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((last, first)) = full.split_once(',') {
        if !first.contains(',') && !last.trim().is_empty() && !first.trim().is_empty() {
            return (words(first), words(last));
        }
    }
    let mut parts = full.split_whitespace();
    let first = parts.next().unwrap_or_default().to_string();
    (first, parts.collect::<Vec<_>>().join(" "))
}

/// Numbers at least this large are Unix milliseconds, not seconds (as seconds they would be after the year 5000).
const MILLIS_FROM: f64 = 100_000_000_000.0;

/// A point in time from a lead's value; see [`Transform::Date`] for what is accepted.
fn parse_time(value: &Value) -> Option<DateTime<FixedOffset>> {
    match value {
        Value::Number(n) => from_unix(n.as_f64()?),
        Value::String(s) => parse_time_text(s.trim()),
        _ => None,
    }
}

fn from_unix(number: f64) -> Option<DateTime<FixedOffset>> {
    if !number.is_finite() {
        return None;
    }
    let millis = if number.abs() >= MILLIS_FROM { number } else { number * 1000.0 };
    if millis.abs() > i64::MAX as f64 {
        return None;
    }
    DateTime::from_timestamp_millis(millis.round() as i64).map(|t| t.fixed_offset())
}

fn parse_time_text(s: &str) -> Option<DateTime<FixedOffset>> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    // Unix time as text: digits with at most one fraction (`30.11.2026` has two dots and is a date).
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        if let Ok(number) = s.parse::<f64>() {
            return from_unix(number);
        }
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t);
    }
    // ISO 8601 with a `+0000`-style offset (Meta's Graph API), with `T` or a space.
    for format in ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z"] {
        if let Ok(t) = DateTime::parse_from_str(s, format) {
            return Some(t);
        }
    }
    if let Ok(t) = DateTime::parse_from_rfc2822(s) {
        return Some(t);
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, format) {
            return Some(t.and_utc().fixed_offset());
        }
    }
    for format in ["%Y-%m-%d", "%d.%m.%Y"] {
        if let Ok(d) = NaiveDate::parse_from_str(s, format) {
            return Some(d.and_hms_opt(0, 0, 0)?.and_utc().fixed_offset());
        }
    }
    None
}

/// `at` written with a strftime format; `None` when the format is invalid (chrono's `to_string` would panic).
fn format_time(at: &DateTime<FixedOffset>, format: &str) -> Option<String> {
    let mut out = String::new();
    write!(out, "{}", at.format(format)).ok()?;
    Some(out)
}

/// Person keys a mapping may write (`/person/<key>`), besides `/person/custom_fields/<field key>`.
const PIPEDRIVE_PERSON_KEYS: [&str; 3] = ["name", "email", "phone"];
/// Lead keys Leadline writes itself.
const PIPEDRIVE_RESERVED_LEAD_KEYS: [&str; 3] = ["person_id", "organization_id", "origin_id"];

/// Checks a `pipedrive` target's mapping: every rule writes `/person/…` or `/lead/…`, the person's name and the
/// lead's title are written, and nothing Leadline sets itself is. Errors carry the rule's index when one is to
/// blame.
pub fn validate_pipedrive(rules: &[FieldRule], person_field_key: &str) -> Result<(), (Option<usize>, String)> {
    let mut has_name = false;
    let mut has_title = false;
    for (i, rule) in rules.iter().enumerate() {
        let segments: Vec<&str> = rule.to.strip_prefix('/').unwrap_or("").split('/').collect();
        match segments.as_slice() {
            ["person", "name"] => has_name = true,
            ["person", key] if PIPEDRIVE_PERSON_KEYS.contains(key) => {}
            ["person", "custom_fields", key] if *key == person_field_key => {
                return Err((Some(i), format!("`{}` holds the external id, which Leadline writes itself", rule.to)))
            }
            ["person", "custom_fields", key] if !key.is_empty() => {}
            ["lead", "title"] => has_title = true,
            ["lead", key, ..] if PIPEDRIVE_RESERVED_LEAD_KEYS.contains(key) => {
                return Err((Some(i), format!("`{}` is set by Leadline (it links the lead to its person)", rule.to)))
            }
            ["lead", key, ..] if !key.is_empty() => {}
            _ => {
                return Err((
                    Some(i),
                    format!(
                        "`{}` is not a Pipedrive field: write /person/name, /person/email, /person/phone, \
                         /person/custom_fields/<key>, /lead/title or /lead/<field>",
                        rule.to
                    ),
                ))
            }
        }
    }
    match (has_name, has_title) {
        (false, _) => Err((None, "must write /person/name (Pipedrive requires a person's name)".into())),
        (_, false) => Err((None, "must write /lead/title (Pipedrive requires a lead's title)".into())),
        _ => Ok(()),
    }
}

/// What a mapping reads: the lead, plus what Leadline knows about it under `$`-names that no source uses —
/// `$external_id`, `$source`, `$source_ref`, `$received_at`, `$revision` (1, then 2 for the first change) and
/// `$previous_steps` (the earlier steps' results, e.g. `/$previous_steps/crm/crm_id`).
pub fn mapping_input(job: &Job) -> serde_json::Value {
    let mut input = match &job.payload {
        serde_json::Value::Object(m) => m.clone(),
        other => {
            let mut m = serde_json::Map::new();
            m.insert("$lead".into(), other.clone());
            m
        }
    };
    input.insert("$external_id".into(), job.external_id().into());
    input.insert("$source".into(), job.source.clone().into());
    input.insert("$source_ref".into(), job.source_ref.clone().into());
    input.insert("$received_at".into(), serde_json::to_value(job.received_at).unwrap_or_default());
    input.insert("$revision".into(), job.revision.into());
    input.insert("$previous_steps".into(), serde_json::Value::Object(job.previous.clone()));
    serde_json::Value::Object(input)
}

/// A target's missing-data tag: the CRM field it is written to and its text, where `{fields}` stands for the
/// fields left out (`missing data: {fields}`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tag<'a> {
    pub property: &'a str,
    pub value: &'a str,
}

/// The CRM record for `job` by `rules`, or the data failure that names the field. A job sent without some fields
/// ([`Job::dropped`], the target's `missing_data`) leaves out the rules writing them and carries `tag` instead.
pub fn record_for(rules: &[FieldRule], tag: Option<Tag<'_>>, job: &Job) -> Result<Map<String, Value>, Failure> {
    if job.dropped.is_empty() {
        return mapped_record(rules, job);
    }
    let rules: Vec<FieldRule> = rules.iter().filter(|r| !job.dropped.contains(&r.to)).cloned().collect();
    let mut record = if rules.is_empty() { Map::new() } else { mapped_record(&rules, job)? };
    if let Some(tag) = tag {
        let failure = |reason: String| Failure {
            class: ErrorClass::PermanentConfig,
            reason: format!("not sent: {reason}"),
            field: Some(tag.property.to_string()),
        };
        let to = path(tag.property, "missing_data.tag.property").map_err(|e| failure(e.to_string()))?;
        let text = tag.value.replace("{fields}", &job.dropped.join(", "));
        insert(&mut record, &to, Value::String(text))
            .ok_or_else(|| failure(format!("the missing-data tag `{}` overlaps a mapped field", tag.property)))?;
    }
    Ok(record)
}

/// The CRM record for `job` by `rules`, or the data failure that names the field.
pub fn mapped_record(rules: &[FieldRule], job: &Job) -> Result<Map<String, Value>, Failure> {
    apply(rules, &mapping_input(job)).map_err(|e| Failure {
        class: match e {
            MissingOrInvalid::Rules(_) => ErrorClass::PermanentConfig,
            _ => ErrorClass::PermanentData,
        },
        reason: format!("not sent: {e}"),
        field: e.field().map(String::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_job_without_a_field_leaves_its_rule_out_and_carries_the_tag() {
        let rules: Vec<FieldRule> = vec![
            FieldRule {
                to: "email".into(),
                from: Some("email".into()),
                constant: None,
                transform: vec![],
                default: None,
                required: true,
            },
            FieldRule {
                to: "phone".into(),
                from: Some("phone".into()),
                constant: None,
                transform: vec![Transform::PhoneE164 { default_country: "+49".into() }],
                default: None,
                required: false,
            },
        ];
        let mut job = crate::model::Job {
            id: 1,
            event_id: 1,
            step_index: 0,
            target: "crm".into(),
            attempts: 0,
            pending_since: DateTime::UNIX_EPOCH,
            lease_token: 1,
            in_doubt: false,
            trigger: "scheduled".into(),
            replay_generation: 0,
            key_revision: 1,
            source: "form".into(),
            source_ref: "1".into(),
            received_at: DateTime::UNIX_EPOCH,
            revision: 1,
            payload: json!({"email": "ada@example.com", "phone": "call me"}),
            previous: Map::new(),
            dropped: Vec::new(),
        };
        let tag = Tag { property: "lead_status_note", value: "missing data: {fields}" };
        // The mapping refuses the phone, naming the CRM field.
        let refused = record_for(&rules, Some(tag), &job).unwrap_err();
        assert_eq!((refused.class, refused.field.as_deref()), (ErrorClass::PermanentData, Some("phone")));
        // Without it: the rule is left out, the tag written.
        job.dropped = vec!["phone".into()];
        let record = record_for(&rules, Some(tag), &job).unwrap();
        assert_eq!(
            Value::Object(record),
            json!({"email": "ada@example.com", "lead_status_note": "missing data: phone"})
        );
        assert_eq!(job.idempotency_key(), "form:1:crm:without-phone");
        // No tag configured: only left out.
        assert_eq!(Value::Object(record_for(&rules, None, &job).unwrap()), json!({"email": "ada@example.com"}));
    }

    /// The example from `docs/configuration.md`, under a target.
    const EXAMPLE: &str = r#"
[[mapping]]
to = "email"
from = "email"
transform = ["trim", "lowercase"]
required = true

[[mapping]]
to = "phone"
from = "/fields/phone_number"
transform = [{ phone_e164 = { default_country = "+49" } }]

[[mapping]]
to = "firstname"
from = "/fields/full_name"
transform = ["first_name"]

[[mapping]]
to = "lastname"
from = "/fields/full_name"
transform = ["last_name"]
default = "Unknown"

[[mapping]]
to = "lead_source"
constant = "Meta Lead Ads"

[[mapping]]
to = "hs_lead_status"
from = "form_id"
transform = [{ map = { values = { "123" = "NEW", "456" = "OPEN" }, default = "NEW" } }]

[[mapping]]
to = "/properties/created"
from = "created_time"
transform = [{ date = { format = "%Y-%m-%d" } }]
"#;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Wrapper {
        mapping: Vec<FieldRule>,
    }

    fn parse(text: &str) -> Vec<FieldRule> {
        toml::from_str::<Wrapper>(text).expect("valid TOML mapping").mapping
    }

    fn rule(to: &str, from: &str, transform: Vec<Transform>) -> FieldRule {
        FieldRule { to: to.into(), from: Some(from.into()), constant: None, transform, default: None, required: false }
    }

    fn constant(to: &str, value: Value) -> FieldRule {
        FieldRule {
            to: to.into(),
            from: None,
            constant: Some(value),
            transform: vec![],
            default: None,
            required: false,
        }
    }

    fn date(format: &str) -> Transform {
        Transform::Date { format: format.into() }
    }

    fn phone() -> Transform {
        Transform::PhoneE164 { default_country: "+49".into() }
    }

    /// One transform on one value, through `apply`.
    fn one(transform: Transform, value: Value) -> Result<Option<Value>, MissingOrInvalid> {
        let record = apply(&[rule("out", "in", vec![transform])], &json!({ "in": value }))?;
        Ok(record.get("out").cloned())
    }

    fn validation_error(rules: &[FieldRule]) -> String {
        validate(rules, "targets.crm.mapping").expect_err("invalid rules").to_string()
    }

    fn meta_lead() -> Value {
        json!({
            "email": "  Ada.Lovelace@Example.COM ",
            "form_id": 456,
            "created_time": "2026-11-30T09:12:44+0000",
            "fields": { "phone_number": "0151 1234 5678", "full_name": "Ada Lovelace" }
        })
    }

    // --- TOML shapes ---

    #[test]
    fn a_list_of_lead_fields_takes_the_first_with_a_value() {
        let rules = parse(
            r#"
            mapping = [
              { to = "email", from = ["email", "/lead/email", "/fields/email"], required = true },
            ]
            "#,
        );
        assert_eq!(rules[0].from, Some(LeadFields(vec!["email".into(), "/lead/email".into(), "/fields/email".into()])));
        validate(&rules, "targets.crm.mapping").unwrap();
        let from = |lead: Value| apply(&rules, &lead).map(|r| r["email"].clone());
        assert_eq!(from(json!({"email": "a@x.io", "fields": {"email": "b@x.io"}})).unwrap(), "a@x.io");
        // A blank first field does not win over a later one with a value.
        assert_eq!(from(json!({"email": " ", "lead": {"email": "c@x.io"}})).unwrap(), "c@x.io");
        assert_eq!(from(json!({"fields": {"email": "b@x.io"}})).unwrap(), "b@x.io");
        let missing = from(json!({"name": "Ada"})).unwrap_err().to_string();
        assert_eq!(missing, "`email` ← `email` or `/lead/email` or `/fields/email` is missing or empty");
        // Written back as it was read: one field as text, several as a list.
        assert_eq!(serde_json::to_value(&rules[0]).unwrap()["from"], json!(["email", "/lead/email", "/fields/email"]));
        assert_eq!(serde_json::to_value(rule("a", "b", vec![])).unwrap()["from"], json!("b"));
        let empty = FieldRule { from: Some(LeadFields(vec![])), ..rule("a", "b", vec![]) };
        assert_eq!(
            validation_error(&[empty]),
            "targets.crm.mapping[0].from: is an empty list: name at least one lead field"
        );
        let bad = FieldRule { from: Some(LeadFields(vec!["ok".into(), "".into()])), ..rule("a", "b", vec![]) };
        assert_eq!(validation_error(&[bad]), "targets.crm.mapping[0].from[1]: is empty");
    }

    #[test]
    fn the_documented_example_parses_into_rules() {
        let rules = parse(EXAMPLE);
        assert_eq!(rules.len(), 7);
        assert_eq!(
            rules[0],
            FieldRule {
                to: "email".into(),
                from: Some("email".into()),
                constant: None,
                transform: vec![Transform::Trim, Transform::Lowercase],
                default: None,
                required: true,
            }
        );
        assert_eq!(rules[1], rule("phone", "/fields/phone_number", vec![phone()]));
        assert_eq!(rules[2], rule("firstname", "/fields/full_name", vec![Transform::FirstName]));
        assert_eq!(rules[3].default, Some(json!("Unknown")));
        assert_eq!(rules[4], constant("lead_source", json!("Meta Lead Ads")));
        assert_eq!(
            rules[5].transform,
            vec![Transform::Map {
                values: BTreeMap::from([("123".into(), json!("NEW")), ("456".into(), json!("OPEN"))]),
                default: Some(json!("NEW")),
            }]
        );
        assert_eq!(rules[6].transform, vec![date("%Y-%m-%d")]);
        validate(&rules, "targets.hubspot.mapping").expect("the documented example is valid");
    }

    #[test]
    fn the_example_in_the_docs_is_the_one_tested_here() {
        #[derive(Deserialize)]
        struct Doc {
            targets: BTreeMap<String, Wrapper>,
        }
        let docs = include_str!("../../docs/configuration.md");
        let section = &docs[docs.find("### Field mapping").expect("docs have a Field mapping section")..];
        let start = section.find("```toml\n").expect("a TOML example") + "```toml\n".len();
        let end = start + section[start..].find("```").expect("the example ends");
        let doc: Doc = toml::from_str(&section[start..end]).expect("the documented example parses");
        assert_eq!(doc.targets["hubspot"].mapping, parse(EXAMPLE));
    }

    #[test]
    fn rules_round_trip_through_toml() {
        let rules = parse(EXAMPLE);
        let mut all = rules.clone();
        all.push(FieldRule {
            to: "/properties/score".into(),
            from: Some("score".into()),
            constant: None,
            transform: vec![Transform::Trim, Transform::Uppercase, Transform::LastName, date("%s")],
            default: Some(json!(0)),
            required: false,
        });
        all.push(constant("/properties/tags", json!(["meta", 1, true, { "k": 2.5 }])));
        for list in [rules, all] {
            let wrapper = Wrapper { mapping: list };
            let text = toml::to_string(&wrapper).expect("serializes to TOML");
            assert_eq!(toml::from_str::<Wrapper>(&text).expect("parses back"), wrapper, "{text}");
        }
    }

    #[test]
    fn rules_also_read_from_json() {
        let rules: Vec<FieldRule> = serde_json::from_value(json!([
            { "to": "phone", "from": "phone", "transform": ["trim", { "phone_e164": { "default_country": "+44" } }] }
        ]))
        .expect("valid JSON rules");
        assert_eq!(rules[0].transform[1], Transform::PhoneE164 { default_country: "+44".into() });
    }

    #[test]
    fn unknown_keys_and_transforms_are_refused_when_parsing() {
        for bad in [
            "[[mapping]]\nto = \"a\"\nfrom = \"b\"\nrequird = true\n",
            "[[mapping]]\nto = \"a\"\nfrom = \"b\"\ntransform = [\"trimm\"]\n",
            "[[mapping]]\nto = \"a\"\nfrom = \"b\"\ntransform = [{ phone_e164 = { country = \"+49\" } }]\n",
            "[[mapping]]\nto = \"a\"\nfrom = \"b\"\ntransform = [{ date = { format = \"%Y\", tz = \"UTC\" } }]\n",
            "[[mapping]]\nto = \"a\"\nfrom = \"b\"\ntransform = [{ map = { \"1\" = \"x\" } }]\n",
            "[[mapping]]\nto = \"a\"\nfrom = \"b\"\ntransform = [{ map = { values = { \"1\" = \"x\" } }, default = \"y\" }]\n",
        ] {
            assert!(toml::from_str::<Wrapper>(bad).is_err(), "accepted: {bad}");
        }
    }

    // --- validate ---

    #[test]
    fn validation_names_the_rule_and_what_is_wrong() {
        let both = FieldRule { constant: Some(json!("x")), ..rule("a", "b", vec![]) };
        assert_eq!(
            validation_error(&[rule("ok", "ok", vec![]), both]),
            "targets.crm.mapping[1]: has both `from` and `constant`: a rule takes its value from exactly one"
        );
        let neither = FieldRule { from: None, ..rule("a", "b", vec![]) };
        assert_eq!(
            validation_error(&[neither]),
            "targets.crm.mapping[0]: needs `from` (a lead field) or `constant` (a fixed value)"
        );
        assert_eq!(validation_error(&[rule(" ", "b", vec![])]), "targets.crm.mapping[0].to: is empty");
        assert_eq!(validation_error(&[rule("a", "", vec![])]), "targets.crm.mapping[0].from: is empty");
        assert_eq!(
            validation_error(&[]),
            "targets.crm.mapping: is empty: list at least one rule, or leave the mapping out"
        );
    }

    #[test]
    fn bad_pointers_are_refused() {
        for (from, problem) in [
            ("/fields//email", "empty segment"),
            ("/fields/", "empty segment"),
            ("/", "empty segment"),
            ("/a~2b", "`~` must be followed by 0 or 1"),
            ("/a~", "`~` must be followed by 0 or 1"),
        ] {
            let message = validation_error(&[rule("a", from, vec![])]);
            assert!(message.starts_with("targets.crm.mapping[0].from: "), "{message}");
            assert!(message.contains(&format!("`{from}` is not a valid JSON pointer")), "{message}");
            assert!(message.contains(problem), "{message}");
        }
        let message = validation_error(&[rule("/properties//x", "a", vec![])]);
        assert!(message.starts_with("targets.crm.mapping[0].to: `/properties//x` is not a valid JSON pointer"));
        // Escapes are fine.
        validate(&[rule("/a~1b/c~0d", "/x~1y", vec![])], "m").expect("escaped pointers are valid");
    }

    #[test]
    fn each_crm_field_is_written_by_one_rule() {
        let message = validation_error(&[rule("email", "a", vec![]), rule("/email", "b", vec![])]);
        assert_eq!(message, "targets.crm.mapping[1].to: `/email` is already written by targets.crm.mapping[0]");
        let message = validation_error(&[rule("/properties/email", "a", vec![]), rule("properties", "b", vec![])]);
        assert_eq!(
            message,
            "targets.crm.mapping[1].to: `properties` overlaps `/properties/email` (targets.crm.mapping[0]): \
             one would be written inside the other"
        );
        // Siblings in one nested object are fine.
        validate(&[rule("/properties/email", "a", vec![]), rule("/properties/phone", "b", vec![])], "m")
            .expect("siblings");
        // `/a/b` and `/a~1b` are different fields.
        validate(&[rule("/a/b", "a", vec![]), rule("/a~1b", "b", vec![])], "m").expect("different fields");
    }

    #[test]
    fn bad_transform_settings_are_refused() {
        let message = validation_error(&[rule("d", "d", vec![Transform::Trim, date("%Y-%Q")])]);
        assert!(message.starts_with("targets.crm.mapping[0].transform[1]: `%Y-%Q` is not a valid date format"));
        let message = validation_error(&[rule("d", "d", vec![date("")])]);
        assert!(message.starts_with("targets.crm.mapping[0].transform[0]: `` is not a valid date format"));
        validate(&[rule("d", "d", vec![date("%d.%m.%Y %H:%M %:z")])], "m").expect("valid date format");

        for country in ["49", "+", "+0049", "+4a", ""] {
            let t = Transform::PhoneE164 { default_country: country.into() };
            let message = validation_error(&[rule("p", "p", vec![t])]);
            assert!(
                message.starts_with("targets.crm.mapping[0].transform[0]: phone_e164.default_country"),
                "{country}"
            );
        }
        for country in ["+1", "+49", "+358"] {
            validate(&[rule("p", "p", vec![Transform::PhoneE164 { default_country: country.into() }])], "m")
                .expect(country);
        }

        let empty_map = Transform::Map { values: BTreeMap::new(), default: Some(json!("x")) };
        assert_eq!(
            validation_error(&[rule("s", "s", vec![empty_map])]),
            "targets.crm.mapping[0].transform[0]: map.values: is empty: list at least one value"
        );
    }

    #[test]
    fn contradictory_rules_are_refused() {
        let transformed_constant = FieldRule { transform: vec![Transform::Trim], ..constant("a", json!(" x ")) };
        assert!(validation_error(&[transformed_constant]).starts_with("targets.crm.mapping[0].transform: not allowed"));
        let required_constant = FieldRule { required: true, ..constant("a", json!("x")) };
        assert!(validation_error(&[required_constant]).starts_with("targets.crm.mapping[0].required: not allowed"));
        let defaulted_constant = FieldRule { default: Some(json!("y")), ..constant("a", json!("x")) };
        assert!(validation_error(&[defaulted_constant]).starts_with("targets.crm.mapping[0].default: not allowed"));
        let required_with_default = FieldRule { required: true, default: Some(json!("x")), ..rule("a", "b", vec![]) };
        assert!(validation_error(&[required_with_default])
            .starts_with("targets.crm.mapping[0].required: not allowed with `default`"));
        let null_constant = constant("a", Value::Null);
        assert_eq!(
            validation_error(&[null_constant]),
            "targets.crm.mapping[0].constant: is null: leave it out instead"
        );
    }

    #[test]
    fn toml_dates_must_be_quoted() {
        let rules = parse("[[mapping]]\nto = \"since\"\nconstant = 2026-01-01\n");
        assert!(validation_error(&rules).starts_with("targets.crm.mapping[0].constant: a TOML date or time"));
        let rules = parse("[[mapping]]\nto = \"d\"\nfrom = \"d\"\ndefault = 2026-01-01T00:00:00Z\n");
        assert!(validation_error(&rules).starts_with("targets.crm.mapping[0].default: a TOML date or time"));
        let rules =
            parse("[[mapping]]\nto = \"d\"\nfrom = \"d\"\ntransform = [{ map = { values = { a = 2026-01-01 } } }]\n");
        assert!(validation_error(&rules).starts_with("targets.crm.mapping[0].transform[0].map.values.a: a TOML date"));
        validate(&parse("[[mapping]]\nto = \"since\"\nconstant = \"2026-01-01\"\n"), "m").expect("quoted date");
    }

    // --- apply: the whole example ---

    #[test]
    fn the_documented_example_maps_a_meta_lead() {
        let record = apply(&parse(EXAMPLE), &meta_lead()).expect("maps");
        assert_eq!(
            Value::Object(record),
            json!({
                "email": "ada.lovelace@example.com",
                "phone": "+4915112345678",
                "firstname": "Ada",
                "lastname": "Lovelace",
                "lead_source": "Meta Lead Ads",
                "hs_lead_status": "OPEN",
                "properties": { "created": "2026-11-30" },
            })
        );
    }

    #[test]
    fn missing_optional_fields_are_left_out_and_required_ones_fail() {
        let rules = parse(EXAMPLE);
        // Only the email: the phone and name are left out, the last name and the status take their defaults.
        let record = apply(&rules, &json!({ "email": "a@b.example" })).expect("maps");
        assert_eq!(
            Value::Object(record),
            json!({ "email": "a@b.example", "lastname": "Unknown", "lead_source": "Meta Lead Ads" })
        );
        for lead in [json!({}), json!({ "email": null }), json!({ "email": "   " }), json!("not an object")] {
            let err = apply(&rules, &lead).expect_err("email is required");
            assert_eq!(err, MissingOrInvalid::Missing { to: "email".into(), from: "email".into() });
            assert_eq!(err.to_string(), "`email` ← `email` is missing or empty");
            assert_eq!(err.field(), Some("email"));
        }
    }

    #[test]
    fn a_required_pointer_field_names_both_fields() {
        let rules = [FieldRule { required: true, ..rule("email", "/fields/email", vec![]) }];
        let err = apply(&rules, &json!({ "fields": { "email": "" } })).expect_err("empty");
        assert_eq!(err.to_string(), "`email` ← `/fields/email` is missing or empty");
        let err = apply(&rules, &json!({ "fields": [] })).expect_err("no such path");
        assert_eq!(err.to_string(), "`email` ← `/fields/email` is missing or empty");
    }

    #[test]
    fn the_first_failing_rule_is_the_error() {
        let rules =
            [rule("phone", "phone", vec![phone()]), FieldRule { required: true, ..rule("email", "email", vec![]) }];
        let err = apply(&rules, &json!({ "phone": "call me" })).expect_err("two problems");
        assert_eq!(err.field(), Some("phone"));
    }

    // --- apply: sources and targets ---

    #[test]
    fn pointer_sources_reach_nested_objects_and_lists() {
        let lead = json!({
            "field_data": [
                { "name": "email", "values": ["ada@example.com"] },
                { "name": "phone_number", "values": ["+44 20 7946 0958"] }
            ],
            "a/b": { "c~d": "escaped" },
            "/literal": "top-level key with a slash"
        });
        let rules = [
            rule("email", "/field_data/0/values/0", vec![]),
            rule("phone", "/field_data/1/values/0", vec![phone()]),
            rule("escaped", "/a~1b/c~0d", vec![]),
            rule("fax", "/field_data/2/values/0", vec![]),
        ];
        let record = apply(&rules, &lead).expect("maps");
        assert_eq!(
            Value::Object(record),
            json!({ "email": "ada@example.com", "phone": "+442079460958", "escaped": "escaped" })
        );
    }

    #[test]
    fn pointer_targets_build_nested_objects() {
        let rules = [
            rule("/properties/email", "email", vec![Transform::Lowercase]),
            rule("/properties/phone", "phone", vec![]),
            constant("/meta/source/name", json!("webform")),
            rule("/properties/a~1b", "email", vec![]),
            rule("top", "email", vec![]),
            rule("/properties/missing", "nothing", vec![]),
        ];
        let record = apply(&rules, &json!({ "email": "A@B.EXAMPLE", "phone": 4915112345678_u64 })).expect("maps");
        assert_eq!(
            Value::Object(record),
            json!({
                "properties": { "email": "a@b.example", "phone": 4915112345678_u64, "a/b": "A@B.EXAMPLE" },
                "meta": { "source": { "name": "webform" } },
                "top": "A@B.EXAMPLE",
            })
        );
    }

    #[test]
    fn values_keep_their_type_unless_a_text_transform_applies() {
        let lead = json!({ "n": 42, "f": 1.5, "b": true, "s": " x ", "list": [1, 2], "obj": { "k": "v" } });
        let rules = [
            rule("n", "n", vec![]),
            rule("f", "f", vec![]),
            rule("b", "b", vec![]),
            rule("s", "s", vec![]),
            rule("list", "list", vec![]),
            rule("obj", "obj", vec![]),
            rule("n_text", "n", vec![Transform::Trim]),
            rule("f_text", "f", vec![Transform::Trim]),
            rule("b_text", "b", vec![Transform::Uppercase]),
        ];
        let record = apply(&rules, &lead).expect("maps");
        assert_eq!(
            Value::Object(record),
            json!({
                "n": 42, "f": 1.5, "b": true, "s": " x ", "list": [1, 2], "obj": { "k": "v" },
                "n_text": "42", "f_text": "1.5", "b_text": "TRUE",
            })
        );
        let err = one(Transform::Trim, json!([1, 2])).expect_err("a list is not text");
        assert_eq!(err.to_string(), "`out` ← `in`: trim: a list, not text");
        let err = one(Transform::Lowercase, json!({ "k": "v" })).expect_err("an object is not text");
        assert_eq!(err.to_string(), "`out` ← `in`: lowercase: an object, not text");
    }

    #[test]
    fn constants_of_any_type_are_written_as_they_are() {
        let rules = [
            constant("s", json!("Meta Lead Ads")),
            constant("n", json!(7)),
            constant("b", json!(false)),
            constant("l", json!(["a", "b"])),
            constant("empty", json!("")),
        ];
        let record = apply(&rules, &json!({})).expect("maps");
        assert_eq!(
            Value::Object(record),
            json!({ "s": "Meta Lead Ads", "n": 7, "b": false, "l": ["a", "b"], "empty": "" })
        );
    }

    #[test]
    fn defaults_fill_missing_or_blank_values_untransformed() {
        let rules = [FieldRule {
            default: Some(json!("  Keep As Is ")),
            ..rule("x", "/a/b", vec![Transform::Trim, Transform::Lowercase])
        }];
        for lead in
            [json!({}), json!({ "a": { "b": null } }), json!({ "a": { "b": " " } }), json!({ "a": { "b": [] } })]
        {
            assert_eq!(apply(&rules, &lead).expect("maps")["x"], "  Keep As Is ", "{lead}");
        }
        assert_eq!(apply(&rules, &json!({ "a": { "b": " Present " } })).expect("maps")["x"], "present");
        let numeric_default = [FieldRule { default: Some(json!(0)), ..rule("score", "score", vec![]) }];
        assert_eq!(apply(&numeric_default, &json!({})).expect("maps")["score"], 0);
    }

    // --- each transform ---

    #[test]
    fn trim_lowercase_uppercase() {
        assert_eq!(one(Transform::Trim, json!("  Ada \t")).expect("ok"), Some(json!("Ada")));
        assert_eq!(one(Transform::Lowercase, json!("ÄDA@Example.COM")).expect("ok"), Some(json!("äda@example.com")));
        assert_eq!(one(Transform::Uppercase, json!("de-by")).expect("ok"), Some(json!("DE-BY")));
        // Whitespace only is missing, so nothing is written.
        assert_eq!(one(Transform::Trim, json!("   ")).expect("ok"), None);
    }

    #[test]
    fn phone_numbers_become_e164() {
        assert_eq!(one(phone(), json!("0151 1234 5678")).expect("ok"), Some(json!("+4915112345678")));
        assert_eq!(one(phone(), json!("(0151) 123-45.67")).expect("ok"), Some(json!("+491511234567")));
        assert_eq!(one(phone(), json!("0049 151 1234567")).expect("ok"), Some(json!("+491511234567")));
        assert_eq!(one(phone(), json!("+44 20 7946 0958")).expect("ok"), Some(json!("+442079460958")));
        // A number is read as national digits.
        assert_eq!(one(phone(), json!(15112345678_u64)).expect("ok"), Some(json!("+4915112345678")));
        let err = one(phone(), json!("call me maybe")).expect_err("not a phone number");
        assert_eq!(err.to_string(), "`out` ← `in`: phone_e164: not a phone number (text of 13 characters)");
        assert_eq!(err.field(), Some("out"));
        assert!(one(phone(), json!("123")).is_err(), "too short");
    }

    #[test]
    fn names_split_into_first_and_last() {
        assert_eq!(split_name("Ada Lovelace"), ("Ada".into(), "Lovelace".into()));
        assert_eq!(split_name("  Anna  Maria von   Berg "), ("Anna".into(), "Maria von Berg".into()));
        assert_eq!(split_name("Lovelace, Ada"), ("Ada".into(), "Lovelace".into()));
        assert_eq!(split_name("Lovelace,  Ada  King"), ("Ada King".into(), "Lovelace".into()));
        // Not the `Last, First` form: split on words.
        assert_eq!(split_name("Ada, Countess, Lovelace"), ("Ada,".into(), "Countess, Lovelace".into()));
        assert_eq!(split_name("Cher"), ("Cher".into(), String::new()));
        assert_eq!(split_name("Cher,"), ("Cher,".into(), String::new()));

        assert_eq!(one(Transform::FirstName, json!("Ada Lovelace")).expect("ok"), Some(json!("Ada")));
        assert_eq!(one(Transform::LastName, json!("Ada Lovelace")).expect("ok"), Some(json!("Lovelace")));
        assert_eq!(one(Transform::FirstName, json!("Cher")).expect("ok"), Some(json!("Cher")));
        // A one-word name has no last name: missing, so left out...
        assert_eq!(one(Transform::LastName, json!("Cher")).expect("ok"), None);
        // ...or the default...
        let defaulted =
            [FieldRule { default: Some(json!("Unknown")), ..rule("ln", "name", vec![Transform::LastName]) }];
        assert_eq!(apply(&defaulted, &json!({ "name": "Cher" })).expect("maps")["ln"], "Unknown");
        // ...or, when required, an error that says why — and later transforms do not run on the blank.
        let required =
            [FieldRule { required: true, ..rule("lastname", "/fields/full_name", vec![Transform::LastName, phone()]) }];
        let err = apply(&required, &json!({ "fields": { "full_name": "Cher" } })).expect_err("no last name");
        assert_eq!(err.to_string(), "`lastname` ← `/fields/full_name` is empty after `last_name`");
    }

    #[test]
    fn dates_are_read_in_common_shapes_and_written_in_the_format() {
        let day = date("%Y-%m-%d");
        for input in [
            json!("2026-11-30T09:12:44Z"),
            json!("2026-11-30T09:12:44.123+00:00"),
            json!("2026-11-30T09:12:44+0000"),
            json!("2026-11-30 09:12:44+0000"),
            json!("2026-11-30 09:12:44Z"),
            json!("Mon, 30 Nov 2026 09:12:44 +0000"),
            json!("2026-11-30T09:12:44"),
            json!("2026-11-30 09:12:44.5"),
            json!("2026-11-30 09:12"),
            json!("2026-11-30"),
            json!("30.11.2026"),
            json!(1_796_029_964),
            json!("1796029964"),
            json!(1_796_029_964_000_i64),
            json!(1_796_029_964.5),
        ] {
            assert_eq!(one(day.clone(), input.clone()).expect("a date"), Some(json!("2026-11-30")), "{input}");
        }
        let full = date("%Y-%m-%dT%H:%M:%S%:z");
        assert_eq!(one(full.clone(), json!(1_796_029_964)).expect("ok"), Some(json!("2026-11-30T09:12:44+00:00")));
        // An offset is kept, so the calendar day is the lead's own.
        assert_eq!(
            one(full, json!("2026-12-01T00:30:00+01:00")).expect("ok"),
            Some(json!("2026-12-01T00:30:00+01:00"))
        );
        assert_eq!(one(day.clone(), json!("2026-12-01T00:30:00+01:00")).expect("ok"), Some(json!("2026-12-01")));
        assert_eq!(one(date("%s"), json!("2026-11-30T09:12:44Z")).expect("ok"), Some(json!("1796029964")));

        for bad in [json!("next tuesday"), json!("2026-13-45"), json!("11/30/2026"), json!(true), json!(["2026-11-30"])]
        {
            let err = one(day.clone(), bad.clone()).expect_err("not a date");
            assert!(err.to_string().starts_with("`out` ← `in`: date: not a date or time"), "{bad}: {err}");
        }
    }

    #[test]
    fn value_maps_translate_with_an_optional_default() {
        let status = |default: Option<Value>| Transform::Map {
            values: BTreeMap::from([
                ("123".into(), json!("NEW")),
                ("456".into(), json!("OPEN")),
                ("vip".into(), json!(1)),
            ]),
            default,
        };
        assert_eq!(one(status(None), json!("123")).expect("ok"), Some(json!("NEW")));
        // Numbers match their text.
        assert_eq!(one(status(None), json!(456)).expect("ok"), Some(json!("OPEN")));
        // Mapped values keep their type.
        assert_eq!(one(status(None), json!("vip")).expect("ok"), Some(json!(1)));
        assert_eq!(one(status(Some(json!("NEW"))), json!("999")).expect("ok"), Some(json!("NEW")));
        // Exact match: `VIP` is not `vip`, unless lowercased first.
        let err = one(status(None), json!("VIP")).expect_err("unmapped");
        assert_eq!(
            err.to_string(),
            "`out` ← `in`: map: no entry in `map` for this value and no default (text of 3 characters)"
        );
        let rules = [rule("tier", "tier", vec![Transform::Lowercase, status(None)])];
        assert_eq!(apply(&rules, &json!({ "tier": "VIP" })).expect("maps")["tier"], 1);
        let err = one(status(None), json!(789)).expect_err("unmapped number");
        assert_eq!(err.field(), Some("out"));
    }

    // --- errors never carry the lead's data ---

    #[test]
    fn errors_do_not_quote_personal_values() {
        let secret_phone = "0151-SECRET-99";
        let secret_email = "ada.private@example.com";
        let lead = json!({ "phone": secret_phone, "email": secret_email, "born": "ada's birthday" });
        let cases = [
            rule("phone", "phone", vec![phone()]),
            rule(
                "email",
                "email",
                vec![Transform::Map { values: BTreeMap::from([("x".into(), json!("y"))]), default: None }],
            ),
            rule("born", "born", vec![date("%Y")]),
            rule("birthday", "email", vec![date("%Y")]),
        ];
        for r in cases {
            let message = apply(std::slice::from_ref(&r), &lead).expect_err("invalid value").to_string();
            assert!(message.contains(&format!("`{}`", r.to)), "{message}");
            for secret in [secret_phone, secret_email, "ada", "SECRET", "example.com"] {
                assert!(!message.contains(secret), "{message} contains {secret}");
            }
        }
    }

    #[test]
    fn apply_refuses_rules_that_skipped_validation() {
        let both = FieldRule { constant: Some(json!("x")), ..rule("a", "b", vec![]) };
        let err = apply(&[both], &json!({ "b": "y" })).expect_err("invalid rules");
        assert!(matches!(err, MissingOrInvalid::Rules(MappingError::FromAndConstant { .. })));
        assert_eq!(err.field(), None);
        assert!(err.to_string().starts_with("the field mapping is invalid: mapping[0]: has both"));
        let bad_format = [rule("d", "d", vec![date("%Q")])];
        assert!(matches!(
            apply(&bad_format, &json!({ "d": "2026-01-01" })),
            Err(MissingOrInvalid::Rules(MappingError::BadDateFormat { .. }))
        ));
    }

    #[test]
    fn transform_names_match_the_config_spelling() {
        let all = [
            Transform::Trim,
            Transform::Lowercase,
            Transform::Uppercase,
            Transform::FirstName,
            Transform::LastName,
            phone(),
            date("%Y"),
            Transform::Map { values: BTreeMap::from([("a".into(), json!("b"))]), default: None },
        ];
        for transform in all {
            let serialized = serde_json::to_value(&transform).expect("serializes");
            let name = match &serialized {
                Value::String(s) => s.clone(),
                Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
                other => panic!("unexpected shape {other}"),
            };
            assert_eq!(name, transform.name());
        }
    }
}
