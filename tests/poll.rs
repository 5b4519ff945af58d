//! Poll mode against a mock of Meta's Graph API and a generic list endpoint on loopback: pages followed, Graph's
//! throttling backed off, and a restart in the middle of a pass — every lead stored once and delivered to the CRM
//! once, and leads created while Leadline was down found by the next poll; and the alerts of a poll that keeps
//! failing, raised and resolved by the rules.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use common::{config_head, idempotent_crm, parse_config, wait_for};
use leadline::demo::mock_crm::{MockCrm, GRAPH_TOKEN};
use leadline::runtime::Clock;
use leadline::server::{Server, StartOptions};
use serde_json::{json, Value};

/// Leads per page: small, so a handful of leads spans several pages.
const PAGE: usize = 2;

/// A mock of the two lists a source can be polled through.
///
/// Graph (Marketing API "Retrieving leads", Graph API "Paginated results" and "Handling errors"): `GET
/// /graph/{version}/{form_id}/leads?fields=…&filtering=[{"field":"time_created","operator":"GREATER_THAN",
/// "value":<unix>}]&access_token=…[&after=<cursor>]` answers `{"data": [lead objects {id, created_time, ad_id,
/// form_id, field_data}], "paging": {"cursors": {"before", "after"}, "next"}}`, newest first; `next` is present
/// only when another page follows, and a cursor points at a lead (here its id in hex), so leads created
/// meanwhile do not shift the pages. A throttled answer is HTTP 400 with `{"error": {"message", "type":
/// "OAuthException", "code": 17, "error_subcode": 2446079, "is_transient": true, "fbtrace_id"}}`.
///
/// Generic: `GET /list?since=<unix>[&page=n]` answers `{"items": [...], "next": url|null}`.
#[derive(Clone, Default)]
struct MockSource {
    inner: Arc<Mutex<Inner>>,
    /// Released when the test no longer holds later pages.
    released: Arc<tokio::sync::Notify>,
}

#[derive(Default)]
struct Inner {
    /// (id, created, answers), in the order they were created.
    leads: Vec<(String, i64, Value)>,
    /// Requests for a page after the first are left unanswered (Leadline "stopped mid-pass").
    hold_later_pages: bool,
    /// The next this many list requests are answered "throttled".
    throttle: u32,
    /// Every list request is answered with this status (503: the source is down; 401: it refuses the token).
    fail_with: Option<u16>,
    /// Every list request: the page asked for (`after` cursor or generic page number) and whether it was throttled.
    requests: Vec<(Option<String>, bool)>,
}

