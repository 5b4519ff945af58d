//! Lead lookup: find any lead (not only dead letters) by what an operator has at hand — an e-mail address, a
//! phone number or a fragment of one, a name, the source's id, the CRM's record id, or Leadline's own id — and
//! read its whole story (how it came in, each step with its attempts, fixes and replays).
//!
//! The search is a **scan**: the stored leads are read newest first and the first `limit` (at most 50) that
//! match are returned. The source's id, the lead id and the CRM id are exact matches; e-mail, phone and name are
//! a case-insensitive substring of the lead's data as stored (for queries of three characters or more; a number
//! shorter than four digits is taken as an id only) (a phone fragment also matches with spaces, dashes,
//! brackets and a leading trunk `0` ignored, so `0151 234` finds `+49 151 2345…`). A lead whose data was purged
//! after its retention keeps no data to match: it is found by its ids only.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{from_ms, Attempt, PayloadFix, ReplayHistoryEntry, Store};
use crate::model::{decode, ErrorClass};

/// Where a lead stands overall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum LeadStatus {
    /// Every step delivered.
    Delivered,
    /// A step is still to go (waiting, due or being sent).
    Waiting,
    /// A step is an open dead letter.
    DeadLetter,
    /// Nothing left to go, and a dead letter was resolved by hand (discarded or entered in the CRM by a person).
    Resolved,
    /// A test lead (Google's "send test data"): stored and shown, sent nowhere — it has no steps.
    Test,
}

impl LeadStatus {
    fn of(steps: i64, open_dead: i64, unfinished: i64, resolved_dead: i64) -> LeadStatus {
        if steps == 0 {
            LeadStatus::Test
        } else if open_dead > 0 {
            LeadStatus::DeadLetter
        } else if unfinished > 0 {
            LeadStatus::Waiting
        } else if resolved_dead > 0 {
            LeadStatus::Resolved
        } else {
            LeadStatus::Delivered
        }
    }
}

/// A lead found by [`Store::find_leads`].
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct LeadMatch {
    pub event_id: i64,
    pub source: String,
    /// The lead's id at its source.
    pub source_ref: String,
    pub received_at: DateTime<Utc>,
    /// `webhook` or `reconciliation`.
    pub via: String,
    pub status: LeadStatus,
    /// How many steps its route has.
    pub steps: i64,
    /// Its data was purged after its retention (found by id only).
    pub purged: bool,
}

/// One step of a lead's route with everything that happened to it.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct LeadStep {
    pub delivery_id: i64,
    pub step_index: i64,
    pub target: String,
    /// `waiting`, `pending`, `running`, `delivered`, `dead`, or `reported`: a conversion step that ended without
    /// sending (too old for the platform's window, a stage not mapped), a final state of its own (stored as such
    /// since migration 0016: never delivered, never a dead letter, never tried again).
    pub state: String,
    /// A reported step's words ("reported: too old for Meta's 7-day window …").
    pub reported: Option<String>,
    /// Counted attempts.
    pub attempts: i64,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub dead_at: Option<DateTime<Utc>>,
    pub dead_class: Option<ErrorClass>,
    pub dead_reason: Option<String>,
    /// For a dead letter: `open`, `replayed`, `fixed_manually` or `discarded`.
    pub resolution: Option<String>,
    /// The step's own target when a replay ran its fallback instead.
    pub fallback_of: Option<String>,
    /// The CRM's record id: from the delivered answer, else the link a look-up-then-create target keeps.
    pub crm_id: Option<String>,
    /// Every attempt, oldest first.
    pub attempts_timeline: Vec<Attempt>,
    /// The replays that sent this step again, newest first.
    pub replays: Vec<ReplayHistoryEntry>,
}

/// A lead with its whole story, as stored (personal data unmasked: the API masks it).
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct LeadRecord {
    pub event_id: i64,
    pub source: String,
    pub source_ref: String,
    pub received_at: DateTime<Utc>,
    /// `webhook` or `reconciliation`.
    pub via: String,
    /// 1 as first received; a source that sent the lead again with new content makes the next revision.
    pub revision: i64,
    pub revised_at: Option<DateTime<Utc>>,
    /// When the lead came into being at its source, when earlier than its reception.
    pub lead_at: Option<DateTime<Utc>>,
    #[ts(type = "unknown")]
    pub payload: serde_json::Value,
    /// The lead as received, when it was fixed since.
    #[ts(type = "unknown")]
    pub original_payload: Option<serde_json::Value>,
    /// When its data was purged after its retention.
    pub purged_at: Option<DateTime<Utc>>,
    pub status: LeadStatus,
    pub steps: Vec<LeadStep>,
    pub fixes: Vec<PayloadFix>,
}

/// The most leads one search returns.
pub const FIND_LIMIT: u32 = 50;

