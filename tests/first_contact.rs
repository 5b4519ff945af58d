//! First contacts (issue #37): the `whatsapp` and `sms` steps against mocks of the WhatsApp Cloud API and Twilio
//! that follow the documented requests, answers, receipts and signatures (`demo::mock_whatsapp`,
//! `demo::mock_twilio`), with the real server and worker on a fresh database (SQLite, or PostgreSQL with
//! `LEADLINE_TEST_BACKEND=postgres`). What matters is counted at the mocks: one message per lead, whatever was
//! lost on the way; none to a number that said STOP; none at night; none to a lead too old for it.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use chrono::TimeZone;
use common::*;
use leadline::demo::mock_crm::MockCrm;
use leadline::demo::mock_twilio::{self, MockTwilio};
use leadline::demo::mock_whatsapp::{self, MockWhatsapp};
use leadline::server::{Server, StartOptions};

struct Contact {
    server: Server,
    wa: MockWhatsapp,
    tw: MockTwilio,
    crm: MockCrm,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// A port free now, for a server whose address must be in its own configuration (Twilio's status callback).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `web` leads go to `hello` (WhatsApp; SMS when that fails for the number; a call task for leads over 60
/// minutes old), and so do `ny` leads, whose time zone is New York's; `text` leads go straight to `sms`. `first_contact` is TOML added to both first-contact steps.
fn config(
    port: u16,
    db: &std::path::Path,
    crm: SocketAddr,
    wa: SocketAddr,
    tw: SocketAddr,
    first_contact: &str,
) -> String {
    let sid = mock_twilio::ACCOUNT_SID;
    format!(
        r#"
[server]
listen = "127.0.0.1:{port}"

[database]
url = "{db}"

[worker]
lease_seconds = 5
poll_interval_ms = 20
rescue_interval_seconds = 1

[sources.web]
route = ["hello"]

[sources.text]
route = ["sms"]

[sources.ny]
route = ["hello"]
time_zone = "America/New_York"

[targets.hello]
kind = "whatsapp"
url = "http://{wa}"
api_version = "v21.0"
access_token_env = "TEST_WA_TOKEN"
timeout_ms = 300
on_failure = "sms"
fallback = "call_task"
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 50, failure_ratio = 0.0, cooldown_ms = 300 }}
whatsapp = {{ phone_number_id = "106540352242922", template = "lead_welcome", language = "de", parameters = ["first_name"], app_secret_env = "TEST_WA_SECRET" }}
first_contact = {{ {first_contact} }}

[[targets.hello.mapping]]
to = "to"
from = "phone"
transform = [{{ phone_e164 = {{ default_country = "+49" }} }}]
required = true

[[targets.hello.mapping]]
to = "first_name"
from = "name"
transform = ["first_name"]

[targets.sms]
kind = "sms"
url = "http://{tw}"
timeout_ms = 300
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 50, failure_ratio = 0.0, cooldown_ms = 300 }}
sms = {{ account_sid = "{sid}", auth_token_env = "TEST_TW_TOKEN", from = "+15005550006", body = "Hi {{first_name}}, thanks for your request: we will call you shortly.", status_callback = "http://127.0.0.1:{port}/receipts/sms/sms" }}
first_contact = {{ {first_contact} }}

[[targets.sms.mapping]]
to = "to"
from = "phone"
transform = [{{ phone_e164 = {{ default_country = "+49" }} }}]
required = true

[[targets.sms.mapping]]
to = "first_name"
from = "name"
transform = ["first_name"]

[targets.call_task]
url = "http://{crm}/tasks/{{external_id}}"
strategy = "upsert"
timeout_ms = 1000
"#,
        db = database_url(db),
    )
}

