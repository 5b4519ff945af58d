//! A desk of a team server, without its window: the client the desktop app uses ([`leadline::shells::desk`])
//! against a real `leadline serve` (the HTTP API and its live feed). The desk checks the server and the token
//! before keeping anything, acts under the operator's name (acknowledgements, pauses, replays), announces each
//! alert once, says when the server is lost and finds it again by itself, and stops when the token is revoked.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use leadline::demo::mock_crm::Behaviour;
use leadline::monitor::alerts::{AlertKind, AlertSpec, Severity};
use leadline::runtime::Notifier;
use leadline::server::Server;
use leadline::shells::desk::{self, DeskError, DeskLink, DeskSink};

/// What the window would have been told.
#[derive(Default)]
struct Window {
    connections: Mutex<Vec<(bool, Option<String>)>>,
    events: Mutex<Vec<String>>,
    healths: Mutex<usize>,
}

impl DeskSink for Window {
    fn connection(&self, up: bool, refused: Option<String>) {
        self.connections.lock().unwrap().push((up, refused));
    }
    fn live(&self, event: &serde_json::Value) {
        self.events.lock().unwrap().push(event["kind"].as_str().unwrap_or("?").to_string());
    }
    fn health(&self, _: &leadline::api::HealthView) {
        *self.healths.lock().unwrap() += 1;
    }
}

impl Window {
    fn last_connection(&self) -> Option<(bool, Option<String>)> {
        self.connections.lock().unwrap().last().cloned()
    }
}

/// The desktop notifications the desk raised.
#[derive(Default)]
struct Notifications(Mutex<Vec<String>>);

impl Notifier for Notifications {
    fn notify(&self, title: &str, _body: &str) {
        self.0.lock().unwrap().push(title.to_string());
    }
}

impl Notifications {
    fn titles(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn spec(key: &str) -> AlertSpec {
    AlertSpec {
        kind: AlertKind::BreakerOpen,
        key: key.into(),
        severity: Severity::Critical,
        title: format!("{key} looks down"),
        detail: "five failures in a row".into(),
    }
}

async fn raise(server: &Server, key: &str) {
    let app = &server.app;
    leadline::monitor::raise(app, &leadline::monitor::LogNotifier, spec(key), app.clock.now()).await;
}

#[tokio::test]
async fn a_desk_follows_the_team_server_and_acts_under_its_operators_name() {
    let mut app = spawn().await;
    let alice = leadline::api::tokens::create(&app.server.app.store, "alice", chrono::Utc::now()).await.unwrap();
    let server = desk::parse_server(&format!("http://{}", app.server.addr)).unwrap();

    // Checked before anything is kept: a wrong token and a wrong address are refused in words.
    let wrong = DeskLink::new(server.clone(), "not-a-token").unwrap().check().await.unwrap_err();
    assert!(matches!(wrong, DeskError::Refused(_)), "{wrong}");
    assert!(wrong.to_string().contains("not valid"), "{wrong}");
    let nowhere = desk::parse_server("http://127.0.0.1:9").unwrap();
    let down = DeskLink::new(nowhere, &alice).unwrap().check().await.unwrap_err();
    assert!(matches!(down, DeskError::Unreachable { .. }), "{down}");
    assert!(down.to_string().contains("cannot reach the team server at http://127.0.0.1:9"), "{down}");
    let link = DeskLink::new(server.clone(), &alice).unwrap();
    assert_eq!(link.check().await.unwrap().operator, "alice");

    // An alert open before the desk starts is shown, not announced; one that opens later is announced once.
    raise(&app.server, "crm").await;
    let window = Arc::new(Window::default());
    let notes = Arc::new(Notifications::default());
    let follow = tokio::spawn(desk::follow(link.clone(), window.clone(), notes.clone()));
    wait_for("the feed is up", Duration::from_secs(10), async || window.last_connection() == Some((true, None))).await;
    wait_for("a health event", Duration::from_secs(10), async || *window.healths.lock().unwrap() > 0).await;
    raise(&app.server, "notify").await;
    wait_for("the new alert announced", Duration::from_secs(10), async || !notes.titles().is_empty()).await;
    raise(&app.server, "notify").await; // the same incident again: counted on the server, not announced again
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(notes.titles(), ["notify looks down"]);
    assert!(window.events.lock().unwrap().iter().any(|k| k == "alerts_changed"));

    // Acting through the desk is acting as alice.
    let alerts: serde_json::Value =
        serde_json::from_str(&link.call("GET", "/api/alerts", None).await.unwrap().body).unwrap();
    let id = alerts.as_array().unwrap().iter().find(|a| a["key"] == "notify").unwrap()["id"].as_i64().unwrap();
    let ack = link.call("POST", &format!("/api/alerts/{id}/acknowledge"), None).await.unwrap();
    assert_eq!(ack.status, 200, "{}", ack.body);
    let ack: serde_json::Value = serde_json::from_str(&ack.body).unwrap();
    assert_eq!(ack["acknowledged_by"], "alice");
    let paused = link.call("POST", "/api/targets/crm/pause", None).await.unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&paused.body).unwrap()["paused_by"], "alice");
    // Only the API: nothing else of the server (nor another host) through the desk's token.
    assert!(link.call("GET", "/ingest/plain", None).await.is_err());
    assert!(link.call("GET", "/api/../healthz", None).await.is_err());
    assert!(link.call("DELETE", "/api/alerts", None).await.is_err());

