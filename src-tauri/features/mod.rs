//! The features: what Leadline does, each over the store and the runtime. Ingest receives events, the pipeline
//! turns them into steps, delivery runs them through the targets (CRMs) and the Graph API step, dead letters are
//! read (dlq) and sent back (replay), the monitor watches, reconciliation recovers missed leads, polling
//! asks sources without webhooks for their new leads, figures sum up, settings edits the configuration in the app.
//! `checks` runs the configuration's validation and then each feature's checks of the kinds it owns.

pub mod app;
pub mod checks;
pub mod contact;
pub mod delivery;
pub mod dlq;
pub mod figures;
pub mod graph;
pub mod ingest;
pub mod monitor;
pub mod pipeline;
pub mod poll;
pub mod reconcile;
pub mod replay;
pub mod settings;
pub mod targets;
