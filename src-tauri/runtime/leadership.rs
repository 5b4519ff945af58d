//! Leadership: which process does the duties that must be done once for the team.
//!
//! Several `leadline serve` processes may share one PostgreSQL database. Each ingests and delivers, but some work
//! must be done by one of them only: the monitor's judgements (queue age, dead-letter growth, retry budgets,
//! sources' volume) and their announcements, replays' pacing (two processes advancing one replay would double
//! its pace), reconciliation and polling. The process holding the `leader` lease (`store::team`) does them; it
//! renews the lease every [`RENEW_EVERY`], and when it stops renewing (killed, cut off from the database) another
//! process takes the lease once [`LEASE_FOR`] has run out — within about 20 s of the crash.
//!
//! On SQLite there is one process: it always leads.

use std::time::Duration;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::store::Store;

/// The lease's name in the `lease` table.
pub const ROLE: &str = "leader";
/// How long a lease lasts without renewal.
pub const LEASE_FOR: Duration = Duration::from_secs(15);
/// How often the holder renews it (and the others try to take it).
pub const RENEW_EVERY: Duration = Duration::from_secs(5);

/// Whether this process leads now. Cheap to clone.
#[derive(Clone)]
pub struct Leadership {
    leading: watch::Receiver<bool>,
    owner: String,
}

impl Leadership {
    /// A process that always leads (one process on its database, or a test).
    pub fn always() -> Leadership {
        Leadership { leading: watch::channel(true).1, owner: "this process".into() }
    }

    /// Takes part in the election on a shared store: tries to take the lease now (so the answer is known before
    /// any duty starts), then keeps renewing or trying in a task of its own, returned for the caller to abort.
    /// On a store that is not shared it always leads.
    pub async fn start(store: &Store, clock: &Clock, owner: &str) -> (Leadership, Option<tokio::task::JoinHandle<()>>) {
        if !store.is_shared() {
            return (Leadership::always(), None);
        }
        let (tx, rx) = watch::channel(false);
        let leading = try_lead(store, clock, owner).await;
        let _ = tx.send(leading);
        if leading {
            tracing::info!(owner, "this process leads: it runs the monitor's judgements, replays, reconciliation");
        }
        let task = {
            let (store, clock, owner) = (store.clone(), clock.clone(), owner.to_string());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(RENEW_EVERY).await;
                    let leading = try_lead(&store, &clock, &owner).await;
                    if leading != *tx.borrow() {
                        if leading {
                            tracing::info!(owner, "this process now leads (the previous leader stopped renewing)");
                        } else {
                            tracing::warn!(owner, "this process no longer leads (its lease ran out)");
                        }
                        let _ = tx.send(leading);
                    }
                }
            })
        };
        (Leadership { leading: rx, owner: owner.to_string() }, Some(task))
    }

    /// Whether this process does the team's once-only duties now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Resolves when this process leads (at once if it does).
    pub async fn wait(&self) {
        let mut rx = self.leading.clone();
        let _ = rx.wait_for(|l| *l).await;
    }

    /// This process's name in the lease.
    pub fn owner(&self) -> &str {
        &self.owner
    }
}

/// One attempt to take or renew the lease; a database error counts as not leading (another process may take
/// over, and a duty done twice is worse than a duty late by one renewal).
async fn try_lead(store: &Store, clock: &Clock, owner: &str) -> bool {
    let now = clock.now();
    let until = now + chrono::Duration::from_std(LEASE_FOR).unwrap_or_default();
    match store.take_lease(ROLE, owner, now, until).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "cannot renew the leader lease");
            false
        }
    }
}
