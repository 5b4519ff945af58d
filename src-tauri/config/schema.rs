//! The configuration's types: what each section of the file is read into, its defaults, and what it answers
//! (`TargetConfig::strategy`, `MonitorConfig::policy`, …). Pure data: the checks are in `validation.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::{invalid, ConfigError};
use crate::model::{AlertKind, ErrorClass};

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
    pub(super) fn parse(v: &str) -> Option<chrono::NaiveTime> {
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
}

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

/// One source: what every source has, and its kind's own settings ([`SourceSettings`]). Read from the file's flat
/// table (`kind = "meta"` beside that kind's keys), which stays as it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "SourceFile")]
pub struct SourceConfig {
    /// The kind and the settings only it has.
    pub settings: SourceSettings,
    /// The field holding the event id; a top-level name (`id`) or a JSON pointer (`/lead/id`).
    pub id_field: String,
    /// Target names, in order: each step runs only after the previous one was delivered.
    pub route: Vec<String>,
    /// Periodic comparison with the source's own list of leads; missing ones are ingested.
    pub reconcile: Option<ReconcileConfig>,
    /// Poll mode: Leadline asks the source for its new leads at an interval instead of waiting for webhooks.
    pub poll: Option<PollConfig>,
    /// A failing listing raises a `source_failing` alert once it has failed for this long.
    pub failing_alert_minutes: u64,
    /// Largest accepted body for this source (default `server.max_body_bytes`).
    pub max_body_bytes: Option<usize>,
    /// Refuse to start when this source has no signature check.
    pub require_signature: bool,
    /// The time zone of this source's leads (first-contact quiet hours).
    pub time_zone: Option<String>,
    /// Keys the file sets that this kind does not take: `Config::validate` (and, for `google_ads`, its own check)
    /// refuses the first, naming it.
    pub(crate) stray: Vec<&'static str>,
}

/// A source's kind with the settings only that kind has. Every feature reads the variant of the kind it serves;
/// `SourceConfig` holds what all kinds share.
#[derive(Debug, Clone)]
pub enum SourceSettings {
    /// Any JSON body, optionally signed (HMAC-SHA256 over the raw body).
    Generic(GenericSourceSettings),
    Meta(MetaSourceSettings),
    GoogleAds(GoogleAdsSourceSettings),
    CrmStage(CrmStageSettings),
}

/// `kind = "generic"` (the default).
#[derive(Debug, Clone, Default)]
pub struct GenericSourceSettings {
    /// HMAC-SHA256 signature over the raw body.
    pub signature: Option<SignatureConfig>,
}

/// `kind = "meta"`.
#[derive(Debug, Clone, Default)]
pub struct MetaSourceSettings {
    /// Variable holding the app secret that signs `X-Hub-Signature-256`.
    pub app_secret_env: Option<String>,
    /// Variable holding the verify token of the subscription handshake.
    pub verify_token_env: Option<String>,
    /// The Facebook page the lead forms belong to (leads found by reconciliation take it from here).
    pub page_id: Option<String>,
}

/// `kind = "google_ads"`.
#[derive(Debug, Clone, Default)]
pub struct GoogleAdsSourceSettings {
    /// Variable (or keyring entry) holding the key Google sends back in every lead's `google_key`.
    pub key_env: Option<String>,
    /// Deliver the leads Google marks `is_test` along the route like any other.
    pub deliver_test_leads: bool,
}

/// `kind = "crm_stage"`.
#[derive(Debug, Clone, Default)]
pub struct CrmStageSettings {
    /// The webhook's signature: HMAC-SHA256, or HubSpot's own v3.
    pub signature: Option<SignatureConfig>,
    /// Where the lead and its new stage are in the CRM's webhook body (the file's `stage_webhook`, or HubSpot's
    /// workflow body).
    pub stage_webhook: StageWebhookConfig,
}

impl SourceConfig {
    /// What the source receives (the file's `kind`).
    pub fn kind(&self) -> SourceKind {
        match &self.settings {
            SourceSettings::Generic(_) => SourceKind::Generic,
            SourceSettings::Meta(_) => SourceKind::Meta,
            SourceSettings::GoogleAds(_) => SourceKind::GoogleAds,
            SourceSettings::CrmStage(_) => SourceKind::CrmStage,
        }
    }

    /// The `signature` of a `generic` or `crm_stage` source.
    pub fn signature(&self) -> Option<&SignatureConfig> {
        match &self.settings {
            SourceSettings::Generic(g) => g.signature.as_ref(),
            SourceSettings::CrmStage(c) => c.signature.as_ref(),
            SourceSettings::Meta(_) | SourceSettings::GoogleAds(_) => None,
        }
    }

