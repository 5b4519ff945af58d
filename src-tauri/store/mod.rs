//! Storage: the SQLite implementation of Leadline's delivery model (`migrations/sqlite`).
//!
//! One process holds two pools on the same file: a write pool of exactly one connection, so writes inside the
//! process queue fairly in async code instead of sleeping in SQLite's busy handler, and a read pool for
//! everything else (WAL lets readers run beside the writer). Other processes on the same file (a second
//! worker) are arbitrated by SQLite's lock with a busy timeout; every write transaction is `BEGIN IMMEDIATE`.
//!
//! `synchronous = FULL`: a commit is on disk before it returns, so "202 Accepted" means the lead survives a
//! power cut, not only a crash. Ingest groups concurrent requests into one commit to keep that affordable.
//!
//! PostgreSQL (for teams, `FOR UPDATE SKIP LOCKED`) comes as a second implementation of the same operations;
//! the modules below are grouped by table so that the second backend mirrors them one for one.

mod events;
mod health;
mod jobs;

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

pub use events::{InsertOutcome, NewEvent, Via};
pub use health::{QueueHealth, TargetHealth};
pub use jobs::{AttemptRecord, ClaimRequest, Completion, Job, JobOutcome};

#[derive(Clone)]
pub struct Store {
    write: SqlitePool,
    read: SqlitePool,
}

pub fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub fn from_ms(v: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(v).unwrap_or_default()
}

/// Creates the database folder (and missing parents) readable by this user only (`0700` on unix): it holds
/// every lead. An existing folder is left as it is.
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates an empty database file readable by this user only (`0600` on unix) when there is none, before SQLite
/// opens it: SQLite gives the `-wal` and `-shm` files the database file's permissions.
fn create_private_file(path: &std::path::Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl Store {
    /// Opens (creating if needed) the database at `url` and applies pending migrations.
    pub async fn open(url: &str) -> anyhow::Result<Store> {
        let url = if url.starts_with("sqlite:") { url.to_string() } else { format!("sqlite://{url}") };
        let options = SqliteConnectOptions::from_str(&url)
            .with_context(|| format!("invalid database URL {url}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("temp_store", "memory")
            .pragma("cache_size", "-65536");
        if let Some(path) = url.strip_prefix("sqlite://").filter(|p| !p.is_empty() && !p.starts_with(':')) {
            let path = path.split('?').next().unwrap_or(path);
            if let Some(dir) = std::path::Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
                create_private_dir(dir).with_context(|| format!("cannot create database folder {}", dir.display()))?;
            }
            create_private_file(std::path::Path::new(path))
                .with_context(|| format!("cannot create database file {path}"))?;
        }
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await
            .with_context(|| format!("cannot open database {url}"))?;
        sqlx::migrate!("./migrations/sqlite").run(&write).await.context("cannot apply database migrations")?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.read_only(true))
            .await
            .with_context(|| format!("cannot open database {url} for reading"))?;
        Ok(Store { write, read })
    }

    pub async fn begin_write(&self) -> anyhow::Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.write.begin_with("BEGIN IMMEDIATE").await.context("cannot start a write transaction")
    }

    /// The write pool: for small single-statement writes (samples) and benchmarks that fill a database in bulk.
    #[doc(hidden)]
    pub fn write_pool(&self) -> &SqlitePool {
        &self.write
    }

    pub fn read_pool(&self) -> &SqlitePool {
        &self.read
    }

    pub async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
    }

    /// Records a breaker transition of a target.
    pub async fn record_breaker_transition(
        &self,
        target: &str,
        t: &crate::delivery::breaker::Transition,
    ) -> anyhow::Result<()> {
        sqlx::query("INSERT INTO breaker_transition (target, at, from_state, to_state, reason) VALUES (?, ?, ?, ?, ?)")
            .bind(target)
            .bind(ms(t.at))
            .bind(t.from.as_str())
            .bind(t.to.as_str())
            .bind(&t.reason)
            .execute(&self.write)
            .await
            .context("cannot record breaker transition")?;
        Ok(())
    }

    /// The CRM record id linked to an external id (strategy `search_then_create`).
    pub async fn crm_link(&self, target: &str, external_id: &str) -> anyhow::Result<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT crm_id FROM crm_link WHERE target = ? AND external_id = ?")
            .bind(target)
            .bind(external_id)
            .fetch_optional(&self.read)
            .await
            .context("cannot read crm_link")?;
        Ok(row.map(|r| r.0))
    }

    /// Links `external_id` to `crm_id` for `target` in a commit of its own, before the step completes: a connector
    /// that makes two records for one lead (Pipedrive: the person, then the lead) checkpoints the first, so a
    /// retry after a crash reuses it instead of creating it again. An existing link is kept (the first record
    /// wins); returns the id that is linked now.
    pub async fn link(&self, target: &str, external_id: &str, crm_id: &str) -> anyhow::Result<String> {
        sqlx::query(
            "INSERT INTO crm_link (target, external_id, crm_id, linked_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (target, external_id) DO NOTHING",
        )
        .bind(target)
        .bind(external_id)
        .bind(crm_id)
        .bind(ms(Utc::now()))
        .execute(&self.write)
        .await
        .context("cannot record crm_link")?;
        let (linked,): (String,) = sqlx::query_as("SELECT crm_id FROM crm_link WHERE target = ? AND external_id = ?")
            .bind(target)
            .bind(external_id)
            .fetch_one(&self.write)
            .await
            .context("cannot read crm_link")?;
        Ok(linked)
    }
}