    // The server goes away: the desk says so, keeps trying, and finds it again on its own; an alert that opened
    // meanwhile is announced once it is back.
    let addr = app.server.addr;
    let config = app.server.app.config.clone();
    app.server.shutdown().await.unwrap();
    wait_for("the loss noticed", Duration::from_secs(10), async || window.last_connection() == Some((false, None)))
        .await;
    tokio::time::sleep(desk::RETRY * 2).await;
    assert_eq!(window.last_connection(), Some((false, None)), "found a server that is not there");
    let mut again = (*config).clone();
    again.server.listen = addr;
    app.server = Server::start(again).await.unwrap();
    raise(&app.server, "meta_fetch").await;
    wait_for("found again", Duration::from_secs(15), async || window.last_connection() == Some((true, None))).await;
    wait_for("the alert of the outage announced", Duration::from_secs(10), async || notes.titles().len() == 2).await;
    assert_eq!(notes.titles()[1], "meta_fetch looks down");

    // Alice's token is revoked: the desk stops and says why (no retrying with a dead token).
    leadline::api::tokens::revoke(&app.server.app.store, "alice", chrono::Utc::now()).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(15), follow).await;
    assert!(ended.is_ok(), "the desk kept following with a revoked token");
    let (up, why) = window.last_connection().unwrap();
    assert!(!up);
    assert!(why.unwrap_or_default().contains("revoked"), "the desk did not say the token was refused");
    assert!(matches!(link.check().await, Err(DeskError::Refused(_))));
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_desk_downloads_exports_under_the_servers_file_name() {
    let app = spawn().await;
    let alice = leadline::api::tokens::create(&app.server.app.store, "alice", chrono::Utc::now()).await.unwrap();
    let link = DeskLink::new(desk::parse_server(&format!("http://{}", app.server.addr)).unwrap(), &alice).unwrap();
    let (name, body) = link.download("/api/export/dead-letters").await.unwrap();
    assert!(name.starts_with("leadline-dead-letters") && name.ends_with(".csv"), "{name}");
    assert!(body.lines().next().unwrap_or_default().contains("reason"), "{body}");
    assert!(link.download("/api/alerts").await.is_err(), "only exports are downloads");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_replay_started_from_a_desk_runs_on_the_server_under_the_operators_name() {
    let app = spawn().await;
    // Three dead letters of a configuration problem (the CRM refuses the integration a permission), then fixed.
    app.crm.set_behaviour(Behaviour { fail_with: Some(403), ..Default::default() });
    for i in 0..3 {
        assert_eq!(app.post_plain(&serde_json::json!({"id": format!("R-{i}")})).await, reqwest::StatusCode::ACCEPTED);
    }
    assert_eq!(app.wait_settled(Duration::from_secs(10)).await.overall.dead_open, 3);
    app.crm.set_behaviour(Behaviour::default());

    let bob = leadline::api::tokens::create(&app.server.app.store, "bob", chrono::Utc::now()).await.unwrap();
    let link = DeskLink::new(desk::parse_server(&format!("http://{}", app.server.addr)).unwrap(), &bob).unwrap();
    let selection = serde_json::json!({"filter": {"class": "permanent_config"}});
    let preview = link.call("POST", "/api/replays/preview", Some(&selection)).await.unwrap();
    assert_eq!(preview.status, 200, "{}", preview.body);
    let eligible = serde_json::from_str::<serde_json::Value>(&preview.body).unwrap()["eligible"].as_i64().unwrap();
    assert_eq!(eligible, 3);
    let request =
        serde_json::json!({"selection": selection, "reason": "scope granted", "expected": eligible, "options": {}});
    let started = link.call("POST", "/api/replays", Some(&request)).await.unwrap();
    assert!((200..300).contains(&started.status), "{}", started.body);
    let id = serde_json::from_str::<serde_json::Value>(&started.body).unwrap()["replay_id"].as_i64().unwrap();

    // Sent back by the server; its audit names bob.
    wait_for("the replay delivered", Duration::from_secs(20), async || {
        (0..3).all(|i| app.crm.records_for(&format!("plain:R-{i}")) == 1)
    })
    .await;
    let progress = link.call("GET", &format!("/api/replays/{id}"), None).await.unwrap();
    let progress: serde_json::Value = serde_json::from_str(&progress.body).unwrap();
    assert_eq!(progress["actor"], "bob");
    app.server.shutdown().await.unwrap();
}
