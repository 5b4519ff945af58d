//! The desktop shell (feature `desktop`): Leadline running on this computer with a tray icon, and its window — two
//! programs.
//!
//! - `leadline` with no arguments runs Leadline here — the ingest server, the worker and the monitor on the
//!   embedded SQLite database in the app's data folder — in the *engine process* ([`host`]): the tray icon,
//!   desktop notifications, native confirmations and start at login (each a platform part, [`crate::platform`]),
//!   and no web view: `leadline` does not even
//!   link WebKitGTK, whose libraries alone would hold about 27 MiB of a process that stays all day in the tray.
//! - `leadline-window` is the window ([`run_window`]): a Tauri 2 web view, started by the engine when someone
//!   opens it and ended when they close it, reaching the engine through [`crate::shells::window::bridge`]. Its
//!   page invokes the commands [`crate::shells::window::commands`] answers.
//!
//! Configuration comes from `--config` / `LEADLINE_CONFIG`, else `leadline.toml` in the app's config folder; with
//! none, the first start asks how to run (here, or as a desk of a team server). The question and a desk of a team
//! server are one Tauri process (`leadline-window --one-process`, [`run_in_one_process`]): a desk runs no engine
//! to keep apart from its window, and "run here", once chosen, starts `leadline` again, now as the engine.

mod desk;
pub mod host;
mod tray;

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use serde_json::Value;
use tauri::ipc::{Invoke, InvokeBody, InvokeError};
use tauri::{Emitter, Manager, RunEvent};
use tauri_plugin_dialog::{DialogExt, MessageDialogButtons, MessageDialogKind};
use tauri_plugin_notification::NotificationExt;

use crate::features::monitor::Notifier;
use crate::shells::api::{self, Confirm};
use crate::shells::window::{bridge, commands};

pub use host::IDENTIFIER;

type CommandResult<T> = Result<T, api::ApiError>;

/// `leadline-window --ask TITLE MESSAGE`: the engine's confirmation dialog ([`crate::platform::dialog::ask`]); the
/// program's exit status is the answer (0 for yes, 1 for no).
pub const ASK_ARG: &str = "--ask";

/// The app's name where the OS shows it: notifications, the start-at-login entry (`Leadline.desktop`: the name
/// Tauri's autostart plugin gave it, from `productName`).
pub const APP_NAME: &str = "Leadline";

/// Whether this run already said that closing the window leaves Leadline running (said once per run).
static TOLD_ABOUT_TRAY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Alerts as desktop notifications: one per incident (an alert is announced only when it opens).
struct DesktopNotifier(tauri::AppHandle);

impl Notifier for DesktopNotifier {
    fn notify(&self, title: &str, body: &str) {
        if let Err(e) = self.0.notification().builder().title(title).body(body).show() {
            tracing::warn!(error = %e, "cannot show a desktop notification");
        }
    }

    /// The place travels with the notification: a click on it opens the window there ([`open_clicked_place`]).
    fn notify_at(&self, title: &str, body: &str, place: &crate::model::Place) {
        static NEXT_ID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let shown = self.0.notification().builder().id(id).title(title).body(body).extra("place", place).show();
        if let Err(e) = shown {
            tracing::warn!(error = %e, "cannot show a desktop notification");
        }
    }
}

/// A click on a notification (`tap`): the window comes back, on the place the notification was about (the UI
/// follows the `open-place` event; a notification without a place just opens the window).
fn open_clicked_place(app: &tauri::AppHandle, performed: &tauri_plugin_notification::ActionPerformed) {
    if performed.action_id() != "tap" {
        return;
    }
    let place = performed.notification().and_then(|n| n.extra().get("place").cloned());
    tracing::info!(place = %place.as_ref().map_or("none".into(), |p| p.to_string()), "notification clicked: window opened");
    tray::open_window(app, place);
}

/// Where a clicked notification opens the window, handed to its page: sent as `open-place` to a page that listens,
/// kept for a page that does not yet (a window just made, its page loading) until it asks ([`take_place`]).
#[derive(Default)]
pub(crate) struct PendingPlace(pub Mutex<PlaceHandOff>);

#[derive(Default)]
pub(crate) struct PlaceHandOff {
    pub place: Option<serde_json::Value>,
    /// Whether the window's page listens for `open-place` (it says so by asking for its place).
    pub page_listens: bool,
}

/// The native confirmation dialog.
struct DialogConfirm(tauri::AppHandle);

impl Confirm for DialogConfirm {
    fn confirm(&self, title: &str, message: &str) -> bool {
        // Logged, so the desktop smoke test can check the wording of the dialog it answers.
        tracing::info!(title, text = message, "asking for confirmation");
        // The button says what it does: the title's verb ("Replay", "Resolve", "Fix"), not "Replay" for all.
        let verb = title.split_whitespace().next().unwrap_or("OK").to_string();
        let yes = self
            .0
            .dialog()
            .message(message)
            .title(title)
            .kind(MessageDialogKind::Warning)
            .buttons(MessageDialogButtons::OkCancelCustom(verb, "Cancel".into()))
            .blocking_show();
        tracing::info!(title, yes, "confirmation answered");
        yes
    }
}

