//! Ingest: receive events over HTTP, check them, and commit them before answering.
//!
//! `POST /ingest/{source}` takes a generic JSON event or a Meta Lead Ads notification (by the source's kind);
//! `GET /ingest/{source}` answers Meta's subscription handshake. A request is answered 202 only after its
//! events are committed; exact duplicates (same source, id and content) get 200 and store nothing, while a generic
//! source's lead sent again with different content is stored as its next revision and delivered again (202). Concurrent requests are
//! committed together by one writer task (group commit), so durability costs one disk sync per batch, not
//! per request.

pub mod body;
pub mod google;
pub mod hubspot_v3;
pub mod id;
pub mod meta;
pub mod peer;
pub mod refusals;
pub mod signature;
pub mod stage;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::clock::Clock;
use crate::config::{Config, GoogleAdsSourceSettings, SourceConfig, SourceKind, SourceSettings};
use crate::features::pipeline;
use crate::store::{InsertOutcome, NewEvent, OnChange, Store};

/// Every way an ingest request can fail, each with its HTTP status. Serialised as `{code, message}`.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("unknown source `{0}`")]
    UnknownSource(String),
    #[error("missing signature header {0}")]
    MissingSignature(String),
    #[error("signature in {0} does not match the body")]
    BadSignature(String),
    #[error("the request's timestamp ({0}) is more than 5 minutes old: refused as a replay")]
    StaleSignature(String),
    #[error("body is not valid JSON: {0}")]
    MalformedJson(String),
    #[error("{0}")]
    MissingId(String),
    #[error("{0}")]
    InvalidId(String),
    #[error("Content-Type must be application/json (got {0})")]
    UnsupportedMediaType(String),
    #[error("body is larger than the limit of {0} bytes")]
    TooLarge(usize),
    #[error("the body did not arrive within {0} s")]
    BodyTimeout(u64),
    #[error("the body arrived slower than the minimum of {0} bytes a second; send it again")]
    TooSlow(u64),
    #[error("too many webhook bodies are being received at once; send it again shortly")]
    Busy,
    #[error("{limit} webhook bodies from {client} are already on their way; send it again once they are in")]
    TooManyFromPeer { client: IpAddr, limit: usize },
    #[error("the verify token does not match")]
    VerifyTokenMismatch,
    #[error("google_key is missing from the body")]
    MissingKey,
    #[error("google_key does not match the key of this source")]
    BadKey,
    #[error("{0}")]
    BadRequest(String),
    #[error("the event could not be stored; nothing was accepted, send it again")]
    Storage,
    #[error("{0}")]
    UnknownLead(String),
    #[error("{0}")]
    NotDeliveredYet(String),
}

impl IngestError {
    fn status(&self) -> StatusCode {
        match self {
            IngestError::UnknownSource(_) => StatusCode::NOT_FOUND,
            IngestError::MissingSignature(_)
            | IngestError::BadSignature(_)
            | IngestError::StaleSignature(_)
            | IngestError::MissingKey
            | IngestError::BadKey => StatusCode::UNAUTHORIZED,
            IngestError::MalformedJson(_) | IngestError::BadRequest(_) => StatusCode::BAD_REQUEST,
            IngestError::MissingId(_) | IngestError::InvalidId(_) => StatusCode::UNPROCESSABLE_ENTITY,
            IngestError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            IngestError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            IngestError::BodyTimeout(_) | IngestError::TooSlow(_) => StatusCode::REQUEST_TIMEOUT,
            IngestError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            IngestError::TooManyFromPeer { .. } => StatusCode::TOO_MANY_REQUESTS,
            IngestError::VerifyTokenMismatch => StatusCode::FORBIDDEN,
            IngestError::Storage => StatusCode::SERVICE_UNAVAILABLE,
            IngestError::UnknownLead(_) => StatusCode::UNPROCESSABLE_ENTITY,
            IngestError::NotDeliveredYet(_) => StatusCode::CONFLICT,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            IngestError::UnknownSource(_) => "unknown_source",
            IngestError::MissingSignature(_) => "missing_signature",
            IngestError::BadSignature(_) => "bad_signature",
            IngestError::StaleSignature(_) => "stale_signature",
            IngestError::MalformedJson(_) => "malformed_json",
            IngestError::MissingId(_) => "missing_id",
            IngestError::InvalidId(_) => "invalid_id",
            IngestError::UnsupportedMediaType(_) => "unsupported_media_type",
            IngestError::TooLarge(_) => "too_large",
            IngestError::BodyTimeout(_) => "body_timeout",
            IngestError::TooSlow(_) => "body_too_slow",
            IngestError::Busy => "busy",
            IngestError::TooManyFromPeer { .. } => "too_many_bodies",
            IngestError::VerifyTokenMismatch => "verify_token_mismatch",
            IngestError::MissingKey => "missing_key",
            IngestError::BadKey => "bad_key",
            IngestError::BadRequest(_) => "bad_request",
            IngestError::Storage => "storage_unavailable",
            IngestError::UnknownLead(_) => "unknown_lead",
            IngestError::NotDeliveredYet(_) => "lead_not_delivered",
        }
    }
}

