//! Team mode: what several `leadline serve` processes on one PostgreSQL database decide once for the team.
//!
//! - `target_control`: per target, the circuit breaker's state (moved by compare-and-set, so the team opens it
//!   once and one process probes it), the hold ("send nothing before", from a `Retry-After` or a refused
//!   credential) and the shared request budget (the next free request slot, reserved by each process in turn).
//! - `lease`: which process does a duty that must be done once (the monitor's judgements and announcements,
//!   replays' pacing, reconciliation, polling). The owner renews it; when it stops (a crash), another takes the
//!   duty once the lease has run out.
//! - Signals (PostgreSQL's `LISTEN`/`NOTIFY`): a process that stored new work or changed a target's control
//!   state says so, and the others wake at once instead of at their next poll.
//!
//! On SQLite one process owns the database: the same operations work (the tests run them on both backends), but
//! the worker keeps its control state in memory ([`Store::is_shared`]) and signals go nowhere.

use anyhow::Context;
use chrono::{DateTime, Utc};

use super::{from_ms, ms, Store};
use crate::model::{BreakerState, Transition};

/// The `NOTIFY` channel for "there is new work" (leads stored, leads sent back).
const WORK_CHANNEL: &str = "leadline_work";
/// The `NOTIFY` channel for "a target's control state changed" (breaker, hold, pause).
const CONTROL_CHANNEL: &str = "leadline_control";

/// What another process said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// New work is due: claim now.
    Work,
    /// A target's breaker, hold or pause changed: read the control state again.
    Control,
}

/// One target's state as the team shares it.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetControl {
    pub target: String,
    pub breaker: BreakerState,
    /// When the breaker opened (kept while it is half-open: the incident's start).
    pub opened_at: Option<DateTime<Utc>>,
    /// When the breaker last moved.
    pub changed_at: DateTime<Utc>,
    /// Nothing is sent to the target before this time.
    pub hold_until: Option<DateTime<Utc>>,
    /// The hold is a refused credential (this environment variable), not a rate limit.
    pub hold_credential: Option<String>,
}

/// Request slots reserved from a target's shared budget.
#[derive(Debug, Clone, PartialEq)]
pub struct PaceGrant {
    /// When each reserved request may be sent, in order.
    pub slots: Vec<DateTime<Utc>>,
    /// The first slot nobody holds yet.
    pub next_free: DateTime<Utc>,
}

impl Store {
    /// Whether several processes may share this database (PostgreSQL): the worker then keeps its targets'
    /// control state in the database, and leases decide who does the once-for-the-team duties.
    pub fn is_shared(&self) -> bool {
        self.backend_name() == "postgres"
    }

    /// Every target's shared control state (targets never controlled have no row: closed, not held).
    pub async fn target_controls(&self) -> anyhow::Result<Vec<TargetControl>> {
        dispatch!(self, target_controls())
    }

    /// Moves `target`'s breaker as `t` says, if it is still in `t.from` for the team — or, for a probe
    /// (`→ half_open`), if another process's probe has been under way since before `stale_before` (that process
    /// died). Records the transition in the same commit. Returns whether this process moved it: when it did not,
    /// another process had moved it first and this one must take the team's state.
    pub async fn move_breaker(
        &self,
        target: &str,
        t: &Transition,
        stale_before: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        let moved = dispatch!(self, move_breaker(target, t, stale_before))?;
        if moved {
            self.signal(Signal::Control).await?;
        }
        Ok(moved)
    }

    /// Holds `target` until `until` for the team (a later hold already in force is kept). `credential`: the hold
    /// is that credential's refusal, not a rate limit.
    pub async fn share_hold(&self, target: &str, until: DateTime<Utc>, credential: Option<&str>) -> anyhow::Result<()> {
        dispatch!(self, share_hold(target, until, credential))?;
        self.signal(Signal::Control).await
    }

    /// Ends `target`'s hold for a refused credential (the secrets were reloaded: the new one is tried at once).
    pub async fn end_credential_hold(&self, target: &str) -> anyhow::Result<()> {
        dispatch!(self, end_credential_hold(target))?;
        self.signal(Signal::Control).await
    }

    /// Reserves up to `wanted` request slots of `target`'s shared budget, one every `interval`, from `now` (or
    /// the first free slot) up to `horizon`. Processes reserve in turn, so the team's requests are spaced by
    /// `interval` whichever process sends them.
    pub async fn reserve_pace(
        &self,
        target: &str,
        now: DateTime<Utc>,
        wanted: u32,
        interval: chrono::Duration,
        horizon: DateTime<Utc>,
    ) -> anyhow::Result<PaceGrant> {
        dispatch!(self, reserve_pace(target, now, wanted, interval, horizon))
    }

