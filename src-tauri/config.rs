//! Leadline's configuration: one TOML file, secrets read from environment variables.
//!
//! Every key is documented in `docs/configuration.md`. Loading validates the whole file and fails with a
//! message that names the offending key (`targets.crm.backoff.base_ms: must be greater than 0`), so a bad
//! config stops the process at start instead of misbehaving later.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::model::{AlertKind, ErrorClass};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), message: message.into() }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub database: DatabaseConfig,
    #[serde(default)]
    pub worker: WorkerConfig,
    #[serde(default)]
    pub monitor: MonitorConfig,
    #[serde(default)]
    pub sources: BTreeMap<String, SourceConfig>,
    #[serde(default)]
    pub targets: BTreeMap<String, TargetConfig>,
    #[serde(default)]
    pub replay: ReplayConfig,
    #[serde(default)]
    pub privacy: PrivacyConfig,
    /// A file of secrets, one `NAME=value` per line (the `.env` / systemd `EnvironmentFile` format), read at
    /// start and again at every reload of secrets (`leadline reload`, SIGHUP, the UI's *Reload secrets*): a
    /// renewed token takes effect without a restart. A name found here wins over the process environment,
    /// which cannot change while Leadline runs. Relative to the config file's folder.
    #[serde(default)]
    pub secrets_file: Option<PathBuf>,
    /// Secrets given in code rather than the environment (the demo and tests): variable name → value.
    /// Never read from the file.
    #[serde(skip)]
    pub inline_secrets: BTreeMap<String, String>,
    /// The file this configuration was loaded from: the one the app's settings page writes back to. `None` for a
    /// configuration built in code (the demo), whose settings are read-only.
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address the ingest server binds to.
    pub listen: SocketAddr,
    /// Largest accepted webhook body, in bytes; larger bodies get 413. A source may set a smaller one.
    pub max_body_bytes: usize,
    /// Host names (besides IP addresses and `localhost`) that requests may name in their `Host` header: the
    /// name a reverse proxy or tunnel forwards. Anything else is refused (DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// Most open client connections; further ones are closed at once.
    pub max_connections: usize,
    /// A client must send a request's headers within this time, or the connection is closed.
    pub header_timeout_seconds: u64,
    /// A webhook body must arrive whole within this time, or the request is refused (408).
    pub body_timeout_seconds: u64,
    /// Most webhook bodies larger than 16 KiB being read at once (each is buffered whole before its signature is
    /// checked); more such requests wait for a turn up to `body_timeout_seconds`, then get 503. Smaller bodies
    /// need no turn.
    pub max_ingest_in_flight: usize,
    /// Once its headers are in, a webhook body must keep arriving at least this fast (bytes a second), else it is
    /// refused (408) and lets go of what it held. See `body_stall_seconds` for how far behind it may fall.
    pub min_body_bytes_per_second: u64,
    /// How far, in seconds, a body may fall behind `min_body_bytes_per_second`: a body that stops sending is cut
    /// off this long after its last bytes (or after its headers, if it sends none).
    pub body_stall_seconds: u64,
    /// Most webhook bodies one client address (an IPv6 client: its /64) may have on their way at once; further
    /// requests from it get 429 at once.
    pub max_bodies_per_peer: usize,
    /// Reverse proxies and load balancers (addresses or CIDR networks, `"10.0.0.0/8"`) whose `forwarded_header`
    /// names the client. From any other peer that header is ignored and the client is the connection's address.
    pub trusted_proxies: Vec<String>,
    /// The header the trusted proxies write the client's address in: `x-forwarded-for` or `forwarded` (RFC 7239).
    pub forwarded_header: ForwardedHeader,
}

/// Where a trusted proxy names the client it forwards for. Only the header the proxy writes may be read: a client
/// can send either one, and a proxy passes on the one it does not write untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx, HAProxy, cloud load balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

impl ServerConfig {
    /// `trusted_proxies` as networks (a bare address is a network of one); fails naming the entry that is neither.
    pub fn trusted_proxy_networks(&self) -> Result<Vec<ipnet::IpNet>, ConfigError> {
        self.trusted_proxies
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let entry = entry.trim();
                entry
                    .parse::<ipnet::IpNet>()
                    .map(|net| net.trunc())
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        invalid(
                            format!("server.trusted_proxies[{i}]"),
                            format!("`{entry}` is not an IP address or network (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`)"),
                        )
                    })
            })
            .collect()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8787".parse().expect("valid default address"),
            max_body_bytes: 1024 * 1024,
            allowed_hosts: Vec::new(),
            max_connections: 1024,
            header_timeout_seconds: 10,
            body_timeout_seconds: 30,
            max_ingest_in_flight: 64,
            min_body_bytes_per_second: 1024,
            body_stall_seconds: 5,
            max_bodies_per_peer: 32,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::default(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite:///absolute/path.db` or a plain file path (SQLite, the embedded default), or
    /// `postgres://user:password@host:port/database` (PostgreSQL, for a team sharing one database; the driver's URL
    /// options apply, e.g. `?host=/run/postgresql` for a Unix socket, `?sslmode=require`). Default:
    /// `leadline.db` in the platform data folder.
    pub url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// Whether this process runs the delivery worker (ingest-only nodes set it to false).
    pub enabled: bool,
    /// Most jobs claimed per target in one claim.
    pub batch_size: u32,
    /// How long a claimed job is leased; a job whose lease expires is returned to `pending` by the rescuer.
    pub lease_seconds: u64,
    /// Sleep between polls when no job is due (new events wake the worker early).
    pub poll_interval_ms: u64,
    /// How often the rescuer looks for expired leases.
    pub rescue_interval_seconds: u64,
    /// On shutdown, how long in-flight jobs may run before they are released back to `pending`.
    pub shutdown_grace_seconds: u64,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            batch_size: 100,
            lease_seconds: 60,
            poll_interval_ms: 250,
            rescue_interval_seconds: 10,
            shutdown_grace_seconds: 15,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MonitorConfig {
    /// Raise an `oldest_pending` alert when a lead has waited longer than this for delivery.
    pub oldest_pending_alert_seconds: u64,
    /// IANA time zone the business hours, quiet hours and hour-of-week baselines are read in.
    pub timezone: String,
    /// When traffic is expected; the fallback baseline of a source too new to have its own history.
    pub business_hours: BusinessHours,
    /// Notifications in this daily span are held for the digest, except critical alerts (unless
    /// `quiet_hours_hold_critical`). `None`: no quiet hours.
    pub quiet_hours: Option<TimeSpan>,
    pub quiet_hours_hold_critical: bool,
    /// How often held and digest-policy alerts are announced together in one notification.
    pub digest_interval_minutes: u64,
    /// Raise `dead_letter_growth` when this many leads to one target were dead-lettered in the last hour.
    pub dead_letter_growth_per_hour: u64,
    /// Raise `retry_budget` when a pending lead's next possible try comes within this many minutes of its retry
    /// time budget's end (or after it); at most a quarter of the budget counts (`monitor::budget::margin`).
    pub retry_budget_warning_minutes: u64,
    pub volume: VolumeConfig,
    pub metrics: MetricsConfig,
    /// Per alert kind: how it is announced and when it is announced again.
    pub alerts: BTreeMap<String, AlertPolicy>,
    /// Where else alerts are announced besides the desktop (or the log): Slack, e-mail, a webhook. Each channel
    /// has its own policy per kind and its own quiet hours; see [`ChannelConfig`].
    pub channels: BTreeMap<String, ChannelConfig>,
    /// The desk's address as people reach it (`https://leads.example.com`, behind the reverse proxy): messages
    /// sent to channels link to the place where an alert is acted on. `None`: no link.
    pub public_url: Option<String>,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self {
            oldest_pending_alert_seconds: 900,
            timezone: "UTC".into(),
            business_hours: BusinessHours::default(),
            quiet_hours: None,
            quiet_hours_hold_critical: false,
            digest_interval_minutes: 60,
            dead_letter_growth_per_hour: 20,
            retry_budget_warning_minutes: 30,
            volume: VolumeConfig::default(),
            metrics: MetricsConfig::default(),
            alerts: BTreeMap::new(),
            channels: BTreeMap::new(),
            public_url: None,
        }
    }
}

impl MonitorConfig {
    pub fn tz(&self) -> chrono_tz::Tz {
        self.timezone.parse().unwrap_or(chrono_tz::UTC)
    }

