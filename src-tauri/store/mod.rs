//! The store: every read and write of Leadline's delivery model, as operations named in domain terms. Two
//! backends implement them: SQLite (`sqlite.rs`, the embedded default for one person) and PostgreSQL
//! (`postgres.rs`, for a team sharing one database), chosen by the database URL.
//!
//! Nothing outside this module sees SQL, a pool or a transaction: each operation is atomic inside its backend.
//! The store speaks `DateTime<Utc>`; both backends keep times as Unix milliseconds (`BIGINT`), so the SQL of
//! most operations is the same text for both.
//!
//! Each file below holds the operations of one part of the model. An operation is written once in `shared`
//! (compiled against both backends by [`backends!`]: the portable subset of SQL — `$1` parameters, `ON
//! CONFLICT`, `RETURNING`, `CAST(… AS BIGINT)` around sums) or, where the two differ (claims with `SKIP
//! LOCKED`, JSON and array parameters), once per backend; `Store`'s method picks the backend with
//! [`dispatch!`].

/// Compiles store operations for both backends: items in `shared { … }` twice (in `on_sqlite` with `Db` =
/// [`sqlite::Db`] and in `on_postgres` with `Db` = [`postgres::Db`]; `Conn` is that backend's connection, for
/// statements inside a transaction), items in `sqlite { … }` and
/// `postgres { … }` only for that backend.
macro_rules! backends {
    ($(shared { $($shared:item)* })? $(sqlite { $($lite:item)* })? $(postgres { $($pg:item)* })?) => {
        pub(super) mod on_sqlite {
            #![allow(unused_imports)]
            use super::*;
            use $crate::store::sqlite::{Conn, Db};
            $($($shared)*)?
            $($($lite)*)?
        }
        pub(super) mod on_postgres {
            #![allow(unused_imports)]
            use super::*;
            use $crate::store::postgres::{Conn, Db};
            $($($shared)*)?
            $($($pg)*)?
        }
    };
}

/// Calls `op(db, args…)` of the backend this store runs on (`on_sqlite::op` or `on_postgres::op`) and awaits it.
macro_rules! dispatch {
    ($self:expr, $op:ident ( $($arg:expr),* $(,)? )) => {
        match &*$self.backend {
            $crate::store::Backend::Sqlite(db) => on_sqlite::$op(db, $($arg),*).await,
            $crate::store::Backend::Postgres(db) => on_postgres::$op(db, $($arg),*).await,
        }
    };
}

mod alert_channels;
mod alerts;
mod contacts;
mod dead_letters;
mod events;
mod figures;
mod fixes;
mod fixtures;
mod health;
mod inspect;
mod jobs;
mod links;
mod lookup;
mod metrics;
mod missing_data;
mod operators;
mod polls;
pub mod postgres;
mod previews;
mod replays;
mod seed;
mod sources;
pub mod sqlite;
mod team;

use std::sync::Arc;

use chrono::{DateTime, Utc};

/// The log levels of the store's database driver when nobody chose them (`RUST_LOG`): its warnings only (slow
/// statements, failed connections).
pub const DRIVER_LOG_LEVELS: &str = "sqlx=warn";

pub use crate::model::{
    AlertKind, AlertState, BreakerState, DeliveryState, ErrorClass, Held, ReplayEventKind, ReplayOutcome, ReplayPhase,
    ReplayStatus, Resolution, ResolutionFilter, Severity, UnknownWord,
};
pub use alert_channels::{ChannelEntry, ChannelState, ChannelSummary, ChannelTrouble};
pub use alerts::{Alert, AlertSpec};
pub use contacts::{ContactTimes, ReceiptApplied, ReceiptEntry};
pub use dead_letters::{
    lead_field_path, Attempt, DeadLetter, DeadLetterDetail, DeadLetterFilter, DeadLetterGroup, PayloadFix,
    ReplaySelection, ResolveOutcome,
};
pub use events::{InsertOutcome, NewEvent, OnChange, Via};
pub use figures::{BreakerHistory, DeliveredStep, RouteDeadLetters};
pub use fixes::{DeadLetterLead, LeadFix};
#[doc(hidden)]
pub use fixtures::{BenchFill, LeadFixture, StepFixture, StepFixtureState};
pub use health::{QueueHealth, TargetHealth};
pub use inspect::{
    AttemptEntry, BreakerTransitionRecord, CrmLinkRecord, DeliveryRecord, EventRecord, ReplayItemRecord,
};
pub use jobs::{AttemptRecord, ClaimRequest, Completion, Job, JobOutcome, MissingTask};
pub use lookup::{LeadMatch, LeadRecord, LeadStatus, LeadStep, FIND_LIMIT};
pub use metrics::{
    speed_bucket, speed_edges_ms, GaugeReading, MetricBucket, MetricsRecord, MetricsRetention, Pruned, METRIC_COUNTERS,
    SPEED_EDGE_COUNT,
};
pub use missing_data::{Episode, EpisodeCount, MissingDataCounts, MissingDataLead, MissingField};
pub use operators::{OperatorToken, Reveal, TargetPause};
pub use polls::{PollCursor, PollPass};
pub use previews::{FallbackRule, PreviewCategory, PreviewCount};
pub use replays::{
    NewReplay, QueuedItem, ReplayEvent, ReplayHistoryEntry, ReplayItemCounts, ReplayProgress, ReplayReportItem,
    RunningReplay, StartOutcome, StatusChange,
};
pub use seed::EventCountPoint;
pub use sources::{ReconciliationRun, RunResult};
pub use team::{PaceGrant, Signal, TargetControl};

/// The database, whichever backend holds it. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    backend: Arc<Backend>,
}

enum Backend {
    Sqlite(sqlite::Db),
    Postgres(postgres::Db),
}

/// Milliseconds since the Unix epoch: how both backends keep times.
pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn from_ms(v: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(v).unwrap_or_default()
}

/// What a failed migration means for the person starting Leadline. A database whose schema has a migration this
/// version does not know was set up by a newer Leadline: say so, rather than sqlx's "previously applied but
/// missing". Pure.
pub fn explain_migration_error(e: &sqlx::migrate::MigrateError) -> String {
    match e {
        sqlx::migrate::MigrateError::VersionMissing(v) => format!(
            "this database was set up by a newer Leadline (its schema has migration {v}, which this version does not \
             know): run that newer version, or point this one at another database"
        ),
        other => format!("cannot apply database migrations: {other}"),
    }
}

impl Store {
    /// Opens the database at `url` and applies pending migrations: `postgres://…` (or `postgresql://…`) is a
    /// PostgreSQL server; anything else is a SQLite file (`sqlite://path` or a bare path), created if missing.
    pub async fn open(url: &str) -> anyhow::Result<Store> {
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres(postgres::Db::open(url).await?)
        } else {
            Backend::Sqlite(sqlite::Db::open(url).await?)
        };
        Ok(Store { backend: Arc::new(backend) })
    }

    /// Which backend this store runs on: `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        match &*self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    pub async fn close(&self) {
        match &*self.backend {
            Backend::Sqlite(db) => db.close().await,
            Backend::Postgres(db) => db.close().await,
        }
    }
}
