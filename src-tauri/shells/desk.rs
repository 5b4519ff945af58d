//! A desk of a team server: the desktop app showing a remote `leadline serve` instead of running a worker.
//!
//! A team runs one or more `leadline serve` processes on a shared PostgreSQL database; each person's desktop app
//! connects to them as a *desk*. The desk runs no worker, no ingest server and no monitor of its own: every read
//! and every act (replay, acknowledgement, pause) is a call to the server's HTTP API under the person's own
//! operator token (`leadline token create NAME`), so the server's audit names them. The token is kept in the OS
//! keyring, never in a file; the only file is the choice itself (`desk.toml` in the app's config folder: "here" or
//! the server's address).
//!
//! This module is the part without a window, so tests can drive it against a real server: the choice file, the
//! server address's checks, the API client ([`DeskLink`]) and the live feed ([`follow`]), which keeps retrying
//! every [`RETRY`] while the server cannot be reached, says when it is lost, stops for good when the server
//! refuses the token, and announces each alert once per desk through a [`Notifier`]. The Tauri side
//! (`shells::desktop::desk`) only adapts it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::features::monitor::health::HealthView;
use crate::model::Place;
use crate::runtime::Notifier;
use crate::shells::api::{ApiError, Session};
use crate::store::AlertState;

/// The file in the app's config folder that remembers the first start's choice.
pub const CHOICE_FILE: &str = "desk.toml";

/// The keyring entry (service `leadline`) that holds the team server's operator token.
pub const TOKEN_ENTRY: &str = "team-server-token";

/// How long the desk waits before it tries the server again after losing it.
pub const RETRY: Duration = Duration::from_secs(3);

/// How long one API call may take before the desk says the server is not answering.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What this computer's app is: the whole of Leadline for one person, or a desk of a team server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Choice {
    /// Runs here: the worker, the ingest server and the embedded SQLite database (just me).
    Here,
    /// A desk of the team server at `server`.
    Team { server: String },
}

/// The choice made at first start, if one was made.
pub fn read_choice(config_dir: &Path) -> anyhow::Result<Option<Choice>> {
    let path = config_dir.join(CHOICE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let choice: Choice = toml::from_str(&text).with_context(|| {
        format!(
            "{} is not a desk choice (mode = \"here\", or mode = \"team\" with server = \"https://…\")",
            path.display()
        )
    })?;
    Ok(Some(choice))
}

/// Whether the desktop app runs Leadline here on this start (the engine process is started for it), as its full
/// decision would say (`shells/desktop/desk.rs`, `decide`), without reading the keyring: an explicit configuration
/// or `--demo`, the first start's choice, else a `leadline.toml` in the config folder.
pub fn runs_here(config_dir: &Path, explicit_here: bool) -> bool {
    explicit_here
        || match read_choice(config_dir) {
            Ok(Some(Choice::Here)) => true,
            Ok(Some(Choice::Team { .. })) | Err(_) => false,
            Ok(None) => config_dir.join("leadline.toml").exists(),
        }
}

/// Remembers the choice (the server's address only: the token goes to the keyring).
pub fn write_choice(config_dir: &Path, choice: &Choice) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(config_dir).with_context(|| format!("cannot create {}", config_dir.display()))?;
    let path = config_dir.join(CHOICE_FILE);
    let text = format!(
        "# What Leadline on this computer is: `here` runs it for one person; `team` is a desk of a team server.\n\
         # Delete this file to be asked again at the next start. (A team server's token is in the OS keyring.)\n{}",
        toml::to_string(choice).context("cannot write the choice")?
    );
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Forgets the choice: the next start asks again.
pub fn forget_choice(config_dir: &Path) -> anyhow::Result<()> {
    let path = config_dir.join(CHOICE_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// A team server's address as a person types it: `https://leadline.example.com` (a path prefix allowed, a
/// trailing slash trimmed). Plain `http://` only to this computer or a private network (10/8, 172.16/12,
/// 192.168/16): elsewhere the token would cross the internet in clear text.
pub fn parse_server(text: &str) -> Result<Url, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the team server's address is empty: it looks like https://leadline.example.com".into());
    }
    let with_scheme = if text.contains("://") { text.to_string() } else { format!("https://{text}") };
    let mut url = Url::parse(&with_scheme).map_err(|e| format!("`{text}` is not an address ({e})"))?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "`{text}` carries a query or fragment: give the server's address only (the token goes in its own field)"
        ));
    }
    let host = url.host().ok_or_else(|| format!("`{text}` names no host"))?;
    match url.scheme() {
        "https" => {}
        "http" if private_host(&host) => {}
        "http" => {
            return Err(format!(
                "`{text}` is plain http to a public address: the token would travel in clear text. Use https://"
            ))
        }
        other => return Err(format!("`{text}`: {other}:// is not http(s)")),
    }
    let path = url.path().trim_end_matches('/').to_string();
    url.set_path(&path);
    Ok(url)
}