impl MockSource {
    async fn start() -> (MockSource, SocketAddr) {
        let mock = MockSource::default();
        let app = Router::new()
            .route("/graph/{version}/{form_id}/leads", get(graph_leads))
            .route("/list", get(generic_list))
            .with_state(mock.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (mock, addr)
    }

    fn add(&self, id: &str, created: DateTime<Utc>) {
        let answers = json!([
            {"name": "full_name", "values": ["Ada Lovelace"]},
            {"name": "email", "values": [format!("{id}@example.com")]},
            {"name": "phone_number", "values": ["+4915112345678"]}
        ]);
        self.inner.lock().unwrap().leads.push((id.to_string(), created.timestamp(), answers));
    }

    fn hold_later_pages(&self, hold: bool) {
        self.inner.lock().unwrap().hold_later_pages = hold;
        if !hold {
            self.released.notify_waiters();
        }
    }

    fn throttle_next(&self, n: u32) {
        self.inner.lock().unwrap().throttle = n;
    }

    fn fail_with(&self, status: Option<u16>) {
        self.inner.lock().unwrap().fail_with = status;
    }

    fn requests(&self) -> Vec<(Option<String>, bool)> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// Logs a request; answers it "throttled" if told to, or holds it while later pages are held.
    async fn gate(&self, page: Option<String>) -> Option<Response> {
        let (throttled, hold) = {
            let mut inner = self.inner.lock().unwrap();
            if let Some(status) = inner.fail_with {
                inner.requests.push((page, false));
                return Some(StatusCode::from_u16(status).unwrap().into_response());
            }
            let throttled = inner.throttle > 0;
            inner.throttle = inner.throttle.saturating_sub(1);
            inner.requests.push((page.clone(), throttled));
            (throttled, page.is_some() && inner.hold_later_pages && !throttled)
        };
        if throttled {
            let body = json!({"error": {"message": "(#17) User request limit reached", "type": "OAuthException",
                "code": 17, "error_subcode": 2446079, "is_transient": true, "fbtrace_id": "mock"}});
            return Some((StatusCode::BAD_REQUEST, Json(body)).into_response());
        }
        if hold {
            // Never answered while held: the Leadline that asked is stopped meanwhile.
            let released = self.released.notified();
            if self.inner.lock().unwrap().hold_later_pages {
                released.await;
            }
            return Some(StatusCode::SERVICE_UNAVAILABLE.into_response());
        }
        None
    }

    /// Leads created after `since`, newest first.
    fn listed(&self, since: i64) -> Vec<(String, i64, Value)> {
        let mut leads: Vec<_> = self.inner.lock().unwrap().leads.iter().filter(|l| l.1 > since).cloned().collect();
        leads.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        leads
    }
}

/// An opaque cursor pointing at a lead (Graph's are opaque strings too).
fn cursor(id: &str) -> String {
    id.bytes().map(|b| format!("{b:02x}")).collect()
}

async fn graph_leads(
    State(mock): State<MockSource>,
    UrlPath((version, form_id)): UrlPath<(String, String)>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    if q.get("access_token").map(String::as_str) != Some(GRAPH_TOKEN) {
        let body = json!({"error": {"message": "Invalid OAuth access token.", "type": "OAuthException", "code": 190,
            "fbtrace_id": "mock"}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    if let Some(r) = mock.gate(q.get("after").cloned()).await {
        return r;
    }
    let since = q
        .get("filtering")
        .and_then(|f| serde_json::from_str::<Value>(f).ok())
        .and_then(|f| f[0]["value"].as_i64())
        .unwrap_or(0);
    let all = mock.listed(since);
    let start = match q.get("after") {
        Some(after) => match all.iter().position(|l| cursor(&l.0) == *after) {
            Some(i) => i + 1,
            None => {
                let body = json!({"error": {"message": "Invalid cursor", "type": "GraphMethodException",
                    "code": 100, "fbtrace_id": "mock"}});
                return (StatusCode::BAD_REQUEST, Json(body)).into_response();
            }
        },
        None => 0,
    };
    let page: Vec<_> = all.iter().skip(start).take(PAGE).collect();
    let data: Vec<Value> = page
        .iter()
        .map(|(id, created, answers)| {
            let created = DateTime::from_timestamp(*created, 0).unwrap().format("%Y-%m-%dT%H:%M:%S+0000").to_string();
            json!({"id": id, "created_time": created, "ad_id": "6001", "form_id": form_id, "field_data": answers})
        })
        .collect();
    let mut body = json!({"data": data});
    if let (Some(first), Some(last)) = (page.first(), page.last()) {
        body["paging"] = json!({"cursors": {"before": cursor(&first.0), "after": cursor(&last.0)}});
        if start + PAGE < all.len() {
            let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
            let mut next = reqwest::Url::parse(&format!("http://{host}/graph/{version}/{form_id}/leads")).unwrap();
            for (k, v) in q.iter().filter(|(k, _)| *k != "after") {
                next.query_pairs_mut().append_pair(k, v);
            }
            next.query_pairs_mut().append_pair("after", &cursor(&last.0));
            body["paging"]["next"] = Value::String(next.to_string());
        }
    }
    Json(body).into_response()
}

async fn generic_list(
    State(mock): State<MockSource>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let page_no: usize = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(0);
    if let Some(r) = mock.gate((page_no > 0).then(|| page_no.to_string())).await {
        return r;
    }
    let since: i64 = q.get("since").and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut all = mock.listed(since);
    all.reverse(); // oldest first, as many list endpoints answer
    let items: Vec<Value> = all
        .iter()
        .skip(page_no * PAGE)
        .take(PAGE)
        .map(|(id, created, _)| {
            json!({"id": id, "name": "Ada Lovelace", "email": format!("{id}@example.com"), "phone": "+4915112345678",
                   "created": created})
        })
        .collect();
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    let next =
        ((page_no + 1) * PAGE < all.len()).then(|| format!("http://{host}/list?since={since}&page={}", page_no + 1));
    Json(json!({"items": items, "next": next})).into_response()
}

/// A config polling `source` (`"fb"`: a Meta form on the mock Graph; `"list"`: the generic list) every second,
/// delivering to the mock CRM.
fn config(source: &str, mock: SocketAddr, crm: SocketAddr, db: &Path) -> String {
    let sources = match source {
        "fb" => format!(
            r#"
[sources.fb]
kind = "meta"
route = ["meta_fetch", "crm"]
page_id = "99"

[sources.fb.poll]
form_ids = ["7"]
interval_seconds = 1

[targets.meta_fetch]
kind = "meta_lead"
url = "http://{mock}/graph"
access_token_env = "TEST_GRAPH_TOKEN"
timeout_ms = 1000
"#
        ),
        _ => format!(
            r#"
[sources.list]
route = ["crm"]

[sources.list.poll]
list_url = "http://{mock}/list?since={{since}}"
next_pointer = "/next"
interval_seconds = 1
"#
        ),
    };
    config_head(db)
        + &format!(
            r#"{sources}
{crm_target}
"#,
            crm_target = idempotent_crm(crm),
        )
}

async fn start(source: &str, mock: SocketAddr, crm: SocketAddr, db: &Path) -> Server {
    Server::start(parse_config(&config(source, mock, crm, db))).await.unwrap()
}

async fn stored_refs(server: &Server, source: &str) -> Vec<(String, String)> {
    let events = server.app.store.stored_events().await.unwrap();
    events.into_iter().filter(|e| e.source == source).map(|e| (e.source_ref, e.via)).collect()
}

async fn settled(server: &Server) {
    wait_for("the queue to settle", Duration::from_secs(20), async || {
        let o = leadline::api::health(&server.app).await.unwrap().queue.overall;
        o.pending + o.running == 0
    })
    .await;
}

/// The scenario for either kind of source: 7 leads over 4 pages; Leadline stops while asking for the second page
/// (after storing the first); 2 leads are created while it is down; the new Leadline's first answer is
/// "throttled". Every lead must be stored once (`via = poll`) and reach the CRM once, and the pass must go on
/// from the page it stopped at rather than start over.
async fn restart_mid_pass(source: &str) {
    let (mock, mock_addr) = MockSource::start().await;
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("leadline.db");
    let t0 = Utc::now() - chrono::Duration::minutes(30);
    let before: Vec<String> = (0..7).map(|i| format!("8100000000000000{i:02}")).collect();
    for (i, id) in before.iter().enumerate() {
        mock.add(id, t0 + chrono::Duration::minutes(i as i64));
    }

    // The first Leadline stores the first page, then is stopped while it waits for the second.
    mock.hold_later_pages(true);
    let first = start(source, mock_addr, crm_addr, &db).await;
    wait_for("the request for the second page", Duration::from_secs(10), async || {
        mock.requests().iter().any(|(page, _)| page.is_some())
    })
    .await;
    let held = mock.requests().into_iter().find_map(|(page, _)| page).unwrap();
    let stored = stored_refs(&first, source).await;
    assert_eq!(stored.len(), PAGE, "the first page is stored before the second is asked for: {stored:?}");
    let form = if source == "fb" { "7" } else { "" };
    let cursor = first.app.store.poll_cursor(source, form).await.unwrap().expect("a cursor");
    let pass = cursor.pass.expect("a pass under way");
    let place =
        if source == "fb" { pass.after.clone() } else { pass.after.rsplit("page=").next().unwrap().to_string() };
    assert_eq!(place, held, "the stored place is the page asked for: {pass:?}");
    // A polled source is not a silent one: its polled leads are its volume.
    assert_eq!(first.app.store.live_events_since(source, t0).await.unwrap(), PAGE as u64);
    first.shutdown().await.unwrap();

    // While Leadline is down: two new leads, and Graph throttles the next request.
    let during: Vec<String> = (0..2).map(|i| format!("8200000000000000{i:02}")).collect();
    for id in &during {
        mock.add(id, Utc::now() - chrono::Duration::seconds(5));
    }
    mock.hold_later_pages(false);
    mock.throttle_next(1);
    let asked_before = mock.requests().len();

    let second = start(source, mock_addr, crm_addr, &db).await;
    let all: Vec<String> = before.iter().chain(&during).cloned().collect();
    wait_for("every lead to be stored", Duration::from_secs(20), async || {
        stored_refs(&second, source).await.len() >= all.len()
    })
    .await;
    settled(&second).await;

    // The new Leadline went on from the stored page: throttled there first, then asked for the same page again.
    let after_restart: Vec<_> = mock.requests().into_iter().skip(asked_before).collect();
    assert_eq!(after_restart[0], (Some(held.clone()), true), "resumed at the held page: {after_restart:?}");
    assert_eq!(after_restart[1], (Some(held.clone()), false), "the same page after the back-off: {after_restart:?}");

    // Every lead stored exactly once, marked polled, and delivered once.
    let mut stored = stored_refs(&second, source).await;
    stored.sort();
    let mut expected: Vec<(String, String)> = all.iter().map(|id| (id.clone(), "poll".to_string())).collect();
    expected.sort();
    assert_eq!(stored, expected);
    for id in &all {
        assert_eq!(crm.records_for(&format!("{source}:{id}")), 1, "{id} reaches the CRM once");
    }
    if source == "fb" {
        let lead = crm.lead_for(&format!("fb:{}", during[0])).unwrap();
        assert_eq!(lead["fields"]["email"], format!("{}@example.com", during[0]), "listed with its answers");
    }
    assert_eq!(crm.stats().duplicated_external_ids, 0);

    // Finding leads is what polling is for: no "webhooks are lost" alert.
    let alerts = leadline::api::alerts(&second.app).await.unwrap();
    assert!(alerts.iter().all(|a| a.kind.as_str() != "reconciliation_found"), "{alerts:?}");
    // The Sources page: polled, with its last and next poll.
    let view = leadline::api::sources(&second.app).await.unwrap().into_iter().find(|s| s.status.source == source);
    let poll = view.and_then(|v| v.poll).expect("shown as polled");
    let (last, next) = (poll.last_poll_at.expect("a last poll"), poll.next_poll_at.expect("a next poll"));
    assert!(next > last, "next {next} after last {last}");
    assert_eq!(poll.polled_7d, all.len() as i64);

    // Later polls find nothing new and store nothing twice.
    let requests = mock.requests().len();
    wait_for("two more polls", Duration::from_secs(10), async || mock.requests().len() >= requests + 2).await;
    assert_eq!(stored_refs(&second, source).await.len(), all.len());
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn meta_poll_survives_a_restart_mid_pass_and_throttling_with_every_lead_once() {
    restart_mid_pass("fb").await;
}

#[tokio::test]
async fn generic_poll_survives_a_restart_mid_pass_and_finds_leads_created_while_down() {
    restart_mid_pass("list").await;
}

#[tokio::test]
async fn a_polled_meta_source_without_webhook_secrets_takes_no_webhooks() {
    let (_mock, mock_addr) = MockSource::start().await;
    let (_crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = start("fb", mock_addr, crm_addr, &dir.path().join("leadline.db")).await;
    let body = json!({"object": "page", "entry": []});
    let status = reqwest::Client::new()
        .post(format!("http://{}/ingest/fb", server.addr))
        .json(&body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404, "nothing to check a signature against: no webhook is taken");
    server.shutdown().await.unwrap();
}

/// The promise of `poll::failure_alert`: a poll that keeps failing raises `source_failing` once it has failed for
/// `failing_alert_minutes` (15), one alert however many polls fail, counted from the first failure; a refused
/// token raises `credentials` at once; a good poll resolves both and reads what was created meanwhile. Polls are
/// driven at set times on the server's manual clock (its own schedule polls at the same times, every hour).
/// `auth`: the list takes a bearer token from `LIST_TOKEN` (the credential alert names it), or none (the alert is
/// the source's).
async fn failing_poll_alerts_by_the_rules(auth: bool) {
    let (mock, mock_addr) = MockSource::start().await;
    let (_crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut text = config("list", mock_addr, crm_addr, &dir.path().join("leadline.db"))
        .replace("interval_seconds = 1", "interval_seconds = 3600");
    if auth {
        text = text
            .replace("next_pointer = \"/next\"", "next_pointer = \"/next\"\nauth = { bearer_env = \"LIST_TOKEN\" }");
    }
    let mut config = parse_config(&text);
    config.inline_secrets.insert("LIST_TOKEN".into(), "list-token".into());
    let t0: DateTime<Utc> = "2026-03-02T10:00:00Z".parse().unwrap();
    let at = |m: i64| t0 + chrono::Duration::minutes(m);
    mock.fail_with(Some(503));
    let server = Server::start_with(config, StartOptions { clock: Some(Clock::manual(t0)), ..Default::default() })
        .await
        .unwrap();
    let app = &server.app;
    let client = leadline::reconcile::client();
    let notifier = app.notifier.clone();
    let poll = async |m: i64| {
        app.clock.set(at(m));
        leadline::poll::poll(app, &app.ingest, &client, notifier.as_ref(), "list", at(m)).await
    };
    // The source changes at minute `m`: the clock is set first, so that a poll of the server's own schedule
    // meanwhile sees what a poll at `m` sees.
    let switch = |m: i64, status: Option<u16>| {
        app.clock.set(at(m));
        mock.fail_with(status);
    };
    let alerts = async |kind: &str| {
        let all = leadline::api::alerts(app).await.unwrap();
        all.into_iter().filter(|a| a.kind.as_str() == kind).collect::<Vec<_>>()
    };
    let last_error = async || {
        let sources = leadline::api::sources(app).await.unwrap();
        sources.into_iter().find(|s| s.status.source == "list").and_then(|s| s.poll).unwrap().last_error
    };

    // The source is down: each poll fails and says why; no alert before 15 minutes of failing.
    for m in [0, 5, 14] {
        let e = poll(m).await.unwrap_err().to_string();
        assert!(e.contains("503"), "{e}");
    }
    assert!(last_error().await.is_some_and(|e| e.contains("503")), "the Sources page says why");
    assert!(alerts("source_failing").await.is_empty(), "not before failing_alert_minutes");
    assert!(poll(15).await.is_err());
    let failing = alerts("source_failing").await;
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0].title, "Leadline cannot poll list for 15 min: new leads are waiting there");
    assert_eq!(failing[0].severity.as_str(), "critical");
    assert!(failing[0].detail.contains("Every poll since 10:00 UTC failed"), "{}", failing[0].detail);
    assert!(failing[0].resolved_at.is_none());
    assert!(poll(30).await.is_err());
    let failing = alerts("source_failing").await;
    assert_eq!(failing.len(), 1, "one alert per incident: {failing:?}");
    assert!(failing[0].title.contains("for 30 min"), "{}", failing[0].title);
    assert!(alerts("credentials").await.is_empty(), "an unreachable source is not a refused token");

    // It answers again: the next poll reads the lead created meanwhile and resolves the alert.
    mock.add("830000000000000001", at(20));
    switch(31, None);
    poll(31).await.unwrap();
    let stored = stored_refs(&server, "list").await;
    assert_eq!(stored, [("830000000000000001".to_string(), "poll".to_string())]);
    let failing = alerts("source_failing").await;
    assert!(failing.len() == 1 && failing[0].resolved_at.is_some(), "{failing:?}");
    assert_eq!(last_error().await, None);

    // A second incident counts from its own first failure, not from the first incident's.
    switch(40, Some(503));
    for m in [40, 54] {
        assert!(poll(m).await.is_err());
    }
    assert!(alerts("source_failing").await.iter().all(|a| a.resolved_at.is_some()), "14 min into the second");
    assert!(poll(55).await.is_err());
    let open: Vec<_> = alerts("source_failing").await.into_iter().filter(|a| a.resolved_at.is_none()).collect();
    assert_eq!(open.len(), 1, "{open:?}");
    assert!(open[0].detail.contains("Every poll since 10:40 UTC failed"), "{}", open[0].detail);
    switch(56, None);
    poll(56).await.unwrap();
    assert!(alerts("source_failing").await.iter().all(|a| a.resolved_at.is_some()));

    // The source refuses the token: a credentials alert at once, naming where the token goes; a good poll resolves
    // it.
    switch(60, Some(401));
    assert!(poll(60).await.is_err());
    let credential = if auth { "LIST_TOKEN" } else { "list" };
    let refused = alerts("credentials").await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].key, credential);
    assert_eq!(refused[0].severity.as_str(), "critical");
    if auth {
        assert_eq!(refused[0].title, "list refused Leadline's access token: its new leads cannot be polled");
        assert!(refused[0].detail.contains("in the environment variable LIST_TOKEN"), "{}", refused[0].detail);
    } else {
        assert_eq!(refused[0].title, "list refused Leadline's polls: its new leads cannot be polled");
        assert!(refused[0].detail.contains("with `auth` in [sources.list.poll]"), "{}", refused[0].detail);
    }
    assert!(refused[0].resolved_at.is_none());
    assert_eq!((refused[0].notifications, refused[0].notified_at), (1, Some(at(60))), "announced at once");
    switch(61, None);
    poll(61).await.unwrap();
    let refused = alerts("credentials").await;
    assert!(refused.len() == 1 && refused[0].resolved_at.is_some(), "resolved by a good poll: {refused:?}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failing_poll_alerts_by_the_rules_and_a_good_one_resolves_it() {
    failing_poll_alerts_by_the_rules(true).await;
}

#[tokio::test]
async fn a_refused_list_without_a_named_token_is_resolved_by_a_good_poll_too() {
    failing_poll_alerts_by_the_rules(false).await;
}

#[test]
fn poll_settings_are_checked() {
    let base = |extra: &str| {
        format!(
            r#"
[sources.fb]
kind = "meta"
route = ["meta_fetch", "crm"]
{extra}

[targets.meta_fetch]
kind = "meta_lead"
url = "http://127.0.0.1:9/graph"
access_token_env = "TOKEN"

[targets.crm]
url = "http://127.0.0.1:9/crm/{{external_id}}"
strategy = "upsert"
"#
        )
    };
    let parse = |text: String| leadline::config::Config::parse(&text, Path::new("t.toml")).map_err(|e| e.to_string());
    // Polled: no webhook secrets needed, and the defaults are a minute apart with a minute of overlap.
    let c = parse(base("[sources.fb.poll]\nform_ids = [\"7\"]")).unwrap();
    let p = c.sources["fb"].poll.as_ref().unwrap();
    assert_eq!((p.interval_seconds, p.overlap_seconds), (60, 60));
    // Fed by webhooks: the app secret is still required.
    let e = parse(base("")).unwrap_err();
    assert!(e.contains("app_secret_env"), "{e}");
    // Polling is the listing: no reconciliation beside it.
    let e =
        parse(base("[sources.fb.poll]\nform_ids = [\"7\"]\n[sources.fb.reconcile]\nform_ids = [\"7\"]")).unwrap_err();
    assert!(e.contains("sources.fb.reconcile"), "{e}");
    // A form to poll, an interval above zero, and both webhook secrets or neither.
    let e = parse(base("[sources.fb.poll]\nform_ids = []")).unwrap_err();
    assert!(e.contains("sources.fb.poll.form_ids"), "{e}");
    let e = parse(base("[sources.fb.poll]\nform_ids = [\"7\"]\ninterval_seconds = 0")).unwrap_err();
    assert!(e.contains("sources.fb.poll.interval_seconds"), "{e}");
    let e = parse(base("app_secret_env = \"S\"\n[sources.fb.poll]\nform_ids = [\"7\"]")).unwrap_err();
    assert!(e.contains("verify_token_env"), "{e}");
}
