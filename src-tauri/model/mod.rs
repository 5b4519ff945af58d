//! Plain domain types and pure functions that the store and the features share (the domain words — error
//! class, delivery state, resolution, alert kind and severity, breaker state, replay status/phase/outcome — are
//! in `words.rs`): they sit beneath both, so the
//! store does not import a feature. The features re-export them from their old paths
//! (`delivery::breaker::{BreakerState, Transition}`, `dlq::cause_of`).

use chrono::{DateTime, Utc};

mod attempt;
mod contact;
mod hold;
mod job;
pub mod mapping;
mod place;
pub mod privacy;
mod rate;
mod words;
pub use attempt::{default_class_for_status, truncate_chars, Failure, Observed, Verdict};
pub use contact::{ContactMessage, ContactStatus, Receipt};
pub use hold::{Hold, HoldReason};
pub use job::{lead_key, Job};
pub use place::{Page, Place};
pub use rate::{Rate, RateError, MAX_WINDOW};
pub use words::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub from: BreakerState,
    pub to: BreakerState,
    pub at: DateTime<Utc>,
    pub reason: String,
}

/// When the lead came into being: its top-level `created_time` (RFC 3339, or ISO 8601 with a `+0000` offset as
/// Meta's Graph API writes it) when that is earlier than when Leadline received it, else the reception. A lead
/// recovered by reconciliation is as old as the lead, not as its recovery; a `created_time` in the future or
/// unreadable changes nothing.
pub fn lead_time(received_at: DateTime<Utc>, payload: &serde_json::Value) -> DateTime<Utc> {
    payload
        .get("created_time")
        .and_then(serde_json::Value::as_str)
        .and_then(|t| {
            DateTime::parse_from_rfc3339(t).or_else(|_| DateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%z")).ok()
        })
        .map(|t| t.with_timezone(&Utc))
        .map_or(received_at, |created| created.min(received_at))
}

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
        // A number written with separators (`0151 2345 6789`, `+49 151 2345678`, `(030) 123-4567`): one value
        // when it holds 7+ digits.
        if let Some((end, digits)) = number_at(&chars, i) {
            let separated = chars[i + 1..end].iter().any(|c| !c.is_ascii_digit());
            if digits >= 7 && separated {
                out.push('…');
                i = end;
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

/// The number that starts at `chars[i]`, written with separators or not (`0151 2345 6789`, `+49 151 2345678`,
/// `(030) 123-4567`): the index just after its last digit, and how many digits it has. `None` when no number
/// starts there, or the character before is part of a word (`g00000XyZ` is an id, not a number).
pub fn number_at(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let c = *chars.get(i)?;
    let starts = c.is_ascii_digit() || ((c == '+' || c == '(') && chars.get(i + 1).is_some_and(char::is_ascii_digit));
    if !starts || (i > 0 && chars[i - 1].is_alphanumeric()) {
        return None;
    }
    let (mut end, mut last_digit, mut digits) = (i, i, 0);
    while end < chars.len() {
        let d = chars[end];
        if d.is_ascii_digit() {
            digits += 1;
            last_digit = end;
        } else {
            let next = chars.get(end + 1).copied().unwrap_or(' ');
            let joins = next.is_ascii_digit() || next == '(' || (d == ')' && next == ' ');
            if !(" -./()+".contains(d) && joins) {
                break;
            }
        }
        end += 1;
    }
    Some((last_digit + 1, digits))
}

/// Parses `Retry-After` in either form: delay-seconds (`120`) or an HTTP-date. Returns the instant before which
/// no retry may happen. A date in the past means "now"; garbage means no instruction.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        let seconds = i64::try_from(seconds).ok()?.min(i64::MAX / 1000);
        return now.checked_add_signed(chrono::Duration::seconds(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let at: DateTime<Utc> = at.into();
    Some(at.max(now))
}

/// E.164 from a national or international number; `None` when it does not look like a phone number.
pub fn normalize_phone(raw: &str, country_code: &str) -> Option<String> {
    let trimmed = raw.trim();
    let plus = trimmed.starts_with('+');
    let digits: String = trimmed.chars().filter(char::is_ascii_digit).collect();
    if trimmed.chars().any(|c| !(c.is_ascii_digit() || " +-./()".contains(c))) || digits.len() < 6 {
        return None;
    }
    let cc: String = country_code.chars().filter(char::is_ascii_digit).collect();
    Some(if plus {
        format!("+{digits}")
    } else if let Some(rest) = digits.strip_prefix("00") {
        format!("+{rest}")
    } else if let Some(rest) = digits.strip_prefix('0') {
        format!("+{cc}{rest}")
    } else {
        format!("+{cc}{digits}")
    })
}