fn private_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => *d == "localhost" || d.ends_with(".localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback() || ip.is_private(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// Why the desk cannot use the server.
#[derive(Debug, thiserror::Error)]
pub enum DeskError {
    /// Nothing answered (down, wrong address, no network): worth retrying.
    #[error("cannot reach the team server at {server}: {reason}")]
    Unreachable { server: String, reason: String },
    /// The server refused the token (revoked, replaced, mistyped): a new token is needed.
    #[error("the team server refused the token: {0}")]
    Refused(String),
    /// Something answered, but not as Leadline does.
    #[error("{0}")]
    NotLeadline(String),
}

impl From<DeskError> for ApiError {
    fn from(e: DeskError) -> Self {
        match e {
            DeskError::Refused(_) => ApiError::Unauthorized(e.to_string()),
            DeskError::Unreachable { .. } | DeskError::NotLeadline(_) => ApiError::BadRequest(e.to_string()),
        }
    }
}

/// The desk's HTTP client for one server and one token.
#[derive(Clone)]
pub struct DeskLink {
    server: Url,
    token: String,
    client: reqwest::Client,
}

/// An answer of the server's API, passed to the UI as it came (status and JSON text).
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct DeskAnswer {
    pub status: u16,
    pub body: String,
}

/// What the window needs to know about this computer's app before it shows anything.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct DeskView {
    /// `choose` on a first start (nothing decided yet), `here`, or `team`.
    #[ts(type = "'choose' | 'here' | 'team'")]
    pub mode: String,
    /// The team server's address (team mode).
    pub server: Option<String>,
    /// Why the OS keyring cannot keep a token here, when it cannot (connecting is then refused).
    pub keyring: Option<String>,
    /// What went wrong at the last start in team mode (no token in the keyring, say).
    pub problem: Option<String>,
    /// Team mode: whether the server's live feed is up now (`null` before the first try).
    pub feed_up: Option<bool>,
    /// Team mode: why the server refused the token, once it did (the feed has stopped).
    pub refused: Option<String>,
}

impl DeskLink {
    pub fn new(server: Url, token: &str) -> anyhow::Result<DeskLink> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("leadline-desk/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("cannot build the HTTP client")?;
        Ok(DeskLink { server, token: token.trim().to_string(), client })
    }

    pub fn server(&self) -> &Url {
        &self.server
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.server.as_str().trim_end_matches('/'), path)
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> DeskError {
        DeskError::Unreachable { server: self.server.to_string(), reason: e.to_string() }
    }

    /// Checks the server and the token: the session as the server sees it (who the token is).
    pub async fn check(&self) -> Result<Session, DeskError> {
        let answer = self.call("GET", "/api/session", None).await?;
        if answer.status == 401 {
            return Err(DeskError::Refused(error_message(&answer.body)));
        }
        if answer.status != 200 {
            return Err(DeskError::NotLeadline(format!(
                "{} answered HTTP {} where Leadline's API should be: is it the address `leadline serve` listens on?",
                self.server, answer.status
            )));
        }
        serde_json::from_str(&answer.body)
            .map_err(|_| DeskError::NotLeadline(format!("{} answered, but not as a Leadline server does", self.server)))
    }

