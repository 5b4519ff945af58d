//! A secret entered on the settings page goes to the OS keyring and never into the configuration file, and is
//! then found and used: a real Secret Service (gnome-keyring-daemon) on a private D-Bus session bus started by
//! this test, the real server over HTTP, and the mock CRM refusing any other token.
//!
//! A test binary of its own: it points this process's `DBUS_SESSION_BUS_ADDRESS` at the private bus.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use leadline::config::Config;
use leadline::demo::mock_crm::{Behaviour, MockCrm};
use leadline::server::Server;

/// A private session bus with an unlocked login keyring in a throwaway home; both daemons end with it.
struct SecretService {
    bus: Child,
    keyring: Child,
    _home: tempfile::TempDir,
}

impl Drop for SecretService {
    fn drop(&mut self) {
        let _ = self.keyring.kill();
        let _ = self.keyring.wait();
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

const BUS_CONFIG: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#;

fn start_secret_service() -> SecretService {
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    // A session bus that starts no service by itself: the Secret Service is the daemon started below, with this
    // home, never one the bus would activate with the user's own.
    let bus_config = home.path().join("bus.conf");
    std::fs::write(&bus_config, BUS_CONFIG.replace("{dir}", &home.path().display().to_string())).unwrap();
    let mut bus = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", bus_config.display()))
        .args(["--nofork", "--print-address=1"])
        .env("HOME", home.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("dbus-daemon (Debian package dbus-daemon, installed by .ci/setup)");
    let mut address = String::new();
    BufReader::new(bus.stdout.take().unwrap()).read_line(&mut address).unwrap();
    let address = address.trim().to_string();
    assert!(address.starts_with("unix:"), "dbus-daemon printed no address: {address:?}");
    // Runs as root in CI: a home of its own, where the login keyring is created with this password.
    let mut keyring = Command::new("gnome-keyring-daemon")
        .args(["--unlock", "--components=secrets", "--foreground"])
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env_remove("DISPLAY")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("gnome-keyring-daemon (Debian package gnome-keyring, installed by .ci/setup)");
    keyring.stdin.take().unwrap().write_all(b"leadline-test-password").unwrap();
    // This process (and the server in it) talks to the private bus from now on.
    std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &address);
    let service = SecretService { bus, keyring, _home: home };
    // Ready once the Secret Service answers a lookup.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        match leadline::config::keyring::get("LEADLINE_TEST_NOTHING_HERE") {
            Ok(None) => break,
            other if std::time::Instant::now() > deadline => panic!("no Secret Service on the private bus: {other:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    service
}

/// What `secret-tool` (libsecret, another client than Leadline's) finds in the keyring for `variable`.
fn secret_tool_lookup(variable: &str) -> Option<String> {
    let out = Command::new("secret-tool")
        .args(["lookup", "service", "leadline", "username", variable])
        .output()
        .expect("secret-tool (Debian package libsecret-tools, installed by .ci/setup)");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

const KEYRING_TOKEN: &str = "s3cret-from-the-keyring";

fn config_file(crm: std::net::SocketAddr, db: &Path) -> String {
    format!(
        r#"# ACME's Leadline: secrets live in the environment or the keyring, never here

[server]
listen = "127.0.0.1:0"

[database]
url = "{db}"

[worker]
poll_interval_ms = 20

[sources.webform]
route = ["crm"]  # the contact form

[targets.crm]
url = "http://{crm}/crm/leads"
strategy = "idempotency_key"
auth = {{ bearer_env = "LEADLINE_TEST_ENV_TOKEN" }}  # the CRM's API token
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
"#,
        db = common::database_url(db),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_entered_in_settings_goes_to_the_keyring_never_the_file_and_is_used() {
    let _service = start_secret_service();
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("leadline.toml");
    std::fs::write(&file, config_file(crm_addr, &dir.path().join("leadline.db"))).unwrap();
    // The token the file names at first comes from the environment; the one the keyring will hold differs.
    std::env::set_var("LEADLINE_TEST_ENV_TOKEN", "token-from-the-environment");
    let server = Server::start(Config::load(&file).unwrap()).await.unwrap();
    let token = server.new_token.clone().expect("a fresh database shows its token");
    let http = reqwest::Client::new();
    let api = format!("http://{}/api", server.addr);

    // The CRM takes only the keyring's token from now on.
    crm.set_behaviour(Behaviour { require_bearer: Some(KEYRING_TOKEN.into()), ..Default::default() });

    // Naming a variable that holds nothing anywhere is refused, with the field named; the file stays as it was.
    let before = std::fs::read_to_string(&file).unwrap();
    let change = serde_json::json!({"changes": [{"path": "targets.crm.auth.bearer_env", "value": "LEADLINE_TEST_KEYRING_TOKEN"}]});
    let refused = http.put(format!("{api}/settings")).bearer_auth(&token).json(&change).send().await.unwrap();
    assert_eq!(refused.status(), 422);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["saved"], false);
    assert!(body["errors"][0]["path"].as_str().unwrap().starts_with("targets.crm.auth"), "{body}");
    assert!(body["errors"][0]["message"].as_str().unwrap().contains("LEADLINE_TEST_KEYRING_TOKEN"), "{body}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);

    // The secret entered for it goes to the keyring…
    let stored = http
        .post(format!("{api}/settings/secret"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"variable": "LEADLINE_TEST_KEYRING_TOKEN", "value": KEYRING_TOKEN}))
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), 200, "{}", stored.text().await.unwrap());
    assert_eq!(secret_tool_lookup("LEADLINE_TEST_KEYRING_TOKEN").as_deref(), Some(KEYRING_TOKEN));
    // …and never into the file.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);

    // Now the field may name it: saved, found in the keyring, the file holds the name and not the secret.
    let saved = http.put(format!("{api}/settings")).bearer_auth(&token).json(&change).send().await.unwrap();
    assert_eq!(saved.status(), 200);
    let body: serde_json::Value = saved.json().await.unwrap();
    let fields = body["settings"]["targets"][0]["secrets"].as_array().unwrap();
    assert_eq!(fields[0]["variable"], "LEADLINE_TEST_KEYRING_TOKEN");
    assert_eq!(fields[0]["found"], "keyring");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("auth = { bearer_env = \"LEADLINE_TEST_KEYRING_TOKEN\" }  # the CRM's API token"), "{text}");
    assert!(text.starts_with("# ACME's Leadline: secrets live in the environment or the keyring, never here"));
    assert!(!text.contains(KEYRING_TOKEN), "the secret is in the file:\n{text}");

    // In force without a restart: the next lead is sent with the keyring's token, which the CRM accepts.
    let lead = http
        .post(format!("http://{}/ingest/webform", server.addr))
        .json(&serde_json::json!({"id": "kr-1", "email": "kr@example.com"}))
        .send()
        .await
        .unwrap();
    assert_eq!(lead.status(), 202);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while crm.distinct_leads() == 0 {
        assert!(std::time::Instant::now() < deadline, "the lead was not delivered with the keyring's token");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(crm.distinct_leads(), 1);

    // The order of the look-up: the environment before the keyring.
    std::env::set_var("LEADLINE_TEST_KEYRING_TOKEN", "from-the-environment");
    let config = Config::load(&file).unwrap();
    assert_eq!(config.secret("k", "LEADLINE_TEST_KEYRING_TOKEN").unwrap(), "from-the-environment");
    std::env::remove_var("LEADLINE_TEST_KEYRING_TOKEN");
    assert_eq!(config.secret("k", "LEADLINE_TEST_KEYRING_TOKEN").unwrap(), KEYRING_TOKEN);
    server.shutdown().await.unwrap();
}
