//! The targets: how each is doing, the exact request it would send (a dry run), a connection check, its
//! credentials read again, and pausing it.

use super::dto::{SecretReload, TargetView};
use super::error::ApiError;
use crate::features::app::App;

pub async fn targets(app: &App) -> Result<Vec<TargetView>, ApiError> {
    let paused = app.store.target_pauses().await?;
    Ok(app
        .config
        .targets
        .iter()
        .map(|(name, t)| {
            let endpoint = reqwest::Url::parse(&t.url.replace("{external_id}", "x"))
                .map(|u| {
                    format!("{}://{}", u.scheme(), u.host_str().unwrap_or("?"))
                        + &u.port().map(|p| format!(":{p}")).unwrap_or_default()
                })
                .unwrap_or_default();
            let runtime = app.worker.as_ref().and_then(|w| w.targets.get(name));
            let (breaker, opened) =
                runtime.as_ref().map(|r| r.breaker_state()).map_or((None, None), |(s, o)| (Some(s), o));
            let p = paused.iter().find(|p| &p.target == name);
            let (concurrency, rate) = runtime.as_ref().map(|r| r.pace()).unwrap_or((t.concurrency, None));
            TargetView {
                name: name.clone(),
                kind: serde_json::to_value(t.kind())
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                hold: runtime.and_then(|r| r.hold(app.clock.now())),
                rate: rate.or_else(|| t.rate.map(|r| r.to_string())),
                concurrency,
                mapping: t.mapping.iter().filter_map(|r| serde_json::to_value(r).ok()).collect(),
                endpoint,
                strategy: serde_json::to_value(t.strategy())
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                breaker,
                breaker_opened_at: opened,
                paused: p.is_some(),
                paused_by: p.map(|p| p.paused_by.clone()),
                paused_at: p.map(|p| p.paused_at),
            }
        })
        .collect())
}

/// The exact request `target` would send for the stored lead `lead` (its external id, `source:source_ref`):
/// a dry run, nothing is sent. A lead the target's mapping cannot use is answered with the reason.
pub async fn target_preview(
    app: &App,
    target: &str,
    lead: &str,
) -> Result<crate::features::targets::RequestPreview, ApiError> {
    let runtime = target_runtime(app, target)?;
    let job = app.store.job_preview(lead.trim(), target).await?.ok_or_else(|| {
        ApiError::NotFound(format!("no lead `{}` (write it as source:id, e.g. webform:L-1)", lead.trim()))
    })?;
    runtime.preview(&job).map_err(|f| {
        let field = f.field.map(|x| format!(" (field {x})")).unwrap_or_default();
        ApiError::BadRequest(format!("{}{field}", f.reason))
    })
}

/// Test connection: one harmless authenticated request to `target`, answered in plain words.
pub async fn check_target(app: &App, target: &str) -> Result<crate::features::targets::ConnectionCheck, ApiError> {
    Ok(target_runtime(app, target)?.check().await)
}

fn target_runtime(
    app: &App,
    target: &str,
) -> Result<std::sync::Arc<crate::features::delivery::worker::TargetRuntime>, ApiError> {
    if !app.config.targets.contains_key(target) {
        return Err(ApiError::NotFound(format!("no target named `{target}`")));
    }
    app.worker
        .as_ref()
        .and_then(|w| w.targets.get(target))
        .ok_or_else(|| ApiError::BadRequest("this process runs no worker, so it holds no connection to targets".into()))
}

/// Reads every target's credentials again (the secrets file as it is now, then the environment) and uses them
/// from the next request on — no restart. A target that was refusing its credential sends its waiting leads at
/// once (one probes first, the rest follow when it works). A target whose secret cannot be read keeps the
/// credential it had. Triggered by the UI's *Reload secrets*, `leadline reload` and SIGHUP.
pub async fn reload_secrets(app: &App, by: &str) -> Result<Vec<SecretReload>, ApiError> {
    let worker = app
        .worker
        .as_ref()
        .ok_or_else(|| ApiError::BadRequest("this process runs no worker, so it holds no credentials".into()))?;
    let now = app.clock.now();
    let mut out = Vec::new();
    for (name, runtime) in worker.targets.current().iter() {
        let (ok, message) = match runtime.reload(&app.config) {
            Ok(true) => {
                // Team mode: the other processes end their hold too (the new credential is tried at once).
                if app.store.is_shared() {
                    app.store.end_credential_hold(name).await?;
                }
                let waiting = app.store.make_due(name, now).await?;
                (true, format!("credentials read again; it was refusing them: {waiting} waiting leads go now"))
            }
            Ok(false) => (true, "credentials read again".to_string()),
            Err(e) => (false, format!("{e:#} — it keeps the credentials it had")),
        };
        if ok {
            tracing::info!(target = %name, by, "secrets reloaded");
        } else {
            tracing::warn!(target = %name, by, error = %message, "secrets not reloaded");
        }
        out.push(SecretReload { target: name.clone(), ok, message });
    }
    worker.wake.notify_one();
    Ok(out)
}

/// Pauses or resumes a target: while paused, nothing is sent to it; its leads queue safely.
pub async fn set_target_paused(app: &App, name: &str, paused: bool, by: &str) -> Result<TargetView, ApiError> {
    if !app.config.targets.contains_key(name) {
        return Err(ApiError::NotFound(format!("no target named `{name}`")));
    }
    if paused {
        app.store.pause_target(name, by, app.clock.now()).await?;
    } else {
        app.store.resume_target(name).await?;
    }
    if let Some(r) = app.worker.as_ref().and_then(|w| w.targets.get(name)) {
        r.set_paused(paused);
        if let (false, Some(w)) = (paused, &app.worker) {
            w.wake.notify_one();
        }
    }
    tracing::info!(target = name, paused, by, "target pause changed");
    targets(app).await?.into_iter().find(|t| t.name == name).ok_or_else(|| ApiError::NotFound(name.to_string()))
}

/// Applies the stored pauses to the worker (at start).
pub async fn load_pauses(app: &App) -> anyhow::Result<()> {
    let pauses = app.store.target_pauses().await?;
    if let Some(w) = &app.worker {
        for p in pauses {
            if let Some(r) = w.targets.get(&p.target) {
                r.set_paused(true);
            }
        }
    }
    Ok(())
}
