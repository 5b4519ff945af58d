//! The tray icon: Leadline's state at a glance while its window is closed, and the way to quit.
//!
//! Closing the window releases it and its web page (the window is made again when opened): the ingest server,
//! the worker and the monitor go on, so leads keep flowing when someone tidies their desktop. The icon is a disc
//! in the state's colour with a mark (green tick: all delivered; amber dots: leads on their way; red
//! exclamation: needs a person — see [`crate::features::monitor::glance`]); the menu's first line says the same with the counts. (Linux panels
//! show no tooltips for tray icons — AppIndicator has none — so the counts are in the menu there; elsewhere the
//! tooltip carries them too.) *Quit Leadline…* says what is being sent and what waits, and quitting lets the
//! deliveries in flight finish (the shutdown in [`super::run`]'s exit handler). *Start at login* is the official
//! autostart plugin, off until someone turns it on; at login the app starts hidden in the tray.

use std::sync::{Arc, Mutex};

use tauri::image::Image;
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::{MouseButton, MouseButtonState, TrayIcon, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Emitter, Manager};
use tauri_plugin_autostart::ManagerExt;

use crate::features::monitor::glance::{self, Glance};
use crate::features::monitor::health::HealthView;
use crate::shells::api::{self, Confirm};

/// Pixels per side of the drawn icon (panels scale it down; 64 stays sharp on high-density screens).
const ICON_SIZE: u32 = 64;

/// The argument the login item starts Leadline with: straight to the tray, no window.
pub const HIDDEN_ARG: &str = "--hidden";

/// The tray icon and the menu line that states the counts.
pub struct Tray {
    icon: TrayIcon,
    status: MenuItem<tauri::Wry>,
    autostart: CheckMenuItem<tauri::Wry>,
    shown: Mutex<Option<Glance>>,
}

impl Tray {
    /// Builds the icon (state unknown until the first health arrives: shown as waiting).
    pub fn build(app: &AppHandle) -> tauri::Result<Arc<Tray>> {
        let status = MenuItem::with_id(app, "status", "Leadline — starting…", false, None::<&str>)?;
        let open = MenuItem::with_id(app, "open", "Open Leadline", true, None::<&str>)?;
        let at_login = app.autolaunch().is_enabled().unwrap_or(false);
        let autostart = CheckMenuItem::with_id(app, "autostart", "Start at login", true, at_login, None::<&str>)?;
        let quit_item = MenuItem::with_id(app, "quit", "Quit Leadline…", true, None::<&str>)?;
        let menu = Menu::with_items(
            app,
            &[
                &status,
                &PredefinedMenuItem::separator(app)?,
                &open,
                &autostart,
                &PredefinedMenuItem::separator(app)?,
                &quit_item,
            ],
        )?;
        let starting = glance::GlanceLevel::Waiting;
        let icon = TrayIconBuilder::with_id("leadline")
            .icon(Image::new_owned(glance::icon_rgba(starting, ICON_SIZE), ICON_SIZE, ICON_SIZE))
            .tooltip("Leadline — starting…")
            .menu(&menu)
            .show_menu_on_left_click(false)
            .on_menu_event(|app, event| match event.id.as_ref() {
                "open" => show_window(app),
                "autostart" => toggle_autostart(app),
                "quit" => quit(app.clone()),
                _ => {}
            })
            .on_tray_icon_event(|tray, event| {
                if let TrayIconEvent::Click { button: MouseButton::Left, button_state: MouseButtonState::Up, .. } =
                    event
                {
                    show_window(tray.app_handle());
                }
            })
            .build(app)?;
        Ok(Arc::new(Tray { icon, status, autostart, shown: Mutex::new(None) }))
    }

    /// Shows the state of `health` (only what changed: a panel redraws the icon on every change).
    pub fn show(&self, health: &HealthView) {
        self.show_glance(glance::glance(health));
    }

