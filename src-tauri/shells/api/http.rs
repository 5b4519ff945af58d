//! HTTP adapter over [`crate::shells::api`]: JSON routes under `/api`, a Server-Sent-Events feed, and the built UI.
//!
//! Browser mode is protected by a token (generated on first run, shown once, stored only as a hash). Every `/api`
//! route, reads and the live feed included, needs it: as `Authorization: Bearer <token>` (API clients), or as the
//! `HttpOnly`, `SameSite=Strict` session cookie the first link sets (the browser UI; `EventSource` sends it too).
//! The token is accepted in a URL only on that first page load, which redirects it out of the address at once.
//! [`protect`] wraps the whole surface: requests naming a foreign `Host` are refused (DNS rebinding), and every
//! answer carries security headers.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, RawPathParams, RawQuery, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::{Extension, Json, Router};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::operations::{self, Caller, Operation, Reply};
use crate::features::app::{App, LiveEvent};
use crate::store::Store;

/// The name the browser token acts under in audits.
pub use super::tokens::BROWSER_ACTOR;

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

/// Creates the browser token on first run, at `now`. Returns the token when it was just created (to be shown once).
pub async fn ensure_token(store: &Store, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<Option<String>> {
    if store.api_token_hash().await?.is_some() {
        return Ok(None);
    }
    reset_token(store, now).await.map(Some)
}

/// Replaces the browser token at `now` and returns the new one.
pub async fn reset_token(store: &Store, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<String> {
    let token = hex::encode(rand::random::<[u8; 24]>());
    store.set_api_token_hash(&super::tokens::hash(&token), now).await?;
    Ok(token)
}

/// The cookie the browser UI authenticates with after its first link: the token itself, `HttpOnly` (no script
/// reads it) and `SameSite=Strict` (no other site's page sends it).
pub const SESSION_COOKIE: &str = "leadline_session";

/// How long the browser keeps its session cookie: 400 days, the longest browsers allow. `leadline reset-token`
/// ends every session at once (the cookie holds the token).
const SESSION_MAX_AGE_SECONDS: u64 = 400 * 24 * 3600;

/// The token of an `Authorization: Bearer <token>` header; the scheme is matched case-insensitively.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The value of the session cookie, if the request carries it.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, value)| *name == SESSION_COOKIE && !value.is_empty())
        .map(|(_, value)| value)
}

/// Whether `given` is a working operator token (the browser token or a person's).
async fn token_is_valid(app: &App, given: &str) -> bool {
    matches!(super::tokens::operator(&app.store, given).await, Ok(Some(_)))
}

/// Who made an `/api` request: the operator as audits name them, and their token's hash (the live feed checks
/// it is still good while it stays open).
#[derive(Debug, Clone)]
pub struct Operator {
    pub actor: String,
    token_sha256: String,
}

/// A cookie-authenticated change must come from Leadline's own page: browsers name the page's origin in
/// `Origin` and `Sec-Fetch-Site`, and `SameSite=Strict` does not stop another port of the same host (a
/// different origin, but the same "site") from sending the cookie with a form post.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return false;
        }
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(origin) => {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let authority = origin.split_once("://").map(|(_, rest)| rest).unwrap_or("");
            !host.is_empty() && authority.eq_ignore_ascii_case(host)
        }
    }
}

/// Every `/api` route needs the operator's credential: `Authorization: Bearer <token>` (API clients) or the
/// session cookie set by the first link (the browser UI). The token is never taken from the query string here:
/// only the first page load carries it (see [`static_ui`]).
async fn require_token(State(app): State<App>, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let (given, by_cookie) = match (bearer_token(headers), session_cookie(headers)) {
        (Some(t), _) => (t, false),
        (None, Some(c)) => (c, true),
        (None, None) => {
            return ApiError::Unauthorized(
                "this call needs the operator's credential: Authorization: Bearer <token>, or open the link \
                 `leadline serve` printed"
                    .into(),
            )
            .into_response()
        }
    };
    let Ok(Some(actor)) = super::tokens::operator(&app.store, given).await else {
        tracing::warn!(path = ?request.uri().path(), "rejected API call with a wrong token");
        return ApiError::Unauthorized(
            "this token is not valid (revoked, replaced, or mistyped): ask for a new one (`leadline token create`)"
                .into(),
        )
        .into_response();
    };
    let operator = Operator { actor, token_sha256: super::tokens::hash(given) };
    let reading = matches!(*request.method(), Method::GET | Method::HEAD);
    if by_cookie && !reading && !same_origin(headers) {
        tracing::warn!(origin = ?headers.get(header::ORIGIN), "rejected a cross-origin change made with the session cookie");
        return ApiError::Unauthorized("changes are accepted only from Leadline's own page".into()).into_response();
    }
    request.extensions_mut().insert(operator);
    next.run(request).await
}

