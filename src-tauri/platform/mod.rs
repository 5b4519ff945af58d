//! The desk's platform parts: what Leadline asks of the operating system, each behind one small interface in one
//! file, so that a port to another OS replaces these files and nothing else (docs/architecture.md, "Platform
//! parts", lists them and what a macOS or Windows port would use). Each file's first lines say its interface.
//!
//! - [`keyring`]: secrets entered in the app's settings, in the OS keyring (the Secret Service, over D-Bus);
//! - [`tray`] (desktop): the tray icon and its menu (a StatusNotifierItem, over D-Bus);
//! - [`dialog`] (desktop): the native confirmation dialog (GTK, shown by the window's program);
//! - [`autostart`] (desktop): start at login (an XDG autostart entry);
//! - [`notify`] (desktop): desktop notifications (the notification service, over D-Bus).
//!
//! The folder sits at the bottom of the layers, below `model/` and the clock: the keyring is read by
//! `Config::secret` and the settings feature, below the shells. It imports nothing of the app — its interfaces
//! take and give plain text, pixels and callbacks, and the shells turn the app's states into them
//! (`tests/architecture.rs` checks both). The parts that need the desktop's libraries are built with the
//! `desktop` feature only; the keyring is in both builds (a headless server on a desktop session may use it).

#[cfg(feature = "desktop")]
pub mod autostart;
#[cfg(feature = "desktop")]
pub mod dialog;
pub mod keyring;
#[cfg(feature = "desktop")]
pub mod notify;
#[cfg(feature = "desktop")]
pub mod tray;