impl IntoResponse for IngestError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = (status, Json(json!({"code": self.code(), "message": self.to_string()}))).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("5"));
        }
        if matches!(
            self,
            IngestError::BodyTimeout(_)
                | IngestError::TooSlow(_)
                | IngestError::Busy
                | IngestError::TooManyFromPeer { .. }
                | IngestError::TooLarge(_)
                | IngestError::UnknownSource(_)
                | IngestError::UnsupportedMediaType(_)
        ) {
            // The body is refused unread (or half read): end the connection rather than keep a slow sender or
            // leave its bytes to be taken for the next request.
            response
                .headers_mut()
                .insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
        }
        response
    }
}

struct SourceRuntime {
    config: SourceConfig,
    /// HMAC secret (generic `signature.secret_env`, or Meta's app secret).
    secret: Option<Vec<u8>>,
    /// Header carrying the signature.
    signature_header: Option<String>,
    /// `signature.scheme = "hubspot_v3"`: the URL HubSpot calls, which the signature covers (the secret is the
    /// app's client secret in `secret`; the headers are HubSpot's own).
    hubspot_v3_url: Option<String>,
    verify_token: Option<String>,
    /// `google_ads`: the key Google sends back in each lead's `google_key`.
    google_key: Option<String>,
    /// Largest accepted body (the source's own limit, else the server's).
    max_body_bytes: usize,
    /// What a changed repeat of a lead means: a new revision for generic sources, a duplicate for Meta's.
    on_change: OnChange,
    /// `crm_stage`: each conversion step of the route and the CRM stages it maps.
    stage_steps: Vec<(String, std::collections::BTreeSet<String>)>,
}

#[derive(Clone)]
pub struct IngestState {
    /// The sources in force: the settings page replaces them while Leadline runs ([`IngestState::reconfigure`]);
    /// a request reads the set in force when it arrives.
    sources: Arc<std::sync::RwLock<Arc<BTreeMap<String, SourceRuntime>>>>,
    writer: mpsc::Sender<WriteRequest>,
    /// Turns to read a body larger than [`body::SMALL_BODY_BYTES`] (`server.max_ingest_in_flight`): a body is
    /// buffered whole before its signature can be checked, so the bytes large bodies of requests not yet
    /// authenticated hold are at most that × the largest body. Smaller ones need no turn (see [`body`]).
    large_bodies: Arc<tokio::sync::Semaphore>,
    large_bodies_limit: usize,
    /// The rate and time a body must keep to.
    body_rules: body::BodyRules,
    /// Who sent a request: the connection's address, or a trusted proxy's word for it.
    proxies: Arc<peer::Proxies>,
    /// Bodies on their way per sender (`server.max_bodies_per_peer`).
    peers: Arc<peer::PeerCounts>,
    refusals: Arc<refusals::RefusalLog>,
    /// When an event is received.
    clock: Clock,
    /// Read by `crm_stage` sources: the lead a stage change belongs to.
    store: Store,
}

struct WriteRequest {
    events: Vec<NewEvent>,
    reply: oneshot::Sender<anyhow::Result<Vec<InsertOutcome>>>,
}

