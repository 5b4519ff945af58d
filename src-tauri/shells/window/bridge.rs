//! The engine's door for its window: the window runs in a process of its own (`leadline window`, started by the
//! engine process, [`crate::shells::desktop`]'s engine process), and reaches the engine here, on a loopback port with a secret made for this
//! run (handed to the window's process in its environment, never on a command line).
//!
//! - `POST /invoke/{command}` with the page's arguments: the operation answered by [`commands::dispatch`] (native
//!   confirmations are shown by the engine process; an export's file comes back as `{name, body}`), or one of
//!   [`commands::ENGINE_OWN`], as `{"ok": …}` or `{"err": {code, message}}`;
//! - `GET /live`: the live events, one JSON object per line, for the window to pass on to its page.
//!
//! Nothing else listens here: the browser's API is the server's (`[server]`), with its own tokens.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::shells::api::ApiError;
use crate::shells::window::commands::{self, Context};

/// Where the window's process finds the bridge and the secret it shows (environment variables).
pub const ENV_URL: &str = "LEADLINE_BRIDGE_URL";
pub const ENV_SECRET: &str = "LEADLINE_BRIDGE_SECRET";

/// The commands the engine process answers itself ([`commands::ENGINE_OWN`]), not [`commands::dispatch`]: start at
/// login (which the tray shows), whether a system tray shows the icon, and quitting.
pub trait EngineSide: Send + Sync + 'static {
    fn autostart(&self) -> bool;
    fn set_autostart(&self, on: bool) -> Result<bool, String>;
    /// Whether a system tray shows Leadline's icon (without one, the window is where a person quits).
    fn tray_shown(&self) -> bool;
    /// Asks (natively) whether to quit; `true` when the person said yes and Leadline is ending.
    fn quit(&self) -> futures_util::future::BoxFuture<'static, bool>;
}

struct Shared {
    cx: Context,
    secret: String,
    engine: Arc<dyn EngineSide>,
}

/// The bridge's address and secret, for the window's process.
#[derive(Clone)]
pub struct Door {
    pub url: String,
    pub secret: String,
}

/// Listens on a loopback port and answers the window until the process ends.
pub async fn open(cx: Context, engine: Arc<dyn EngineSide>) -> anyhow::Result<Door> {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    let secret = hex::encode(bytes);
    let shared = Arc::new(Shared { cx, secret: secret.clone(), engine });
    let router = Router::new().route("/invoke/{command}", post(invoke)).route("/live", get(live)).with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "the window's bridge stopped");
        }
    });
    Ok(Door { url, secret })
}

fn allowed(shared: &Shared, headers: &HeaderMap) -> bool {
    let given = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(shared.secret.as_bytes())))
}

async fn invoke(
    State(shared): State<Arc<Shared>>,
    Path(command): Path<String>,
    headers: HeaderMap,
    Json(args): Json<Value>,
) -> Response {
    if !allowed(&shared, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let answer = match command.as_str() {
        "autostart" => Ok(Value::Bool(shared.engine.autostart())),
        "set_autostart" => {
            let on = args.get("enabled").and_then(Value::as_bool).unwrap_or(false);
            shared.engine.set_autostart(on).map(Value::Bool).map_err(ApiError::Internal)
        }
        "tray_shown" => Ok(Value::Bool(shared.engine.tray_shown())),
        "quit_app" => Ok(Value::Bool(shared.engine.quit().await)),
        name => commands::dispatch(&shared.cx, name, args).await,
    };
    match answer {
        Ok(v) => Json(json!({ "ok": v })),
        Err(e) => Json(json!({ "err": e })),
    }
    .into_response()
}

async fn live(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !allowed(&shared, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let rx = shared.cx.app.live.subscribe();
    let lines = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(event) => {
                    let mut line = serde_json::to_vec(&event).unwrap_or_default();
                    line.push(b'\n');
                    return Some((Ok::<_, std::convert::Infallible>(line), rx));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    });
    Response::builder()
        .header("content-type", "application/x-ndjson")
        .body(Body::from_stream(lines))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The window's side: calls the bridge.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    door: Door,
}

impl Client {
    /// A client of the bridge at `door`.
    pub fn new(door: Door) -> anyhow::Result<Client> {
        let http = reqwest::Client::builder().no_proxy().build()?;
        Ok(Client { http, door })
    }

    /// The bridge the engine process named in this process's environment.
    pub fn from_env() -> anyhow::Result<Client> {
        let url = std::env::var(ENV_URL)
            .map_err(|_| anyhow::anyhow!("{ENV_URL} is not set: `leadline window` is started by Leadline itself"))?;
        let secret = std::env::var(ENV_SECRET).map_err(|_| anyhow::anyhow!("{ENV_SECRET} is not set"))?;
        Client::new(Door { url, secret })
    }

    /// One command; `Err` carries the error as the page reads it (`{code, message}`).
    pub async fn invoke(&self, command: &str, args: Value) -> Result<Value, Value> {
        let unreachable =
            |e: String| json!({ "code": "internal", "message": format!("Leadline's engine does not answer: {e}") });
        let answer = self
            .http
            .post(format!("{}/invoke/{command}", self.door.url))
            .bearer_auth(&self.door.secret)
            .json(&args)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| unreachable(e.to_string()))?;
        let mut body: Value = answer.json().await.map_err(|e| unreachable(e.to_string()))?;
        match (body.get_mut("ok").map(Value::take), body.get_mut("err").map(Value::take)) {
            (_, Some(err)) => Err(err),
            (Some(ok), None) => Ok(ok),
            (None, None) => Err(unreachable("an answer without a result".into())),
        }
    }

    /// Follows the live events, handing each to `each`, until the engine's stream ends.
    pub async fn follow_live(&self, each: impl Fn(Value)) -> anyhow::Result<()> {
        use futures_util::StreamExt;
        let answer = self
            .http
            .get(format!("{}/live", self.door.url))
            .bearer_auth(&self.door.secret)
            .send()
            .await?
            .error_for_status()?;
        let mut stream = answer.bytes_stream();
        let mut buffer = Vec::new();
        while let Some(chunk) = stream.next().await {
            buffer.extend_from_slice(&chunk?);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                if let Ok(event) = serde_json::from_slice::<Value>(&line) {
                    each(event);
                }
            }
        }
        Ok(())
    }
}
