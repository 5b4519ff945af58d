//! Leadline: durable lead ingest, classified idempotent delivery to CRMs, readable dead letters.
//!
//! `docs/architecture.md` describes the layers and the delivery model. The folders are the layers, bottom up:
//!
//! - [`platform`] (what the desk asks of the OS: keyring, tray, dialog, start at login — importing nothing of the
//!   app), [`model`] (domain words and pure functions, with [`model::privacy`]'s masks), [`clock`] and [`config`];
//! - [`store`]: every operation on the database, on SQLite or PostgreSQL;
//! - [`runtime`]: the shared state the features' loops and the API work with;
//! - [`features`]: [`ingest`] receives events, [`pipeline`] turns them into steps, [`delivery`] runs them
//!   (worker, classification, backoff, breaker), [`targets`] talks to CRMs, [`graph`] to Meta's Graph API,
//!   [`dlq`] reads dead letters, [`replay`] sends them back, [`monitor`] watches, [`reconcile`] recovers missed
//!   leads, [`figures`] sums up;
//! - [`shells`]: [`api`] (the one surface the UI uses, and its HTTP adapter), [`server`] (assembles a
//!   process), the desktop window; `main.rs` is the command line.
//!
//! [`demo`] fakes a world (mock CRMs, synthetic traffic) beside them. The features and shells are re-exported
//! at the crate root (`leadline::delivery`, `leadline::api`…).

/// mimalloc for every binary that links the library (the app, its tests, the benchmark): with glibc's allocator,
/// `malloc`, `free` and their consolidation took about 15 % of the CPU a delivery costs (`perf` on the engine
/// benchmark's drain), most of it from small short-lived buffers (HTTP requests, rows, JSON). Built without
/// transparent huge pages (`no_thp`): with them, where the kernel has THP always on, `leadline serve --demo`
/// held 41 MiB of anonymous memory after 20 s instead of 11 (2 MiB pages for mostly empty segments).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod clock;
pub mod config;
pub mod demo;
pub mod features;
pub mod model;
pub mod platform;
pub mod runtime;
pub mod shells;
pub mod store;

pub use features::{
    contact, delivery, dlq, figures, graph, ingest, monitor, pipeline, poll, reconcile, replay, targets,
};
pub use model::privacy;
#[cfg(feature = "desktop")]
pub use shells::desktop;
pub use shells::{api, server};

/// What both binaries log when `RUST_LOG` does not say: Leadline's own information, only the warnings of the
/// database driver and the HTTP library.
pub fn default_log_filter() -> String {
    format!("info,{},hyper=warn", store::DRIVER_LOG_LEVELS)
}
