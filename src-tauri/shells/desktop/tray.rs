//! The tray icon and the window of the one-process app (the first start's question, a desk of a team server), and
//! the window's making in either process.
//!
//! The desk's tray shows the team server's state at a glance while the window is closed: a disc in the state's
//! colour with a mark (green tick: all delivered; amber dots: leads on their way; red exclamation: needs a person —
//! see [`crate::features::monitor::glance`]); the menu's first line says the same with the counts (Linux panels
//! show no tooltips for AppIndicator icons). Leadline running here has the same tray in its engine process
//! ([`crate::shells::desktop`]'s engine process). Closing the window releases it and its web page; [`open_window`] makes it anew. *Start at
//! login* is the platform part [`crate::platform::autostart`] (the engine's too), off until someone turns it on; at
//! login the app starts hidden.

use std::sync::{Arc, Mutex};

use tauri::image::Image;
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::{MouseButton, MouseButtonState, TrayIcon, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Emitter, Manager};

use crate::features::monitor::glance::{self, Glance};
use crate::features::monitor::health::HealthView;
use crate::platform::autostart::Autostart;

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
        let at_login = autostart_enabled(app);
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
    *crate::shells::window::commands::WINDOW_MADE.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(std::time::Instant::now());
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

/// Start at login of this process's program, started hidden: what Tauri's autostart plugin did (`None` where it is
/// not available).
pub(crate) struct StartAtLogin(Option<Autostart>);

impl StartAtLogin {
    pub fn new() -> StartAtLogin {
        let autostart = std::env::current_exe()
            .map_err(|e| e.to_string())
            .and_then(|program| Autostart::new(super::APP_NAME, &program, &[HIDDEN_ARG]))
            .map_err(|e| tracing::warn!(error = %e, "start at login is not available"))
            .ok();
        StartAtLogin(autostart)
    }
}

fn launcher(app: &AppHandle) -> Option<&Autostart> {
    app.try_state::<StartAtLogin>().and_then(|s| s.inner().0.as_ref())
}

/// Whether Leadline starts at login.
pub fn autostart_enabled(app: &AppHandle) -> bool {
    launcher(app).is_some_and(Autostart::is_enabled)
}

/// Turns start at login on or off (the settings page's switch); the tray's check mark follows.
pub fn set_autostart(app: &AppHandle, on: bool) -> Result<bool, String> {
    let launcher = launcher(app).ok_or_else(|| "start at login is not available on this computer".to_string())?;
    let now = launcher.set(on)?;
    if let Some(tray) = app.try_state::<Arc<Tray>>() {
        let _ = tray.autostart.set_checked(now);
    }
    Ok(now)
}

/// *Quit Leadline…*: a desk of a team server (or the first start's question) runs no deliveries here, so it ends
/// at once; Leadline running here quits from the engine process's tray ([`crate::shells::desktop`]'s engine process), which asks first.
fn quit(app: AppHandle) {
    app.exit(0);
}
