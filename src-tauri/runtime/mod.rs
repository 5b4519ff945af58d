//! The runtime: the shared state every feature's loop and the API work with — the store, the configuration, the
//! clock, the live feed, the notifier, the ingest path, the worker's handle, when the process started. It sits
//! beneath the features (monitor, reconcile, replay's runner and the API take an [`App`]); only the shells and
//! the API build one.

pub use crate::clock;

pub mod leadership;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::broadcast;

pub use self::clock::Clock;
pub use self::leadership::Leadership;
use crate::config::Config;
use crate::features::delivery::worker::WorkerHandle;
use crate::features::ingest::IngestState;
use crate::features::monitor::health::HealthView;
use crate::store::Store;

/// Where alerts are announced: desktop notifications in the app, the log in `leadline serve`.
pub trait Notifier: Send + Sync + 'static {
    fn notify(&self, title: &str, body: &str);

    /// A notification about something at `place` (an alert's source, target or dead-letter group): where it can,
    /// a click on it opens Leadline there (the desktop app); elsewhere it is [`Self::notify`].
    fn notify_at(&self, title: &str, body: &str, place: &crate::model::Place) {
        let _ = place;
        self.notify(title, body)
    }
}

/// What the API needs: the store, the configuration, the running worker (if this process runs one), and the
/// live feed the UI listens to.
#[derive(Clone)]
pub struct App {
    pub store: Store,
    /// The configuration in force: settings saved in the app replace it while Leadline runs.
    pub config: SharedConfig,
    /// What time it is: every decision's `now` comes from here.
    pub clock: Clock,
    pub worker: Option<WorkerHandle>,
    pub live: broadcast::Sender<LiveEvent>,
    /// The ingest path (reconciliation feeds recovered leads through it).
    pub ingest: IngestState,
    /// Where alerts are announced.
    pub notifier: Arc<dyn Notifier>,
    /// When this process started.
    pub started_at: DateTime<Utc>,
    /// Since when the monitor takes Leadline to have been listening to its sources: volume is judged only over
    /// that time, and a silence is measured from it at the earliest. In a real run this is the start: the
    /// minutes Leadline was down say nothing about a source, and must not count as its silence. Only the demo
    /// sets it earlier (see `StartOptions::listened_before`).
    pub listening_since: DateTime<Utc>,
    /// The built-in demo is running (mock CRM and synthetic traffic): the UI says so.
    pub demo: bool,
    /// Becomes `true` when the server shuts down: long-lived responses (the live feed) end then.
    pub closing: tokio::sync::watch::Receiver<bool>,
    /// Whether this process does the team's once-only duties (monitor judgements, replays, reconciliation,
    /// polling); always on SQLite. See [`leadership`].
    pub leadership: Leadership,
}

/// The configuration in force, shared by every clone of [`App`]: the settings page replaces it while Leadline runs
/// (`features::settings::apply`), and whoever reads it next reads the new one.
///
/// It dereferences to a plain `&Config`, so the features read `app.config.targets` as before and need no lock
/// around their reads. That is possible because a configuration, once in force, is never freed: a reader may
/// still hold a `&Config` into the old one while it is replaced. The cost is the old configuration's few
/// kilobytes per save a person makes, which is why this is not used for anything that changes on its own.
#[derive(Clone)]
pub struct SharedConfig {
    current: Arc<std::sync::RwLock<&'static Config>>,
    generation: Arc<tokio::sync::watch::Sender<u64>>,
}

impl SharedConfig {
    pub fn new(config: Config) -> SharedConfig {
        SharedConfig {
            current: Arc::new(std::sync::RwLock::new(Box::leak(Box::new(config)))),
            generation: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// Puts `config` in force; loops that set themselves up from the configuration learn it from [`Self::changes`].
    pub fn replace(&self, config: Config) {
        *self.current.write().expect("config lock") = Box::leak(Box::new(config));
        self.generation.send_modify(|g| *g += 1);
    }

    /// Changes whenever a new configuration is put in force.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

impl std::ops::Deref for SharedConfig {
    type Target = Config;

    fn deref(&self) -> &Config {
        *self.current.read().expect("config lock")
    }
}

/// Pushed to the UI when something changed, so it does not poll in a tight loop.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum LiveEvent {
    Health(Box<HealthView>),
    AlertsChanged,
    ReplayChanged {
        replay_id: i64,
    },
    /// A reconciliation ran.
    SourcesChanged,
}
