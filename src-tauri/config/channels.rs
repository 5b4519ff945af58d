//! `[monitor.channels.NAME]`: alert channels beyond the desktop (Slack, a webhook, e-mail), each kind's settings
//! in its own variant of [`ChannelSettings`], read from the file's flat table through `ChannelFile`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::*;
use crate::model::AlertKind;

/// An alert channel beyond the desktop, `[monitor.channels.NAME]`: where it sends (Slack, e-mail, a webhook),
/// which alert kinds it announces and how, and when it keeps quiet. Each channel announces on its own: an alert
/// sent to Slack may be held for the e-mail's digest. Secrets (the Slack webhook URL, the SMTP login, the
/// webhook's URL and signing key) are named by `*_env` fields and read, like the targets' tokens, from the
/// secrets file or the environment at each send. What each kind sends: `docs/operators.md`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(from = "ChannelFile")]
pub struct ChannelConfig {
    /// The kind, with what only that kind has.
    pub settings: ChannelSettings,
    /// Per alert kind: `immediate`, `digest` or `none`. A kind not named here: critical alerts immediately,
    /// the others in this channel's digest.
    pub alerts: BTreeMap<String, NotifyPolicy>,
    /// This channel's quiet hours: a span, or `false` for none. Default: the monitor's.
    pub quiet_hours: Option<ChannelQuietHours>,
    /// Whether quiet hours hold critical alerts too. Default: the monitor's.
    pub quiet_hours_hold_critical: Option<bool>,
    /// How often this channel's held alerts go out together. Default: the monitor's.
    pub digest_interval_minutes: Option<u64>,
    /// Announce an immediate alert again ("Still open") while nobody acknowledged it, every this many minutes.
    /// `None` (the default): once.
    pub renotify_minutes: Option<u64>,
    /// Longest time one send may take (connect, TLS, answer); a slower one counts as failed and is retried.
    pub timeout_seconds: u64,
    /// The kind-specific keys the file sets (of any kind), in [`ChannelSettings::KEYS`]' order: `validate`
    /// refuses one of another kind by name, and names a key the kind requires that is missing.
    pub(crate) keys: Vec<&'static str>,
}

/// A channel's kind with the settings only that kind has. The keys a kind requires are `Option`s here, so that
/// `validate` can name a missing one (`monitor.channels.oncall.webhook_url_env: is required ...`).
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelSettings {
    Slack(SlackChannel),
    Webhook(WebhookChannel),
    Email(EmailChannel),
    /// A `kind` Leadline does not know: `validate` refuses it, naming the word.
    Unknown(String),
}

/// `kind = "slack"`.
#[derive(Debug, Clone, PartialEq)]
pub struct SlackChannel {
    /// The variable holding the incoming webhook's URL (the URL itself is the credential).
    pub webhook_url_env: Option<String>,
}

/// `kind = "webhook"`.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookChannel {
    /// The variable holding the URL alerts are POSTed to.
    pub url_env: Option<String>,
    /// The variable holding the key the body is signed with (HMAC-SHA256, `X-Leadline-Signature-256`).
    pub secret_env: Option<String>,
}

/// `kind = "email"`.
#[derive(Debug, Clone, PartialEq)]
pub struct EmailChannel {
    /// The SMTP server's host name.
    pub smtp_host: Option<String>,
    /// Default 587 with `starttls`, 465 with `tls`, 25 with `none`.
    pub smtp_port: Option<u16>,
    /// `starttls` (the default), `tls` (implicit TLS, "SMTPS") or `none` (a relay on this machine only).
    pub tls: Option<String>,
    /// Variables holding the SMTP login; both or neither.
    pub username_env: Option<String>,
    pub password_env: Option<String>,
    /// The sender, `Leadline <alerts@example.com>` or a bare address.
    pub from: Option<String>,
    /// The recipients.
    pub to: Vec<String>,
}

/// A channel as the file writes it: every kind's keys side by side. Read into this, then into
/// [`ChannelConfig`], whose [`ChannelSettings`] keeps only the keys of its kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelFile {
    /// `slack`, `email` or `webhook` (a string checked by `validate`, so a wrong kind names its key).
    kind: String,
    webhook_url_env: Option<String>,
    url_env: Option<String>,
    secret_env: Option<String>,
    smtp_host: Option<String>,
    smtp_port: Option<u16>,
    tls: Option<String>,
    username_env: Option<String>,
    password_env: Option<String>,
    from: Option<String>,
    #[serde(default)]
    to: Vec<String>,
    #[serde(default)]
    alerts: BTreeMap<String, NotifyPolicy>,
    quiet_hours: Option<ChannelQuietHours>,
    quiet_hours_hold_critical: Option<bool>,
    digest_interval_minutes: Option<u64>,
    renotify_minutes: Option<u64>,
    #[serde(default = "default_channel_timeout")]
    timeout_seconds: u64,
}

impl From<ChannelFile> for ChannelConfig {
    fn from(f: ChannelFile) -> ChannelConfig {
        let set = [
            f.webhook_url_env.is_some(),
            f.url_env.is_some(),
            f.secret_env.is_some(),
            f.smtp_host.is_some(),
            f.smtp_port.is_some(),
            f.tls.is_some(),
            f.username_env.is_some(),
            f.password_env.is_some(),
            f.from.is_some(),
            !f.to.is_empty(),
        ];
        let keys = ChannelSettings::KEYS.into_iter().zip(set).filter(|(_, set)| *set).map(|(key, _)| key).collect();
        let settings = match f.kind.as_str() {
            "slack" => ChannelSettings::Slack(SlackChannel { webhook_url_env: f.webhook_url_env }),
            "webhook" => ChannelSettings::Webhook(WebhookChannel { url_env: f.url_env, secret_env: f.secret_env }),
            "email" => ChannelSettings::Email(EmailChannel {
                smtp_host: f.smtp_host,
                smtp_port: f.smtp_port,
                tls: f.tls,
                username_env: f.username_env,
                password_env: f.password_env,
                from: f.from,
                to: f.to,
            }),
            _ => ChannelSettings::Unknown(f.kind),
        };
        ChannelConfig {
            settings,
            alerts: f.alerts,
            quiet_hours: f.quiet_hours,
            quiet_hours_hold_critical: f.quiet_hours_hold_critical,
            digest_interval_minutes: f.digest_interval_minutes,
            renotify_minutes: f.renotify_minutes,
            timeout_seconds: f.timeout_seconds,
            keys,
        }
    }
}