impl IngestState {
    /// Resolves secrets (failing with the config key when one is missing) and starts the group-commit writer.
    /// `wake` is notified after every commit that stored something new, so the worker picks it up at once.
    pub fn new(config: &Config, store: Store, wake: Arc<Notify>, clock: Clock) -> anyhow::Result<IngestState> {
        let sources = resolve_sources(config)?;
        let (writer, rx) = mpsc::channel(8192);
        tokio::spawn(group_commit_writer(store.clone(), rx, wake));
        Ok(IngestState {
            sources: Arc::new(std::sync::RwLock::new(Arc::new(sources))),
            writer,
            large_bodies: Arc::new(tokio::sync::Semaphore::new(config.server.max_ingest_in_flight)),
            large_bodies_limit: config.server.max_ingest_in_flight,
            body_rules: body::BodyRules {
                min_rate: config.server.min_body_bytes_per_second,
                stall: std::time::Duration::from_secs(config.server.body_stall_seconds),
                timeout: std::time::Duration::from_secs(config.server.body_timeout_seconds),
            },
            proxies: Arc::new(peer::Proxies::new(
                config.server.trusted_proxy_networks()?,
                config.server.forwarded_header,
            )),
            peers: peer::PeerCounts::new(config.server.max_bodies_per_peer),
            refusals: Arc::default(),
            clock,
            store,
        })
    }

    /// Puts the sources of `config` in force (their secrets read again); fails, changing nothing, when a secret is
    /// missing. Requests already being read finish with the source as it was when they arrived.
    pub fn reconfigure(&self, config: &Config) -> anyhow::Result<()> {
        let sources = resolve_sources(config)?;
        *self.sources.write().expect("sources lock") = Arc::new(sources);
        Ok(())
    }

    fn sources(&self) -> Arc<BTreeMap<String, SourceRuntime>> {
        self.sources.read().expect("sources lock").clone()
    }

    /// Webhook bodies being received now, from every sender (counted from admission until read whole).
    pub fn bodies_on_their_way(&self) -> usize {
        self.peers.total()
    }

    /// Turns for large bodies (`server.max_ingest_in_flight`) held now.
    pub fn large_body_turns_taken(&self) -> usize {
        self.large_bodies_limit - self.large_bodies.available_permits()
    }

    /// Logs a refusal an attack may repeat by the thousand: one line per kind every [`refusals::EVERY`].
    fn log_refusal(&self, error: &IngestError, source: &str, client: IpAddr) {
        let Some(unlogged) = self.refusals.note(error.code(), tokio::time::Instant::now()) else { return };
        let setting = match error {
            IngestError::TooSlow(_) => "server.min_body_bytes_per_second, server.body_stall_seconds",
            IngestError::TooManyFromPeer { .. } => "server.max_bodies_per_peer",
            IngestError::Busy => "server.max_ingest_in_flight",
            IngestError::BodyTimeout(_) => "server.body_timeout_seconds",
            _ => "",
        };
        tracing::warn!(
            source = ?source,
            client = %client,
            code = error.code(),
            setting,
            not_logged_since_last_line = unlogged,
            "refused a webhook: {error} (at most one line like it every {} s)",
            refusals::EVERY.as_secs()
        );
    }

    /// Stores events through the group-commit writer, exactly as a webhook's events are (reconciliation uses it).
    pub async fn submit(&self, events: Vec<NewEvent>) -> Result<Vec<InsertOutcome>, IngestError> {
        self.store(events).await
    }

    async fn store(&self, events: Vec<NewEvent>) -> Result<Vec<InsertOutcome>, IngestError> {
        let (reply, rx) = oneshot::channel();
        self.writer.send(WriteRequest { events, reply }).await.map_err(|_| IngestError::Storage)?;
        match rx.await {
            Ok(Ok(outcomes)) => Ok(outcomes),
            Ok(Err(e)) => {
                tracing::error!(error = %format!("{e:#}"), "ingest write failed");
                Err(IngestError::Storage)
            }
            Err(_) => Err(IngestError::Storage),
        }
    }
}

