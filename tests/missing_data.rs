//! Missing data (issue #38): a lead the CRM refuses only for a field on the target's `missing_data.drop` list is
//! written without it, tagged, in the same delivery, with a task for a person — never a dead letter, never a
//! second record — and a corrected value goes to the same record as an update. The real server and worker against
//! the HubSpot mock, then each other CRM connector (Salesforce's mock, Pipedrive's mock, and a generic target
//! whose CRM names the field where its `classify.field_pointer` says), on SQLite and (with
//! `LEADLINE_TEST_BACKEND=postgres`) PostgreSQL.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TestApp;
use leadline::api;
use leadline::demo::mock_crm::MockCrm;
use leadline::demo::mock_hubspot::{HubspotBehaviour, MockHubspot};
use leadline::demo::mock_pipedrive::{self, MockPipedrive};
use leadline::demo::mock_salesforce::{self, MockSalesforce, SalesforceBehaviour, SfValidation};
use leadline::replay::fix::{FieldFix, FieldOp};
use leadline::server::Server;
use leadline::store::{Completion, JobOutcome};
use serde_json::json;

const TOKEN_ENV: &str = "TEST_HUBSPOT_TOKEN";
const BAD_PHONE: &str = "0151 1234567";

/// HubSpot upserting by `leadline_id`, allowed to go without `phone`, tagging `hs_lead_status`; `task` names the
/// follow-up step, if any.
fn hubspot_target(addr: std::net::SocketAddr, task: Option<&str>) -> String {
    let task = task.map(|t| format!(", task = \"{t}\"")).unwrap_or_default();
    format!(
        r#"
[targets.crm]
kind = "hubspot"
url = "http://{addr}"
auth = {{ bearer_env = "{TOKEN_ENV}" }}
id_property = "leadline_id"
timeout_ms = 2000
concurrency = 1
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
missing_data = {{ drop = ["phone"], tag = {{ property = "hs_lead_status", value = "missing data: {{fields}}" }}{task} }}

[[targets.crm.mapping]]
to = "email"
from = "email"
transform = ["trim", "lowercase"]
required = true

[[targets.crm.mapping]]
to = "firstname"
from = "name"
transform = ["first_name"]

[[targets.crm.mapping]]
to = "phone"
from = "phone"
"#
    )
}

/// A server whose `crm` target is `target` (its TOML, beside the shared test configuration), with `secrets`.
async fn start(target: &str, secrets: &[(&str, &str)]) -> TestApp {
    common::init_test_log();
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = common::config_text(crm_addr, &dir.path().join("leadline.db"), target);
    let mut config = common::parse_config(&text);
    for (name, value) in secrets {
        config.inline_secrets.insert((*name).into(), (*value).into());
    }
    let server = Server::start(config).await.unwrap();
    TestApp { server, crm, crm_addr, http: reqwest::Client::new(), dir }
}

async fn spawn(behaviour: HubspotBehaviour, task: Option<&str>) -> (TestApp, MockHubspot) {
    let (hubspot, hubspot_addr) = MockHubspot::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    hubspot.set(behaviour);
    let app = start(&hubspot_target(hubspot_addr, task), &[(TOKEN_ENV, leadline::demo::mock_hubspot::TOKEN)]).await;
    (app, hubspot)
}

async fn pause(app: &TestApp, paused: bool) {
    api::set_target_paused(&app.server.app, "crm", paused, "test").await.unwrap();
}

/// Posts `n` leads `{prefix}-000`… to the `plain` source (routed to HubSpot alone); every `bad_every`th has a
/// phone HubSpot refuses. Returns (good ids, bad ids).
async fn post_leads(app: &TestApp, prefix: &str, n: usize, bad_every: usize) -> (Vec<String>, Vec<String>) {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for i in 0..n {
        let id = format!("{prefix}-{i:03}");
        let mut lead = common::lead(&id);
        if i % bad_every == 0 {
            lead["phone"] = json!(BAD_PHONE);
            bad.push(id.clone());
        } else {
            good.push(id.clone());
        }
        assert_eq!(app.post_plain(&lead).await, 202);
    }
    (good, bad)
}