    /// Takes or renews the lease of `role` for `owner` until `until`: granted when nobody holds it, when `owner`
    /// already does, or when its holder let it run out before `now`.
    pub async fn take_lease(
        &self,
        role: &str,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> anyhow::Result<bool> {
        dispatch!(self, take_lease(role, owner, now, until))
    }

    /// Who holds the lease of `role` (whether or not it has run out), if anyone.
    pub async fn lease_owner(&self, role: &str) -> anyhow::Result<Option<String>> {
        dispatch!(self, lease_owner(role))
    }

    /// Gives the lease of `role` up, if `owner` holds it (a clean shutdown: another process takes over at once).
    pub async fn give_up_lease(&self, role: &str, owner: &str) -> anyhow::Result<()> {
        dispatch!(self, give_up_lease(role, owner))
    }

    /// Tells the other processes on this database (PostgreSQL `NOTIFY`); nothing on SQLite.
    pub async fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        match &*self.backend {
            super::Backend::Sqlite(_) => Ok(()),
            super::Backend::Postgres(db) => on_postgres::notify(db, signal).await,
        }
    }

    /// Listens for the other processes' signals and calls `on` for each, until the task is aborted; a lost
    /// connection is reopened (signals sent meanwhile are lost: the worker's poll and the control state's
    /// periodic read cover that gap). Returns at once on SQLite.
    pub async fn listen(&self, mut on: impl FnMut(Signal) + Send) -> anyhow::Result<()> {
        match &*self.backend {
            super::Backend::Sqlite(_) => Ok(()),
            super::Backend::Postgres(db) => {
                let mut listener = sqlx::postgres::PgListener::connect_with(db.reader())
                    .await
                    .context("cannot listen for other processes' signals")?;
                listener.listen_all([WORK_CHANNEL, CONTROL_CHANNEL]).await.context("cannot LISTEN")?;
                loop {
                    match listener.recv().await {
                        Ok(n) if n.channel() == WORK_CHANNEL => on(Signal::Work),
                        Ok(_) => on(Signal::Control),
                        Err(e) => {
                            tracing::warn!(error = %e, "lost the signal connection: reconnecting");
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        }
                    }
                }
            }
        }
    }
}

type ControlRow = (String, String, Option<i64>, i64, Option<i64>, Option<String>);

fn to_control(r: ControlRow) -> anyhow::Result<TargetControl> {
    Ok(TargetControl {
        target: r.0,
        breaker: r.1.parse::<BreakerState>()?,
        opened_at: r.2.map(from_ms),
        changed_at: from_ms(r.3),
        hold_until: r.4.map(from_ms),
        hold_credential: r.5,
    })
}