    /// The policy for `kind`: the configured one, else the default (immediate; digest for the kinds that are
    /// about trends rather than a broken flow).
    pub fn policy(&self, kind: AlertKind) -> AlertPolicy {
        if let Some(p) = self.alerts.get(kind.as_str()) {
            return p.clone();
        }
        match kind {
            AlertKind::DeadLetterGrowth | AlertKind::ReconciliationFound | AlertKind::AutoReplay => {
                AlertPolicy { notify: NotifyPolicy::Digest, renotify_minutes: None }
            }
            AlertKind::PermanentConfig
            | AlertKind::BreakerOpen
            | AlertKind::Silence
            | AlertKind::VolumeDrop
            | AlertKind::Credentials
            | AlertKind::SourceFailing => AlertPolicy { notify: NotifyPolicy::Immediate, renotify_minutes: Some(60) },
            AlertKind::OldestPending | AlertKind::NewCause | AlertKind::RetryBudget => {
                AlertPolicy { notify: NotifyPolicy::Immediate, renotify_minutes: None }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NotifyPolicy {
    /// A desktop notification as soon as the alert opens.
    Immediate,
    /// Collected and announced together every `digest_interval_minutes`.
    Digest,
    /// Shown in the app's alert list only.
    None,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AlertPolicy {
    pub notify: NotifyPolicy,
    /// Announce again (marked "still open") when the alert is still open and nobody acknowledged it after this
    /// many minutes; repeats at the same interval. `None`: announce once.
    #[serde(default)]
    pub renotify_minutes: Option<u64>,
}

/// A daily span of wall-clock time, `"HH:MM"`; it may cross midnight (`22:00`–`07:00`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TimeSpan {
    pub start: String,
    pub end: String,
}

impl TimeSpan {
    fn parse(v: &str) -> Option<chrono::NaiveTime> {
        chrono::NaiveTime::parse_from_str(v, "%H:%M").ok()
    }

    /// Whether `t` lies in the span (start inclusive, end exclusive).
    pub fn contains(&self, t: chrono::NaiveTime) -> bool {
        let (Some(s), Some(e)) = (Self::parse(&self.start), Self::parse(&self.end)) else { return false };
        if s <= e {
            s <= t && t < e
        } else {
            t >= s || t < e
        }
    }

    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        for (name, v) in [("start", &self.start), ("end", &self.end)] {
            if Self::parse(v).is_none() {
                return Err(invalid(format!("{key}.{name}"), format!("`{v}` is not a time of day as \"HH:MM\"")));
            }
        }
        Ok(())
    }
}

/// An alert channel beyond the desktop, `[monitor.channels.NAME]`: where it sends (Slack, e-mail, a webhook),
/// which alert kinds it announces and how, and when it keeps quiet. Each channel announces on its own: an alert
/// sent to Slack may be held for the e-mail's digest. Secrets (the Slack webhook URL, the SMTP login, the
/// webhook's URL and signing key) are named by `*_env` fields and read, like the targets' tokens, from the
/// secrets file or the environment at each send. What each kind sends: `docs/operators.md`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// `slack`, `email` or `webhook` (a string checked by `validate`, so a wrong kind names its key).
    pub kind: String,
    /// slack: the variable holding the incoming webhook's URL (the URL itself is the credential).
    pub webhook_url_env: Option<String>,
    /// webhook: the variable holding the URL alerts are POSTed to.
    pub url_env: Option<String>,
    /// webhook: the variable holding the key the body is signed with (HMAC-SHA256, `X-Leadline-Signature-256`).
    pub secret_env: Option<String>,
    /// email: the SMTP server's host name.
    pub smtp_host: Option<String>,
    /// email: default 587 with `starttls`, 465 with `tls`, 25 with `none`.
    pub smtp_port: Option<u16>,
    /// email: `starttls` (the default), `tls` (implicit TLS, "SMTPS") or `none` (a relay on this machine only).
    pub tls: Option<String>,
    /// email: variables holding the SMTP login; both or neither.
    pub username_env: Option<String>,
    pub password_env: Option<String>,
    /// email: the sender, `Leadline <alerts@example.com>` or a bare address.
    pub from: Option<String>,
    /// email: the recipients.
    #[serde(default)]
    pub to: Vec<String>,
    /// Per alert kind: `immediate`, `digest` or `none`. A kind not named here: critical alerts immediately,
    /// the others in this channel's digest.
    #[serde(default)]
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
    #[serde(default = "default_channel_timeout")]
    pub timeout_seconds: u64,
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

impl ChannelConfig {
    /// The kind, once `validate` accepted the word.
    pub fn kind(&self) -> Option<ChannelKind> {
        match self.kind.as_str() {
            "slack" => Some(ChannelKind::Slack),
            "email" => Some(ChannelKind::Email),
            "webhook" => Some(ChannelKind::Webhook),
            _ => None,
        }
    }

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
        [
            ("webhook_url_env", &self.webhook_url_env),
            ("url_env", &self.url_env),
            ("secret_env", &self.secret_env),
            ("username_env", &self.username_env),
            ("password_env", &self.password_env),
        ]
        .into_iter()
        .filter_map(|(field, var)| var.as_deref().map(|v| (field, v)))
        .collect()
    }

    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        let Some(kind) = self.kind() else {
            return Err(invalid(
                format!("{key}.kind"),
                format!("`{}` is not a channel kind; the kinds are {}", self.kind, ChannelKind::NAMES.join(", ")),
            ));
        };
        let given = [
            ("webhook_url_env", self.webhook_url_env.is_some()),
            ("url_env", self.url_env.is_some()),
            ("secret_env", self.secret_env.is_some()),
            ("smtp_host", self.smtp_host.is_some()),
            ("smtp_port", self.smtp_port.is_some()),
            ("tls", self.tls.is_some()),
            ("username_env", self.username_env.is_some()),
            ("password_env", self.password_env.is_some()),
            ("from", self.from.is_some()),
            ("to", !self.to.is_empty()),
        ];
        let (applies, required): (&[&str], &[&str]) = match kind {
            ChannelKind::Slack => (&["webhook_url_env"], &["webhook_url_env"]),
            ChannelKind::Webhook => (&["url_env", "secret_env"], &["url_env"]),
            ChannelKind::Email => (
                &["smtp_host", "smtp_port", "tls", "username_env", "password_env", "from", "to"],
                &["smtp_host", "from", "to"],
            ),
        };
        for (field, set) in given {
            if set && !applies.contains(&field) {
                return Err(invalid(
                    format!("{key}.{field}"),
                    format!("does not apply to kind = \"{}\"", kind.as_str()),
                ));
            }
            if !set && required.contains(&field) {
                return Err(invalid(format!("{key}.{field}"), format!("is required for kind = \"{}\"", kind.as_str())));
            }
        }
        for (field, var) in self.secret_vars() {
            if var.is_empty() || var.contains(['=', ' ']) {
                return Err(invalid(format!("{key}.{field}"), "must name an environment variable"));
            }
        }
        if kind == ChannelKind::Email {
            if self.smtp_tls().is_none() {
                return Err(invalid(
                    format!("{key}.tls"),
                    format!("`{}` is not one of starttls, tls, none", self.tls.as_deref().unwrap_or_default()),
                ));
            }
            let host = self.smtp_host.as_deref().unwrap_or_default();
            if host.is_empty() || host.contains(['/', ':', ' ']) {
                return Err(invalid(
                    format!("{key}.smtp_host"),
                    format!("`{host}` is not a host name (no scheme, port or path: `smtp.example.com`)"),
                ));
            }
            if self.smtp_port == Some(0) {
                return Err(invalid(format!("{key}.smtp_port"), "must be greater than 0"));
            }
            if self.username_env.is_some() != self.password_env.is_some() {
                let missing = if self.username_env.is_none() { "username_env" } else { "password_env" };
                return Err(invalid(format!("{key}.{missing}"), "is required with the other half of the SMTP login"));
            }
            let from = self.from.as_deref().unwrap_or_default();
            if from.parse::<lettre::message::Mailbox>().is_err() {
                return Err(invalid(format!("{key}.from"), format!("`{from}` is not an e-mail address")));
            }
            for (i, to) in self.to.iter().enumerate() {
                if to.parse::<lettre::message::Mailbox>().is_err() {
                    return Err(invalid(format!("{key}.to[{i}]"), format!("`{to}` is not an e-mail address")));
                }
            }
        }
        for kind in self.alerts.keys() {
            if kind.parse::<AlertKind>().is_err() {
                return Err(invalid(
                    format!("{key}.alerts.{kind}"),
                    format!(
                        "is not an alert kind; the kinds are {}",
                        AlertKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        match &self.quiet_hours {
            Some(ChannelQuietHours::Span(span)) => span.validate(&format!("{key}.quiet_hours"))?,
            Some(ChannelQuietHours::Off(true)) => {
                return Err(invalid(
                    format!("{key}.quiet_hours"),
                    "is { start = \"HH:MM\", end = \"HH:MM\" }, or false for none (leave it out for the monitor's)",
                ))
            }
            _ => {}
        }
        for (field, value) in
            [("digest_interval_minutes", self.digest_interval_minutes), ("renotify_minutes", self.renotify_minutes)]
        {
            if value == Some(0) {
                return Err(invalid(format!("{key}.{field}"), "must be greater than 0"));
            }
        }
        if !(1..=300).contains(&self.timeout_seconds) {
            return Err(invalid(format!("{key}.timeout_seconds"), "must be between 1 and 300"));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BusinessHours {
    /// Days with business hours: `mon` … `sun`.
    pub days: Vec<String>,
    pub start: String,
    pub end: String,
}

impl Default for BusinessHours {
    fn default() -> Self {
        Self {
            days: ["mon", "tue", "wed", "thu", "fri"].map(String::from).to_vec(),
            start: "08:00".into(),
            end: "18:00".into(),
        }
    }
}

impl BusinessHours {
    /// Whether the local wall-clock time `t` is within business hours.
    pub fn contains(&self, t: chrono::NaiveDateTime) -> bool {
        use chrono::Datelike;
        let day = match t.weekday() {
            chrono::Weekday::Mon => "mon",
            chrono::Weekday::Tue => "tue",
            chrono::Weekday::Wed => "wed",
            chrono::Weekday::Thu => "thu",
            chrono::Weekday::Fri => "fri",
            chrono::Weekday::Sat => "sat",
            chrono::Weekday::Sun => "sun",
        };
        self.days.iter().any(|d| d == day)
            && TimeSpan { start: self.start.clone(), end: self.end.clone() }.contains(t.time())
    }
}

/// Volume-drop and silence detection (see `monitor::volume`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct VolumeConfig {
    /// Rolling window the observed count is taken over.
    pub window_minutes: u64,
    /// Alert when P(count this low | baseline) is below this.
    pub p_value: f64,
    /// Ordinary swings tolerated before the test: the baseline is lowered by this share first (0.3 = a day 30 %
    /// quieter than usual is not a drop). Real traffic is noisier than a Poisson process.
    pub tolerance: f64,
    /// No volume-drop alert when fewer events than this are expected in the window (nights, weekends).
    pub min_expected: f64,
    /// A silence alert needs at least this long without any event…
    pub silence_minutes: u64,
    /// …during which the baseline expected at least this many events.
    pub silence_min_expected: f64,
    /// Weeks of the source's own history the hour-of-week baseline is averaged over.
    pub baseline_weeks: u32,
    /// A volume-drop alert resolves when the window's count is no longer improbable at this level.
    pub resolve_p_value: f64,
}

impl Default for VolumeConfig {
    fn default() -> Self {
        Self {
            window_minutes: 60,
            p_value: 0.001,
            tolerance: 0.3,
            min_expected: 8.0,
            silence_minutes: 30,
            silence_min_expected: 12.0,
            baseline_weeks: 4,
            resolve_p_value: 0.05,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Per-minute samples are kept this long (the 1 h and 24 h charts read them).
    pub minute_retention_hours: u64,
    /// Hourly roll-ups are kept this long (the 7 d chart and the volume baselines read them).
    pub hourly_retention_days: u64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { minute_retention_hours: 48, hourly_retention_days: 90 }
    }
}

/// How long leads' personal data is kept (see `privacy`; it leaves the store masked unless revealed).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PrivacyConfig {
    /// Payloads of leads delivered everywhere are purged this many days after their last delivery: the lead's
    /// data, response excerpts and the CRM's answer (but its ids) go; the rows, statistics, attempts and the
    /// CRM link stay. 0: never.
    pub delivered_payload_retention_days: u64,
}

impl Default for PrivacyConfig {
    fn default() -> Self {
        Self { delivered_payload_retention_days: 30 }
    }
}

/// Replays of dead letters (see `replay`) and the retention of resolved ones.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ReplayConfig {
    /// Leads sent first; the rest follow only when all of them were delivered. 0: no canary.
    pub canary_size: u32,
    /// Leads sent back per second after the canary (per replay).
    pub rate_per_second: f64,
    /// Payloads of dead letters resolved by hand (discarded, fixed in the CRM) are purged after this many days;
    /// their statistics stay. 0: never.
    pub resolved_payload_retention_days: u64,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        Self { canary_size: 10, rate_per_second: 20.0, resolved_payload_retention_days: 30 }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Any JSON body; the event id is read from `id_field`.
    #[default]
    Generic,
    /// Meta Lead Ads webhooks (`leadgen` changes, `X-Hub-Signature-256`).
    Meta,
    /// Google Ads lead form webhooks (Google's `WebhookLead` JSON; the `google_key` in the body is the proof).
    GoogleAds,
    /// A CRM's stage-change webhook (a HubSpot workflow's "Send a webhook"): each stage of a lead Leadline
    /// delivered goes to the route's conversion steps (`stage_webhook` says where the lead and stage are).
    CrmStage,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    #[serde(default)]
    pub kind: SourceKind,
    /// Generic sources: the field holding the event id; a top-level name (`id`) or a JSON pointer (`/lead/id`).
    #[serde(default = "default_id_field")]
    pub id_field: String,
    /// Target names, in order: each step runs only after the previous one was delivered.
    pub route: Vec<String>,
    /// Generic sources: optional HMAC-SHA256 signature over the raw body.
    pub signature: Option<SignatureConfig>,
    /// Meta sources: environment variable holding the app secret that signs `X-Hub-Signature-256`.
    pub app_secret_env: Option<String>,
    /// Meta sources: environment variable holding the verify token of the subscription handshake.
    pub verify_token_env: Option<String>,
    /// Periodic comparison with the source's own list of leads; missing ones are ingested.
    pub reconcile: Option<ReconcileConfig>,
    /// Poll mode: Leadline asks the source for its new leads at an interval instead of waiting for webhooks (a
    /// laptop has no public address Meta could send a webhook to). Excludes `reconcile`: polling is the listing.
    pub poll: Option<PollConfig>,
    /// Meta sources: the Facebook page the lead forms belong to. Graph's lead object does not name its page, so
    /// leads found by reconciliation take it from here (webhook leads carry it themselves).
    pub page_id: Option<String>,
    /// A failing reconciliation (source unreachable, throttled) raises a `source_failing` alert once it has
    /// failed for this long; a refused token raises a `credentials` alert at once.
    #[serde(default = "default_source_failing_minutes")]
    pub failing_alert_minutes: u64,
    /// Largest accepted body for this source (default `server.max_body_bytes`, which it may not exceed).
    pub max_body_bytes: Option<usize>,
    /// Refuse to start when this source has no signature check (a generic source without `signature`).
    #[serde(default)]
    pub require_signature: bool,
    /// `google_ads` sources: environment variable (or keyring entry) holding the key entered beside the webhook
    /// URL in Google Ads; Google sends it back in every lead's `google_key`.
    pub key_env: Option<String>,
    /// `google_ads` sources: deliver the leads Google marks `is_test` (the form editor's "send test data") along
    /// the route like any other. By default they are stored and shown as test leads and reach no target.
    #[serde(default)]
    pub deliver_test_leads: bool,
    /// `crm_stage` sources: where the lead and its new stage are in the CRM's webhook body.
    pub stage_webhook: Option<StageWebhookConfig>,
    /// The time zone of this source's leads (an IANA name, `Europe/Madrid`): first-contact steps keep their
    /// quiet hours in it. Without it, the zone comes from the step's `first_contact.time_zone`, else from the
    /// phone number's country code.
    pub time_zone: Option<String>,
}

/// Where a CRM's stage-change webhook holds what Leadline needs (JSON pointers). The defaults read a HubSpot
/// contact workflow's "Send a webhook" body (`{"vid": 123, "properties": {"lifecyclestage": {"value": …},
/// "leadline_id": {"value": "google:GL-1"}}}`), with the contact's `leadline_id` property holding the lead's
/// external id (the HubSpot target's `id_property`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StageWebhookConfig {
    /// Leadline's external id of the lead (`{source}:{source_ref}`).
    pub lead_pointer: String,
    /// The CRM's record id, used when the body has no external id (the record a delivered step created).
    pub crm_id_pointer: String,
    /// The new stage.
    pub stage_pointer: String,
    /// When the stage was reached (RFC 3339 text or Unix milliseconds); absent: when the webhook arrived.
    pub changed_at_pointer: String,
    /// The conversion's value (a number or numeric text), if the CRM sends one.
    pub value_pointer: String,
    /// The CRM's name (Meta's `lead_event_source`).
    pub crm_name: String,
}

impl Default for StageWebhookConfig {
    fn default() -> Self {
        StageWebhookConfig {
            lead_pointer: "/properties/leadline_id/value".into(),
            crm_id_pointer: "/vid".into(),
            stage_pointer: "/properties/lifecyclestage/value".into(),
            changed_at_pointer: "/properties/lifecyclestage/timestamp".into(),
            value_pointer: "/properties/amount/value".into(),
            crm_name: "HubSpot".into(),
        }
    }
}

impl SourceKind {
    /// The kind as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Generic => "generic",
            SourceKind::Meta => "meta",
            SourceKind::GoogleAds => "google_ads",
            SourceKind::CrmStage => "crm_stage",
        }
    }
}

impl SourceConfig {
    /// Whether requests to this source must carry a valid HMAC signature (Meta sources always do).
    pub fn is_signed(&self) -> bool {
        match self.kind {
            SourceKind::Generic => self.signature.is_some(),
            SourceKind::Meta | SourceKind::GoogleAds => true,
            SourceKind::CrmStage => self.signature.is_some(),
        }
    }
}

fn default_source_failing_minutes() -> u64 {
    15
}

/// Reconciliation with a source that can list its leads (see `reconcile`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ReconcileConfig {
    /// How often to compare.
    #[serde(default = "default_reconcile_interval")]
    pub interval_seconds: u64,
    /// The first comparison looks this far back; later ones start at the previous run (minus `overlap_minutes`).
    #[serde(default = "default_lookback")]
    pub lookback_minutes: u64,
    /// Leads can appear in a source's list a little after their creation time: each run re-reads this much of
    /// the previous one.
    #[serde(default = "default_overlap")]
    pub overlap_minutes: u64,
    /// Generic sources: GET URL listing leads; `{since}` is replaced by the watermark (Unix seconds).
    pub list_url: Option<String>,
    /// Generic sources: JSON pointer to the array of leads in the answer (default: the answer itself, or its
    /// `data` or `items` field).
    pub items_pointer: Option<String>,
    /// Generic sources: JSON pointer to the next page's URL (absent or null on the last page).
    pub next_pointer: Option<String>,
    /// Generic sources: authentication for the list endpoint.
    pub auth: Option<AuthConfig>,
    /// Meta sources: the lead forms to list. The Graph API address, version and page access token are the
    /// source's `meta_lead` step's (the first target of its route), so listing and fetching share them.
    #[serde(default)]
    pub form_ids: Vec<String>,
}

fn default_reconcile_interval() -> u64 {
    300
}

/// Poll mode (see `poll`): the source's list of leads is read every `interval_seconds` from where the last read
/// stopped (a cursor kept in the database), and every lead not yet stored is ingested like a webhook's.
///
/// The listing settings are reconciliation's (the same endpoints are read the same way): `form_ids` for a Meta
/// source, `list_url`, `items_pointer`, `next_pointer` and `auth` for a generic one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PollConfig {
    /// How often to ask (per source; every form of a Meta source is read in each poll).
    #[serde(default = "default_poll_interval")]
    pub interval_seconds: u64,
    /// The first poll (no cursor stored yet) lists leads created this far back.
    #[serde(default = "default_lookback")]
    pub lookback_minutes: u64,
    /// Each pass re-reads this much before the stored watermark, for a lead that shows up in the list a little
    /// after its creation time (a lead already stored is a duplicate and costs nothing downstream).
    #[serde(default = "default_poll_overlap")]
    pub overlap_seconds: u64,
    /// Generic sources: GET URL listing leads; `{since}` is replaced by the watermark (Unix seconds).
    pub list_url: Option<String>,
    /// Generic sources: JSON pointer to the array of leads in the answer (default: the answer itself, or its
    /// `data` or `items` field).
    pub items_pointer: Option<String>,
    /// Generic sources: JSON pointer to the next page's URL (absent or null on the last page).
    pub next_pointer: Option<String>,
    /// Generic sources: authentication for the list endpoint.
    pub auth: Option<AuthConfig>,
    /// Meta sources: the lead forms to poll. The Graph API address, version and page access token are the
    /// source's `meta_lead` step's (the first target of its route).
    #[serde(default)]
    pub form_ids: Vec<String>,
}

impl PollConfig {
    /// The listing part, in reconciliation's terms: polling and reconciliation read a list the same way.
    pub fn listing(&self) -> ReconcileConfig {
        ReconcileConfig {
            interval_seconds: self.interval_seconds,
            lookback_minutes: self.lookback_minutes,
            overlap_minutes: 0,
            list_url: self.list_url.clone(),
            items_pointer: self.items_pointer.clone(),
            next_pointer: self.next_pointer.clone(),
            auth: self.auth.clone(),
            form_ids: self.form_ids.clone(),
        }
    }
}

fn default_poll_interval() -> u64 {
    60
}
fn default_poll_overlap() -> u64 {
    60
}
fn default_lookback() -> u64 {
    24 * 60
}
fn default_overlap() -> u64 {
    10
}
/// The Salesforce REST API version used when a `salesforce` target does not set `api_version`.
pub const SALESFORCE_API_VERSION: &str = "v60.0";

fn default_graph_version() -> String {
    "v21.0".into()
}

fn default_id_field() -> String {
    "id".to_string()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureConfig {
    /// Header carrying the hex HMAC-SHA256 of the raw body (an optional `sha256=` prefix is accepted).
    #[serde(default = "default_signature_header")]
    pub header: String,
    /// Environment variable holding the shared secret.
    pub secret_env: String,
}

fn default_signature_header() -> String {
    "X-Signature-256".to_string()
}

#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// POST with an `Idempotency-Key` header derived from the job; the CRM replays its stored answer.
    IdempotencyKey,
    /// PUT/PATCH to a URL containing the external id: writing twice is harmless.
    Upsert,
    /// GET `search_url` for the external id; create only when nothing is found; remember the link locally.
    SearchThenCreate,
    /// Plain POST with no protection: an ambiguous outcome is parked in the DLQ, never retried blindly.
    None,
}

/// What a target speaks.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// Any JSON endpoint; it receives Leadline's envelope (docs/configuration.md, "What a target receives").
    #[default]
    Http,
    /// Not a CRM: the first step of a Meta source's route, which fetches the lead's answers from the Graph API
    /// (`GET /{leadgen_id}`) and stores them with the lead before any CRM sees it.
    MetaLead,
    /// Pipedrive: find or create the person (exact match on `person_field_key`), then create the lead
    /// (`targets::pipedrive`); always search-then-create with the local link table.
    Pipedrive,
    /// Salesforce REST API: upsert by an external id field, OAuth 2.0 refresh-token flow
    /// (`targets::salesforce`).
    Salesforce,
    /// HubSpot CRM v3: records upserted in batches by a unique property (`POST /crm/v3/objects/{object}/batch/upsert`).
    Hubspot,
    /// A first contact by WhatsApp: an approved template sent through the WhatsApp Business Cloud API
    /// (`POST /{version}/{phone-number-id}/messages`, `targets::whatsapp`); settings under `whatsapp`.
    Whatsapp,
    /// A first contact by SMS through Twilio's Messages API (`targets::sms`); settings under `sms`.
    Sms,
    /// Meta's Conversions API for CRM leads: a lead's stages go back to Meta as events
    /// (`POST /{api_version}/{dataset_id}/events`, `targets::meta_conversions`).
    MetaConversions,
    /// Google Ads click conversions: a lead's stages go back to Google as conversions of its click
    /// (`POST /{api_version}/customers/{customer_id}:uploadClickConversions`, `targets::google_ads_conversions`).
    GoogleAdsConversions,
}

impl TargetKind {
    /// A first-contact step: a message to the lead, which no provider de-duplicates, so Leadline never sends it
    /// twice (`targets::contact`).
    pub fn is_first_contact(self) -> bool {
        matches!(self, TargetKind::Whatsapp | TargetKind::Sms)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    #[serde(default)]
    pub kind: TargetKind,
    /// Request URL; `{external_id}` is replaced by the job's external id (required for `upsert`).
    /// `meta_lead`: the Graph API address (`https://graph.facebook.com`).
    pub url: String,
    /// HTTP method; default POST (PUT for `upsert`).
    pub method: Option<String>,
    /// Required for `http`; a `meta_lead` step only reads, which is always safe to repeat.
    pub strategy: Option<Strategy>,
    /// `meta_lead`: the Graph API version, the first path segment of every request. `salesforce`: the REST API
    /// version (`v60.0`); left out, it is [`SALESFORCE_API_VERSION`] (see [`TargetConfig::salesforce_api_version`]).
    #[serde(default = "default_graph_version")]
    pub api_version: String,
    /// `meta_lead`: environment variable holding a page access token with the `leads_retrieval` permission.
    pub access_token_env: Option<String>,
    /// `pipedrive`: environment variable holding the API token (sent in the `x-api-token` header).
    pub api_token_env: Option<String>,
    /// `pipedrive`: key of the custom person field holding Leadline's external id (the exact-match search).
    pub person_field_key: Option<String>,
    /// `salesforce`: the sObject leads are upserted into (default `Lead`); `hubspot`: the CRM object type
    /// written (default `contacts`).
    pub object: Option<String>,
    /// `salesforce`: the external id field the lead's external id is written to and matched by (required).
    pub external_id_field: Option<String>,
    /// `salesforce`: environment variables holding the connected app's consumer key and secret and the
    /// refresh token of the user Leadline connects as (all required).
    pub client_id_env: Option<String>,
    pub client_secret_env: Option<String>,
    pub refresh_token_env: Option<String>,
    /// `hubspot`: the unique property records are upserted by (`email`, or a custom unique property such as
    /// `leadline_id`). Its value is the mapped record's value for it, else the lead's external id.
    pub id_property: Option<String>,
    /// How a lead becomes the CRM's record (docs/configuration.md, "Field mapping"). An `http` target with a
    /// mapping receives the mapped record as its body instead of the envelope.
    #[serde(default)]
    pub mapping: Vec<crate::model::mapping::FieldRule>,
    /// `search_then_create` (required) and ambiguous look-ups (optional for other strategies):
    /// a GET URL with `{external_id}`; 200 with a record means found, 404 or an empty list means not found.
    pub search_url: Option<String>,
    /// The web address of a record in the CRM's own screens, with `{crm_id}` (e.g.
    /// `https://example.pipedrive.com/person/{crm_id}`): the lead lookup links each delivered lead to it.
    pub record_url: Option<String>,
    /// JSON pointer to the CRM's record id in a create/upsert/search answer.
    #[serde(default = "default_id_pointer")]
    pub id_pointer: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub auth: Option<AuthConfig>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Jobs delivered to this target at the same time (per worker process). Lowered by itself while the target
    /// answers 429, and raised back slowly.
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    /// The target's declared request budget (`"190/10s"`, `"100/s"`, `"250000/1d"`): no window of that length
    /// ever carries more requests. Leadline also learns the real limit from the target's rate-limit headers.
    pub rate: Option<crate::model::Rate>,
    #[serde(default)]
    pub backoff: BackoffConfig,
    #[serde(default)]
    pub breaker: BreakerConfig,
    #[serde(default)]
    pub classify: ClassifyConfig,
    /// Time-sensitive steps: a replayed lead older than this runs `fallback` instead (a welcome SMS an hour
    /// late is worse than none; a call task is not).
    pub max_lead_age_minutes: Option<u64>,
    /// The target run instead of this one for leads older than `max_lead_age_minutes` on replay.
    pub fallback: Option<String>,
    /// Replay this target's dead letters by itself once it is healthy again: those that died of a setup problem
    /// (`permanent_config`) or while it was down or limiting (`transient`, `rate_limited`), each at most once,
    /// staged and paced like a manual replay.
    #[serde(default)]
    pub auto_replay: bool,
    /// The target a lead's step goes to when this one fails for the lead's data or its number (`whatsapp` →
    /// `sms` when the number is not on WhatsApp): tried at once, with fresh attempts.
    #[serde(default)]
    pub on_failure: Option<String>,
    /// `kind = "whatsapp"`: the sender's phone number id, the template and its parameters.
    #[serde(default)]
    pub whatsapp: Option<WhatsappConfig>,
    /// `kind = "sms"`: the Twilio account, sender and message body.
    #[serde(default)]
    pub sms: Option<SmsConfig>,
    /// First-contact steps (`whatsapp`, `sms`): the wait for an unconfirmed send, quiet hours, the default
    /// country of national numbers.
    #[serde(default)]
    pub first_contact: FirstContactConfig,
    /// Opt-in data fallback (docs/configuration.md, "Missing data"): a lead whose only refused fields are on
    /// `drop` goes again at once without them, tagged, instead of becoming a dead letter.
    #[serde(default)]
    pub missing_data: Option<MissingDataConfig>,
    /// Conversion steps (`meta_conversions`, `google_ads_conversions`): the CRM's stage names and what each
    /// platform gets for them — Meta's `event_name`, Google's conversion action (`customers/1/conversionActions/2`).
    /// A stage not listed is not sent to this target. `lead` is the stage of a lead reaching this step along its
    /// own source's route (right after the CRM step).
    #[serde(default)]
    pub stages: BTreeMap<String, String>,
    /// Conversion steps: the platform's window in days (Meta: 7 from the event; Google: 90 from the click, or the
    /// conversion action's own, shorter window). An older event is not sent: the step ends as reported.
    pub window_days: Option<u32>,
    /// `meta_conversions`: the dataset (pixel) id the events go to.
    pub dataset_id: Option<String>,
    /// `meta_conversions`: the CRM's name, sent as `custom_data.lead_event_source` (default: the name a stage
    /// webhook's source gives, else "Leadline").
    pub lead_event_source: Option<String>,
    /// `google_ads_conversions`: the Google Ads account (customer id, digits only) the conversions belong to.
    pub customer_id: Option<String>,
    /// `google_ads_conversions`: the manager account reached through (`login-customer-id` header), if any.
    pub login_customer_id: Option<String>,
    /// `google_ads_conversions`: variable holding a developer token, sent only when set (Google retired them on
    /// 2026-09-09; the header is ignored, and a later API version refuses it).
    pub developer_token_env: Option<String>,
    /// `google_ads_conversions`: the OAuth 2.0 token endpoint (default `https://oauth2.googleapis.com/token`).
    pub token_url: Option<String>,
    /// `google_ads_conversions`: ISO 4217 currency of conversion values (default `EUR`).
    pub currency: Option<String>,
}

/// The age limit of a first-contact step that sets none: an automatic "we will call you now" to a lead older
/// than an hour sets a false expectation.
pub const FIRST_CONTACT_MAX_AGE_MINUTES: u64 = 60;

/// `kind = "whatsapp"` (docs/configuration.md, "First contact").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WhatsappConfig {
    /// The WhatsApp Business phone number id messages are sent from (the path segment of `/{id}/messages`).
    pub phone_number_id: String,
    /// The approved template's name.
    pub template: String,
    /// The template's language code (`de`, `en_US`).
    pub language: String,
    /// The template body's parameters in order: names of fields of the mapped record (`first_name`).
    #[serde(default)]
    pub parameters: Vec<String>,
    /// Environment variable holding the app secret that signs status webhooks (`X-Hub-Signature-256`).
    pub app_secret_env: Option<String>,
    /// Environment variable holding the token Meta's webhook verification request must echo.
    pub verify_token_env: Option<String>,
}

/// `kind = "sms"` (docs/configuration.md, "First contact").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SmsConfig {
    /// The Twilio Account SID (`AC…`): the path of the Messages resource and the Basic auth user.
    pub account_sid: String,
    /// Environment variable holding the account's auth token (Basic auth password, and the key of
    /// `X-Twilio-Signature`).
    pub auth_token_env: String,
    /// The sender number (E.164), or leave it out and name a Messaging Service.
    pub from: Option<String>,
    pub messaging_service_sid: Option<String>,
    /// The message, with `{field}` replaced by the mapped record's fields (`Hi {first_name}, …`).
    pub body: String,
    /// The address Twilio posts status callbacks to: Leadline's `/receipts/sms/{target}` as Twilio reaches it.
    /// The signature is checked over this exact URL.
    pub status_callback: Option<String>,
}

