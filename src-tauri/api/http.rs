//! HTTP adapter over [`crate::api`]: JSON routes under `/api`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::{ApiError, App};
use crate::dlq::DeadLetterFilter;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self {
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Internal(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (
            status,
            Json(json!({"code": self.code(), "message": self.to_string()})),
        )
            .into_response()
    }
}

pub fn router(app: App) -> Router {
    Router::new()
        .route("/api/health", get(health))
        .route("/api/dead-letters", get(dead_letters))
        .route("/api/dead-letters/{id}", get(dead_letter))
        .with_state(app)
}

async fn health(State(app): State<App>) -> Result<Response, ApiError> {
    Ok(Json(super::health(&app).await?).into_response())
}

async fn dead_letters(
    State(app): State<App>,
    Query(filter): Query<DeadLetterFilter>,
) -> Result<Response, ApiError> {
    Ok(Json(super::dead_letters(&app, &filter).await?).into_response())
}

async fn dead_letter(State(app): State<App>, Path(id): Path<i64>) -> Result<Response, ApiError> {
    Ok(Json(super::dead_letter(&app, id).await?).into_response())
}