backends! {
    shared {
        pub async fn target_controls(db: &Db) -> anyhow::Result<Vec<TargetControl>> {
            let rows: Vec<ControlRow> = sqlx::query_as(
                "SELECT target, breaker_state, breaker_opened_at, breaker_changed_at, hold_until, hold_credential
                   FROM target_control ORDER BY target",
            )
            .fetch_all(db.reader())
            .await
            .context("cannot read target_control")?;
            rows.into_iter().map(to_control).collect()
        }

        pub async fn move_breaker(
            db: &Db,
            target: &str,
            t: &Transition,
            stale_before: DateTime<Utc>,
        ) -> anyhow::Result<bool> {
            let mut tx = db.begin_write().await?;
            sqlx::query("INSERT INTO target_control (target) VALUES ($1) ON CONFLICT (target) DO NOTHING")
                .bind(target)
                .execute(&mut *tx)
                .await
                .context("cannot create target_control")?;
            let opened_at = match t.to {
                BreakerState::Open => Some(ms(t.at)),
                BreakerState::HalfOpen | BreakerState::Closed => None,
            };
            let moved = sqlx::query(
                "UPDATE target_control
                    SET breaker_state = $2,
                        breaker_opened_at = CASE WHEN $3 THEN breaker_opened_at ELSE $4 END,
                        breaker_changed_at = $5
                  WHERE target = $1
                    AND (breaker_state = $6 OR ($7 AND breaker_state = 'half_open' AND breaker_changed_at < $8))",
            )
            .bind(target)
            .bind(t.to.as_str())
            .bind(t.to == BreakerState::HalfOpen)
            .bind(opened_at)
            .bind(ms(t.at))
            .bind(t.from.as_str())
            .bind(t.to == BreakerState::HalfOpen)
            .bind(ms(stale_before))
            .execute(&mut *tx)
            .await
            .context("cannot move the breaker")?
            .rows_affected()
                == 1;
            if moved {
                sqlx::query(
                    "INSERT INTO breaker_transition (target, at, from_state, to_state, reason)
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(target)
                .bind(ms(t.at))
                .bind(t.from.as_str())
                .bind(t.to.as_str())
                .bind(&t.reason)
                .execute(&mut *tx)
                .await
                .context("cannot record breaker transition")?;
            }
            tx.commit().await.context("cannot commit the breaker")?;
            Ok(moved)
        }

        pub async fn share_hold(
            db: &Db,
            target: &str,
            until: DateTime<Utc>,
            credential: Option<&str>,
        ) -> anyhow::Result<()> {
            sqlx::query(
                "INSERT INTO target_control (target, hold_until, hold_credential) VALUES ($1, $2, $3)
                 ON CONFLICT (target) DO UPDATE
                    SET hold_until = excluded.hold_until, hold_credential = excluded.hold_credential
                  WHERE target_control.hold_until IS NULL OR target_control.hold_until < excluded.hold_until",
            )
            .bind(target)
            .bind(ms(until))
            .bind(credential)
            .execute(db.writer())
            .await
            .context("cannot share the hold")?;
            Ok(())
        }

        pub async fn end_credential_hold(db: &Db, target: &str) -> anyhow::Result<()> {
            sqlx::query(
                "UPDATE target_control SET hold_until = NULL, hold_credential = NULL
                  WHERE target = $1 AND hold_credential IS NOT NULL",
            )
            .bind(target)
            .execute(db.writer())
            .await
            .context("cannot end the credential hold")?;
            Ok(())
        }

        pub async fn reserve_pace(
            db: &Db,
            target: &str,
            now: DateTime<Utc>,
            wanted: u32,
            interval: chrono::Duration,
            horizon: DateTime<Utc>,
        ) -> anyhow::Result<PaceGrant> {
            let step = interval.num_microseconds().unwrap_or(i64::MAX).max(1);
            let mut tx = db.begin_write().await?;
            sqlx::query("INSERT INTO target_control (target) VALUES ($1) ON CONFLICT (target) DO NOTHING")
                .bind(target)
                .execute(&mut *tx)
                .await
                .context("cannot create target_control")?;
            let (next,): (Option<i64>,) = sqlx::query_as("SELECT pace_next_us FROM target_control WHERE target = $1")
                .bind(target)
                .fetch_one(&mut *tx)
                .await
                .context("cannot read the request budget")?;
            let now_us = now.timestamp_micros();
            let end = horizon.timestamp_micros();
            let mut at = next.map_or(now_us, |n| n.max(now_us));
            let mut slots = Vec::new();
            while (slots.len() as u32) < wanted && at <= end {
                slots.push(DateTime::from_timestamp_micros(at).unwrap_or(now));
                at = at.saturating_add(step);
            }
            if !slots.is_empty() {
                sqlx::query("UPDATE target_control SET pace_next_us = $2 WHERE target = $1")
                    .bind(target)
                    .bind(at)
                    .execute(&mut *tx)
                    .await
                    .context("cannot reserve from the request budget")?;
            }
            tx.commit().await.context("cannot commit the request budget")?;
            Ok(PaceGrant { slots, next_free: DateTime::from_timestamp_micros(at).unwrap_or(now) })
        }

        pub async fn take_lease(
            db: &Db,
            role: &str,
            owner: &str,
            now: DateTime<Utc>,
            until: DateTime<Utc>,
        ) -> anyhow::Result<bool> {
            let row: Option<(String,)> = sqlx::query_as(
                "INSERT INTO lease (role, owner, until_at) VALUES ($1, $2, $3)
                 ON CONFLICT (role) DO UPDATE SET owner = excluded.owner, until_at = excluded.until_at
                  WHERE lease.owner = excluded.owner OR lease.until_at < $4
                 RETURNING owner",
            )
            .bind(role)
            .bind(owner)
            .bind(ms(until))
            .bind(ms(now))
            .fetch_optional(db.writer())
            .await
            .context("cannot take the lease")?;
            Ok(row.is_some())
        }

        pub async fn lease_owner(db: &Db, role: &str) -> anyhow::Result<Option<String>> {
            let row: Option<(String,)> = sqlx::query_as("SELECT owner FROM lease WHERE role = $1")
                .bind(role)
                .fetch_optional(db.reader())
                .await
                .context("cannot read the lease")?;
            Ok(row.map(|r| r.0))
        }

        pub async fn give_up_lease(db: &Db, role: &str, owner: &str) -> anyhow::Result<()> {
            sqlx::query("DELETE FROM lease WHERE role = $1 AND owner = $2")
                .bind(role)
                .bind(owner)
                .execute(db.writer())
                .await
                .context("cannot give the lease up")?;
            Ok(())
        }
    }
    postgres {
        pub async fn notify(db: &Db, signal: Signal) -> anyhow::Result<()> {
            let channel = match signal {
                Signal::Work => WORK_CHANNEL,
                Signal::Control => CONTROL_CHANNEL,
            };
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(channel)
                .execute(db.writer())
                .await
                .context("cannot signal the other processes")?;
            Ok(())
        }
    }
}