    /// A Meta source's page id.
    pub fn page_id(&self) -> Option<&str> {
        match &self.settings {
            SourceSettings::Meta(m) => m.page_id.as_deref(),
            _ => None,
        }
    }

    /// The kind's own keys that name a secret's variable (the signature's `secret_env`, Meta's app secret and
    /// verify token, Google's key), with the variable.
    pub fn secret_vars(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        if let Some(sig) = self.signature() {
            out.push(("signature.secret_env", sig.secret_env.as_str()));
        }
        match &self.settings {
            SourceSettings::Meta(m) => {
                out.extend(m.app_secret_env.as_deref().map(|v| ("app_secret_env", v)));
                out.extend(m.verify_token_env.as_deref().map(|v| ("verify_token_env", v)));
            }
            SourceSettings::GoogleAds(g) => out.extend(g.key_env.as_deref().map(|v| ("key_env", v))),
            SourceSettings::Generic(_) | SourceSettings::CrmStage(_) => {}
        }
        out
    }

    /// Whether the file set `key`, which this kind does not take.
    pub fn sets_stray(&self, key: &str) -> bool {
        self.stray.contains(&key)
    }

    /// The keys the file set that this kind does not take.
    pub fn stray_keys(&self) -> &[&'static str] {
        &self.stray
    }
}

impl From<SourceFile> for SourceConfig {
    /// Keeps each key of the kind in its settings; a key of another kind is listed in `stray`.
    fn from(f: SourceFile) -> SourceConfig {
        let kind = f.kind;
        let settings = match kind {
            SourceKind::Generic => SourceSettings::Generic(GenericSourceSettings { signature: f.signature.clone() }),
            SourceKind::Meta => SourceSettings::Meta(MetaSourceSettings {
                app_secret_env: f.app_secret_env.clone(),
                verify_token_env: f.verify_token_env.clone(),
                page_id: f.page_id.clone(),
            }),
            SourceKind::GoogleAds => SourceSettings::GoogleAds(GoogleAdsSourceSettings {
                key_env: f.key_env.clone(),
                deliver_test_leads: f.deliver_test_leads,
            }),
            SourceKind::CrmStage => SourceSettings::CrmStage(CrmStageSettings {
                signature: f.signature.clone(),
                stage_webhook: f.stage_webhook.clone().unwrap_or_default(),
            }),
        };
        let takes = |key: &str| match key {
            "signature" => matches!(kind, SourceKind::Generic | SourceKind::CrmStage),
            "app_secret_env" | "verify_token_env" | "page_id" => kind == SourceKind::Meta,
            "key_env" | "deliver_test_leads" => kind == SourceKind::GoogleAds,
            // stage_webhook
            _ => kind == SourceKind::CrmStage,
        };
        let stray = [
            ("signature", f.signature.is_some()),
            ("app_secret_env", f.app_secret_env.is_some()),
            ("verify_token_env", f.verify_token_env.is_some()),
            ("page_id", f.page_id.is_some()),
            ("key_env", f.key_env.is_some()),
            ("deliver_test_leads", f.deliver_test_leads),
            ("stage_webhook", f.stage_webhook.is_some()),
        ]
        .into_iter()
        .filter(|&(key, set)| set && !takes(key))
        .map(|(key, _)| key)
        .collect();
        SourceConfig {
            settings,
            id_field: f.id_field,
            route: f.route,
            reconcile: f.reconcile,
            poll: f.poll,
            failing_alert_minutes: f.failing_alert_minutes,
            max_body_bytes: f.max_body_bytes,
            require_signature: f.require_signature,
            time_zone: f.time_zone,
            stray,
        }
    }
}

