//! Alert channels beyond the desktop (`[monitor.channels.NAME]`): Slack, e-mail, a generic webhook, so the person
//! who is not at their desk hears about a dead CRM token.
//!
//! Each channel announces on its own, with its own policy per kind, quiet hours and digest: when an alert opens,
//! [`on_open`] records for every channel what to do with it (send it now, hold it for the digest or for the end of
//! quiet hours, nothing) in `alert_channel`; a task per channel ([`run`]) then sends what is due every couple of
//! seconds ([`ChannelRunner::pass`], decisions in [`super::notify::plan_channel`]).
//!
//! Sending never blocks or breaks the monitor: the monitor only writes rows, each channel's task sends with a
//! timeout of its own, a channel that is down delays no other. A failed send keeps its row as it was, counts the
//! failure and its message (logged, and shown in the health verdict and on the Alerts page), and is retried
//! after a growing delay ([`super::notify::retry_delay`]). A send first takes a lease on its rows, so processes
//! sharing one database never send the same announcement twice. Secrets (webhook URLs, the SMTP login, the
//! signing key) are read at each send from the secrets file or the environment and never appear in a message
//! or a log line.

pub mod email;
pub mod message;
pub mod slack;
pub mod webhook;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::{ChannelConfig, ChannelSettings, Config, SlackChannel, WebhookChannel};
use crate::features::app::App;
use crate::model::{Page, Place};
use crate::store::{Alert, ChannelState, ChannelSummary, ChannelTrouble};

use super::health::{HealthVerdict, VerdictLevel};
use super::notify::{self, Announce, ChannelMoment};
use message::{Announcement, What};

/// How often each channel's task looks for something to send.
const PASS_EVERY: Duration = Duration::from_secs(2);

/// Records, for every configured channel, how it is to announce an alert that just opened at `now`.
pub async fn on_open(app: &App, alert: &Alert, now: DateTime<Utc>) {
    let m = &app.config.monitor;
    let entries: Vec<(String, ChannelState)> = m
        .channels
        .iter()
        .filter_map(|(name, c)| {
            let quiet = notify::quiet_at(c.quiet_hours(m), m.tz(), now);
            let state =
                match notify::on_open(&c.policy(alert.kind, alert.severity), alert.severity, quiet, c.hold_critical(m))
                {
                    Announce::Now => ChannelState::Due,
                    Announce::Hold(why) => ChannelState::Held(why),
                    Announce::Never => return None,
                };
            Some((name.clone(), state))
        })
        .collect();
    if entries.is_empty() {
        return;
    }
    if let Err(e) = app.store.queue_alert_for_channels(alert.id, &entries).await {
        tracing::error!(error = %format!("{e:#}"), alert = alert.id, "cannot queue the alert for its channels");
    }
}

/// Runs every channel's task until aborted (dropping the returned set aborts them). Channels are read from the
/// configuration in force at every pass, so a channel added while Leadline runs gets its task within a pass, and
/// one removed stops sending (its task idles).
pub fn run(app: &App) -> tokio::task::JoinSet<()> {
    let mut supervisor = tokio::task::JoinSet::new();
    let app = app.clone();
    supervisor.spawn(async move {
        // Dropped with this task when it is aborted, which aborts every channel's task.
        let mut tasks = tokio::task::JoinSet::new();
        let mut started = std::collections::BTreeSet::new();
        let mut tick = tokio::time::interval(PASS_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let names: Vec<String> = app.config.monitor.channels.keys().cloned().collect();
            for name in names {
                if !started.insert(name.clone()) {
                    continue;
                }
                let app = app.clone();
                let mut runner = ChannelRunner::new(&app, &name);
                tasks.spawn(async move {
                    let mut tick = tokio::time::interval(PASS_EVERY);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        tick.tick().await;
                        runner.pass(&app, app.clock.now()).await;
                    }
                });
            }
        }
    });
    supervisor
}

