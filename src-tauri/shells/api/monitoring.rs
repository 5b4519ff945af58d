//! What the overview, the Sources and the Alerts pages read and do: the session, health, metrics and figures, the
//! sources with their reconciliation, the alerts and their channels.

use super::dto::{Session, SourceKey, SourceView, WebhookSetup};
use super::error::ApiError;
use crate::features::app::{App, LiveEvent};
use crate::features::contact::speed::ContactSpeed;
use crate::features::figures::{self, DeliveryFigures};
use crate::features::monitor::alerts::{self, Alert};
use crate::features::monitor::health::HealthView;
use crate::features::monitor::metrics::{self, MetricSeries, Range};
use crate::features::reconcile::{self, ReconcileError, ReconciliationRun};

pub fn session(app: &App, operator: &str) -> Session {
    Session {
        version: env!("CARGO_PKG_VERSION").into(),
        operator: operator.to_string(),
        demo: app.demo,
        worker: app.worker.is_some(),
        sources: app.config.sources.keys().cloned().collect(),
        targets: app.config.targets.keys().cloned().collect(),
    }
}

pub async fn health(app: &App) -> Result<HealthView, ApiError> {
    Ok(crate::features::monitor::health(app, app.clock.now()).await?)
}

pub async fn metrics(app: &App, range: &str) -> Result<MetricSeries, ApiError> {
    let range = Range::parse(range)
        .ok_or_else(|| ApiError::BadRequest(format!("unknown range `{range}`: use 1h, 24h or 7d")))?;
    Ok(metrics::series(&app.store, range, app.clock.now()).await?)
}

pub async fn sources(app: &App) -> Result<Vec<SourceView>, ApiError> {
    let now = app.clock.now();
    let mut out = Vec::new();
    for (name, sc) in &app.config.sources {
        out.push(SourceView {
            status: crate::features::monitor::sources::assess_source(app, name, now).await?,
            kind: sc.kind().as_str().into(),
            reconciles: sc.reconcile.is_some(),
            signed: sc.is_signed(),
            last_reconciliation: reconcile::latest(&app.store, name).await?,
            recovered_7d: reconcile::recovered_since(&app.store, name, now - chrono::Duration::days(7)).await?,
            poll: match &sc.poll {
                Some(pc) => Some(crate::features::poll::view(app, name, pc, now).await?),
                None => None,
            },
            webhook: webhook_setup(app, name, sc),
        });
    }
    Ok(out)
}

/// Runs a source's reconciliation now (the button on the Sources page), announcing what it finds like a
/// scheduled run does.
pub async fn reconcile_now(app: &App, source: &str) -> Result<ReconciliationRun, ApiError> {
    let sc = app.config.sources.get(source).ok_or_else(|| ApiError::NotFound(format!("no source named `{source}`")))?;
    if sc.reconcile.is_none() {
        return Err(ApiError::BadRequest(format!(
            "source `{source}` cannot be reconciled: add a [sources.{source}.reconcile] section to the configuration"
        )));
    }
    let client = reconcile::client();
    reconcile::reconcile(app, &app.ingest, &client, app.notifier.as_ref(), source, app.clock.now()).await.map_err(|e| {
        match e {
            ReconcileError::Storage(e) => ApiError::Internal(format!("{e:#}")),
            other => ApiError::Conflict(format!("reconciliation failed: {other}")),
        }
    })
}

/// Delivery figures over `range` (`24h` or `7d`).
pub async fn figures(app: &App, range: &str) -> Result<DeliveryFigures, ApiError> {
    let span = Range::parse(range)
        .ok_or_else(|| ApiError::BadRequest(format!("unknown range `{range}`: use 1h, 24h or 7d")))?
        .span();
    let now = app.clock.now();
    let targets: Vec<String> = app.config.targets.keys().cloned().collect();
    Ok(figures::figures(&app.store, &targets, now - span, now).await?)
}

