//! The PostgreSQL backend: for a team, one database shared by several `leadline serve` processes
//! (`migrations/postgres`). Claims take rows with `FOR UPDATE SKIP LOCKED`, so concurrent workers never wait
//! on each other's rows nor claim the same job; every commit is durable (`synchronous_commit` as the server
//! has it, `on` by default).

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

/// A connection of this backend, as a transaction lends it to the statements inside it.
pub(crate) type Conn = sqlx::PgConnection;

/// The advisory lock key write transactions take turns on (any fixed number; "LEAD" in ASCII).
const WRITERS_LOCK: i64 = 0x4C45_4144;

/// The PostgreSQL database as the store's operations see it.
pub(crate) struct Db {
    pool: PgPool,
}

/// What a failed first connection means, in words: unreachable, a refused password, a missing database. Pure.
pub fn explain_connect_error(e: &sqlx::Error, where_: &str) -> String {
    match e {
        sqlx::Error::Io(io) => {
            format!("cannot reach the database at {where_}: {io} (is PostgreSQL running and listening there?)")
        }
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("28P01") | Some("28000") => {
                format!("the database at {where_} refused the login: wrong user name or password ({})", db.message())
            }
            Some("3D000") => format!("the database at {where_} does not exist: {}", db.message()),
            _ => format!("cannot connect to {where_}: {}", db.message()),
        },
        other => format!("cannot connect to {where_}: {other}"),
    }
}

impl Db {
    /// Connects to `url` (`postgres://user@host:port/db`) and applies pending migrations. Several processes
    /// may start at once: sqlx's migrator takes an advisory lock, so only one applies them.
    pub(crate) async fn open(url: &str) -> anyhow::Result<Db> {
        // One connection first, so that what is wrong is said at once and plainly (a pool would retry until its
        // acquire timeout and report only that it timed out).
        let where_ = redact(url);
        match tokio::time::timeout(Duration::from_secs(10), <sqlx::PgConnection as sqlx::Connection>::connect(url))
            .await
        {
            Err(_) => anyhow::bail!("cannot reach the database at {where_}: no answer within 10 s"),
            Ok(Err(e)) => anyhow::bail!("{}", explain_connect_error(&e, &where_)),
            Ok(Ok(c)) => {
                let _ = sqlx::Connection::close(c).await;
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(30))
            .connect(url)
            .await
            .with_context(|| format!("cannot connect to {}", redact(url)))?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("{where_}: {}", super::explain_migration_error(&e)))?;
        Ok(Db { pool })
    }

    /// A write transaction. Write transactions take turns, across every process on the database (a transaction
    /// advisory lock, released at commit or rollback), as SQLite's writers do: each of them moves the kept counts
    /// (`delivery_tally`, `dead_letter_tally`, a few hot rows per target), and concurrent transactions locking
    /// those rows in different orders deadlocked under load. Reads, and claims' row locks (`SKIP LOCKED`), do
    /// not wait for it beyond that.
    ///
    /// The `BEGIN` runs in a task of its own, as on SQLite: a caller dropped half-way (a task aborted at shutdown,
    /// a request whose client went away) cannot leave a connection inside a transaction the client side does not
    /// know about.
    pub(crate) async fn begin_write(&self) -> anyhow::Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        let pool = self.pool.clone();
        tokio::spawn(async move {
            let mut tx = pool.begin().await.context("cannot start a transaction")?;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(WRITERS_LOCK)
                .execute(&mut *tx)
                .await
                .context("cannot take the writers' turn")?;
            anyhow::Ok(tx)
        })
        .await
        .context("the task starting a transaction failed")?
    }

    pub(crate) fn writer(&self) -> &PgPool {
        &self.pool
    }

    pub(crate) fn reader(&self) -> &PgPool {
        &self.pool
    }

    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }
}

/// Creates an empty database `name` on the server of `admin_url` (a URL of an existing database, e.g.
/// `postgres://postgres@host/postgres`) and returns the URL of the new one; its tables are made when a store
/// opens it. For tests and benchmarks, which give each case a database of its own.
pub async fn create_database(admin_url: &str, name: &str) -> anyhow::Result<String> {
    admin_statement(admin_url, &format!("CREATE DATABASE \"{}\"", quoted(name))).await?;
    let mut url = url::Url::parse(admin_url).with_context(|| format!("invalid URL {}", redact(admin_url)))?;
    url.set_path(&format!("/{name}"));
    Ok(url.to_string())
}

/// Drops the database of `url` (disconnecting its sessions) through the server of `admin_url`.
pub async fn drop_database(admin_url: &str, url: &str) -> anyhow::Result<()> {
    let parsed = url::Url::parse(url).with_context(|| format!("invalid URL {}", redact(url)))?;
    let name = parsed.path().trim_start_matches('/');
    admin_statement(admin_url, &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", quoted(name))).await
}

/// A name inside double quotes: a `"` doubled.
fn quoted(name: &str) -> String {
    name.replace('"', "\"\"")
}

async fn admin_statement(admin_url: &str, statement: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .with_context(|| format!("cannot connect to {}", redact(admin_url)))?;
    sqlx::query(statement).execute(&mut conn).await.with_context(|| statement.to_string())?;
    let _ = conn.close().await;
    Ok(())
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}
