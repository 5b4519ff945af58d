//! Shared set-up for integration tests: a mock CRM on port 0, a fresh database per test, a server on port 0.
#![allow(dead_code)]

pub mod pg;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use leadline::config::Config;
use leadline::demo::mock_crm::MockCrm;
use leadline::server::Server;
use leadline::store::QueueHealth;

pub const SECRET: &str = "test-secret";
/// The key of the tests' Google Ads lead form sources (`TEST_GOOGLE_KEY`).
pub const GOOGLE_KEY: &str = "google-form-key";

pub struct TestApp {
    pub server: Server,
    pub crm: MockCrm,
    pub crm_addr: SocketAddr,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
}

/// The one log subscriber of a test process (installed by the first test that needs it; a process has one).
/// Lines go to the running test's captured output when `LEADLINE_TEST_LOG` is set (a tracing filter, e.g.
/// `leadline=debug`): the test runner shows them for a test that fails and hides them for one that passes. A test
/// that must read the log itself ([`capture_log`]) has every line kept in memory as well.
struct TestLog {
    filter: tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
    to_test_output: bool,
    capturing: std::sync::atomic::AtomicBool,
    captured: std::sync::Arc<Mutex<Vec<u8>>>,
}

static TEST_LOG: std::sync::OnceLock<TestLog> = std::sync::OnceLock::new();

fn test_log() -> &'static TestLog {
    TEST_LOG.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let wanted = std::env::var("LEADLINE_TEST_LOG").ok();
        let (filter, handle) = tracing_subscriber::reload::Layer::new(tracing_subscriber::EnvFilter::new(
            wanted.as_deref().unwrap_or("off"),
        ));
        let subscriber = tracing_subscriber::registry()
            .with(filter)
            .with(tracing_subscriber::fmt::layer().with_ansi(false).with_writer(|| LogLine(Vec::new())));
        tracing::subscriber::set_global_default(subscriber).expect("only the test log installs a subscriber");
        TestLog {
            filter: handle,
            to_test_output: wanted.is_some(),
            capturing: false.into(),
            captured: Default::default(),
        }
    })
}

/// One formatted line on its way out (written whole when dropped).
struct LogLine(Vec<u8>);

impl std::io::Write for LogLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let Some(log) = TEST_LOG.get() else { return };
        if log.to_test_output {
            // `print!`, not a write to stdout: the test runner captures it for the test whose thread logs.
            print!("{}", String::from_utf8_lossy(&self.0));
        }
        if log.capturing.load(std::sync::atomic::Ordering::SeqCst) {
            log.captured.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&self.0);
        }
    }
}

/// Sends the servers' logs to the test's captured output when `LEADLINE_TEST_LOG` is set (see [`TestLog`]).
pub fn init_test_log() {
    test_log();
}

/// Keeps every log line of this process from now on in memory, at every level of Leadline's own code and debug
/// for the libraries, and returns what has been kept so far each time it is read.
pub fn capture_log() -> CapturedLog {
    let log = test_log();
    log.filter
        .reload(tracing_subscriber::EnvFilter::new("debug,leadline=trace"))
        .expect("the test log's subscriber lives as long as the process");
    log.capturing.store(true, std::sync::atomic::Ordering::SeqCst);
    CapturedLog(log.captured.clone())
}