/// Which `Host` names requests may carry. A web page on another name that resolves to this server (DNS
/// rebinding) names its own host and is refused; IP addresses and `localhost` cannot be rebound.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    names: Vec<String>,
}

impl HostPolicy {
    pub fn new(config: &crate::config::ServerConfig) -> HostPolicy {
        HostPolicy {
            names: config.allowed_hosts.iter().map(|h| h.trim_end_matches('.').to_ascii_lowercase()).collect(),
        }
    }

    /// Whether a `Host` header value (`name`, `name:port`, `[v6]:port`) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        let name = if let Some(rest) = host.strip_prefix('[') {
            match rest.split_once(']') {
                Some((v6, port)) if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) => {
                    return v6.parse::<std::net::Ipv6Addr>().is_ok()
                }
                _ => return false,
            }
        } else {
            match host.rsplit_once(':') {
                Some((name, port)) if is_port(port) => name,
                Some(_) => return false,
                None => host,
            }
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if name.is_empty() {
            return false;
        }
        name.parse::<std::net::Ipv4Addr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.names.contains(&name)
    }
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

async fn check_host(State(policy): State<std::sync::Arc<HostPolicy>>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if policy.allows(&h) => next.run(request).await,
        other => {
            tracing::warn!(host = ?other, path = ?request.uri().path(), "rejected: Host is not an allowed name");
            (
                StatusCode::FORBIDDEN,
                Json(json!({
                    "code": "host_not_allowed",
                    "message": "this server does not answer to that host name; add it to server.allowed_hosts if a \
                                proxy forwards it",
                })),
            )
                .into_response()
        }
    }
}

/// Browser protections on every answer: no MIME sniffing, no framing, no referrer, and a content policy that
/// allows the built UI (its own scripts and styles, inline styles for the charts) and nothing else.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    for (name, value) in [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        h.entry(name).or_insert(axum::http::HeaderValue::from_static(value));
    }
    response
}

/// Wraps the whole HTTP surface (ingest, API, UI): the `Host` check, then security headers on every answer.
pub fn protect(router: Router, config: &crate::config::ServerConfig) -> Router {
    router
        .layer(middleware::from_fn_with_state(std::sync::Arc::new(HostPolicy::new(config)), check_host))
        .layer(middleware::map_response(security_headers))
}

/// The routes: one per operation of the registry ([`super::operations`]), behind the operator's credential with the
/// live feed; and, open, the probes and the built UI (with the first link's sign-in).
pub fn router(app: App) -> Router {
    let api = operation_routes()
        .route("/api/events", get(events))
        .route_layer(middleware::from_fn_with_state(app.clone(), require_token))
        // Probes for a process manager or load balancer: no credential, nothing about leads.
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(static_ui);
    api.with_state(app)
}

/// A route per operation, at its method and path; one path may serve several methods (`/api/settings`).
fn operation_routes() -> Router<App> {
    let mut paths: BTreeMap<&'static str, MethodRouter<App>> = BTreeMap::new();
    for op in operations::all() {
        let handler = move |State(app): State<App>,
                            Extension(who): Extension<Operator>,
                            params: RawPathParams,
                            RawQuery(query): RawQuery,
                            headers: HeaderMap,
                            body: Bytes| serve(op, app, who, params, query, headers, body);
        let route = paths.remove(op.path).unwrap_or_default();
        let route = match op.method {
            operations::Method::Get => route.get(handler),
            operations::Method::Post => route.post(handler),
            operations::Method::Put => route.put(handler),
        };
        paths.insert(op.path, route);
    }
    paths.into_iter().fold(Router::new(), |router, (path, route)| router.route(path, route))
}

/// One operation over HTTP: its arguments are the JSON body's fields, then the query's, then the path's (each
/// later one wins), read as [`operations::call`] reads the window's. A refusal is answered 422 with its body; a
/// file as an attachment.
async fn serve(
    op: &'static Operation,
    app: App,
    who: Operator,
    params: RawPathParams,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut args = Map::new();
    if !body.is_empty() {
        if !json_content_type(&headers) {
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Json(json!({"code": "unsupported_media_type", "message": "the body must be JSON (Content-Type: application/json)"})),
            )
                .into_response();
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(fields)) => args = fields,
            Ok(Value::Null) => {}
            Ok(_) => return ApiError::BadRequest("the body must be a JSON object".into()).into_response(),
            Err(e) => return ApiError::BadRequest(format!("the body is not JSON: {e}")).into_response(),
        }
    }
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        args.insert(key.into_owned(), Value::String(value.into_owned()));
    }
    for (key, value) in &params {
        args.insert(key.to_string(), Value::String(value.to_string()));
    }
    let cx = Caller { app, actor: who.actor, confirm: None };
    match op.run(cx, Value::Object(args)).await {
        Ok(Reply::Answer(answer)) => Json(answer).into_response(),
        Ok(Reply::Refusal(answer)) => (StatusCode::UNPROCESSABLE_ENTITY, Json(answer)).into_response(),
        Ok(Reply::File(file)) => csv_file(file.name, file.body),
        Err(e) => e.into_response(),
    }
}