/// The lead's HubSpot contact, written exactly once; with its phone, or without it and tagged.
fn assert_written_once(hubspot: &MockHubspot, id: &str, with_phone: bool) -> String {
    let c = hubspot.contact("leadline_id", &format!("plain:{id}")).unwrap_or_else(|| panic!("{id} missing"));
    assert_eq!(c.writes, 1, "{id} written {} times", c.writes);
    assert_eq!(c.properties["email"], format!("{}@example.com", id.to_lowercase()));
    if with_phone {
        assert_eq!(c.properties["phone"], "+4915112345678", "{id}");
        assert!(c.properties.get("hs_lead_status").is_none(), "{id} tagged: {:?}", c.properties);
    } else {
        assert!(c.properties.get("phone").is_none(), "{id} keeps its refused phone: {:?}", c.properties);
        assert_eq!(c.properties["hs_lead_status"], "missing data: phone", "{id}");
    }
    c.id
}

#[tokio::test]
async fn a_batch_with_bad_phones_delivers_every_lead_the_bad_ones_tagged_with_one_record_and_one_task() {
    let (app, hubspot) = spawn(HubspotBehaviour { strict_phone: true, ..Default::default() }, Some("notify")).await;
    pause(&app, true).await;
    let (good, bad) = post_leads(&app, "B", 40, 5).await;
    pause(&app, false).await;
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.dead_open, 0, "no lead is a dead letter for its phone alone");

    let stats = hubspot.stats();
    assert_eq!(stats.contacts, 40, "{stats:?}");
    assert_eq!((stats.creates, stats.updates), (40, 0), "one record each: {stats:?}");
    assert_eq!(stats.upsert_requests, 2, "the batch, then the refused leads at once without their phone");
    for id in &good {
        assert_written_once(&hubspot, id, true);
    }
    for id in &bad {
        assert_written_once(&hubspot, id, false);
        // One task each: the follow-up step, delivered once.
        assert_eq!(app.crm.notifications_for(&format!("plain:{id}")), 1, "{id}");
    }
    for id in &good {
        assert_eq!(app.crm.notifications_for(&format!("plain:{id}")), 0, "{id}");
    }

    let counts = app.server.app.store.missing_data_counts().await.unwrap();
    assert_eq!(counts.delivered, bad.len() as i64);
    assert_eq!(counts.by_target, vec![("crm".to_string(), bad.len() as i64)]);
    assert_eq!(counts.needs_a_person, 0, "a follow-up step asks, not Leadline");
    let leads = app.server.app.store.missing_data_leads(100).await.unwrap();
    assert_eq!(leads.len(), bad.len());
    for lead in &leads {
        assert_eq!(lead.fields.len(), 1);
        assert_eq!(lead.fields[0].field, "phone");
        let reason = &lead.fields[0].reason;
        assert!(reason.contains("HubSpot rejected property phone"), "{reason}");
        assert!(!reason.contains("1234567"), "the reason never quotes the lead: {reason}");
        assert_eq!(lead.task.as_deref(), Some("follow_up"));
        assert!(lead.crm_id.is_some());
    }
    // The refusal is in the step's attempts, the delivery after it used no second attempt.
    let step = app.server.app.store.delivery_of("plain", &bad[0], "crm").await.unwrap().unwrap();
    let outcomes = app.server.app.store.attempt_outcomes(step.id).await.unwrap();
    assert_eq!(outcomes, vec!["retry", "delivered"]);
    let result: serde_json::Value = serde_json::from_str(&step.result.unwrap()).unwrap();
    assert_eq!(result["without"], json!(["phone"]));
    eprintln!(
        "figures: 40 leads, {} with a refused phone: 0 dead letters, {} delivered with missing data",
        bad.len(),
        counts.delivered
    );
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_batch_refused_whole_for_bad_phones_still_delivers_them_and_a_bad_email_still_dies() {
    let behaviour = HubspotBehaviour {
        strict_phone: true,
        reject_whole_batch: true,
        reject_emails: vec!["c-email@example.com".into()],
        ..Default::default()
    };
    let (app, hubspot) = spawn(behaviour, None).await;
    pause(&app, true).await;
    let (good, bad) = post_leads(&app, "C", 10, 4).await;
    assert_eq!(app.post_plain(&common::lead("C-email")).await, 202);
    pause(&app, false).await;
    let h = app.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(h.overall.dead_open, 1, "the bad e-mail is not on the drop list: a dead letter as before");
    let dead = app.server.app.store.delivery_of("plain", "C-email", "crm").await.unwrap().unwrap();
    assert_eq!((dead.state.as_str(), dead.dead_field.as_deref()), ("dead", Some("email")));

    for id in &good {
        assert_written_once(&hubspot, id, true);
    }
    for id in &bad {
        assert_written_once(&hubspot, id, false);
    }
    // Without a follow-up step, Leadline's own "Needs a person" task.
    let counts = app.server.app.store.missing_data_counts().await.unwrap();
    assert_eq!((counts.delivered, counts.needs_a_person), (bad.len() as i64, bad.len() as i64));
    let step = app.server.app.store.delivery_of("plain", &bad[0], "crm").await.unwrap().unwrap();
    assert!(app.server.app.store.close_missing_task(step.id).await.unwrap());
    assert!(!app.server.app.store.close_missing_task(step.id).await.unwrap(), "closed once");
    let counts = app.server.app.store.missing_data_counts().await.unwrap();
    assert_eq!(counts.needs_a_person, bad.len() as i64 - 1);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_crash_between_the_refusal_and_the_send_without_the_field_makes_no_second_record() {
    let (app, hubspot) = spawn(HubspotBehaviour { strict_phone: true, ..Default::default() }, None).await;
    let store = &app.server.app.store;
    let handle = app.server.app.worker.clone().expect("a worker");
    let target = handle.targets.current()["crm"].clone();
    // The worker claims nothing while the target is paused: this test plays a worker that dies.
    pause(&app, true).await;
    let (_, bad) = post_leads(&app, "K", 2, 1).await;
    let now = app.server.app.clock.now();
    let lease = now + chrono::Duration::milliseconds(200);

    // Lead K-000: the refusal is committed, then the process dies before the send without the phone.
    // Lead K-001: the refusal is committed, the send without the phone reaches HubSpot, and the process dies
    // before its answer is committed.
    let jobs = store.claim("crm", 2, "dying-worker", now, lease).await.unwrap();
    assert_eq!(jobs.len(), 2);
    let refused = leadline::delivery::worker::execute_batch(store, &handle, &target, jobs).await;
    for c in &refused {
        assert!(matches!(&c.outcome, JobOutcome::WithoutFields { dropped, .. } if dropped == &["phone"]), "{c:?}");
    }
    assert_eq!(store.complete(&refused).await.unwrap(), 2);
    assert_eq!(hubspot.stats().contacts, 0);
    let now = app.server.app.clock.now();
    let lease = now + chrono::Duration::milliseconds(200);
    let again = store.claim("crm", 2, "dying-worker", now, lease).await.unwrap();
    let k1 = again.into_iter().find(|j| j.source_ref == bad[1]).expect("K-001 due at once");
    assert_eq!(k1.dropped, vec!["phone".to_string()]);
    assert!(k1.idempotency_key().ends_with(":without-phone"), "{}", k1.idempotency_key());
    let sent: Vec<Completion> = leadline::delivery::worker::execute_batch(store, &handle, &target, vec![k1]).await;
    assert!(matches!(sent[0].outcome, JobOutcome::Delivered { .. }), "{:?}", sent[0].outcome);
    assert_eq!(hubspot.stats().contacts, 1, "K-001 is in HubSpot; its answer is lost with the process");

    // A new worker takes over: the rescuer returns K-001 in doubt once its lease ran out; both go without the
    // phone, each to one record.
    pause(&app, false).await;
    common::wait_for("both delivered", Duration::from_secs(30), async || {
        let steps = app.server.app.store.deliveries().await.unwrap();
        steps.iter().filter(|d| d.target == "crm" && d.state == "delivered").count() == 2
    })
    .await;
    let stats = hubspot.stats();
    assert_eq!((stats.contacts, stats.creates), (2, 2), "no second record: {stats:?}");
    for id in &bad {
        let c = hubspot.contact("leadline_id", &format!("plain:{id}")).unwrap();
        assert!(c.properties.get("phone").is_none());
        assert_eq!(c.properties["hs_lead_status"], "missing data: phone");
    }
    assert_eq!(app.server.app.store.missing_data_counts().await.unwrap().delivered, 2);
    app.server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_corrected_phone_reaches_the_same_record_as_an_update() {
    let (app, hubspot) = spawn(HubspotBehaviour { strict_phone: true, ..Default::default() }, None).await;
    let (_, bad) = post_leads(&app, "U", 1, 1).await;
    app.wait_settled(Duration::from_secs(30)).await;
    let id = &bad[0];
    let record = assert_written_once(&hubspot, id, false);
    let step = app.server.app.store.delivery_of("plain", id, "crm").await.unwrap().unwrap();

    // The value as received is kept (the API masks it), so a person can correct it.
    let story = api::lead_story(&app.server.app, step.event_id).await.unwrap();
    let missing = story.missing_data.iter().find(|m| m.delivery_id == step.id).expect("the step's missing data");
    assert_eq!(missing.fields[0].field, "phone");
    assert_ne!(story.lead.payload["phone"], BAD_PHONE, "masked: {}", story.lead.payload);

    let fix = FieldFix { field: "phone".into(), op: FieldOp::NormalizePhone { country_code: "+49".into() } };
    api::correct_missing_data(&app.server.app, step.id, &fix, "the customer confirmed it", "ops").await.unwrap();
    app.wait_settled(Duration::from_secs(30)).await;

    let stats = hubspot.stats();
    assert_eq!((stats.contacts, stats.creates, stats.updates), (1, 1, 1), "{stats:?}");
    let c = hubspot.contact("leadline_id", &format!("plain:{id}")).unwrap();
    assert_eq!(c.id, record, "the same record");
    assert_eq!(c.properties["phone"], "+491511234567");
    let counts = app.server.app.store.missing_data_counts().await.unwrap();
    assert_eq!(counts.delivered, 0, "corrected: no longer delivered with missing data");
    let lead = app.server.app.store.missing_data_of(step.id).await.unwrap().unwrap();
    assert_eq!(lead.task.as_deref(), Some("corrected"));
    // A correction that changes nothing, or of a lead not delivered with missing data, is refused.
    assert!(api::correct_missing_data(&app.server.app, step.id, &fix, "again", "ops").await.is_err());
    app.server.shutdown().await.unwrap();
}

/// Posts the `plain` leads `(id, fields)` while the target is paused, then lets them go and waits until every one
/// is delivered or dead.
async fn deliver(app: &TestApp, leads: &[(&str, serde_json::Value)]) {
    pause(app, true).await;
    for (id, fields) in leads {
        let mut lead = common::lead(id);
        for (k, v) in fields.as_object().unwrap() {
            lead[k] = v.clone();
        }
        assert_eq!(app.post_plain(&lead).await, 202);
    }
    pause(app, false).await;
    app.wait_settled(Duration::from_secs(30)).await;
}

/// The open dead letters' lead ids with the field each names.
async fn dead(app: &TestApp) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for d in app.server.app.store.deliveries().await.unwrap() {
        if d.target == "crm" && d.state == "dead" {
            out.push((d.source_ref, d.dead_field));
        }
    }
    out.sort();
    out
}

/// The fields each lead was delivered without, by lead id (only those delivered with missing data).
async fn without(app: &TestApp) -> HashMap<String, Vec<String>> {
    let leads = app.server.app.store.missing_data_leads(100).await.unwrap();
    leads.into_iter().map(|l| (l.source_ref, l.fields.into_iter().map(|f| f.field).collect())).collect()
}

// Salesforce. Its refusals follow "Status Codes and Error Responses" of the REST API: a JSON array of
// `{"message", "errorCode", "fields"}` (the mock's `SfValidation`). A validation rule shown at its field answers
// `FIELD_CUSTOM_VALIDATION_EXCEPTION` naming it; a lookup by an external id that finds no record `INVALID_FIELD`
// ("Foreign key external ID: … not found for field …"); a malformed Email `INVALID_EMAIL_ADDRESS`.

const SF_ENV: [(&str, &str); 3] = [
    ("TEST_SF_CLIENT_ID", mock_salesforce::CLIENT_ID),
    ("TEST_SF_CLIENT_SECRET", mock_salesforce::CLIENT_SECRET),
    ("TEST_SF_REFRESH_TOKEN", mock_salesforce::REFRESH_TOKEN),
];

/// Salesforce upserting Leads by `Leadline_Id__c`, allowed to go without `Phone` and the partner account lookup.
fn salesforce_target(sf: std::net::SocketAddr) -> String {
    format!(
        r#"
[targets.crm]
kind = "salesforce"
url = "http://{sf}"
external_id_field = "{key}"
client_id_env = "TEST_SF_CLIENT_ID"
client_secret_env = "TEST_SF_CLIENT_SECRET"
refresh_token_env = "TEST_SF_REFRESH_TOKEN"
timeout_ms = 2000
concurrency = 2
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
missing_data = {{ drop = ["Phone", "Partner_Account__c"], tag = {{ property = "Description" }} }}
mapping = [
    {{ to = "LastName", from = "name", transform = ["last_name"] }},
    {{ to = "Email", from = "email" }},
    {{ to = "Company", constant = "Unknown" }},
    {{ to = "Phone", from = "phone" }},
    {{ to = "Partner_Account__c", from = "partner" }},
]
"#,
        key = mock_salesforce::EXTERNAL_ID_FIELD,
    )
}

fn sf_rule(field: &str, code: &str, message: &str, refuses: &str) -> SfValidation {
    SfValidation { field: field.into(), error_code: code.into(), message: message.into(), refuses: refuses.into() }
}

#[tokio::test]
async fn salesforce_refusals_of_a_listed_field_are_written_without_it_and_a_bad_email_still_dies() {
    let (sf, sf_addr) = MockSalesforce::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    sf.set_behaviour(SalesforceBehaviour {
        validation: vec![
            sf_rule("Phone", "FIELD_CUSTOM_VALIDATION_EXCEPTION", "Use the international format (+49…)", "0151"),
            sf_rule(
                "Partner_Account__c",
                "INVALID_FIELD",
                "Foreign key external ID: 99123 not found for field Partner_Account__c in entity Account",
                "99123",
            ),
            sf_rule("Email", "INVALID_EMAIL_ADDRESS", "Email: invalid email address: s-mail@@example.com", "@@"),
        ],
        ..Default::default()
    });
    let app = start(&salesforce_target(sf_addr), &SF_ENV).await;
    deliver(
        &app,
        &[
            ("S-good", json!({"partner": "10001"})),
            ("S-phone", json!({"phone": BAD_PHONE, "partner": "10001"})),
            ("S-partner", json!({"partner": "99123"})),
            ("S-both", json!({"phone": BAD_PHONE, "partner": "99123"})),
            ("S-mail", json!({"email": "s-mail@@example.com"})),
        ],
    )
    .await;

    // The bad e-mail is not on the drop list: a dead letter naming Email, as without the setting; nothing written.
    assert_eq!(dead(&app).await, vec![("S-mail".to_string(), Some("Email".to_string()))]);
    assert!(sf.record("plain:S-mail").is_none());
    let record = |id: &str| sf.record(&format!("plain:{id}")).unwrap_or_else(|| panic!("{id} not in Salesforce"));
    let good = record("S-good");
    assert_eq!((good.fields["Phone"].as_str(), good.writes), (Some("+4915112345678"), 1));
    assert!(good.fields.get("Description").is_none());
    for (id, left_out, tag) in [
        ("S-phone", vec!["Phone"], "missing data: Phone"),
        ("S-partner", vec!["Partner_Account__c"], "missing data: Partner_Account__c"),
        ("S-both", vec!["Phone", "Partner_Account__c"], "missing data: Phone, Partner_Account__c"),
    ] {
        let r = record(id);
        assert_eq!(r.writes, 1, "{id}: one record, written once");
        for f in &left_out {
            assert!(r.fields.get(*f).is_none(), "{id} keeps {f}: {:?}", r.fields);
        }
        assert_eq!(r.fields["Description"], tag, "{id}");
        assert_eq!(r.fields["Email"], format!("{id}@example.com"), "{id}");
    }
    let by_lead = without(&app).await;
    assert_eq!(by_lead.len(), 3, "{by_lead:?}");
    assert_eq!(by_lead["S-both"], ["Phone", "Partner_Account__c"]);
    let counts = app.server.app.store.missing_data_counts().await.unwrap();
    assert_eq!((counts.delivered, counts.needs_a_person), (3, 3));
    // The reasons say what Salesforce said, never the lead's own value.
    let leads = api::missing_data(&app.server.app).await.unwrap();
    let reasons: Vec<&str> = leads.iter().flat_map(|l| l.fields.iter().map(|f| f.reason.as_str())).collect();
    assert!(reasons.iter().any(|r| r.contains("FIELD_CUSTOM_VALIDATION_EXCEPTION")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("INVALID_FIELD")), "{reasons:?}");
    assert!(reasons.iter().all(|r| !r.contains("1234567")), "{reasons:?}");
    app.server.shutdown().await.unwrap();
}

// Pipedrive. Its refusals follow "Responses" of the API reference: `{"success": false, "error", "error_info",
// "data": null, "additional_data": null}`, HTTP 400 for a value a field does not take, the message naming the
// field as v1's validation errors do ("Validation failed: phones: …"; the mock's `refuse_person_values`).

const PD_ENV: &str = "TEST_PIPEDRIVE_TOKEN";
const PD_FIELD_KEY: &str = mock_pipedrive::FIELD_KEY;
/// A lead custom field (Pipedrive's 40-character key) the tag is written to.
const PD_NOTE_KEY: &str = "a7c3e2d1f0b9a8c7d6e5f4a3b2c1d0e9f8a7b6c5";

fn pipedrive_target(pd: std::net::SocketAddr) -> String {
    format!(
        r#"
[targets.crm]
kind = "pipedrive"
url = "http://{pd}"
api_token_env = "{PD_ENV}"
person_field_key = "{PD_FIELD_KEY}"
timeout_ms = 2000
concurrency = 2
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
missing_data = {{ drop = ["/person/phone"], tag = {{ property = "/lead/{PD_NOTE_KEY}" }} }}
mapping = [
    {{ to = "/person/name", from = "name", required = true }},
    {{ to = "/person/email", from = "email" }},
    {{ to = "/person/phone", from = "phone" }},
    {{ to = "/lead/title", constant = "Web form lead" }},
]
"#
    )
}

#[tokio::test]
async fn pipedrive_400s_for_a_listed_field_write_the_person_without_it_and_others_still_die() {
    let (pd, pd_addr) = MockPipedrive::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    pd.set_faults(mock_pipedrive::Faults {
        refuse_person_values: vec![("phones".into(), "0151".into()), ("emails".into(), "@@".into())],
        ..Default::default()
    });
    let app = start(&pipedrive_target(pd_addr), &[(PD_ENV, mock_pipedrive::TOKEN)]).await;
    deliver(
        &app,
        &[
            ("D-good", json!({})),
            ("D-phone", json!({"phone": BAD_PHONE})),
            ("D-mail", json!({"email": "d-mail@@example.com"})),
        ],
    )
    .await;

    assert_eq!(dead(&app).await, vec![("D-mail".to_string(), Some("/person/email".to_string()))]);
    assert_eq!(without(&app).await, HashMap::from([("D-phone".to_string(), vec!["/person/phone".to_string()])]));
    let persons = pd.persons();
    assert_eq!(persons.len(), 2, "one person each for the good and the bad phone: {persons:?}");
    let person_of = |id: &str| {
        let person = persons.iter().find(|p| p.body["custom_fields"][PD_FIELD_KEY] == format!("plain:{id}"));
        person.unwrap_or_else(|| panic!("{id}'s person: {persons:?}"))
    };
    assert_eq!(person_of("D-good").body["phones"][0]["value"], "+4915112345678");
    let phone_less = person_of("D-phone");
    assert!(phone_less.body.get("phones").is_none(), "{:?}", phone_less.body);
    assert_eq!(phone_less.body["emails"][0]["value"], "D-phone@example.com");
    let leads = pd.leads();
    assert_eq!(leads.len(), 2, "{leads:?}");
    let tagged = leads.iter().find(|l| l.person_id == phone_less.id).expect("D-phone's lead");
    assert_eq!(tagged.body[PD_NOTE_KEY], "missing data: /person/phone");
    assert_eq!(tagged.body["title"], "Web form lead");
    app.server.shutdown().await.unwrap();
}

// The generic target: a CRM of its own shape, which names the refused field where the target's
// `classify.field_pointer` says (`/problems/0/attribute` here, a shape none of the built-in guesses reads).

/// A CRM that upserts `PUT /leads/{id}` and refuses a phone without `+` with 422
/// `{"problems": [{"attribute": "phone", "detail": …}]}`. Keeps each record's body and its writes.
#[derive(Clone, Default)]
struct ShapedCrm {
    records: Arc<Mutex<HashMap<String, (serde_json::Value, usize)>>>,
}

impl ShapedCrm {
    async fn start() -> (ShapedCrm, std::net::SocketAddr) {
        use axum::extract::{Json, Path, State};
        use axum::http::StatusCode;
        let crm = ShapedCrm::default();
        let upsert = |State(crm): State<ShapedCrm>, Path(id): Path<String>, Json(body): Json<serde_json::Value>| async move {
            let phone = body.get("phone").and_then(serde_json::Value::as_str).unwrap_or("+");
            if !phone.starts_with('+') {
                let problem = json!({"problems": [{"attribute": "phone", "detail": "not an international number"}]});
                return (StatusCode::UNPROCESSABLE_ENTITY, Json(problem));
            }
            let mut records = crm.records.lock().unwrap();
            let n = records.len() + 1;
            let entry = records.entry(id).or_insert((json!(null), 0));
            *entry = (body, entry.1 + 1);
            (StatusCode::OK, Json(json!({"id": format!("R-{n}")})))
        };
        let router = axum::Router::new().route("/leads/{id}", axum::routing::put(upsert)).with_state(crm.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        (crm, addr)
    }
}

fn generic_target(addr: std::net::SocketAddr) -> String {
    format!(
        r#"
[targets.crm]
url = "http://{addr}/leads/{{external_id}}"
strategy = "upsert"
timeout_ms = 2000
concurrency = 2
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 300 }}
classify = {{ field_pointer = "/problems/0/attribute" }}
missing_data = {{ drop = ["phone"], tag = {{ property = "note" }} }}
mapping = [
    {{ to = "email", from = "email", required = true }},
    {{ to = "name", from = "name" }},
    {{ to = "phone", from = "phone" }},
]
"#
    )
}

#[tokio::test]
async fn a_generic_target_drops_the_field_its_configured_pointer_names() {
    let (shaped, addr) = ShapedCrm::start().await;
    let app = start(&generic_target(addr), &[]).await;
    deliver(&app, &[("G-good", json!({})), ("G-phone", json!({"phone": BAD_PHONE}))]).await;

    assert_eq!(dead(&app).await, vec![]);
    assert_eq!(without(&app).await, HashMap::from([("G-phone".to_string(), vec!["phone".to_string()])]));
    let records = shaped.records.lock().unwrap().clone();
    let (good, good_writes) = &records["plain:G-good"];
    assert_eq!((good["phone"].as_str(), *good_writes), (Some("+4915112345678"), 1));
    let (bad, bad_writes) = &records["plain:G-phone"];
    assert_eq!(*bad_writes, 1);
    assert!(bad.get("phone").is_none(), "{bad}");
    assert_eq!(bad["note"], "missing data: phone");
    app.server.shutdown().await.unwrap();
}
