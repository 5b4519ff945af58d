//! Settings without editing TOML by hand: the sources, targets (with their field mapping), alert policies and
//! quiet hours of the configuration in force, edited in the app, checked with exactly the checks
//! `leadline check-config` makes, written back into the user's file (comments and layout kept, see [`edit`]) and
//! put in force while Leadline runs ([`apply`]).
//!
//! Why in force without a restart, and how: the configuration is shared by every part of the running app
//! (`runtime::SharedConfig`), so a new one is read by the monitor, the API and the replay runner at their next
//! look; the two parts that set themselves up from it are rebuilt in place — the worker's targets (a target
//! whose section did not change keeps its breaker and learned limits; a lead already being sent finishes where it
//! was sent) and the ingest's sources (their secrets read again) — and reconciliation reads its schedule again.
//! Nothing stops: the HTTP server keeps its connections, the UI stays connected, no lead waits for a restart.
//! What is set at start only — `[server]`, `[database]`, `[worker]` — is not edited here, and keeps what it was
//! started with until the next start.
//!
//! Secrets never go into the file: a field such as `access_token_env = "HUBSPOT_TOKEN"` names a variable, and
//! its value is looked up (`Config::secret`) in the secrets file, then the environment, then the OS keyring,
//! where the settings page stores what a person enters (`platform::keyring`).

pub mod edit;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::{AuthConfig, Config, ConfigError, NotifyPolicy, SecretSource};
use crate::features::app::App;
use crate::model::AlertKind;

pub use edit::Change;

/// The editable view of the configuration in force. Secrets appear as the variable a field names and where its
/// value is found — never the value.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct SettingsView {
    /// The file saved settings are written to.
    pub file: Option<String>,
    /// Why settings cannot be saved here (the demo's built-in configuration); `None`: they can.
    pub read_only: Option<String>,
    pub sources: Vec<SourceSettings>,
    pub targets: Vec<TargetSettings>,
    /// One per alert kind, the configured policy or the default.
    pub alerts: Vec<AlertSettings>,
    pub quiet_hours: Option<QuietHours>,
    pub quiet_hours_hold_critical: bool,
    /// The IANA time zone quiet hours are read in.
    pub timezone: String,
    /// Whether secrets entered here can be kept (a Secret Service is reachable), and why not.
    pub keyring: KeyringStatus,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct SourceSettings {
    pub name: String,
    /// `generic` or `meta`.
    pub kind: String,
    pub id_field: String,
    pub route: Vec<String>,
    pub require_signature: bool,
    pub secrets: Vec<SecretField>,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct TargetSettings {
    pub name: String,
    /// `http`, `hubspot`, `salesforce`, `pipedrive` or `meta_lead`.
    pub kind: String,
    pub url: String,
    /// `http` targets: `idempotency_key`, `upsert`, `search_then_create` or `none`.
    pub strategy: Option<String>,
    /// The field mapping rules as in the file (`to`, `from`, `constant`, `transform`, `default`, `required`).
    #[ts(type = "Array<Record<string, unknown>>")]
    pub mapping: Vec<serde_json::Value>,
    pub secrets: Vec<SecretField>,
}

/// A field that names the variable holding a secret.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct SecretField {
    /// The field's path in the file (`targets.crm.auth.bearer_env`).
    pub path: String,
    /// The variable it names (`HUBSPOT_TOKEN`).
    pub variable: String,
    /// Where its value is found now; `None`: nowhere, the target or source cannot start.
    pub found: Option<SecretSource>,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct AlertSettings {
    /// The alert kind (`silence`, `breaker_open`…).
    pub kind: String,
    /// `immediate`, `digest` or `none`.
    pub notify: String,
    pub renotify_minutes: Option<u64>,
    /// Whether the file sets it (else it is the default).
    pub configured: bool,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct QuietHours {
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct KeyringStatus {
    pub available: bool,
    /// Why not, and what to do instead.
    pub message: Option<String>,
}

/// A refused value, named by its path in the file.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct FieldError {
    /// The key (`targets.crm.url`, `targets.crm.mapping[1].to`); empty when the problem is not one field's.
    pub path: String,
    pub message: String,
}

/// What a save did: saved and in force, or refused with the fields at fault (nothing written then).
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct SaveOutcome {
    pub saved: bool,
    pub errors: Vec<FieldError>,
    pub settings: SettingsView,
}

fn notify_word(n: NotifyPolicy) -> &'static str {
    match n {
        NotifyPolicy::Immediate => "immediate",
        NotifyPolicy::Digest => "digest",
        NotifyPolicy::None => "none",
    }
}

fn word<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

fn auth_fields(prefix: &str, auth: &Option<AuthConfig>, out: &mut Vec<(String, String)>) {
    match auth {
        Some(AuthConfig::BearerEnv(v)) => out.push((format!("{prefix}.auth.bearer_env"), v.clone())),
        Some(AuthConfig::Header { value_env, .. }) => {
            out.push((format!("{prefix}.auth.header.value_env"), value_env.clone()))
        }
        None => {}
    }
}

/// Every field of the configuration that names a secret's variable: (path, variable).
pub fn secret_fields(config: &Config) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, s) in &config.sources {
        let key = format!("sources.{name}");
        for (field, v) in s.secret_vars() {
            out.push((format!("{key}.{field}"), v.to_string()));
        }
        if let Some(r) = &s.reconcile {
            auth_fields(&format!("{key}.reconcile"), &r.auth, &mut out);
        }
    }
    for (name, t) in &config.targets {
        let key = format!("targets.{name}");
        for (field, v) in t.settings.credential_vars() {
            out.push((format!("{key}.{field}"), v.to_string()));
        }
        auth_fields(&key, &t.auth, &mut out);
    }
    out
}