/// One channel's sender: its HTTP client and when it last sent its digest.
pub struct ChannelRunner {
    name: String,
    http: reqwest::Client,
    last_digest: DateTime<Utc>,
}

impl ChannelRunner {
    /// A runner for channel `name`; its first digest is due one interval after now.
    pub fn new(app: &App, name: &str) -> ChannelRunner {
        let timeout = app.config.monitor.channels.get(name).map_or(10, |c| c.timeout_seconds);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(timeout))
            .connect_timeout(Duration::from_secs(timeout))
            // A webhook URL that redirects is a mistake to report, not to follow with the alert.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("Leadline/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        ChannelRunner { name: name.to_string(), http, last_digest: app.clock.now() }
    }

    /// Sends what this channel has due at `now`: immediate alerts one by one, held ones in one digest,
    /// reminders. Failures are recorded and logged, never returned: the next pass retries.
    pub async fn pass(&mut self, app: &App, now: DateTime<Utc>) {
        let Some(channel) = app.config.monitor.channels.get(&self.name) else { return };
        let m = &app.config.monitor;
        let quiet_now = notify::quiet_at(channel.quiet_hours(m), m.tz(), now);
        let digest_due = now - self.last_digest >= chrono::Duration::minutes(channel.digest_interval_minutes(m) as i64);
        let entries = match app.store.channel_entries(&self.name, channel.renotify_minutes.is_some(), now).await {
            Ok(e) => e,
            Err(e) => {
                let error = format!("{e:#}");
                return tracing::error!(channel = %self.name, %error, "cannot read the channel's alerts");
            }
        };
        let at = ChannelMoment { now, quiet_now, hold_critical: channel.hold_critical(m), digest_due };
        let plan = notify::plan_channel(&entries, |a| channel.policy(a.kind, a.severity), at);
        if digest_due && !quiet_now {
            self.last_digest = now;
        }
        let notifications =
            |id: i64| entries.iter().find(|e| e.alert.id == id).map(|e| (e.alert.clone(), e.notifications));
        for (id, occasion) in plan.single {
            let Some(entry) = notifications(id) else { continue };
            self.send(app, channel, What::from(occasion), vec![entry], now).await;
        }
        if !plan.digest.is_empty() {
            let held: Vec<(Alert, i64)> = plan.digest.iter().filter_map(|id| notifications(*id)).collect();
            self.send(app, channel, What::Digest, held, now).await;
        }
    }

    /// Claims the alerts' rows, sends one announcement of them, records the outcome.
    async fn send(
        &self,
        app: &App,
        channel: &ChannelConfig,
        what: What,
        alerts: Vec<(Alert, i64)>,
        now: DateTime<Utc>,
    ) {
        let ids: Vec<i64> = alerts.iter().map(|(a, _)| a.id).collect();
        let lease = now + chrono::Duration::seconds(channel.timeout_seconds as i64 * 2 + 30);
        let claimed = match app.store.claim_channel_entries(&self.name, &ids, now, lease).await {
            Ok(c) => c,
            Err(e) => {
                return tracing::error!(channel = %self.name, error = %format!("{e:#}"), "cannot claim announcements")
            }
        };
        let alerts: Vec<(Alert, i64)> = alerts.into_iter().filter(|(a, _)| claimed.contains(&a.id)).collect();
        if alerts.is_empty() {
            return;
        }
        let what = if what == What::Digest || alerts.len() > 1 { What::Digest } else { what };
        let n = Announcement::new(&self.name, what, alerts, now, app.config.monitor.public_url.as_deref());
        let outcome = match &channel.settings {
            ChannelSettings::Slack(slack) => self.post_slack(&app.config, slack, &n).await,
            ChannelSettings::Webhook(hook) => self.post_webhook(&app.config, hook, &n).await,
            ChannelSettings::Email(mail) => {
                let timeout = Duration::from_secs(channel.timeout_seconds);
                match tokio::time::timeout(timeout * 2, email::send(&self.name, mail, timeout, &app.config, &n)).await {
                    Ok(r) => r,
                    Err(_) => Err(format!("no answer from the SMTP server within {} s", timeout.as_secs() * 2)),
                }
            }
            ChannelSettings::Unknown(word) => Err(format!("`{word}` is not a channel kind")),
        };
        let (channel, what) = (self.name.as_str(), what.as_str());
        match &outcome {
            Ok(()) => tracing::info!(channel, what, alerts = ?claimed, "alert channel delivered"),
            Err(e) => tracing::warn!(channel, what, error = %e, "alert channel could not deliver; it is retried"),
        }
        let ids: Vec<i64> = n.alerts.iter().map(|a| a.id).collect();
        if let Err(e) = app.store.finish_channel_entries(&self.name, &ids, now, outcome.err().as_deref()).await {
            tracing::error!(channel = %self.name, error = %format!("{e:#}"), "cannot record a channel's send");
        }
    }

    async fn post_slack(&self, config: &Config, slack: &SlackChannel, n: &Announcement) -> Result<(), String> {
        let url = secret_url(config, &self.name, "webhook_url_env", slack.webhook_url_env.as_deref())?;
        let body = serde_json::to_vec(&slack::payload(n)).map_err(|e| e.to_string())?;
        self.post(url, body, Vec::new()).await
    }

    async fn post_webhook(&self, config: &Config, hook: &WebhookChannel, n: &Announcement) -> Result<(), String> {
        let url = secret_url(config, &self.name, "url_env", hook.url_env.as_deref())?;
        let body = serde_json::to_vec(&webhook::body(n)).map_err(|e| e.to_string())?;
        let mut headers = vec![("Idempotency-Key", n.idempotency_key.clone())];
        if let Some(var) = &hook.secret_env {
            let secret =
                config.secret(&format!("monitor.channels.{}.secret_env", self.name), var).map_err(|e| e.to_string())?;
            headers.push((webhook::SIGNATURE_HEADER, webhook::sign(secret.as_bytes(), &body)));
        }
        self.post(url, body, headers).await
    }

    /// POSTs a JSON body; any 2xx is a success. The error names the status and the start of the answer, or
    /// what failed on the way, never the URL (for Slack the URL is the credential).
    async fn post(&self, url: reqwest::Url, body: Vec<u8>, headers: Vec<(&str, String)>) -> Result<(), String> {
        let mut request = self.http.post(url).header("content-type", "application/json").body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| describe(e.without_url()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        Err(format!("HTTP {}: {}", status.as_u16(), message::clip(text.trim(), 200)))
    }
}

