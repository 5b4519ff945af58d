//! Ingest over HTTP: what is accepted, what is rejected (and that nothing rejected is stored).

mod common;

use common::*;
use leadline::ingest::signature::sign;
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test]
async fn accepted_then_duplicate_and_nothing_stored_on_bad_input() {
    let app = spawn().await;
    let store = &app.server.app.store;

    // Accepted: 202 with the event id, committed before the reply.
    let raw = lead("L-1").to_string();
    let r = app
        .http
        .post(app.url("/ingest/webform"))
        .header("X-Signature-256", sign(SECRET.as_bytes(), raw.as_bytes()))
        .header("content-type", "application/json")
        .body(raw.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["events"][0]["source_ref"], "L-1");
    assert!(body["events"][0]["event_id"].as_i64().unwrap() > 0);
    assert_eq!(store.count_events().await.unwrap(), 1);

    // Duplicate: 200, nothing new.
    assert_eq!(app.post_webform(&lead("L-1")).await, StatusCode::OK);
    assert_eq!(store.count_events().await.unwrap(), 1);

    // Each bad request gets its status and a JSON {code, message}.
    let cases: Vec<(&str, reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            "unknown source",
            app.http.post(app.url("/ingest/nope")).json(&lead("x")),
            StatusCode::NOT_FOUND,
            "unknown_source",
        ),
        (
            "missing signature",
            app.http.post(app.url("/ingest/webform")).json(&lead("L-2")),
            StatusCode::UNAUTHORIZED,
            "missing_signature",
        ),
        (
            "bad signature",
            app.http
                .post(app.url("/ingest/webform"))
                .header("X-Signature-256", sign(b"wrong", raw.as_bytes()))
                .header("content-type", "application/json")
                .body(lead("L-3").to_string()),
            StatusCode::UNAUTHORIZED,
            "bad_signature",
        ),
        (
            "malformed JSON",
            app.http.post(app.url("/ingest/plain")).header("content-type", "application/json").body("{\"id\": "),
            StatusCode::BAD_REQUEST,
            "malformed_json",
        ),
        (
            "missing id",
            app.http.post(app.url("/ingest/plain")).json(&json!({"name": "x"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "missing_id",
        ),
        (
            "empty id",
            app.http.post(app.url("/ingest/plain")).json(&json!({"id": " "})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "missing_id",
        ),
        (
            "not an object",
            app.http.post(app.url("/ingest/plain")).json(&json!([1])),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "too large",
            app.http.post(app.url("/ingest/plain")).json(&json!({"id": "big", "blob": "x".repeat(5000)})),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
    ];
    for (what, request, status, code) in cases {
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), status, "{what}");
        let body: Value = r.json().await.unwrap_or_else(|e| panic!("{what}: body is not JSON: {e}"));
        assert_eq!(body["code"], code, "{what}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
    }
    assert_eq!(store.count_events().await.unwrap(), 1, "no rejected request stored anything");

    // A chunked body over the limit (no Content-Length) is also refused.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..10).map(|_| Ok(vec![b' '; 1000])).collect();
    let stream = futures_util::stream::iter(chunks);
    let r = app
        .http
        .post(app.url("/ingest/plain"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);

    // Numeric ids are accepted and deduplicated as strings: the same id written as a string is the same lead (its
    // content differs, so it is stored as that lead's next revision, not as a second lead).
    assert_eq!(app.post_plain(&json!({"id": 12345})).await, StatusCode::ACCEPTED);
    assert_eq!(app.post_plain(&json!({"id": 12345})).await, StatusCode::OK, "an exact repeat");
    let before = store.count_events().await.unwrap();
    assert_eq!(app.post_plain(&json!({"id": "12345"})).await, StatusCode::ACCEPTED);
    assert_eq!(store.count_events().await.unwrap(), before, "one lead");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn meta_handshake_signature_and_one_event_per_leadgen_change() {
    let app = spawn().await;
    let store = &app.server.app.store;

    let ok = app
        .http
        .get(app.url("/ingest/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=verify-me"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    let bad = app
        .http
        .get(app.url("/ingest/meta?hub.mode=subscribe&hub.challenge=1&hub.verify_token=guess"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::FORBIDDEN);

    // Meta keeps the leads' answers; the webhook carries only their ids (the first step fetches them).
    for id in ["444000000000001", "444000000000002"] {
        let answers = json!([{"name": "email", "values": [format!("{id}@example.com")]}]);
        app.crm.list_lead("7", id, chrono::Utc::now(), json!({"field_data": answers}));
    }
    let body = json!({"object": "page", "entry": [{"id": 99, "time": 1764460800, "changes": [
        {"field": "leadgen", "value": {"leadgen_id": 444000000000001u64, "page_id": 99, "form_id": 7}},
        {"field": "leadgen", "value": {"leadgen_id": "444000000000002", "page_id": 99, "form_id": 7}},
        {"field": "feed", "value": {}}
    ]}]})
    .to_string();
    let unsigned = app
        .http
        .post(app.url("/ingest/meta"))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), StatusCode::UNAUTHORIZED);
    let forged = app
        .http
        .post(app.url("/ingest/meta"))
        .header("X-Hub-Signature-256", sign(b"not-the-app-secret", body.as_bytes()))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(store.count_events().await.unwrap(), 0);

    let signed = || {
        app.http
            .post(app.url("/ingest/meta"))
            .header("X-Hub-Signature-256", sign(SECRET.as_bytes(), body.as_bytes()))
            .header("content-type", "application/json")
            .body(body.clone())
    };
    let r = signed().send().await.unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["accepted"], 2);
    assert_eq!(v["events"][0]["source_ref"], "444000000000001");
    // Meta retries the same notification: nothing new.
    let again = signed().send().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(store.count_events().await.unwrap(), 2);

    app.wait_settled(std::time::Duration::from_secs(10)).await;
    assert_eq!(app.crm.records_for("meta:444000000000001"), 1);
    assert_eq!(app.crm.records_for("meta:444000000000002"), 1);
    let lead = app.crm.lead_for("meta:444000000000001").unwrap();
    assert_eq!(lead["fields"]["email"], "444000000000001@example.com", "{lead}");
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_same_webhook_sent_concurrently_is_stored_and_delivered_once() {
    let app = spawn().await;
    let body = lead("dup-1");
    let sends = (0..25).map(|_| app.post_webform(&body));
    let statuses = futures_util::future::join_all(sends).await;
    let accepted = statuses.iter().filter(|s| **s == StatusCode::ACCEPTED).count();
    let duplicate = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!((accepted, duplicate), (1, 24), "{statuses:?}");
    app.wait_settled(std::time::Duration::from_secs(10)).await;
    let stats = app.crm.stats();
    assert_eq!(stats.records, 1);
    assert_eq!(stats.rewritten_records, 0);
    assert_eq!(stats.notifications, 1);
    assert_eq!(stats.duplicated_notifications, 0);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_database_failure_is_a_503_never_a_2xx() {
    let app = spawn().await;
    assert_eq!(app.post_plain(&json!({"id": "before"})).await, StatusCode::ACCEPTED);
    // The database goes away (disk gone, file locked by something else): nothing can be stored.
    app.server.app.store.close().await;
    let r = app.http.post(app.url("/ingest/plain")).json(&json!({"id": "during"})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["retry-after"], "5");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "storage_unavailable");
    assert!(body["message"].as_str().unwrap().contains("send it again"));
}
