//! The desktop window in its own process reaches Leadline through the engine's bridge: every command its page
//! invokes is answered (by the engine or by the window), answers and errors arrive as the page reads them, the
//! native confirmation is the engine's, the live feed flows, and nothing answers without the run's secret.

mod common;

use std::sync::Arc;
use std::time::Duration;

use leadline::api::operations;
use leadline::api::{ApiError, ScriptedConfirm};
use leadline::shells::window::bridge::{self, Client, EngineSide};
use leadline::shells::window::commands::{self, Context};
use serde_json::{json, Value};

/// The engine's own answers as a test engine keeps them (the real one writes the XDG autostart entry, follows the
/// session's tray and asks natively before it quits): here no tray, and a quit said yes to is counted.
#[derive(Default)]
struct TestEngine {
    autostart: std::sync::Mutex<bool>,
    quits: std::sync::atomic::AtomicUsize,
}

impl EngineSide for TestEngine {
    fn autostart(&self) -> bool {
        *self.autostart.lock().unwrap()
    }
    fn set_autostart(&self, on: bool) -> Result<bool, String> {
        *self.autostart.lock().unwrap() = on;
        Ok(on)
    }
    fn tray_shown(&self) -> bool {
        false
    }
    fn quit(&self) -> futures_util::future::BoxFuture<'static, bool> {
        self.quits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { true })
    }
}

async fn bridged(app: &common::TestApp, confirm: Arc<ScriptedConfirm>) -> (Client, bridge::Door) {
    bridged_with(app, confirm, Arc::new(TestEngine::default())).await
}

async fn bridged_with(
    app: &common::TestApp,
    confirm: Arc<ScriptedConfirm>,
    engine: Arc<TestEngine>,
) -> (Client, bridge::Door) {
    let cx = Context { app: app.server.app.clone(), confirm, actor: "desktop user `test`".into() };
    let door = bridge::open(cx, engine).await.unwrap();
    (Client::new(door.clone()).unwrap(), door)
}

