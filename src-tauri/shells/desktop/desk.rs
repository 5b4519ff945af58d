//! The window's side of a desk of a team server ([`crate::shells::desk`]): the first start's choice, the commands
//! the UI's desk backend calls (every API call goes through [`desk_call`] with the token from the keyring, so the
//! token never enters the web page), the live feed passed to the window as the same `live` events the local app
//! emits, the feed's state as `desk-connection`, the tray icon, and notifications from the server's alerts.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tauri::{Emitter, Manager};

use super::tray::Tray;
use super::{CommandResult, DesktopNotifier};
use crate::features::monitor::glance::{Glance, GlanceLevel};
use crate::features::monitor::health::HealthView;
use crate::platform::keyring;
use crate::shells::api::ApiError;
use crate::shells::desk::{self, Choice, DeskAnswer, DeskLink, DeskSink, DeskView};

/// What this run of the app is, as decided at start (and changed by the first start's choice).
pub enum Mode {
    Here,
    Team(DeskLink),
    Choose { server: Option<String>, problem: Option<String> },
}

/// The live feed's last state: up or not, and why the server refused the token if it did.
pub type Feed = Arc<Mutex<Option<(bool, Option<String>)>>>;

/// The desk's managed state: the mode, where the choice file lives, the feed's state.
pub struct DeskState {
    pub mode: Mutex<Mode>,
    pub config_dir: PathBuf,
    pub feed: Feed,
}

impl DeskState {
    fn view(&self) -> DeskView {
        let feed = self.feed.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mode = self.mode.lock().unwrap_or_else(|e| e.into_inner());
        let (name, server, problem) = match &*mode {
            Mode::Here => ("here", None, None),
            Mode::Team(link) => ("team", Some(link.server().to_string()), None),
            Mode::Choose { server, problem } => ("choose", server.clone(), problem.clone()),
        };
        DeskView {
            mode: name.into(),
            server: server.map(|s| s.trim_end_matches('/').to_string()),
            keyring: keyring::unavailable(),
            problem,
            feed_up: feed.as_ref().map(|(up, _)| *up),
            refused: feed.and_then(|(_, why)| why),
        }
    }

    fn link(&self) -> CommandResult<DeskLink> {
        match &*self.mode.lock().unwrap_or_else(|e| e.into_inner()) {
            Mode::Team(link) => Ok(link.clone()),
            _ => Err(ApiError::BadRequest("this app is not connected to a team server".into())),
        }
    }
}

/// How this run starts. An explicit configuration (`--config`, `LEADLINE_CONFIG`) or `--demo` runs here; else the
/// first start's choice; else an existing `leadline.toml` in the config folder (set up before desks existed)
/// runs here; else the window asks. A team choice reads its token from the keyring (blocking: at start only).
pub fn decide(config_dir: &std::path::Path, explicit_here: bool) -> Mode {
    if explicit_here {
        return Mode::Here;
    }
    match desk::read_choice(config_dir) {
        Ok(Some(Choice::Here)) => Mode::Here,
        Ok(Some(Choice::Team { server })) => team_from_keyring(&server),
        Ok(None) if config_dir.join("leadline.toml").exists() => Mode::Here,
        Ok(None) => Mode::Choose { server: None, problem: None },
        Err(e) => Mode::Choose { server: None, problem: Some(format!("{e:#}")) },
    }
}

fn team_from_keyring(server: &str) -> Mode {
    let ask_again = |problem: String| Mode::Choose { server: Some(server.to_string()), problem: Some(problem) };
    let url = match desk::parse_server(server) {
        Ok(u) => u,
        Err(e) => return ask_again(e),
    };
    let token = match keyring::get(desk::TOKEN_ENTRY) {
        Ok(Some(t)) => t,
        Ok(None) => return ask_again(format!("the keyring holds no token for {server}: enter it again")),
        Err(e) => return ask_again(format!("the token for {server} cannot be read: {e}")),
    };
    match DeskLink::new(url, &token) {
        Ok(link) => Mode::Team(link),
        Err(e) => ask_again(format!("{e:#}")),
    }
}

/// The feed's state for the window.
#[derive(Clone, Serialize)]
struct Connection {
    up: bool,
    refused: Option<String>,
}

/// Passes the server's live feed to the window and the tray.
struct WindowSink {
    handle: tauri::AppHandle,
    tray: Arc<Tray>,
    server: String,
    feed: Feed,
}

impl DeskSink for WindowSink {
    fn connection(&self, up: bool, refused: Option<String>) {
        if !up {
            let headline =
                if refused.is_some() { "the team server refused the token" } else { "cannot reach the team server" };
            let level = if refused.is_some() { GlanceLevel::NeedsPerson } else { GlanceLevel::Waiting };
            self.tray.show_glance(Glance { level, headline: headline.into(), detail: Some(self.server.clone()) });
        }
        *self.feed.lock().unwrap_or_else(|e| e.into_inner()) = Some((up, refused.clone()));
        let _ = self.handle.emit("desk-connection", Connection { up, refused });
    }

    fn live(&self, event: &serde_json::Value) {
        let _ = self.handle.emit("live", event);
    }

    fn health(&self, health: &HealthView) {
        self.tray.show(health);
    }
}

