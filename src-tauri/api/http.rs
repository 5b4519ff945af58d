//! HTTP adapter over [`crate::api`]: JSON routes under `/api`, a Server-Sent-Events feed, and the built UI.
//!
//! Browser mode is protected by a token (generated on first run, shown once, stored only as a hash): every
//! mutating call (replay, acknowledge, pause) needs `Authorization: Bearer <token>`. Reads need it too unless the
//! server listens on a loopback address. EventSource cannot send headers, so `?token=` is accepted as well.

use std::convert::Infallible;
use std::time::Duration;

use anyhow::Context;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{ApiError, App, LiveEvent, ReplayRequest};
use crate::dlq::DeadLetterFilter;
use crate::replay::ReplaySelection;
use crate::store::Store;

/// The name the browser token acts under in audits.
pub const BROWSER_ACTOR: &str = "browser token `default`";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self {
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Cancelled => StatusCode::CONFLICT,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Internal(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, Json(json!({"code": self.code(), "message": self.to_string()}))).into_response()
    }
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Creates the browser token on first run. Returns the token when it was just created (to be shown once).
pub async fn ensure_token(store: &Store) -> anyhow::Result<Option<String>> {
    let existing: Option<(String,)> = sqlx::query_as("SELECT name FROM api_token WHERE name = 'default'")
        .fetch_optional(store.read_pool())
        .await
        .context("cannot read api_token")?;
    if existing.is_some() {
        return Ok(None);
    }
    reset_token(store).await.map(Some)
}

/// Replaces the browser token and returns the new one.
pub async fn reset_token(store: &Store) -> anyhow::Result<String> {
    let token = hex::encode(rand::random::<[u8; 24]>());
    sqlx::query(
        "INSERT INTO api_token (name, token_sha256, created_at) VALUES ('default', ?, ?)
         ON CONFLICT (name) DO UPDATE SET token_sha256 = excluded.token_sha256, created_at = excluded.created_at",
    )
    .bind(hash(&token))
    .bind(crate::store::ms(chrono::Utc::now()))
    .execute(store.write_pool())
    .await
    .context("cannot store api_token")?;
    Ok(token)
}

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

async fn require_token(
    State(app): State<App>,
    headers: HeaderMap,
    Query(q): Query<TokenQuery>,
    request: Request,
    next: Next,
) -> Response {
    let mutating = request.method() != Method::GET;
    let loopback = app.config.server.listen.ip().is_loopback();
    if !mutating && loopback {
        return next.run(request).await;
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string)
        .or(q.token);
    let Some(given) = given else {
        return ApiError::Unauthorized("this call needs the browser token: Authorization: Bearer <token>".into())
            .into_response();
    };
    let stored: Option<(String,)> = sqlx::query_as("SELECT token_sha256 FROM api_token WHERE name = 'default'")
        .fetch_optional(app.store.read_pool())
        .await
        .ok()
        .flatten();
    let ok =
        stored.is_some_and(|(h,)| bool::from(subtle::ConstantTimeEq::ct_eq(h.as_bytes(), hash(&given).as_bytes())));
    if !ok {
        tracing::warn!("rejected API call with a wrong token");
        return ApiError::Unauthorized("the browser token is not valid".into()).into_response();
    }
    next.run(request).await
}

pub fn router(app: App) -> Router {
    let api = Router::new()
        .route("/api/session", get(session))
        .route("/api/health", get(health))
        .route("/api/metrics", get(metrics))
        .route("/api/events", get(events))
        .route("/api/dead-letters", get(dead_letters))
        .route("/api/dead-letters/groups", get(dead_letter_groups))
        .route("/api/dead-letters/resolve", post(resolve_dead_letters))
        .route("/api/dead-letters/fix", post(fix_dead_letters))
        .route("/api/dead-letters/{id}", get(dead_letter))
        .route("/api/dead-letters/{id}/edit", post(edit_dead_letter))
        .route("/api/replays/preview", post(replay_preview))
        .route("/api/replays", get(replays).post(replay))
        .route("/api/replays/{id}", get(replay_progress))
        .route("/api/replays/{id}/report", get(replay_report))
        .route("/api/replays/{id}/{action}", post(control_replay))
        .route("/api/alerts", get(alerts))
        .route("/api/alerts/{id}/acknowledge", post(acknowledge))
        .route("/api/sources", get(sources))
        .route("/api/sources/{name}/reconcile", post(reconcile_now))
        .route("/api/figures", get(figures))
        .route("/api/targets", get(targets))
        .route("/api/targets/{name}/preview", get(target_preview))
        .route("/api/targets/{name}/check", post(check_target))
        .route("/api/secrets/reload", post(reload_secrets))
        .route("/api/targets/{name}/pause", post(pause))
        .route("/api/targets/{name}/resume", post(resume))
        .route_layer(middleware::from_fn_with_state(app.clone(), require_token))
        .with_state(app);
    api.fallback(static_ui)
}

