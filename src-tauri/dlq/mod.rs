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
    /// The field the CRM blamed, if it named one.
    pub field: Option<String>,
    pub attempts: i64,
    pub received_at: DateTime<Utc>,
    /// When it was dead-lettered (the time of its last attempt).
    pub dead_at: DateTime<Utc>,
    pub resolution: String,
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
    /// `open` (default), `all`, or one resolution.
    pub resolution: Option<String>,
    pub limit: Option<u32>,
    /// Page: only dead letters with a smaller delivery id.
    pub before_id: Option<i64>,
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
    pub attempts_timeline: Vec<Attempt>,
}

type Row = (
    i64,
    i64,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    i64,
    i64,
    Option<i64>,
    Option<String>,
);

const SELECT: &str =
    "SELECT d.id, d.event_id, e.source, e.source_ref, d.target, d.step_index, d.dead_class, d.dead_status,
        d.dead_reason, d.dead_field, d.attempts, e.received_at, d.dead_at, d.resolution
   FROM delivery d JOIN inbound_event e ON e.id = d.event_id";

fn to_letter(r: Row) -> DeadLetter {
    DeadLetter {
        delivery_id: r.0,
        event_id: r.1,
        source: r.2,
        source_ref: r.3,
        target: r.4,
        step_index: r.5,
        class: r.6.unwrap_or_default(),
        http_status: r.7,
        reason: r.8.unwrap_or_default(),
        field: r.9,
        attempts: r.10,
        received_at: from_ms(r.11),
        dead_at: from_ms(r.12.unwrap_or(0)),
        resolution: r.13.unwrap_or_else(|| "open".into()),
    }
}

/// Appends the WHERE clause of `filter` (over `delivery d JOIN inbound_event e`) to `q`.
fn push_where(q: &mut sqlx::QueryBuilder<'_, sqlx::Sqlite>, filter: &DeadLetterFilter) {
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
        let like = format!("%{}%", text.trim().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        q.push(" AND (d.dead_reason LIKE ")
            .push_bind(like.clone())
            .push(" ESCAPE '\\' OR e.source_ref LIKE ")
            .push_bind(like.clone())
            .push(" ESCAPE '\\' OR d.dead_field LIKE ")
            .push_bind(like)
            .push(" ESCAPE '\\')");
    }
    if let Some(before) = filter.before_id {
        q.push(" AND d.id < ").push_bind(before);
    }
}

/// Dead letters matching `filter`, newest first.
pub async fn list(store: &Store, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetter>> {
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(SELECT);
    push_where(&mut q, filter);
    q.push(" ORDER BY d.id DESC LIMIT ").push_bind(i64::from(filter.limit.unwrap_or(100).min(1000)));
    let rows: Vec<Row> = q.build_query_as().fetch_all(store.read_pool()).await.context("cannot list dead letters")?;
    Ok(rows.into_iter().map(to_letter).collect())
}

/// Every dead letter matching `filter` (no page limit): delivery id, target, when the lead was received.
pub async fn matching(store: &Store, filter: &DeadLetterFilter) -> anyhow::Result<Vec<(i64, String, DateTime<Utc>)>> {
    let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
        "SELECT d.id, d.target, e.received_at FROM delivery d JOIN inbound_event e ON e.id = d.event_id",
    );
    push_where(&mut q, filter);
    q.push(" ORDER BY d.id");
    let rows: Vec<(i64, String, i64)> =
        q.build_query_as().fetch_all(store.read_pool()).await.context("cannot select dead letters")?;
    Ok(rows.into_iter().map(|(id, t, at)| (id, t, from_ms(at))).collect())
}

/// One dead letter (or any delivery) with its payload and attempt timeline; `None` when there is no such id.
pub async fn detail(store: &Store, delivery_id: i64) -> anyhow::Result<Option<DeadLetterDetail>> {
    let sql = format!("{SELECT} WHERE d.id = ?");
    let row: Option<Row> = sqlx::query_as(&sql)
        .bind(delivery_id)
        .fetch_optional(store.read_pool())
        .await
        .context("cannot read dead letter")?;
    let Some(row) = row else { return Ok(None) };
    let letter = to_letter(row);
    let (payload,): (String,) = sqlx::query_as("SELECT payload FROM inbound_event WHERE id = ?")
        .bind(letter.event_id)
        .fetch_one(store.read_pool())
        .await
        .context("cannot read event payload")?;
    let attempts = attempts(store, delivery_id).await?;
    Ok(Some(DeadLetterDetail {
        letter,
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null),
        attempts_timeline: attempts,
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
