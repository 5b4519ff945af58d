//! Dead letters: the `dead` deliveries, readable — why (class, HTTP status, the CRM's message and field),
//! how many attempts, when — with filters and each one's attempt timeline.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{from_ms, ms, Store};

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct DeadLetter {
    pub delivery_id: i64,
    pub event_id: i64,
    pub source: String,
    pub source_ref: String,
    pub target: String,
    pub step_index: i64,
    pub class: String,
    pub http_status: Option<i64>,
    /// The CRM's own message where it gave one, and what Leadline concluded.
    pub reason: String,
    /// The reason with lead-specific values masked: what dead letters are grouped by.
    pub cause: String,
    /// The field the CRM blamed, if it named one.
    pub field: Option<String>,
    pub attempts: i64,
    pub received_at: DateTime<Utc>,
    /// When it was dead-lettered (the time of its last attempt).
    pub dead_at: DateTime<Utc>,
    pub resolution: String,
    /// Who resolved it by hand (discarded, fixed in the CRM), when and why.
    pub resolved_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution_note: Option<String>,
    /// The lead's data was purged (retention): it can no longer be replayed.
    pub purged: bool,
    /// A running replay has it queued (not sent back yet).
    pub queued_in_replay: Option<i64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(default)]
pub struct DeadLetterFilter {
    pub class: Option<String>,
    pub source: Option<String>,
    pub target: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// Matched against the reason, the source's event id and the field.
    pub text: Option<String>,
    /// The HTTP status of the last attempt.
    pub http_status: Option<i64>,
    /// Exactly this cause (a group).
    pub cause: Option<String>,
    /// A field of the lead: a top-level key (`email`) or a JSON pointer (`/lead/email`)…
    pub lead_field: Option<String>,
    /// …whose value contains this (case-insensitive), e.g. `@gmail.com` or a form id.
    pub lead_value: Option<String>,
    /// `open` (default), `all`, or one resolution.
    pub resolution: Option<String>,
    pub limit: Option<u32>,
    /// Page: only dead letters with a smaller delivery id.
    pub before_id: Option<i64>,
}