/// A source as the file writes it: every kind's keys side by side. Read into this, then into [`SourceConfig`],
/// whose [`SourceSettings`] keeps only the keys of its kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceFile {
    #[serde(default)]
    kind: SourceKind,
    /// Generic sources: the field holding the event id; a top-level name (`id`) or a JSON pointer (`/lead/id`).
    #[serde(default = "default_id_field")]
    id_field: String,
    /// Target names, in order: each step runs only after the previous one was delivered.
    route: Vec<String>,
    /// Generic sources: optional HMAC-SHA256 signature over the raw body.
    signature: Option<SignatureConfig>,
    /// Meta sources: environment variable holding the app secret that signs `X-Hub-Signature-256`.
    app_secret_env: Option<String>,
    /// Meta sources: environment variable holding the verify token of the subscription handshake.
    verify_token_env: Option<String>,
    /// Periodic comparison with the source's own list of leads; missing ones are ingested.
    reconcile: Option<ReconcileConfig>,
    /// Poll mode: Leadline asks the source for its new leads at an interval instead of waiting for webhooks (a
    /// laptop has no public address Meta could send a webhook to). Excludes `reconcile`: polling is the listing.
    poll: Option<PollConfig>,
    /// Meta sources: the Facebook page the lead forms belong to. Graph's lead object does not name its page, so
    /// leads found by reconciliation take it from here (webhook leads carry it themselves).
    page_id: Option<String>,
    /// A failing reconciliation (source unreachable, throttled) raises a `source_failing` alert once it has
    /// failed for this long; a refused token raises a `credentials` alert at once.
    #[serde(default = "default_source_failing_minutes")]
    failing_alert_minutes: u64,
    /// Largest accepted body for this source (default `server.max_body_bytes`, which it may not exceed).
    max_body_bytes: Option<usize>,
    /// Refuse to start when this source has no signature check (a generic source without `signature`).
    #[serde(default)]
    require_signature: bool,
    /// `google_ads` sources: environment variable (or keyring entry) holding the key entered beside the webhook
    /// URL in Google Ads; Google sends it back in every lead's `google_key`.
    key_env: Option<String>,
    /// `google_ads` sources: deliver the leads Google marks `is_test` (the form editor's "send test data") along
    /// the route like any other. By default they are stored and shown as test leads and reach no target.
    #[serde(default)]
    deliver_test_leads: bool,
    /// `crm_stage` sources: where the lead and its new stage are in the CRM's webhook body.
    stage_webhook: Option<StageWebhookConfig>,
    /// The time zone of this source's leads (an IANA name, `Europe/Madrid`): first-contact steps keep their
    /// quiet hours in it. Without it, the zone comes from the step's `first_contact.time_zone`, else from the
    /// phone number's country code.
    time_zone: Option<String>,
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
        match self.kind() {
            SourceKind::Generic | SourceKind::CrmStage => self.signature().is_some(),
            SourceKind::Meta | SourceKind::GoogleAds => true,
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
    /// How requests are signed: a shared secret's HMAC of the body in `header` (the default), or HubSpot's own
    /// request signature v3 (`crm_stage` sources only).
    #[serde(default)]
    pub scheme: SignatureScheme,
    /// Header carrying the hex HMAC-SHA256 of the raw body (an optional `sha256=` prefix is accepted).
    #[serde(default = "default_signature_header")]
    pub header: String,
    /// Environment variable holding the shared secret (`hubspot_v3`: the HubSpot app's client secret).
    pub secret_env: String,
    /// `hubspot_v3`: the URL HubSpot calls, exactly as entered in HubSpot; the signature covers it.
    pub url: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SignatureScheme {
    /// Hex HMAC-SHA256 of the raw body with a shared secret, in the configured header.
    #[default]
    HmacSha256,
    /// HubSpot's `X-HubSpot-Signature-v3` with `X-HubSpot-Request-Timestamp` (features/ingest/hubspot_v3.rs).
    HubspotV3,
}

pub fn default_signature_header() -> String {
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
    /// The kind as the file writes it (`google_ads_conversions`).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Http => "http",
            TargetKind::MetaLead => "meta_lead",
            TargetKind::Pipedrive => "pipedrive",
            TargetKind::Salesforce => "salesforce",
            TargetKind::Hubspot => "hubspot",
            TargetKind::Whatsapp => "whatsapp",
            TargetKind::Sms => "sms",
            TargetKind::MetaConversions => "meta_conversions",
            TargetKind::GoogleAdsConversions => "google_ads_conversions",
        }
    }

    /// A first-contact step: a message to the lead, which no provider de-duplicates, so Leadline never sends it
    /// twice (`targets::contact`).
    pub fn is_first_contact(self) -> bool {
        matches!(self, TargetKind::Whatsapp | TargetKind::Sms)
    }
}

