//! Sending one request and reading its answer: the I/O every connector shares.
//!
//! [`send`] tells the target's [`AnswerWatch`] the moment an answer's status and headers arrive, before its body
//! is read or classified: a `Retry-After` or a used-up rate-limit window then holds the whole target at once, so
//! no other request of the target leaves while this one's answer is still being read. And it asks the watch, the
//! moment before a request leaves, whether it still may ([`AnswerWatch::clear_to_send`]): a request let through
//! by the pacer may take a while to prepare (a link read from the store, a session, the earlier request of the
//! same lead), and another request's answer may have held the target meanwhile.

use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;

use crate::clock::Clock;
use crate::config::TargetConfig;
use crate::model::{parse_retry_after, truncate_chars};

/// Longest response excerpt kept with an attempt, in characters.
pub const EXCERPT_CHARS: usize = 2_000;

/// Told about every answer a target gives, as soon as its status and headers are in (the worker's pacer learns
/// its limits and holds from them). Requests that never got an answer are not reported.
pub trait AnswerWatch: Send + Sync {
    fn answered(&self, status: u16, headers: &HeaderMap);

    /// Whether a request may still leave now: `false` once the target was held after this request was let
    /// through (it then stays unsent: [`Outcome::HeldBack`]).
    fn clear_to_send(&self) -> bool {
        true
    }
}

/// An [`AnswerWatch`] that ignores everything: connection checks and previews, which are not deliveries.
pub struct Unwatched;

impl AnswerWatch for Unwatched {
    fn answered(&self, _status: u16, _headers: &HeaderMap) {}
}

/// An answer, read whole.
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
    /// `Retry-After`, as the instant it names (read on the clock when the answer arrived).
    pub retry_after: Option<DateTime<Utc>>,
    pub headers: HeaderMap,
}

/// What became of a request: an answer, never sent (connection failed), sent without an answer, or held back.
pub enum Outcome {
    Answered(Response),
    Unsent(String),
    Unanswered(String),
    /// Not sent: the target was held after this request was let through (see [`AnswerWatch::clear_to_send`]).
    /// Nothing reached the target; the lead waits for the hold without using an attempt.
    HeldBack,
}

/// What a connection check says of a request held back (a check is never held: it is sent [`Unwatched`]).
pub const HELD_BACK: &str = "not sent: the target asked to wait (Retry-After)";

/// Sends `request`; a `Retry-After` date in the answer is read on `clock` when the answer arrived. `watch` hears
/// the status and headers before the body is read.
pub async fn send(request: reqwest::RequestBuilder, clock: &Clock, watch: &dyn AnswerWatch) -> Outcome {
    if !watch.clear_to_send() {
        return Outcome::HeldBack;
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) if e.is_connect() || e.is_builder() => return Outcome::Unsent(error_chain(&e)),
        Err(e) => return Outcome::Unanswered(error_chain(&e)),
    };
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    watch.answered(status, &headers);
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, clock.now()));
    match response.bytes().await {
        Ok(body) => Outcome::Answered(Response { status, body: body.to_vec(), retry_after, headers }),
        // The status arrived, so the CRM processed the request; only the body was lost.
        Err(e) => Outcome::Answered(Response {
            status,
            body: format!("(body lost: {})", error_chain(&e)).into_bytes(),
            retry_after,
            headers,
        }),
    }
}

/// The HTTP client every connector uses: connect timeout at most 5 s, no redirects followed (a redirect means the
/// URL is wrong, and credentials must not follow it elsewhere), idle connections kept for the target's
/// concurrency, Leadline's user agent.
pub fn client_for(config: &TargetConfig) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(config.timeout_ms).min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(config.concurrency as usize)
        .user_agent(concat!("leadline/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("cannot build HTTP client")
}

/// An error and its sources, in one line.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The start of a response body, as kept with an attempt.
pub fn excerpt(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    Some(truncate_chars(&String::from_utf8_lossy(body), EXCERPT_CHARS))
}

/// Header values shown in a preview: credentials masked.
pub fn masked_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            let shown = if v.is_sensitive() {
                "••••".to_string()
            } else {
                v.to_str().unwrap_or("(binary)").to_string()
            };
            (k.as_str().to_string(), shown)
        })
        .collect()
}