/// Dead letters with the same class, target and cause: one problem, however many leads it hit.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct DeadLetterGroup {
    pub class: String,
    pub target: String,
    pub cause: String,
    pub count: i64,
    pub http_status: Option<i64>,
    pub first_dead_at: DateTime<Utc>,
    pub last_dead_at: DateTime<Utc>,
    /// One of them, to open as an example.
    pub example_id: i64,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct Attempt {
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub http_status: Option<i64>,
    pub outcome: String,
    pub class: Option<String>,
    pub reason: String,
    pub response_excerpt: Option<String>,
    pub trigger: String,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct DeadLetterDetail {
    #[serde(flatten)]
    pub letter: DeadLetter,
    #[ts(type = "unknown")]
    pub payload: serde_json::Value,
    /// The lead as received, when it was fixed since.
    #[ts(type = "unknown")]
    pub original_payload: Option<serde_json::Value>,
    pub attempts_timeline: Vec<Attempt>,
    pub fixes: Vec<PayloadFix>,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct PayloadFix {
    pub at: DateTime<Utc>,
    pub actor: String,
    pub reason: String,
    #[ts(type = "unknown")]
    pub operation: serde_json::Value,
    #[ts(type = "unknown")]
    pub before: serde_json::Value,
    #[ts(type = "unknown")]
    pub after: serde_json::Value,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    event_id: i64,
    source: String,
    source_ref: String,
    target: String,
    step_index: i64,
    dead_class: Option<String>,
    dead_status: Option<i64>,
    dead_reason: Option<String>,
    dead_cause: Option<String>,
    dead_field: Option<String>,
    attempts: i64,
    received_at: i64,
    dead_at: Option<i64>,
    resolution: Option<String>,
    resolved_by: Option<String>,
    resolved_at: Option<i64>,
    resolution_note: Option<String>,
    purged_at: Option<i64>,
    queued_in_replay: Option<i64>,
}

/// Dead letters queued in a running or paused replay and not sent back yet: not eligible for another one.
pub const QUEUED_IN_REPLAY: &str = "(SELECT ri.replay_id FROM replay_item ri JOIN replay r ON r.id = ri.replay_id
     WHERE ri.delivery_id = d.id AND ri.requeued_at IS NULL AND r.status IN ('running', 'paused') LIMIT 1)";

fn select() -> String {
    format!(
        "SELECT d.id, d.event_id, e.source, e.source_ref, d.target, d.step_index, d.dead_class, d.dead_status,
            d.dead_reason, d.dead_cause, d.dead_field, d.attempts, e.received_at, d.dead_at, d.resolution,
            d.resolved_by, d.resolved_at, d.resolution_note, e.purged_at, {QUEUED_IN_REPLAY} AS queued_in_replay
       FROM delivery d JOIN inbound_event e ON e.id = d.event_id"
    )
}

fn to_letter(r: Row) -> DeadLetter {
    let reason = r.dead_reason.unwrap_or_default();
    DeadLetter {
        delivery_id: r.id,
        event_id: r.event_id,
        source: r.source,
        source_ref: r.source_ref,
        target: r.target,
        step_index: r.step_index,
        class: r.dead_class.unwrap_or_default(),
        http_status: r.dead_status,
        cause: r.dead_cause.unwrap_or_else(|| reason.clone()),
        reason,
        field: r.dead_field,
        attempts: r.attempts,
        received_at: from_ms(r.received_at),
        dead_at: from_ms(r.dead_at.unwrap_or(0)),
        resolution: r.resolution.unwrap_or_else(|| "open".into()),
        resolved_by: r.resolved_by,
        resolved_at: r.resolved_at.map(from_ms),
        resolution_note: r.resolution_note,
        purged: r.purged_at.is_some(),
        queued_in_replay: r.queued_in_replay,
    }
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

/// Appends the WHERE clause of `filter` (over `delivery d JOIN inbound_event e`) to `q`.
pub fn push_where(q: &mut sqlx::QueryBuilder<'_, sqlx::Sqlite>, filter: &DeadLetterFilter) {
    q.push(" WHERE d.state = 'dead'");
    match filter.resolution.as_deref().unwrap_or("open") {
        "all" => {}
        r => {
            q.push(" AND d.resolution = ").push_bind(r.to_string());
        }
    }
    if let Some(c) = &filter.class {
        q.push(" AND d.dead_class = ").push_bind(c.clone());
    }
    if let Some(s) = &filter.source {
        q.push(" AND e.source = ").push_bind(s.clone());
    }
    if let Some(t) = &filter.target {
        q.push(" AND d.target = ").push_bind(t.clone());
    }
    if let Some(since) = filter.since {
        q.push(" AND d.dead_at >= ").push_bind(ms(since));
    }
    if let Some(until) = filter.until {
        q.push(" AND d.dead_at < ").push_bind(ms(until));
    }
    if let Some(text) = filter.text.as_deref().filter(|t| !t.trim().is_empty()) {
        let like = format!("%{}%", escape_like(text.trim()));
        q.push(" AND (d.dead_reason LIKE ")
            .push_bind(like.clone())
            .push(" ESCAPE '\\' OR e.source_ref LIKE ")
            .push_bind(like.clone())
            .push(" ESCAPE '\\' OR d.dead_field LIKE ")
            .push_bind(like)
            .push(" ESCAPE '\\')");
    }
    if let Some(status) = filter.http_status {
        q.push(" AND d.dead_status = ").push_bind(status);
    }
    if let Some(cause) = &filter.cause {
        q.push(" AND d.dead_cause = ").push_bind(cause.clone());
    }
    if let (Some(field), Some(value)) = (&filter.lead_field, &filter.lead_value) {
        if let Some(path) = json_path(field) {
            let like = format!("%{}%", escape_like(value.trim()));
            q.push(" AND json_extract(e.payload, ")
                .push_bind(path)
                .push(") LIKE ")
                .push_bind(like)
                .push(" ESCAPE '\\'");
        }
    }
    if let Some(before) = filter.before_id {
        q.push(" AND d.id < ").push_bind(before);
    }
}

fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// A lead field as an SQLite JSON path: `email` → `$.email`, `/lead/email` → `$.lead.email`, `/items/0` →
/// `$.items[0]`. `None` when a part is not a plain name or index.
pub fn json_path(field: &str) -> Option<String> {
    let field = field.trim();
    let parts: Vec<&str> = if let Some(p) = field.strip_prefix('/') { p.split('/').collect() } else { vec![field] };
    let mut path = String::from("$");
    for part in parts {
        if part.is_empty() || !part.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') {
            return None;
        }
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
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(select());
    push_where(&mut q, filter);
    q.push(" ORDER BY d.id DESC LIMIT ").push_bind(i64::from(filter.limit.unwrap_or(100).min(1000)));
    let rows: Vec<Row> = q.build_query_as().fetch_all(store.read_pool()).await.context("cannot list dead letters")?;
    Ok(rows.into_iter().map(to_letter).collect())
}

/// Whether `filter` only looks at what `dead_letter_tally` is keyed by (class, target, cause, HTTP status,
/// source, resolution): then counts come from the tally instead of a scan of the dead letters.
pub fn tally_answers(filter: &DeadLetterFilter) -> bool {
    filter.since.is_none()
        && filter.until.is_none()
        && filter.text.as_deref().is_none_or(|t| t.trim().is_empty())
        && (filter.lead_field.is_none()
            || filter.lead_value.is_none()
            || filter.lead_field.as_deref().and_then(json_path).is_none())
        && filter.before_id.is_none()
}

/// Appends the conditions of `filter` over `dead_letter_tally` (alias `t`), after a `WHERE`. Only meaningful when
/// [`tally_answers`] holds. `resolution`: `None` for every resolution.
pub fn push_tally_where(
    q: &mut sqlx::QueryBuilder<'_, sqlx::Sqlite>,
    filter: &DeadLetterFilter,
    resolution: Option<&str>,
) {
    q.push(" t.n != 0");
    if let Some(r) = resolution {
        q.push(" AND t.resolution = ").push_bind(r.to_string());
    }
    if let Some(c) = &filter.class {
        q.push(" AND t.class = ").push_bind(c.clone());
    }
    if let Some(s) = &filter.source {
        q.push(" AND t.source = ").push_bind(s.clone());
    }
    if let Some(t) = &filter.target {
        q.push(" AND t.target = ").push_bind(t.clone());
    }
    if let Some(status) = filter.http_status {
        q.push(" AND t.status = ").push_bind(status);
    }
    if let Some(cause) = &filter.cause {
        q.push(" AND t.cause_null = 0 AND t.cause = ").push_bind(cause.clone());
    }
}

/// Dead letters matching `filter`, grouped by class, target and cause, largest group first.
pub async fn groups(store: &Store, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetterGroup>> {
    type G = (Option<String>, String, String, i64, Option<i64>, Option<i64>, Option<i64>, i64);
    let resolution = filter.resolution.as_deref().unwrap_or("open");
    // Counts from the kept tally; each group's first and last time and its example are index seeks. Filters the
    // tally or the seeks cannot answer (time, text, lead fields, the HTTP status or source of the seeks) scan.
    let by_tally =
        tally_answers(filter) && resolution != "all" && filter.http_status.is_none() && filter.source.is_none();
    let rows: Vec<G> = if by_tally {
        let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "SELECT g.class, g.target, g.cause, g.n, NULLIF(g.status, -1),
                    CASE WHEN g.cause_null THEN
                        (SELECT MIN(dead_at) FROM delivery WHERE state = 'dead' AND dead_class IS NULLIF(g.class, '')
                            AND target = g.target AND dead_cause IS NULL AND resolution = g.resolution)
                    ELSE
                        (SELECT MIN(dead_at) FROM delivery WHERE state = 'dead' AND dead_class IS NULLIF(g.class, '')
                            AND target = g.target AND dead_cause = g.cause AND resolution = g.resolution) END,
                    CASE WHEN g.cause_null THEN
                        (SELECT MAX(dead_at) FROM delivery WHERE state = 'dead' AND dead_class IS NULLIF(g.class, '')
                            AND target = g.target AND dead_cause IS NULL AND resolution = g.resolution)
                    ELSE
                        (SELECT MAX(dead_at) FROM delivery WHERE state = 'dead' AND dead_class IS NULLIF(g.class, '')
                            AND target = g.target AND dead_cause = g.cause AND resolution = g.resolution) END,
                    CASE WHEN g.cause_null THEN
                        (SELECT MAX(id) FROM delivery WHERE state = 'dead' AND dead_class IS NULLIF(g.class, '')
                            AND target = g.target AND dead_cause IS NULL AND resolution = g.resolution)
                    ELSE
                        (SELECT MAX(id) FROM delivery WHERE state = 'dead' AND dead_class IS NULLIF(g.class, '')
                            AND target = g.target AND dead_cause = g.cause AND resolution = g.resolution) END
               FROM (SELECT t.class, t.target, t.cause, t.cause_null, t.resolution, SUM(t.n) AS n,
                            MAX(t.status) AS status
                       FROM dead_letter_tally t WHERE",
        );
        push_tally_where(&mut q, filter, Some(resolution));
        q.push(
            " GROUP BY t.class, t.target, t.cause, t.cause_null, t.resolution HAVING SUM(t.n) > 0
              ORDER BY SUM(t.n) DESC, t.class, t.target, t.cause LIMIT 200) g ORDER BY g.n DESC, g.class, g.target, g.cause",
        );
        q.build_query_as().fetch_all(store.read_pool()).await.context("cannot group dead letters")?
    } else {
        // The lead's table is joined only when the filter looks at it, so grouping reads one covering index.
        let needs_lead = filter.source.is_some() || filter.text.is_some() || filter.lead_field.is_some();
        let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(format!(
            "SELECT d.dead_class, d.target, COALESCE(d.dead_cause, ''), COUNT(*), MAX(d.dead_status),
                    MIN(d.dead_at), MAX(d.dead_at), MAX(d.id)
               FROM delivery d{}",
            if needs_lead { " JOIN inbound_event e ON e.id = d.event_id" } else { "" }
        ));
        push_where(&mut q, filter);
        q.push(" GROUP BY d.dead_class, d.target, d.dead_cause ORDER BY COUNT(*) DESC LIMIT 200");
        q.build_query_as().fetch_all(store.read_pool()).await.context("cannot group dead letters")?
    };
    Ok(rows
        .into_iter()
        .map(|(class, target, cause, count, http_status, first, last, example)| DeadLetterGroup {
            class: class.unwrap_or_default(),
            target,
            cause,
            count,
            http_status,
            first_dead_at: from_ms(first.unwrap_or(0)),
            last_dead_at: from_ms(last.unwrap_or(0)),
            example_id: example,
        })
        .collect())
}

/// One dead letter (or any delivery) with its payload, fixes and attempt timeline; `None` when there is no such
/// id.
pub async fn detail(store: &Store, delivery_id: i64) -> anyhow::Result<Option<DeadLetterDetail>> {
    let sql = format!("{} WHERE d.id = ?", select());
    let row: Option<Row> = sqlx::query_as(&sql)
        .bind(delivery_id)
        .fetch_optional(store.read_pool())
        .await
        .context("cannot read dead letter")?;
    let Some(row) = row else { return Ok(None) };
    let letter = to_letter(row);
    let (payload, original): (String, Option<String>) =
        sqlx::query_as("SELECT payload, original_payload FROM inbound_event WHERE id = ?")
            .bind(letter.event_id)
            .fetch_one(store.read_pool())
            .await
            .context("cannot read event payload")?;
    let attempts = attempts(store, delivery_id).await?;
    let fixes: Vec<(i64, String, String, String, String, String)> = sqlx::query_as(
        "SELECT at, actor, reason, operation, before, after FROM payload_fix WHERE event_id = ? ORDER BY id",
    )
    .bind(letter.event_id)
    .fetch_all(store.read_pool())
    .await
    .context("cannot read payload fixes")?;
    let json = |s: &str| serde_json::from_str(s).unwrap_or(serde_json::Value::Null);
    Ok(Some(DeadLetterDetail {
        letter,
        payload: json(&payload),
        original_payload: original.as_deref().map(json),
        attempts_timeline: attempts,
        fixes: fixes
            .into_iter()
            .map(|(at, actor, reason, op, before, after)| PayloadFix {
                at: from_ms(at),
                actor,
                reason,
                operation: json(&op),
                before: json(&before),
                after: json(&after),
            })
            .collect(),
    }))
}

/// The attempts of one delivery, oldest first.
pub async fn attempts(store: &Store, delivery_id: i64) -> anyhow::Result<Vec<Attempt>> {
    type A = (i64, i64, Option<i64>, String, Option<String>, String, Option<String>, String);
    let rows: Vec<A> = sqlx::query_as(
        "SELECT started_at, duration_ms, http_status, outcome, class, reason, response_excerpt, trigger
           FROM attempt WHERE delivery_id = ? ORDER BY id",
    )
    .bind(delivery_id)
    .fetch_all(store.read_pool())
    .await
    .context("cannot read attempts")?;
    Ok(rows
        .into_iter()
        .map(|a| Attempt {
            started_at: from_ms(a.0),
            duration_ms: a.1,
            http_status: a.2,
            outcome: a.3,
            class: a.4,
            reason: a.5,
            response_excerpt: a.6,
            trigger: a.7,
        })
        .collect())
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
