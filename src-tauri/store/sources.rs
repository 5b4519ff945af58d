//! Reconciliation with the sources: `reconciliation_run` (each comparison with a source's own list of leads, and
//! the watermark the next one lists from), and which listed leads are already stored.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{from_ms, ms, Store};

/// One comparison of a source with its own list of leads, as recorded.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReconciliationRun {
    pub id: i64,
    pub source: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Leads created after this were listed.
    pub since: DateTime<Utc>,
    pub listed: i64,
    /// Listed by the source, never received as a webhook.
    pub missing: i64,
    /// Of those, stored now (the rest arrived in the meantime).
    pub ingested: i64,
    /// The source's ids of the recovered leads (the first 100).
    pub missing_refs: Vec<String>,
    pub error: Option<String>,
}

/// How a reconciliation run ended: its counts, or the error that stopped it (which leaves the watermark where
/// it was).
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    pub listed: i64,
    pub missing: i64,
    pub ingested: i64,
    /// The recovered leads' source ids; the first 100 are kept.
    pub missing_refs: Vec<String>,
    pub error: Option<String>,
}

/// How many recovered ids a run keeps.
const KEPT_REFS: usize = 100;

type RunRow = (i64, String, i64, Option<i64>, i64, i64, i64, i64, Option<String>, Option<String>);

fn to_run(r: RunRow) -> ReconciliationRun {
    ReconciliationRun {
        id: r.0,
        source: r.1,
        started_at: from_ms(r.2),
        finished_at: r.3.map(from_ms),
        since: from_ms(r.4),
        listed: r.5,
        missing: r.6,
        ingested: r.7,
        missing_refs: r.8.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default(),
        error: r.9,
    }
}

impl Store {
    /// Records the start of a reconciliation of `source` listing leads created after `since`; returns its id.
    pub async fn start_reconciliation_run(
        &self,
        source: &str,
        started_at: DateTime<Utc>,
        since: DateTime<Utc>,
    ) -> anyhow::Result<i64> {
        dispatch!(self, start_reconciliation_run(source, started_at, since))
    }

    /// Records how the run `run_id` ended, at `finished_at`.
    pub async fn finish_reconciliation_run(
        &self,
        run_id: i64,
        finished_at: DateTime<Utc>,
        result: &RunResult,
    ) -> anyhow::Result<()> {
        dispatch!(self, finish_reconciliation_run(run_id, finished_at, result))
    }

    /// The start of the last successful (finished, error-free) reconciliation of `source`, if any: the next run's
    /// watermark is derived from it.
    pub async fn last_good_reconciliation(&self, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        dispatch!(self, last_good_reconciliation(source))
    }

    /// The start of the first failed reconciliation of `source` after its last good one, if any failed since.
    pub async fn reconciliation_failing_since(&self, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        dispatch!(self, reconciliation_failing_since(source))
    }

    /// The latest reconciliation run of `source`.
    pub async fn latest_reconciliation(&self, source: &str) -> anyhow::Result<Option<ReconciliationRun>> {
        dispatch!(self, latest_reconciliation(source))
    }

    /// Leads of `source` recovered by reconciliations started since `since`.
    pub async fn recovered_since(&self, source: &str, since: DateTime<Utc>) -> anyhow::Result<i64> {
        dispatch!(self, recovered_since(source, since))
    }

    /// Which of `refs` (ids at the source) are stored as events of `source`, in any order.
    pub async fn stored_refs(&self, source: &str, refs: &[String]) -> anyhow::Result<Vec<String>> {
        dispatch!(self, stored_refs(source, refs))
    }
}