/// One target: what every target has, and its kind's own settings ([`TargetSettings`]). Read from the file's flat
/// table (`kind = "salesforce"` beside the keys of that kind), which stays as it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "TargetFile")]
pub struct TargetConfig {
    /// The kind and the settings only it has.
    pub settings: TargetSettings,
    /// Request URL; `{external_id}` is replaced by the job's external id (required for `upsert`).
    /// `meta_lead`: the Graph API address (`https://graph.facebook.com`).
    pub url: String,
    /// HTTP method; default POST (PUT for `upsert`).
    pub method: Option<String>,
    /// Required for `http`; every other kind has its own (`TargetConfig::strategy`).
    pub strategy: Option<Strategy>,
    /// The vendor's API version, the first path segment of its requests (Graph, Salesforce, Google Ads); for
    /// Salesforce see [`TargetConfig::salesforce_api_version`].
    pub api_version: String,
    /// How a lead becomes the CRM's record. An `http` target with a mapping receives the mapped record as its
    /// body instead of the envelope.
    pub mapping: Vec<crate::model::mapping::FieldRule>,
    /// A GET URL with `{external_id}` for `search_then_create` and ambiguous look-ups.
    pub search_url: Option<String>,
    /// The web address of a record in the CRM's own screens, with `{crm_id}`.
    pub record_url: Option<String>,
    /// JSON pointer to the CRM's record id in a create/upsert/search answer.
    pub id_pointer: String,
    pub headers: BTreeMap<String, String>,
    pub auth: Option<AuthConfig>,
    pub timeout_ms: u64,
    /// Jobs delivered to this target at the same time (per worker process).
    pub concurrency: u32,
    /// The target's declared request budget (`"190/10s"`).
    pub rate: Option<crate::model::Rate>,
    pub backoff: BackoffConfig,
    pub breaker: BreakerConfig,
    pub classify: ClassifyConfig,
    /// A replayed lead older than this runs `fallback` instead.
    pub max_lead_age_minutes: Option<u64>,
    pub fallback: Option<String>,
    pub auto_replay: bool,
    pub on_failure: Option<String>,
    /// First-contact steps (`whatsapp`, `sms`): the wait for an unconfirmed send, quiet hours, the time zone.
    pub first_contact: FirstContactConfig,
    /// Opt-in data fallback: fields a lead may be written without.
    pub missing_data: Option<MissingDataConfig>,
    /// Keys the file sets that this kind does not take: `Config::validate` refuses the first, naming it.
    pub(crate) stray: Vec<&'static str>,
}

/// A target's kind with the settings only that kind has (the keys of the file's table that name a kind in their
/// documentation). Every connector reads its own variant; `TargetConfig` holds what all kinds share. A setting
/// left out is `None` here: the kind's own check (`features::targets::check`) says which are required.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSettings {
    /// Any JSON endpoint: everything it has is shared.
    Http,
    MetaLead(MetaLeadSettings),
    Pipedrive(PipedriveSettings),
    Salesforce(SalesforceSettings),
    Hubspot(HubspotSettings),
    Whatsapp(WhatsappSettings),
    /// The file's `sms` table.
    Sms(Option<SmsConfig>),
    MetaConversions(MetaConversionsSettings),
    GoogleAdsConversions(GoogleAdsSettings),
}

/// `kind = "meta_lead"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaLeadSettings {
    /// Variable holding a page access token with the `leads_retrieval` permission.
    pub access_token_env: Option<String>,
}

/// `kind = "whatsapp"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WhatsappSettings {
    /// Variable holding the system user's access token.
    pub access_token_env: Option<String>,
    /// The file's `whatsapp` table: the sender's phone number id, the template and its parameters.
    pub message: Option<WhatsappConfig>,
}

/// `kind = "pipedrive"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PipedriveSettings {
    /// Variable holding the API token (sent in the `x-api-token` header).
    pub api_token_env: Option<String>,
    /// Key of the custom person field holding Leadline's external id (the exact-match search).
    pub person_field_key: Option<String>,
}

/// The variables of an OAuth 2.0 refresh-token flow (Salesforce, Google Ads): the app's client id and secret and
/// the refresh token of the user Leadline acts as.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthVars {
    pub client_id_env: Option<String>,
    pub client_secret_env: Option<String>,
    pub refresh_token_env: Option<String>,
}

/// `kind = "salesforce"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SalesforceSettings {
    /// The sObject leads are upserted into (default `Lead`, [`TargetConfig::salesforce_object`]).
    pub object: Option<String>,
    /// The external id field the lead's external id is written to and matched by (required).
    pub external_id_field: Option<String>,
    pub oauth: OAuthVars,
}

/// `kind = "hubspot"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HubspotSettings {
    /// The CRM object type written (default `contacts`, [`TargetConfig::hubspot_object`]).
    pub object: Option<String>,
    /// The unique property records are upserted by (`email`, or a custom unique property such as `leadline_id`).
    pub id_property: Option<String>,
}

/// What both conversion kinds have: the CRM's stage names and what the platform gets for each, and its window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConversionSettings {
    /// Stage → Meta's `event_name` or Google's conversion action. A stage not listed is not sent.
    pub stages: BTreeMap<String, String>,
    /// The platform's window in days; an older event is not sent, the step ends as reported.
    pub window_days: Option<u32>,
}

/// `kind = "meta_conversions"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaConversionsSettings {
    /// The dataset (pixel) id the events go to.
    pub dataset_id: Option<String>,
    /// Variable holding the access token.
    pub access_token_env: Option<String>,
    /// The CRM's name, sent as `custom_data.lead_event_source`.
    pub lead_event_source: Option<String>,
    pub conversions: ConversionSettings,
}

