//! Alert channels against local receivers on loopback: a Slack incoming webhook, a generic webhook and an SMTP
//! server, each a real server in this test. A real Leadline server on a manual clock raises alerts; its channel
//! tasks send them, each by its own policy, digest and quiet hours; a receiver that fails is retried without
//! holding up the others.
//!
//! The receivers follow the documented shapes: Slack's incoming webhook takes a JSON body with `text` and
//! `blocks` and answers `200 ok` (Slack's "Sending messages using incoming webhooks"; `500 rollup_error` is one of
//! its documented errors); the SMTP server speaks the RFC 5321 commands a client sends (EHLO, MAIL, RCPT, DATA
//! with dot-stuffing, QUIT) with the RFC's reply codes; the generic webhook is Leadline's own documented body
//! (`docs/operators.md`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use leadline::api;
use leadline::monitor::{self, alerts::AlertSpec, channels::ChannelRunner};
use leadline::runtime::Clock;
use leadline::server::{Server, StartOptions};
use leadline::store::{AlertKind, ChannelState, Held, Severity};

// ---------------------------------------------------------------------------------------------------------------
// Receivers

/// An HTTP receiver: keeps every request; the first `fail_first` answer 500, and the first `block_first` wait
/// until the test releases them.
#[derive(Default)]
struct Http {
    requests: Mutex<Vec<(HeaderMap, Vec<u8>)>>,
    fail_first: AtomicUsize,
    block_first: AtomicUsize,
    release: tokio::sync::Notify,
    /// The answer to a successful request: Slack's `ok`, `{}` for the generic webhook.
    ok_body: &'static str,
}

impl Http {
    fn new(ok_body: &'static str) -> Arc<Http> {
        Arc::new(Http { ok_body, ..Default::default() })
    }

    fn bodies(&self) -> Vec<Value> {
        self.requests.lock().unwrap().iter().map(|(_, b)| serde_json::from_slice(b).unwrap()).collect()
    }

    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1)).is_ok()
}

async fn receive(State(r): State<Arc<Http>>, headers: HeaderMap, body: axum::body::Bytes) -> (StatusCode, String) {
    r.requests.lock().unwrap().push((headers, body.to_vec()));
    if take_one(&r.block_first) {
        r.release.notified().await;
    }
    if take_one(&r.fail_first) {
        // Slack's documented answer to an internal failure; the generic receiver answers the same.
        return (StatusCode::INTERNAL_SERVER_ERROR, "rollup_error".into());
    }
    (StatusCode::OK, r.ok_body.into())
}

async fn serve_http(r: Arc<Http>, path: &'static str) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(path, post(receive)).with_state(r);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// One message as the SMTP server received it.
#[derive(Debug, Clone)]
struct Mail {
    from: String,
    to: Vec<String>,
    subject: String,
    body: String,
}

#[derive(Default)]
struct Smtp {
    mails: Mutex<Vec<Mail>>,
}

impl Smtp {
    fn with(&self, text: &str) -> Vec<Mail> {
        self.mails
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m.subject.contains(text) || m.body.contains(text))
            .cloned()
            .collect()
    }
}