backends! {
    shared {
        pub async fn start_reconciliation_run(
            db: &Db,
            source: &str,
            started_at: DateTime<Utc>,
            since: DateTime<Utc>,
        ) -> anyhow::Result<i64> {
            let (id,): (i64,) =
                sqlx::query_as("INSERT INTO reconciliation_run (source, started_at, since) VALUES ($1, $2, $3) RETURNING id")
                    .bind(source)
                    .bind(ms(started_at))
                    .bind(ms(since))
                    .fetch_one(db.writer())
                    .await
                    .context("cannot record reconciliation run")?;
            Ok(id)
        }

        pub async fn finish_reconciliation_run(
            db: &Db,
            run_id: i64,
            finished_at: DateTime<Utc>,
            result: &RunResult,
        ) -> anyhow::Result<()> {
            let kept: Vec<&String> = result.missing_refs.iter().take(KEPT_REFS).collect();
            sqlx::query(
                "UPDATE reconciliation_run SET finished_at = $1, listed = $2, missing = $3, ingested = $4,
                        missing_refs = $5, error = $6 WHERE id = $7",
            )
            .bind(ms(finished_at))
            .bind(result.listed)
            .bind(result.missing)
            .bind(result.ingested)
            .bind(serde_json::to_string(&kept).context("missing refs")?)
            .bind(&result.error)
            .bind(run_id)
            .execute(db.writer())
            .await
            .context("cannot finish reconciliation run")?;
            Ok(())
        }

        pub async fn last_good_reconciliation(db: &Db, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
            let (last,): (Option<i64>,) = sqlx::query_as(
                "SELECT MAX(started_at) FROM reconciliation_run
                  WHERE source = $1 AND error IS NULL AND finished_at IS NOT NULL",
            )
            .bind(source)
            .fetch_one(db.reader())
            .await
            .context("cannot read the reconciliation watermark")?;
            Ok(last.map(from_ms))
        }

        pub async fn reconciliation_failing_since(db: &Db, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
            let (first,): (Option<i64>,) = sqlx::query_as(
                "SELECT MIN(started_at) FROM reconciliation_run
                  WHERE source = $1 AND error IS NOT NULL
                    AND started_at > COALESCE((SELECT MAX(started_at) FROM reconciliation_run
                                                WHERE source = $2 AND error IS NULL AND finished_at IS NOT NULL), 0)",
            )
            .bind(source)
            .bind(source)
            .fetch_one(db.reader())
            .await
            .context("cannot read failed reconciliation runs")?;
            Ok(first.map(from_ms))
        }

        pub async fn latest_reconciliation(db: &Db, source: &str) -> anyhow::Result<Option<ReconciliationRun>> {
            let row: Option<RunRow> = sqlx::query_as(
                "SELECT id, source, started_at, finished_at, since, listed, missing, ingested, missing_refs, error
                   FROM reconciliation_run WHERE source = $1 ORDER BY id DESC LIMIT 1",
            )
            .bind(source)
            .fetch_optional(db.reader())
            .await
            .context("cannot read reconciliation runs")?;
            Ok(row.map(to_run))
        }

        pub async fn recovered_since(db: &Db, source: &str, since: DateTime<Utc>) -> anyhow::Result<i64> {
            let (n,): (i64,) = sqlx::query_as(
                "SELECT CAST(COALESCE(SUM(ingested), 0) AS BIGINT) FROM reconciliation_run
                  WHERE source = $1 AND started_at >= $2",
            )
            .bind(source)
            .bind(ms(since))
            .fetch_one(db.reader())
            .await
            .context("cannot count recovered leads")?;
            Ok(n)
        }
    }
    sqlite {
        pub async fn stored_refs(db: &Db, source: &str, refs: &[String]) -> anyhow::Result<Vec<String>> {
            let mut known = Vec::new();
            for chunk in refs.chunks(500) {
                let rows: Vec<(String,)> = sqlx::query_as(
                    "SELECT source_ref FROM inbound_event
                      WHERE source = $1 AND source_ref IN (SELECT value FROM json_each($2))",
                )
                .bind(source)
                .bind(serde_json::to_string(chunk).context("refs")?)
                .fetch_all(db.reader())
                .await
                .context("cannot compare with stored events")?;
                known.extend(rows.into_iter().map(|r| r.0));
            }
            Ok(known)
        }
    }
    postgres {
        pub async fn stored_refs(db: &Db, source: &str, refs: &[String]) -> anyhow::Result<Vec<String>> {
            let mut known = Vec::new();
            for chunk in refs.chunks(500) {
                let rows: Vec<(String,)> = sqlx::query_as(
                    "SELECT source_ref FROM inbound_event WHERE source = $1 AND source_ref = ANY($2)",
                )
                .bind(source)
                .bind(chunk)
                .fetch_all(db.reader())
                .await
                .context("cannot compare with stored events")?;
                known.extend(rows.into_iter().map(|r| r.0));
            }
            Ok(known)
        }
    }
}