/// The confirmation the desktop asks for: always the native dialog, answered by a person. No variable, flag or
/// file answers it instead (`tests/architecture.rs` checks that no program code can pick a scripted answer; the
/// desktop tests click the real dialog with `xdotool`).
fn confirmer(handle: &tauri::AppHandle) -> Arc<dyn Confirm> {
    Arc::new(DialogConfirm(handle.clone()))
}

/// The app's Tauri configuration and assets (one copy, for both ways the window runs).
fn context() -> tauri::Context<tauri::Wry> {
    tauri::generate_context!()
}

/// One Tauri process with the tray and the window: the first start's question ("run here" restarts the app, which
/// then runs in the engine process), or a desk of a team server (no engine here: every call goes to the server).
pub fn run_in_one_process(hidden: bool) -> anyhow::Result<()> {
    commands::LAUNCHED.get_or_init(std::time::Instant::now);
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| tray::show_window(app)))
        .plugin(tauri_plugin_window_state::Builder::default().build())
        .plugin(tauri_plugin_dialog::init())
        .plugin(tauri_plugin_notification::init())
        .manage(PendingPlace::default())
        .manage(tray::StartAtLogin::new())
        .setup(move |app| {
            let handle = app.handle().clone();
            let tray = tray::Tray::build(app.handle())?;
            app.manage(tray.clone());
            let config_dir = handle.path().app_config_dir()?;
            let mode = desk::decide(&config_dir, false);
            let feed = desk::Feed::default();
            match &mode {
                desk::Mode::Here => tracing::warn!("runs here: the engine process should have been started"),
                desk::Mode::Team(link) => desk::follow(&handle, link.clone(), tray.clone(), feed.clone()),
                desk::Mode::Choose { problem, .. } => {
                    tracing::info!(problem = problem.as_deref().unwrap_or("first start"), "asking how to run");
                }
            }
            // Started at login with nothing chosen yet (the choice file was removed): the question needs the window.
            let asking = matches!(mode, desk::Mode::Choose { .. });
            app.manage(desk::DeskState { mode: Mutex::new(mode), config_dir, feed });
            let opener = app.handle().clone();
            app.notification().on_action(move |performed| open_clicked_place(&opener, performed))?;
            // The window is made here, not by the configuration (`create: false`): started hidden, no page is
            // loaded until someone opens it.
            if hidden && !asking {
                tracing::info!("started hidden: Leadline is in the tray, its window made when opened");
            } else {
                tray::show_window(app.handle());
            }
            // SIGTERM / Ctrl-C close the app the same way as its window: through the Exit event below.
            let exit = app.handle().clone();
            tauri::async_runtime::spawn(async move {
                crate::shells::server::shutdown_signal().await;
                exit.exit(0);
            });
            Ok(())
        })
        .on_window_event(|window, event| {
            // Closing the window releases it and its page (WebKit's web process ends with it): the desk goes on
            // following its server in the tray (quit from there), and opening makes the window anew.
            if let tauri::WindowEvent::CloseRequested { .. } = event {
                tracing::info!("window closed: released, the desk goes on in the tray");
                if !TOLD_ABOUT_TRAY.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    DesktopNotifier(window.app_handle().clone()).notify(
                        "Leadline is still running",
                        "The team server goes on delivering, and this desk still raises its alerts while the \
                         window is closed. Open it or quit from Leadline's icon in the tray.",
                    );
                }
            }
        })
        .invoke_handler(tauri::generate_handler![
            autostart,
            set_autostart,
            tray_shown,
            quit_app,
            take_place,
            desk::desk_view,
            desk::choose_here,
            desk::connect_team,
            desk::desk_call,
            desk::desk_export,
            desk::leave_team,
        ])
        .build(context())
        .map_err(|e| anyhow::anyhow!("the desktop app could not start: {e}"))?;
    app.run(|_, event| {
        // The last window closing asks the app to exit (no code): Leadline stays in the tray instead. Quit and
        // SIGTERM exit with a code and go through.
        if let RunEvent::ExitRequested { code: None, api, .. } = &event {
            api.prevent_exit();
        }
    });
    Ok(())
}