/// The editable view of `config`. Blocks (it asks the keyring where each secret is): call it off the async
/// threads.
pub fn view(config: &Config) -> SettingsView {
    let secrets = secret_fields(config);
    let fields_of = |prefix: &str| -> Vec<SecretField> {
        secrets
            .iter()
            .filter(|(path, _)| path.starts_with(&format!("{prefix}.")))
            .map(|(path, variable)| SecretField {
                path: path.clone(),
                variable: variable.clone(),
                found: config.secret_source(variable),
            })
            .collect()
    };
    let keyring_message = crate::platform::keyring::unavailable().map(|why| {
        format!("Secrets cannot be kept here: {why}. Set each variable in the environment or the secrets file instead.")
    });
    SettingsView {
        file: config.file.as_ref().map(|f| f.display().to_string()),
        read_only: config.file.is_none().then(|| {
            "The demo runs a built-in configuration: its settings can be looked at, not saved. Start Leadline with \
             --config FILE to edit your own."
                .to_string()
        }),
        sources: config
            .sources
            .iter()
            .map(|(name, s)| SourceSettings {
                name: name.clone(),
                kind: s.kind().as_str().to_string(),
                id_field: s.id_field.clone(),
                route: s.route.clone(),
                require_signature: s.require_signature,
                secrets: fields_of(&format!("sources.{name}")),
            })
            .collect(),
        targets: config
            .targets
            .iter()
            .map(|(name, t)| TargetSettings {
                name: name.clone(),
                kind: word(&t.kind()),
                url: t.url.clone(),
                strategy: t.strategy.map(|s| word(&s)),
                mapping: t.mapping.iter().filter_map(|r| serde_json::to_value(r).ok()).collect(),
                secrets: fields_of(&format!("targets.{name}")),
            })
            .collect(),
        alerts: AlertKind::ALL
            .iter()
            .map(|kind| {
                let policy = config.monitor.policy(*kind);
                AlertSettings {
                    kind: kind.as_str().to_string(),
                    notify: notify_word(policy.notify).to_string(),
                    renotify_minutes: policy.renotify_minutes,
                    configured: config.monitor.alerts.contains_key(kind.as_str()),
                }
            })
            .collect(),
        quiet_hours: config
            .monitor
            .quiet_hours
            .as_ref()
            .map(|q| QuietHours { start: q.start.clone(), end: q.end.clone() }),
        quiet_hours_hold_critical: config.monitor.quiet_hours_hold_critical,
        timezone: config.monitor.timezone.clone(),
        keyring: KeyringStatus { available: keyring_message.is_none(), message: keyring_message },
    }
}

