//! People, not one shared token: each operator's token acts under its name in the audit, and a revoked token stops
//! working at once — on its next request and on a live feed it holds open.

mod common;

use std::time::Duration;

use common::*;
use reqwest::StatusCode;

#[tokio::test]
async fn each_operator_acts_under_their_own_name() {
    let app = spawn().await;
    let now = chrono::Utc::now();
    let store = &app.server.app.store;
    let alice = leadline::api::tokens::create(store, "alice", now).await.unwrap();
    let bob = leadline::api::tokens::create(store, "bob@example.com", now).await.unwrap();
    assert_ne!(alice, bob);

    let paused = app.http.post(app.url("/api/targets/crm/pause")).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(paused.status(), StatusCode::OK);
    assert_eq!(paused.json::<serde_json::Value>().await.unwrap()["paused_by"], "alice");
    let resumed = app.http.post(app.url("/api/targets/crm/resume")).bearer_auth(&bob).send().await.unwrap();
    assert_eq!(resumed.status(), StatusCode::OK);
    let again = app.http.post(app.url("/api/targets/crm/pause")).bearer_auth(&bob).send().await.unwrap();
    assert_eq!(again.json::<serde_json::Value>().await.unwrap()["paused_by"], "bob@example.com");
    // The browser token still works and keeps its audit name.
    let targets: serde_json::Value = app.api_get("/api/targets").send().await.unwrap().json().await.unwrap();
    assert_eq!(targets[0]["paused_by"], "bob@example.com");

    // One working token per name; the browser token's name is reserved.
    let twice = leadline::api::tokens::create(store, "alice", now).await.unwrap_err();
    assert!(twice.to_string().contains("already has a token"), "{twice}");
    assert!(leadline::api::tokens::create(store, "default", now).await.is_err());
    assert!(leadline::api::tokens::create(store, "a/b", now).await.is_err());
    let names: Vec<String> = leadline::api::tokens::list(store).await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["alice", "bob@example.com", "default"]);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_revoked_token_is_refused_at_once_and_its_live_feed_closes() {
    let app = spawn().await;
    let store = &app.server.app.store;
    let alice = leadline::api::tokens::create(store, "alice", chrono::Utc::now()).await.unwrap();
    let health = app.http.get(app.url("/api/health")).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);

    // Alice has the live feed open when her token is revoked.
    let mut feed = app.http.get(app.url("/api/events")).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(feed.status(), StatusCode::OK);
    let first = tokio::time::timeout(Duration::from_secs(5), feed.chunk()).await.unwrap().unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("data: "), "the feed sent nothing first");
    leadline::api::tokens::revoke(store, "alice", chrono::Utc::now()).await.unwrap();

    let refused = app.http.get(app.url("/api/health")).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let why: serde_json::Value = refused.json().await.unwrap();
    assert!(why.to_string().contains("revoked"), "{why}");
    // The open feed ends within the recheck interval (health events may still arrive until then).
    let ended = tokio::time::timeout(leadline::api::tokens::LIVE_FEED_RECHECK * 3, async {
        while let Ok(Some(_)) = feed.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the live feed stayed open after its token was revoked");
    // Others are not affected; revoking twice says there is nothing to revoke.
    assert_eq!(app.api_get("/api/health").send().await.unwrap().status(), StatusCode::OK);
    assert!(leadline::api::tokens::revoke(store, "alice", chrono::Utc::now()).await.is_err());
    // A new token for the same person works; the old one stays refused.
    let renewed = leadline::api::tokens::create(store, "alice", chrono::Utc::now()).await.unwrap();
    let ok = app.http.get(app.url("/api/health")).bearer_auth(&renewed).send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let old = app.http.get(app.url("/api/health")).bearer_auth(&alice).send().await.unwrap();
    assert_eq!(old.status(), StatusCode::UNAUTHORIZED);
    app.server.shutdown().await.unwrap();
}
