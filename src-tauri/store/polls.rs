//! Poll mode: `poll_cursor`, where each polled list of leads stands (per source and lead form), so a restart goes
//! on where the last poll stopped, neither skipping leads created while Leadline was down nor reading old pages
//! again.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{from_ms, ms, Store};

/// Where one polled list stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PollCursor {
    pub source: String,
    /// The Meta lead form; `""` for a generic source's one list.
    pub form: String,
    /// The committed watermark: the next pass lists leads from here (less the overlap). For a Meta form the
    /// newest creation time among the leads stored from it; for a generic list the start of the last complete
    /// pass. It moves only when a pass is complete.
    pub since: DateTime<Utc>,
    /// A pass that has stored some pages and not yet the last one.
    pub pass: Option<PollPass>,
    pub last_poll_at: Option<DateTime<Utc>>,
    /// Leads new to Leadline in the last poll.
    pub last_found: i64,
    /// Why the last poll failed; `None` after a good one.
    pub last_error: Option<String>,
    /// The first failed poll since the last good one.
    pub failing_since: Option<DateTime<Utc>>,
    pub next_poll_at: Option<DateTime<Utc>>,
}

/// A pass under way: the pages before `after` are stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PollPass {
    /// The watermark this pass lists from (kept, so the next page is asked with the same filter).
    pub since: DateTime<Utc>,
    /// The next page: Graph's `paging.cursors.after`, or a generic list's next page URL.
    pub after: String,
    /// The newest creation time among the leads stored by this pass so far.
    pub newest: Option<DateTime<Utc>>,
}

impl PollCursor {
    /// A list never polled: the first pass lists from `since`.
    pub fn new(source: &str, form: &str, since: DateTime<Utc>) -> PollCursor {
        PollCursor {
            source: source.into(),
            form: form.into(),
            since,
            pass: None,
            last_poll_at: None,
            last_found: 0,
            last_error: None,
            failing_since: None,
            next_poll_at: None,
        }
    }
}

type CursorRow = (
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

const COLUMNS: &str = "source, form, since, pass_since, pass_after, pass_newest, last_poll_at, last_found, last_error,
                       failing_since, next_poll_at";

fn to_cursor(r: CursorRow) -> PollCursor {
    PollCursor {
        source: r.0,
        form: r.1,
        since: from_ms(r.2),
        pass: match (r.3, r.4) {
            (Some(since), Some(after)) => Some(PollPass { since: from_ms(since), after, newest: r.5.map(from_ms) }),
            _ => None,
        },
        last_poll_at: r.6.map(from_ms),
        last_found: r.7,
        last_error: r.8,
        failing_since: r.9.map(from_ms),
        next_poll_at: r.10.map(from_ms),
    }
}

impl Store {
    /// Where the polled list `form` of `source` stands, if it was ever polled.
    pub async fn poll_cursor(&self, source: &str, form: &str) -> anyhow::Result<Option<PollCursor>> {
        dispatch!(self, poll_cursor(source, form))
    }

    /// Every polled list of `source`, by form.
    pub async fn poll_cursors(&self, source: &str) -> anyhow::Result<Vec<PollCursor>> {
        dispatch!(self, poll_cursors(source))
    }

    /// Records where a polled list stands (all of it, in one write). The poller calls it only after the leads of
    /// the pages it covers are committed: a crash before it repeats those pages (their leads are duplicates),
    /// never skips one.
    pub async fn save_poll_cursor(&self, cursor: &PollCursor) -> anyhow::Result<()> {
        dispatch!(self, save_poll_cursor(cursor))
    }

    /// Leads of `source` that came by polling since `since`.
    pub async fn polled_since(&self, source: &str, since: DateTime<Utc>) -> anyhow::Result<i64> {
        dispatch!(self, polled_since(source, since))
    }
}

backends! {
    shared {
        pub async fn poll_cursor(db: &Db, source: &str, form: &str) -> anyhow::Result<Option<PollCursor>> {
            let row: Option<CursorRow> =
                sqlx::query_as(&format!("SELECT {COLUMNS} FROM poll_cursor WHERE source = $1 AND form = $2"))
                    .bind(source)
                    .bind(form)
                    .fetch_optional(db.reader())
                    .await
                    .context("cannot read the poll cursor")?;
            Ok(row.map(to_cursor))
        }

        pub async fn poll_cursors(db: &Db, source: &str) -> anyhow::Result<Vec<PollCursor>> {
            let rows: Vec<CursorRow> =
                sqlx::query_as(&format!("SELECT {COLUMNS} FROM poll_cursor WHERE source = $1 ORDER BY form"))
                    .bind(source)
                    .fetch_all(db.reader())
                    .await
                    .context("cannot read the poll cursors")?;
            Ok(rows.into_iter().map(to_cursor).collect())
        }

        pub async fn save_poll_cursor(db: &Db, c: &PollCursor) -> anyhow::Result<()> {
            sqlx::query(&format!(
                "INSERT INTO poll_cursor ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                 ON CONFLICT (source, form) DO UPDATE SET since = excluded.since, pass_since = excluded.pass_since,
                    pass_after = excluded.pass_after, pass_newest = excluded.pass_newest,
                    last_poll_at = excluded.last_poll_at, last_found = excluded.last_found,
                    last_error = excluded.last_error, failing_since = excluded.failing_since,
                    next_poll_at = excluded.next_poll_at"
            ))
            .bind(&c.source)
            .bind(&c.form)
            .bind(ms(c.since))
            .bind(c.pass.as_ref().map(|p| ms(p.since)))
            .bind(c.pass.as_ref().map(|p| p.after.clone()))
            .bind(c.pass.as_ref().and_then(|p| p.newest).map(ms))
            .bind(c.last_poll_at.map(ms))
            .bind(c.last_found)
            .bind(&c.last_error)
            .bind(c.failing_since.map(ms))
            .bind(c.next_poll_at.map(ms))
            .execute(db.writer())
            .await
            .context("cannot record the poll cursor")?;
            Ok(())
        }

        pub async fn polled_since(db: &Db, source: &str, since: DateTime<Utc>) -> anyhow::Result<i64> {
            let (n,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM inbound_event WHERE source = $1 AND received_at >= $2 AND via = 'poll'",
            )
            .bind(source)
            .bind(ms(since))
            .fetch_one(db.reader())
            .await
            .context("cannot count polled leads")?;
            Ok(n)
        }
    }
}
