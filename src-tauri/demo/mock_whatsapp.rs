//! A mock of the WhatsApp Business Cloud API on loopback, for the `whatsapp` step's tests and the demo: it keeps
//! every message it accepted, counts them per recipient, posts signed status webhooks back, and misbehaves on
//! command (answers lost after the message was taken, slow answers, throughput limits, numbers not on WhatsApp).
//!
//! It follows the documented shapes (developers.facebook.com, WhatsApp Cloud API reference "Messages", "Error
//! codes", "Webhooks: status messages"): `POST /{version}/{phone-number-id}/messages` with a Bearer token and a
//! template message; `200 {"messaging_product","contacts":[{"input","wa_id"}],"messages":[{"id":"wamid.…"}]}`;
//! errors `{"error":{"message","type","code","error_data":{"messaging_product","details"},"fbtrace_id"}}`;
//! receipts `{"object":"whatsapp_business_account","entry":[{"id","changes":[{"field":"messages","value":
//! {"messaging_product","metadata","statuses":[{"id","status","timestamp","recipient_id",
//! "biz_opaque_callback_data","errors"}]}}]}]}` signed `X-Hub-Signature-256` with the app secret.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

/// The access token the mock accepts.
pub const TOKEN: &str = "whatsapp-test-token";
/// The app secret its webhooks are signed with.
pub const APP_SECRET: &str = "whatsapp-app-secret";

/// How the mock misbehaves. `Default` is healthy.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The next this-many messages are taken, then their answer is held for `hang` (past the client's timeout).
    pub lose_answers: u32,
    pub hang: Duration,
    /// Every answer waits this long (a slow API, under the client's timeout).
    pub latency: Duration,
    /// The next this-many sends are refused with 130429 (throughput).
    pub throttle: u32,
    /// Numbers (digits, no `+`) that are accepted and then reported failed by webhook with 131026.
    pub undeliverable: BTreeSet<String>,
    /// The template is missing: every send is refused with 132001.
    pub template_missing: bool,
    /// The token expired: 401 with code 190.
    pub token_expired: bool,
}

/// A message the mock took.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    /// Digits, as sent.
    pub to: String,
    pub template: String,
    pub parameters: Vec<String>,
    pub callback_data: Option<String>,
}

#[derive(Default)]
struct Inner {
    messages: Vec<Message>,
    refused: u64,
    faults: Faults,
    /// Where status webhooks go: the receipt URL and the app secret.
    webhook: Option<String>,
    secret: String,
}

#[derive(Clone, Default)]
pub struct MockWhatsapp {
    inner: Arc<Mutex<Inner>>,
    http: reqwest::Client,
}

impl MockWhatsapp {
    /// Starts the mock on `addr` (port 0: any free port).
    pub async fn start(addr: SocketAddr) -> anyhow::Result<(MockWhatsapp, SocketAddr)> {
        let mock = MockWhatsapp::default();
        mock.lock().secret = APP_SECRET.into();
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let app = mock.router();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "mock WhatsApp stopped");
            }
        });
        Ok((mock, local))
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/{version}/{phone}/messages", post(send_message))
            .route("/{version}/{phone}", get(phone_number))
            .with_state(self.clone())
    }

    /// Status webhooks go to `url` (Leadline's `/receipts/whatsapp/{target}`).
    pub fn post_receipts_to(&self, url: &str) {
        self.lock().webhook = Some(url.to_string());
    }

    pub fn set_faults(&self, f: Faults) {
        self.lock().faults = f;
    }

    pub fn messages(&self) -> Vec<Message> {
        self.lock().messages.clone()
    }

    /// Messages taken for `to` (E.164, with or without `+`).
    pub fn count_to(&self, to: &str) -> usize {
        let to = to.trim_start_matches('+');
        self.lock().messages.iter().filter(|m| m.to == to).count()
    }

    pub fn refused(&self) -> u64 {
        self.lock().refused
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts `status` (`delivered`, `read`…) again for every message taken, signed, to the receipt URL: a
    /// receipt that arrives late, after Leadline stopped waiting for it.
    pub async fn report_all(&self, status: &str) {
        for m in self.messages() {
            self.post_status(&m, status, None).await;
        }
    }

    /// Posts `status` for message `m`, signed, to the receipt URL (if any).
    async fn post_status(&self, m: &Message, status: &str, error: Option<(i64, &str)>) {
        let (url, secret) = {
            let inner = self.lock();
            match &inner.webhook {
                Some(u) => (u.clone(), inner.secret.clone()),
                None => return,
            }
        };
        let mut s = json!({"id": m.id, "status": status, "timestamp": chrono::Utc::now().timestamp().to_string(),
            "recipient_id": m.to});
        if let Some(data) = &m.callback_data {
            s["biz_opaque_callback_data"] = json!(data);
        }
        if let Some((code, title)) = error {
            s["errors"] = json!([{"code": code, "title": title, "message": title,
                "error_data": {"details": title}}]);
        }
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{
            "field": "messages",
            "value": {"messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
                "statuses": [s]}}]}]})
        .to_string();
        let signature = crate::features::ingest::signature::sign(secret.as_bytes(), body.as_bytes());
        let sent = self
            .http
            .post(&url)
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(body)
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "mock WhatsApp: receipt not delivered");
        }
    }
}