/// The log lines kept since [`capture_log`].
pub struct CapturedLog(std::sync::Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

/// Whether the integration tests run on PostgreSQL (`LEADLINE_TEST_BACKEND=postgres`) rather than SQLite.
pub fn on_postgres() -> bool {
    std::env::var("LEADLINE_TEST_BACKEND").is_ok_and(|b| b.eq_ignore_ascii_case("postgres"))
}

/// The database URL a test uses for what would be the SQLite file `db`: `sqlite://{db}` by default; with
/// `LEADLINE_TEST_BACKEND=postgres`, a fresh PostgreSQL database — the same one every time this process asks for
/// the same path, so a test that presets a token and then starts a server on `db` finds both in one database.
pub fn database_url(db: &Path) -> String {
    if !on_postgres() {
        return format!("sqlite://{}", db.display());
    }
    static BY_PATH: Mutex<Option<HashMap<PathBuf, String>>> = Mutex::new(None);
    let mut map = BY_PATH.lock().unwrap_or_else(|e| e.into_inner());
    map.get_or_insert_with(HashMap::new).entry(db.to_path_buf()).or_insert_with(pg::fresh_database_url_blocking).clone()
}

/// Config text for a test: a signed `webform` source routed to `crm` then `notify`, an unsigned `plain`
/// source, a Meta source whose leads are fetched from the mock Graph API (`meta_fetch`) before `crm`, fast
/// retries, and breakers that close again after 300 ms: the mock's faults (its blips) reach every target, and a
/// run of them can open a breaker — with the default cooldown of 30 s, `notify` once waited out a whole test.
/// `{crm}` is the mock CRM's address; the database is [`database_url`] of `db`.
pub fn config_text(crm: SocketAddr, db: &Path, crm_target: &str) -> String {
    config_head(db)
        + &format!(
            r#"
[sources.webform]
route = ["crm", "notify"]
signature = {{ header = "X-Signature-256", secret_env = "TEST_WEBFORM_SECRET" }}

[sources.plain]
route = ["crm"]

[sources.meta]
kind = "meta"
route = ["meta_fetch", "crm"]
app_secret_env = "TEST_META_SECRET"
verify_token_env = "TEST_META_VERIFY"
page_id = "99"

{crm_target}

[targets.meta_fetch]
kind = "meta_lead"
url = "http://{crm}/graph"
access_token_env = "TEST_GRAPH_TOKEN"
timeout_ms = 1000
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}

[targets.notify]
url = "http://{crm}/notify/{{external_id}}"
strategy = "upsert"
timeout_ms = 1000
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
"#
        )
}

/// The `[server]`, `[database]` and `[worker]` sections every test config starts with: a server on port 0 taking
/// bodies up to 4096 bytes, the database [`database_url`] of `db`, and a worker that polls every 20 ms and rescues
/// every second. It ends inside `[worker]`, so a test may add worker settings (`batch_size = 200`) right after it.
pub fn config_head(db: &Path) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"
max_body_bytes = 4096

[database]
url = "{db}"

[worker]
lease_seconds = 5
poll_interval_ms = 20
rescue_interval_seconds = 1
shutdown_grace_seconds = 5
"#,
        db = database_url(db),
    )
}

/// The default `crm` target: Idempotency-Key on create, with a search URL.
pub fn idempotent_crm(crm: SocketAddr) -> String {
    format!(
        r#"
[targets.crm]
url = "http://{crm}/crm/leads"
strategy = "idempotency_key"
search_url = "http://{crm}/crm/leads/search/{{external_id}}"
timeout_ms = 500
concurrency = 8
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
"#
    )
}

pub fn parse_config(text: &str) -> Config {
    let mut c = Config::parse(text, Path::new("test.toml")).expect("test config is valid");
    c.inline_secrets.insert("TEST_WEBFORM_SECRET".into(), SECRET.into());
    c.inline_secrets.insert("TEST_META_SECRET".into(), SECRET.into());
    c.inline_secrets.insert("TEST_META_VERIFY".into(), "verify-me".into());
    c.inline_secrets.insert("TEST_GRAPH_TOKEN".into(), leadline::demo::mock_crm::GRAPH_TOKEN.into());
    c.inline_secrets.insert("TEST_GOOGLE_KEY".into(), GOOGLE_KEY.into());
    c
}

pub async fn spawn_with(crm_target: impl Fn(SocketAddr) -> String) -> TestApp {
    start_app(crm_target, "", Default::default()).await
}

/// Like [`spawn_with`], with `extra` TOML appended to the config.
pub async fn spawn_with_extra(crm_target: impl Fn(SocketAddr) -> String, extra: &str) -> TestApp {
    start_app(crm_target, extra, Default::default()).await
}