/// What first-contact steps share.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FirstContactConfig {
    /// How long a send whose answer was lost waits for its receipt (or, for SMS, to show in the provider's list)
    /// before a person is asked whether the lead got it.
    pub in_doubt_minutes: u64,
    /// No message in these hours of the lead's local time (`{ from = "21:00", until = "08:00" }`): held until the
    /// morning, shown as scheduled.
    pub quiet_hours: Option<QuietHours>,
    /// The lead's time zone when its number's country does not tell (an IANA name, `Europe/Berlin`).
    pub time_zone: Option<String>,
}

impl Default for FirstContactConfig {
    fn default() -> Self {
        FirstContactConfig { in_doubt_minutes: 30, quiet_hours: None, time_zone: None }
    }
}

/// Quiet hours, local time of the lead: from `from` until `until` (over midnight when `until` is earlier).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuietHours {
    pub from: String,
    pub until: String,
}

impl QuietHours {
    /// The two ends as times of day, or what is wrong with them.
    pub fn times(&self) -> Result<(chrono::NaiveTime, chrono::NaiveTime), String> {
        let parse = |v: &str| {
            chrono::NaiveTime::parse_from_str(v, "%H:%M").map_err(|_| format!("`{v}` is not a time like \"21:00\""))
        };
        Ok((parse(&self.from)?, parse(&self.until)?))
    }
}