/// `kind = "google_ads_conversions"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GoogleAdsSettings {
    /// The Google Ads account (customer id, digits only) the conversions belong to.
    pub customer_id: Option<String>,
    /// The manager account reached through (`login-customer-id` header), if any.
    pub login_customer_id: Option<String>,
    /// Variable holding a developer token, sent only when set.
    pub developer_token_env: Option<String>,
    /// The OAuth 2.0 token endpoint (default `https://oauth2.googleapis.com/token`).
    pub token_url: Option<String>,
    /// ISO 4217 currency of conversion values (default `EUR`).
    pub currency: Option<String>,
    pub oauth: OAuthVars,
    pub conversions: ConversionSettings,
}

impl TargetSettings {
    /// The kind's own keys that name a credential's variable (`access_token_env`, `api_token_env`, the OAuth
    /// variables), with the variable: those the settings page can store a value for.
    pub fn credential_vars(&self) -> Vec<(&'static str, &str)> {
        fn oauth(o: &OAuthVars) -> [(&'static str, Option<&str>); 3] {
            [
                ("client_id_env", o.client_id_env.as_deref()),
                ("client_secret_env", o.client_secret_env.as_deref()),
                ("refresh_token_env", o.refresh_token_env.as_deref()),
            ]
        }
        let set: Vec<(&'static str, Option<&str>)> = match self {
            TargetSettings::MetaLead(m) => vec![("access_token_env", m.access_token_env.as_deref())],
            TargetSettings::Whatsapp(w) => vec![("access_token_env", w.access_token_env.as_deref())],
            TargetSettings::MetaConversions(m) => vec![("access_token_env", m.access_token_env.as_deref())],
            TargetSettings::Pipedrive(p) => vec![("api_token_env", p.api_token_env.as_deref())],
            TargetSettings::Salesforce(s) => oauth(&s.oauth).to_vec(),
            TargetSettings::GoogleAdsConversions(g) => oauth(&g.oauth).to_vec(),
            TargetSettings::Http | TargetSettings::Hubspot(_) | TargetSettings::Sms(_) => Vec::new(),
        };
        set.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect()
    }

    pub fn kind(&self) -> TargetKind {
        match self {
            TargetSettings::Http => TargetKind::Http,
            TargetSettings::MetaLead(_) => TargetKind::MetaLead,
            TargetSettings::Pipedrive(_) => TargetKind::Pipedrive,
            TargetSettings::Salesforce(_) => TargetKind::Salesforce,
            TargetSettings::Hubspot(_) => TargetKind::Hubspot,
            TargetSettings::Whatsapp(_) => TargetKind::Whatsapp,
            TargetSettings::Sms(_) => TargetKind::Sms,
            TargetSettings::MetaConversions(_) => TargetKind::MetaConversions,
            TargetSettings::GoogleAdsConversions(_) => TargetKind::GoogleAdsConversions,
        }
    }
}

impl From<TargetFile> for TargetConfig {
    /// Keeps each key of the kind in its settings; a key of another kind is listed in `stray`.
    fn from(f: TargetFile) -> TargetConfig {
        let mut stray = Vec::new();
        let oauth = |f: &TargetFile| OAuthVars {
            client_id_env: f.client_id_env.clone(),
            client_secret_env: f.client_secret_env.clone(),
            refresh_token_env: f.refresh_token_env.clone(),
        };
        let conversions = |f: &TargetFile| ConversionSettings { stages: f.stages.clone(), window_days: f.window_days };
        let settings = match f.kind {
            TargetKind::Http => TargetSettings::Http,
            TargetKind::MetaLead => {
                TargetSettings::MetaLead(MetaLeadSettings { access_token_env: f.access_token_env.clone() })
            }
            TargetKind::Pipedrive => TargetSettings::Pipedrive(PipedriveSettings {
                api_token_env: f.api_token_env.clone(),
                person_field_key: f.person_field_key.clone(),
            }),
            TargetKind::Salesforce => TargetSettings::Salesforce(SalesforceSettings {
                object: f.object.clone(),
                external_id_field: f.external_id_field.clone(),
                oauth: oauth(&f),
            }),
            TargetKind::Hubspot => TargetSettings::Hubspot(HubspotSettings {
                object: f.object.clone(),
                id_property: f.id_property.clone(),
            }),
            TargetKind::Whatsapp => TargetSettings::Whatsapp(WhatsappSettings {
                access_token_env: f.access_token_env.clone(),
                message: f.whatsapp.clone(),
            }),
            TargetKind::Sms => TargetSettings::Sms(f.sms.clone()),
            TargetKind::MetaConversions => TargetSettings::MetaConversions(MetaConversionsSettings {
                dataset_id: f.dataset_id.clone(),
                access_token_env: f.access_token_env.clone(),
                lead_event_source: f.lead_event_source.clone(),
                conversions: conversions(&f),
            }),
            TargetKind::GoogleAdsConversions => TargetSettings::GoogleAdsConversions(GoogleAdsSettings {
                customer_id: f.customer_id.clone(),
                login_customer_id: f.login_customer_id.clone(),
                developer_token_env: f.developer_token_env.clone(),
                token_url: f.token_url.clone(),
                currency: f.currency.clone(),
                oauth: oauth(&f),
                conversions: conversions(&f),
            }),
        };
        // Which of the kind-specific keys this kind takes; any other one set is stray.
        let kind = f.kind;
        let takes = |key: &str| -> bool {
            use TargetKind::*;
            match key {
                "access_token_env" => matches!(kind, MetaLead | Whatsapp | MetaConversions),
                "api_token_env" | "person_field_key" => kind == Pipedrive,
                "object" => matches!(kind, Salesforce | Hubspot),
                "external_id_field" => kind == Salesforce,
                "client_id_env" | "client_secret_env" | "refresh_token_env" => {
                    matches!(kind, Salesforce | GoogleAdsConversions)
                }
                "id_property" => kind == Hubspot,
                "whatsapp" => kind == Whatsapp,
                "sms" => kind == Sms,
                "dataset_id" | "lead_event_source" => kind == MetaConversions,
                "window_days" | "stages" => matches!(kind, MetaConversions | GoogleAdsConversions),
                // customer_id, login_customer_id, developer_token_env, token_url, currency
                _ => kind == GoogleAdsConversions,
            }
        };
        for (key, set) in [
            ("access_token_env", f.access_token_env.is_some()),
            ("api_token_env", f.api_token_env.is_some()),
            ("person_field_key", f.person_field_key.is_some()),
            ("object", f.object.is_some()),
            ("external_id_field", f.external_id_field.is_some()),
            ("client_id_env", f.client_id_env.is_some()),
            ("client_secret_env", f.client_secret_env.is_some()),
            ("refresh_token_env", f.refresh_token_env.is_some()),
            ("id_property", f.id_property.is_some()),
            ("whatsapp", f.whatsapp.is_some()),
            ("sms", f.sms.is_some()),
            ("stages", !f.stages.is_empty()),
            ("window_days", f.window_days.is_some()),
            ("dataset_id", f.dataset_id.is_some()),
            ("lead_event_source", f.lead_event_source.is_some()),
            ("customer_id", f.customer_id.is_some()),
            ("login_customer_id", f.login_customer_id.is_some()),
            ("developer_token_env", f.developer_token_env.is_some()),
            ("token_url", f.token_url.is_some()),
            ("currency", f.currency.is_some()),
        ] {
            if set && !takes(key) {
                stray.push(key);
            }
        }
        TargetConfig {
            settings,
            url: f.url,
            method: f.method,
            strategy: f.strategy,
            api_version: f.api_version,
            mapping: f.mapping,
            search_url: f.search_url,
            record_url: f.record_url,
            id_pointer: f.id_pointer,
            headers: f.headers,
            auth: f.auth,
            timeout_ms: f.timeout_ms,
            concurrency: f.concurrency,
            rate: f.rate,
            backoff: f.backoff,
            breaker: f.breaker,
            classify: f.classify,
            max_lead_age_minutes: f.max_lead_age_minutes,
            fallback: f.fallback,
            auto_replay: f.auto_replay,
            on_failure: f.on_failure,
            first_contact: f.first_contact,
            missing_data: f.missing_data,
            stray,
        }
    }
}

/// A target as the file writes it: every kind's keys side by side (the TOML format). Read into this, then into
/// [`TargetConfig`], whose [`TargetSettings`] keeps only the keys of its kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFile {
    #[serde(default)]
    kind: TargetKind,
    /// Request URL; `{external_id}` is replaced by the job's external id (required for `upsert`).
    /// `meta_lead`: the Graph API address (`https://graph.facebook.com`).
    url: String,
    /// HTTP method; default POST (PUT for `upsert`).
    method: Option<String>,
    /// Required for `http`; a `meta_lead` step only reads, which is always safe to repeat.
    strategy: Option<Strategy>,
    /// `meta_lead`: the Graph API version, the first path segment of every request. `salesforce`: the REST API
    /// version (`v60.0`); left out, it is [`SALESFORCE_API_VERSION`] (see [`TargetConfig::salesforce_api_version`]).
    #[serde(default = "default_graph_version")]
    api_version: String,
    /// `meta_lead`: environment variable holding a page access token with the `leads_retrieval` permission.
    access_token_env: Option<String>,
    /// `pipedrive`: environment variable holding the API token (sent in the `x-api-token` header).
    api_token_env: Option<String>,
    /// `pipedrive`: key of the custom person field holding Leadline's external id (the exact-match search).
    person_field_key: Option<String>,
    /// `salesforce`: the sObject leads are upserted into (default `Lead`); `hubspot`: the CRM object type
    /// written (default `contacts`).
    object: Option<String>,
    /// `salesforce`: the external id field the lead's external id is written to and matched by (required).
    external_id_field: Option<String>,
    /// `salesforce`: environment variables holding the connected app's consumer key and secret and the
    /// refresh token of the user Leadline connects as (all required).
    client_id_env: Option<String>,
    client_secret_env: Option<String>,
    refresh_token_env: Option<String>,
    /// `hubspot`: the unique property records are upserted by (`email`, or a custom unique property such as
    /// `leadline_id`). Its value is the mapped record's value for it, else the lead's external id.
    id_property: Option<String>,
    /// How a lead becomes the CRM's record (docs/configuration.md, "Field mapping"). An `http` target with a
    /// mapping receives the mapped record as its body instead of the envelope.
    #[serde(default)]
    mapping: Vec<crate::model::mapping::FieldRule>,
    /// `search_then_create` (required) and ambiguous look-ups (optional for other strategies):
    /// a GET URL with `{external_id}`; 200 with a record means found, 404 or an empty list means not found.
    search_url: Option<String>,
    /// The web address of a record in the CRM's own screens, with `{crm_id}` (e.g.
    /// `https://example.pipedrive.com/person/{crm_id}`): the lead lookup links each delivered lead to it.
    record_url: Option<String>,
    /// JSON pointer to the CRM's record id in a create/upsert/search answer.
    #[serde(default = "default_id_pointer")]
    id_pointer: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    auth: Option<AuthConfig>,
    #[serde(default = "default_timeout_ms")]
    timeout_ms: u64,
    /// Jobs delivered to this target at the same time (per worker process). Lowered by itself while the target
    /// answers 429, and raised back slowly.
    #[serde(default = "default_concurrency")]
    concurrency: u32,
    /// The target's declared request budget (`"190/10s"`, `"100/s"`, `"250000/1d"`): no window of that length
    /// ever carries more requests. Leadline also learns the real limit from the target's rate-limit headers.
    rate: Option<crate::model::Rate>,
    #[serde(default)]
    backoff: BackoffConfig,
    #[serde(default)]
    breaker: BreakerConfig,
    #[serde(default)]
    classify: ClassifyConfig,
    /// Time-sensitive steps: a replayed lead older than this runs `fallback` instead (a welcome SMS an hour
    /// late is worse than none; a call task is not).
    max_lead_age_minutes: Option<u64>,
    /// The target run instead of this one for leads older than `max_lead_age_minutes` on replay.
    fallback: Option<String>,
    /// Replay this target's dead letters by itself once it is healthy again: those that died of a setup problem
    /// (`permanent_config`) or while it was down or limiting (`transient`, `rate_limited`), each at most once,
    /// staged and paced like a manual replay.
    #[serde(default)]
    auto_replay: bool,
    /// The target a lead's step goes to when this one fails for the lead's data or its number (`whatsapp` →
    /// `sms` when the number is not on WhatsApp): tried at once, with fresh attempts.
    #[serde(default)]
    on_failure: Option<String>,
    /// `kind = "whatsapp"`: the sender's phone number id, the template and its parameters.
    #[serde(default)]
    whatsapp: Option<WhatsappConfig>,
    /// `kind = "sms"`: the Twilio account, sender and message body.
    #[serde(default)]
    sms: Option<SmsConfig>,
    /// First-contact steps (`whatsapp`, `sms`): the wait for an unconfirmed send, quiet hours, the default
    /// country of national numbers.
    #[serde(default)]
    first_contact: FirstContactConfig,
    /// Opt-in data fallback (docs/configuration.md, "Missing data"): a lead whose only refused fields are on
    /// `drop` goes again at once without them, tagged, instead of becoming a dead letter.
    #[serde(default)]
    missing_data: Option<MissingDataConfig>,
    /// Conversion steps (`meta_conversions`, `google_ads_conversions`): the CRM's stage names and what each
    /// platform gets for them — Meta's `event_name`, Google's conversion action (`customers/1/conversionActions/2`).
    /// A stage not listed is not sent to this target. `lead` is the stage of a lead reaching this step along its
    /// own source's route (right after the CRM step).
    #[serde(default)]
    stages: BTreeMap<String, String>,
    /// Conversion steps: the platform's window in days (Meta: 7 from the event; Google: 90 from the click, or the
    /// conversion action's own, shorter window). An older event is not sent: the step ends as reported.
    window_days: Option<u32>,
    /// `meta_conversions`: the dataset (pixel) id the events go to.
    dataset_id: Option<String>,
    /// `meta_conversions`: the CRM's name, sent as `custom_data.lead_event_source` (default: the name a stage
    /// webhook's source gives, else "Leadline").
    lead_event_source: Option<String>,
    /// `google_ads_conversions`: the Google Ads account (customer id, digits only) the conversions belong to.
    customer_id: Option<String>,
    /// `google_ads_conversions`: the manager account reached through (`login-customer-id` header), if any.
    login_customer_id: Option<String>,
    /// `google_ads_conversions`: variable holding a developer token, sent only when set (Google retired them on
    /// 2026-09-09; the header is ignored, and a later API version refuses it).
    developer_token_env: Option<String>,
    /// `google_ads_conversions`: the OAuth 2.0 token endpoint (default `https://oauth2.googleapis.com/token`).
    token_url: Option<String>,
    /// `google_ads_conversions`: ISO 4217 currency of conversion values (default `EUR`).
    currency: Option<String>,
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

impl TargetConfig {
    /// What the target speaks (the file's `kind`).
    pub fn kind(&self) -> TargetKind {
        self.settings.kind()
    }

