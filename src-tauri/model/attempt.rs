//! One attempt's outcome in the words every layer shares: what came back ([`Observed`]), what it means
//! ([`Verdict`], [`Failure`]), the default meaning of an HTTP status, and short excerpts. The connectors decide
//! a verdict (`features::targets`); the worker acts on it (`features::delivery`); the store records it.

use super::ErrorClass;

/// What came back from one attempt, reduced to what classification needs.
#[derive(Debug, Clone)]
pub enum Observed<'a> {
    /// The target answered with a status and a body.
    Response { status: u16, body: &'a [u8] },
    /// The request never reached the target (connection refused, DNS failure, connect timeout).
    NotSent,
    /// The request was (or may have been) sent and no answer came: timeout or reset after sending.
    NoAnswer,
}

/// The verdict on an attempt: delivered, or failed with a class and a readable reason.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Delivered,
    Failed(Failure),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub class: ErrorClass,
    /// The CRM's own message where it gave one, otherwise a description of what happened.
    pub reason: String,
    /// The field the CRM blamed, where it named one.
    pub field: Option<String>,
}

/// The default status mapping (docs/operators.md, "Error classes").
pub fn default_class_for_status(status: u16) -> ErrorClass {
    match status {
        429 => ErrorClass::RateLimited,
        401 | 403 | 404 | 405 | 410 => ErrorClass::PermanentConfig,
        // 408: the server gave up reading our request; 409: an idempotent request still in flight; 425: too early.
        408 | 409 | 425 => ErrorClass::Transient,
        300 => ErrorClass::PermanentData, // several records match (Salesforce upsert): needs a person
        301..=399 => ErrorClass::PermanentConfig, // redirects are not followed: the URL is wrong
        400..=499 => ErrorClass::PermanentData,
        _ => ErrorClass::Transient, // 5xx and anything unknown: retrying may help
    }
}

/// Cuts a string to at most `max` characters, on a character boundary.
pub fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