/// `missing_data = { drop = ["phone"], tag = { property = "lead_status_note", value = "missing data: {fields}" },
/// task = "call_task" }`: which CRM fields a lead may go without, how the record says so, and who checks it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MissingDataConfig {
    /// The CRM fields (as the mapping's `to` names them) a lead may be written without when the CRM, or the
    /// mapping, refuses them. Never the field the target upserts by.
    pub drop: Vec<String>,
    /// Written into the record sent without them, so the CRM's users see what is missing.
    pub tag: Option<MissingDataTag>,
    /// A target run as a follow-up step for each lead written without a field (a call task in the CRM); without
    /// one, Leadline lists the lead as "Needs a person".
    pub task: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MissingDataTag {
    /// The CRM field the tag is written to (a name, or a JSON pointer like the mapping's `to`).
    pub property: String,
    /// The text written; `{fields}` becomes the fields left out (`phone, website`).
    #[serde(default = "default_missing_data_tag")]
    pub value: String,
}

fn default_missing_data_tag() -> String {
    "missing data: {fields}".to_string()
}

fn default_id_pointer() -> String {
    "/id".to_string()
}
fn default_timeout_ms() -> u64 {
    10_000
}
fn default_concurrency() -> u32 {
    8
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum AuthConfig {
    /// `Authorization: Bearer <value of the env variable>`.
    BearerEnv(String),
    /// A custom header whose value comes from an env variable.
    Header { name: String, value_env: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackoffConfig {
    pub base_ms: u64,
    pub cap_ms: u64,
    /// Counted attempts (rate-limited answers do not count) before a job is dead-lettered.
    pub max_attempts: u32,
    /// Longest time from a step becoming due to its delivery; past it the job is dead-lettered.
    pub budget_seconds: u64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self { base_ms: 1_000, cap_ms: 5 * 60_000, max_attempts: 12, budget_seconds: 6 * 3600 }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Consecutive failures (transient or ambiguous) that open the breaker.
    pub consecutive_failures: u32,
    /// Failure ratio over the last `window` results that also opens it (0 disables).
    pub failure_ratio: f64,
    pub window: u32,
    /// Time the breaker stays open before one probe is let through.
    pub cooldown_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self { consecutive_failures: 5, failure_ratio: 0.5, window: 20, cooldown_ms: 30_000 }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// Status code → class, overriding the default mapping (`"403" = "rate_limited"`).
    pub status: BTreeMap<String, ErrorClass>,
    /// JSON pointer to a field of the error body holding the CRM's error code (`/0/errorCode`).
    pub body_field: Option<String>,
    /// Value of `body_field` → class; takes precedence over the status mapping.
    pub body_values: BTreeMap<String, ErrorClass>,
    /// JSON pointer to the CRM's human message; tried before the built-in guesses.
    pub message_pointer: Option<String>,
    /// JSON pointer to the offending field name; tried before the built-in guesses.
    pub field_pointer: Option<String>,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        let mut config = Self::parse(&text, path)?;
        config.file = Some(path.to_owned());
        Ok(config)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
        if let (Some(file), Some(dir)) = (&config.secrets_file, path.parent()) {
            config.secrets_file = Some(dir.join(file));
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks everything serde cannot: references between sections, ranges, required combinations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(url) = self.database.url.as_deref() {
            if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                match url::Url::parse(url) {
                    Err(e) => return Err(invalid("database.url", format!("is not a valid PostgreSQL URL: {e}"))),
                    Ok(u) if u.path().trim_start_matches('/').is_empty() => {
                        return Err(invalid("database.url", "names no database: postgres://user@host:port/database"))
                    }
                    Ok(_) => {}
                }
            } else if url.trim().is_empty() {
                return Err(invalid("database.url", "is empty"));
            }
        }
        if self.server.max_body_bytes == 0 {
            return Err(invalid("server.max_body_bytes", "must be greater than 0"));
        }
        for (key, value) in [
            ("server.max_connections", self.server.max_connections as u64),
            ("server.header_timeout_seconds", self.server.header_timeout_seconds),
            ("server.body_timeout_seconds", self.server.body_timeout_seconds),
            ("server.max_ingest_in_flight", self.server.max_ingest_in_flight as u64),
            ("server.min_body_bytes_per_second", self.server.min_body_bytes_per_second),
            ("server.body_stall_seconds", self.server.body_stall_seconds),
            ("server.max_bodies_per_peer", self.server.max_bodies_per_peer as u64),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be greater than 0"));
            }
        }
        self.server.trusted_proxy_networks()?;
        for (i, host) in self.server.allowed_hosts.iter().enumerate() {
            if host.is_empty() || host.contains(['/', ':', ' ']) {
                return Err(invalid(
                    format!("server.allowed_hosts[{i}]"),
                    format!("`{host}` is not a host name (no scheme, port or path: `leads.example.com`)"),
                ));
            }
        }
        let w = &self.worker;
        if w.batch_size == 0 {
            return Err(invalid("worker.batch_size", "must be greater than 0"));
        }
        if w.lease_seconds == 0 {
            return Err(invalid("worker.lease_seconds", "must be greater than 0"));
        }
        self.monitor.validate()?;
        for (name, source) in &self.sources {
            let key = format!("sources.{name}");
            check_name(&key, name)?;
            if source.require_signature && !source.is_signed() {
                return Err(invalid(
                    format!("{key}.require_signature"),
                    "is true but the source has no `signature` = { header, secret_env }: anyone who can reach the \
                     server could post leads to it",
                ));
            }
            if let Some(max) = source.max_body_bytes {
                if max == 0 || max > self.server.max_body_bytes {
                    return Err(invalid(
                        format!("{key}.max_body_bytes"),
                        format!("must be between 1 and server.max_body_bytes ({})", self.server.max_body_bytes),
                    ));
                }
            }
            if source.route.is_empty() {
                return Err(invalid(format!("{key}.route"), "must name at least one target"));
            }
            if let Some(tz) = source.time_zone.as_deref().filter(|tz| tz.parse::<chrono_tz::Tz>().is_err()) {
                return Err(invalid(format!("{key}.time_zone"), format!("`{tz}` is not a time zone")));
            }
            for (i, target) in source.route.iter().enumerate() {
                let Some(tc) = self.targets.get(target) else {
                    return Err(invalid(
                        format!("{key}.route"),
                        format!("names target `{target}`, which is not defined under [targets]"),
                    ));
                };
                let fetch_first = i == 0 && source.kind == SourceKind::Meta;
                match (tc.kind, fetch_first) {
                    (TargetKind::MetaLead, false) => {
                        return Err(invalid(
                            format!("{key}.route"),
                            format!("`{target}` (kind = \"meta_lead\") can only be the first step of a Meta source"),
                        ))
                    }
                    (kind, true) if kind != TargetKind::MetaLead => {
                        return Err(invalid(
                            format!("{key}.route"),
                            format!(
                                "must start with a kind = \"meta_lead\" target, not `{target}`: a Meta webhook carries only \
                                 ids, and the lead's answers must be fetched from the Graph API before a CRM sees it"
                            ),
                        ))
                    }
                    _ => {}
                }
            }
            if source.id_field.is_empty() {
                return Err(invalid(format!("{key}.id_field"), "must not be empty"));
            }
            if let Some(r) = &source.reconcile {
                r.validate(&format!("{key}.reconcile"), source.kind)?;
            }
            if let Some(p) = &source.poll {
                p.listing().validate(&format!("{key}.poll"), source.kind)?;
                if source.reconcile.is_some() {
                    return Err(invalid(
                        format!("{key}.reconcile"),
                        "does not go with [poll]: a polled source's list is already read at every poll",
                    ));
                }
            }
            match source.kind {
                // A polled Meta source needs no webhook secrets; without them it takes no webhooks.
                SourceKind::Meta if source.poll.is_some() => {
                    if source.signature.is_some() {
                        return Err(invalid(
                            format!("{key}.signature"),
                            "does not apply to kind = \"meta\"; use app_secret_env",
                        ));
                    }
                    if source.app_secret_env.is_some() != source.verify_token_env.is_some() {
                        return Err(invalid(
                            format!("{key}.app_secret_env"),
                            "and verify_token_env go together: both to take webhooks as well, neither to only poll",
                        ));
                    }
                }
                SourceKind::Meta => {
                    if source.app_secret_env.is_none() {
                        return Err(invalid(
                            format!("{key}.app_secret_env"),
                            "is required for kind = \"meta\" (Meta signs every webhook)",
                        ));
                    }
                    if source.verify_token_env.is_none() {
                        return Err(invalid(
                            format!("{key}.verify_token_env"),
                            "is required for kind = \"meta\" (subscription handshake)",
                        ));
                    }
                    if source.signature.is_some() {
                        return Err(invalid(
                            format!("{key}.signature"),
                            "does not apply to kind = \"meta\"; use app_secret_env",
                        ));
                    }
                }
                SourceKind::Generic => {
                    if let Some(sig) = &source.signature {
                        if sig.header.is_empty() {
                            return Err(invalid(format!("{key}.signature.header"), "must not be empty"));
                        }
                    }
                }
                SourceKind::CrmStage => {
                    if source.reconcile.is_some() || source.poll.is_some() {
                        return Err(invalid(
                            format!("{key}.reconcile"),
                            "does not apply to kind = \"crm_stage\" (stage changes come by webhook)",
                        ));
                    }
                    if source.signature.as_ref().is_some_and(|s| s.header.is_empty()) {
                        return Err(invalid(format!("{key}.signature.header"), "must not be empty"));
                    }
                }
                SourceKind::GoogleAds => {
                    if source.key_env.is_none() {
                        return Err(invalid(
                            format!("{key}.key_env"),
                            "is required for kind = \"google_ads\" (the key Google sends back in every lead)",
                        ));
                    }
                    for (set, name) in [
                        (source.signature.is_some(), "signature"),
                        (source.app_secret_env.is_some(), "app_secret_env"),
                        (source.verify_token_env.is_some(), "verify_token_env"),
                        (source.reconcile.is_some(), "reconcile"),
                        (source.poll.is_some(), "poll"),
                    ] {
                        if set {
                            return Err(invalid(
                                format!("{key}.{name}"),
                                "does not apply to kind = \"google_ads\" (Google's lead form webhook carries its key \
                                 in the body, and Google offers no list of leads to compare with)",
                            ));
                        }
                    }
                }
            }
            if source.kind == SourceKind::CrmStage {
                for t in &source.route {
                    let kind = self.targets.get(t).map(|t| t.kind);
                    if !matches!(kind, Some(TargetKind::MetaConversions | TargetKind::GoogleAdsConversions)) {
                        return Err(invalid(
                            format!("{key}.route"),
                            format!("`{t}` is not a conversion step: a crm_stage source routes only to kind = \"meta_conversions\" or \"google_ads_conversions\""),
                        ));
                    }
                }
            } else if source.stage_webhook.is_some() {
                return Err(invalid(format!("{key}.stage_webhook"), "applies only to kind = \"crm_stage\""));
            }
            if source.kind != SourceKind::GoogleAds && (source.key_env.is_some() || source.deliver_test_leads) {
                return Err(invalid(
                    format!("{key}.key_env"),
                    "and deliver_test_leads apply only to kind = \"google_ads\"",
                ));
            }
        }
        for (name, target) in &self.targets {
            let key = format!("targets.{name}");
            check_name(&key, name)?;
            target.validate(&key)?;
            match (&target.max_lead_age_minutes, &target.fallback) {
                (Some(0), _) => return Err(invalid(format!("{key}.max_lead_age_minutes"), "must be greater than 0")),
                (Some(_), None) => {
                    return Err(invalid(format!("{key}.fallback"), "is required with max_lead_age_minutes"))
                }
                (None, Some(_)) if !target.kind.is_first_contact() => {
                    return Err(invalid(format!("{key}.max_lead_age_minutes"), "is required with fallback"))
                }
                (_, Some(f)) if f == name => {
                    return Err(invalid(format!("{key}.fallback"), "cannot be the target itself"))
                }
                (_, Some(f)) if !self.targets.contains_key(f) => {
                    return Err(invalid(
                        format!("{key}.fallback"),
                        format!("names target `{f}`, which is not defined under [targets]"),
                    ))
                }
                _ => {}
            }
            if let Some(f) = &target.on_failure {
                if f == name || !self.targets.contains_key(f) {
                    return Err(invalid(
                        format!("{key}.on_failure"),
                        format!("names `{f}`, which is not another target defined under [targets]"),
                    ));
                }
            }
            if let Some(md) = &target.missing_data {
                let key = format!("{key}.missing_data");
                if target.mapping.is_empty() {
                    return Err(invalid(
                        key,
                        "needs a field mapping: a lead goes without a field by leaving its rule out of the record",
                    ));
                }
                if md.drop.is_empty() || md.drop.iter().any(|f| f.trim().is_empty()) {
                    return Err(invalid(format!("{key}.drop"), "must list at least one field, none of them empty"));
                }
                if let Some(upsert) = target.upsert_key_field() {
                    if md.drop.iter().any(|f| f == upsert) {
                        return Err(invalid(
                            format!("{key}.drop"),
                            format!("cannot list `{upsert}`: the target finds its record by it"),
                        ));
                    }
                }
                if let Some(tag) = &md.tag {
                    if tag.property.trim().is_empty() {
                        return Err(invalid(format!("{key}.tag.property"), "must not be empty"));
                    }
                    if md.drop.contains(&tag.property) {
                        return Err(invalid(format!("{key}.tag.property"), "cannot be a field on the drop list"));
                    }
                }
                match &md.task {
                    Some(t) if t == name => return Err(invalid(format!("{key}.task"), "cannot be the target itself")),
                    Some(t) if !self.targets.contains_key(t) => {
                        return Err(invalid(
                            format!("{key}.task"),
                            format!("names target `{t}`, which is not defined under [targets]"),
                        ))
                    }
                    _ => {}
                }
            }
        }
        if self.replay.rate_per_second.is_nan() || self.replay.rate_per_second <= 0.0 {
            return Err(invalid("replay.rate_per_second", "must be greater than 0"));
        }
        Ok(())
    }

    /// The database URL (SQLite or PostgreSQL), defaulting to the SQLite file `leadline.db` in the platform data
    /// folder.
    pub fn database_url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.database.url {
            return Ok(url.clone());
        }
        let dir = default_data_dir()?;
        Ok(format!("sqlite://{}", dir.join("leadline.db").display()))
    }
}