async fn start(first_contact: &str, clock: Option<leadline::api::Clock>) -> Contact {
    init_test_log();
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (wa, wa_addr) = MockWhatsapp::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (tw, tw_addr) = MockTwilio::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let text = config(port, &dir.path().join("leadline.db"), crm_addr, wa_addr, tw_addr, first_contact);
    let mut c = leadline::config::Config::parse(&text, std::path::Path::new("test.toml")).expect("valid config");
    c.inline_secrets.insert("TEST_WA_TOKEN".into(), mock_whatsapp::TOKEN.into());
    c.inline_secrets.insert("TEST_WA_SECRET".into(), mock_whatsapp::APP_SECRET.into());
    c.inline_secrets.insert("TEST_TW_TOKEN".into(), mock_twilio::AUTH_TOKEN.into());
    let server = Server::start_with(c, StartOptions { clock, ..Default::default() }).await.unwrap();
    wa.post_receipts_to(&format!("http://{}/receipts/whatsapp/hello", server.addr));
    Contact { server, wa, tw, crm, http: reqwest::Client::new(), _dir: dir }
}

impl Contact {
    async fn post(&self, source: &str, lead: serde_json::Value) {
        let status = self
            .http
            .post(format!("http://{}/ingest/{source}", self.server.addr))
            .json(&lead)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, reqwest::StatusCode::ACCEPTED);
    }

    /// Waits until no step is due or under way, and no step waits on a receipt.
    async fn settle(&self) {
        let store = &self.server.app.store;
        wait_for("every step to finish", Duration::from_secs(30), async || {
            let d = store.deliveries().await.unwrap();
            !d.is_empty() && d.iter().all(|s| s.state == "delivered" || s.state == "dead")
        })
        .await;
    }

    async fn steps(&self) -> Vec<leadline::store::DeliveryRecord> {
        self.server.app.store.deliveries().await.unwrap()
    }
}

fn person(id: &str, phone: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "name": "Ada Lovelace", "phone": phone})
}

fn phone(i: usize) -> String {
    format!("+49151{:08}", 10_000_000 + i)
}

#[tokio::test]
async fn lost_and_slow_answers_send_each_lead_one_message() {
    let c = start("", None).await;
    // Every fourth WhatsApp answer is lost after the message was taken; every answer is slow; one throughput
    // limit. Twilio loses two answers too.
    c.wa.set_faults(mock_whatsapp::Faults {
        lose_answers: 5,
        hang: Duration::from_secs(2),
        latency: Duration::from_millis(40),
        throttle: 1,
        ..Default::default()
    });
    c.tw.set_faults(mock_twilio::Faults {
        lose_answers: 2,
        hang: Duration::from_secs(2),
        latency: Duration::from_millis(40),
        rate_limited: 1,
        ..Default::default()
    });
    for i in 0..20 {
        c.post("web", person(&format!("w{i}"), &phone(i))).await;
        c.post("text", person(&format!("t{i}"), &phone(100 + i))).await;
    }
    c.settle().await;
    for i in 0..20 {
        assert_eq!(c.wa.count_to(&phone(i)), 1, "WhatsApp messages to lead w{i}");
        assert_eq!(c.tw.count_to(&phone(100 + i)), 1, "SMS to lead t{i}");
    }
    assert_eq!(c.wa.messages().len(), 20);
    assert_eq!(c.tw.messages().len(), 20);
    let steps = c.steps().await;
    assert!(steps.iter().all(|s| s.state == "delivered"), "{steps:?}");
    // The lost answers were in doubt, not sent again.
    let attempts = c.server.app.store.all_attempts().await.unwrap();
    assert!(attempts.iter().any(|a| a.reason.contains("in doubt") || a.reason.contains("answer was lost")));
    // Speed to first contact, per source: arrival → accepted, → delivered (receipt).
    let times = c.server.app.store.contact_times(chrono::DateTime::<chrono::Utc>::MIN_UTC).await.unwrap();
    let speed = leadline::contact::speed::figures(&times);
    for s in &speed {
        assert_eq!(s.accepted, 20, "{s:?}");
        eprintln!(
            "speed to first contact, source {}: accepted p50 {:?} ms p95 {:?} ms ({}); delivered p50 {:?} ms p95 {:?} ms ({})",
            s.source, s.accepted_p50_ms, s.accepted_p95_ms, s.accepted, s.delivered_p50_ms, s.delivered_p95_ms, s.delivered
        );
    }
    assert_eq!(speed.len(), 2);
    eprintln!(
        "messages per lead: WhatsApp {:?}, SMS {:?}",
        (0..20).map(|i| c.wa.count_to(&phone(i))).collect::<Vec<_>>(),
        (0..20).map(|i| c.tw.count_to(&phone(100 + i))).collect::<Vec<_>>()
    );
    // The WhatsApp messages carry the template, the lead's first name and the step's key.
    let m = &c.wa.messages()[0];
    assert_eq!((m.template.as_str(), m.parameters.as_slice()), ("lead_welcome", &["Ada".to_string()][..]));
    assert!(m.callback_data.as_deref().is_some_and(|k| k.starts_with("web:w") && k.ends_with(":hello")));
}

