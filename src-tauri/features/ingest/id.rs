//! Event ids taken from the raw JSON text, checked before anything is stored.
//!
//! An id goes into keys, URLs, headers (`Idempotency-Key`) and logs, so it must be short printable text. A
//! numeric id is taken verbatim from the body: parsed into a `serde_json::Value`, an integer beyond 64 bits
//! becomes a rounded float and different leads would collapse into one "duplicate". Only the ids are read
//! through [`RawValue`]; the rest of the crate keeps serde_json's ordinary number handling (no
//! `arbitrary_precision`, which would change every `Value` in the program).

use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// The longest accepted event id, in characters.
pub const MAX_ID_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("the id is missing or empty")]
    Missing,
    #[error("the id is not a string or a number")]
    NotText,
    #[error("the id is {0} characters long; at most {MAX_ID_CHARS} are accepted")]
    TooLong(usize),
    #[error("the id contains a control character (U+{0:04X}); only printable text is accepted")]
    ControlCharacter(u32),
}

/// Checks an id's text: trimmed, not empty, at most [`MAX_ID_CHARS`] characters, no control characters.
pub fn validate(id: &str) -> Result<String, IdError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(IdError::Missing);
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(IdError::ControlCharacter(c as u32));
    }
    let n = id.chars().count();
    if n > MAX_ID_CHARS {
        return Err(IdError::TooLong(n));
    }
    Ok(id.to_string())
}

/// The id held by a raw JSON value: a string's text, or a number's digits exactly as sent.
pub fn id_text(raw: &RawValue) -> Result<String, IdError> {
    let text = raw.get().trim();
    match text.as_bytes().first() {
        Some(b'"') => validate(&serde_json::from_str::<String>(text).map_err(|_| IdError::NotText)?),
        Some(b'-' | b'0'..=b'9') => validate(text),
        Some(b'n') => Err(IdError::Missing),
        _ => Err(IdError::NotText),
    }
}

/// The members of a raw JSON object (the last of repeated keys wins, as in `serde_json::Value`); `None` when it
/// is not an object.
pub fn object(raw: &RawValue) -> Option<BTreeMap<String, &RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

/// The items of a raw JSON array; `None` when it is not an array.
pub fn array(raw: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

/// The raw value at `field` of `body`: a top-level member name (`id`) or a JSON pointer (`/lead/ref`).
pub fn at<'a>(body: &'a RawValue, field: &str) -> Option<&'a RawValue> {
    let tokens: Vec<String> = match field.strip_prefix('/') {
        Some(pointer) => pointer.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect(),
        None => vec![field.to_string()],
    };
    let mut current = body;
    for token in &tokens {
        current = match current.get().trim_start().as_bytes().first()? {
            b'{' => *object(current)?.get(token)?,
            b'[' => *array(current)?.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// The event id of a generic source's body (raw JSON text) at `field`.
pub fn event_id(body: &str, field: &str) -> Result<String, IdError> {
    let raw: &RawValue = serde_json::from_str(body).map_err(|_| IdError::Missing)?;
    id_text(at(raw, field).ok_or(IdError::Missing)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_stay_exact_beyond_64_bits() {
        let body = r#"{"id": 123456789012345678901234567890, "other": 1}"#;
        assert_eq!(event_id(body, "id").unwrap(), "123456789012345678901234567890");
        let a = r#"{"id": 18446744073709551617}"#;
        let b = r#"{"id": 18446744073709551618}"#;
        assert_ne!(event_id(a, "id").unwrap(), event_id(b, "id").unwrap());
        assert_eq!(event_id(r#"{"id": -42}"#, "id").unwrap(), "-42");
    }

    #[test]
    fn strings_names_and_pointers() {
        let body = r#"{"id": "  a-1 ", "lead": {"ref": "x/1", "list": [{"id": 7}]}, "we/ird": "w"}"#;
        assert_eq!(event_id(body, "id").unwrap(), "a-1");
        assert_eq!(event_id(body, "/lead/ref").unwrap(), "x/1");
        assert_eq!(event_id(body, "/lead/list/0/id").unwrap(), "7");
        assert_eq!(event_id(body, "/we~1ird").unwrap(), "w");
        assert_eq!(event_id(body, "missing"), Err(IdError::Missing));
        assert_eq!(event_id(body, "/lead"), Err(IdError::NotText));
        assert_eq!(event_id(r#"{"id": null}"#, "id"), Err(IdError::Missing));
        assert_eq!(event_id(r#"{"id": true}"#, "id"), Err(IdError::NotText));
        assert_eq!(event_id(r#"{"id": "  "}"#, "id"), Err(IdError::Missing));
        // The last of repeated keys wins, as in serde_json::Value.
        assert_eq!(event_id(r#"{"id": "first", "id": "second"}"#, "id").unwrap(), "second");
    }

    #[test]
    fn control_characters_and_long_ids_are_refused() {
        assert_eq!(event_id(r#"{"id": "a\r\nInjected: 1"}"#, "id"), Err(IdError::ControlCharacter(0x0d)));
        assert_eq!(event_id(r#"{"id": "bell\u0007"}"#, "id"), Err(IdError::ControlCharacter(0x07)));
        assert_eq!(event_id(r#"{"id": "esc\u001b[31m"}"#, "id"), Err(IdError::ControlCharacter(0x1b)));
        assert_eq!(event_id("{\"id\": \"c1\u{85}x\"}", "id"), Err(IdError::ControlCharacter(0x85)));
        let long = format!(r#"{{"id": "{}"}}"#, "x".repeat(201));
        assert_eq!(event_id(&long, "id"), Err(IdError::TooLong(201)));
        let ok = format!(r#"{{"id": "{}"}}"#, "é".repeat(200));
        assert_eq!(event_id(&ok, "id").unwrap().chars().count(), 200);
    }
}