impl Config {
    /// Where `leadline serve` writes its process id, for `leadline reload`: beside the SQLite database
    /// (`leadline.db.pid`), else (PostgreSQL, an in-memory database) in the platform data folder.
    pub fn pid_file(&self) -> anyhow::Result<PathBuf> {
        let url = self.database_url()?;
        let file = url.strip_prefix("sqlite://").or_else(|| (!url.contains("://")).then_some(url.as_str()));
        match file.map(|f| f.split('?').next().unwrap_or(f)).filter(|f| !f.is_empty() && *f != ":memory:") {
            Some(f) => Ok(PathBuf::from(format!("{f}.pid"))),
            // A server database (PostgreSQL) has no file to sit beside: the pid file goes to the data folder,
            // named for the database URL, so servers of different databases on one machine do not share one.
            None => {
                use sha2::Digest;
                let digest = hex::encode(sha2::Sha256::digest(url.as_bytes()));
                Ok(default_data_dir()?.join(format!("leadline-{}.pid", &digest[..12])))
            }
        }
    }
}

/// The folder Leadline keeps its database in when none is configured (`~/.local/share/leadline` on Linux).
pub fn default_data_dir() -> anyhow::Result<PathBuf> {
    let base =
        dirs::data_dir().ok_or_else(|| anyhow::anyhow!("no platform data folder; set database.url in the config"))?;
    Ok(base.join("leadline"))
}

fn check_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(invalid(key, "names may use only letters, digits, '_' and '-'"))
    }
}

