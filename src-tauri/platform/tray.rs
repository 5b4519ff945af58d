//! The tray icon: an icon drawn as pixels, a menu whose first line states the counts (Linux panels show no
//! tooltips for AppIndicator-style icons), *Open Leadline*, *Start at login* with its check mark, *Quit
//! Leadline…*; a left click opens the window. On Linux a StatusNotifierItem spoken over D-Bus (`ksni`: the
//! protocol the panels of KDE, XFCE, Cinnamon, Budgie and GNOME's AppIndicator extension read), so the engine
//! process needs no toolkit; `ksni` sends a panel what changed after every update.
//!
//! The interface (what a port keeps): [`Look`], [`Actions`], [`Tray::start`], [`Tray::show`],
//! [`Tray::set_autostart`], [`Tray::shown`], [`Tray::shutdown`]. A macOS or Windows port shows the same with
//! Tauri's tray icon (`tray-icon`, as the one-process app's `shells/desktop/tray.rs` does), where the menu bar or
//! the notification area is always there, so [`Tray::shown`] is always true.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Pixels per side of the icon drawn for the tray (panels scale it down; 64 stays sharp on high-density screens).
pub const ICON_SIZE: u32 = 64;

/// What the tray shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Look {
    /// The icon: [`ICON_SIZE`]² pixels, RGBA, row by row.
    pub rgba: Vec<u8>,
    /// The menu's first line (not clickable).
    pub status: String,
    /// The tooltip, where a panel shows one.
    pub tooltip: String,
}

/// What a click on the icon and the menu's items do. Called on the tray's own service: return at once, and hand
/// anything longer to another thread.
pub trait Actions: Send + Sync + 'static {
    /// A left click on the icon, or *Open Leadline*.
    fn open(&self);
    /// *Start at login* clicked: `on` is the opposite of its check mark.
    fn set_autostart(&self, on: bool);
    /// *Quit Leadline…*.
    fn quit(&self);
}

/// The running tray icon.
pub struct Tray {
    handle: ksni::Handle<Sni>,
    shown: Arc<AtomicBool>,
}

impl Tray {
    /// Starts the tray icon showing `look`, with the check mark of start at login at `autostart`. An error says why
    /// there is no tray icon (the session's D-Bus cannot be reached). Without a system tray yet (early at login, or
    /// none at all) it starts, and the icon registers when a tray appears.
    pub async fn start(look: Look, autostart: bool, actions: Arc<dyn Actions>) -> Result<Tray, String> {
        use ksni::TrayMethods as _;
        // Taken as shown until ksni says otherwise (it does while the service starts).
        let shown = Arc::new(AtomicBool::new(true));
        let sni = Sni { look, autostart, actions, shown: shown.clone() };
        match sni.assume_sni_available(true).spawn().await {
            Ok(handle) => Ok(Tray { handle, shown }),
            Err(e) => Err(format!("the session's D-Bus cannot be reached: {e}")),
        }
    }

    /// Shows `look` (a panel redraws the icon on every update: call it when something changed).
    pub async fn show(&self, look: Look) {
        self.handle.update(|t| t.look = look).await;
    }

    /// Sets the check mark of *Start at login*.
    pub async fn set_autostart(&self, on: bool) {
        self.handle.update(|t| t.autostart = on).await;
    }

    /// Whether a system tray shows the icon now: a StatusNotifierWatcher took it, and none went away since. Stock
    /// GNOME has none without its AppIndicator extension.
    pub fn shown(&self) -> bool {
        self.shown.load(Ordering::SeqCst)
    }

    /// Takes the icon away.
    pub async fn shutdown(&self) {
        self.handle.shutdown().await;
    }
}

/// The StatusNotifierItem `ksni` serves.
struct Sni {
    look: Look,
    autostart: bool,
    actions: Arc<dyn Actions>,
    shown: Arc<AtomicBool>,
}

impl ksni::Tray for Sni {
    fn id(&self) -> String {
        "leadline".into()
    }

    fn title(&self) -> String {
        "Leadline".into()
    }

    fn activate(&mut self, _x: i32, _y: i32) {
        self.actions.open();
    }

    fn icon_pixmap(&self) -> Vec<ksni::Icon> {
        vec![argb_icon(&self.look.rgba)]
    }

    fn tool_tip(&self) -> ksni::ToolTip {
        ksni::ToolTip { title: self.look.tooltip.clone(), ..Default::default() }
    }

    fn menu(&self) -> Vec<ksni::MenuItem<Self>> {
        use ksni::menu::{CheckmarkItem, StandardItem};
        vec![
            StandardItem { label: self.look.status.clone(), enabled: false, ..Default::default() }.into(),
            ksni::MenuItem::Separator,
            StandardItem {
                label: "Open Leadline".into(),
                activate: Box::new(|t: &mut Self| t.actions.open()),
                ..Default::default()
            }
            .into(),
            CheckmarkItem {
                label: "Start at login".into(),
                checked: self.autostart,
                activate: Box::new(|t: &mut Self| t.actions.set_autostart(!t.autostart)),
                ..Default::default()
            }
            .into(),
            ksni::MenuItem::Separator,
            StandardItem {
                label: "Quit Leadline…".into(),
                activate: Box::new(|t: &mut Self| t.actions.quit()),
                ..Default::default()
            }
            .into(),
        ]
    }

    fn watcher_offline(&self, reason: ksni::OfflineReason) -> bool {
        self.shown.store(false, Ordering::SeqCst);
        tracing::warn!(?reason, "no system tray to show Leadline's icon in (it appears when one starts)");
        true
    }

    fn watcher_online(&self) {
        self.shown.store(true, Ordering::SeqCst);
        tracing::info!("a system tray appeared: Leadline's icon is in it");
    }
}

/// The icon in the StatusNotifierItem's pixmap format: ARGB32, network byte order.
fn argb_icon(rgba: &[u8]) -> ksni::Icon {
    let mut data = rgba.to_vec();
    for px in data.chunks_exact_mut(4) {
        px.rotate_right(1);
    }
    ksni::Icon { width: ICON_SIZE as i32, height: ICON_SIZE as i32, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pixmap_is_argb_in_network_order() {
        let icon = argb_icon(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(icon.data, [4, 1, 2, 3, 8, 5, 6, 7]);
        assert_eq!((icon.width, icon.height), (ICON_SIZE as i32, ICON_SIZE as i32));
    }
}