/// Every source's signature secret and verify token, read from the environment; fails naming the config key of a
/// missing variable. `check-config` runs it too.
fn resolve_sources(config: &Config) -> anyhow::Result<BTreeMap<String, SourceRuntime>> {
    let mut sources = BTreeMap::new();
    let updatable: std::sync::Arc<[String]> =
        config.targets.iter().filter(|(_, t)| t.updates_records()).map(|(name, _)| name.clone()).collect();
    for (name, sc) in &config.sources {
        let key = format!("sources.{name}");
        if matches!(&sc.settings, SourceSettings::Meta(m) if m.app_secret_env.is_none()) {
            // Only polled (the configuration allows no other Meta source without its app secret): with nothing to
            // check a signature against it takes no webhooks, and a request for it is answered like an unknown one.
            continue;
        }
        let google_key = match &sc.settings {
            SourceSettings::GoogleAds(GoogleAdsSourceSettings { key_env: Some(var), .. }) => {
                Some(config.secret(&format!("{key}.key_env"), var)?)
            }
            _ => None,
        };
        let hubspot_v3_url = sc
            .signature()
            .filter(|sig| sig.scheme == crate::config::SignatureScheme::HubspotV3)
            .and_then(|sig| sig.url.clone());
        let (secret, signature_header, verify_token) = match &sc.settings {
            SourceSettings::GoogleAds(_) => (None, None, None),
            SourceSettings::Generic(_) | SourceSettings::CrmStage(_) => match sc.signature() {
                Some(sig) => (
                    Some(config.secret(&format!("{key}.signature.secret_env"), &sig.secret_env)?.into_bytes()),
                    Some(sig.header.clone()),
                    None,
                ),
                None => (None, None, None),
            },
            SourceSettings::Meta(meta) => {
                let app = meta.app_secret_env.as_deref().unwrap_or_default();
                let verify = meta.verify_token_env.as_deref().unwrap_or_default();
                (
                    Some(config.secret(&format!("{key}.app_secret_env"), app)?.into_bytes()),
                    Some("X-Hub-Signature-256".to_string()),
                    Some(config.secret(&format!("{key}.verify_token_env"), verify)?),
                )
            }
        };
        let max_body_bytes = sc.max_body_bytes.unwrap_or(config.server.max_body_bytes);
        let on_change = match sc.kind() {
            SourceKind::Generic => OnChange::Revise(updatable.clone()),
            // The same stage of the same lead again is the same conversion: sent once.
            SourceKind::CrmStage => OnChange::Ignore,
            // Google sends a lead again only when its first post was not answered: the same lead.
            SourceKind::Meta | SourceKind::GoogleAds => OnChange::Ignore,
        };
        let stage_steps = match sc.kind() {
            SourceKind::CrmStage => sc
                .route
                .iter()
                .filter_map(|t| {
                    let stages = config.targets.get(t)?.conversions().map(|c| c.stages.keys().cloned().collect());
                    Some((t.clone(), stages.unwrap_or_default()))
                })
                .collect(),
            _ => Vec::new(),
        };
        sources.insert(
            name.clone(),
            SourceRuntime {
                stage_steps,
                config: sc.clone(),
                secret,
                signature_header,
                hubspot_v3_url,
                verify_token,
                google_key,
                max_body_bytes,
                on_change,
            },
        );
    }
    Ok(sources)
}

/// Each source's kind-specific settings, checked by the kind's own `check` (`google_ads`: [`google::check`],
/// `crm_stage`: [`stage::check`]); the configuration's validation has checked what every source shares and the
/// `generic` and `meta` kinds' settings. Fails naming the key.
pub fn check_kinds(config: &Config) -> Result<(), crate::config::ConfigError> {
    for (name, source) in &config.sources {
        let key = format!("sources.{name}");
        match source.kind() {
            SourceKind::GoogleAds => google::check(&key, source)?,
            SourceKind::CrmStage => stage::check(&key, source, config)?,
            SourceKind::Generic | SourceKind::Meta => {}
        }
    }
    Ok(())
}

/// Checks that every source's secrets are set, as starting the server would.
pub fn check_sources(config: &Config) -> anyhow::Result<()> {
    resolve_sources(config).map(|_| ())
}

/// Largest number of events committed in one transaction.
const MAX_GROUP: usize = 512;