    /// A conversion step's stages and window (`meta_conversions`, `google_ads_conversions`).
    pub fn conversions(&self) -> Option<&ConversionSettings> {
        match &self.settings {
            TargetSettings::MetaConversions(m) => Some(&m.conversions),
            TargetSettings::GoogleAdsConversions(g) => Some(&g.conversions),
            _ => None,
        }
    }

    /// The idempotency strategy: as configured for `http`; a `meta_lead` step only reads (an upsert in effect:
    /// repeating it changes nothing).
    /// Whether sending a lead again updates the record it created before, so a changed lead (a new revision) can
    /// go again once delivered: an upsert (PUT/PATCH by external id, Salesforce, HubSpot). A keyed POST, a plain
    /// POST or search-then-create (Pipedrive) is a create: sent again, it would make a second record. A
    /// `meta_lead` step only reads.
    pub fn updates_records(&self) -> bool {
        self.kind() != TargetKind::MetaLead && self.strategy() == Strategy::Upsert
    }

    /// How old a lead may be for this step to run rather than its `fallback`: `max_lead_age_minutes`, or for a
    /// first-contact step [`FIRST_CONTACT_MAX_AGE_MINUTES`] when it names a fallback without a limit.
    pub fn max_lead_age(&self) -> Option<u64> {
        self.max_lead_age_minutes.or((self.kind().is_first_contact()).then_some(FIRST_CONTACT_MAX_AGE_MINUTES))
    }

