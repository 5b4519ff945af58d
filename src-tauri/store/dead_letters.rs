//! Dead letters (`delivery` rows in state `dead` with their lead): the list and its filters, grouping by cause,
//! the counts the kept `dead_letter_tally` answers, one dead letter's detail and attempts, resolving by hand and
//! purging the data of resolved leads.
//!
//! A [`DeadLetterFilter`] is turned into SQL only here ([`push_where`], [`push_tally_where`]); replay's
//! operations (`replays.rs`, `previews.rs`) use the same builders. Dynamic SQL is built with [`Sql`], which numbers its
//! placeholders and knows the backend's dialect (a list of ids is `json_each($n)` on SQLite, `= ANY($n)` on
//! PostgreSQL; a lead field is `json_extract` on SQLite, `#>>` on PostgreSQL).

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{from_ms, ms, Store};
use crate::model::{decode, ErrorClass, Resolution, ResolutionFilter};

// ---------------------------------------------------------------------------------------------------------------
// Types

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct DeadLetter {
    pub delivery_id: i64,
    pub event_id: i64,
    pub source: String,
    pub source_ref: String,
    pub target: String,
    pub step_index: i64,
    /// Why it died; `null` only when the detail of a step that is not dead is read.
    pub class: Option<ErrorClass>,
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
    pub resolution: Resolution,
    /// Who resolved it by hand (discarded, fixed in the CRM), when and why.
    pub resolved_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolution_note: Option<String>,
    /// The lead's data was purged (retention): it can no longer be replayed.
    pub purged: bool,
    /// A running replay has it queued (not sent back yet).
    pub queued_in_replay: Option<i64>,
    /// A person corrected the lead's data (a field fix or an edit): what is sent now is not what was received.
    pub fixed: bool,
}

/// Which dead letters: every condition given must hold.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(default)]
pub struct DeadLetterFilter {
    pub class: Option<ErrorClass>,
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
    pub resolution: Option<ResolutionFilter>,
    pub limit: Option<u32>,
    /// Page: only dead letters with a smaller delivery id.
    pub before_id: Option<i64>,
}

impl DeadLetterFilter {
    /// Whether the filter only looks at what `dead_letter_tally` is keyed by (class, target, cause, HTTP status,
    /// source, resolution): then counts come from the tally instead of a scan of the dead letters.
    pub fn tally_answers(&self) -> bool {
        self.since.is_none()
            && self.until.is_none()
            && self.text.as_deref().is_none_or(|t| t.trim().is_empty())
            && (self.lead_field.is_none()
                || self.lead_value.is_none()
                || self.lead_field.as_deref().and_then(lead_field_path).is_none())
            && self.before_id.is_none()
    }

    /// The same filter over every resolution, unpaged: a selection's candidates.
    pub(super) fn any_resolution(&self) -> DeadLetterFilter {
        DeadLetterFilter { resolution: Some(ResolutionFilter::All), limit: None, before_id: None, ..self.clone() }
    }
}

