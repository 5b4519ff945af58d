//! Leadline: durable lead ingest, classified idempotent delivery to CRMs, readable dead letters.
//!
//! `docs/architecture.md` describes the layers and the delivery model. Modules are named for what they do:
//! [`ingest`] receives events, [`pipeline`] turns them into steps, [`delivery`] runs them (worker,
//! classification, backoff, breaker), [`targets`] talks to CRMs, [`store`] persists, [`dlq`] reads dead
//! letters, [`privacy`] masks personal data on its way out, [`api`] is the one surface the shells use, [`server`]
//! assembles them, [`demo`] fakes a world.

pub mod api;
pub mod clock;
pub mod config;
pub mod delivery;
pub mod demo;
#[cfg(feature = "desktop")]
pub mod desktop;
pub mod dlq;
pub mod figures;
pub mod graph;
pub mod ingest;
pub mod model;
pub mod monitor;
pub mod pipeline;
pub mod privacy;
pub mod reconcile;
pub mod replay;
pub mod runtime;
pub mod server;
pub mod store;
pub mod targets;