    /// The tag a record sent without some fields carries (`missing_data.tag`), if any.
    pub fn missing_data_tag(&self) -> Option<crate::model::mapping::Tag<'_>> {
        let tag = self.missing_data.as_ref()?.tag.as_ref()?;
        Some(crate::model::mapping::Tag { property: &tag.property, value: &tag.value })
    }

    /// The CRM field a target finds a lead's record by (HubSpot's `id_property`, Salesforce's
    /// `external_id_field`): a lead refused for it is never written without it.
    pub fn upsert_key_field(&self) -> Option<&str> {
        match &self.settings {
            TargetSettings::Hubspot(h) => h.id_property.as_deref(),
            TargetSettings::Salesforce(s) => s.external_id_field.as_deref(),
            _ => None,
        }
    }

    pub fn strategy(&self) -> Strategy {
        match self.kind() {
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
        match &self.settings {
            TargetSettings::Salesforce(s) => s.object.as_deref().unwrap_or("Lead"),
            _ => "Lead",
        }
    }

    /// `hubspot`: the object type written (`contacts` unless configured).
    pub fn hubspot_object(&self) -> &str {
        match &self.settings {
            TargetSettings::Hubspot(h) => h.object.as_deref().unwrap_or("contacts"),
            _ => "contacts",
        }
    }

    /// The base of Graph API requests of a `meta_lead` step: address and version.
    pub fn graph_base(&self) -> String {
        format!("{}/{}", self.url.trim_end_matches('/'), self.api_version.trim_matches('/'))
    }

    pub fn method(&self) -> reqwest::Method {
        match &self.method {
            Some(m) => reqwest::Method::from_bytes(m.as_bytes()).unwrap_or(reqwest::Method::POST),
            None if self.strategy() == Strategy::Upsert => reqwest::Method::PUT,
            None => reqwest::Method::POST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::examples::{parse, CHANNELS, OK};
    use super::*;

    #[test]
    fn minimal_config_parses_with_defaults() {
        let c = parse(OK).unwrap();
        assert_eq!(c.sources["webform"].id_field, "id");
        assert_eq!(c.targets["crm"].method(), reqwest::Method::POST);
        assert_eq!(c.targets["crm"].backoff.max_attempts, 12);
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
        let mail_server = mail.email().expect("an e-mail channel");
        assert_eq!((mail_server.smtp_tls(), mail_server.smtp_port()), (Some(SmtpTls::StartTls), 587));
        assert_eq!(mail.digest_interval_minutes(m), 60);
    }
}