    /// One API call (`path` starts with `/api/`), answered with the server's status and body as they came.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<DeskAnswer, DeskError> {
        if !path.starts_with("/api/") || path.contains("..") {
            return Err(DeskError::NotLeadline(format!("`{path}` is not a path of Leadline's API")));
        }
        let method = match method {
            "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            other => return Err(DeskError::NotLeadline(format!("{other} is not a method of Leadline's API"))),
        };
        let mut request = self
            .client
            .request(method, self.url(path))
            .bearer_auth(&self.token)
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(CALL_TIMEOUT);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| self.unreachable(describe(&e)))?;
        let status = response.status().as_u16();
        let body = response.text().await.map_err(|e| self.unreachable(describe(&e)))?;
        Ok(DeskAnswer { status, body })
    }

    /// A file the API serves (a CSV export): its name and its text.
    pub async fn download(&self, path: &str) -> Result<(String, String), ApiError> {
        if !path.starts_with("/api/export/") {
            return Err(ApiError::BadRequest(format!("`{path}` is not an export")));
        }
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(&self.token)
            .timeout(CALL_TIMEOUT * 4)
            .send()
            .await
            .map_err(|e| ApiError::from(self.unreachable(describe(&e))))?;
        let status = response.status();
        let name = response
            .headers()
            .get(reqwest::header::CONTENT_DISPOSITION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split("filename=\"").nth(1))
            .and_then(|v| v.split('"').next())
            .filter(|n| !n.is_empty() && !n.contains(['/', '\\']))
            .unwrap_or("leadline-export.csv")
            .to_string();
        let body = response.text().await.map_err(|e| ApiError::from(self.unreachable(describe(&e))))?;
        if status.as_u16() == 401 {
            return Err(ApiError::Unauthorized(error_message(&body)));
        }
        if !status.is_success() {
            return Err(ApiError::BadRequest(format!(
                "the team server answered HTTP {status}: {}",
                error_message(&body)
            )));
        }
        Ok((name, body))
    }
}

/// A reqwest error with its causes (reqwest's own text says only "error sending request").
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// The `message` of an API error body, else the body itself (shortened).
fn error_message(body: &str) -> String {
    #[derive(Deserialize)]
    struct Body {
        message: String,
    }
    serde_json::from_str::<Body>(body).map(|b| b.message).unwrap_or_else(|_| body.chars().take(200).collect())
}

/// What the live feed tells the window (the Tauri side emits these; tests record them).
pub trait DeskSink: Send + Sync + 'static {
    /// The feed is up (`true`) or lost (`false`, retried every [`RETRY`]); `refused` once the server refuses the
    /// token: the feed then stops.
    fn connection(&self, up: bool, refused: Option<String>);
    /// One live event as the server sent it (`{kind, data}` JSON), passed on to the window unchanged.
    fn live(&self, event: &serde_json::Value);
    /// A health update (for the tray icon).
    fn health(&self, health: &HealthView) {
        let _ = health;
    }
}

/// The part of an alert the desk announces.
#[derive(Debug, Clone, Deserialize)]
pub struct AlertNotice {
    pub id: i64,
    pub state: AlertState,
    pub title: String,
    pub detail: String,
    pub notified_at: Option<String>,
    pub place: Place,
}

/// Which alerts to announce now: each open, unacknowledged alert the server has announced (so quiet hours and digests hold it
/// here too) that this desk has not announced yet. At the first look after the desk starts, what is already
/// open is only remembered — the window shows it, and a restart does not repeat every notification; after a lost
/// connection, what opened meanwhile is announced. Pure.
pub fn to_announce<'a>(seen: &mut HashSet<i64>, alerts: &'a [AlertNotice], first_look: bool) -> Vec<&'a AlertNotice> {
    let mut out = Vec::new();
    for a in alerts {
        if a.state == AlertState::Resolved || a.notified_at.is_none() {
            continue;
        }
        // Someone already on it (acknowledged before this desk saw it): remembered, not announced.
        if seen.insert(a.id) && !first_look && a.state == AlertState::Open {
            out.push(a);
        }
    }
    out
}