/// A minimal SMTP server (RFC 5321): enough of the protocol for one client to hand over messages, no TLS
/// (`tls = "none"`), no AUTH.
async fn serve_smtp(smtp: Arc<Smtp>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let smtp = smtp.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                let _ = write.write_all(b"220 mock.test ESMTP ready\r\n").await;
                let (mut from, mut to) = (String::new(), Vec::new());
                while let Ok(Some(line)) = lines.next_line().await {
                    let upper = line.to_ascii_uppercase();
                    let angle =
                        || line.split('<').nth(1).and_then(|s| s.split('>').next()).unwrap_or_default().to_string();
                    let reply: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                        b"250-mock.test greets you\r\n250 8BITMIME\r\n"
                    } else if upper.starts_with("MAIL FROM:") {
                        from = angle();
                        b"250 2.1.0 OK\r\n"
                    } else if upper.starts_with("RCPT TO:") {
                        to.push(angle());
                        b"250 2.1.5 OK\r\n"
                    } else if upper == "DATA" {
                        let _ = write.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n").await;
                        let mut data = Vec::new();
                        while let Ok(Some(l)) = lines.next_line().await {
                            if l == "." {
                                break;
                            }
                            // Dot-stuffing (RFC 5321, 4.5.2).
                            data.push(
                                l.strip_prefix('.').map(str::to_string).filter(|_| l.starts_with("..")).unwrap_or(l),
                            );
                        }
                        smtp.mails.lock().unwrap().push(parse_mail(&from, &to, &data));
                        b"250 2.0.0 queued\r\n"
                    } else if upper == "QUIT" {
                        let _ = write.write_all(b"221 2.0.0 bye\r\n").await;
                        break;
                    } else if upper == "RSET" || upper == "NOOP" {
                        b"250 2.0.0 OK\r\n"
                    } else {
                        b"502 5.5.1 command not implemented\r\n"
                    };
                    if write.write_all(reply).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn parse_mail(from: &str, to: &[String], data: &[String]) -> Mail {
    let split = data.iter().position(|l| l.is_empty()).unwrap_or(data.len());
    let headers = &data[..split];
    let header = |name: &str| {
        headers
            .iter()
            .find(|h| h.to_ascii_lowercase().starts_with(&format!("{}:", name.to_ascii_lowercase())))
            .map(|h| h[name.len() + 1..].trim().to_string())
            .unwrap_or_default()
    };
    let raw = data[(split + 1).min(data.len())..].join("\r\n");
    let body = match header("Content-Transfer-Encoding").to_ascii_lowercase().as_str() {
        "quoted-printable" => quoted_printable(&raw),
        _ => raw,
    };
    Mail { from: from.into(), to: to.to_vec(), subject: header("Subject"), body }
}

/// Decodes quoted-printable (RFC 2045, 6.7): soft line breaks and `=XX` octets.
fn quoted_printable(s: &str) -> String {
    let s = s.replace("=\r\n", "");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'=' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).replace("\r\n", "\n")
}

// ---------------------------------------------------------------------------------------------------------------
// Set-up

struct Setup {
    server: Server,
    slack: Arc<Http>,
    hook: Arc<Http>,
    smtp: Arc<Smtp>,
    _crm: leadline::demo::mock_crm::MockCrm,
    _dir: tempfile::TempDir,
}

/// A Saturday morning: outside business hours, so the monitor's own checks expect no traffic and raise nothing
/// beside the test's alerts.
fn t0() -> DateTime<Utc> {
    "2026-03-07T10:00:00Z".parse().unwrap()
}

const HOOK_SECRET: &str = "hook-signing-key";

async fn start(slack: Arc<Http>, hook: Arc<Http>, channels: impl Fn(u16) -> String) -> Setup {
    let smtp = Arc::new(Smtp::default());
    let smtp_port = serve_smtp(smtp.clone()).await;
    let slack_addr = serve_http(slack.clone(), "/services/T0001/B0001/secretpart").await;
    let hook_addr = serve_http(hook.clone(), "/alerts").await;
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = common::config_text(crm_addr, &dir.path().join("leadline.db"), &common::idempotent_crm(crm_addr))
        + &channels(smtp_port);
    let mut config = common::parse_config(&text);
    config
        .inline_secrets
        .insert("TEST_SLACK_URL".into(), format!("http://{slack_addr}/services/T0001/B0001/secretpart"));
    config.inline_secrets.insert("TEST_HOOK_URL".into(), format!("http://{hook_addr}/alerts"));
    config.inline_secrets.insert("TEST_HOOK_SECRET".into(), HOOK_SECRET.into());
    let options = StartOptions { clock: Some(Clock::manual(t0())), ..Default::default() };
    let server = Server::start_with(config, options).await.unwrap();
    Setup { server, slack, hook, smtp, _crm: crm, _dir: dir }
}