async fn group_commit_writer(store: Store, mut rx: mpsc::Receiver<WriteRequest>, wake: Arc<Notify>) {
    let mut requests: Vec<WriteRequest> = Vec::with_capacity(64);
    while rx.recv_many(&mut requests, 256).await > 0 {
        // Commit in groups of at most MAX_GROUP events, never splitting one request.
        while !requests.is_empty() {
            let mut end = 0;
            let mut n = 0;
            while end < requests.len() && (n == 0 || n + requests[end].events.len() <= MAX_GROUP) {
                n += requests[end].events.len();
                end += 1;
            }
            let group: Vec<WriteRequest> = requests.drain(..end).collect();
            let all: Vec<NewEvent> = group.iter().flat_map(|r| r.events.iter().cloned()).collect();
            match store.insert_events(&all).await {
                Ok(outcomes) => {
                    let new = outcomes.iter().any(InsertOutcome::is_new);
                    if new {
                        wake.notify_one();
                    }
                    let mut it = outcomes.into_iter();
                    for r in group {
                        let mine: Vec<InsertOutcome> = it.by_ref().take(r.events.len()).collect();
                        let _ = r.reply.send(Ok(mine));
                    }
                    // Team mode: the other processes' workers wake too (one signal per commit, after the answers).
                    if new && store.is_shared() {
                        if let Err(e) = store.signal(crate::store::Signal::Work).await {
                            tracing::warn!(error = %format!("{e:#}"), "cannot wake the other processes");
                        }
                    }
                }
                Err(e) => {
                    let msg = format!("{e:#}");
                    for r in group {
                        let _ = r.reply.send(Err(anyhow::anyhow!(msg.clone())));
                    }
                }
            }
        }
    }
}

pub fn router(state: IngestState) -> Router {
    Router::new().route("/ingest/{source}", get(verify_subscription).post(receive)).with_state(state)
}

#[derive(Serialize)]
struct Accepted {
    status: &'static str,
    accepted: usize,
    duplicates: usize,
    /// Leads sent again with different content: stored as a new revision and delivered again.
    revised: usize,
    events: Vec<EventRef>,
    /// Meta changes that could not be used (the valid ones beside them were stored).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rejected: Vec<meta::RejectedChange>,
}

/// Whether the request declares a JSON body (`application/json`, or a `+json` type). A web page can post
/// `text/plain` or a form to another origin without asking first; it cannot send JSON there without a CORS
/// preflight, which this server never grants. So a foreign page cannot inject leads, signed source or not.
fn declares_json(headers: &HeaderMap) -> Result<(), IngestError> {
    let given =
        headers.get(axum::http::header::CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let essence =
        given.as_deref().unwrap_or_default().split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json")) {
        Ok(())
    } else {
        Err(IngestError::UnsupportedMediaType(given.map(|g| format!("{g:?}")).unwrap_or_else(|| "none".into())))
    }
}

#[derive(Serialize)]
struct EventRef {
    event_id: i64,
    source_ref: String,
    duplicate: bool,
    /// A changed repeat: the lead's new revision number (2 for the first change).
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<i64>,
}

