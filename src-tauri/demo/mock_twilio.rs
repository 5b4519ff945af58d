//! A mock of Twilio's Messages API on loopback, for the `sms` step's tests and the demo: it keeps every message it
//! created, lists them, counts them per recipient, posts signed status callbacks, and misbehaves on command
//! (answers lost after the message was created, slow answers, rate limits, invalid and unsubscribed numbers,
//! unreachable handsets).
//!
//! It follows the documented shapes (twilio.com/docs "Messages resource", "Error and warning dictionary",
//! "Webhooks security"): `POST /2010-04-01/Accounts/{sid}/Messages.json` with Basic auth and a form (`To`, `From`
//! or `MessagingServiceSid`, `Body`, `StatusCallback`) → `201 {"sid":"SM…","status":"queued",…}`; errors
//! `{"code","message","more_info","status"}`; `GET …/Messages.json?To=…&PageSize=…` newest first; status
//! callbacks form-encoded (`MessageSid`, `MessageStatus`, `ErrorCode`, `To`, `AccountSid`) and signed in
//! `X-Twilio-Signature`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use serde_json::json;

use crate::features::targets::sms::wire;

/// The account and its auth token.
pub const ACCOUNT_SID: &str = "AC00000000000000000000000000000001";
pub const AUTH_TOKEN: &str = "twilio-test-auth-token";

/// How the mock misbehaves. `Default` is healthy.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The next this-many messages are created, then their answer is held for `hang` (past the client's timeout).
    pub lose_answers: u32,
    pub hang: Duration,
    /// Every answer waits this long.
    pub latency: Duration,
    /// The next this-many sends are refused with 429 / 20429.
    pub rate_limited: u32,
    /// Numbers refused with 21211 (not a valid number).
    pub invalid: BTreeSet<String>,
    /// Numbers refused with 21610 (the recipient replied STOP).
    pub unsubscribed: BTreeSet<String>,
    /// Numbers whose messages are created, then reported `undelivered` with 30003.
    pub unreachable: BTreeSet<String>,
    /// The region is not enabled: every send is refused with 21408.
    pub region_disabled: bool,
    /// Lists hold at most this many messages a page (0: as asked); the rest follow through `next_page_uri`.
    pub page_size_cap: usize,
    /// No status callback is posted (they are lost on the way).
    pub no_callbacks: bool,
}

/// A message the mock created.
#[derive(Debug, Clone)]
pub struct Message {
    pub sid: String,
    pub to: String,
    pub body: String,
    pub status_callback: Option<String>,
    pub date_created: chrono::DateTime<chrono::Utc>,
}

#[derive(Default)]
struct Inner {
    messages: Vec<Message>,
    refused: u64,
    lists: u64,
    faults: Faults,
}

#[derive(Clone, Default)]
pub struct MockTwilio {
    inner: Arc<Mutex<Inner>>,
    http: reqwest::Client,
}

impl MockTwilio {
    /// Starts the mock on `addr` (port 0: any free port).
    pub async fn start(addr: SocketAddr) -> anyhow::Result<(MockTwilio, SocketAddr)> {
        let mock = MockTwilio::default();
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let app = mock.router();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "mock Twilio stopped");
            }
        });
        Ok((mock, local))
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/2010-04-01/Accounts/{sid}/Messages.json", post(create_message).get(list_messages))
            .route("/2010-04-01/Accounts/{sid}", get(account))
            .with_state(self.clone())
    }

    pub fn set_faults(&self, f: Faults) {
        self.lock().faults = f;
    }

    pub fn messages(&self) -> Vec<Message> {
        self.lock().messages.clone()
    }

    /// Messages created for `to` (E.164).
    pub fn count_to(&self, to: &str) -> usize {
        self.lock().messages.iter().filter(|m| m.to == to).count()
    }

    pub fn refused(&self) -> u64 {
        self.lock().refused
    }

    /// A message the account sent to `to` without Leadline (another application): listed, never counted as
    /// Leadline's by a test that looks at the body.
    pub fn add_other_message(&self, to: &str, body: &str) {
        let mut inner = self.lock();
        let n = inner.messages.len();
        inner.messages.push(Message {
            sid: format!("SMother{n:030}"),
            to: to.to_string(),
            body: body.to_string(),
            status_callback: None,
            date_created: chrono::Utc::now(),
        });
    }

    /// List requests answered (look-ups of sends in doubt).
    pub fn lists(&self) -> u64 {
        self.lock().lists
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts a status callback for `m`, signed with the auth token over the callback address.
    async fn callback(&self, m: &Message, status: &str, error_code: Option<&str>) {
        let Some(url) = &m.status_callback else { return };
        if self.lock().faults.no_callbacks {
            return;
        }
        let mut form: Vec<(String, String)> = vec![
            ("AccountSid".into(), ACCOUNT_SID.into()),
            ("MessageSid".into(), m.sid.clone()),
            ("SmsSid".into(), m.sid.clone()),
            ("MessageStatus".into(), status.into()),
            ("SmsStatus".into(), status.into()),
            ("To".into(), m.to.clone()),
            ("ApiVersion".into(), "2010-04-01".into()),
        ];
        if let Some(code) = error_code {
            form.push(("ErrorCode".into(), code.into()));
        }
        let signature = wire::signature(AUTH_TOKEN, url, &form);
        let sent = self
            .http
            .post(url)
            .header("x-twilio-signature", signature)
            .form(&form)
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "mock Twilio: status callback not delivered");
        }
    }
}