/// The commands the UI's desktop backends invoke: every operation (`TauriBackend.call` invokes it by name), and the
/// engine's and the window's own commands (`command<…>('name'` in `backend-tauri.ts` and `backend-desk.ts`).
fn invoked_by_the_page() -> Vec<String> {
    let mut names: Vec<String> = operations::all().iter().map(|op| op.name.to_string()).collect();
    for file in ["ui/src/lib/backend-tauri.ts", "ui/src/lib/backend-desk.ts"] {
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines().filter(|l| l.contains("command<")) {
            let Some(start) = line.find(">('") else { continue };
            let rest = &line[start + 3..];
            names.push(rest[..rest.find('\'').unwrap()].to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_command_the_window_invokes_is_answered_by_the_engine_or_the_window() {
    let names = invoked_by_the_page();
    assert!(names.len() > 30, "the page's commands were not found: {names:?}");
    for name in &names {
        let engine = commands::route(name).is_some();
        let window = commands::WINDOW_OWN.contains(&name.as_str());
        assert!(engine != window, "`{name}` must be answered by exactly one side (engine: {engine}, window: {window})");
    }
    // And the engine answers nothing the page never asks (a renamed command would leave a dead entry).
    for known in commands::ENGINE_OWN {
        assert!(names.iter().any(|n| n == known), "the engine answers `{known}`, which no page invokes");
    }
}

#[tokio::test]
async fn commands_answer_through_the_bridge_as_the_page_reads_them() {
    let app = common::spawn().await;
    let engine = Arc::new(TestEngine::default());
    let (client, _) = bridged_with(&app, Arc::new(ScriptedConfirm::always(true)), engine.clone()).await;

    let health = client.invoke("health", json!({})).await.unwrap();
    assert_eq!(health["verdict"]["level"], "all_well", "health: {health}");
    let session = client.invoke("session", Value::Null).await.unwrap();
    assert_eq!(session["operator"], "desktop user `test`");

    assert_eq!(app.post_webform(&common::lead("bridge-1")).await, reqwest::StatusCode::ACCEPTED);
    let found = client.invoke("find_leads", json!({ "q": "bridge-1" })).await.unwrap();
    assert_eq!(found["items"].as_array().map(Vec::len), Some(1), "find_leads: {found}");

    // Errors come as `{code, message}`: a missing dead letter, an argument of the wrong type, an unknown command.
    let missing = client.invoke("dead_letter", json!({ "id": 999_999 })).await.unwrap_err();
    assert_eq!(missing["code"], "not_found", "{missing}");
    let bad = client.invoke("metrics", json!({ "range": 5 })).await.unwrap_err();
    assert_eq!(bad["code"], "bad_request", "{bad}");
    assert!(bad["message"].as_str().unwrap().contains("range"), "{bad}");
    let unknown = client.invoke("drop_everything", json!({})).await.unwrap_err();
    assert_eq!(unknown["code"], "not_found", "{unknown}");

    // Start at login is the engine's own.
    assert_eq!(client.invoke("autostart", json!({})).await.unwrap(), json!(false));
    assert_eq!(client.invoke("set_autostart", json!({ "enabled": true })).await.unwrap(), json!(true));
    assert_eq!(client.invoke("autostart", json!({})).await.unwrap(), json!(true));
    // So are whether a tray shows the icon and quitting (asked by the engine, answered with what was said).
    assert_eq!(client.invoke("tray_shown", json!({})).await.unwrap(), json!(false));
    assert_eq!(engine.quits.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(client.invoke("quit_app", json!({})).await.unwrap(), json!(true));
    assert_eq!(engine.quits.load(std::sync::atomic::Ordering::SeqCst), 1, "the engine was asked to quit once");

    // An export comes back as its file name and CSV, for the window to save.
    assert_eq!(commands::route("export_dead_letters"), Some(commands::Route::SaveFile));
    let csv = client.invoke("export_dead_letters", json!({})).await.unwrap();
    assert!(csv["name"].as_str().unwrap().ends_with(".csv"), "{csv}");
    assert!(csv["body"].as_str().unwrap().lines().next().is_some_and(|h| h.contains(',')), "{csv}");
}

#[tokio::test]
async fn a_refused_confirmation_changes_nothing_and_the_engine_asked_in_words() {
    let app = common::spawn().await;
    let confirm = Arc::new(ScriptedConfirm::always(false));
    let (client, _) = bridged(&app, confirm.clone()).await;
    let request = json!({
        "selection": { "ids": [1] },
        "resolution": "discarded",
        "note": "spam",
        "expected": 1
    });
    let answer = client.invoke("resolve_dead_letters", request).await.unwrap_err();
    assert_eq!(answer["code"], ApiError::Cancelled.code(), "{answer}");
    let asked = confirm.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "one question: {asked:?}");
    assert!(asked[0].contains("Discard: 1 dead letters") && asked[0].contains("spam"), "{asked:?}");
}

#[tokio::test]
async fn nothing_answers_without_the_runs_secret() {
    let app = common::spawn().await;
    let (_, door) = bridged(&app, Arc::new(ScriptedConfirm::always(true))).await;
    let http = reqwest::Client::new();
    for secret in [None, Some("not-the-secret".to_string())] {
        let mut call = http.post(format!("{}/invoke/health", door.url)).json(&json!({}));
        let mut live = http.get(format!("{}/live", door.url));
        if let Some(s) = &secret {
            call = call.bearer_auth(s);
            live = live.bearer_auth(s);
        }
        assert_eq!(call.send().await.unwrap().status(), reqwest::StatusCode::UNAUTHORIZED, "secret {secret:?}");
        assert_eq!(live.send().await.unwrap().status(), reqwest::StatusCode::UNAUTHORIZED, "secret {secret:?}");
    }
    let wrong = Client::new(bridge::Door { url: door.url.clone(), secret: "not-the-secret".into() }).unwrap();
    let refused = wrong.invoke("health", json!({})).await.unwrap_err();
    assert!(refused["message"].as_str().unwrap().contains("401"), "{refused}");
}

#[tokio::test]
async fn the_live_feed_reaches_the_window() {
    let app = common::spawn().await;
    let (client, _) = bridged(&app, Arc::new(ScriptedConfirm::always(true))).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    tokio::spawn(async move {
        let _ = client.follow_live(move |event| drop(tx.send(event))).await;
    });
    // A lead delivered: its events (health, the delivery) come through as the page's `live` events.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.post_webform(&common::lead("live-1")).await, reqwest::StatusCode::ACCEPTED);
    let event = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a live event within 10 s")
        .expect("the feed is open");
    assert!(event["kind"].is_string(), "a live event has a kind: {event}");
}
