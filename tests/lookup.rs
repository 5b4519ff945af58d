//! The lead lookup through HTTP: any lead — delivered or a dead letter — is found by its e-mail, a phone
//! fragment, its source id or its CRM id; its story lists every step with its attempts and CRM record; personal
//! data is masked until an audited reveal.

mod common;

use std::time::Duration;

use common::{idempotent_crm, spawn_with, wait_for};
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test]
async fn any_lead_is_found_and_its_story_told_masked_until_revealed() {
    let app =
        spawn_with(|crm| format!("{}record_url = \"https://crm.example.com/leads/{{crm_id}}\"\n", idempotent_crm(crm)))
            .await;
    let get = async |path: &str| -> (StatusCode, Value) {
        let r = app.api_get(path).send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap())
    };
    // One lead is delivered to both steps; then the CRM refuses national phone numbers and the next one is a dead
    // letter.
    let delivered =
        json!({"id": "FORM-1", "name": "Eve Example", "email": "eve1@example.com", "phone": "+49 151 2345678"});
    assert_eq!(app.post_webform(&delivered).await, StatusCode::ACCEPTED);
    app.wait_settled(Duration::from_secs(20)).await;
    app.crm.set_behaviour(leadline::demo::mock_crm::Behaviour { strict_phone: true, ..Default::default() });
    let refused = json!({"id": "FORM-2", "name": "Bob Builder", "email": "bob@example.com", "phone": "0171 998877"});
    assert_eq!(app.post_webform(&refused).await, StatusCode::ACCEPTED);
    wait_for("the dead letter", Duration::from_secs(20), async || app.health().await.overall.dead_open == 1).await;

    let find = async |q: &str| -> Vec<String> {
        let path = format!("/api/leads?q={}", leadline::targets::vendor::encode_component(q));
        let (status, body) = get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        body["items"].as_array().unwrap().iter().map(|m| m["source_ref"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(find("EVE1@example.com").await, ["FORM-1"], "by e-mail, in any case");
    assert_eq!(find("0151 234").await, ["FORM-1"], "by a phone fragment written the national way");
    assert_eq!(find("998877").await, ["FORM-2"], "the dead letter too");
    assert_eq!(find("FORM-2").await, ["FORM-2"], "by the source's id");
    assert_eq!(find("builder").await, ["FORM-2"], "by name");
    let (_, by_email) = get("/api/leads?q=eve1%40example.com").await;
    let first = &by_email["items"][0];
    assert_eq!((first["status"].as_str(), first["steps"].as_i64()), (Some("delivered"), Some(2)));
    assert_eq!(first["via"], "webhook");
    let id = first["event_id"].as_i64().unwrap();

    // Its story: both steps, each with its attempt and the CRM's record id, linked into the CRM.
    let (status, story) = get(&format!("/api/leads/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(story["revealed"], false);
    assert_eq!(story["payload"]["email"], "e•••@e••••••.com");
    assert!(!story.to_string().contains("eve1@example.com"), "{story}");
    let steps = story["steps"].as_array().unwrap();
    assert_eq!(steps.iter().map(|s| s["target"].as_str().unwrap()).collect::<Vec<_>>(), ["crm", "notify"]);
    assert!(steps.iter().all(|s| s["state"] == "delivered"), "{steps:?}");
    assert!(steps.iter().all(|s| !s["attempts_timeline"].as_array().unwrap().is_empty()), "{steps:?}");
    let crm_id = steps[0]["crm_id"].as_str().expect("the CRM's record id").to_string();
    assert_eq!(story["crm_urls"][0], format!("https://crm.example.com/leads/{crm_id}"));
    assert_eq!(story["crm_urls"][1], Value::Null, "notify has no record_url");
    assert_eq!(find(&crm_id).await, ["FORM-1"], "by the CRM's record id");

    // The dead letter's story: the refused step with the CRM's answer, masked; the next step waits behind it.
    let dead_id = get("/api/leads?q=FORM-2").await.1["items"][0]["event_id"].as_i64().unwrap();
    let (_, dead) = get(&format!("/api/leads/{dead_id}")).await;
    assert_eq!(dead["status"], "dead_letter");
    assert_eq!(dead["steps"][0]["state"], "dead");
    assert_eq!(dead["steps"][0]["resolution"], "open");
    assert_eq!(dead["steps"][1]["state"], "waiting");
    assert!(!dead.to_string().contains("998877"), "the refused phone is masked everywhere: {dead}");

    // Revealing needs a reason and is audited like a dead letter's reveal.
    let reveal = |body: Value| {
        app.http.post(app.url(&format!("/api/leads/{id}/reveal"))).bearer_auth(app.token()).json(&body).send()
    };
    assert_eq!(reveal(json!({"reason": " "})).await.unwrap().status(), StatusCode::BAD_REQUEST);
    let r = reveal(json!({"reason": "Eve asked whether her form arrived"})).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let shown: Value = r.json().await.unwrap();
    assert_eq!(shown["revealed"], true);
    assert_eq!(shown["payload"]["email"], "eve1@example.com");
    let (_, again) = get(&format!("/api/leads/{id}")).await;
    assert_eq!(again["revealed"], false);
    assert_eq!(again["reveals"][0]["actor"], leadline::api::http::BROWSER_ACTOR);
    assert_eq!(again["reveals"][0]["reason"], "Eve asked whether her form arrived");

    // An empty search is refused; an unknown lead is not found.
    assert_eq!(get("/api/leads?q=%20").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(get("/api/leads/999999").await.0, StatusCode::NOT_FOUND);
    assert!(find("nobody@nowhere.example").await.is_empty());
    app.server.shutdown().await.unwrap();
}