/// Every check `serve` makes before it opens the database: the config's validation and each kind's checks
/// (`features::checks`), every secret variable of the sources, targets and alert channels, every target's headers
/// and credentials as header values (no CR/LF). `check-config` and the settings page run exactly this. Returns the warnings to show: one per unsigned source.
pub fn preflight(config: &Config) -> anyhow::Result<Vec<String>> {
    crate::features::checks::check(config)?;
    config.database_url()?;
    crate::features::ingest::check_sources(config)?;
    crate::features::monitor::channels::check(config)?;
    for (name, target) in &config.targets {
        crate::features::delivery::worker::TargetRuntime::new(name, target, config, crate::clock::Clock::system())?;
    }
    Ok(unsigned_source_warnings(config))
}

/// One warning per source that takes requests without a signature.
pub fn unsigned_source_warnings(config: &Config) -> Vec<String> {
    config
        .sources
        .iter()
        .filter(|(_, source)| !source.is_signed())
        .map(|(name, _)| {
            format!(
                "source `{name}` is unsigned: anyone who can reach POST /ingest/{name} can add leads to it; give it \
                 `signature = {{ header = \"...\", secret_env = \"...\" }}` and `require_signature = true`"
            )
        })
        .collect()
}

/// The field an error of the checks is about.
fn field_error(e: &anyhow::Error) -> FieldError {
    match e.chain().find_map(|c| c.downcast_ref::<ConfigError>()) {
        Some(ConfigError::Invalid { key, message }) => FieldError { path: key.clone(), message: message.clone() },
        _ => FieldError { path: String::new(), message: format!("{e:#}") },
    }
}

/// One try: the changes made on `original`, the result parsed and checked. What was set at start only
/// (`[server]`, `[database]`, `[worker]`, secrets given in code) is taken from `running`, as it stays in force.
fn attempt(original: &str, changes: &[Change], file: &Path, running: &Config) -> Result<(String, Config), FieldError> {
    let text = edit::apply(original, changes).map_err(|(path, message)| FieldError { path, message })?;
    // The parse first on its own, for the position of a value of the wrong type or an unknown key.
    if let Err(e) = toml::from_str::<Config>(&text) {
        let path = e.span().and_then(|s| edit::path_at(&text, s.start)).unwrap_or_default();
        return Err(FieldError { path, message: e.message().to_string() });
    }
    let mut config = Config::parse(&text, file).map_err(|e| field_error(&e.into()))?;
    config.file = Some(file.to_owned());
    config.server = running.server.clone();
    config.database = running.database.clone();
    config.worker = running.worker.clone();
    config.inline_secrets = running.inline_secrets.clone();
    preflight(&config).map_err(|e| field_error(&e))?;
    Ok((text, config))
}

/// Makes `changes` on the file's text `original` and checks the result as `check-config` does. On success, the
/// new text and configuration; else every refused value with its path. The checks stop at the first problem,
/// so a change found at fault is left out and the rest checked again, until the rest passes or a problem is
/// not one of the changes' (then it is reported as it is).
pub fn check(
    original: &str,
    changes: &[Change],
    file: &Path,
    running: &Config,
) -> Result<(String, Config), Vec<FieldError>> {
    let mut remaining = changes.to_vec();
    let mut errors = Vec::new();
    for _ in 0..=changes.len() {
        match attempt(original, &remaining, file, running) {
            Ok(done) if errors.is_empty() => return Ok(done),
            Ok(_) => return Err(errors),
            Err(e) => {
                let blamed = remaining.iter().position(|c| edit::blames(&c.path, &e.path));
                errors.push(e);
                match blamed {
                    Some(i) => {
                        remaining.remove(i);
                    }
                    None => return Err(errors),
                }
            }
        }
    }
    Err(errors)
}

