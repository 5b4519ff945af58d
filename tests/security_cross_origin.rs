//! A cross-origin `text/plain` or form post cannot inject leads (ingest requires JSON).
//!
//! This test once hung in one run in three, at shutdown: aborting the monitor while it was starting a write
//! transaction left SQLite's one write connection in a transaction nobody owned, so the worker could never write
//! again (see `store::sqlite::Db::begin_write`).

mod common;

use common::*;
use reqwest::StatusCode;

#[tokio::test]
async fn a_cross_origin_text_plain_or_form_post_is_refused() {
    let app = spawn().await;
    // What a web page can send to another origin without a preflight: text/plain, a form, or nothing declared.
    for content_type in
        [Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data; boundary=x"), None]
    {
        let mut r = app
            .http
            .post(app.url("/ingest/plain"))
            .header("origin", "https://evil.example")
            .body(lead("X-1").to_string());
        if let Some(ct) = content_type {
            r = r.header("content-type", ct);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{content_type:?}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["code"], "unsupported_media_type");
    }
    assert_eq!(app.server.app.store.count_events().await.unwrap(), 0, "nothing was stored");
    // JSON (with a charset, or a +json type) is accepted.
    for ct in ["application/json; charset=utf-8", "application/vnd.partner+json"] {
        let r = app.http.post(app.url("/ingest/plain")).header("content-type", ct).body(lead(ct).to_string());
        assert_eq!(r.send().await.unwrap().status(), StatusCode::ACCEPTED, "{ct}");
    }
    app.server.shutdown().await.unwrap();
}
