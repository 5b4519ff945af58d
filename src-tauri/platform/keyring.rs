//! Secrets entered in the app's settings, kept by the OS keyring: the Secret Service of Linux desktops (GNOME
//! Keyring, KWallet), under service `leadline` and the variable's name as user. The config file names the
//! variable; the value lives only here. Reached over the D-Bus session bus, so only where there is one
//! (`DBUS_SESSION_BUS_ADDRESS`): a headless server has none, and is given its secrets through the environment or
//! the secrets file instead.
//!
//! The interface (what a port keeps): [`SERVICE`], [`unavailable`], [`get`], [`set`], [`delete`], each blocking,
//! each answering in plain words. A macOS or Windows port replaces this file: the `keyring` crate's
//! `apple-native` (Keychain) or `windows-native` (Credential Manager) store, and an [`unavailable`] that says
//! when that store cannot be reached.

/// The keyring's service name for Leadline's secrets.
pub const SERVICE: &str = "leadline";

/// Why the keyring cannot be used here, or `None` when a Secret Service may be reached.
pub fn unavailable() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("this build keeps secrets in the Secret Service of Linux desktops only".into());
    }
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none_or(|a| a.is_empty()) {
        return Some(
            "no desktop session bus (DBUS_SESSION_BUS_ADDRESS), so no Secret Service to keep secrets in".into(),
        );
    }
    None
}

fn entry(var: &str) -> Result<::keyring::Entry, String> {
    if let Some(why) = unavailable() {
        return Err(why);
    }
    ::keyring::Entry::new(SERVICE, var).map_err(|e| format!("the keyring cannot be used: {e}"))
}

/// The secret stored for `var`: `Ok(None)` when there is none. Blocks on D-Bus: call it off the async
/// threads where it is not part of a start or a reload.
pub fn get(var: &str) -> Result<Option<String>, String> {
    match entry(var)?.get_password() {
        Ok(v) => Ok(Some(v)),
        Err(::keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(format!("the keyring cannot be read: {e}")),
    }
}

/// Stores `value` as the secret of `var`, replacing any earlier one. Blocks on D-Bus.
pub fn set(var: &str, value: &str) -> Result<(), String> {
    entry(var)?.set_password(value).map_err(|e| format!("the keyring refused the secret: {e}"))
}

/// Removes the secret of `var` (nothing to do when there is none). Blocks on D-Bus.
pub fn delete(var: &str) -> Result<(), String> {
    match entry(var)?.delete_credential() {
        Ok(()) | Err(::keyring::Error::NoEntry) => Ok(()),
        Err(e) => Err(format!("the keyring cannot remove the secret: {e}")),
    }
}