/// Three channels: Slack (credentials at once, volume drops in its 30-minute digest, no quiet hours), e-mail
/// (quiet 22:00–07:00, the lead waiting too long announced at once outside them), the generic webhook (signed).
fn three_channels(smtp_port: u16) -> String {
    format!(
        r#"
[monitor]
public_url = "https://desk.example.com"

[monitor.channels.slack]
kind = "slack"
webhook_url_env = "TEST_SLACK_URL"
alerts = {{ credentials = "immediate", volume_drop = "digest" }}
digest_interval_minutes = 30

[monitor.channels.mail]
kind = "email"
smtp_host = "127.0.0.1"
smtp_port = {smtp_port}
tls = "none"
from = "Leadline <alerts@example.com>"
to = ["oncall@example.com", "ops@example.com"]
alerts = {{ volume_drop = "immediate", oldest_pending = "immediate" }}
quiet_hours = {{ start = "22:00", end = "07:00" }}

[monitor.channels.hook]
kind = "webhook"
url_env = "TEST_HOOK_URL"
secret_env = "TEST_HOOK_SECRET"
alerts = {{ volume_drop = "immediate" }}
"#
    )
}

async fn raise(setup: &Setup, kind: AlertKind, key: &str, severity: Severity, title: &str) -> leadline::store::Alert {
    let app = &setup.server.app;
    let spec = AlertSpec { kind, key: key.into(), severity, title: title.into(), detail: format!("{title}: detail.") };
    monitor::raise(app, app.notifier.as_ref(), spec, app.clock.now()).await;
    api::alerts(app).await.unwrap().into_iter().find(|a| a.title == title).expect("the alert opened")
}

/// One pass of every channel at the clock's time, as their tasks make: whatever the background tasks have not
/// sent yet goes now, and what must wait still waits.
async fn pass_all(setup: &Setup) {
    let app = &setup.server.app;
    for name in ["slack", "mail", "hook"] {
        ChannelRunner::new(app, name).pass(app, app.clock.now()).await;
    }
}

const WITHIN: Duration = Duration::from_secs(15);

fn slack_with(slack: &Http, text: &str) -> Vec<Value> {
    slack.bodies().into_iter().filter(|b| b.to_string().contains(text)).collect()
}