/// The query's digits for a phone search (`0151 234` → `151234`), when it looks like a phone number: only digits
/// and `+ -()/.` and spaces, with at least four digits.
fn phone_digits(query: &str) -> Option<String> {
    if !query.chars().all(|c| c.is_ascii_digit() || " +-()/.".contains(c)) {
        return None;
    }
    let digits: String = query.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_start_matches('0');
    (digits.len() >= 4).then(|| digits.to_string())
}

/// Whether `query` is searched for inside the leads' data too: three characters at least, and a number only from
/// four digits on (as for phone fragments) — a short number is an id, and `3` would otherwise match every lead
/// whose data holds the digit.
fn substring_worthy(query: &str) -> bool {
    let digits_only = query.chars().all(|c| c.is_ascii_digit() || c == '#');
    query.chars().count() >= 3 && !(digits_only && query.chars().filter(char::is_ascii_digit).count() < 4)
}

/// `text` as a LIKE pattern matching it anywhere (`\` escapes).
fn contains_pattern(text: &str) -> String {
    let mut p = String::from("%");
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

impl Store {
    /// The newest leads (at most `limit`, capped at 50) matching `query`: its source id, lead id or CRM record id
    /// exactly, or its e-mail, phone or name as a case-insensitive substring of the stored data (a scan, see the
    /// module's documentation). An empty query finds nothing.
    pub async fn find_leads(&self, query: &str, limit: u32) -> anyhow::Result<Vec<LeadMatch>> {
        let query = query.trim();
        if query.is_empty() {
            return Ok(Vec::new());
        }
        dispatch!(self, find_leads(query, limit.clamp(1, FIND_LIMIT)))
    }

    /// A lead with its steps, their attempts and replays, and its fixes; `None` when there is no such lead.
    pub async fn lead_story(&self, event_id: i64) -> anyhow::Result<Option<LeadRecord>> {
        let Some(mut lead) = dispatch!(self, lead_record(event_id))? else { return Ok(None) };
        lead.fixes = self.payload_fixes(event_id).await?;
        for step in &mut lead.steps {
            step.attempts_timeline = self.delivery_attempts(step.delivery_id).await?;
            step.replays = self.replay_history(step.delivery_id).await?;
        }
        Ok(Some(lead))
    }
}

type MatchRow = (i64, String, String, i64, String, Option<i64>, i64, i64, i64, i64);
type EventRow = (i64, String, String, i64, String, i64, Option<i64>, Option<i64>, String, Option<String>, Option<i64>);
type StepRow = (
    i64,
    i64,
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// The text with the separators of phone numbers taken out, in SQL.
const PAYLOAD_DIGITS: &str =
    "REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(e.payload, ' ', ''), '-', ''), '(', ''), ')', ''), '/', ''), '.', '')";

backends! {
    shared {
        pub async fn find_leads(db: &Db, query: &str, limit: u32) -> anyhow::Result<Vec<LeadMatch>> {
            let id: i64 = query.trim_start_matches('#').parse().unwrap_or(-1);
            let text = if substring_worthy(query) { contains_pattern(&query.to_lowercase()) } else { String::new() };
            let digits = phone_digits(query).map(|d| contains_pattern(&d)).unwrap_or_default();
            let crm_answer = contains_pattern(&format!("\"crm_id\":{}", serde_json::Value::from(query)));
            let sql = format!(
                "SELECT e.id, e.source, e.source_ref, e.received_at, e.via, e.purged_at,
                        (SELECT COUNT(*) FROM delivery d WHERE d.event_id = e.id),
                        (SELECT COUNT(*) FROM delivery d WHERE d.event_id = e.id AND d.state = 'dead'
                            AND d.resolution = 'open'),
                        (SELECT COUNT(*) FROM delivery d WHERE d.event_id = e.id
                            AND d.state IN ('waiting', 'pending', 'running')),
                        (SELECT COUNT(*) FROM delivery d WHERE d.event_id = e.id AND d.state = 'dead'
                            AND d.resolution <> 'open')
                   FROM inbound_event e
                  WHERE e.source_ref = $1
                     OR e.id = $2
                     OR ($3 <> '' AND LOWER(e.payload) LIKE $3 ESCAPE '\\')
                     OR ($4 <> '' AND {PAYLOAD_DIGITS} LIKE $4 ESCAPE '\\')
                     OR e.id IN (SELECT event_id FROM delivery WHERE result LIKE $5 ESCAPE '\\')
                     OR e.source || ':' || e.source_ref IN (SELECT external_id FROM crm_link WHERE crm_id = $1)
                  ORDER BY e.id DESC LIMIT $6"
            );
            let rows: Vec<MatchRow> = sqlx::query_as(&sql)
                .bind(query)
                .bind(id)
                .bind(&text)
                .bind(&digits)
                .bind(&crm_answer)
                .bind(i64::from(limit))
                .fetch_all(db.reader())
                .await
                .context("cannot search the leads")?;
            Ok(rows
                .into_iter()
                .map(|r| LeadMatch {
                    event_id: r.0,
                    source: r.1,
                    source_ref: r.2,
                    received_at: from_ms(r.3),
                    via: r.4,
                    purged: r.5.is_some(),
                    steps: r.6,
                    status: LeadStatus::of(r.6, r.7, r.8, r.9),
                })
                .collect())
        }

        pub async fn lead_record(db: &Db, event_id: i64) -> anyhow::Result<Option<LeadRecord>> {
            let row: Option<EventRow> = sqlx::query_as(
                "SELECT id, source, source_ref, received_at, via, revision, revised_at, lead_at, payload,
                        original_payload, purged_at
                   FROM inbound_event WHERE id = $1",
            )
            .bind(event_id)
            .fetch_optional(db.reader())
            .await
            .context("cannot read the lead")?;
            let Some(e) = row else { return Ok(None) };
            let steps: Vec<StepRow> = sqlx::query_as(
                "SELECT d.id, d.step_index, d.target, d.state, d.attempts, d.next_attempt_at, d.delivered_at,
                        d.dead_at, d.dead_class, d.dead_reason, d.resolution, d.fallback_of, d.result,
                        (SELECT l.crm_id FROM crm_link l
                          WHERE l.target = d.target AND l.external_id = e.source || ':' || e.source_ref)
                   FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                  WHERE d.event_id = $1 ORDER BY d.step_index",
            )
            .bind(event_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read the lead's steps")?;
            let json = |s: &str| serde_json::from_str(s).unwrap_or(serde_json::Value::Null);
            let steps = steps
                .into_iter()
                .map(|s| {
                    let answered = s.12.as_deref().map(json).and_then(|r| match r.get("crm_id") {
                        Some(serde_json::Value::String(id)) => Some(id.clone()),
                        Some(serde_json::Value::Number(id)) => Some(id.to_string()),
                        _ => None,
                    });
                    let reported = s
                        .12
                        .as_deref()
                        .map(json)
                        .and_then(|r| r.get("reported").and_then(serde_json::Value::as_str).map(str::to_string))
                        .filter(|_| s.3 == "reported");
                    Ok(LeadStep {
                        delivery_id: s.0,
                        step_index: s.1,
                        target: s.2,
                        state: s.3,
                        reported,
                        attempts: s.4,
                        next_attempt_at: s.5.map(from_ms),
                        delivered_at: s.6.map(from_ms),
                        dead_at: s.7.map(from_ms),
                        dead_class: s.8.as_deref().map(decode).transpose()?,
                        dead_reason: s.9,
                        resolution: s.10,
                        fallback_of: s.11,
                        crm_id: answered.or(s.13),
                        attempts_timeline: Vec::new(),
                        replays: Vec::new(),
                    })
                })
                .collect::<anyhow::Result<Vec<LeadStep>>>()?;
            let count = |f: &dyn Fn(&LeadStep) -> bool| steps.iter().filter(|s| f(s)).count() as i64;
            let status = LeadStatus::of(
                steps.len() as i64,
                count(&|s| s.state == "dead" && s.resolution.as_deref() == Some("open")),
                count(&|s| matches!(s.state.as_str(), "waiting" | "pending" | "running")),
                count(&|s| s.state == "dead" && s.resolution.as_deref() != Some("open")),
            );
            Ok(Some(LeadRecord {
                event_id: e.0,
                source: e.1,
                source_ref: e.2,
                received_at: from_ms(e.3),
                via: e.4,
                revision: e.5,
                revised_at: e.6.map(from_ms),
                lead_at: e.7.map(from_ms),
                payload: json(&e.8),
                original_payload: e.9.as_deref().map(json),
                purged_at: e.10.map(from_ms),
                status,
                steps,
                // Read by `Store::lead_story`, like the steps' attempts.
                fixes: Vec::new(),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_queries_and_short_numbers_are_not_looked_for_inside_the_data() {
        assert!(substring_worthy("eve"));
        assert!(substring_worthy("2345"));
        assert!(!substring_worthy("ev"));
        assert!(!substring_worthy("123"));
        assert!(!substring_worthy("#12"));
        assert!(substring_worthy("a12"));
    }

    #[test]
    fn a_phone_fragment_is_its_digits_without_the_trunk_zero() {
        assert_eq!(phone_digits("0151 234"), Some("151234".into()));
        assert_eq!(phone_digits("+49 (151) 234-5"), Some("491512345".into()));
        assert_eq!(phone_digits("123"), None);
        assert_eq!(phone_digits("eve@example.com"), None);
        assert_eq!(phone_digits("lead-1234"), None);
    }

    #[test]
    fn like_wildcards_in_a_query_are_taken_literally() {
        assert_eq!(contains_pattern("a_b%c\\"), "%a\\_b\\%c\\\\%");
    }
}