/// Starts following the team server: the live feed, notifications, the tray.
pub fn follow(handle: &tauri::AppHandle, link: DeskLink, tray: Arc<Tray>, feed: Feed) {
    tracing::info!(server = %link.server(), "desk of a team server: no worker runs here");
    let sink = Arc::new(WindowSink { handle: handle.clone(), tray, server: link.server().to_string(), feed });
    let notifier = Arc::new(DesktopNotifier(handle.clone()));
    tauri::async_runtime::spawn(desk::follow(link, sink, notifier));
}

#[tauri::command]
pub fn desk_view(state: tauri::State<'_, DeskState>) -> DeskView {
    let view = state.view();
    tracing::info!(mode = %view.mode, server = view.server.as_deref().unwrap_or("-"), "the window asks how this app runs");
    view
}

/// "Run here (just me)": remembered, and `leadline` starts, now running Leadline here (the worker, the ingest
/// server, the database) in its engine process with a window of its own; this process ends.
#[tauri::command]
pub async fn choose_here(handle: tauri::AppHandle, state: tauri::State<'_, DeskState>) -> CommandResult<DeskView> {
    if !matches!(&*state.mode.lock().unwrap_or_else(|e| e.into_inner()), Mode::Choose { .. }) {
        return Err(ApiError::Conflict("this app has already chosen how it runs".into()));
    }
    desk::write_choice(&state.config_dir, &Choice::Here)?;
    tracing::info!("first start: runs here; Leadline starts");
    let leadline = super::host::sibling("leadline").map_err(|e| ApiError::Internal(format!("{e:#}")))?;
    std::process::Command::new(leadline)
        .spawn()
        .map_err(|e| ApiError::Internal(format!("cannot start Leadline: {e}")))?;
    handle.exit(0);
    Ok(state.view())
}

/// "Connect to a team server": the address and the token are checked against the server first (nothing is kept
/// when it refuses), then the token goes to the keyring and the address to the choice file.
#[tauri::command]
pub async fn connect_team(
    handle: tauri::AppHandle,
    state: tauri::State<'_, DeskState>,
    server: String,
    token: String,
) -> CommandResult<DeskView> {
    if !matches!(&*state.mode.lock().unwrap_or_else(|e| e.into_inner()), Mode::Choose { .. }) {
        return Err(ApiError::Conflict("this app has already chosen how it runs".into()));
    }
    let url = desk::parse_server(&server).map_err(ApiError::BadRequest)?;
    if token.trim().is_empty() {
        return Err(ApiError::BadRequest(
            "the token is empty: ask the server's administrator for one (`leadline token create YOUR-NAME`)".into(),
        ));
    }
    if let Some(why) = keyring::unavailable() {
        return Err(ApiError::BadRequest(format!("the token cannot be kept safely on this computer: {why}")));
    }
    let link = DeskLink::new(url, &token)?;
    let session = link.check().await?;
    let secret = token.trim().to_string();
    tauri::async_runtime::spawn_blocking(move || keyring::set(desk::TOKEN_ENTRY, &secret))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(ApiError::BadRequest)?;
    let server_text = link.server().as_str().trim_end_matches('/').to_string();
    desk::write_choice(&state.config_dir, &Choice::Team { server: server_text.clone() })?;
    tracing::info!(server = %server_text, operator = %session.operator, "desk connected to a team server");
    let tray = handle.state::<Arc<Tray>>().inner().clone();
    follow(&handle, link.clone(), tray, state.feed.clone());
    *state.mode.lock().unwrap_or_else(|e| e.into_inner()) = Mode::Team(link);
    Ok(state.view())
}

/// One call of the team server's API under this desk's token: the answer as it came (the UI reads it as the
/// browser does). Only `/api/…` paths.
#[tauri::command]
pub async fn desk_call(
    state: tauri::State<'_, DeskState>,
    method: String,
    path: String,
    body: Option<serde_json::Value>,
) -> CommandResult<DeskAnswer> {
    let link = state.link()?;
    let answer = link.call(&method, &path, body.as_ref()).await;
    match &answer {
        Ok(a) => tracing::debug!(%method, %path, status = a.status, "desk call"),
        Err(e) => tracing::debug!(%method, %path, error = %e, "desk call"),
    }
    Ok(answer?)
}

/// Saves an export of the team server (a CSV) where the person chooses.
#[tauri::command]
pub async fn desk_export(
    handle: tauri::AppHandle,
    state: tauri::State<'_, DeskState>,
    path: String,
) -> CommandResult<Option<String>> {
    let link = state.link()?;
    let (name, body) = link.download(&path).await?;
    super::save_csv(handle, name, body).await
}

/// Leaves the team server: asks first (native dialog), forgets the token and the choice, and restarts the app,
/// which then asks again how to run.
#[tauri::command]
pub async fn leave_team(handle: tauri::AppHandle, state: tauri::State<'_, DeskState>) -> CommandResult<()> {
    let link = state.link()?;
    let confirm = super::confirmer(&handle);
    crate::shells::api::ask(
        confirm,
        "Disconnect from the team server",
        format!(
            "Disconnect this desk from {}? The server and its leads are not affected. This computer forgets the \
             token, and Leadline starts again and asks how to run.",
            link.server()
        ),
    )
    .await?;
    tauri::async_runtime::spawn_blocking(|| keyring::delete(desk::TOKEN_ENTRY))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(ApiError::Internal)?;
    desk::forget_choice(&state.config_dir)?;
    tracing::info!(server = %link.server(), "desk disconnected from its team server: restarting");
    handle.restart()
}