impl MonitorConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.oldest_pending_alert_seconds == 0 {
            return Err(invalid("monitor.oldest_pending_alert_seconds", "must be greater than 0"));
        }
        if self.timezone.parse::<chrono_tz::Tz>().is_err() {
            return Err(invalid(
                "monitor.timezone",
                format!("`{}` is not an IANA time zone (like \"Europe/Berlin\")", self.timezone),
            ));
        }
        let b = &self.business_hours;
        TimeSpan { start: b.start.clone(), end: b.end.clone() }.validate("monitor.business_hours")?;
        for d in &b.days {
            if !["mon", "tue", "wed", "thu", "fri", "sat", "sun"].contains(&d.as_str()) {
                return Err(invalid("monitor.business_hours.days", format!("`{d}` is not one of mon … sun")));
            }
        }
        if let Some(q) = &self.quiet_hours {
            q.validate("monitor.quiet_hours")?;
        }
        if self.digest_interval_minutes == 0 {
            return Err(invalid("monitor.digest_interval_minutes", "must be greater than 0"));
        }
        let v = &self.volume;
        if v.window_minutes == 0 || v.window_minutes > 24 * 60 {
            return Err(invalid("monitor.volume.window_minutes", "must be between 1 and 1440"));
        }
        for (name, p) in [("p_value", v.p_value), ("resolve_p_value", v.resolve_p_value)] {
            if !(p > 0.0 && p < 1.0) {
                return Err(invalid(format!("monitor.volume.{name}"), "must be between 0 and 1 (exclusive)"));
            }
        }
        if v.resolve_p_value < v.p_value {
            return Err(invalid("monitor.volume.resolve_p_value", "must be at least p_value"));
        }
        if !(0.0..1.0).contains(&v.tolerance) {
            return Err(invalid("monitor.volume.tolerance", "must be at least 0 and below 1"));
        }
        if v.baseline_weeks == 0 {
            return Err(invalid("monitor.volume.baseline_weeks", "must be at least 1"));
        }
        if self.metrics.minute_retention_hours < 25 {
            return Err(invalid(
                "monitor.metrics.minute_retention_hours",
                "must be at least 25 (the 24 h chart reads minutes)",
            ));
        }
        if self.metrics.hourly_retention_days < 8 {
            return Err(invalid(
                "monitor.metrics.hourly_retention_days",
                "must be at least 8 (the 7 d chart and the baselines read hours)",
            ));
        }
        for (kind, policy) in &self.alerts {
            if kind.parse::<AlertKind>().is_err() {
                return Err(invalid(
                    format!("monitor.alerts.{kind}"),
                    format!(
                        "is not an alert kind; the kinds are {}",
                        AlertKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            if policy.renotify_minutes == Some(0) {
                return Err(invalid(format!("monitor.alerts.{kind}.renotify_minutes"), "must be greater than 0"));
            }
        }
        for (name, channel) in &self.channels {
            let key = format!("monitor.channels.{name}");
            check_name(&key, name)?;
            channel.validate(&key)?;
        }
        if let Some(url) = &self.public_url {
            match url::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => {
                    return Err(invalid(
                        "monitor.public_url",
                        format!("`{url}` is not an http(s) address (`https://leads.example.com`)"),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl ReconcileConfig {
    fn validate(&self, key: &str, kind: SourceKind) -> Result<(), ConfigError> {
        if self.interval_seconds == 0 {
            return Err(invalid(format!("{key}.interval_seconds"), "must be greater than 0"));
        }
        match kind {
            SourceKind::Generic => {
                let Some(url) = &self.list_url else {
                    return Err(invalid(format!("{key}.list_url"), "is required for a generic source"));
                };
                let parsed = reqwest::Url::parse(&url.replace("{since}", "0"))
                    .map_err(|e| invalid(format!("{key}.list_url"), format!("is not a valid URL: {e}")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(invalid(format!("{key}.list_url"), "must be http or https"));
                }
                for (name, p) in [("items_pointer", &self.items_pointer), ("next_pointer", &self.next_pointer)] {
                    if let Some(p) = p {
                        if !p.starts_with('/') {
                            return Err(invalid(format!("{key}.{name}"), "must be a JSON pointer starting with '/'"));
                        }
                    }
                }
            }
            SourceKind::Meta => {
                if self.form_ids.is_empty() {
                    return Err(invalid(format!("{key}.form_ids"), "must list at least one lead form id"));
                }
            }
            other => {
                return Err(invalid(
                    key.to_string(),
                    format!("a source of kind = \"{}\" has no list of leads to read", other.as_str()),
                ))
            }
        }
        Ok(())
    }
}

impl TargetConfig {
    /// The idempotency strategy: as configured for `http`; a `meta_lead` step only reads (an upsert in effect:
    /// repeating it changes nothing).
    /// Whether sending a lead again updates the record it created before, so a changed lead (a new revision) can
    /// go again once delivered: an upsert (PUT/PATCH by external id, Salesforce, HubSpot). A keyed POST, a plain
    /// POST or search-then-create (Pipedrive) is a create: sent again, it would make a second record. A
    /// `meta_lead` step only reads.
    pub fn updates_records(&self) -> bool {
        self.kind != TargetKind::MetaLead && self.strategy() == Strategy::Upsert
    }

    /// How old a lead may be for this step to run rather than its `fallback`: `max_lead_age_minutes`, or for a
    /// first-contact step [`FIRST_CONTACT_MAX_AGE_MINUTES`] when it names a fallback without a limit.
    pub fn max_lead_age(&self) -> Option<u64> {
        self.max_lead_age_minutes.or((self.kind.is_first_contact()).then_some(FIRST_CONTACT_MAX_AGE_MINUTES))
    }

    /// The tag a record sent without some fields carries (`missing_data.tag`), if any.
    pub fn missing_data_tag(&self) -> Option<crate::model::mapping::Tag<'_>> {
        let tag = self.missing_data.as_ref()?.tag.as_ref()?;
        Some(crate::model::mapping::Tag { property: &tag.property, value: &tag.value })
    }

    /// The CRM field a target finds a lead's record by (HubSpot's `id_property`, Salesforce's
    /// `external_id_field`): a lead refused for it is never written without it.
    pub fn upsert_key_field(&self) -> Option<&str> {
        match self.kind {
            TargetKind::Hubspot => self.id_property.as_deref(),
            TargetKind::Salesforce => self.external_id_field.as_deref(),
            _ => None,
        }
    }

    pub fn strategy(&self) -> Strategy {
        match self.kind {
            TargetKind::Http => self.strategy.unwrap_or(Strategy::None),
            TargetKind::MetaLead => Strategy::Upsert,
            // Person and lead are created after a search, linked locally (`targets::pipedrive`).
            TargetKind::Pipedrive => Strategy::SearchThenCreate,
            // Salesforce: PATCH by the external id field, an upsert.
            TargetKind::Salesforce => Strategy::Upsert,
            // Upserting by a unique property is HubSpot's idempotency: a repeat changes nothing.
            TargetKind::Hubspot => Strategy::Upsert,
            // A message cannot be updated or searched for by a key of ours: each send is a new message. Leadline's
            // own record of what was sent (`contact_message`) keeps it to one.
            TargetKind::Whatsapp | TargetKind::Sms => Strategy::None,
            // Each conversion carries its own key (Meta's event_id, Google's orderId): a repeat is dropped.
            TargetKind::MetaConversions | TargetKind::GoogleAdsConversions => Strategy::Upsert,
        }
    }

    /// The Salesforce REST API version: as configured, or [`SALESFORCE_API_VERSION`] when `api_version` was left
    /// out. `api_version`'s serde default is Meta's Graph version (`v21.0`); Salesforce retired its own 21.0 in
    /// 2025, so that value can only mean "not set" here.
    pub fn salesforce_api_version(&self) -> &str {
        if self.api_version == default_graph_version() {
            SALESFORCE_API_VERSION
        } else {
            &self.api_version
        }
    }

    /// `salesforce`: the sObject leads go to.
    pub fn salesforce_object(&self) -> &str {
        self.object.as_deref().unwrap_or("Lead")
    }

    /// `hubspot`: the object type written (`contacts` unless configured).
    pub fn hubspot_object(&self) -> &str {
        self.object.as_deref().unwrap_or("contacts")
    }

    /// The base of Graph API requests of a `meta_lead` step: address and version.
    pub fn graph_base(&self) -> String {
        format!("{}/{}", self.url.trim_end_matches('/'), self.api_version.trim_matches('/'))
    }

    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        if !self.mapping.is_empty() {
            crate::model::mapping::validate(&self.mapping, &format!("{key}.mapping")).map_err(|e| {
                // The mapping's errors start with their own key (`targets.crm.mapping[2].transform: …`).
                let text = e.to_string();
                let (k, m) = text.split_once(": ").unwrap_or((key, &text));
                invalid(k, m)
            })?;
        }
        match (self.kind, self.strategy) {
            (TargetKind::Http, None) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "is required: \"idempotency_key\", \"upsert\", \"search_then_create\" or \"none\"",
                ))
            }
            (TargetKind::Pipedrive, Some(_)) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "does not apply to kind = \"pipedrive\" (always a search, then person and lead created once)",
                ))
            }
            (TargetKind::Pipedrive, None) => self.validate_pipedrive(key)?,
            (TargetKind::MetaLead, Some(_)) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "does not apply to kind = \"meta_lead\" (it only reads)",
                ))
            }
            (TargetKind::Salesforce, Some(_)) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "does not apply to kind = \"salesforce\" (it always upserts by external_id_field)",
                ))
            }
            (TargetKind::Salesforce, None) => self.validate_salesforce(key)?,
            (TargetKind::MetaLead, None) => {
                if self.access_token_env.is_none() {
                    return Err(invalid(
                        format!("{key}.access_token_env"),
                        "is required for kind = \"meta_lead\": the variable holding a page access token",
                    ));
                }
                if self.api_version.is_empty() || self.api_version.contains(['/', '?', '#']) {
                    return Err(invalid(format!("{key}.api_version"), "must be a version like \"v21.0\""));
                }
            }
            (TargetKind::Hubspot, Some(_)) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "does not apply to kind = \"hubspot\" (records are upserted by id_property)",
                ))
            }
            (TargetKind::Hubspot, None) => self.validate_hubspot(key)?,
            (TargetKind::Whatsapp | TargetKind::Sms, Some(_)) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "does not apply to a first-contact step (a message is sent once, never repeated)",
                ))
            }
            (TargetKind::Whatsapp | TargetKind::Sms, None) => self.validate_first_contact(key)?,
            (TargetKind::MetaConversions | TargetKind::GoogleAdsConversions, Some(_)) => {
                return Err(invalid(
                    format!("{key}.strategy"),
                    "does not apply to a conversion step (each conversion carries its own key)",
                ))
            }
            (TargetKind::MetaConversions, None) => {
                for (set, name) in
                    [(self.dataset_id.is_some(), "dataset_id"), (self.access_token_env.is_some(), "access_token_env")]
                {
                    if !set {
                        return Err(invalid(format!("{key}.{name}"), "is required for kind = \"meta_conversions\""));
                    }
                }
                if self.stages.is_empty() {
                    return Err(invalid(format!("{key}.stages"), "must map at least one CRM stage to an event name"));
                }
            }
            (TargetKind::GoogleAdsConversions, None) => {
                for (set, name) in [
                    (self.customer_id.is_some(), "customer_id"),
                    (self.client_id_env.is_some(), "client_id_env"),
                    (self.client_secret_env.is_some(), "client_secret_env"),
                    (self.refresh_token_env.is_some(), "refresh_token_env"),
                ] {
                    if !set {
                        return Err(invalid(
                            format!("{key}.{name}"),
                            "is required for kind = \"google_ads_conversions\"",
                        ));
                    }
                }
                if self.stages.is_empty() {
                    return Err(invalid(
                        format!("{key}.stages"),
                        "must map at least one CRM stage to a conversion action",
                    ));
                }
                if let Some((stage, action)) = self.stages.iter().find(|(_, a)| !a.starts_with("customers/")) {
                    return Err(invalid(
                        format!("{key}.stages.{stage}"),
                        format!("`{action}` is not a conversion action's resource name (customers/{{id}}/conversionActions/{{id}})"),
                    ));
                }
            }
            _ => {}
        }
        let url = reqwest::Url::parse(&self.url.replace("{external_id}", "x"))
            .map_err(|e| invalid(format!("{key}.url"), format!("is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!("{key}.url"), "must be http or https"));
        }
        if let Some(method) = &self.method {
            reqwest::Method::from_bytes(method.as_bytes())
                .map_err(|_| invalid(format!("{key}.method"), format!("`{method}` is not an HTTP method")))?;
        }
        match self.strategy {
            Some(Strategy::Upsert) if !self.url.contains("{external_id}") => {
                return Err(invalid(format!("{key}.url"), "must contain {external_id} for strategy = \"upsert\""));
            }
            Some(Strategy::SearchThenCreate) if self.search_url.is_none() => {
                return Err(invalid(format!("{key}.search_url"), "is required for strategy = \"search_then_create\""));
            }
            _ => {}
        }
        if let Some(search) = &self.search_url {
            if !search.contains("{external_id}") {
                return Err(invalid(format!("{key}.search_url"), "must contain {external_id}"));
            }
        }
        if let Some(record) = &self.record_url {
            if !record.contains("{crm_id}") {
                return Err(invalid(format!("{key}.record_url"), "must contain {crm_id}"));
            }
        }
        if !self.id_pointer.starts_with('/') {
            return Err(invalid(format!("{key}.id_pointer"), "must be a JSON pointer starting with '/'"));
        }
        if self.timeout_ms == 0 {
            return Err(invalid(format!("{key}.timeout_ms"), "must be greater than 0"));
        }
        if self.concurrency == 0 {
            return Err(invalid(format!("{key}.concurrency"), "must be greater than 0"));
        }
        let b = &self.backoff;
        if b.base_ms == 0 {
            return Err(invalid(format!("{key}.backoff.base_ms"), "must be greater than 0"));
        }
        if b.cap_ms < b.base_ms {
            return Err(invalid(format!("{key}.backoff.cap_ms"), "must be at least base_ms"));
        }
        if b.max_attempts == 0 {
            return Err(invalid(format!("{key}.backoff.max_attempts"), "must be at least 1"));
        }
        if b.budget_seconds == 0 {
            return Err(invalid(format!("{key}.backoff.budget_seconds"), "must be greater than 0"));
        }
        let br = &self.breaker;
        if br.consecutive_failures == 0 {
            return Err(invalid(format!("{key}.breaker.consecutive_failures"), "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&br.failure_ratio) {
            return Err(invalid(format!("{key}.breaker.failure_ratio"), "must be between 0 and 1"));
        }
        if br.failure_ratio > 0.0 && br.window == 0 {
            return Err(invalid(format!("{key}.breaker.window"), "must be at least 1 when failure_ratio > 0"));
        }
        for code in self.classify.status.keys() {
            match code.parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => {}
                _ => {
                    return Err(invalid(
                        format!("{key}.classify.status.{code}"),
                        "keys must be HTTP status codes (100-599)",
                    ))
                }
            }
        }
        if !self.classify.body_values.is_empty() && self.classify.body_field.is_none() {
            return Err(invalid(format!("{key}.classify.body_field"), "is required when body_values is set"));
        }
        for (name, ptr) in [
            ("body_field", &self.classify.body_field),
            ("message_pointer", &self.classify.message_pointer),
            ("field_pointer", &self.classify.field_pointer),
        ] {
            if let Some(p) = ptr {
                if !p.starts_with('/') {
                    return Err(invalid(format!("{key}.classify.{name}"), "must be a JSON pointer starting with '/'"));
                }
            }
        }
        if let Some(AuthConfig::Header { name, .. }) = &self.auth {
            reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("{key}.auth.header.name"), "is not a valid header name"))?;
        }
        for name in self.headers.keys() {
            reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("{key}.headers.{name}"), "is not a valid header name"))?;
        }
        Ok(())
    }

    /// The `pipedrive` keys: the token variable, the person field, a mapping that splits into person and lead.
    fn validate_pipedrive(&self, key: &str) -> Result<(), ConfigError> {
        if self.api_token_env.as_deref().is_none_or(str::is_empty) {
            return Err(invalid(
                format!("{key}.api_token_env"),
                "is required for kind = \"pipedrive\": the variable holding the API token",
            ));
        }
        let field = self.person_field_key.as_deref().unwrap_or("");
        if field.is_empty() || !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid(
                format!("{key}.person_field_key"),
                "is required for kind = \"pipedrive\": the key (a 40-character hash) of the custom person field \
                 holding Leadline's external id",
            ));
        }
        if self.auth.is_some() {
            return Err(invalid(format!("{key}.auth"), "does not apply to kind = \"pipedrive\"; use api_token_env"));
        }
        if self.search_url.is_some() {
            return Err(invalid(
                format!("{key}.search_url"),
                "does not apply to kind = \"pipedrive\" (it searches persons by person_field_key)",
            ));
        }
        crate::model::mapping::validate_pipedrive(&self.mapping, field).map_err(|(i, message)| match i {
            Some(i) => invalid(format!("{key}.mapping[{i}].to"), message),
            None => invalid(format!("{key}.mapping"), message),
        })
    }

    fn validate_salesforce(&self, key: &str) -> Result<(), ConfigError> {
        for (name, value) in [
            ("client_id_env", &self.client_id_env),
            ("client_secret_env", &self.client_secret_env),
            ("refresh_token_env", &self.refresh_token_env),
        ] {
            if value.as_deref().is_none_or(str::is_empty) {
                return Err(invalid(
                    format!("{key}.{name}"),
                    "is required for kind = \"salesforce\": the environment variable holding it",
                ));
            }
        }
        let api_name = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        match &self.external_id_field {
            None => return Err(invalid(
                format!("{key}.external_id_field"),
                "is required for kind = \"salesforce\": an External ID field of the object (like \"Leadline_Id__c\")",
            )),
            Some(f) if !api_name(f) => {
                return Err(invalid(format!("{key}.external_id_field"), format!("`{f}` is not a Salesforce API name")))
            }
            _ => {}
        }
        if let Some(o) = &self.object {
            if !api_name(o) {
                return Err(invalid(format!("{key}.object"), format!("`{o}` is not a Salesforce API name")));
            }
        }
        let v = self.salesforce_api_version();
        let ok = v.strip_prefix('v').and_then(|n| n.split_once('.')).is_some_and(|(major, minor)| {
            !major.is_empty() && minor == "0" && major.bytes().all(|b| b.is_ascii_digit())
        });
        if !ok {
            return Err(invalid(
                format!("{key}.api_version"),
                format!("`{v}` is not a Salesforce version like \"v60.0\""),
            ));
        }
        if self.mapping.is_empty() {
            return Err(invalid(
                format!("{key}.mapping"),
                "is required for kind = \"salesforce\": which lead field goes to which Salesforce field",
            ));
        }
        if self.method.is_some() || self.search_url.is_some() || self.auth.is_some() {
            let k = if self.method.is_some() {
                "method"
            } else if self.search_url.is_some() {
                "search_url"
            } else {
                "auth"
            };
            return Err(invalid(format!("{key}.{k}"), "does not apply to kind = \"salesforce\""));
        }
        Ok(())
    }

    /// `whatsapp` and `sms`: their own section, a mapping that writes the recipient `to`, quiet hours that read.
    fn validate_first_contact(&self, key: &str) -> Result<(), ConfigError> {
        match (self.kind, &self.whatsapp, &self.sms) {
            (TargetKind::Whatsapp, None, _) => {
                return Err(invalid(
                    format!("{key}.whatsapp"),
                    "is required for kind = \"whatsapp\": { phone_number_id, template, language }",
                ))
            }
            (TargetKind::Whatsapp, Some(w), _) => {
                if self.access_token_env.is_none() {
                    return Err(invalid(
                        format!("{key}.access_token_env"),
                        "is required for kind = \"whatsapp\": the variable holding the system user's access token",
                    ));
                }
                let segment = |v: &str| !v.is_empty() && !v.contains(['/', '?', '#', ' ']);
                if !segment(&w.phone_number_id) {
                    return Err(invalid(format!("{key}.whatsapp.phone_number_id"), "must be the number's id"));
                }
                if w.template.trim().is_empty() || w.language.trim().is_empty() {
                    return Err(invalid(format!("{key}.whatsapp.template"), "and language must not be empty"));
                }
                if self.api_version.is_empty() || self.api_version.contains(['/', '?', '#']) {
                    return Err(invalid(format!("{key}.api_version"), "must be a version like \"v21.0\""));
                }
            }
            (TargetKind::Sms, _, None) => return Err(invalid(
                format!("{key}.sms"),
                "is required for kind = \"sms\": { account_sid, auth_token_env, from or messaging_service_sid, body }",
            )),
            (TargetKind::Sms, _, Some(s)) => {
                if !s.account_sid.starts_with("AC") || s.account_sid.contains(['/', '?', '#']) {
                    return Err(invalid(format!("{key}.sms.account_sid"), "must be an Account SID (AC…)"));
                }
                if s.from.is_some() == s.messaging_service_sid.is_some() {
                    return Err(invalid(format!("{key}.sms.from"), "or messaging_service_sid: exactly one of them"));
                }
                if s.body.trim().is_empty() {
                    return Err(invalid(format!("{key}.sms.body"), "must not be empty"));
                }
            }
            _ => {}
        }
        let writes_to = self.mapping.iter().any(|r| r.to == "to" || r.to == "/to");
        if !writes_to {
            return Err(invalid(
                format!("{key}.mapping"),
                "must write `to`, the lead's phone number (with phone_e164, so national numbers get a country)",
            ));
        }
        if let Some(q) = &self.first_contact.quiet_hours {
            q.times().map_err(|m| invalid(format!("{key}.first_contact.quiet_hours"), m))?;
        }
        if let Some(tz) = &self.first_contact.time_zone {
            if tz.parse::<chrono_tz::Tz>().is_err() {
                return Err(invalid(format!("{key}.first_contact.time_zone"), format!("`{tz}` is not a time zone")));
            }
        }
        if self.first_contact.in_doubt_minutes == 0 {
            return Err(invalid(format!("{key}.first_contact.in_doubt_minutes"), "must be greater than 0"));
        }
        Ok(())
    }

    fn validate_hubspot(&self, key: &str) -> Result<(), ConfigError> {
        let is_name = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        match self.id_property.as_deref() {
            None => {
                return Err(invalid(
                    format!("{key}.id_property"),
                    "is required for kind = \"hubspot\": the unique property to upsert by (\"email\" or a custom \
                     unique property such as \"leadline_id\")",
                ))
            }
            Some(p) if !is_name(p) => {
                return Err(invalid(format!("{key}.id_property"), format!("`{p}` is not a HubSpot property name")))
            }
            _ => {}
        }
        if let Some(o) = &self.object {
            if !is_name(o) {
                return Err(invalid(format!("{key}.object"), format!("`{o}` is not a HubSpot object type")));
            }
        }
        if self.mapping.is_empty() {
            return Err(invalid(
                format!("{key}.mapping"),
                "is required for kind = \"hubspot\": at least one rule that makes a HubSpot property",
            ));
        }
        if !matches!(self.auth, Some(AuthConfig::BearerEnv(_))) {
            return Err(invalid(
                format!("{key}.auth"),
                "is required for kind = \"hubspot\": { bearer_env = \"VAR\" } naming the variable with the \
                 private app token or OAuth access token",
            ));
        }
        if self.url.contains("{external_id}") {
            return Err(invalid(
                format!("{key}.url"),
                "is HubSpot's address (\"https://api.hubapi.com\"), without a path",
            ));
        }
        Ok(())
    }

    pub fn method(&self) -> reqwest::Method {
        match &self.method {
            Some(m) => reqwest::Method::from_bytes(m.as_bytes()).unwrap_or(reqwest::Method::POST),
            None if self.strategy() == Strategy::Upsert => reqwest::Method::PUT,
            None => reqwest::Method::POST,
        }
    }
}