#[tokio::test]
async fn a_number_not_on_whatsapp_gets_the_sms_instead() {
    let c = start("", None).await;
    let not_on_whatsapp = phone(7);
    c.wa.set_faults(mock_whatsapp::Faults {
        undeliverable: BTreeSet::from([not_on_whatsapp.trim_start_matches('+').to_string()]),
        ..Default::default()
    });
    c.post("web", person("a", &not_on_whatsapp)).await;
    c.post("web", person("b", &phone(8))).await;
    // The failed receipt (131026) comes after the step was delivered: it is ended and its on_failure target runs.
    wait_for("the SMS fallback", Duration::from_secs(20), async || c.tw.count_to(&not_on_whatsapp) == 1).await;
    c.settle().await;
    assert_eq!(c.wa.count_to(&not_on_whatsapp), 1);
    assert_eq!(c.tw.count_to(&not_on_whatsapp), 1);
    assert_eq!((c.wa.count_to(&phone(8)), c.tw.count_to(&phone(8))), (1, 0));
    let steps = c.steps().await;
    let a = steps.iter().find(|s| s.source_ref == "a").unwrap();
    assert_eq!((a.target.as_str(), a.fallback_of.as_deref(), a.state.as_str()), ("sms", Some("hello"), "delivered"));

    // The api: the lead's story carries its receipts (WhatsApp's failure), and the
    // speed figures count both leads' first contacts for the source.
    let cx = leadline::api::operations::Caller { app: c.server.app.clone(), actor: "test".into(), confirm: None };
    let answer = |reply| match reply {
        leadline::api::operations::Reply::Answer(v) => v,
        other => panic!("not an answer: {other:?}"),
    };
    let story = answer(
        leadline::api::operations::call(&cx, "lead_story", serde_json::json!({"id": a.event_id})).await.unwrap(),
    );
    let receipts = story["receipts"].as_array().unwrap();
    let step_ids: Vec<i64> = steps.iter().filter(|s| s.event_id == a.event_id).map(|s| s.id).collect();
    assert!(receipts.iter().all(|r| step_ids.contains(&r["delivery_id"].as_i64().unwrap())), "{receipts:?}");
    let statuses: Vec<&str> = receipts.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert!(statuses.contains(&"failed"), "{statuses:?}");
    let speed = answer(
        leadline::api::operations::call(&cx, "contact_speed", serde_json::json!({"range": "24h"})).await.unwrap(),
    );
    let web = speed.as_array().unwrap().iter().find(|s| s["source"] == "web").unwrap();
    assert!(web["accepted"].as_u64().unwrap() >= 2, "{web}");
    assert!(web["delivered"].as_u64().unwrap() >= 1, "{web}");
    assert!(web["accepted_p50_ms"].as_i64().unwrap() <= web["accepted_p95_ms"].as_i64().unwrap(), "{web}");
}