async fn receive(
    State(state): State<IngestState>,
    Path(source): Path<String>,
    connection: Option<Extension<ConnectInfo<SocketAddr>>>,
    method: axum::http::Method,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, IngestError> {
    let sources = state.sources();
    let Some(src) = sources.get(&source) else {
        tracing::warn!(source = ?source, "rejected: unknown source");
        return Err(IngestError::UnknownSource(source));
    };
    declares_json(&headers)?;
    let announced = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_some_and(|n| n > src.max_body_bytes) {
        return Err(IngestError::TooLarge(src.max_body_bytes));
    }
    // `serve` gives every request its connection's address; a router served some other way counts all its
    // requests as one sender.
    let tcp_peer = connection.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |Extension(ConnectInfo(a))| a.ip());
    let client = state.proxies.client(tcp_peer, &headers);
    let Some(on_its_way) = state.peers.admit(client) else {
        let refused = IngestError::TooManyFromPeer { client, limit: state.peers.limit() };
        state.log_refusal(&refused, &source, client);
        return Err(refused);
    };
    let received = match body::read(body, announced, src.max_body_bytes, state.body_rules, &state.large_bodies).await {
        Ok(received) => received,
        Err(e) => {
            if matches!(e, IngestError::TooSlow(_) | IngestError::Busy | IngestError::BodyTimeout(_)) {
                state.log_refusal(&e, &source, client);
            }
            return Err(e);
        }
    };
    // In: the sender's count goes down; a large body keeps its turn until it is answered (its bytes are held).
    drop(on_its_way);
    let raw: &[u8] = &received.bytes;
    if let (Some(secret), Some(url)) = (&src.secret, &src.hubspot_v3_url) {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let (given, sent) = (header(hubspot_v3::SIGNATURE_HEADER), header(hubspot_v3::TIMESTAMP_HEADER));
        if let Err(e) = hubspot_v3::verify(secret, method.as_str(), url, raw, given, sent, state.clock.now()) {
            tracing::warn!(source = ?source, reason = ?e, "rejected: HubSpot signature v3 check failed");
            let names = format!("{} / {}", hubspot_v3::SIGNATURE_HEADER, hubspot_v3::TIMESTAMP_HEADER);
            return Err(match e {
                signature::SignatureError::Missing => IngestError::MissingSignature(names),
                signature::SignatureError::Stale => IngestError::StaleSignature(sent.unwrap_or_default().to_string()),
                _ => IngestError::BadSignature(hubspot_v3::SIGNATURE_HEADER.to_string()),
            });
        }
    } else if let (Some(secret), Some(header)) = (&src.secret, &src.signature_header) {
        let given = headers.get(header.as_str()).and_then(|v| v.to_str().ok());
        if let Err(e) = signature::verify(secret, raw, given) {
            tracing::warn!(source = ?source, reason = ?e, "rejected: signature check failed");
            return Err(match e {
                signature::SignatureError::Missing => IngestError::MissingSignature(header.clone()),
                _ => IngestError::BadSignature(header.clone()),
            });
        }
    }
    let text = std::str::from_utf8(raw).map_err(|e| IngestError::MalformedJson(format!("not UTF-8: {e}")))?;
    let now = state.clock.now();
    let mut rejected = Vec::new();
    let events: Vec<NewEvent> = match src.config.kind() {
        SourceKind::Generic => {
            let json: Value = serde_json::from_str(text).map_err(|e| IngestError::MalformedJson(e.to_string()))?;
            if !json.is_object() {
                return Err(IngestError::BadRequest("expected a JSON object".into()));
            }
            let field = &src.config.id_field;
            let source_ref = id::event_id(text, field).map_err(|e| match e {
                id::IdError::Missing | id::IdError::NotText => IngestError::MissingId(format!(
                    "no event id: field `{field}` is missing, empty or not a string/number"
                )),
                other => {
                    tracing::warn!(source = ?source, reason = %other, "rejected: invalid event id");
                    IngestError::InvalidId(format!("event id in `{field}`: {other}"))
                }
            })?;
            let event = pipeline::new_event(&source, &src.config, source_ref, json, now);
            vec![NewEvent { on_change: src.on_change.clone(), ..event }]
        }
        SourceKind::Meta => {
            let notification = meta::leads(text).map_err(|e| match e {
                meta::MetaBodyError::Malformed(m) => IngestError::MalformedJson(m),
                meta::MetaBodyError::NotAnObject => IngestError::BadRequest("expected a JSON object".into()),
            })?;
            for r in &notification.rejected {
                tracing::warn!(source = ?source, entry = r.entry, change = r.change, reason = %r.reason, "rejected one change of a Meta notification");
            }
            if notification.leads.is_empty() && !notification.rejected.is_empty() {
                let reasons: Vec<String> = notification
                    .rejected
                    .iter()
                    .map(|r| format!("entry[{}].changes[{}]: {}", r.entry, r.change, r.reason))
                    .collect();
                return Err(IngestError::InvalidId(reasons.join("; ")));
            }
            rejected = notification.rejected;
            notification
                .leads
                .into_iter()
                .map(|l| pipeline::new_event(&source, &src.config, l.leadgen_id, l.payload, now))
                .collect()
        }
        SourceKind::CrmStage => {
            let json: Value = serde_json::from_str(text).map_err(|e| IngestError::MalformedJson(e.to_string()))?;
            match stage_event(&state.store, &source, src, &json, now).await? {
                Some(event) => vec![event],
                None => {
                    // A stage no conversion step maps: acknowledged, so the CRM does not send it again.
                    return Ok((
                        StatusCode::OK,
                        Json(json!({"status": "ignored", "accepted": 0, "duplicates": 0, "revised": 0, "events": [],
                            "reason": "no conversion step of this source maps this stage"})),
                    )
                        .into_response());
                }
            }
        }
        SourceKind::GoogleAds => {
            let lead = google::lead(text, now).map_err(|e| match e {
                google::GoogleBodyError::Malformed(m) => IngestError::MalformedJson(m),
                google::GoogleBodyError::NotAnObject => IngestError::BadRequest("expected a JSON object".into()),
                google::GoogleBodyError::LeadId(e) => IngestError::MissingId(format!("no usable lead_id: {e}")),
            })?;
            // The key is checked before anything is stored; a missing lead_id of a body without the key is
            // answered 422 above, which tells a stranger nothing about the key.
            let expected = src.google_key.as_deref().unwrap_or_default();
            match lead.key.as_deref() {
                None => {
                    tracing::warn!(source = ?source, "rejected: google_key missing");
                    return Err(IngestError::MissingKey);
                }
                Some(given) if !bool::from(subtle::ConstantTimeEq::ct_eq(given.as_bytes(), expected.as_bytes())) => {
                    tracing::warn!(source = ?source, "rejected: google_key does not match");
                    return Err(IngestError::BadKey);
                }
                Some(_) => {}
            }
            let mut event = pipeline::new_event(&source, &src.config, lead.lead_id, lead.payload, now);
            let deliver_tests = matches!(&src.config.settings, SourceSettings::GoogleAds(g) if g.deliver_test_leads);
            if lead.is_test && !deliver_tests {
                // A test lead (the form editor's "send test data") is stored and shown, and goes nowhere.
                tracing::info!(source = ?source, "a Google test lead: stored, not delivered (deliver_test_leads = false)");
                event.route = Vec::new();
            }
            vec![event]
        }
    };
    if events.is_empty() {
        // A Meta notification with no lead in it (another field): acknowledge so Meta does not retry.
        return Ok((
            StatusCode::OK,
            Json(Accepted { status: "ignored", accepted: 0, duplicates: 0, revised: 0, events: vec![], rejected }),
        )
            .into_response());
    }
    let refs: Vec<String> = events.iter().map(|e| e.source_ref.clone()).collect();
    let outcomes = state.store(events).await?;
    let (mut accepted, mut duplicates, mut revised) = (0, 0, 0);
    let events: Vec<EventRef> = outcomes
        .into_iter()
        .zip(refs)
        .map(|(o, source_ref)| {
            let event_id = o.event_id();
            match o {
                InsertOutcome::Inserted(_) => {
                    accepted += 1;
                    EventRef { event_id, source_ref, duplicate: false, revision: None }
                }
                InsertOutcome::Duplicate(_) => {
                    duplicates += 1;
                    EventRef { event_id, source_ref, duplicate: true, revision: None }
                }
                InsertOutcome::Revised { revision, not_updated, .. } => {
                    revised += 1;
                    tracing::info!(source = ?source, source_ref = ?source_ref, revision, "a lead came again, changed: delivering its new revision");
                    for target in &not_updated {
                        tracing::warn!(source = ?source, source_ref = ?source_ref, revision, target = %target, "this target cannot update a record: the CRM keeps the lead's earlier content there (it was sent, or is being sent)");
                    }
                    EventRef { event_id, source_ref, duplicate: false, revision: Some(revision) }
                }
            }
        })
        .collect();
    let (status, word) =
        if accepted + revised > 0 { (StatusCode::ACCEPTED, "accepted") } else { (StatusCode::OK, "duplicate") };
    Ok((status, Json(Accepted { status: word, accepted, duplicates, revised, events, rejected })).into_response())
}