async fn session(State(app): State<App>) -> Json<super::Session> {
    Json(super::session(&app))
}

async fn health(State(app): State<App>) -> Result<Response, ApiError> {
    Ok(Json(super::health(&app).await?).into_response())
}

#[derive(Deserialize)]
struct RangeQuery {
    range: Option<String>,
}

async fn metrics(State(app): State<App>, Query(q): Query<RangeQuery>) -> Result<Response, ApiError> {
    Ok(Json(super::metrics(&app, q.range.as_deref().unwrap_or("1h")).await?).into_response())
}

async fn events(State(app): State<App>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut rx = app.live.subscribe();
    let mut closing = app.closing.clone();
    let first = super::health(&app).await.ok().map(|h| LiveEvent::Health(Box::new(h)));
    let stream = async_stream(move |tx| async move {
        if let Some(e) = first {
            if tx.send(e).await.is_err() {
                return;
            }
        }
        loop {
            let next = tokio::select! {
                next = rx.recv() => next,
                // The server is stopping: end the stream so the connection can close.
                _ = closing.wait_for(|c| *c) => return,
            };
            match next {
                Ok(e) => {
                    if tx.send(e).await.is_err() {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// A stream fed by a task through a channel: each live event becomes one SSE `message` with JSON data.
fn async_stream<F, Fut>(producer: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<LiveEvent>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(producer(tx));
    futures_util::stream::unfold(rx, |mut rx| async move {
        let e = rx.recv().await?;
        let event = Event::default().json_data(&e).unwrap_or_else(|_| Event::default().data("{}"));
        Some((Ok(event), rx))
    })
}

async fn dead_letters(State(app): State<App>, Query(filter): Query<DeadLetterFilter>) -> Result<Response, ApiError> {
    Ok(Json(super::dead_letters(&app, &filter).await?).into_response())
}

async fn dead_letter_groups(
    State(app): State<App>,
    Query(filter): Query<DeadLetterFilter>,
) -> Result<Response, ApiError> {
    Ok(Json(super::dead_letter_groups(&app, &filter).await?).into_response())
}

async fn resolve_dead_letters(
    State(app): State<App>,
    Json(request): Json<super::ResolveRequest>,
) -> Result<Response, ApiError> {
    Ok(Json(super::resolve_dead_letters(&app, &request, BROWSER_ACTOR).await?).into_response())
}

async fn fix_dead_letters(
    State(app): State<App>,
    Json(request): Json<super::FixRequest>,
) -> Result<Response, ApiError> {
    Ok(Json(super::fix_dead_letters(&app, &request, BROWSER_ACTOR).await?).into_response())
}

async fn edit_dead_letter(
    State(app): State<App>,
    Path(id): Path<i64>,
    Json(request): Json<super::EditRequest>,
) -> Result<Response, ApiError> {
    Ok(Json(super::edit_dead_letter(&app, id, &request, BROWSER_ACTOR).await?).into_response())
}

async fn replays(State(app): State<App>) -> Result<Response, ApiError> {
    Ok(Json(super::replays(&app).await?).into_response())
}

#[derive(Deserialize)]
struct OutcomeQuery {
    outcome: Option<String>,
}

async fn replay_report(
    State(app): State<App>,
    Path(id): Path<i64>,
    Query(q): Query<OutcomeQuery>,
) -> Result<Response, ApiError> {
    Ok(Json(super::replay_report(&app, id, q.outcome.as_deref()).await?).into_response())
}

async fn control_replay(State(app): State<App>, Path((id, action)): Path<(i64, String)>) -> Result<Response, ApiError> {
    Ok(Json(super::control_replay(&app, id, &action, BROWSER_ACTOR).await?).into_response())
}

async fn dead_letter(State(app): State<App>, Path(id): Path<i64>) -> Result<Response, ApiError> {
    Ok(Json(super::dead_letter(&app, id).await?).into_response())
}

async fn replay_preview(State(app): State<App>, Json(selection): Json<ReplaySelection>) -> Result<Response, ApiError> {
    Ok(Json(super::replay_preview(&app, &selection).await?).into_response())
}

async fn replay(State(app): State<App>, Json(request): Json<ReplayRequest>) -> Result<Response, ApiError> {
    Ok(Json(super::replay(&app, &request, BROWSER_ACTOR).await?).into_response())
}

async fn replay_progress(State(app): State<App>, Path(id): Path<i64>) -> Result<Response, ApiError> {
    Ok(Json(super::replay_progress(&app, id).await?).into_response())
}

async fn alerts(State(app): State<App>) -> Result<Response, ApiError> {
    Ok(Json(super::alerts(&app).await?).into_response())
}

async fn acknowledge(State(app): State<App>, Path(id): Path<i64>) -> Result<Response, ApiError> {
    Ok(Json(super::acknowledge_alert(&app, id, BROWSER_ACTOR).await?).into_response())
}

async fn sources(State(app): State<App>) -> Result<Response, ApiError> {
    Ok(Json(super::sources(&app).await?).into_response())
}

async fn reconcile_now(State(app): State<App>, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(super::reconcile_now(&app, &name).await?).into_response())
}

async fn figures(State(app): State<App>, Query(q): Query<RangeQuery>) -> Result<Response, ApiError> {
    Ok(Json(super::figures(&app, q.range.as_deref().unwrap_or("24h")).await?).into_response())
}

#[derive(serde::Deserialize)]
struct PreviewQuery {
    lead: String,
}

async fn target_preview(
    State(app): State<App>,
    Path(name): Path<String>,
    Query(q): Query<PreviewQuery>,
) -> Result<Response, ApiError> {
    Ok(Json(super::target_preview(&app, &name, &q.lead).await?).into_response())
}

async fn reload_secrets(State(app): State<App>) -> Result<Response, ApiError> {
    Ok(Json(super::reload_secrets(&app, BROWSER_ACTOR).await?).into_response())
}

async fn check_target(State(app): State<App>, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(super::check_target(&app, &name).await?).into_response())
}

async fn targets(State(app): State<App>) -> Result<Response, ApiError> {
    Ok(Json(super::targets(&app).await?).into_response())
}

async fn pause(State(app): State<App>, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(super::set_target_paused(&app, &name, true, BROWSER_ACTOR).await?).into_response())
}

async fn resume(State(app): State<App>, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(super::set_target_paused(&app, &name, false, BROWSER_ACTOR).await?).into_response())
}

/// The built UI (`ui/dist`), embedded in release builds and read from disk in debug builds.
#[derive(rust_embed::RustEmbed)]
#[folder = "ui/dist"]
#[allow_missing = true]
struct UiAssets;

async fn static_ui(uri: axum::http::Uri) -> Response {
    let path = uri.path().trim_start_matches('/');
    if path.starts_with("api/") || path.starts_with("ingest/") {
        return ApiError::NotFound(format!("no route {}", uri.path())).into_response();
    }
    let (file, name) = match UiAssets::get(path).filter(|_| !path.is_empty()) {
        Some(f) => (f, path),
        // A client-side route: the app's shell handles it.
        None => match UiAssets::get("index.html") {
            Some(f) => (f, "index.html"),
            None => {
                return (
                    StatusCode::NOT_FOUND,
                    "The UI is not built. Run `npm --prefix ui ci && npm --prefix ui run build`, then restart.",
                )
                    .into_response()
            }
        },
    };
    let cache = if name.starts_with("assets/") { "public, max-age=31536000, immutable" } else { "no-cache" };
    (
        [(header::CONTENT_TYPE, file.metadata.mimetype().to_string()), (header::CACHE_CONTROL, cache.to_string())],
        file.data,
    )
        .into_response()
}
