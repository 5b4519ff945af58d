//! The configuration's types: what each section of the file is read into, its defaults, and what it answers
//! (`TargetConfig::strategy`, `MonitorConfig::policy`, …). Pure data: the checks are in `validation.rs`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::*;
use crate::model::AlertKind;

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
