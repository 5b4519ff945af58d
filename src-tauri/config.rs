//! Leadline's configuration: one TOML file, secrets read from environment variables.
//!
//! Every key is documented in `docs/configuration.md`. Loading validates the whole file and fails with a
//! message that names the offending key (`targets.crm.backoff.base_ms: must be greater than 0`), so a bad
//! config stops the process at start instead of misbehaving later.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::delivery::classify::ErrorClass;

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
    /// Secrets given in code rather than the environment (the demo and tests): variable name → value.
    /// Never read from the file.
    #[serde(skip)]
    pub inline_secrets: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address the ingest server binds to.
    pub listen: SocketAddr,
    /// Largest accepted webhook body, in bytes; larger bodies get 413.
    pub max_body_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self { listen: "127.0.0.1:8787".parse().expect("valid default address"), max_body_bytes: 1024 * 1024 }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite:///absolute/path.db` or a plain file path. Default: `leadline.db` in the platform data folder.
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
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self { oldest_pending_alert_seconds: 900 }
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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// Request URL; `{external_id}` is replaced by the job's external id (required for `upsert`).
    pub url: String,
    /// HTTP method; default POST (PUT for `upsert`).
    pub method: Option<String>,
    pub strategy: Strategy,
    /// `search_then_create` (required) and ambiguous look-ups (optional for other strategies):
    /// a GET URL with `{external_id}`; 200 with a record means found, 404 or an empty list means not found.
    pub search_url: Option<String>,
    /// JSON pointer to the CRM's record id in a create/upsert/search answer.
    #[serde(default = "default_id_pointer")]
    pub id_pointer: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub auth: Option<AuthConfig>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Jobs delivered to this target at the same time (per worker process).
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    #[serde(default)]
    pub backoff: BackoffConfig,
    #[serde(default)]
    pub breaker: BreakerConfig,
    #[serde(default)]
    pub classify: ClassifyConfig,
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
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks everything serde cannot: references between sections, ranges, required combinations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.server.max_body_bytes == 0 {
            return Err(invalid("server.max_body_bytes", "must be greater than 0"));
        }
        let w = &self.worker;
        if w.batch_size == 0 {
            return Err(invalid("worker.batch_size", "must be greater than 0"));
        }
        if w.lease_seconds == 0 {
            return Err(invalid("worker.lease_seconds", "must be greater than 0"));
        }
        if self.monitor.oldest_pending_alert_seconds == 0 {
            return Err(invalid("monitor.oldest_pending_alert_seconds", "must be greater than 0"));
        }
        for (name, source) in &self.sources {
            let key = format!("sources.{name}");
            check_name(&key, name)?;
            if source.route.is_empty() {
                return Err(invalid(format!("{key}.route"), "must name at least one target"));
            }
            for target in &source.route {
                if !self.targets.contains_key(target) {
                    return Err(invalid(
                        format!("{key}.route"),
                        format!("names target `{target}`, which is not defined under [targets]"),
                    ));
                }
            }
            if source.id_field.is_empty() {
                return Err(invalid(format!("{key}.id_field"), "must not be empty"));
            }
            match source.kind {
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
            }
        }
        for (name, target) in &self.targets {
            let key = format!("targets.{name}");
            check_name(&key, name)?;
            target.validate(&key)?;
        }
        Ok(())
    }

    /// The SQLite database URL, defaulting to `leadline.db` in the platform data folder.
    pub fn database_url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.database.url {
            return Ok(url.clone());
        }
        let dir = default_data_dir()?;
        Ok(format!("sqlite://{}", dir.join("leadline.db").display()))
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

impl TargetConfig {
    fn validate(&self, key: &str) -> Result<(), ConfigError> {
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
            Strategy::Upsert if !self.url.contains("{external_id}") => {
                return Err(invalid(format!("{key}.url"), "must contain {external_id} for strategy = \"upsert\""));
            }
            Strategy::SearchThenCreate if self.search_url.is_none() => {
                return Err(invalid(format!("{key}.search_url"), "is required for strategy = \"search_then_create\""));
            }
            _ => {}
        }
        if let Some(search) = &self.search_url {
            if !search.contains("{external_id}") {
                return Err(invalid(format!("{key}.search_url"), "must contain {external_id}"));
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

    pub fn method(&self) -> reqwest::Method {
        match &self.method {
            Some(m) => reqwest::Method::from_bytes(m.as_bytes()).unwrap_or(reqwest::Method::POST),
            None if self.strategy == Strategy::Upsert => reqwest::Method::PUT,
            None => reqwest::Method::POST,
        }
    }
}

impl Config {
    /// Reads the secret named by environment variable `var` (for config key `key`), naming both when missing.
    pub fn secret(&self, key: &str, var: &str) -> Result<String, ConfigError> {
        if let Some(v) = self.inline_secrets.get(var) {
            return Ok(v.clone());
        }
        std::env::var(var).map_err(|_| {
            invalid(key, format!("environment variable {var} is not set (secrets are never stored in the config file)"))
        })
    }
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
        assert!(e.starts_with("sources.webform.app_secret_env:"), "{e}");
    }
}
