//! The runtime: what every feature works with at run time and that belongs to none of them — the clock, the
//! configuration in force ([`SharedConfig`]), who leads a team ([`Leadership`]) and where alerts are announced
//! ([`Notifier`]). It sits beneath the features and holds none of their types: the running engine's parts (the
//! worker's handle, the ingest path, the live feed) are assembled above them, in `features/app.rs`.

pub use crate::clock;

pub mod leadership;

use std::sync::Arc;

pub use self::clock::Clock;
pub use self::leadership::Leadership;
use crate::config::Config;

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