/// `leadline window`: the window of Leadline running here, in a process of its own, started by the engine process
/// ([`host`]) with the bridge's address and secret in its environment. Its standard input brings the places to
/// show (`{"place": …}` per line: the first opens the window); it ends when the window is closed, or when its input
/// ends (the engine quit).
pub fn run_window() -> anyhow::Result<()> {
    let client = bridge::Client::from_env()?;
    let config_dir = dirs::config_dir().context("no platform config folder")?.join(IDENTIFIER);
    let generated = window_handler(tauri::generate_handler![take_place, desk::desk_view]);
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_window_state::Builder::default().build())
        .plugin(tauri_plugin_dialog::init())
        .manage(PendingPlace::default())
        .manage(desk::DeskState { mode: Mutex::new(desk::Mode::Here), config_dir, feed: desk::Feed::default() })
        .manage(client.clone())
        .setup(move |app| {
            // The places to show, from the engine; the end of the input is the engine quitting.
            let handle = app.handle().clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    let place =
                        serde_json::from_str::<Value>(&line).ok().and_then(|mut v| v.get_mut("place").map(Value::take));
                    tray::open_window(&handle, place.filter(|p| !p.is_null()));
                }
                handle.exit(0);
            });
            // The live feed, passed to the page as the `live` events it listens for.
            let emitter = app.handle().clone();
            tauri::async_runtime::spawn(async move {
                if let Err(e) = client
                    .follow_live(|event| {
                        let _ = emitter.emit("live", event);
                    })
                    .await
                {
                    tracing::warn!(error = %format!("{e:#}"), "the window lost the engine's live feed");
                }
            });
            Ok(())
        })
        .on_window_event(|_, event| {
            if let tauri::WindowEvent::CloseRequested { .. } = event {
                tracing::info!("window closed: released, delivery goes on without it");
            }
        })
        .invoke_handler(move |invoke| match commands::route(invoke.message.command()) {
            Some(route) => {
                forward(invoke, route);
                true
            }
            None => generated(invoke),
        })
        .build(context())
        .map_err(|e| anyhow::anyhow!("the window could not start: {e}"))?;
    app.run(|_, _| {});
    Ok(())
}

/// Names the generated handler's type (the window's own commands), so that [`run_window`] can fall back to it.
fn window_handler<F: Fn(Invoke<tauri::Wry>) -> bool>(handler: F) -> F {
    handler
}

/// Sends a command to the engine over the bridge and answers the page with what came back; an export's file is
/// saved here, where the person chooses, and the page hears where it went.
fn forward(invoke: Invoke<tauri::Wry>, route: commands::Route) {
    let command = invoke.message.command().to_string();
    let args = match invoke.message.payload() {
        InvokeBody::Json(v) => v.clone(),
        InvokeBody::Raw(_) => Value::Null,
    };
    let handle = invoke.message.webview().app_handle().clone();
    invoke.resolver.respond_async(async move {
        let client = handle.state::<bridge::Client>().inner().clone();
        let answer = client.invoke(&command, args).await.map_err(InvokeError)?;
        if route == commands::Route::Answer {
            return Ok(answer);
        }
        let file: api::ExportFile = serde_json::from_value(answer)
            .map_err(|e| InvokeError(serde_json::json!({"code": "internal", "message": e.to_string()})))?;
        let saved = save_csv(handle, file.name, file.body)
            .await
            .map_err(|e| InvokeError(serde_json::to_value(e).unwrap_or_default()))?;
        Ok(saved.map(Value::String).unwrap_or(Value::Null))
    });
}

/// Asks where to save `what` (a native save dialog) and writes `body` there; `None` when the person cancelled.
async fn save_csv(handle: tauri::AppHandle, name: String, body: String) -> CommandResult<Option<String>> {
    let chosen = tauri::async_runtime::spawn_blocking(move || {
        handle.dialog().file().set_file_name(&name).add_filter("CSV", &["csv"]).blocking_save_file()
    })
    .await
    .map_err(|e| api::ApiError::Internal(format!("the save dialog failed: {e}")))?;
    let Some(path) = chosen.and_then(|p| p.into_path().ok()) else { return Ok(None) };
    std::fs::write(&path, body)
        .map_err(|e| api::ApiError::BadRequest(format!("cannot write {}: {e}", path.display())))?;
    Ok(Some(path.display().to_string()))
}

// This computer (the settings page's first section, desktop only): whether Leadline starts at login.

#[tauri::command]
fn autostart(app: tauri::AppHandle) -> bool {
    tray::autostart_enabled(&app)
}

#[tauri::command]
fn set_autostart(app: tauri::AppHandle, enabled: bool) -> CommandResult<bool> {
    tray::set_autostart(&app, enabled).map_err(api::ApiError::Internal)
}

/// Whether a tray shows the icon: this process's tray is Tauri's, which cannot tell, so it is taken as shown.
#[tauri::command]
fn tray_shown() -> bool {
    true
}

/// *Quit Leadline…* on the settings page of a desk of a team server (or of the first start's question): nothing
/// is delivered here, so it ends at once, as the tray's item does.
#[tauri::command]
fn quit_app(app: tauri::AppHandle) -> bool {
    tracing::info!("quitting from the window");
    app.exit(0);
    true
}

/// The place a clicked notification opened a new window on, once (the page asks when it starts listening).
#[tauri::command]
fn take_place(pending: tauri::State<'_, PendingPlace>) -> Option<serde_json::Value> {
    let mut hand_off = pending.0.lock().unwrap_or_else(|e| e.into_inner());
    hand_off.page_listens = true;
    let place = hand_off.place.take();
    if let Some(p) = &place {
        tracing::info!(place = %p, "the new window opens on its place");
    }
    place
}