    /// Shows a state that is not the queue's: a desk that cannot reach its team server, say.
    pub fn show_glance(&self, g: Glance) {
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        if shown.as_ref() == Some(&g) {
            return;
        }
        let level_changed = shown.as_ref().map(|s| s.level) != Some(g.level);
        if level_changed {
            let rgba = glance::icon_rgba(g.level, ICON_SIZE);
            if let Err(e) = self.icon.set_icon(Some(Image::new_owned(rgba, ICON_SIZE, ICON_SIZE))) {
                tracing::warn!(error = %e, "cannot change the tray icon");
            }
        }
        let _ = self.icon.set_tooltip(Some(g.tooltip()));
        let _ = self.status.set_text(format!("Leadline — {}", g.headline));
        tracing::info!(state = g.level.as_str(), headline = %g.headline, "tray shows");
        *shown = Some(g);
    }
}

/// When the window was last made, until its page first asks for the overview (the time is logged then).
pub static WINDOW_MADE: Mutex<Option<std::time::Instant>> = Mutex::new(None);

/// Brings the window back (from the tray, a second launch, at start).
pub fn show_window(app: &AppHandle) {
    open_window(app, None);
}

/// Shows the window, made anew when it was closed (a closed window is released with its page); `place`, when
/// given, is where it opens: sent to a page already there, kept for a new one until it asks (`take_place`).
pub fn open_window(app: &AppHandle, place: Option<serde_json::Value>) {
    let window = app.get_webview_window("main");
    if let Some(w) = &window {
        let _ = w.show();
        let _ = w.unminimize();
        let _ = w.set_focus();
    }
    if let Some(pending) = app.try_state::<super::PendingPlace>() {
        let mut hand_off = pending.0.lock().unwrap_or_else(|e| e.into_inner());
        if window.is_none() {
            // A new page: it listens once loaded, and takes what was clicked for it (nothing older).
            *hand_off = super::PlaceHandOff::default();
        }
        match place {
            Some(place) if hand_off.page_listens => {
                let _ = app.emit("open-place", place);
            }
            Some(place) => hand_off.place = Some(place),
            None => {}
        }
    }
    if window.is_some() {
        return;
    }
    let Some(config) = app.config().app.windows.iter().find(|w| w.label == "main").cloned() else {
        tracing::error!("the configuration declares no main window");
        return;
    };
    *WINDOW_MADE.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
    match tauri::WebviewWindowBuilder::from_config(app, &config).and_then(|b| b.build()) {
        Ok(w) => {
            let _ = w.set_focus();
            tracing::info!("window made: its page loads");
        }
        Err(e) => tracing::error!(error = %e, "cannot open the window"),
    }
}

fn toggle_autostart(app: &AppHandle) {
    let on = !autostart_enabled(app);
    if let Err(e) = set_autostart(app, on) {
        tracing::warn!(error = %e, "cannot change start at login");
    }
}

/// Whether Leadline starts at login.
pub fn autostart_enabled(app: &AppHandle) -> bool {
    app.autolaunch().is_enabled().unwrap_or(false)
}

/// Turns start at login on or off (the settings page's switch); the tray's check mark follows.
pub fn set_autostart(app: &AppHandle, on: bool) -> Result<bool, String> {
    let launcher = app.autolaunch();
    let result = if on { launcher.enable() } else { launcher.disable() };
    result.map_err(|e| format!("cannot change start at login: {e}"))?;
    let now = launcher.is_enabled().unwrap_or(false);
    tracing::info!(enabled = now, "start at login changed");
    if let Some(tray) = app.try_state::<Arc<Tray>>() {
        let _ = tray.autostart.set_checked(now);
    }
    Ok(now)
}

/// *Quit Leadline…*: asks (what is in flight, what waits), then exits; the exit handler lets in-flight
/// deliveries finish before the process ends.
fn quit(app: AppHandle) {
    tauri::async_runtime::spawn(async move {
        let Some(desktop) = app.try_state::<super::Desktop>() else {
            app.exit(0);
            return;
        };
        let core = desktop.app.clone();
        let confirm: Arc<dyn Confirm> = desktop.confirm.clone();
        let grace = core.config.worker.shutdown_grace_seconds;
        let question = match api::health(&core).await {
            Ok(h) => glance::quit_question(&h, grace),
            Err(e) => format!("Leadline cannot read its queue ({e}). Quit anyway? Deliveries in flight finish first."),
        };
        let yes = tauri::async_runtime::spawn_blocking(move || confirm.confirm("Quit Leadline", &question))
            .await
            .unwrap_or(false);
        if yes {
            tracing::info!("quitting from the tray: deliveries in flight finish first");
            app.exit(0);
        }
    });
}