/// The parts of a lead field: `email` → `["email"]`, `/lead/items/0` → `["lead", "items", "0"]`. `None` when a
/// part is not a plain name or index.
pub fn lead_field_path(field: &str) -> Option<Vec<String>> {
    let field = field.trim();
    let parts: Vec<&str> = if let Some(p) = field.strip_prefix('/') { p.split('/').collect() } else { vec![field] };
    parts
        .into_iter()
        .map(|part| {
            (!part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-'))
                .then(|| part.to_string())
        })
        .collect()
}

/// Dead letters with the same class, target and cause: one problem, however many leads it hit.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct DeadLetterGroup {
    pub class: ErrorClass,
    pub target: String,
    pub cause: String,
    pub count: i64,
    pub http_status: Option<i64>,
    pub first_dead_at: DateTime<Utc>,
    pub last_dead_at: DateTime<Utc>,
    /// One of them, to open as an example.
    pub example_id: i64,
    /// The field the CRM blamed (in the example), if it named one.
    pub field: Option<String>,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct Attempt {
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub http_status: Option<i64>,
    pub outcome: String,
    pub class: Option<ErrorClass>,
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

/// What to act on: explicit dead letters (further narrowed by the filter, if any), or all that match a filter.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(default)]
pub struct ReplaySelection {
    pub ids: Option<Vec<i64>>,
    pub filter: Option<DeadLetterFilter>,
}

impl ReplaySelection {
    /// Nothing chosen: no ids (or an empty list) and no filter.
    pub fn is_empty(&self) -> bool {
        match (&self.ids, &self.filter) {
            (Some(ids), _) => ids.is_empty(),
            (None, filter) => filter.is_none(),
        }
    }

    /// The selection as it stood at `as_of`: its filter matches only dead letters parked before then. A preview
    /// says when it counted (`as_of`), and acting on the selection pinned to it acts on exactly what the person
    /// saw and confirmed, while new dead letters of the same cause go on arriving (they stay in the list for the
    /// next look instead of making the confirmed count wrong). Explicit ids are fixed already.
    pub fn as_of(&self, as_of: DateTime<Utc>) -> ReplaySelection {
        let filter = self
            .filter
            .as_ref()
            .map(|f| DeadLetterFilter { until: Some(f.until.map_or(as_of, |until| until.min(as_of))), ..f.clone() });
        ReplaySelection { ids: self.ids.clone(), filter }
    }
}

/// How resolving by hand went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveOutcome {
    /// This many dead letters were resolved.
    Resolved(i64),
    /// The selection held `found` open dead letters, not the `expected` ones: nothing was changed.
    Changed { found: i64 },
}

// ---------------------------------------------------------------------------------------------------------------
// Dynamic SQL, numbered for both backends

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone)]
pub(super) enum Arg {
    Int(i64),
    Real(f64),
    Text(String),
    /// A list of ids: JSON text on SQLite (read with `json_each`), `BIGINT[]` on PostgreSQL.
    Ids(Vec<i64>),
    /// A list of names: JSON text on SQLite, `TEXT[]` on PostgreSQL.
    Texts(Vec<String>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Arg {
        Arg::Int(v)
    }
}
impl From<f64> for Arg {
    fn from(v: f64) -> Arg {
        Arg::Real(v)
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Arg {
        Arg::Text(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Arg {
        Arg::Text(v.to_string())
    }
}

/// SQL text with its arguments; each argument's placeholder is `$n`, numbered in order.
pub(super) struct Sql {
    pub dialect: Dialect,
    pub text: String,
    pub args: Vec<Arg>,
}

impl Sql {
    pub fn new(dialect: Dialect, text: &str) -> Sql {
        Sql { dialect, text: text.to_string(), args: Vec::new() }
    }

    pub fn push(&mut self, text: &str) -> &mut Sql {
        self.text.push_str(text);
        self
    }

    /// Appends the placeholder of a new argument.
    pub fn bind(&mut self, value: impl Into<Arg>) -> &mut Sql {
        self.args.push(value.into());
        let n = self.args.len();
        self.text.push_str(&format!("${n}"));
        self
    }

    /// Appends ` expr IN <ids>`.
    pub fn id_in(&mut self, expr: &str, ids: &[i64]) -> &mut Sql {
        self.args.push(Arg::Ids(ids.to_vec()));
        let n = self.args.len();
        match self.dialect {
            Dialect::Sqlite => self.text.push_str(&format!(" {expr} IN (SELECT value FROM json_each(${n}))")),
            Dialect::Postgres => self.text.push_str(&format!(" {expr} = ANY(${n})")),
        }
        self
    }
}

type LiteArgs<'q> = <sqlx::Sqlite as sqlx::Database>::Arguments<'q>;
type PgArgs<'q> = <sqlx::Postgres as sqlx::Database>::Arguments<'q>;

/// `sql` as a SQLite statement with its arguments bound.
pub(super) fn lite(sql: &Sql) -> sqlx::query::Query<'_, sqlx::Sqlite, LiteArgs<'_>> {
    let mut q = sqlx::query(&sql.text);
    for a in &sql.args {
        q = match a {
            Arg::Int(v) => q.bind(*v),
            Arg::Real(v) => q.bind(*v),
            Arg::Text(v) => q.bind(v.as_str()),
            Arg::Texts(v) => q.bind(serde_json::Value::from(v.clone()).to_string()),
            Arg::Ids(v) => q.bind(serde_json::Value::from(v.clone()).to_string()),
        };
    }
    q
}

pub(super) fn lite_as<O>(sql: &Sql) -> sqlx::query::QueryAs<'_, sqlx::Sqlite, O, LiteArgs<'_>>
where
    O: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>,
{
    let mut q = sqlx::query_as(&sql.text);
    for a in &sql.args {
        q = match a {
            Arg::Int(v) => q.bind(*v),
            Arg::Real(v) => q.bind(*v),
            Arg::Text(v) => q.bind(v.as_str()),
            Arg::Texts(v) => q.bind(serde_json::Value::from(v.clone()).to_string()),
            Arg::Ids(v) => q.bind(serde_json::Value::from(v.clone()).to_string()),
        };
    }
    q
}

/// `sql` as a PostgreSQL statement with its arguments bound.
pub(super) fn pg(sql: &Sql) -> sqlx::query::Query<'_, sqlx::Postgres, PgArgs<'_>> {
    let mut q = sqlx::query(&sql.text);
    for a in &sql.args {
        q = match a {
            Arg::Int(v) => q.bind(*v),
            Arg::Real(v) => q.bind(*v),
            Arg::Text(v) => q.bind(v.as_str()),
            Arg::Texts(v) => q.bind(v.clone()),
            Arg::Ids(v) => q.bind(v.clone()),
        };
    }
    q
}

pub(super) fn pg_as<O>(sql: &Sql) -> sqlx::query::QueryAs<'_, sqlx::Postgres, O, PgArgs<'_>>
where
    O: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
{
    let mut q = sqlx::query_as(&sql.text);
    for a in &sql.args {
        q = match a {
            Arg::Int(v) => q.bind(*v),
            Arg::Real(v) => q.bind(*v),
            Arg::Text(v) => q.bind(v.as_str()),
            Arg::Texts(v) => q.bind(v.clone()),
            Arg::Ids(v) => q.bind(v.clone()),
        };
    }
    q
}

/// Dead letters queued in a running or paused replay and not sent back yet: not eligible for another one.
pub(super) const QUEUED_IN_REPLAY: &str =
    "(SELECT ri.replay_id FROM replay_item ri JOIN replay r ON r.id = ri.replay_id
     WHERE ri.delivery_id = d.id AND ri.requeued_at IS NULL AND r.status IN ('running', 'paused') LIMIT 1)";

/// How many replays are running or paused.
/// Not null when a person corrected the lead's data (`original_payload` keeps what was received; a revision from
/// the sender clears it). An integer in both dialects, so one row type reads it.
pub(super) const FIXED_MARKER: &str = "CASE WHEN e.original_payload IS NULL THEN NULL ELSE e.id END";
pub(super) const ANY_REPLAY_ACTIVE: &str = "SELECT COUNT(*) FROM replay WHERE status IN ('running', 'paused')";

fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// `column LIKE pattern`, case-insensitive in both backends (SQLite's LIKE already is; PostgreSQL's is not).
fn push_like(q: &mut Sql, column: &str, pattern: String) {
    match q.dialect {
        Dialect::Sqlite => {
            q.push(column).push(" LIKE ").bind(pattern);
        }
        Dialect::Postgres => {
            q.push("lower(").push(column).push(") LIKE lower(").bind(pattern).push(")");
        }
    }
    q.push(" ESCAPE '\\'");
}

/// Appends the WHERE clause of `filter` (over `delivery d JOIN inbound_event e`).
pub(super) fn push_where(q: &mut Sql, filter: &DeadLetterFilter) {
    q.push(" WHERE d.state = 'dead'");
    if let Some(r) = filter.resolution.unwrap_or_default().resolution() {
        q.push(" AND d.resolution = ").bind(r.as_str());
    }
    if let Some(c) = &filter.class {
        q.push(" AND d.dead_class = ").bind(c.as_str());
    }
    if let Some(s) = &filter.source {
        q.push(" AND e.source = ").bind(s.as_str());
    }
    if let Some(t) = &filter.target {
        q.push(" AND d.target = ").bind(t.as_str());
    }
    if let Some(since) = filter.since {
        q.push(" AND d.dead_at >= ").bind(ms(since));
    }
    if let Some(until) = filter.until {
        q.push(" AND d.dead_at < ").bind(ms(until));
    }
    if let Some(text) = filter.text.as_deref().filter(|t| !t.trim().is_empty()) {
        let like = format!("%{}%", escape_like(text.trim()));
        q.push(" AND (");
        push_like(q, "d.dead_reason", like.clone());
        q.push(" OR ");
        push_like(q, "e.source_ref", like.clone());
        q.push(" OR ");
        push_like(q, "d.dead_field", like);
        q.push(")");
    }
    if let Some(status) = filter.http_status {
        q.push(" AND d.dead_status = ").bind(status);
    }
    if let Some(cause) = &filter.cause {
        q.push(" AND d.dead_cause = ").bind(cause.as_str());
    }
    if let (Some(field), Some(value)) = (&filter.lead_field, &filter.lead_value) {
        if let Some(parts) = lead_field_path(field) {
            let like = format!("%{}%", escape_like(value.trim()));
            q.push(" AND ");
            match q.dialect {
                Dialect::Sqlite => {
                    let mut path = String::from("$");
                    for part in &parts {
                        if part.chars().all(|c| c.is_ascii_digit()) {
                            path.push_str(&format!("[{part}]"));
                        } else {
                            path.push_str(&format!(".\"{part}\""));
                        }
                    }
                    q.push("json_extract(e.payload, ").bind(path).push(")");
                    q.push(" LIKE ").bind(like).push(" ESCAPE '\\'");
                }
                Dialect::Postgres => {
                    q.push("lower(CAST(e.payload AS jsonb) #>> ").bind(Arg::Texts(parts)).push(")");
                    q.push(" LIKE lower(").bind(like).push(") ESCAPE '\\'");
                }
            }
        }
    }
    if let Some(before) = filter.before_id {
        q.push(" AND d.id < ").bind(before);
    }
}

/// Appends the conditions of `filter` over `dead_letter_tally` (alias `t`), after a `WHERE`. Only meaningful when
/// [`DeadLetterFilter::tally_answers`] holds. `resolution`: `None` for every resolution.
pub(super) fn push_tally_where(q: &mut Sql, filter: &DeadLetterFilter, resolution: Option<Resolution>) {
    q.push(" t.n != 0");
    if let Some(r) = resolution {
        q.push(" AND t.resolution = ").bind(r.as_str());
    }
    if let Some(c) = &filter.class {
        q.push(" AND t.class = ").bind(c.as_str());
    }
    if let Some(s) = &filter.source {
        q.push(" AND t.source = ").bind(s.as_str());
    }
    if let Some(t) = &filter.target {
        q.push(" AND t.target = ").bind(t.as_str());
    }
    if let Some(status) = filter.http_status {
        q.push(" AND t.status = ").bind(status);
    }
    if let Some(cause) = &filter.cause {
        q.push(" AND t.cause_null = 0 AND t.cause = ").bind(cause.as_str());
    }
}

/// Appends `FROM … WHERE` for the selection's dead letters, whatever their resolution. The selection must not
/// be empty ([`ReplaySelection::is_empty`]).
pub(super) fn push_selection(q: &mut Sql, selection: &ReplaySelection) -> anyhow::Result<()> {
    q.push(" FROM delivery d JOIN inbound_event e ON e.id = d.event_id");
    match (&selection.ids, &selection.filter) {
        (Some(ids), _) if ids.is_empty() => anyhow::bail!("nothing selected"),
        (Some(ids), filter) => {
            push_where(q, &filter.clone().unwrap_or_default().any_resolution());
            q.push(" AND").id_in("d.id", ids);
        }
        (None, Some(filter)) => push_where(q, &filter.any_resolution()),
        (None, None) => anyhow::bail!("nothing selected"),
    }
    Ok(())
}

/// The SQL condition (over `d`, `e`) for an open dead letter not waiting in a running replay; with
/// `with_payload`, also one whose data was not purged (a replay needs it, resolving by hand does not).
pub(super) fn open_condition(check_queued: bool, with_payload: bool) -> String {
    let mut c = String::from("d.resolution = 'open'");
    if with_payload {
        c.push_str(" AND e.purged_at IS NULL");
    }
    if check_queued {
        c.push_str(&format!(" AND {QUEUED_IN_REPLAY} IS NULL"));
    }
    c
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
    fixed_marker: Option<i64>,
}

fn select() -> String {
    format!(
        "SELECT d.id, d.event_id, e.source, e.source_ref, d.target, d.step_index, d.dead_class, d.dead_status,
            d.dead_reason, d.dead_cause, d.dead_field, d.attempts, e.received_at, d.dead_at, d.resolution,
            d.resolved_by, d.resolved_at, d.resolution_note, e.purged_at, {QUEUED_IN_REPLAY} AS queued_in_replay,
            {FIXED_MARKER} AS fixed_marker
       FROM delivery d JOIN inbound_event e ON e.id = d.event_id"
    )
}

fn to_letter(r: Row) -> anyhow::Result<DeadLetter> {
    let reason = r.dead_reason.unwrap_or_default();
    Ok(DeadLetter {
        delivery_id: r.id,
        event_id: r.event_id,
        source: r.source,
        source_ref: r.source_ref,
        target: r.target,
        step_index: r.step_index,
        class: r.dead_class.as_deref().map(decode).transpose()?,
        http_status: r.dead_status,
        cause: r.dead_cause.unwrap_or_else(|| reason.clone()),
        reason,
        field: r.dead_field,
        attempts: r.attempts,
        received_at: from_ms(r.received_at),
        dead_at: from_ms(r.dead_at.unwrap_or(0)),
        resolution: r.resolution.as_deref().map(decode).transpose()?.unwrap_or(Resolution::Open),
        resolved_by: r.resolved_by,
        resolved_at: r.resolved_at.map(from_ms),
        resolution_note: r.resolution_note,
        purged: r.purged_at.is_some(),
        queued_in_replay: r.queued_in_replay,
        fixed: r.fixed_marker.is_some(),
    })
}

/// A dead letter's stored class: every dead letter has one.
fn dead_class(delivery_id: i64, stored: Option<&str>) -> anyhow::Result<ErrorClass> {
    match stored {
        Some(c) if !c.is_empty() => decode(c),
        _ => anyhow::bail!("unexpected value in the database: dead letter {delivery_id} has no class"),
    }
}

type GroupRow = (Option<String>, String, String, i64, Option<i64>, Option<i64>, Option<i64>, i64);
type AttemptRow = (i64, i64, Option<i64>, String, Option<String>, String, Option<String>, String);
type FixRow = (i64, String, String, String, String, String);

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

// ---------------------------------------------------------------------------------------------------------------
// Operations

impl Store {
    /// Dead letters matching `filter`, newest first (at most `filter.limit`, 100 by default, 1,000 at most).
    pub async fn dead_letters(&self, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetter>> {
        dispatch!(self, dead_letters(filter))
    }

    /// Dead letters matching `filter`, grouped by class, target and cause, largest group first (200 at most).
    pub async fn dead_letter_groups(&self, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetterGroup>> {
        dispatch!(self, dead_letter_groups(filter))
    }

    /// One dead letter (or any delivery) with its lead's data, fixes and attempt timeline; `None` when there is
    /// no such id.
    pub async fn dead_letter_detail(&self, delivery_id: i64) -> anyhow::Result<Option<DeadLetterDetail>> {
        dispatch!(self, dead_letter_detail(delivery_id))
    }

    /// The data fixes made to a lead (event), oldest first.
    pub async fn payload_fixes(&self, event_id: i64) -> anyhow::Result<Vec<PayloadFix>> {
        dispatch!(self, payload_fixes(event_id))
    }

    /// The attempts of one delivery, oldest first.
    pub async fn delivery_attempts(&self, delivery_id: i64) -> anyhow::Result<Vec<Attempt>> {
        dispatch!(self, delivery_attempts(delivery_id))
    }

    /// Marks the selection's open dead letters (not queued in a running replay) as resolved by hand with who,
    /// when and why, in one transaction; with `expected`, only if exactly that many match.
    pub async fn resolve_dead_letters(
        &self,
        selection: &ReplaySelection,
        resolution: Resolution,
        note: &str,
        actor: &str,
        expected: Option<i64>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<ResolveOutcome> {
        dispatch!(self, resolve_dead_letters(selection, resolution, note, actor, expected, now))
    }

    /// Purges the data of (at most 10,000) leads whose dead letters were resolved by hand before `cutoff` and that
    /// have nothing left to deliver: the payload becomes `{}`, fixes lose their before/after values; rows,
    /// attempts and statistics stay. Returns how many leads were purged.
    pub async fn purge_resolved_leads(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>) -> anyhow::Result<u64> {
        dispatch!(self, purge_resolved_leads(cutoff, now))
    }

    /// Purges the data of (at most 10,000) leads received before `cutoff` whose every step was delivered before
    /// it, oldest first: payloads, response excerpts and fixes' values go; each CRM answer keeps only its ids;
    /// rows, attempts, statistics and CRM links stay. Returns how many leads were purged.
    pub async fn purge_delivered_leads(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>) -> anyhow::Result<u64> {
        dispatch!(self, purge_delivered_leads(cutoff, now))
    }

    /// The open dead letters with their data the selection holds now: (delivery id, event id), by delivery id.
    pub async fn selected_open_events(&self, selection: &ReplaySelection) -> anyhow::Result<Vec<(i64, i64)>> {
        dispatch!(self, selected_open_events(selection))
    }
}

backends! {
    shared {
        pub async fn dead_letters(db: &Db, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetter>> {
            let mut q = Sql::new(DIALECT, &select());
            push_where(&mut q, filter);
            q.push(" ORDER BY d.id DESC LIMIT ").bind(i64::from(filter.limit.unwrap_or(100).min(1000)));
            let rows: Vec<Row> = built_as(&q).fetch_all(db.reader()).await.context("cannot list dead letters")?;
            rows.into_iter().map(to_letter).collect()
        }

        pub async fn dead_letter_groups(db: &Db, filter: &DeadLetterFilter) -> anyhow::Result<Vec<DeadLetterGroup>> {
            let resolution = filter.resolution.unwrap_or_default().resolution();
            // Counts from the kept tally; each group's first and last time and its example are index seeks.
            // Filters the tally or the seeks cannot answer (time, text, lead fields, the HTTP status or source of
            // the seeks) scan.
            let by_tally = filter.tally_answers()
                && resolution.is_some()
                && filter.http_status.is_none()
                && filter.source.is_none();
            let rows: Vec<GroupRow> = if by_tally {
                let seek = |agg: &str| {
                    format!(
                        "CASE WHEN g.cause_null != 0 THEN
                            (SELECT {agg} FROM delivery WHERE state = 'dead'
                                AND dead_class IS NOT DISTINCT FROM NULLIF(g.class, '')
                                AND target = g.target AND dead_cause IS NULL AND resolution = g.resolution)
                        ELSE
                            (SELECT {agg} FROM delivery WHERE state = 'dead'
                                AND dead_class IS NOT DISTINCT FROM NULLIF(g.class, '')
                                AND target = g.target AND dead_cause = g.cause AND resolution = g.resolution) END"
                    )
                };
                let mut q = Sql::new(
                    DIALECT,
                    &format!(
                        "SELECT g.class, g.target, g.cause, g.n, NULLIF(g.status, -1), {}, {}, {}
                           FROM (SELECT t.class, t.target, t.cause, t.cause_null, t.resolution,
                                        CAST(SUM(t.n) AS BIGINT) AS n, MAX(t.status) AS status
                                   FROM dead_letter_tally t WHERE",
                        seek("MIN(dead_at)"),
                        seek("MAX(dead_at)"),
                        seek("MAX(id)")
                    ),
                );
                push_tally_where(&mut q, filter, resolution);
                q.push(
                    " GROUP BY t.class, t.target, t.cause, t.cause_null, t.resolution HAVING SUM(t.n) > 0
                      ORDER BY SUM(t.n) DESC, t.class, t.target, t.cause LIMIT 200) g
                      ORDER BY g.n DESC, g.class, g.target, g.cause",
                );
                built_as(&q).fetch_all(db.reader()).await.context("cannot group dead letters")?
            } else {
                // The lead's table is joined only when the filter looks at it, so grouping reads one covering index.
                let needs_lead = filter.source.is_some() || filter.text.is_some() || filter.lead_field.is_some();
                let mut q = Sql::new(
                    DIALECT,
                    &format!(
                        "SELECT d.dead_class, d.target, COALESCE(d.dead_cause, ''), COUNT(*), MAX(d.dead_status),
                                MIN(d.dead_at), MAX(d.dead_at), MAX(d.id)
                           FROM delivery d{}",
                        if needs_lead { " JOIN inbound_event e ON e.id = d.event_id" } else { "" }
                    ),
                );
                push_where(&mut q, filter);
                q.push(" GROUP BY d.dead_class, d.target, d.dead_cause ORDER BY COUNT(*) DESC LIMIT 200");
                built_as(&q).fetch_all(db.reader()).await.context("cannot group dead letters")?
            };
            // The field each group's example blamed: one seek by primary key for all (at most 200) groups.
            let mut fields = std::collections::HashMap::new();
            if !rows.is_empty() {
                let mut q = Sql::new(DIALECT, "SELECT id, dead_field FROM delivery WHERE dead_field IS NOT NULL AND id IN (");
                for (i, row) in rows.iter().enumerate() {
                    if i > 0 {
                        q.push(", ");
                    }
                    q.bind(row.7);
                }
                q.push(")");
                let found: Vec<(i64, String)> =
                    built_as(&q).fetch_all(db.reader()).await.context("cannot read the groups' fields")?;
                fields.extend(found);
            }
            rows.into_iter()
                .map(|(class, target, cause, count, http_status, first, last, example)| {
                    Ok(DeadLetterGroup {
                        class: dead_class(example, class.as_deref())?,
                        target,
                        cause,
                        count,
                        http_status,
                        first_dead_at: from_ms(first.unwrap_or(0)),
                        last_dead_at: from_ms(last.unwrap_or(0)),
                        example_id: example,
                        field: fields.remove(&example),
                    })
                })
                .collect()
        }

        pub async fn dead_letter_detail(db: &Db, delivery_id: i64) -> anyhow::Result<Option<DeadLetterDetail>> {
            let sql = format!("{} WHERE d.id = $1", select());
            let row: Option<Row> = sqlx::query_as(&sql)
                .bind(delivery_id)
                .fetch_optional(db.reader())
                .await
                .context("cannot read dead letter")?;
            let Some(row) = row else { return Ok(None) };
            let letter = to_letter(row)?;
            let (payload, original): (String, Option<String>) =
                sqlx::query_as("SELECT payload, original_payload FROM inbound_event WHERE id = $1")
                    .bind(letter.event_id)
                    .fetch_one(db.reader())
                    .await
                    .context("cannot read event payload")?;
            let attempts_timeline = delivery_attempts(db, delivery_id).await?;
            let fixes = payload_fixes(db, letter.event_id).await?;
            Ok(Some(DeadLetterDetail {
                letter,
                payload: json(&payload),
                original_payload: original.as_deref().map(json),
                attempts_timeline,
                fixes,
            }))
        }

        pub async fn payload_fixes(db: &Db, event_id: i64) -> anyhow::Result<Vec<PayloadFix>> {
            let fixes: Vec<FixRow> = sqlx::query_as(
                "SELECT at, actor, reason, operation, before, after FROM payload_fix WHERE event_id = $1 ORDER BY id",
            )
            .bind(event_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read payload fixes")?;
            Ok(fixes
                .into_iter()
                .map(|(at, actor, reason, op, before, after)| PayloadFix {
                    at: from_ms(at),
                    actor,
                    reason,
                    operation: json(&op),
                    before: json(&before),
                    after: json(&after),
                })
                .collect())
        }

        pub async fn delivery_attempts(db: &Db, delivery_id: i64) -> anyhow::Result<Vec<Attempt>> {
            let rows: Vec<AttemptRow> = sqlx::query_as(
                "SELECT started_at, duration_ms, http_status, outcome, class, reason, response_excerpt, trigger
                   FROM attempt WHERE delivery_id = $1 ORDER BY id",
            )
            .bind(delivery_id)
            .fetch_all(db.reader())
            .await
            .context("cannot read attempts")?;
            rows.into_iter()
                .map(|a| {
                    Ok(Attempt {
                        started_at: from_ms(a.0),
                        duration_ms: a.1,
                        http_status: a.2,
                        outcome: a.3,
                        class: a.4.as_deref().map(decode).transpose()?,
                        reason: a.5,
                        response_excerpt: a.6,
                        trigger: a.7,
                    })
                })
                .collect()
        }

        /// Whether any replay is running or paused (only then can a dead letter be queued in one).
        pub(in crate::store) async fn any_replay_active(db: &Db) -> anyhow::Result<bool> {
            let (n,): (i64,) = sqlx::query_as(ANY_REPLAY_ACTIVE)
                .fetch_one(db.reader())
                .await
                .context("cannot read replays")?;
            Ok(n > 0)
        }

        pub async fn resolve_dead_letters(
            db: &Db,
            selection: &ReplaySelection,
            resolution: Resolution,
            note: &str,
            actor: &str,
            expected: Option<i64>,
            now: DateTime<Utc>,
        ) -> anyhow::Result<ResolveOutcome> {
            let check_queued = any_replay_active(db).await?;
            let mut q = Sql::new(DIALECT, "UPDATE delivery SET resolution = ");
            q.bind(resolution.as_str())
                .push(", resolved_at = ")
                .bind(ms(now))
                .push(", resolved_by = ")
                .bind(actor)
                .push(", resolution_note = ")
                .bind(note.trim())
                .push(" WHERE id IN (SELECT d.id");
            push_selection(&mut q, selection)?;
            q.push(&format!(" AND {})", open_condition(check_queued, false)));
            let mut tx = db.begin_write().await?;
            let n = built(&q).execute(&mut *tx).await.context("cannot resolve dead letters")?.rows_affected() as i64;
            if let Some(expected) = expected {
                if n != expected {
                    // Dropping the transaction rolls it back.
                    return Ok(ResolveOutcome::Changed { found: n });
                }
            }
            tx.commit().await.context("cannot commit resolution")?;
            Ok(ResolveOutcome::Resolved(n))
        }

        pub async fn purge_resolved_leads(db: &Db, cutoff: DateTime<Utc>, now: DateTime<Utc>) -> anyhow::Result<u64> {
            purge_matching(
                db,
                "SELECT DISTINCT d.event_id FROM delivery d JOIN inbound_event e ON e.id = d.event_id
                  WHERE d.resolved_at IS NOT NULL AND d.resolved_at < $1 AND d.state = 'dead'
                    AND d.resolution IN ('discarded', 'fixed_manually') AND e.purged_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM delivery o WHERE o.event_id = d.event_id
                                     AND (o.state IN ('pending', 'running', 'waiting')
                                          OR (o.state = 'dead' AND o.resolution = 'open')))
                  LIMIT 10000",
                cutoff,
                now,
            )
            .await
        }

        pub async fn purge_delivered_leads(db: &Db, cutoff: DateTime<Utc>, now: DateTime<Utc>) -> anyhow::Result<u64> {
            // Received before the cutoff (an index range), every step delivered and the last one before the cutoff.
            purge_matching(
                db,
                "SELECT e.id FROM inbound_event e
                  WHERE e.received_at < $1 AND e.purged_at IS NULL
                    AND EXISTS (SELECT 1 FROM delivery d WHERE d.event_id = e.id)
                    AND NOT EXISTS (SELECT 1 FROM delivery d WHERE d.event_id = e.id
                                     AND (d.state <> 'delivered' OR d.delivered_at IS NULL OR d.delivered_at >= $1))
                  ORDER BY e.received_at
                  LIMIT 10000",
                cutoff,
                now,
            )
            .await
        }

        /// Purges, in one transaction, the leads whose event ids `select` (with the cutoff as `$1`) returns.
        async fn purge_matching(
            db: &Db,
            select: &'static str,
            cutoff: DateTime<Utc>,
            now: DateTime<Utc>,
        ) -> anyhow::Result<u64> {
            let mut tx = db.begin_write().await?;
            let ids: Vec<(i64,)> = sqlx::query_as(select)
                .bind(ms(cutoff))
                .fetch_all(&mut *tx)
                .await
                .context("cannot find leads to purge")?;
            let ids: Vec<i64> = ids.into_iter().map(|r| r.0).collect();
            let n = purge_events_in(&mut tx, &ids, now).await?;
            tx.commit().await.context("cannot commit purge")?;
            Ok(n)
        }

        /// Purges the data of these leads: payloads, fixes' values, attempts' response excerpts; each delivered
        /// step's CRM answer keeps only its ids. Rows and statistics stay.
        async fn purge_events_in(tx: &mut Conn, ids: &[i64], now: DateTime<Utc>) -> anyhow::Result<u64> {
            if ids.is_empty() {
                return Ok(0);
            }
            let mut q =
                Sql::new(DIALECT, "UPDATE inbound_event SET payload = '{}', original_payload = NULL, purged_at = ");
            q.bind(ms(now)).push(" WHERE").id_in("id", ids);
            let n = built(&q).execute(&mut *tx).await.context("cannot purge payloads")?.rows_affected();
            let mut q = Sql::new(DIALECT, "UPDATE payload_fix SET before = 'null', after = 'null' WHERE");
            q.id_in("event_id", ids);
            built(&q).execute(&mut *tx).await.context("cannot purge fixes")?;
            let mut q = Sql::new(
                DIALECT,
                "UPDATE attempt SET response_excerpt = NULL
                  WHERE response_excerpt IS NOT NULL AND delivery_id IN (SELECT id FROM delivery WHERE",
            );
            q.id_in("event_id", ids).push(")");
            built(&q).execute(&mut *tx).await.context("cannot purge response excerpts")?;
            let mut q = Sql::new(DIALECT, "SELECT id, result FROM delivery WHERE result IS NOT NULL AND");
            q.id_in("event_id", ids);
            let results: Vec<(i64, String)> =
                built_as(&q).fetch_all(&mut *tx).await.context("cannot read CRM answers to purge")?;
            for (id, result) in results {
                let kept = serde_json::from_str::<serde_json::Value>(&result)
                    .map(|v| crate::model::privacy::ids_only(&v).to_string())
                    .unwrap_or_else(|_| "null".into());
                sqlx::query("UPDATE delivery SET result = $1 WHERE id = $2")
                    .bind(kept)
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .context("cannot purge a CRM answer")?;
            }
            Ok(n)
        }

        pub async fn selected_open_events(db: &Db, selection: &ReplaySelection) -> anyhow::Result<Vec<(i64, i64)>> {
            let mut q = Sql::new(DIALECT, "SELECT d.id, d.event_id");
            push_selection(&mut q, selection)?;
            q.push(" AND d.resolution = 'open' AND e.purged_at IS NULL ORDER BY d.id");
            built_as(&q).fetch_all(db.reader()).await.context("cannot read the selection")
        }
    }
    sqlite {
        use crate::store::dead_letters::{lite as built, lite_as as built_as};
        const DIALECT: Dialect = Dialect::Sqlite;
    }
    postgres {
        use crate::store::dead_letters::{pg as built, pg_as as built_as};
        const DIALECT: Dialect = Dialect::Postgres;
    }
}
