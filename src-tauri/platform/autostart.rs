//! Start at login: the OS starts a program with its arguments when the user logs in. On Linux, an XDG autostart
//! entry (`~/.config/autostart/<name>.desktop`) written by `auto-launch`, the crate Tauri's autostart plugin wraps,
//! so the entry is the one the plugin wrote.
//!
//! The interface (what a port keeps): [`Autostart::new`], [`Autostart::is_enabled`], [`Autostart::set`]. A macOS
//! port builds the same crate with a launch agent (`MacosLauncher::LaunchAgent`, as Tauri's plugin does, with the
//! `.app` bundle as the path); a Windows port, the same crate's `Run` key in the registry.

use std::path::Path;

/// Start at login for one program.
pub struct Autostart(auto_launch::AutoLaunch);

impl Autostart {
    /// Start at login for `program` with `args`, under the name `app_name` (the entry's name). An error says why it
    /// is not available here.
    pub fn new(app_name: &str, program: &Path, args: &[&str]) -> Result<Autostart, String> {
        auto_launch::AutoLaunchBuilder::new()
            .set_app_name(app_name)
            .set_app_path(&program.display().to_string())
            .set_args(args)
            .build()
            .map(Autostart)
            .map_err(|e| format!("start at login is not available: {e}"))
    }

    /// Whether the program starts at login (`false` when that cannot be read).
    pub fn is_enabled(&self) -> bool {
        self.0.is_enabled().unwrap_or(false)
    }

    /// Turns start at login on or off; answers whether it is on now.
    pub fn set(&self, on: bool) -> Result<bool, String> {
        let result = if on { self.0.enable() } else { self.0.disable() };
        result.map_err(|e| format!("cannot change start at login: {e}"))?;
        let now = self.is_enabled();
        tracing::info!(enabled = now, "start at login changed");
        Ok(now)
    }
}