/// Writes `text` to `file` whole or not at all: a temporary file beside it, synced, given the file's permissions,
/// then renamed over it.
pub fn write_atomically(file: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "leadline.toml".into());
    let tmp: PathBuf = dir.join(format!(".{name}.saving-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        if let Ok(meta) = std::fs::metadata(file) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, file)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Puts `config` in force in the running app without stopping it (see the module's documentation): the
/// worker's targets and the ingest's sources are rebuilt from it, then it replaces the shared configuration.
/// Fails, with what was in force still in force, when a target or source cannot be built.
pub fn apply(app: &App, config: Config) -> anyhow::Result<()> {
    if let Some(worker) = &app.worker {
        worker.reconfigure(&config)?;
    }
    app.ingest.reconfigure(&config)?;
    app.config.replace(config);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"# ACME's Leadline
[sources.webform]
route = ["crm"]  # the form goes to the CRM

[targets.crm]
url = "http://127.0.0.1:9/leads"  # staging
strategy = "idempotency_key"

[monitor]
quiet_hours = { start = "22:00", end = "07:00" }  # nights
"#;

    fn change(path: &str, value: serde_json::Value) -> Change {
        Change { path: path.into(), value }
    }

    fn running() -> Config {
        let mut c = Config::parse(FILE, Path::new("/tmp/leadline.toml")).unwrap();
        c.database.url = Some("sqlite::memory:".into());
        c
    }

    #[test]
    fn a_valid_edit_gives_the_new_text_and_configuration() {
        let (text, config) = check(
            FILE,
            &[change("targets.crm.url", serde_json::json!("http://127.0.0.1:10/leads"))],
            Path::new("/tmp/leadline.toml"),
            &running(),
        )
        .unwrap();
        assert_eq!(text, FILE.replace("127.0.0.1:9", "127.0.0.1:10"));
        assert_eq!(config.targets["crm"].url, "http://127.0.0.1:10/leads");
        assert_eq!(config.database.url.as_deref(), Some("sqlite::memory:"), "what was set at start stays");
    }

    #[test]
    fn each_refused_value_is_named_by_its_field() {
        let errors = check(
            FILE,
            &[
                change("targets.crm.url", serde_json::json!("ftp://crm")),
                change("monitor.quiet_hours.start", serde_json::json!("25:00")),
                change("monitor.alerts.silence", serde_json::json!({"notify": "loudly"})),
                change("sources.webform.route", serde_json::json!(["crm"])),
            ],
            Path::new("/tmp/leadline.toml"),
            &running(),
        )
        .unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths.len(), 3, "{errors:?}");
        assert!(paths.contains(&"targets.crm.url"), "{errors:?}");
        assert!(paths.contains(&"monitor.quiet_hours.start"), "{errors:?}");
        assert!(paths.iter().any(|p| p.starts_with("monitor.alerts.silence")), "{errors:?}");
        let url = errors.iter().find(|e| e.path == "targets.crm.url").unwrap();
        assert!(url.message.contains("http or https"), "{url:?}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_by_its_field() {
        let errors = check(
            FILE,
            &[change("monitor.alerts.silence", serde_json::json!({"notify": "digest", "renotify_minutes": "soon"}))],
            Path::new("/tmp/leadline.toml"),
            &running(),
        )
        .unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "monitor.alerts.silence.renotify_minutes", "{errors:?}");
    }

    #[test]
    fn a_missing_secret_names_the_field_that_names_it() {
        let errors = check(
            FILE,
            &[change("targets.crm.auth", serde_json::json!({"bearer_env": "LEADLINE_TEST_NOT_SET_ANYWHERE"}))],
            Path::new("/tmp/leadline.toml"),
            &running(),
        )
        .unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].path.starts_with("targets.crm.auth"), "{errors:?}");
        assert!(errors[0].message.contains("LEADLINE_TEST_NOT_SET_ANYWHERE"), "{errors:?}");
    }

    #[test]
    fn the_file_is_replaced_whole_with_its_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("leadline.toml");
        std::fs::write(&file, FILE).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        write_atomically(&file, "# new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "# new\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o640);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }
}
