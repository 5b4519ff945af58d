//! The running engine's parts, in the one value the features' loops and the API share ([`App`]): the store, the
//! configuration in force, the clock, the worker's handle, the ingest path, the live feed the UI listens to
//! ([`LiveEvent`]), the notifier, leadership. It is assembled by the shells (`shells::server`) from the features'
//! parts; the runtime beneath it holds none of them.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::features::delivery::worker::WorkerHandle;
use crate::features::ingest::IngestState;
use crate::features::monitor::health::HealthView;
use crate::runtime::{Clock, Leadership, Notifier, SharedConfig};
use crate::store::Store;

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