#[tokio::test]
async fn a_number_that_said_stop_is_never_texted_again() {
    let c = start("", None).await;
    let stopped = phone(1);
    c.tw.set_faults(mock_twilio::Faults { unsubscribed: BTreeSet::from([stopped.clone()]), ..Default::default() });
    c.post("text", person("s1", &stopped)).await;
    c.settle().await;
    assert_eq!(c.tw.refused(), 1, "21610 once");
    assert!(c.server.app.store.opted_out(&stopped).await.unwrap());
    // A later lead with the same number, by SMS or as WhatsApp's fallback: no request reaches Twilio.
    c.tw.set_faults(Default::default());
    c.post("text", person("s2", &stopped)).await;
    c.settle().await;
    assert_eq!((c.tw.count_to(&stopped), c.tw.refused()), (0, 1));

    // An inbound STOP (signed like every Twilio request) opts another number out.
    let other = phone(2);
    let url = format!("http://127.0.0.1:{}/receipts/sms/sms", c.server.addr.port());
    let form: Vec<(String, String)> =
        [("From", other.as_str()), ("To", "+15005550006"), ("Body", "STOP"), ("OptOutType", "STOP")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let unsigned = c.http.post(&url).form(&form).send().await.unwrap();
    assert_eq!(unsigned.status(), reqwest::StatusCode::UNAUTHORIZED);
    let sig = leadline::targets::sms::wire::signature(mock_twilio::AUTH_TOKEN, &url, &form);
    let signed = c.http.post(&url).header("x-twilio-signature", sig).form(&form).send().await.unwrap();
    assert!(signed.status().is_success(), "{}", signed.status());
    c.post("text", person("s3", &other)).await;
    c.settle().await;
    assert_eq!(c.tw.count_to(&other), 0);
    let attempts = c.server.app.store.all_attempts().await.unwrap();
    assert!(attempts.iter().any(|a| a.reason.contains("opted out")), "shown as opted out");
}

#[tokio::test]
async fn quiet_hours_hold_a_message_until_the_morning() {
    // 23:30 in Berlin.
    let night = chrono::Utc.with_ymd_and_hms(2026, 12, 5, 22, 30, 0).unwrap();
    let clock = leadline::api::Clock::manual(night);
    let c = start(r#"quiet_hours = { from = "21:00", until = "08:00" }"#, Some(clock.clone())).await;
    c.post("web", person("n", &phone(3))).await;
    let store = &c.server.app.store;
    wait_for("the message to be scheduled", Duration::from_secs(10), async || {
        store.all_attempts().await.unwrap().iter().any(|a| a.reason.starts_with("scheduled"))
    })
    .await;
    c.server.app.worker.as_ref().unwrap().wake.notify_one();
    let passes = c.server.app.worker.as_ref().unwrap().watch_passes();
    let start = *passes.borrow();
    let mut passes = passes;
    passes.wait_for(|p| *p >= start + 5).await.unwrap();
    assert_eq!(c.wa.count_to(&phone(3)), 0, "nothing at night");
    let step = c.steps().await.pop().unwrap();
    assert_eq!((step.state.as_str(), step.attempts), ("pending", 0));
    // 08:00 in Berlin: it goes.
    clock.set(chrono::Utc.with_ymd_and_hms(2026, 12, 6, 7, 0, 1).unwrap());
    c.settle().await;
    assert_eq!(c.wa.count_to(&phone(3)), 1);
}

#[tokio::test]
async fn a_lead_too_old_for_an_automatic_hello_gets_a_call_task() {
    let c = start("", None).await;
    let old = (chrono::Utc::now() - chrono::Duration::hours(3)).to_rfc3339();
    c.post("web", serde_json::json!({"id": "old", "name": "Ada Lovelace", "phone": phone(4), "created_time": old}))
        .await;
    c.settle().await;
    assert_eq!(c.wa.count_to(&phone(4)), 0);
    let step = c.steps().await.pop().unwrap();
    assert_eq!(
        (step.target.as_str(), step.fallback_of.as_deref(), step.state.as_str()),
        ("call_task", Some("hello"), "delivered")
    );
    let _ = &c.crm;
}

#[tokio::test]
async fn a_send_nobody_confirms_goes_to_a_person_and_is_not_repeated() {
    let t0 = chrono::Utc.with_ymd_and_hms(2026, 12, 5, 12, 0, 0).unwrap();
    let clock = leadline::api::Clock::manual(t0);
    let c = start("in_doubt_minutes = 10", Some(clock.clone())).await;
    // No receipts reach Leadline, and the answer is lost: WhatsApp has the message, Leadline cannot know.
    c.wa.post_receipts_to("http://127.0.0.1:1/nowhere");
    c.wa.set_faults(mock_whatsapp::Faults { lose_answers: 1, hang: Duration::from_secs(2), ..Default::default() });
    c.post("web", person("d", &phone(5))).await;
    let store = &c.server.app.store;
    wait_for("the send without an answer", Duration::from_secs(10), async || {
        store.all_attempts().await.unwrap().iter().any(|a| a.reason.starts_with("sent, no answer"))
    })
    .await;
    // Its retry finds it in doubt, and waits for the receipt instead of sending.
    clock.set(t0 + chrono::Duration::seconds(1));
    wait_for("the step to wait in doubt", Duration::from_secs(10), async || {
        store.all_attempts().await.unwrap().iter().any(|a| a.reason.starts_with("in doubt"))
    })
    .await;
    clock.set(t0 + chrono::Duration::minutes(5));
    wait_for("a second look", Duration::from_secs(10), async || {
        store.all_attempts().await.unwrap().iter().filter(|a| a.reason.starts_with("in doubt")).count() >= 2
    })
    .await;
    assert_eq!(c.wa.count_to(&phone(5)), 1);
    // Eleven minutes later, still no receipt: a person is asked.
    clock.set(t0 + chrono::Duration::minutes(11));
    c.settle().await;
    let step = c.steps().await.pop().unwrap();
    assert_eq!((step.state.as_str(), step.dead_class.as_deref()), ("dead", Some("ambiguous")));
    assert!(step.dead_reason.as_deref().unwrap_or_default().contains("did this lead get our message?"));
    assert_eq!(c.wa.count_to(&phone(5)), 1, "never sent again by itself");
}

async fn dead_step(c: &Contact, source_ref: &str) -> leadline::store::DeliveryRecord {
    c.steps().await.into_iter().find(|s| s.source_ref == source_ref && s.state == "dead").expect("a dead step")
}

/// The answer to "did this lead get our message?" in one click: "send again" sends it once more; "it arrived"
/// sends nothing and the step is delivered. A plain replay, without an answer, asks again rather than guess.
#[tokio::test]
async fn a_person_answers_whether_a_message_in_doubt_arrived() {
    let t0 = chrono::Utc.with_ymd_and_hms(2026, 12, 5, 12, 0, 0).unwrap();
    let clock = leadline::api::Clock::manual(t0);
    let c = start("in_doubt_minutes = 10", Some(clock.clone())).await;
    let app = &c.server.app;
    let store = &app.store;
    c.wa.post_receipts_to("http://127.0.0.1:1/nowhere");
    c.wa.set_faults(mock_whatsapp::Faults { lose_answers: 2, hang: Duration::from_secs(2), ..Default::default() });
    c.post("web", person("again", &phone(60))).await;
    c.post("web", person("arrived", &phone(61))).await;
    wait_for("both sends without an answer", Duration::from_secs(10), async || {
        store.all_attempts().await.unwrap().iter().filter(|a| a.reason.starts_with("sent, no answer")).count() == 2
    })
    .await;
    clock.set(t0 + chrono::Duration::minutes(11));
    c.settle().await;
    let (again, arrived) = (dead_step(&c, "again").await, dead_step(&c, "arrived").await);

    // The dead letter asks the question; an ordinary dead letter does not.
    let view = leadline::api::dead_letter(app, again.id).await.unwrap();
    let doubt = view.contact_doubt.expect("the question");
    assert_eq!(doubt.channel, "whatsapp");
    // A plain replay does not guess: the step asks again, and nothing is sent.
    replay(&c, vec![again.id]).await;
    c.settle().await;
    let again = dead_step(&c, "again").await;
    assert_eq!(again.dead_class.as_deref(), Some("ambiguous"));
    assert_eq!(c.wa.count_to(&phone(60)), 1);

    // In the window the answer is confirmed natively; the question says what happens.
    let no = std::sync::Arc::new(leadline::api::ScriptedConfirm::always(false));
    let args =
        leadline::api::ContactDoubtArgs { id: again.id, arrived: false, note: "the lead says nothing came".into() };
    let asked = leadline::api::contact_doubt_question(app, "ops", args.clone()).await.unwrap();
    assert!(matches!(asked.answered(no).await, Err(leadline::api::ApiError::Cancelled)));
    assert_eq!(c.wa.count_to(&phone(60)), 1, "a cancelled answer sends nothing");

    // "Send again": the message goes once more, and the step is delivered.
    c.wa.set_faults(Default::default());
    leadline::api::answer_contact_doubt(app, &args, "desktop user `ops`").await.unwrap();
    wait_for("the second hello", Duration::from_secs(20), async || c.wa.count_to(&phone(60)) == 2).await;
    c.settle().await;
    let step = c.steps().await.into_iter().find(|s| s.id == again.id).unwrap();
    assert_eq!(step.state, "delivered", "{step:?}");
    assert!(leadline::api::dead_letter(app, again.id).await.unwrap().contact_doubt.is_none());
    // Answered once: a second answer is refused.
    let twice = leadline::api::answer_contact_doubt(app, &args, "ops").await;
    assert!(matches!(twice, Err(leadline::api::ApiError::BadRequest(_))), "{twice:?}");

    // "It arrived": nothing is sent, and the step is delivered.
    let args = leadline::api::ContactDoubtArgs { id: arrived.id, arrived: true, note: String::new() };
    let receipt = leadline::api::answer_contact_doubt(app, &args, "desktop user `ops`").await.unwrap();
    wait_for("the replay to finish", Duration::from_secs(20), async || {
        leadline::api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
    c.settle().await;
    let step = c.steps().await.into_iter().find(|s| s.id == arrived.id).unwrap();
    assert_eq!(step.state, "delivered", "{step:?}");
    assert_eq!(c.wa.count_to(&phone(61)), 1, "no second hello");
    assert!(c.tw.messages().is_empty(), "and no SMS instead");
    let history = leadline::api::dead_letter(app, arrived.id).await.unwrap().replays;
    assert!(history.iter().any(|r| r.reason.contains("the lead got the first message")), "{history:?}");
}

#[tokio::test]
async fn a_refused_setup_holds_the_step_and_alerts_instead_of_dead_lettering_each_lead() {
    let c = start("", None).await;
    let store = &c.server.app.store;
    // WhatsApp: the template does not exist (132001). Twilio: the region is not enabled (21408).
    c.wa.set_faults(mock_whatsapp::Faults { template_missing: true, ..Default::default() });
    c.tw.set_faults(mock_twilio::Faults { region_disabled: true, ..Default::default() });
    for i in 0..3 {
        c.post("web", person(&format!("w{i}"), &phone(200 + i))).await;
        c.post("text", person(&format!("t{i}"), &phone(300 + i))).await;
    }
    let setup_alerts = async || -> Vec<String> {
        let alerts = store.alerts(50).await.unwrap();
        let mut keys: Vec<String> = alerts
            .iter()
            .filter(|a| a.kind == leadline::model::AlertKind::PermanentConfig && a.resolved_at.is_none())
            .map(|a| a.key.clone())
            .collect();
        keys.sort();
        keys
    };
    wait_for("an alert for each step", Duration::from_secs(20), async || setup_alerts().await == ["hello", "sms"])
        .await;
    // Several probes were refused (one per cooldown), and still no lead was dead-lettered or used its attempts.
    wait_for("a few refused probes", Duration::from_secs(20), async || c.wa.refused() >= 3 && c.tw.refused() >= 3)
        .await;
    let steps = c.steps().await;
    assert_eq!(steps.len(), 6, "no fallback ran: {steps:?}");
    // Waiting (a probe may be on its way at this instant), none dead, no attempt used.
    assert!(steps.iter().all(|s| matches!(s.state.as_str(), "pending" | "running") && s.attempts == 0), "{steps:?}");
    assert!(c.wa.messages().is_empty() && c.tw.messages().is_empty());
    let attempts = store.all_attempts().await.unwrap();
    assert!(attempts.iter().any(|a| a.reason.contains("waits until the step's setup is fixed")), "{attempts:?}");
    // The health view names the hold, for both steps (under load the second may meet its refusal a moment later).
    let app = c.server.app.clone();
    wait_for("both steps to show the setup hold", Duration::from_secs(20), async || {
        let health = leadline::monitor::health(&app, chrono::Utc::now()).await.unwrap();
        let held = |t: &str| {
            health.breakers.iter().any(|b| {
                b.target == t && matches!(b.situation, leadline::monitor::health::TargetSituation::RefusingSetup { .. })
            })
        };
        held("hello") && held("sms")
    })
    .await;

    // A person fixes the template and the region: every lead goes, once, and the alerts resolve.
    c.wa.set_faults(Default::default());
    c.tw.set_faults(Default::default());
    c.settle().await;
    for i in 0..3 {
        assert_eq!(c.wa.count_to(&phone(200 + i)), 1);
        assert_eq!(c.tw.count_to(&phone(300 + i)), 1);
    }
    assert!(c.steps().await.iter().all(|s| s.state == "delivered"));
    wait_for("the alerts to resolve", Duration::from_secs(20), async || setup_alerts().await.is_empty()).await;
}

/// Replays `ids` (dead letters) as a person would, and waits until the replay is done.
async fn replay(c: &Contact, ids: Vec<i64>) {
    use leadline::api::ReplayRequest;
    use leadline::replay::{ReplayOptions, ReplaySelection};
    let app = &c.server.app;
    let request = ReplayRequest {
        selection: ReplaySelection { ids: Some(ids.clone()), filter: None },
        expected: ids.len() as i64,
        reason: "checked with the lead".into(),
        options: ReplayOptions { canary: None, rate_per_second: None },
    };
    let receipt = leadline::api::replay(app, &request, "desktop user `ops`").await.unwrap();
    assert_eq!(receipt.queued, ids.len() as i64);
    wait_for("the replay to finish", Duration::from_secs(20), async || {
        leadline::api::replay_progress(app, receipt.replay_id).await.unwrap().done
    })
    .await;
}

#[tokio::test]
async fn a_replay_never_repeats_a_first_contact_that_was_delivered() {
    let t0 = chrono::Utc.with_ymd_and_hms(2026, 12, 5, 12, 0, 0).unwrap();
    let clock = leadline::api::Clock::manual(t0);
    let c = start("in_doubt_minutes = 10", Some(clock.clone())).await;
    let store = &c.server.app.store;
    // The answer is lost and no receipt arrives in time: after ten minutes a person is asked.
    c.wa.post_receipts_to("http://127.0.0.1:1/nowhere");
    c.wa.set_faults(mock_whatsapp::Faults { lose_answers: 1, hang: Duration::from_secs(2), ..Default::default() });
    c.post("web", person("late", &phone(40))).await;
    wait_for("the send without an answer", Duration::from_secs(10), async || {
        store.all_attempts().await.unwrap().iter().any(|a| a.reason.starts_with("sent, no answer"))
    })
    .await;
    clock.set(t0 + chrono::Duration::minutes(11));
    c.settle().await;
    let step = c.steps().await.pop().unwrap();
    assert_eq!((step.state.as_str(), step.dead_class.as_deref()), ("dead", Some("ambiguous")));
    // Its receipt arrives late: the message was delivered. A person replays the lead anyway.
    c.wa.post_receipts_to(&format!("http://{}/receipts/whatsapp/hello", c.server.addr));
    c.wa.report_all("delivered").await;
    wait_for("the late receipt to be recorded", Duration::from_secs(10), async || {
        store.receipts_of(&[step.id]).await.unwrap().iter().any(|r| r.status == "delivered")
    })
    .await;
    replay(&c, vec![step.id]).await;
    c.settle().await;
    let step = c.steps().await.pop().unwrap();
    assert_eq!(step.state, "delivered", "{step:?}");
    assert_eq!(c.wa.count_to(&phone(40)), 1, "no second hello");
    assert!(c.tw.messages().is_empty(), "and no SMS instead");

    // A lead whose hello went out and whose SMS fallback's text was refused (the number is invalid for Twilio)
    // is replayed from its dead SMS step: the WhatsApp step is not run again.
    let stuck = phone(41);
    c.wa.set_faults(mock_whatsapp::Faults {
        undeliverable: BTreeSet::from([stuck.trim_start_matches('+').to_string()]),
        ..Default::default()
    });
    c.tw.set_faults(mock_twilio::Faults { invalid: BTreeSet::from([stuck.clone()]), ..Default::default() });
    c.post("web", person("fallback", &stuck)).await;
    wait_for("the SMS fallback to fail", Duration::from_secs(20), async || {
        c.steps().await.iter().any(|s| s.source_ref == "fallback" && s.target == "sms" && s.state == "dead")
    })
    .await;
    let dead = c.steps().await.into_iter().find(|s| s.source_ref == "fallback" && s.state == "dead").unwrap();
    c.tw.set_faults(Default::default());
    replay(&c, vec![dead.id]).await;
    c.settle().await;
    assert_eq!((c.wa.count_to(&stuck), c.tw.count_to(&stuck)), (1, 1));

    // The same lead sent again by its source with other content (a revision) does not greet it twice either.
    c.post("web", person("revised", &phone(42))).await;
    c.settle().await;
    c.post("web", serde_json::json!({"id": "revised", "name": "Ada King", "phone": phone(42)})).await;
    c.settle().await;
    assert_eq!(c.wa.count_to(&phone(42)), 1);
}

#[tokio::test]
async fn quiet_hours_follow_the_sources_time_zone_else_the_numbers_country() {
    // 23:30 in Berlin, 17:30 in New York.
    let night = chrono::Utc.with_ymd_and_hms(2026, 12, 5, 22, 30, 0).unwrap();
    let clock = leadline::api::Clock::manual(night);
    let c = start(r#"quiet_hours = { from = "21:00", until = "08:00" }"#, Some(clock.clone())).await;
    let us = "+12125550142";
    // A German number from the New York source, and an American number from the web form: both daytime.
    c.post("ny", person("ny", &phone(50))).await;
    c.post("web", person("us", us)).await;
    // A German number from the web form: night in Berlin.
    c.post("web", person("de", &phone(51))).await;
    wait_for("the daytime leads to be greeted", Duration::from_secs(10), async || {
        c.wa.count_to(&phone(50)) == 1 && c.wa.count_to(us) == 1
    })
    .await;
    let store = &c.server.app.store;
    wait_for("the German lead to be scheduled", Duration::from_secs(10), async || {
        store
            .all_attempts()
            .await
            .unwrap()
            .iter()
            .any(|a| a.reason.starts_with("scheduled") && a.reason.contains("Europe/Berlin"))
    })
    .await;
    assert_eq!(c.wa.count_to(&phone(51)), 0, "nothing at night in Berlin");
    // 08:00 in Berlin: it goes; the others were not sent again.
    clock.set(chrono::Utc.with_ymd_and_hms(2026, 12, 6, 7, 0, 1).unwrap());
    c.settle().await;
    assert_eq!((c.wa.count_to(&phone(50)), c.wa.count_to(us), c.wa.count_to(&phone(51))), (1, 1, 1));
}

#[tokio::test]
async fn a_look_up_follows_twilios_list_page_by_page() {
    let t0 = chrono::Utc::now();
    let clock = leadline::api::Clock::manual(t0);
    let c = start("", Some(clock.clone())).await;
    let store = &c.server.app.store;
    let to = phone(60);
    // The answer and the status callbacks are lost; then the account sends another message to the same number,
    // and the list holds one message a page: Leadline's send is on the second page.
    c.tw.set_faults(mock_twilio::Faults {
        lose_answers: 1,
        hang: Duration::from_secs(2),
        page_size_cap: 1,
        no_callbacks: true,
        ..Default::default()
    });
    c.post("text", person("paged", &to)).await;
    // The other message goes while our answer hangs (Twilio has ours; the client waits 300 ms): a retry's
    // look-up can come at once after the lost answer (full jitter may draw no wait), and must already see both.
    wait_for("our message to reach Twilio", Duration::from_secs(10), async || {
        c.tw.messages().iter().any(|m| m.to == to)
    })
    .await;
    c.tw.add_other_message(&to, "Your appointment is tomorrow");
    wait_for("the send without an answer", Duration::from_secs(10), async || {
        store.all_attempts().await.unwrap().iter().any(|a| a.reason.starts_with("sent, no answer"))
    })
    .await;
    // Past the settling time: a look-up that did not find it would send it again.
    clock.set(t0 + chrono::Duration::seconds(10));
    c.settle().await;
    let ours = c.tw.messages().iter().filter(|m| m.to == to && m.body.contains("thanks for your request")).count();
    assert_eq!(ours, 1, "found on the second page, not sent again");
    assert!(c.tw.lists() >= 2, "two pages read: {}", c.tw.lists());
    let attempts = store.all_attempts().await.unwrap();
    assert!(attempts.iter().any(|a| a.reason.contains("found by look-up")), "{attempts:?}");
}
