//! The window's commands, by name: the operations of [`crate::shells::api::operations`] (the same ones the HTTP API
//! serves, run by the same dispatcher), with the native confirmation where a browser's page confirms for itself;
//! the few the engine process answers itself ([`ENGINE_OWN`]); and the window's own ([`WINDOW_OWN`]).
//!
//! One dispatcher serves both ways the window reaches Leadline: in the process that runs it (the first start, when
//! "run here" was just chosen) and, from the window's own process, over the engine's bridge ([`crate::shells::window::bridge`]).
//! It holds no Tauri types: the engine process ([`crate::shells::desktop`]'s engine process) never starts Tauri. Arguments come as the JSON
//! object the page sent (`invoke('replay', {selection, expected, reason, options})`); answers go back as JSON,
//! errors as the [`ApiError`]'s `{code, message}`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde_json::Value;

use crate::shells::api::operations::{self, Caller};
use crate::shells::api::{ApiError, App, Confirm};

/// When the process started, to report how long the first overview took.
pub static LAUNCHED: OnceLock<Instant> = OnceLock::new();
static FIRST_HEALTH: AtomicBool = AtomicBool::new(true);
/// When the window was last made, until its page first asks for the overview (the time is logged then).
pub static WINDOW_MADE: Mutex<Option<Instant>> = Mutex::new(None);

/// What the commands act on and as whom.
pub struct Context {
    pub app: App,
    pub confirm: Arc<dyn Confirm>,
    /// Who acts, for the audit: the OS user.
    pub actor: String,
}

/// The commands the engine process answers itself, not [`dispatch`]: start at login (which its tray shows), whether
/// a system tray shows the icon, and quitting (asked natively).
pub const ENGINE_OWN: &[&str] = &["autostart", "set_autostart", "tray_shown", "quit_app"];

/// The commands the window's page invokes that the window answers itself: where a clicked notification opened it
/// (`take_place`), how this app runs and the first start's choice or a team desk's calls (`shells/desktop/desk.rs`).
pub const WINDOW_OWN: &[&str] =
    &["take_place", "desk_view", "choose_here", "connect_team", "desk_call", "desk_export", "leave_team"];

/// What the window does with a command when Leadline runs in the engine process: sends it to the engine, and
/// answers the page with the engine's answer, or saves the file the engine answered. `None` for the window's own
/// commands ([`WINDOW_OWN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Answer,
    SaveFile,
}

/// Where a command of the window goes (see [`Route`]): every operation and [`ENGINE_OWN`] to the engine.
pub fn route(name: &str) -> Option<Route> {
    match operations::find(name) {
        Some(op) if op.file => Some(Route::SaveFile),
        Some(_) => Some(Route::Answer),
        None => ENGINE_OWN.contains(&name).then_some(Route::Answer),
    }
}

pub fn os_user() -> String {
    let name = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into());
    format!("desktop user `{name}`")
}

/// Answers the operation `name` with `args` (a file as `{name, body}`, for the window to save).
pub async fn dispatch(cx: &Context, name: &str, args: Value) -> Result<Value, ApiError> {
    if name == "health" {
        note_overview_asked();
    }
    let caller = Caller { app: cx.app.clone(), actor: cx.actor.clone(), confirm: Some(cx.confirm.clone()) };
    Ok(operations::call(&caller, name, args).await?.into_value())
}

/// Logs how long the first overview took after launch, and after a window made anew (what releasing a closed
/// window costs).
fn note_overview_asked() {
    if FIRST_HEALTH.swap(false, Ordering::SeqCst) {
        let ms = LAUNCHED.get().map_or(0, |t| t.elapsed().as_millis());
        tracing::info!(ms, "first overview request {ms} ms after launch");
    }
    if let Some(made) = WINDOW_MADE.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let ms = made.elapsed().as_millis();
        tracing::info!(ms, "the window's overview asked {ms} ms after the window was made");
    }
}