// ---------------------------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_channel_announces_by_its_own_policy_digest_and_quiet_hours() {
    let setup = start(Http::new("ok"), Http::new("{}"), three_channels).await;
    let app = &setup.server.app;
    let (slack, hook, smtp) = (&setup.slack, &setup.hook, &setup.smtp);

    // A dead CRM token (critical, immediate everywhere): each channel announces it once.
    let token =
        raise(&setup, AlertKind::Credentials, "HUBSPOT_TOKEN", Severity::Critical, "crm refused its token").await;
    common::wait_for("the token alert on every channel", WITHIN, async || {
        !slack_with(slack, "crm refused its token").is_empty()
            && !smtp.with("crm refused its token").is_empty()
            && hook.count() >= 1
    })
    .await;
    pass_all(&setup).await;
    assert_eq!(slack_with(slack, "crm refused its token").len(), 1, "once on Slack");
    assert_eq!(smtp.with("crm refused its token").len(), 1, "once by e-mail");
    assert_eq!(hook.count(), 1, "once to the webhook");

    // Slack: `text` for the notification, mrkdwn blocks with the alert and a link to where to act.
    let s = &slack_with(slack, "crm refused its token")[0];
    assert!(s["text"].as_str().unwrap().ends_with("crm refused its token"), "{s}");
    assert_eq!(s["blocks"][0]["type"], "section");
    assert_eq!(s["blocks"][0]["text"]["type"], "mrkdwn");
    assert!(s["blocks"][0]["text"]["text"]
        .as_str()
        .unwrap()
        .contains("*crm refused its token*\ncrm refused its token: detail."));
    assert_eq!(s["blocks"][1]["type"], "context");
    let context = s["blocks"][1]["elements"][0]["text"].as_str().unwrap();
    assert!(context.contains("<https://desk.example.com/#/targets|Open Targets>"), "{context}");
    let slack_headers = slack.requests.lock().unwrap()[0].0.clone();
    assert_eq!(slack_headers["content-type"], "application/json");

    // The webhook: the documented body, an Idempotency-Key per (alert, announcement), the body signed.
    let (headers, raw) = hook.requests.lock().unwrap()[0].clone();
    assert_eq!(headers["idempotency-key"], format!("leadline-hook-{}-1", token.id).as_str());
    let signature = headers["x-leadline-signature-256"].to_str().unwrap();
    leadline::ingest::signature::verify(HOOK_SECRET.as_bytes(), &raw, Some(signature)).expect("signed with the key");
    let body: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(body["type"], "alert");
    assert_eq!(body["channel"], "hook");
    let a = &body["alerts"][0];
    assert_eq!(a["id"], token.id);
    assert_eq!(
        (a["kind"].as_str(), a["severity"].as_str(), a["state"].as_str()),
        (Some("credentials"), Some("critical"), Some("open"))
    );
    assert_eq!(a["title"], "crm refused its token");
    assert_eq!(a["detail"], "crm refused its token: detail.");
    assert_eq!(a["opened_at"], "2026-03-07T10:00:00Z");
    assert_eq!(a["place"]["page"], "targets");
    assert_eq!(a["link"], "https://desk.example.com/#/targets");

    // The e-mail: to every recipient, "[Leadline] …", the detail and what to do.
    let mail = &smtp.with("crm refused its token")[0];
    assert_eq!(mail.from, "alerts@example.com");
    assert_eq!(mail.to, vec!["oncall@example.com", "ops@example.com"]);
    assert_eq!(mail.subject, "[Leadline] crm refused its token");
    assert!(mail.body.contains("crm refused its token: detail."), "{}", mail.body);
    assert!(mail.body.contains("What to do: Open Targets — https://desk.example.com/#/targets"), "{}", mail.body);

    // Two warnings a minute later. Slack holds both for its digest (volume_drop by its policy, retry_budget as
    // every warning it does not name); the e-mail and the webhook send the volume drop at once.
    app.clock.set(t0() + chrono::Duration::minutes(1));
    raise(&setup, AlertKind::VolumeDrop, "webform", Severity::Warning, "fewer leads from webform").await;
    raise(&setup, AlertKind::RetryBudget, "crm", Severity::Warning, "leads to crm run out of retry time").await;
    common::wait_for("the volume drop by e-mail and webhook", WITHIN, async || {
        !smtp.with("fewer leads from webform").is_empty()
            && hook.bodies().iter().any(|b| b.to_string().contains("fewer leads"))
    })
    .await;
    pass_all(&setup).await;
    assert!(slack_with(slack, "fewer leads from webform").is_empty(), "Slack waits for its digest");

    // 30 minutes after the start Slack's digest is due: both warnings in one message.
    app.clock.set(t0() + chrono::Duration::minutes(31));
    common::wait_for("Slack's digest", WITHIN, async || !slack_with(slack, "fewer leads from webform").is_empty())
        .await;
    pass_all(&setup).await;
    let digests = slack_with(slack, "fewer leads from webform");
    assert_eq!(digests.len(), 1, "one digest: {digests:?}");
    assert_eq!(digests[0]["text"], "Leadline: 2 alerts");
    assert!(digests[0].to_string().contains("leads to crm run out of retry time"), "{}", digests[0]);

    // 23:00: the e-mail's quiet hours. A lead waits too long (immediate by e-mail, but a warning in quiet
    // hours): held, not sent, until they end.
    app.clock.set("2026-03-07T23:00:00Z".parse().unwrap());
    let waiting = raise(&setup, AlertKind::OldestPending, "*", Severity::Warning, "a lead waited 20 min").await;
    pass_all(&setup).await;
    app.clock.set("2026-03-08T06:59:00Z".parse().unwrap());
    pass_all(&setup).await;
    assert!(smtp.with("a lead waited 20 min").is_empty(), "held over the quiet hours");
    let entries = app.store.channel_entries("mail", false, app.clock.now()).await.unwrap();
    let held = entries.iter().find(|e| e.alert.id == waiting.id).expect("the e-mail channel has it");
    assert_eq!(held.state, ChannelState::Held(Held::QuietHours));

    // 07:00: the quiet hours are over; it goes out (in the e-mail's digest, with what else waited).
    app.clock.set("2026-03-08T07:00:00Z".parse().unwrap());
    common::wait_for("the held alert after quiet hours", WITHIN, async || {
        !smtp.with("a lead waited 20 min").is_empty()
    })
    .await;
    pass_all(&setup).await;
    let after = smtp.with("a lead waited 20 min");
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(after[0].body.contains("a lead waited 20 min: detail."), "{}", after[0].body);
    // The e-mail's own digest was due during the quiet hours too: what it held since 10:01 comes in the same one.
    assert_eq!(after[0].subject, "[Leadline] 2 alerts");
    assert!(after[0].body.contains("leads to crm run out of retry time"), "{}", after[0].body);
    let entries = app.store.channel_entries("mail", false, app.clock.now()).await.unwrap();
    assert!(entries.iter().all(|e| e.alert.id != waiting.id), "sent: nothing left to do for it");
    setup.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_is_retried_and_holds_up_no_other_channel() {
    // Slack's first request hangs until the test lets it answer 500; the webhook answers its first with 500.
    let slack = Http::new("ok");
    slack.block_first.store(1, Ordering::SeqCst);
    slack.fail_first.store(1, Ordering::SeqCst);
    let hook = Http::new("{}");
    hook.fail_first.store(1, Ordering::SeqCst);
    let setup = start(slack.clone(), hook.clone(), three_channels).await;
    let app = &setup.server.app;

    let token =
        raise(&setup, AlertKind::Credentials, "HUBSPOT_TOKEN", Severity::Critical, "crm refused its token").await;
    // Slack hangs: the e-mail goes all the same, and the webhook gets its first try.
    common::wait_for("the e-mail while Slack hangs", WITHIN, async || {
        !setup.smtp.with("crm refused its token").is_empty() && hook.count() == 1 && slack.count() == 1
    })
    .await;
    slack.release.notify_one();

    // The failures are recorded, and once the alert is resolved the health verdict says a channel cannot
    // deliver, without the secret URL.
    monitor::resolve(app, AlertKind::Credentials, "HUBSPOT_TOKEN", "works again", app.clock.now()).await;
    common::wait_for("both failures recorded", WITHIN, async || app.store.channel_troubles().await.unwrap().len() == 2)
        .await;
    let verdict = api::health(app).await.unwrap().verdict;
    assert_eq!(verdict.level, leadline::monitor::health::VerdictLevel::Degraded, "{verdict:?}");
    assert!(verdict.reason.contains("alert channel"), "{}", verdict.reason);
    assert!(!verdict.reason.contains("secretpart"), "no secret in what is shown: {}", verdict.reason);
    let troubles = app.store.channel_troubles().await.unwrap();
    let hook_trouble = troubles.iter().find(|t| t.channel == "hook").unwrap();
    assert_eq!(hook_trouble.last_error, "HTTP 500: rollup_error");
    let views = monitor::channels::views(app).await.unwrap();
    let names: Vec<(&str, &str)> = views.iter().map(|v| (v.name.as_str(), v.kind.as_str())).collect();
    assert_eq!(names, vec![("hook", "webhook"), ("mail", "email"), ("slack", "slack")]);
    let hook_view = &views[0];
    assert_eq!((hook_view.waiting, hook_view.last_sent_at), (1, None));
    assert_eq!(hook_view.trouble.as_ref().map(|t| t.failing), Some(1));
    assert!(views[1].trouble.is_none() && views[1].last_sent_at == Some(t0()), "the e-mail went: {:?}", views[1]);
    // The same list over HTTP, as the Alerts page reads it in a browser.
    let url = format!("http://{}/api/alert-channels", setup.server.addr);
    let api_token = setup.server.new_token.clone().expect("a fresh database gets a token");
    let listed: Value =
        reqwest::Client::new().get(url).bearer_auth(api_token).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed[0]["name"], "hook");
    assert_eq!(listed[0]["trouble"]["last_error"], "HTTP 500: rollup_error");

    // Nothing is retried at once (a receiver that is down is not hammered)...
    pass_all(&setup).await;
    assert_eq!((slack.count(), hook.count()), (1, 1));
    // ...and a minute later both are, and succeed: the same announcement, the same Idempotency-Key.
    app.clock.set(t0() + chrono::Duration::minutes(1));
    common::wait_for("the retries", WITHIN, async || slack.count() == 2 && hook.count() == 2).await;
    pass_all(&setup).await;
    assert_eq!((slack.count(), hook.count(), setup.smtp.with("crm refused its token").len()), (2, 2, 1));
    let keys: Vec<String> =
        hook.requests.lock().unwrap().iter().map(|(h, _)| h["idempotency-key"].to_str().unwrap().to_string()).collect();
    assert_eq!(keys, vec![format!("leadline-hook-{}-1", token.id); 2]);
    assert_eq!(hook.bodies()[1]["alerts"][0]["state"], "resolved", "the retry tells how things stand now");
    let retried = slack.bodies()[1]["blocks"][0]["text"]["text"].as_str().unwrap().to_string();
    assert!(retried.contains("*crm refused its token* (resolved since)"), "{retried}");
    common::wait_for("the channels healthy again", WITHIN, async || {
        app.store.channel_troubles().await.unwrap().is_empty()
    })
    .await;
    let views = monitor::channels::views(app).await.unwrap();
    assert!(views.iter().all(|v| v.waiting == 0 && v.trouble.is_none()), "{views:?}");
    assert_eq!(views[0].last_sent_at, Some(t0() + chrono::Duration::minutes(1)), "the webhook's retry went at 10:01");
    setup.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn check_config_names_a_channels_missing_variable() {
    let dir = tempfile::tempdir().unwrap();
    let crm: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let text = common::config_text(crm, &dir.path().join("x.db"), &common::idempotent_crm(crm)) + &three_channels(2525);
    let mut config = common::parse_config(&text);
    let e = leadline::server::preflight(&config).unwrap_err().to_string();
    assert!(e.starts_with("monitor.channels.hook.url_env:") && e.contains("TEST_HOOK_URL"), "{e}");
    config.inline_secrets.insert("TEST_HOOK_URL".into(), "https://hooks.example.com/leadline".into());
    config.inline_secrets.insert("TEST_HOOK_SECRET".into(), HOOK_SECRET.into());
    config.inline_secrets.insert("TEST_SLACK_URL".into(), "not a url".into());
    let e = leadline::server::preflight(&config).unwrap_err().to_string();
    assert_eq!(e, "monitor.channels.slack.webhook_url_env: the value of TEST_SLACK_URL is not an http(s) URL");
    config.inline_secrets.insert("TEST_SLACK_URL".into(), "https://hooks.slack.com/services/T/B/x".into());
    leadline::server::preflight(&config).expect("every channel's secrets are there");
}