pub async fn spawn() -> TestApp {
    spawn_with(idempotent_crm).await
}

/// Like [`spawn`], on the given clock: a manual clock moves the server's time (its worker, monitor and API) only
/// when the test says so.
pub async fn spawn_on(clock: leadline::api::Clock) -> TestApp {
    let options = leadline::server::StartOptions { clock: Some(clock), ..Default::default() };
    start_app(idempotent_crm, "", options).await
}

/// A mock CRM, a fresh database and a server on [`config_text`] with `crm_target` (a vendor's target, on its own
/// mock), the config changed by `change` before the server starts (the vendor's secrets, a test's settings).
pub async fn spawn_changed(crm_target: &str, change: impl FnOnce(&mut Config)) -> TestApp {
    init_test_log();
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = parse_config(&config_text(crm_addr, &dir.path().join("leadline.db"), crm_target));
    change(&mut config);
    let server = Server::start(config).await.unwrap();
    TestApp { server, crm, crm_addr, http: reqwest::Client::new(), dir }
}

/// A mock CRM, a fresh database and a server on [`config_text`] with `extra` TOML appended.
async fn start_app(
    crm_target: impl Fn(SocketAddr) -> String,
    extra: &str,
    options: leadline::server::StartOptions,
) -> TestApp {
    init_test_log();
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(crm_addr, &dir.path().join("leadline.db"), &crm_target(crm_addr)) + "\n" + extra;
    let server = Server::start_with(parse_config(&text), options).await.unwrap();
    TestApp { server, crm, crm_addr, http: reqwest::Client::new(), dir }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.server.addr, path)
    }

    /// The operator's token, created by this fresh server.
    pub fn token(&self) -> String {
        self.server.new_token.clone().expect("a fresh database gets a token at start")
    }

    /// A GET of an API route with the operator's credential.
    pub fn api_get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(path)).bearer_auth(self.token())
    }

    /// Posts a signed webform lead; returns the status.
    pub async fn post_webform(&self, body: &serde_json::Value) -> reqwest::StatusCode {
        let raw = body.to_string();
        let sig = leadline::ingest::signature::sign(SECRET.as_bytes(), raw.as_bytes());
        self.http
            .post(self.url("/ingest/webform"))
            .header("X-Signature-256", sig)
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap()
            .status()
    }

    pub async fn post_plain(&self, body: &serde_json::Value) -> reqwest::StatusCode {
        self.http.post(self.url("/ingest/plain")).json(body).send().await.unwrap().status()
    }

    pub async fn health(&self) -> QueueHealth {
        leadline::api::health(&self.server.app).await.unwrap().queue
    }

    /// Waits until the worker has made `n` more passes over its targets, each claiming what every target may take at
    /// that moment. A test that shows something is *not* sent (a paused or held target) waits for this rather than
    /// for a while: a worker that wrongly sends has had `n` chances to.
    pub async fn worker_passes(&self, n: u64) {
        let mut passes = self.server.app.worker.as_ref().expect("the test server runs a worker").watch_passes();
        let start = *passes.borrow_and_update();
        tokio::time::timeout(Duration::from_secs(10), passes.wait_for(|p| *p >= start + n))
            .await
            .expect("the worker keeps passing over its targets")
            .expect("the worker is running");
    }

    /// Waits until no step is pending or running, or panics. Steps still `waiting` then sit behind a dead
    /// letter: a step becomes pending in the same transaction that delivers its predecessor.
    pub async fn wait_settled(&self, within: Duration) -> QueueHealth {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let h = self.health().await;
            let o = &h.overall;
            if o.pending + o.running == 0 {
                return h;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("queue did not settle within {within:?}: {o:?}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

pub fn lead(id: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "name": "Ada Lovelace", "email": format!("{id}@example.com"), "phone": "+4915112345678"})
}

/// Polls `done` until it holds, or panics naming `what` after `within`.
pub async fn wait_for(what: &str, within: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    // Each look is bounded by the deadline too: one that never answers fails the wait instead of hanging it.
    while !tokio::time::timeout_at(deadline, done()).await.unwrap_or(false) {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The alerts of `kind`, open and resolved, as the API lists them.
pub async fn alerts_of(app: &TestApp, kind: &str) -> Vec<leadline::monitor::alerts::Alert> {
    leadline::api::alerts(&app.server.app).await.unwrap().into_iter().filter(|a| a.kind.as_str() == kind).collect()
}

/// Waits until every alert of `kind` has resolved itself, then checks the incident raised exactly one.
pub async fn one_alert_resolved(app: &TestApp, kind: &str) {
    wait_for("the alert to resolve", Duration::from_secs(5), async || {
        alerts_of(app, kind).await.iter().all(|a| a.resolved_at.is_some())
    })
    .await;
    assert_eq!(alerts_of(app, kind).await.len(), 1);
}

/// The `leadline` program the tests run as a child process: the one cargo built with them, or `LEADLINE_TEST_BIN`
/// when set. The test command sets it to a copy of the headless build, so that the desktop build it makes
/// meanwhile in the same folder (which replaces `target/debug/leadline`) cannot change the program under test.
pub fn leadline_bin() -> std::ffi::OsString {
    std::env::var_os("LEADLINE_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_leadline").into())
}

/// A `leadline serve` child on the config file `config`, with the secrets [`parse_config`] gives a test server in
/// its environment, `RUST_LOG=warn` and its output discarded; the caller adds its own (`.env`, `.stderr`) and
/// spawns it.
pub fn serve_command(config: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(leadline_bin());
    command
        .args(["serve", "--config"])
        .arg(config)
        .env("RUST_LOG", "warn")
        .env("TEST_WEBFORM_SECRET", SECRET)
        .env("TEST_META_SECRET", SECRET)
        .env("TEST_META_VERIFY", "verify-me")
        .env("TEST_GRAPH_TOKEN", leadline::demo::mock_crm::GRAPH_TOKEN)
        .env("TEST_GOOGLE_KEY", GOOGLE_KEY)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

/// Waits until a `leadline serve` child at `base` answers `/healthz`, or panics after 20 s.
pub async fn wait_up(http: &reqwest::Client, base: &str) {
    // Each try has its own short timeout: after a server was killed, a request the client's pool puts on a
    // connection to the dead process can wait for ever, and the next try opens a new one.
    let up = async || {
        let ask = http.get(format!("{base}/healthz")).timeout(Duration::from_secs(2));
        ask.send().await.is_ok_and(|r| r.status().is_success())
    };
    wait_for(&format!("leadline to come up at {base}"), Duration::from_secs(20), up).await;
}

/// Sets the operator token of the database of `db` ([`database_url`]; created if needed) before a `leadline serve` child starts on
/// it, so the test can authenticate its API calls; returns the token.
pub async fn preset_token(db: &Path) -> String {
    let store = leadline::store::Store::open(&database_url(db)).await.unwrap();
    let token = leadline::api::http::reset_token(&store, chrono::Utc::now()).await.unwrap();
    store.close().await;
    token
}

/// A server on [`config_text`] with `limits` added to its `[server]` section (the slow-client tests); a
/// `max_body_bytes` among them replaces the usual 4096.
pub async fn spawn_limited(limits: &str) -> TestApp {
    init_test_log();
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server_section =
        if limits.contains("max_body_bytes") { limits.to_string() } else { format!("max_body_bytes = 4096\n{limits}") };
    let text = config_text(crm_addr, &dir.path().join("leadline.db"), &idempotent_crm(crm_addr))
        .replace("max_body_bytes = 4096", &server_section);
    let server = leadline::server::Server::start(parse_config(&text)).await.unwrap();
    TestApp { server, crm, crm_addr, http: reqwest::Client::new(), dir }
}

/// Reads until the server closes the connection; returns what it said (empty when it just closed).
pub async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&answer).into_owned(),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
}