/// `application/json`, or a `+json` type, with any parameters.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Liveness: the process serves HTTP.
async fn healthz() -> Response {
    (StatusCode::OK, Json(serde_json::json!({"status": "alive"}))).into_response()
}

/// Readiness: the database answers within two seconds, the worker runs (when this process has one) and the
/// server is not shutting down. `503` with the reason otherwise.
async fn readyz(State(app): State<App>) -> Response {
    let not_ready = |reason: String| {
        (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"status": "not ready", "reason": reason})))
            .into_response()
    };
    if *app.closing.borrow() {
        return not_ready("shutting down".into());
    }
    match tokio::time::timeout(std::time::Duration::from_secs(2), app.store.ping()).await {
        Err(_) => return not_ready("the database did not answer within 2 s".into()),
        Ok(Err(e)) => return not_ready(format!("{e:#}")),
        Ok(Ok(())) => {}
    }
    if app.worker.as_ref().is_some_and(|w| w.is_stopping()) {
        return not_ready("the delivery worker is stopping".into());
    }
    let worker = if app.worker.is_some() { "running" } else { "none in this process" };
    (StatusCode::OK, Json(serde_json::json!({"status": "ready", "database": "ok", "worker": worker}))).into_response()
}

/// The live feed. It ends when the server stops, and when its token stops working (revoked or replaced): the
/// page's reconnection is then refused, and it says why.
async fn events(
    State(app): State<App>,
    Extension(who): Extension<Operator>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut rx = app.live.subscribe();
    let mut closing = app.closing.clone();
    let store = app.store.clone();
    let mut recheck = tokio::time::interval(super::tokens::LIVE_FEED_RECHECK);
    let first = super::health(&app).await.ok().map(|h| LiveEvent::Health(Box::new(h)));
    let stream = async_stream(move |tx| async move {
        if let Some(e) = first {
            if tx.send(e).await.is_err() {
                return;
            }
        }
        loop {
            let next = tokio::select! {
                next = rx.recv() => Some(next),
                // The server is stopping: end the stream so the connection can close.
                _ = closing.wait_for(|c| *c) => return,
                _ = recheck.tick() => None,
            };
            let Some(next) = next else {
                if !matches!(store.operator_of(&who.token_sha256).await, Ok(Some(_))) {
                    tracing::info!(operator = %who.actor, "live feed closed: its token no longer works");
                    return;
                }
                continue;
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

/// A CSV file for the browser to save (`Content-Disposition: attachment`).
fn csv_file(name: String, body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
        ],
        body,
    )
        .into_response()
}

/// The built UI (`ui/dist`), embedded in release builds and read from disk in debug builds.
#[derive(rust_embed::RustEmbed)]
#[folder = "ui/dist"]
#[allow_missing = true]
struct UiAssets;

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

/// The built UI. The first link (`/?token=…`, printed by `leadline serve`) is the one place the token travels in
/// a URL: a page load that carries a valid one gets the session cookie and is redirected to the same address
/// without it, so the token leaves the address bar and the history at once and the page never sees it.
async fn static_ui(
    State(app): State<App>,
    method: Method,
    headers: HeaderMap,
    uri: axum::http::Uri,
    Query(q): Query<TokenQuery>,
) -> Response {
    let path = uri.path().trim_start_matches('/');
    if path.starts_with("api/") || path.starts_with("ingest/") {
        return ApiError::NotFound(format!("no route {}", uri.path())).into_response();
    }
    if let (&Method::GET, Some(token)) = (&method, q.token.as_deref()) {
        return sign_in(&app, &headers, &uri, token).await;
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

async fn sign_in(app: &App, headers: &HeaderMap, uri: &axum::http::Uri, token: &str) -> Response {
    if !token_is_valid(app, token).await {
        tracing::warn!("rejected a sign-in link with a wrong token");
        return (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "This link's token is not valid (any more). Run `leadline reset-token` for a new link.",
        )
            .into_response();
    }
    let rest: Vec<&str> =
        uri.query().unwrap_or_default().split('&').filter(|p| !p.is_empty() && !p.starts_with("token=")).collect();
    let location = if rest.is_empty() { uri.path().to_string() } else { format!("{}?{}", uri.path(), rest.join("&")) };
    // Behind a TLS-terminating proxy the cookie is also marked Secure.
    let https = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()) == Some("https");
    let cookie = format!(
        "{SESSION_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_MAX_AGE_SECONDS}{}",
        if https { "; Secure" } else { "" }
    );
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, location), (header::SET_COOKIE, cookie), (header::CACHE_CONTROL, "no-store".into())],
    )
        .into_response()
}
