//! The settings page: the configuration in force to look at, a save that writes the user's file back (comments
//! kept) and puts it in force without a restart, and secrets entered into the OS keyring (see
//! [`crate::features::settings`]).

use super::connections::reload_secrets;
use super::dto::{SecretEntry, SecretStored, SettingsEdit};
use super::error::ApiError;
use crate::features::app::App;
use crate::features::settings::{self, SaveOutcome, SettingsView};

/// Saves are made one at a time: each reads the file as it is, so two saves never write over each other.
static SAVING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn blocking_failed(e: tokio::task::JoinError) -> ApiError {
    ApiError::Internal(format!("the settings task failed: {e}"))
}

/// The editable view of the configuration in force (asks the keyring where secrets are: off the async threads).
pub async fn settings(app: &App) -> Result<SettingsView, ApiError> {
    let config = (*app.config).clone();
    tokio::task::spawn_blocking(move || settings::view(&config)).await.map_err(blocking_failed)
}

/// Makes `edit` on the configuration file, checked as `check-config` checks; on success writes the file
/// (comments and layout kept, replaced whole) and puts the result in force at once. Refused values come back
/// with their fields, and then nothing is written.
pub async fn save_settings(app: &App, edit: &SettingsEdit, by: &str) -> Result<SaveOutcome, ApiError> {
    let _one_at_a_time = SAVING.lock().await;
    let Some(file) = app.config.file.clone() else {
        return Err(ApiError::BadRequest(
            "the demo runs a built-in configuration: its settings cannot be saved (start Leadline with --config FILE)"
                .into(),
        ));
    };
    let running = (*app.config).clone();
    let changes = edit.changes.clone();
    let path = file.clone();
    let checked = tokio::task::spawn_blocking(move || {
        let original = std::fs::read_to_string(&path)
            .map_err(|e| ApiError::BadRequest(format!("cannot read {}: {e}", path.display())))?;
        match settings::check(&original, &changes, &path, &running) {
            Ok((text, config)) => {
                if text != original {
                    settings::write_atomically(&path, &text)
                        .map_err(|e| ApiError::BadRequest(format!("cannot write {}: {e}", path.display())))?;
                }
                Ok::<_, ApiError>(Ok(config))
            }
            Err(errors) => Ok(Err(errors)),
        }
    })
    .await
    .map_err(blocking_failed)??;
    let paths: Vec<&str> = edit.changes.iter().map(|c| c.path.as_str()).collect();
    match checked {
        Ok(config) => {
            settings::apply(app, config).map_err(|e| {
                ApiError::Internal(format!(
                    "the settings were written to {} but could not be put in force: {e:#}",
                    file.display()
                ))
            })?;
            tracing::info!(by, file = %file.display(), changed = ?paths, "settings saved and in force");
            Ok(SaveOutcome { saved: true, errors: Vec::new(), settings: settings(app).await? })
        }
        Err(errors) => {
            tracing::info!(by, changed = ?paths, refused = ?errors, "settings refused; nothing written");
            Ok(SaveOutcome { saved: false, errors, settings: settings(app).await? })
        }
    }
}

/// Stores a secret for a variable, in the OS keyring (never the file), then reads the
/// secrets of the sources and targets again so it is used at once. Without a reachable Secret Service it
/// refuses and says to set the variable in the environment or the secrets file instead.
pub async fn store_secret(app: &App, entry: &SecretEntry, by: &str) -> Result<SecretStored, ApiError> {
    let variable = entry.variable.trim().to_string();
    // Any variable name: a field may be given a new variable and its secret before the save that names it (the
    // save checks that every named secret is found).
    let is_name = !variable.is_empty()
        && !variable.starts_with(|c: char| c.is_ascii_digit())
        && variable.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !is_name {
        return Err(ApiError::BadRequest(format!(
            "`{variable}` is not a variable name (letters, digits and '_', like HUBSPOT_TOKEN)"
        )));
    }
    if entry.value.trim().is_empty() {
        return Err(ApiError::BadRequest("the secret is empty".into()));
    }
    if let Some(why) = crate::platform::keyring::unavailable() {
        return Err(ApiError::BadRequest(format!(
            "{why}: set {variable} in the environment (or the secrets file) instead; Leadline never writes secrets \
             into the configuration file"
        )));
    }
    let (var, value) = (variable.clone(), entry.value.clone());
    tokio::task::spawn_blocking(move || crate::platform::keyring::set(&var, &value))
        .await
        .map_err(blocking_failed)?
        .map_err(|e| {
            ApiError::BadRequest(format!("{e}: set {variable} in the environment (or the secrets file) instead"))
        })?;
    tracing::info!(by, variable, "secret stored in the keyring");
    // Read the secrets again where they are held: the sources' (signatures, tokens) and the targets'.
    let config = (*app.config).clone();
    let ingest = app.ingest.clone();
    let sources = tokio::task::spawn_blocking(move || ingest.reconfigure(&config)).await.map_err(blocking_failed)?;
    let mut notes = Vec::new();
    if let Err(e) = sources {
        notes.push(format!("sources: {e:#}"));
    }
    if app.worker.is_some() {
        for reload in reload_secrets(app, by).await? {
            if !reload.ok {
                notes.push(format!("{}: {}", reload.target, reload.message));
            }
        }
    }
    let message = if notes.is_empty() {
        format!("{variable} is stored in the keyring and in use.")
    } else {
        format!("{variable} is stored in the keyring. Still missing: {}", notes.join("; "))
    };
    Ok(SecretStored { message, settings: settings(app).await? })
}