/// Speed to first contact over `range` (`24h` or `7d`): per source, from a lead's arrival to the provider
/// accepting its first message and to the message's delivery receipt, p50 and p95.
pub async fn contact_speed(app: &App, range: &str) -> Result<Vec<ContactSpeed>, ApiError> {
    let span = Range::parse(range)
        .ok_or_else(|| ApiError::BadRequest(format!("unknown range `{range}`: use 1h, 24h or 7d")))?
        .span();
    let times = app.store.contact_times(app.clock.now() - span).await?;
    Ok(crate::features::contact::speed::figures(&times))
}

pub async fn alerts(app: &App) -> Result<Vec<Alert>, ApiError> {
    Ok(alerts::list(&app.store, 200).await?)
}

/// The alert channels besides the desktop (Slack, e-mail, webhooks): what each has waiting, when it last
/// delivered, and why its last send failed while that matters.
pub async fn alert_channels(app: &App) -> Result<Vec<crate::features::monitor::channels::ChannelView>, ApiError> {
    Ok(crate::features::monitor::channels::views(app).await?)
}

pub async fn acknowledge_alert(app: &App, id: i64, by: &str) -> Result<Alert, ApiError> {
    let alert = alerts::acknowledge(&app.store, id, by, app.clock.now())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no alert with id {id}")))?;
    let _ = app.live.send(LiveEvent::AlertsChanged);
    Ok(alert)
}

/// A Google Ads source's webhook setup for the Sources page.
fn webhook_setup(app: &App, name: &str, sc: &crate::config::SourceConfig) -> Option<WebhookSetup> {
    let crate::config::SourceSettings::GoogleAds(google) = &sc.settings else {
        return None;
    };
    let path = format!("/ingest/{name}");
    let url = app.config.monitor.public_url.as_ref().map(|u| format!("{}{path}", u.trim_end_matches('/')));
    let key_masked = google_key(app, name, sc).map(|k| mask_key(&k));
    Some(WebhookSetup { path, url, key_masked, delivers_test_leads: google.deliver_test_leads })
}

/// The key of a Google Ads source (its `key_env`), when it can be read.
fn google_key(app: &App, name: &str, sc: &crate::config::SourceConfig) -> Option<String> {
    let crate::config::SourceSettings::GoogleAds(google) = &sc.settings else { return None };
    google.key_env.as_ref().and_then(|var| app.config.secret(&format!("sources.{name}.key_env"), var).ok())
}

/// A secret as views show it: `••••` and its last 4 characters (all of it masked when it is short), enough to tell
/// which key Google Ads holds without giving it away.
fn mask_key(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() < 12 {
        return "••••".into();
    }
    format!("••••{}", chars[chars.len() - 4..].iter().collect::<String>())
}

/// A Google Ads source's key, unmasked, for the person setting up the lead form's webhook (Google Ads has no
/// other way to learn it). Every reveal is logged with who asked.
pub async fn reveal_source_key(app: &App, source: &str, actor: &str) -> Result<SourceKey, ApiError> {
    let sc = app.config.sources.get(source).ok_or_else(|| ApiError::NotFound(format!("no source named `{source}`")))?;
    if sc.kind() != crate::config::SourceKind::GoogleAds {
        return Err(ApiError::BadRequest(format!(
            "source `{source}` is not a Google Ads source: it has no key to paste"
        )));
    }
    let key = google_key(app, source, sc).ok_or_else(|| {
        ApiError::BadRequest(format!("source `{source}`'s key cannot be read: set its key_env (or the keyring entry)"))
    })?;
    tracing::info!(source = %source, actor = %actor, "a Google Ads source's key was revealed for pasting into Google Ads");
    Ok(SourceKey { source: source.to_string(), key })
}

#[cfg(test)]
mod key_tests {
    #[test]
    fn a_key_is_shown_by_its_last_four_characters_only() {
        assert_eq!(super::mask_key("0123456789abcdefXYZW"), "••••XYZW");
        assert_eq!(super::mask_key("short-key"), "••••");
    }
}