fn graph_error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"message": message, "type": "OAuthException", "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": message}, "fbtrace_id": "AbCdEf"}})),
    )
        .into_response()
}

async fn phone_number(
    State(mock): State<MockWhatsapp>,
    headers: HeaderMap,
    Path((_v, phone)): Path<(String, String)>,
) -> Response {
    if !authorized(&mock, &headers) {
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Error validating access token");
    }
    Json(json!({"id": phone, "display_phone_number": "+1 555-078-3881", "verified_name": "Leadline demo"}))
        .into_response()
}

fn authorized(mock: &MockWhatsapp, headers: &HeaderMap) -> bool {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"));
    bearer && !mock.lock().faults.token_expired
}

async fn send_message(State(mock): State<MockWhatsapp>, headers: HeaderMap, body: Bytes) -> Response {
    let faults = mock.lock().faults.clone();
    if !faults.latency.is_zero() {
        tokio::time::sleep(faults.latency).await;
    }
    if !authorized(&mock, &headers) {
        mock.lock().refused += 1;
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Error validating access token: Session has expired");
    }
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid parameter");
    };
    let to = req.get("to").and_then(Value::as_str).unwrap_or_default().trim_start_matches('+').to_string();
    let template = req.pointer("/template/name").and_then(Value::as_str).unwrap_or_default().to_string();
    if req.get("messaging_product").and_then(Value::as_str) != Some("whatsapp") || to.is_empty() || template.is_empty()
    {
        mock.lock().refused += 1;
        return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid parameter");
    }
    if faults.template_missing {
        mock.lock().refused += 1;
        return graph_error(StatusCode::NOT_FOUND, 132001, "Template name does not exist in the translation");
    }
    {
        let mut inner = mock.lock();
        if inner.faults.throttle > 0 {
            inner.faults.throttle -= 1;
            inner.refused += 1;
            return graph_error(StatusCode::BAD_REQUEST, 130429, "Rate limit hit");
        }
    }
    let parameters = req
        .pointer("/template/components/0/parameters")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(|p| p.get("text").and_then(Value::as_str).map(String::from)).collect())
        .unwrap_or_default();
    let (message, lose) = {
        let mut inner = mock.lock();
        let message = Message {
            id: format!("wamid.HBgL{:012}", inner.messages.len() + 1),
            to: to.clone(),
            template,
            parameters,
            callback_data: req.get("biz_opaque_callback_data").and_then(Value::as_str).map(String::from),
        };
        inner.messages.push(message.clone());
        let lose = inner.faults.lose_answers > 0;
        if lose {
            inner.faults.lose_answers -= 1;
        }
        (message, lose)
    };
    // Receipts follow, as WhatsApp's do, whatever became of the answer.
    let undeliverable = faults.undeliverable.contains(&to);
    let poster = mock.clone();
    let m = message.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if undeliverable {
            poster.post_status(&m, "failed", Some((131026, "Message undeliverable"))).await;
        } else {
            poster.post_status(&m, "sent", None).await;
            poster.post_status(&m, "delivered", None).await;
        }
    });
    if lose {
        tokio::time::sleep(faults.hang).await;
    }
    Json(json!({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": message.id, "message_status": "accepted"}]}))
    .into_response()
}