/// Secrets entered in the app's settings: the OS keyring, a platform part (`platform/keyring.rs`). Re-exported here
/// so that `config::keyring` keeps naming it.
pub use crate::platform::keyring;

impl Config {
    /// Reads the secret named `var` (for config key `key`): from the secrets file as it is now, else from the
    /// environment, else from the OS keyring (secrets entered in the app's settings), naming where it looked when
    /// missing.
    pub fn secret(&self, key: &str, var: &str) -> Result<String, ConfigError> {
        if let Some(v) = self.inline_secrets.get(var) {
            return Ok(v.clone());
        }
        if let Some(path) = &self.secrets_file {
            let unreadable =
                |e: dotenvy::Error| invalid("secrets_file", format!("cannot read {}: {e}", path.display()));
            for entry in dotenvy::from_path_iter(path).map_err(unreadable)? {
                let (name, value) = entry.map_err(unreadable)?;
                if name == var {
                    return Ok(value);
                }
            }
        }
        if let Ok(v) = std::env::var(var) {
            return Ok(v);
        }
        let keyring = match keyring::unavailable() {
            Some(_) => String::new(),
            None => match keyring::get(var) {
                Ok(Some(v)) => return Ok(v),
                Ok(None) => ", nor in the keyring".to_string(),
                Err(e) => format!(" ({e})"),
            },
        };
        Err(match &self.secrets_file {
            Some(path) => invalid(
                key,
                format!("{var} is neither in the secrets file {} nor in the environment{keyring}", path.display()),
            ),
            None => invalid(
                key,
                format!("environment variable {var} is not set{keyring} (secrets are never stored in the config file)"),
            ),
        })
    }

    /// Where the secret named `var` is found now, in the order [`Config::secret`] looks: `None` when nowhere.
    /// Reads the keyring (blocking on D-Bus) only when the other places lack it.
    pub fn secret_source(&self, var: &str) -> Option<SecretSource> {
        if self.inline_secrets.contains_key(var) {
            return Some(SecretSource::Inline);
        }
        if let Some(path) = &self.secrets_file {
            let found = dotenvy::from_path_iter(path)
                .map(|entries| entries.flatten().any(|(name, _)| name == var))
                .unwrap_or(false);
            if found {
                return Some(SecretSource::SecretsFile);
            }
        }
        if std::env::var_os(var).is_some() {
            return Some(SecretSource::Environment);
        }
        matches!(keyring::get(var), Ok(Some(_))).then_some(SecretSource::Keyring)
    }
}

