//! The single surface the outside world uses: plain async functions with serde DTOs. The HTTP routes (and,
//! later, the desktop commands) are thin adapters over these.

pub mod http;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::Config;
use crate::delivery::breaker::BreakerState;
use crate::delivery::worker::WorkerHandle;
use crate::dlq::{self, DeadLetter, DeadLetterDetail, DeadLetterFilter};
use crate::store::{QueueHealth, Store};

/// What the API needs: the store, the configuration, and the running worker (if this process runs one).
#[derive(Clone)]
pub struct App {
    pub store: Store,
    pub config: Arc<Config>,
    pub worker: Option<WorkerHandle>,
}

/// Errors at the API boundary, serialised as `{code, message}`; the UI branches on `code`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::NotFound(_) => "not_found",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        tracing::error!(error = %format!("{e:#}"), "api error");
        ApiError::Internal(format!("{e:#}"))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BreakerView {
    pub target: String,
    pub state: BreakerState,
    pub opened_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HealthView {
    #[serde(flatten)]
    pub queue: QueueHealth,
    /// Breaker state per target, as this process's worker sees it (empty when no worker runs here).
    pub breakers: Vec<BreakerView>,
}

pub async fn health(app: &App) -> Result<HealthView, ApiError> {
    let targets: Vec<String> = app.config.targets.keys().cloned().collect();
    let queue = app.store.queue_health(Utc::now(), &targets).await?;
    let breakers = app
        .worker
        .as_ref()
        .map(|w| {
            w.targets
                .iter()
                .map(|(name, t)| {
                    let (state, opened_at) = t.breaker_state();
                    BreakerView {
                        target: name.clone(),
                        state,
                        opened_at,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(HealthView { queue, breakers })
}

#[derive(Debug, Clone, Serialize)]
pub struct DeadLetterList {
    pub items: Vec<DeadLetter>,
    /// Open dead letters by class, over everything (not only this page).
    pub open_by_class: BTreeMap<String, i64>,
}

pub async fn dead_letters(
    app: &App,
    filter: &DeadLetterFilter,
) -> Result<DeadLetterList, ApiError> {
    if let Some(c) = &filter.class {
        if crate::delivery::classify::ErrorClass::parse(c).is_none() {
            return Err(ApiError::BadRequest(format!(
                "unknown class `{c}`: use transient, rate_limited, permanent_data, permanent_config or ambiguous"
            )));
        }
    }
    let items = dlq::list(&app.store, filter).await?;
    let targets: Vec<String> = app.config.targets.keys().cloned().collect();
    let open_by_class = app
        .store
        .queue_health(Utc::now(), &targets)
        .await?
        .overall
        .dead_open_by_class;
    Ok(DeadLetterList {
        items,
        open_by_class,
    })
}

pub async fn dead_letter(app: &App, delivery_id: i64) -> Result<DeadLetterDetail, ApiError> {
    dlq::detail(&app.store, delivery_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no delivery with id {delivery_id}")))
}