impl ChannelSettings {
    /// Every kind-specific key, in the order `validate` checks them.
    pub const KEYS: [&'static str; 10] = [
        "webhook_url_env",
        "url_env",
        "secret_env",
        "smtp_host",
        "smtp_port",
        "tls",
        "username_env",
        "password_env",
        "from",
        "to",
    ];

    /// The kind's word, as the file wrote it.
    pub fn name(&self) -> &str {
        match self {
            ChannelSettings::Slack(_) => "slack",
            ChannelSettings::Webhook(_) => "webhook",
            ChannelSettings::Email(_) => "email",
            ChannelSettings::Unknown(word) => word,
        }
    }
}

fn default_channel_timeout() -> u64 {
    10
}

/// `quiet_hours` of a channel: its own span, or `false` for none while the monitor has some.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ChannelQuietHours {
    Span(TimeSpan),
    Off(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    Slack,
    Email,
    Webhook,
}

impl ChannelKind {
    pub const NAMES: [&'static str; 3] = ["slack", "email", "webhook"];

    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Slack => "slack",
            ChannelKind::Email => "email",
            ChannelKind::Webhook => "webhook",
        }
    }
}

/// How an e-mail channel reaches its SMTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS, which is required (no fallback to plain text).
    StartTls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No encryption: only for a relay on this machine or a test server.
    None,
}

impl EmailChannel {
    pub fn smtp_tls(&self) -> Option<SmtpTls> {
        match self.tls.as_deref() {
            None | Some("starttls") => Some(SmtpTls::StartTls),
            Some("tls") => Some(SmtpTls::Tls),
            Some("none") => Some(SmtpTls::None),
            Some(_) => None,
        }
    }

    pub fn smtp_port(&self) -> u16 {
        self.smtp_port.unwrap_or(match self.smtp_tls() {
            Some(SmtpTls::Tls) => 465,
            Some(SmtpTls::None) => 25,
            _ => 587,
        })
    }
}

impl ChannelConfig {
    /// The kind, once `validate` accepted the word.
    pub fn kind(&self) -> Option<ChannelKind> {
        match self.settings {
            ChannelSettings::Slack(_) => Some(ChannelKind::Slack),
            ChannelSettings::Email(_) => Some(ChannelKind::Email),
            ChannelSettings::Webhook(_) => Some(ChannelKind::Webhook),
            ChannelSettings::Unknown(_) => None,
        }
    }

    /// An e-mail channel's settings.
    pub fn email(&self) -> Option<&EmailChannel> {
        match &self.settings {
            ChannelSettings::Email(e) => Some(e),
            _ => None,
        }
    }

    /// How this channel announces an alert of `kind` opened with `severity`: the kind's entry in `alerts`,
    /// else critical alerts at once and the others in the digest (a phone should ring for a dead token, not
    /// for a trend). Re-notification (`renotify_minutes`) applies to immediate ones only.
    pub fn policy(&self, kind: AlertKind, severity: crate::model::Severity) -> AlertPolicy {
        let notify = self.alerts.get(kind.as_str()).copied().unwrap_or(match severity {
            crate::model::Severity::Critical => NotifyPolicy::Immediate,
            _ => NotifyPolicy::Digest,
        });
        let renotify_minutes = if notify == NotifyPolicy::Immediate { self.renotify_minutes } else { None };
        AlertPolicy { notify, renotify_minutes }
    }

    /// This channel's quiet hours: its own, none (`false`), or the monitor's.
    pub fn quiet_hours<'a>(&'a self, monitor: &'a MonitorConfig) -> Option<&'a TimeSpan> {
        match &self.quiet_hours {
            Some(ChannelQuietHours::Span(span)) => Some(span),
            Some(ChannelQuietHours::Off(_)) => None,
            None => monitor.quiet_hours.as_ref(),
        }
    }

    pub fn hold_critical(&self, monitor: &MonitorConfig) -> bool {
        self.quiet_hours_hold_critical.unwrap_or(monitor.quiet_hours_hold_critical)
    }

    pub fn digest_interval_minutes(&self, monitor: &MonitorConfig) -> u64 {
        self.digest_interval_minutes.unwrap_or(monitor.digest_interval_minutes)
    }

    /// The variables this channel reads its secrets from, each with its config key (for messages).
    pub fn secret_vars(&self) -> Vec<(&'static str, &str)> {
        let vars: Vec<(&'static str, &Option<String>)> = match &self.settings {
            ChannelSettings::Slack(s) => vec![("webhook_url_env", &s.webhook_url_env)],
            ChannelSettings::Webhook(w) => vec![("url_env", &w.url_env), ("secret_env", &w.secret_env)],
            ChannelSettings::Email(e) => vec![("username_env", &e.username_env), ("password_env", &e.password_env)],
            ChannelSettings::Unknown(_) => Vec::new(),
        };
        vars.into_iter().filter_map(|(field, var)| var.as_deref().map(|v| (field, v))).collect()
    }
}