/// A reqwest error and its causes, on one line ("error sending request: … : connection refused").
fn describe(e: reqwest::Error) -> String {
    if e.is_timeout() {
        return "no answer in time".to_string();
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The URL in the secret `var` (config key `monitor.channels.NAME.FIELD`); the error never shows the value.
fn secret_url(config: &Config, name: &str, field: &str, var: Option<&str>) -> Result<reqwest::Url, String> {
    let key = format!("monitor.channels.{name}.{field}");
    let var = var.ok_or_else(|| format!("{key}: is required"))?;
    let value = config.secret(&key, var).map_err(|e| e.to_string())?;
    match reqwest::Url::parse(value.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(u),
        _ => Err(format!("{key}: the value of {var} is not an http(s) URL")),
    }
}

/// Every channel's secrets are set (and the URLs in them are URLs): `serve` and `check-config` run it before
/// starting, as they do for the targets' tokens, so a missing variable stops the start instead of a send at 3 am.
pub fn check(config: &Config) -> anyhow::Result<()> {
    for (name, channel) in &config.monitor.channels {
        for (field, var) in channel.secret_vars() {
            let key = format!("monitor.channels.{name}.{field}");
            config.secret(&key, var)?;
        }
        match &channel.settings {
            ChannelSettings::Slack(slack) => {
                secret_url(config, name, "webhook_url_env", slack.webhook_url_env.as_deref())
                    .map_err(anyhow::Error::msg)?;
            }
            ChannelSettings::Webhook(hook) => {
                secret_url(config, name, "url_env", hook.url_env.as_deref()).map_err(anyhow::Error::msg)?;
            }
            ChannelSettings::Email(_) | ChannelSettings::Unknown(_) => {}
        }
    }
    Ok(())
}

/// The channels whose last send failed and that still have something to announce. A database that cannot
/// say is logged and taken as none: the health view it feeds must not fail for it.
pub async fn troubles(app: &App) -> Vec<ChannelTrouble> {
    if app.config.monitor.channels.is_empty() {
        return Vec::new();
    }
    app.store.channel_troubles().await.unwrap_or_else(|e| {
        tracing::error!(error = %format!("{e:#}"), "cannot read the alert channels' failures");
        Vec::new()
    })
}

/// Each configured channel: its kind, what waits, when it last delivered, why it failed if it does (for a list
/// of channels in the desk; the API does not serve it yet).
#[derive(Debug, Clone, serde::Serialize, ts_rs::TS)]
pub struct ChannelView {
    pub name: String,
    pub kind: String,
    /// Announcements not sent yet (held for a digest or quiet hours, or failing).
    pub waiting: i64,
    pub last_sent_at: Option<DateTime<Utc>>,
    /// The last failure, while announcements it concerns still wait.
    pub trouble: Option<ChannelTrouble>,
}

/// The configured channels and how they fare.
pub async fn views(app: &App) -> anyhow::Result<Vec<ChannelView>> {
    if app.config.monitor.channels.is_empty() {
        return Ok(Vec::new());
    }
    let summaries: Vec<ChannelSummary> = app.store.channel_summaries().await?;
    let troubles = app.store.channel_troubles().await?;
    Ok(app
        .config
        .monitor
        .channels
        .iter()
        .map(|(name, c)| {
            let summary = summaries.iter().find(|s| &s.channel == name);
            ChannelView {
                name: name.clone(),
                kind: c.settings.name().to_string(),
                waiting: summary.map_or(0, |s| s.waiting),
                last_sent_at: summary.and_then(|s| s.last_sent_at),
                trouble: troubles.iter().find(|t| &t.channel == name).cloned(),
            }
        })
        .collect())
}

/// The health verdict, told about a failing alert channel when all else is well: nobody would otherwise notice
/// that the person on call hears nothing. Pure.
pub fn with_troubles(verdict: HealthVerdict, troubles: &[ChannelTrouble]) -> HealthVerdict {
    match (verdict.level, troubles.first()) {
        (VerdictLevel::AllWell, Some(t)) => HealthVerdict {
            level: VerdictLevel::Degraded,
            reason: format!(
                "the alert channel {} cannot deliver ({}); {} waiting {} retried",
                t.channel,
                t.last_error,
                t.failing,
                if t.failing == 1 { "announcement is" } else { "announcements are" }
            ),
            link: Some(Place::page(Page::Alerts)),
        },
        _ => verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_channel_shows_in_an_otherwise_good_verdict() {
        let good = HealthVerdict { level: VerdictLevel::AllWell, reason: "every lead is delivered".into(), link: None };
        let trouble = ChannelTrouble {
            channel: "oncall".into(),
            failing: 2,
            last_error: "HTTP 500: rollup_error".into(),
            last_attempt_at: "2026-03-02T10:00:00Z".parse().unwrap(),
        };
        let v = with_troubles(good.clone(), std::slice::from_ref(&trouble));
        assert_eq!(v.level, VerdictLevel::Degraded);
        assert!(v.reason.contains("oncall") && v.reason.contains("HTTP 500"), "{}", v.reason);
        assert_eq!(with_troubles(good.clone(), &[]), good);
        let worse = HealthVerdict { level: VerdictLevel::NeedsPerson, ..good };
        assert_eq!(with_troubles(worse.clone(), &[trouble]), worse, "what needs a person comes first");
    }
}