/// Follows the server's live feed until the token is refused: passes each event to `sink`, tells it when the
/// feed is up or lost, retries every [`RETRY`], and announces new alerts through `notifier`.
pub async fn follow(link: DeskLink, sink: Arc<dyn DeskSink>, notifier: Arc<dyn Notifier>) {
    let mut seen = HashSet::new();
    let mut first_look = true;
    let mut was_up: Option<bool> = None;
    loop {
        let feed = link
            .client
            .get(link.url("/api/events"))
            .bearer_auth(&link.token)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await;
        let response = match feed {
            Ok(r) if r.status().as_u16() == 401 => {
                let why = error_message(&r.text().await.unwrap_or_default());
                tracing::warn!(server = %link.server, reason = %why, "desk: the team server refused the token");
                sink.connection(false, Some(why));
                return;
            }
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                lost(&link, &sink, &mut was_up, &format!("HTTP {}", r.status()));
                tokio::time::sleep(RETRY).await;
                continue;
            }
            Err(e) => {
                lost(&link, &sink, &mut was_up, &describe(&e));
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        tracing::info!(server = %link.server, "desk: following the team server's live feed");
        was_up = Some(true);
        sink.connection(true, None);
        announce(&link, &notifier, &mut seen, &mut first_look).await;
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        let ended = loop {
            // The server sends a keep-alive every 15 s: silence for much longer means the connection is gone.
            let chunk = match tokio::time::timeout(Duration::from_secs(45), body.next()).await {
                Ok(Some(Ok(chunk))) => chunk,
                Ok(Some(Err(e))) => break describe(&e),
                Ok(None) => break "the server closed the feed".to_string(),
                Err(_) => break "no word from the server for 45 s".to_string(),
            };
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(event) = next_event(&mut buffer) {
                let Ok(value) = serde_json::from_str::<serde_json::Value>(&event) else { continue };
                match value.get("kind").and_then(|k| k.as_str()) {
                    Some("health") => {
                        if let Some(h) = value.get("data").and_then(|d| HealthView::deserialize(d).ok()) {
                            sink.health(&h);
                        }
                    }
                    Some("alerts_changed") => announce(&link, &notifier, &mut seen, &mut first_look).await,
                    _ => {}
                }
                sink.live(&value);
            }
        };
        lost(&link, &sink, &mut was_up, &ended);
        tokio::time::sleep(RETRY).await;
    }
}

fn lost(link: &DeskLink, sink: &Arc<dyn DeskSink>, was_up: &mut Option<bool>, why: &str) {
    if *was_up != Some(false) {
        tracing::warn!(server = %link.server, reason = why, "desk: cannot reach the team server, retrying every 3 s");
    }
    *was_up = Some(false);
    sink.connection(false, None);
}

async fn announce(link: &DeskLink, notifier: &Arc<dyn Notifier>, seen: &mut HashSet<i64>, first_look: &mut bool) {
    let alerts = match link.call("GET", "/api/alerts", None).await {
        Ok(a) if a.status == 200 => a,
        Ok(a) => {
            tracing::warn!(status = a.status, "desk: cannot read the team server's alerts");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "desk: cannot read the team server's alerts");
            return;
        }
    };
    let alerts: Vec<AlertNotice> = match serde_json::from_str(&alerts.body) {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "desk: the team server's alerts are not in the expected shape");
            return;
        }
    };
    for a in to_announce(seen, &alerts, *first_look) {
        tracing::info!(alert = a.id, title = %a.title, "desk: announcing the team server's alert");
        notifier.notify_at(&a.title, &a.detail, &a.place);
    }
    *first_look = false;
}

