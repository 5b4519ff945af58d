//! Every operation of the registry (`shells/api/operations.rs`) answers alike through both transports: over HTTP
//! with an operator's token, as a browser or an API client sends it, and through the desktop window's bridge
//! (`commands::dispatch`), with a confirmation scripted to say yes.
//!
//! Two servers start alike — the same configuration, the same manual clock, the same four dead letters — one
//! called over HTTP, the other over the bridge, each operation with its registered example arguments and the
//! request the registry builds for them (the one the UI's client builds: `backend-http.test.ts`). After an
//! operation that changes something, both servers settle (nothing pending, no replay under way) before the next;
//! an operation that only reads is asked again on both until they agree (the monitor writes in its own time).
//! Answers are compared whole, errors by code and message; the only differences allowed are each server's own
//! addresses (its mock CRM, its folder), which are replaced before comparing, and what each server measures in its
//! own time ([`MEASURED`]: how long a CRM call took, and the queue gauges its monitor samples every second, whose
//! highest value in a minute depends on when the sample fell during the seeding), which are left out of both.
//!
//! Every operation is called: the loop runs over the registry itself, and the registry cannot hold an operation
//! without example arguments (its `example` is part of each entry's syntax, so an entry without one does not
//! compile). The test then checks that every registered name was called.

mod common;

use std::sync::Arc;
use std::time::Duration;

use leadline::api::operations::{self, Access, Method, Operation};
use leadline::api::{self, Clock, ScriptedConfirm};
use leadline::demo::mock_crm::Behaviour;
use leadline::shells::window::bridge::{self, Client, EngineSide};
use leadline::shells::window::commands::Context;
use serde_json::{json, Value};

/// The name both sides act under: the HTTP side's operator token, and the window's actor.
const OPERATOR: &str = "parity";

/// The engine's own commands are not operations: this engine is never asked them.
struct NoEngine;

impl EngineSide for NoEngine {
    fn autostart(&self) -> bool {
        false
    }
    fn set_autostart(&self, _: bool) -> Result<bool, String> {
        Err("not in this test".into())
    }
    fn tray_shown(&self) -> bool {
        false
    }
    fn quit(&self) -> futures_util::future::BoxFuture<'static, bool> {
        Box::pin(async { false })
    }
}

/// A server with four dead letters (`plain` leads P-1 … P-4, refused by the CRM with 422) and the alert of their
/// cause, on a manual clock at `t0`.
async fn seeded(t0: chrono::DateTime<chrono::Utc>) -> common::TestApp {
    let app = common::spawn_on(Clock::manual(t0)).await;
    app.crm.set_behaviour(Behaviour { fail_with: Some(422), ..Default::default() });
    for i in 1..=4 {
        let lead = json!({"id": format!("P-{i}"), "name": "Ada Lovelace", "email": format!("p{i}@example.com"), "phone": "+4915112345678"});
        assert_eq!(app.post_plain(&lead).await, reqwest::StatusCode::ACCEPTED);
        // One at a time, so that both servers number the leads alike.
        app.wait_settled(Duration::from_secs(10)).await;
    }
    assert_eq!(app.health().await.overall.dead_open, 4);
    app.crm.set_behaviour(Behaviour::default());
    let a = &app.server.app;
    common::wait_for("the cause's alert", Duration::from_secs(10), || async {
        !api::alerts(a).await.unwrap().is_empty()
    })
    .await;
    app
}

/// Figures each server measures in its own time, left out of the comparison: a CRM call's duration, and the
/// sampled queue gauges of `metrics` (the other metrics count stored events and are compared).
const MEASURED: &[&str] = &["duration_ms", "pending", "oldest_age_seconds"];

/// `value` without the [`MEASURED`] figures (`pending` only where it is a series of samples, an array).
fn unmeasured(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if MEASURED.contains(&key.as_str()) && (key != "pending" || v.is_array()) {
                    *v = Value::Null;
                } else {
                    unmeasured(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unmeasured),
        _ => {}
    }
}

/// An answer as both transports are compared: the answer, or the error's `{code, message}`.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Ok(Value),
    Refused(Value),
}

/// One operation over HTTP, as the registry says a client sends it.
async fn over_http(app: &common::TestApp, token: &str, op: &Operation, args: &Value) -> Answer {
    let request = op.request(args).unwrap();
    let method = match request.method {
        Method::Get => reqwest::Method::GET,
        Method::Post => reqwest::Method::POST,
        Method::Put => reqwest::Method::PUT,
    };
    let mut call = app.http.request(method, app.url(&request.path)).bearer_auth(token);
    if let Some(body) = &request.body {
        call = call.json(body);
    }
    let response = call.send().await.unwrap();
    let status = response.status();
    if status.is_success() && op.file {
        let disposition = response.headers()["content-disposition"].to_str().unwrap().to_string();
        let name = disposition.split("filename=\"").nth(1).unwrap().trim_end_matches('"').to_string();
        return Answer::Ok(json!({"name": name, "body": response.text().await.unwrap()}));
    }
    let body: Value = response.json().await.unwrap_or_else(|e| panic!("{} answered no JSON: {e}", op.name));
    if status.is_success() || (status == reqwest::StatusCode::UNPROCESSABLE_ENTITY && op.refusal) {
        Answer::Ok(body)
    } else {
        Answer::Refused(body)
    }
}