/// Where a secret was found (never the secret itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, ts_rs::TS)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// Given in code (the demo, tests).
    Inline,
    SecretsFile,
    Environment,
    Keyring,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.toml"))
    }

    const OK: &str = r#"
        [sources.webform]
        route = ["crm"]
        [targets.crm]
        url = "http://127.0.0.1:9/leads"
        strategy = "idempotency_key"
    "#;

    #[test]
    fn minimal_config_parses_with_defaults() {
        let c = parse(OK).unwrap();
        assert_eq!(c.sources["webform"].id_field, "id");
        assert_eq!(c.targets["crm"].method(), reqwest::Method::POST);
        assert_eq!(c.targets["crm"].backoff.max_attempts, 12);
    }

    #[test]
    fn database_url_may_name_postgres() {
        let with = |url: &str| format!("[database]\nurl = \"{url}\"\n{OK}");
        for url in [
            "postgres://leadline:secret@db.internal:5432/leadline",
            "postgresql://u@localhost/leads?host=/run/postgresql",
        ] {
            let c = parse(&with(url)).unwrap();
            c.validate().unwrap();
            assert_eq!(c.database_url().unwrap(), url);
            assert!(!c.pid_file().unwrap().to_string_lossy().contains("postgres"), "no pid file named after a URL");
        }
        let e = parse(&with("postgres://u@localhost:5432")).map(|c| c.validate()).unwrap_err().to_string();
        assert!(e.contains("database.url"), "{e}");
        let e = parse(&with("postgres://u@[bad")).map(|c| c.validate()).unwrap_err().to_string();
        assert!(e.contains("database.url"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let bad_route = OK.replace("route = [\"crm\"]", "route = [\"hubspot\"]");
        let e = parse(&bad_route).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:"), "{e}");
        assert!(e.contains("hubspot"), "{e}");

        let bad_backoff = format!("{OK}\n[targets.crm.backoff]\nbase_ms = 0\n");
        let e = parse(&bad_backoff).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.backoff.base_ms:"), "{e}");

        let upsert = OK.replace("idempotency_key", "upsert");
        let e = parse(&upsert).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.url:") && e.contains("{external_id}"), "{e}");

        let unknown = format!("{OK}\n[worker]\nbatch = 3\n");
        let e = parse(&unknown).unwrap_err().to_string();
        assert!(e.contains("batch"), "{e}");

        let status = format!("{OK}\n[targets.crm.classify.status]\n\"4xx\" = \"transient\"\n");
        let e = parse(&status).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.classify.status.4xx:"), "{e}");

        let meta = OK.replace("route = [\"crm\"]", "route = [\"crm\"]\nkind = \"meta\"");
        let e = parse(&meta).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("meta_lead"), "{e}");

        let fetch =
            "\n[targets.fetch]\nkind = \"meta_lead\"\nurl = \"https://graph.facebook.com\"\naccess_token_env = \"T\"\n";
        let meta =
            format!("{}{fetch}", OK.replace("route = [\"crm\"]", "route = [\"fetch\", \"crm\"]\nkind = \"meta\""));
        let e = parse(&meta).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.app_secret_env:"), "{e}");

        let late = format!("{}{fetch}", OK.replace("route = [\"crm\"]", "route = [\"crm\", \"fetch\"]"));
        let e = parse(&late).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("first step of a Meta source"), "{e}");

        let no_token = format!("{OK}\n[targets.fetch]\nkind = \"meta_lead\"\nurl = \"https://graph.facebook.com\"\n");
        let e = parse(&no_token).unwrap_err().to_string();
        assert!(e.starts_with("targets.fetch.access_token_env:"), "{e}");

        let no_strategy = OK.replace("strategy = \"idempotency_key\"", "");
        let e = parse(&no_strategy).unwrap_err().to_string();
        assert!(e.starts_with("targets.crm.strategy:"), "{e}");
    }

    #[test]
    fn trusted_proxies_are_addresses_or_networks_and_name_the_header_they_write() {
        let with = |server: &str| parse(&format!("[server]\n{server}\n{OK}"));
        let config = with(
            r#"trusted_proxies = ["10.0.0.5", "10.1.0.0/16", "fd00::/8", "192.168.7.9/24"]
forwarded_header = "forwarded""#,
        )
        .unwrap();
        let nets: Vec<String> = config.server.trusted_proxy_networks().unwrap().iter().map(|n| n.to_string()).collect();
        assert_eq!(nets, ["10.0.0.5/32", "10.1.0.0/16", "fd00::/8", "192.168.7.0/24"]);
        assert_eq!(config.server.forwarded_header, ForwardedHeader::Forwarded);
        let defaults = parse(OK).unwrap();
        assert_eq!(defaults.server.forwarded_header, ForwardedHeader::XForwardedFor);
        assert!(defaults.server.trusted_proxy_networks().unwrap().is_empty());
        for bad in [r#"trusted_proxies = ["10.0.0.1", "proxy.internal"]"#, r#"trusted_proxies = ["10.0.0.0/33"]"#] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.starts_with("server.trusted_proxies[") && e.contains("not an IP address or network"), "{e}");
        }
        let e = with(r#"forwarded_header = "x-real-ip""#).unwrap_err().to_string();
        assert!(e.contains("x-forwarded-for") && e.contains("forwarded"), "{e}");
        for key in ["min_body_bytes_per_second", "body_stall_seconds", "max_bodies_per_peer"] {
            let e = with(&format!("{key} = 0")).unwrap_err().to_string();
            assert!(e.starts_with(&format!("server.{key}:")), "{e}");
        }
    }

    const PIPEDRIVE: &str = r#"
        [sources.webform]
        route = ["crm"]
        [targets.crm]
        kind = "pipedrive"
        url = "https://api.pipedrive.com"
        api_token_env = "PIPEDRIVE_TOKEN"
        person_field_key = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
        [[targets.crm.mapping]]
        to = "/person/name"
        from = "/fields/full_name"
        [[targets.crm.mapping]]
        to = "/person/email"
        from = "/fields/email"
        [[targets.crm.mapping]]
        to = "/lead/title"
        constant = "Meta lead"
    "#;

    #[test]
    fn a_pipedrive_target_parses_and_always_searches_then_creates() {
        let c = parse(PIPEDRIVE).unwrap();
        let t = &c.targets["crm"];
        assert_eq!(t.kind, TargetKind::Pipedrive);
        assert_eq!(t.strategy(), Strategy::SearchThenCreate);
        assert_eq!(t.api_token_env.as_deref(), Some("PIPEDRIVE_TOKEN"));
        let company = PIPEDRIVE.replace("https://api.pipedrive.com", "https://acme.pipedrive.com");
        assert!(parse(&company).is_ok());
    }

    #[test]
    fn pipedrive_errors_name_the_key() {
        let cases = [
            (
                PIPEDRIVE.replace("kind = \"pipedrive\"", "kind = \"pipedrive\"\nstrategy = \"upsert\""),
                "targets.crm.strategy:",
            ),
            (PIPEDRIVE.replace("api_token_env = \"PIPEDRIVE_TOKEN\"", ""), "targets.crm.api_token_env:"),
            (
                PIPEDRIVE.replace("person_field_key = \"a1b2c3d4e5f60718293a4b5c6d7e8f9012345678\"", ""),
                "targets.crm.person_field_key:",
            ),
            (PIPEDRIVE.replace("\"/lead/title\"", "\"/deal/title\""), "targets.crm.mapping[2].to:"),
            (PIPEDRIVE.replace("\"/person/email\"", "\"/lead/person_id\""), "targets.crm.mapping[1].to:"),
            (
                PIPEDRIVE
                    .replace("\"/person/email\"", "\"/person/custom_fields/a1b2c3d4e5f60718293a4b5c6d7e8f9012345678\""),
                "targets.crm.mapping[1].to:",
            ),
            (PIPEDRIVE.replace("\"/lead/title\"", "\"/lead/note\""), "targets.crm.mapping:"),
            (PIPEDRIVE.replace("\"/person/name\"", "\"/person/phone\""), "targets.crm.mapping:"),
            (PIPEDRIVE.replace("https://api.pipedrive.com", "ftp://x"), "targets.crm.url:"),
            (
                PIPEDRIVE.replace("kind = \"pipedrive\"", "kind = \"pipedrive\"\nauth = { bearer_env = \"X\" }"),
                "targets.crm.auth:",
            ),
        ];
        for (text, key) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.starts_with(key), "{key}: {e}");
        }
        let e = parse(&PIPEDRIVE.replace("\"/lead/title\"", "\"/lead/note\"")).unwrap_err().to_string();
        assert!(e.contains("/lead/title"), "{e}");
    }

    const SALESFORCE: &str = r#"
        [sources.webform]
        route = ["sf"]
        [targets.sf]
        kind = "salesforce"
        url = "https://login.salesforce.com"
        external_id_field = "Leadline_Id__c"
        client_id_env = "SF_CLIENT_ID"
        client_secret_env = "SF_CLIENT_SECRET"
        refresh_token_env = "SF_REFRESH_TOKEN"
        mapping = [
            { to = "LastName", from = "/name" },
            { to = "Company", constant = "Unknown" },
        ]
    "#;

    #[test]
    fn a_salesforce_target_upserts_with_defaults() {
        let c = parse(SALESFORCE).unwrap();
        let t = &c.targets["sf"];
        assert_eq!(t.kind, TargetKind::Salesforce);
        assert_eq!(t.strategy(), Strategy::Upsert);
        assert_eq!(t.salesforce_api_version(), "v60.0");
        assert_eq!(t.salesforce_object(), "Lead");
        let pinned = SALESFORCE
            .replace("kind = \"salesforce\"", "kind = \"salesforce\"\napi_version = \"v58.0\"\nobject = \"Contact\"");
        let t = parse(&pinned).unwrap().targets["sf"].clone();
        assert_eq!((t.salesforce_api_version(), t.salesforce_object()), ("v58.0", "Contact"));
    }

    #[test]
    fn the_documented_salesforce_example_is_valid() {
        let docs = include_str!("../docs/configuration.md");
        let section = &docs[docs.find("### Salesforce").expect("docs have a Salesforce section")..];
        let start = section.find("```toml\n").expect("a TOML example") + "```toml\n".len();
        let end = start + section[start..].find("```").expect("the example ends");
        let text = format!("[sources.webform]\nroute = [\"salesforce\"]\n{}", &section[start..end]);
        let c = parse(&text).expect("the documented example is valid");
        assert_eq!(c.targets["salesforce"].kind, TargetKind::Salesforce);
        assert_eq!(c.targets["salesforce"].mapping.len(), 6);
    }

    #[test]
    fn salesforce_errors_name_the_key() {
        let cases = [
            ("refresh_token_env = \"SF_REFRESH_TOKEN\"", "", "targets.sf.refresh_token_env:"),
            ("client_id_env = \"SF_CLIENT_ID\"", "", "targets.sf.client_id_env:"),
            ("client_secret_env = \"SF_CLIENT_SECRET\"", "", "targets.sf.client_secret_env:"),
            ("external_id_field = \"Leadline_Id__c\"", "", "targets.sf.external_id_field:"),
            (
                "external_id_field = \"Leadline_Id__c\"",
                "external_id_field = \"Leadline Id\"",
                "targets.sf.external_id_field:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\nobject = \"Lead/x\"",
                "targets.sf.object:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\napi_version = \"60\"",
                "targets.sf.api_version:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\napi_version = \"v60.0/x\"",
                "targets.sf.api_version:",
            ),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\nstrategy = \"upsert\"",
                "targets.sf.strategy:",
            ),
            ("url = \"https://login.salesforce.com\"", "url = \"login.salesforce.com\"", "targets.sf.url:"),
            (
                "url = \"https://login.salesforce.com\"",
                "url = \"https://login.salesforce.com\"\nmethod = \"PUT\"",
                "targets.sf.method:",
            ),
        ];
        for (from, to, key) in cases {
            let text = SALESFORCE.replace(from, to);
            assert_ne!(text, SALESFORCE, "{from}");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.starts_with(key), "{key}: {e}");
        }
        let no_mapping = SALESFORCE.split("mapping = [").next().unwrap().to_string();
        let e = parse(&no_mapping).unwrap_err().to_string();
        assert!(e.starts_with("targets.sf.mapping:"), "{e}");
        // A Meta source's route starts with its fetch step, never with Salesforce.
        let meta = SALESFORCE.replace("route = [\"sf\"]", "route = [\"sf\"]\nkind = \"meta\"");
        let e = parse(&meta).unwrap_err().to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("meta_lead"), "{e}");
    }

    #[test]
    fn hubspot_targets_are_checked() {
        let hubspot = r#"
        [sources.webform]
        route = ["hubspot"]
        [targets.hubspot]
        kind = "hubspot"
        url = "https://api.hubapi.com"
        auth = { bearer_env = "HUBSPOT_TOKEN" }
        id_property = "leadline_id"
        [[targets.hubspot.mapping]]
        to = "email"
        from = "/fields/email"
        required = true
    "#;
        let c = parse(hubspot).unwrap();
        let t = &c.targets["hubspot"];
        assert_eq!(t.strategy(), Strategy::Upsert);
        assert_eq!(t.hubspot_object(), "contacts");
        assert_eq!(t.id_property.as_deref(), Some("leadline_id"));

        let e = parse(&hubspot.replace("id_property = \"leadline_id\"", "")).unwrap_err().to_string();
        assert_eq!(
            e,
            "targets.hubspot.id_property: is required for kind = \"hubspot\": the unique property to upsert by \
             (\"email\" or a custom unique property such as \"leadline_id\")"
        );
        let e = parse(&hubspot.replace("id_property = \"leadline_id\"", "id_property = \"lead id\""))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("targets.hubspot.id_property:"), "{e}");
        let no_mapping = hubspot.split("[[targets.hubspot.mapping]]").next().unwrap();
        let e = parse(no_mapping).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.mapping:") && e.contains("required"), "{e}");
        let e = parse(&hubspot.replace("id_property", "strategy = \"upsert\"\nid_property")).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.strategy:") && e.contains("does not apply"), "{e}");
        let e = parse(&hubspot.replace("auth = { bearer_env = \"HUBSPOT_TOKEN\" }", "")).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.auth:"), "{e}");
        let e = parse(&hubspot.replace("id_property", "object = \"contacts/x\"\nid_property")).unwrap_err().to_string();
        assert!(e.starts_with("targets.hubspot.object:"), "{e}");
        let e = parse(&hubspot.replace(
            "route = [\"hubspot\"]",
            "route = [\"hubspot\"]\nkind = \"meta\"\napp_secret_env = \"S\"\nverify_token_env = \"V\"",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("sources.webform.route:") && e.contains("meta_lead"), "{e}");
    }

    const CHANNELS: &str = r#"
        [monitor]
        quiet_hours = { start = "22:00", end = "07:00" }
        public_url = "https://leads.example.com"
        [monitor.channels.oncall]
        kind = "slack"
        webhook_url_env = "SLACK_WEBHOOK_URL"
        alerts = { volume_drop = "immediate", new_cause = "none" }
        quiet_hours = false
        [monitor.channels.mail]
        kind = "email"
        smtp_host = "smtp.example.com"
        username_env = "SMTP_USER"
        password_env = "SMTP_PASSWORD"
        from = "Leadline <alerts@example.com>"
        to = ["ops@example.com"]
        [monitor.channels.hook]
        kind = "webhook"
        url_env = "HOOK_URL"
        secret_env = "HOOK_SECRET"
        quiet_hours = { start = "20:00", end = "08:00" }
    "#;

    #[test]
    fn channels_parse_with_their_own_policy_and_quiet_hours() {
        use crate::model::Severity;
        let c = parse(&format!("{OK}{CHANNELS}")).unwrap();
        let m = &c.monitor;
        let (slack, mail, hook) = (&m.channels["oncall"], &m.channels["mail"], &m.channels["hook"]);
        assert_eq!(slack.kind(), Some(ChannelKind::Slack));
        assert_eq!(slack.policy(AlertKind::VolumeDrop, Severity::Warning).notify, NotifyPolicy::Immediate);
        assert_eq!(slack.policy(AlertKind::NewCause, Severity::Critical).notify, NotifyPolicy::None);
        // Not named: critical at once, the rest in the digest.
        assert_eq!(mail.policy(AlertKind::Credentials, Severity::Critical).notify, NotifyPolicy::Immediate);
        assert_eq!(mail.policy(AlertKind::RetryBudget, Severity::Warning).notify, NotifyPolicy::Digest);
        assert_eq!(slack.quiet_hours(m), None, "false turns the monitor's quiet hours off for this channel");
        assert_eq!(mail.quiet_hours(m).map(|q| q.start.as_str()), Some("22:00"), "the monitor's by default");
        assert_eq!(hook.quiet_hours(m).map(|q| q.start.as_str()), Some("20:00"));
        assert_eq!((mail.smtp_tls(), mail.smtp_port()), (Some(SmtpTls::StartTls), 587));
        assert_eq!(mail.digest_interval_minutes(m), 60);
    }

    #[test]
    fn a_wrong_channel_names_its_field() {
        let with = |from: &str, to: &str| {
            let text = format!("{OK}{CHANNELS}");
            assert!(text.contains(from), "{from}");
            parse(&text.replacen(from, to, 1)).unwrap_err().to_string()
        };
        for (from, to, key) in [
            ("kind = \"slack\"", "kind = \"sms\"", "monitor.channels.oncall.kind:"),
            ("webhook_url_env = \"SLACK_WEBHOOK_URL\"", "", "monitor.channels.oncall.webhook_url_env:"),
            (
                "webhook_url_env = \"SLACK_WEBHOOK_URL\"",
                "webhook_url_env = \"S\"\nurl_env = \"U\"",
                "monitor.channels.oncall.url_env:",
            ),
            ("new_cause = \"none\"", "new_causes = \"none\"", "monitor.channels.oncall.alerts.new_causes:"),
            ("quiet_hours = false", "quiet_hours = true", "monitor.channels.oncall.quiet_hours:"),
            ("from = \"Leadline <alerts@example.com>\"", "from = \"alerts at example\"", "monitor.channels.mail.from:"),
            ("to = [\"ops@example.com\"]", "to = [\"ops@example.com\", \"nobody\"]", "monitor.channels.mail.to[1]:"),
            ("to = [\"ops@example.com\"]", "", "monitor.channels.mail.to:"),
            ("smtp_host = \"smtp.example.com\"", "smtp_host = \"smtp://x\"", "monitor.channels.mail.smtp_host:"),
            ("smtp_host = \"smtp.example.com\"", "smtp_host = \"s\"\ntls = \"ssl\"", "monitor.channels.mail.tls:"),
            ("username_env = \"SMTP_USER\"", "", "monitor.channels.mail.username_env:"),
            ("url_env = \"HOOK_URL\"", "", "monitor.channels.hook.url_env:"),
            ("start = \"20:00\"", "start = \"8pm\"", "monitor.channels.hook.quiet_hours.start:"),
            ("public_url = \"https://leads.example.com\"", "public_url = \"leads\"", "monitor.public_url:"),
        ] {
            let e = with(from, to);
            assert!(e.starts_with(key), "{from} -> {to}: {e}");
        }
    }
}