/// Takes the next complete Server-Sent Event's data out of `buffer` (the `data:` lines joined), skipping comments
/// and keep-alives; `None` until a whole event has arrived.
pub fn next_event(buffer: &mut String) -> Option<String> {
    loop {
        let normalized_end = buffer.find("\n\n").map(|i| (i, 2)).or_else(|| buffer.find("\r\n\r\n").map(|i| (i, 4)));
        let (end, sep) = normalized_end?;
        let block: String = buffer[..end].to_string();
        buffer.drain(..end + sep);
        let data: Vec<&str> =
            block.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        if !data.is_empty() {
            return Some(data.join("\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_are_checked_before_a_token_is_sent() {
        assert_eq!(parse_server("leadline.example.com").unwrap().as_str(), "https://leadline.example.com/");
        assert_eq!(parse_server(" https://example.com/leadline/ ").unwrap().as_str(), "https://example.com/leadline");
        assert!(parse_server("http://127.0.0.1:8080").is_ok());
        assert!(parse_server("http://192.168.1.20:8080").is_ok());
        assert!(parse_server("http://localhost:8080").is_ok());
        let public = parse_server("http://leadline.example.com").unwrap_err();
        assert!(public.contains("clear text"), "{public}");
        assert!(parse_server("").unwrap_err().contains("empty"));
        assert!(parse_server("https://x.example/?token=abc").unwrap_err().contains("token goes in its own field"));
        assert!(parse_server("ftp://x.example").is_err());
    }

    #[test]
    fn the_choice_is_a_small_file_without_the_token() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_choice(dir.path()).unwrap(), None);
        let team = Choice::Team { server: "https://leadline.example.com".into() };
        write_choice(dir.path(), &team).unwrap();
        assert_eq!(read_choice(dir.path()).unwrap(), Some(team));
        write_choice(dir.path(), &Choice::Here).unwrap();
        assert_eq!(read_choice(dir.path()).unwrap(), Some(Choice::Here));
        forget_choice(dir.path()).unwrap();
        assert_eq!(read_choice(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join(CHOICE_FILE), "mode = \"elsewhere\"").unwrap();
        assert!(format!("{:#}", read_choice(dir.path()).unwrap_err()).contains("is not a desk choice"));
    }

    #[test]
    fn server_sent_events_are_split_on_blank_lines() {
        let mut buffer = String::from(": keep-alive\n\ndata: {\"kind\":\"alerts_changed\"}\n\ndata: {\"kind\":");
        assert_eq!(next_event(&mut buffer).as_deref(), Some("{\"kind\":\"alerts_changed\"}"));
        assert_eq!(next_event(&mut buffer), None);
        buffer.push_str("\"health\"}\r\n\r\n");
        assert_eq!(next_event(&mut buffer).as_deref(), Some("{\"kind\":\"health\"}"));
        assert!(buffer.is_empty());
    }

    fn notice(id: i64, state: AlertState, announced: bool) -> AlertNotice {
        AlertNotice {
            id,
            state,
            title: format!("alert {id}"),
            detail: String::new(),
            notified_at: announced.then(|| "2026-12-02T00:00:00Z".into()),
            place: Place::page(crate::model::Page::Alerts),
        }
    }

    #[test]
    fn each_alert_is_announced_once_per_desk_and_not_again_at_start() {
        let mut seen = HashSet::new();
        let before = [notice(1, AlertState::Open, true)];
        assert!(to_announce(&mut seen, &before, true).is_empty(), "open at start: shown, not announced");
        let later = [
            notice(1, AlertState::Open, true),
            notice(2, AlertState::Open, true),
            notice(3, AlertState::Open, false),
            notice(4, AlertState::Resolved, true),
            notice(5, AlertState::Acknowledged, true),
        ];
        let ids: Vec<i64> = to_announce(&mut seen, &later, false).iter().map(|a| a.id).collect();
        assert_eq!(ids, [2], "new and announced by the server; held (3), resolved (4), acknowledged (5) are not");
        assert!(to_announce(&mut seen, &later, false).is_empty(), "never twice");
        let released = [notice(3, AlertState::Open, true)];
        assert_eq!(to_announce(&mut seen, &released, false).len(), 1, "announced once the server releases it");
    }
}