/// The event of a CRM stage change: the lead it belongs to must be one Leadline delivered. Its source ref is
/// `{lead source}:{lead ref}:{stage}`, so the same stage of the same lead sent twice is stored — and sent — once.
/// `None`: no conversion step of the route maps the stage.
async fn stage_event(
    store: &Store,
    source: &str,
    src: &SourceRuntime,
    body: &Value,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<NewEvent>, IngestError> {
    let cfg = match &src.config.settings {
        SourceSettings::CrmStage(c) => c.stage_webhook.clone(),
        _ => Default::default(),
    };
    let change = stage::read(body, &cfg, now).map_err(IngestError::MissingId)?;
    let storage = |e: anyhow::Error| {
        tracing::error!(error = %format!("{e:#}"), "cannot look up a stage change's lead");
        IngestError::Storage
    };
    let mut event_id = None;
    if let Some((lead_source, lead_ref)) = change.external_id.as_deref().and_then(|x| x.split_once(':')) {
        event_id = store.event_of(lead_source, lead_ref).await.map_err(storage)?;
    }
    if event_id.is_none() {
        if let Some(crm_id) = &change.crm_id {
            event_id = store.lead_of_crm_record(crm_id).await.map_err(storage)?;
        }
    }
    let who = change
        .external_id
        .clone()
        .map(|x| format!("lead `{x}`"))
        .or_else(|| change.crm_id.as_ref().map(|c| format!("CRM record `{c}`")))
        .unwrap_or_default();
    let Some(event_id) = event_id else {
        tracing::warn!(source = ?source, "refused: a stage change for a lead Leadline never received");
        return Err(IngestError::UnknownLead(format!(
            "{who} is not a lead Leadline delivered: no stage of it can go back to the ad platforms"
        )));
    };
    let lead = store
        .lead_story(event_id)
        .await
        .map_err(storage)?
        .ok_or_else(|| IngestError::UnknownLead(format!("{who} is not a lead Leadline delivered")))?;
    if !lead.steps.iter().any(|s| s.state == "delivered") {
        return Err(IngestError::NotDeliveredYet(format!(
            "{who} has not been delivered yet: send the stage again once it is in the CRM"
        )));
    }
    let route: Vec<String> =
        src.stage_steps.iter().filter(|(_, stages)| stages.contains(&change.stage)).map(|(t, _)| t.clone()).collect();
    if route.is_empty() {
        tracing::info!(source = ?source, stage = %change.stage, "a stage no conversion step maps: ignored");
        return Ok(None);
    }
    let crm_id = change.crm_id.clone().or_else(|| lead.steps.iter().find_map(|s| s.crm_id.clone()));
    let payload = json!({
        "stage": change.stage,
        "changed_at": change.changed_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "crm": cfg.crm_name,
        "crm_id": crm_id,
        "value": change.value,
        "lead_source": lead.source,
        "lead_ref": lead.source_ref,
        "lead_at": lead.lead_at.unwrap_or(lead.received_at).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "lead": lead.payload,
    });
    let source_ref = format!("{}:{}:{}", lead.source, lead.source_ref, change.stage);
    let mut event = pipeline::new_event(source, &src.config, source_ref, payload, now);
    event.route = route;
    event.lead_at = Some(change.changed_at);
    Ok(Some(event))
}

async fn verify_subscription(
    State(state): State<IngestState>,
    Path(source): Path<String>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Result<Response, IngestError> {
    let sources = state.sources();
    let Some(src) = sources.get(&source) else {
        return Err(IngestError::UnknownSource(source));
    };
    let Some(expected) = &src.verify_token else {
        return Err(IngestError::BadRequest(format!(
            "source `{source}` is not a Meta source: there is no subscription handshake"
        )));
    };
    if params.get("hub.mode").map(String::as_str) != Some("subscribe") {
        return Err(IngestError::BadRequest("hub.mode must be `subscribe`".into()));
    }
    let challenge =
        params.get("hub.challenge").ok_or_else(|| IngestError::BadRequest("hub.challenge is missing".into()))?;
    let given = params.get("hub.verify_token").map(String::as_bytes).unwrap_or_default();
    if !bool::from(subtle::ConstantTimeEq::ct_eq(given, expected.as_bytes())) {
        tracing::warn!(source = ?source, "rejected: Meta verify token mismatch");
        return Err(IngestError::VerifyTokenMismatch);
    }
    Ok((StatusCode::OK, challenge.clone()).into_response())
}
