//! The SQLite backend: the embedded default, one file beside the app (`migrations/sqlite`).
//!
//! One process holds two pools on the same file: a write pool of exactly one connection, so writes inside the
//! process queue fairly in async code instead of sleeping in SQLite's busy handler, and a read pool for
//! everything else (WAL lets readers run beside the writer). Other processes on the same file (a second
//! worker) are arbitrated by SQLite's lock with a busy timeout; every write transaction is `BEGIN IMMEDIATE`.
//!
//! `synchronous = FULL`: a commit is on disk before it returns, so "202 Accepted" means the lead survives a
//! power cut, not only a crash. Ingest groups concurrent requests into one commit to keep that affordable.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

/// A connection of this backend, as a transaction lends it to the statements inside it.
pub(crate) type Conn = sqlx::SqliteConnection;

/// The SQLite database as the store's operations see it.
pub(crate) struct Db {
    write: SqlitePool,
    read: SqlitePool,
}

impl Db {
    /// Opens (creating if needed) the database at `url` (`sqlite://path`, or a bare path) and applies pending
    /// migrations.
    pub(crate) async fn open(url: &str) -> anyhow::Result<Db> {
        let url = if url.starts_with("sqlite:") { url.to_string() } else { format!("sqlite://{url}") };
        let options = SqliteConnectOptions::from_str(&url)
            .with_context(|| format!("invalid database URL {url}"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("temp_store", "memory")
            .pragma("cache_size", "-65536")
            // Rows cross from SQLite's thread to async code through a bounded channel: at sqlx's default of 50 a
            // claim of a few hundred jobs made the thread stop and wake for every 50 rows.
            .row_buffer_size(1024);
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
        // Foreign keys are off while the migrations run: a migration that rebuilds a table (SQLite's documented
        // procedure for a changed CHECK, as 0016 does) drops the old table, which other tables reference, and the
        // pragma cannot change inside the migration's transaction. Such a migration copies every row with its id, so
        // every reference still holds. The write pool is one connection: the one the migrations use.
        sqlx::query("PRAGMA foreign_keys = OFF").execute(&write).await.context("cannot prepare the migrations")?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&write)
            .await
            .map_err(|e| anyhow::anyhow!("{url}: {}", super::explain_migration_error(&e)))?;
        sqlx::query("PRAGMA foreign_keys = ON").execute(&write).await.context("cannot finish the migrations")?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.read_only(true))
            .await
            .with_context(|| format!("cannot open database {url} for reading"))?;
        Ok(Db { write, read })
    }

    /// A write transaction (`BEGIN IMMEDIATE`: it takes the file's write lock at once, so it never fails
    /// half-way on a lock another process took).
    ///
    /// The `BEGIN` runs in a task of its own: sqlx's SQLite connection counts its transaction depth in its worker
    /// thread, so a caller dropped while `BEGIN` was under way (a task aborted at shutdown, a request whose client
    /// went away) would leave the one write connection "in a transaction" that nobody owns, and every later write
    /// would fail ("begin_with at non-zero transaction depth"). Spawned, the `BEGIN` always completes and a
    /// transaction nobody awaits any more is dropped, which rolls it back.
    pub(crate) async fn begin_write(&self) -> anyhow::Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        let pool = self.write.clone();
        tokio::spawn(async move { pool.begin_with("BEGIN IMMEDIATE").await })
            .await
            .context("the task starting a write transaction failed")?
            .context("cannot start a write transaction")
    }

    /// For single-statement writes.
    pub(crate) fn writer(&self) -> &SqlitePool {
        &self.write
    }

    /// For reads: a pool of read-only connections beside the writer.
    pub(crate) fn reader(&self) -> &SqlitePool {
        &self.read
    }

    pub(crate) async fn close(&self) {
        self.write.close().await;
        self.read.close().await;
    }
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