/// One operation through the window's bridge.
async fn through_the_window(client: &Client, op: &Operation, args: &Value) -> Answer {
    match client.invoke(op.name, args.clone()).await {
        Ok(v) => Answer::Ok(v),
        Err(e) => Answer::Refused(e),
    }
}

/// Waits until nothing is pending or running and no replay is under way.
async fn settle(app: &common::TestApp) {
    let a = &app.server.app;
    common::wait_for("the server to settle", Duration::from_secs(30), || async {
        let h = app.health().await.overall;
        h.pending + h.running == 0
            && api::replays(a).await.unwrap().iter().all(|r| r.done || r.status.as_str() == "paused")
    })
    .await;
}

#[tokio::test]
async fn every_operation_answers_alike_over_http_and_through_the_window() {
    // No Secret Service: storing a secret is refused alike instead of reaching this machine's keyring.
    std::env::remove_var("DBUS_SESSION_BUS_ADDRESS");
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-12-01T09:00:00Z").unwrap().to_utc();
    let (http_side, window_side) = (seeded(t0).await, seeded(t0).await);
    let token = api::tokens::create(&http_side.server.app.store, OPERATOR, t0).await.unwrap();
    let confirm = Arc::new(ScriptedConfirm::always(true));
    let cx = Context { app: window_side.server.app.clone(), confirm: confirm.clone(), actor: OPERATOR.into() };
    let door = bridge::open(cx, Arc::new(NoEngine)).await.unwrap();
    let client = Client::new(door).unwrap();

    // What differs between the two set-ups by construction: each server's own addresses.
    let own = |app: &common::TestApp| {
        vec![
            app.crm_addr.to_string(),
            app.server.addr.to_string(),
            app.dir.path().display().to_string(),
            app.server.app.config.database.url.clone().unwrap_or_default(),
        ]
    };
    let replacements: Vec<(String, String)> = own(&window_side).into_iter().zip(own(&http_side)).collect();
    // `replace`: the window's side, whose own addresses become the HTTP side's.
    let alike = |answer: Answer, replace: bool| -> Answer {
        let text = |v: &Value| {
            let mut s = v.to_string();
            for (theirs, ours) in replacements.iter().filter(|_| replace) {
                s = s.replace(theirs.as_str(), ours);
            }
            let mut v = serde_json::from_str::<Value>(&s).unwrap();
            unmeasured(&mut v);
            v
        };
        match answer {
            Answer::Ok(v) => Answer::Ok(text(&v)),
            Answer::Refused(v) => Answer::Refused(json!({"code": v["code"], "message": text(&v["message"])})),
        }
    };

    let mut answered = Vec::new();
    let mut refused = Vec::new();
    for op in operations::all() {
        let args = (op.example)();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let (over_http, through_window) = loop {
            let h = alike(over_http(&http_side, &token, op, &args).await, false);
            let w = alike(through_the_window(&client, op, &args).await, true);
            // A read may be asked again until both servers' monitors have caught up; a change is made once.
            if h == w || op.access == Access::Write || tokio::time::Instant::now() > deadline {
                break (h, w);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            over_http, through_window,
            "`{}` answers differently over HTTP (left) and through the window",
            op.name
        );
        match &over_http {
            Answer::Ok(_) => answered.push(op.name),
            Answer::Refused(e) => refused.push(format!("{}: {}", op.name, e)),
        }
        if op.access == Access::Write {
            settle(&http_side).await;
            settle(&window_side).await;
        }
    }
    println!("answered: {answered:?}\nrefused alike: {refused:?}");
    // Every registered operation was called, each once.
    let called: Vec<&str> =
        answered.iter().copied().chain(refused.iter().map(|r| r.split(':').next().unwrap())).collect();
    assert_eq!(called.len(), operations::all().len());
    for op in operations::all() {
        assert!(called.contains(&op.name), "`{}` was not called", op.name);
    }
    // The examples meet the seeded data: most operations do what they are for, not only refuse alike.
    assert!(answered.len() >= 30, "only {} operations answered: refused {refused:?}", answered.len());
    // The window asked a person before each confirmed operation that went ahead.
    let asked = confirm.asked.lock().unwrap().clone();
    let confirmed = operations::all().iter().filter(|op| op.confirmed && answered.contains(&op.name)).count();
    assert_eq!(asked.len(), confirmed, "{asked:#?}");
    http_side.server.shutdown().await.unwrap();
    window_side.server.shutdown().await.unwrap();
}