fn twilio_error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        Json(
            json!({"code": code, "message": message, "more_info": format!("https://www.twilio.com/docs/errors/{code}"),
            "status": status.as_u16()}),
        ),
    )
        .into_response()
}

fn authorized(headers: &HeaderMap, sid: &str) -> bool {
    let expected =
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{ACCOUNT_SID}:{AUTH_TOKEN}")));
    sid == ACCOUNT_SID && headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str())
}

async fn account(headers: HeaderMap, Path(sid): Path<String>) -> Response {
    let sid = sid.trim_end_matches(".json").to_string();
    if !authorized(&headers, &sid) {
        return twilio_error(StatusCode::UNAUTHORIZED, 20003, "Authenticate");
    }
    Json(json!({"sid": sid, "status": "active", "friendly_name": "Leadline demo"})).into_response()
}

async fn list_messages(
    State(mock): State<MockTwilio>,
    headers: HeaderMap,
    Path(sid): Path<String>,
    Query(q): Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    if !authorized(&headers, &sid) {
        return twilio_error(StatusCode::UNAUTHORIZED, 20003, "Authenticate");
    }
    let mut inner = mock.lock();
    inner.lists += 1;
    let mut size: usize = q.get("PageSize").and_then(|s| s.parse().ok()).unwrap_or(50).clamp(1, 1000);
    if inner.faults.page_size_cap > 0 {
        size = size.min(inner.faults.page_size_cap);
    }
    let page: usize = q.get("Page").and_then(|s| s.parse().ok()).unwrap_or(0);
    let to = q.get("To");
    let all: Vec<&Message> = inner.messages.iter().rev().filter(|m| to.is_none_or(|t| *t == m.to)).collect();
    let messages: Vec<serde_json::Value> = all
        .iter()
        .skip(page * size)
        .take(size)
        .map(|m| wire::created_answer(&m.sid, &m.to, &m.body, m.date_created))
        .collect();
    // Twilio's shape: `next_page_uri` is a path on the API's host (with a `PageToken`), `null` on the last page.
    let next = ((page + 1) * size < all.len()).then(|| {
        let to = to.map(|t| format!("To={}&", wire::encode(t))).unwrap_or_default();
        format!(
            "/2010-04-01/Accounts/{sid}/Messages.json?{to}PageSize={size}&Page={}&PageToken=PA{}",
            page + 1,
            page + 1
        )
    });
    Json(json!({"messages": messages, "next_page_uri": next, "page": page, "page_size": size})).into_response()
}

async fn create_message(
    State(mock): State<MockTwilio>,
    headers: HeaderMap,
    Path(sid): Path<String>,
    body: Bytes,
) -> Response {
    let faults = mock.lock().faults.clone();
    if !faults.latency.is_zero() {
        tokio::time::sleep(faults.latency).await;
    }
    if !authorized(&headers, &sid) {
        mock.lock().refused += 1;
        return twilio_error(StatusCode::UNAUTHORIZED, 20003, "Authenticate");
    }
    let form: Vec<(String, String)> =
        url::form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let (Some(to), Some(text)) = (get("To"), get("Body")) else {
        mock.lock().refused += 1;
        return twilio_error(StatusCode::BAD_REQUEST, 21604, "A 'To' phone number is required.");
    };
    if get("From").is_none() && get("MessagingServiceSid").is_none() {
        mock.lock().refused += 1;
        return twilio_error(StatusCode::BAD_REQUEST, 21603, "A 'From' phone number is required.");
    }
    let refusal = {
        let mut inner = mock.lock();
        let r = if faults.region_disabled {
            Some((
                StatusCode::BAD_REQUEST,
                21408,
                format!(
                    "Permission to send an SMS has not been enabled for the region indicated by the 'To' number: {to}"
                ),
            ))
        } else if faults.invalid.contains(&to) {
            Some((StatusCode::BAD_REQUEST, 21211, format!("The 'To' number {to} is not a valid phone number.")))
        } else if faults.unsubscribed.contains(&to) {
            Some((StatusCode::BAD_REQUEST, 21610, "Attempt to send to unsubscribed recipient".to_string()))
        } else if inner.faults.rate_limited > 0 {
            inner.faults.rate_limited -= 1;
            Some((StatusCode::TOO_MANY_REQUESTS, 20429, "Too Many Requests".to_string()))
        } else {
            None
        };
        if r.is_some() {
            inner.refused += 1;
        }
        r
    };
    if let Some((status, code, message)) = refusal {
        return twilio_error(status, code, &message);
    }
    let (message, lose) = {
        let mut inner = mock.lock();
        let message = Message {
            sid: format!("SM{:032x}", inner.messages.len() + 1),
            to: to.clone(),
            body: text,
            status_callback: get("StatusCallback"),
            date_created: chrono::Utc::now(),
        };
        inner.messages.push(message.clone());
        let lose = inner.faults.lose_answers > 0;
        if lose {
            inner.faults.lose_answers -= 1;
        }
        (message, lose)
    };
    let unreachable = faults.unreachable.contains(&to);
    let poster = mock.clone();
    let m = message.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        poster.callback(&m, "sent", None).await;
        if unreachable {
            poster.callback(&m, "undelivered", Some("30003")).await;
        } else {
            poster.callback(&m, "delivered", None).await;
        }
    });
    if lose {
        tokio::time::sleep(faults.hang).await;
    }
    (StatusCode::CREATED, Json(wire::created_answer(&message.sid, &message.to, &message.body, message.date_created)))
        .into_response()
}
