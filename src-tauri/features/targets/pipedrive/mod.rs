//! Pipedrive (`kind = "pipedrive"`): no upsert by external id, so a lead is delivered as search → create person
//! (when none) → create lead, with a local link between the two writes. [`wire`] builds the requests and reads
//! the answers; this module sends them.

pub mod check;
pub mod wire;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::mapping;
use super::request::{client_for, excerpt, send, AnswerWatch, Outcome, Response, Unwatched, HELD_BACK};
use super::vendor::VendorVerdict;
use crate::config::{Config, TargetConfig, TargetSettings};
use crate::model::{ErrorClass, Failure, Job, Verdict};
pub use wire::AUTH_HEADER;
use wire::*;

/// A `pipedrive` target: the I/O around the pure functions above.
///
/// One delivery is two checkpointed operations:
/// 1. the person: the one linked locally (`crm_link`) to the external id, else the one the exact-match search
///    finds, else a new one — and the link is committed on its own ([`LinkBook::remember`]) *before* the lead is
///    created,
///    so a crash after this point never creates a second person (the retry reuses the link, without searching);
/// 2. the lead, with `person_id`: unless the person was created in this very attempt, the person's leads are
///    looked up first (`origin_id` = the external id) — an earlier attempt may have created it and died before
///    its completion was written. After a lead create without an answer (a timeout) the lead is looked up at
///    once; every look-up answer is classified like any other (429 holds the target, 401 holds it for the
///    credential).
///
/// The step's `crm_id` is the lead id.
pub struct PipedriveTarget {
    pub name: String,
    pub config: TargetConfig,
    client: reqwest::Client,
    base: String,
    token: reqwest::header::HeaderValue,
    token_env: String,
    field_key: String,
    /// What time it is when an answer arrives (its rate-limit reset, its `Retry-After`).
    clock: crate::clock::Clock,
}

/// What a request came to: an answer to read, or a failure already decided.
enum Sent {
    Answer(Response),
    Failed(Failure),
    /// Sent, no answer: the CRM may have acted on it.
    NoAnswer(String),
    /// Not sent: the target was held meanwhile ([`Outcome::HeldBack`]).
    HeldBack,
}

impl PipedriveTarget {
    pub fn new(
        name: &str,
        config: &TargetConfig,
        secrets: &Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<PipedriveTarget> {
        let TargetSettings::Pipedrive(settings) = &config.settings else {
            anyhow::bail!("targets.{name} is not a pipedrive target");
        };
        let key = format!("targets.{name}.api_token_env");
        let token_env = settings.api_token_env.clone().with_context(|| format!("{key} is required"))?;
        let mut token = reqwest::header::HeaderValue::from_str(&secrets.secret(&key, &token_env)?)
            .with_context(|| format!("{key}: the token in {token_env} is not a valid header value"))?;
        token.set_sensitive(true);
        let field_key = settings
            .person_field_key
            .clone()
            .with_context(|| format!("targets.{name}.person_field_key is required"))?;
        let client = client_for(config)?;
        Ok(PipedriveTarget {
            name: name.to_string(),
            config: config.clone(),
            client,
            base: base_url(&config.url),
            token,
            token_env,
            field_key,
            clock,
        })
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, url)
            .header(AUTH_HEADER, self.token.clone())
            .timeout(std::time::Duration::from_millis(self.config.timeout_ms))
    }

    async fn send(&self, request: reqwest::RequestBuilder, what: &str, answers: &dyn AnswerWatch) -> Sent {
        match send(request, &self.clock, answers).await {
            Outcome::Answered(resp) => Sent::Answer(resp),
            Outcome::Unsent(why) => Sent::Failed(Failure {
                class: ErrorClass::Transient,
                reason: format!("could not connect to Pipedrive for the {what}: {why}"),
                field: None,
            }),
            Outcome::Unanswered(why) => Sent::NoAnswer(why),
            Outcome::HeldBack => Sent::HeldBack,
        }
    }

    /// Notes an answer in the report (status, retry time) and, for a failed one, its verdict.
    fn answered(&self, report: &mut AttemptReport, resp: &Response, verdict: Option<&VendorVerdict>) {
        report.http_status = Some(resp.status);
        if let Some(v) = verdict {
            self.fail(report, v);
            report.excerpt = excerpt(&resp.body);
        }
    }

    fn fail(&self, report: &mut AttemptReport, v: &VendorVerdict) {
        report.verdict = v.verdict();
        report.retry_after = v.hold_until;
        report.slow_down = v.slow_down;
        if v.credential_problem {
            report.credential_refused = Some(self.token_env.clone());
        }
    }

    /// Performs one attempt for `job`. `linked` is the person id linked to its external id, if any.
    async fn deliver_one(&self, job: &Job, linked: Option<String>, cx: &Exchange<'_>) -> AttemptReport {
        let started = std::time::Instant::now();
        let mut report = AttemptReport::new(cx.now);
        self.deliver_into(&mut report, job, linked, cx).await;
        report.duration_ms = started.elapsed().as_millis() as i64;
        report
    }

    async fn deliver_into(&self, report: &mut AttemptReport, job: &Job, linked: Option<String>, cx: &Exchange<'_>) {
        let external_id = job.external_id();
        // Data problems stop the lead before any request.
        let plan = match mapping::record_for(&self.config.mapping, self.config.missing_data_tag(), job)
            .and_then(|record| plan(&record, &external_id, &self.field_key).map_err(|v| failure_of(&v)))
        {
            Ok(p) => p,
            Err(f) => {
                report.verdict = Verdict::Failed(f);
                return;
            }
        };

        // Op 1: the person.
        let (person_id, created_now, how) = match linked.as_deref().and_then(|l| l.parse::<u64>().ok()) {
            Some(id) => (id, false, "linked earlier"),
            None => {
                let Some((id, created)) = self.find_or_create_person(report, &plan, &external_id, cx).await else {
                    return;
                };
                match cx.links.remember(&external_id, &id.to_string()).await {
                    Ok(l) => match l.parse::<u64>() {
                        Ok(linked_id) => {
                            (linked_id, created && linked_id == id, if created { "created" } else { "found" })
                        }
                        Err(_) => (id, created, if created { "created" } else { "found" }),
                    },
                    Err(e) => {
                        report.verdict = Verdict::Failed(Failure {
                            class: ErrorClass::Transient,
                            reason: format!(
                                "the person is in Pipedrive but could not be linked locally ({e:#}); the next attempt \
                                 finds it by search"
                            ),
                            field: None,
                        });
                        return;
                    }
                }
            }
        };

        // Op 2: the lead — looked up first unless the person is new in this attempt.
        if !created_now {
            match self.lookup_lead(report, person_id, &external_id, cx.now, cx.answers).await {
                Some(Some(lead_id)) => {
                    self.delivered(report, person_id, how, lead_id, "already in Pipedrive (found by look-up)");
                    return;
                }
                Some(None) => {}
                None => {
                    report.in_doubt = job.in_doubt;
                    return;
                }
            }
        }
        let body = match create_lead_body(&plan.title, person_id, &plan.lead_extra) {
            Ok(b) => b,
            Err(v) => {
                self.fail(report, &v);
                return;
            }
        };
        let url = format!("{}{LEADS_PATH}", self.base);
        match self.send(self.request(reqwest::Method::POST, &url).json(&body), "lead", cx.answers).await {
            // The person is linked: the next attempt looks the lead up before creating it.
            Sent::HeldBack => report.held_back = true,
            Sent::Failed(f) => report.verdict = Verdict::Failed(f),
            Sent::Answer(resp) => {
                let v = parse_answer(resp.status, &resp.body, &resp.headers, self.clock.now());
                if v.is_delivered() {
                    report.http_status = Some(resp.status);
                    match v.crm_id {
                        Some(lead_id) => self.delivered(report, person_id, how, lead_id, "created"),
                        None => {
                            // Created without an id to keep: a look-up on the next attempt finds it.
                            self.fail(
                                report,
                                &VendorVerdict::failed(
                                    ErrorClass::Transient,
                                    "Pipedrive accepted the lead but its answer has no id; it is looked up next",
                                ),
                            );
                            report.in_doubt = true;
                        }
                    }
                } else {
                    let field = v.field.as_deref().map(|f| within("/lead", f));
                    self.answered(report, &resp, Some(&v.with_field(field)));
                }
            }
            Sent::NoAnswer(why) => {
                match self.lookup_lead(report, person_id, &external_id, self.clock.now(), cx.answers).await {
                    Some(Some(lead_id)) => self.delivered(
                        report,
                        person_id,
                        how,
                        lead_id,
                        &format!("created: no answer ({why}), but the look-up found it"),
                    ),
                    Some(None) => {
                        report.verdict = Verdict::Failed(Failure {
                            class: ErrorClass::Transient,
                            reason: format!(
                            "no answer to the lead create ({why}); the look-up found no lead, and the next attempt \
                             looks again before creating"
                        ),
                            field: None,
                        });
                        report.in_doubt = true;
                    }
                    None if report.held_back => {
                        // The create went out: this attempt counts, and the lead is looked up before any resend.
                        report.held_back = false;
                        report.verdict = Verdict::Failed(Failure {
                            class: ErrorClass::Transient,
                            reason: format!(
                                "no answer to the lead create ({why}); Pipedrive asked to wait before the look-up, \
                                 which is made before any resend"
                            ),
                            field: None,
                        });
                        report.in_doubt = true;
                    }
                    None => {
                        // The look-up's own verdict stands (rate-limited, credential...); the doubt stays.
                        if let Verdict::Failed(f) = &mut report.verdict {
                            f.reason =
                                format!("no answer to the lead create ({why}), and its look-up failed: {}", f.reason);
                        }
                        report.in_doubt = true;
                    }
                }
            }
        }
    }

    fn delivered(&self, report: &mut AttemptReport, person_id: u64, how: &str, lead_id: String, what: &str) {
        report.verdict = Verdict::Delivered;
        report.retry_after = None;
        report.note = Some(format!("lead {what}; person {person_id} {how}"));
        // The answers hold personal data: keep only the ids.
        report.excerpt = Some(json!({"person_id": person_id, "lead_id": lead_id}).to_string());
        report.crm_id = Some(lead_id);
    }

    /// Op 1 without a link: search, then create when nobody holds the external id. `None`: the report says why
    /// not.
    async fn find_or_create_person(
        &self,
        report: &mut AttemptReport,
        plan: &Plan,
        external_id: &str,
        cx: &Exchange<'_>,
    ) -> Option<(u64, bool)> {
        let now = cx.now;
        let url = match search_person_url(&self.base, external_id) {
            Ok(u) => u,
            Err(v) => {
                self.fail(report, &v);
                return None;
            }
        };
        match self.send(self.request(reqwest::Method::GET, &url), "person search", cx.answers).await {
            Sent::HeldBack => {
                report.held_back = true;
                return None;
            }
            Sent::Failed(f) => {
                report.verdict = Verdict::Failed(f);
                return None;
            }
            Sent::NoAnswer(why) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!("no answer to the person search ({why}); searching is safe to repeat"),
                    field: None,
                });
                return None;
            }
            Sent::Answer(resp) => match parse_search(resp.status, &resp.body, &resp.headers, external_id, now) {
                Ok(SearchResult::Found(id)) => return Some((id, false)),
                Ok(SearchResult::NotFound) => {}
                Ok(SearchResult::Many(n)) => {
                    report.http_status = Some(resp.status);
                    self.fail(
                        report,
                        &VendorVerdict::failed(
                            ErrorClass::PermanentData,
                            format!(
                                "{n} persons in Pipedrive hold this lead's external id in {}: merge them, then replay",
                                self.field_key
                            ),
                        )
                        .with_field(Some(self.field_key.clone())),
                    );
                    return None;
                }
                Err(v) => {
                    self.answered(report, &resp, Some(&v));
                    return None;
                }
            },
        }
        let url = format!("{}{PERSONS_PATH}", self.base);
        match self.send(self.request(reqwest::Method::POST, &url).json(&plan.person), "person create", cx.answers).await
        {
            Sent::HeldBack => {
                report.held_back = true;
                None
            }
            Sent::Failed(f) => {
                report.verdict = Verdict::Failed(f);
                None
            }
            Sent::NoAnswer(why) => {
                // The person may exist now: the next attempt searches (nothing is linked) before creating.
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!(
                        "no answer to the person create ({why}); the next attempt searches for it before creating"
                    ),
                    field: None,
                });
                None
            }
            Sent::Answer(resp) => {
                let v = parse_answer(resp.status, &resp.body, &resp.headers, self.clock.now());
                match v.crm_id.as_deref().map(str::parse::<u64>) {
                    Some(Ok(id)) if v.is_delivered() => Some((id, true)),
                    _ if v.is_delivered() => {
                        report.http_status = Some(resp.status);
                        self.fail(
                            report,
                            &VendorVerdict::failed(
                                ErrorClass::Transient,
                                "Pipedrive created the person but its answer has no numeric id; the next attempt \
                                 finds it by search",
                            ),
                        );
                        None
                    }
                    _ => {
                        // Pipedrive names the person's own field (`phone`); the mapping, and with it a target's
                        // `missing_data.drop`, names it as written: `/person/phone`.
                        let field = v.field.as_deref().map(|f| within("/person", f));
                        self.answered(report, &resp, Some(&v.with_field(field)));
                        None
                    }
                }
            }
        }
    }

    /// The lead of `person_id` created for `external_id`: `Some(Some(id))` found, `Some(None)` not there, `None`
    /// the look-up failed (its verdict is in the report).
    async fn lookup_lead(
        &self,
        report: &mut AttemptReport,
        person_id: u64,
        external_id: &str,
        now: DateTime<Utc>,
        answers: &dyn AnswerWatch,
    ) -> Option<Option<String>> {
        let url = leads_of_person_url(&self.base, person_id);
        match self.send(self.request(reqwest::Method::GET, &url), "lead look-up", answers).await {
            Sent::HeldBack => {
                report.held_back = true;
                None
            }
            Sent::Failed(f) => {
                report.verdict = Verdict::Failed(f);
                None
            }
            Sent::NoAnswer(why) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!("no answer to the lead look-up ({why})"),
                    field: None,
                });
                None
            }
            Sent::Answer(resp) => match parse_leads_lookup(resp.status, &resp.body, &resp.headers, external_id, now) {
                Ok(found) => Some(found),
                Err(v) => {
                    self.answered(report, &resp, Some(&v));
                    None
                }
            },
        }
    }

    /// The requests a delivery of `job` makes (a dry run: nothing is sent; the token is masked): the person
    /// create, with the search before it and the lead create after it in `notes`.
    pub fn preview_one(&self, job: &Job) -> Result<RequestPreview, Failure> {
        let external_id = job.external_id();
        let record = mapping::record_for(&self.config.mapping, self.config.missing_data_tag(), job)?;
        let plan = plan(&record, &external_id, &self.field_key).map_err(|v| failure_of(&v))?;
        let mut lead = create_lead_body(&plan.title, 0, &plan.lead_extra).map_err(|v| failure_of(&v))?;
        lead["person_id"] = Value::String("<the person's id>".into());
        let search = search_person_url(&self.base, &external_id).map_err(|v| failure_of(&v))?;
        Ok(RequestPreview {
            method: "POST".into(),
            url: format!("{}{PERSONS_PATH}", self.base),
            headers: vec![(AUTH_HEADER.into(), "••••".into()), ("content-type".into(), "application/json".into())],
            body: plan.person,
            notes: vec![
                format!(
                    "first the local link table, then GET {search}: this person create is sent only when neither knows \
                     the lead's person; the person's id is linked locally before the lead is created"
                ),
                format!(
                    "then GET {} (an earlier attempt may have created the lead), and POST {}{LEADS_PATH} with {lead}",
                    leads_of_person_url(&self.base, 0).replace("person_id=0", "person_id=<the person's id>"),
                    self.base
                ),
            ],
        })
    }

    /// Test connection: `GET /v1/users/me` (the token), then `GET /v1/personFields` (the external id field).
    async fn check_connection(&self) -> ConnectionCheck {
        let me = format!("{}/v1/users/me", self.base);
        let resp = match self.send(self.request(reqwest::Method::GET, &me), "connection check", &Unwatched).await {
            Sent::Answer(r) => r,
            Sent::Failed(f) => return ConnectionCheck { ok: false, message: f.reason },
            Sent::NoAnswer(why) => {
                return ConnectionCheck { ok: false, message: format!("Pipedrive did not answer at {me}: {why}") }
            }
            Sent::HeldBack => return ConnectionCheck { ok: false, message: HELD_BACK.into() },
        };
        match resp.status {
            401 => {
                return ConnectionCheck {
                    ok: false,
                    message: format!(
                    "Pipedrive refused the API token in {}: it is wrong, expired or revoked (Personal preferences → \
                         API in Pipedrive shows the current one)",
                    self.token_env
                ),
                }
            }
            s if !(200..300).contains(&s) => {
                let v = parse_answer(s, &resp.body, &resp.headers, self.clock.now());
                return ConnectionCheck { ok: false, message: format!("GET {me}: {}", v.reason) };
            }
            _ => {}
        }
        let company = serde_json::from_slice::<Value>(&resp.body)
            .ok()
            .and_then(|j| j.pointer("/data/company_name").and_then(Value::as_str).map(String::from));
        let fields = format!("{}/v1/personFields?limit=500", self.base);
        let resp = match self.send(self.request(reqwest::Method::GET, &fields), "connection check", &Unwatched).await {
            Sent::Answer(r) => r,
            Sent::Failed(f) => return ConnectionCheck { ok: false, message: f.reason },
            Sent::NoAnswer(why) => {
                return ConnectionCheck { ok: false, message: format!("Pipedrive did not answer at {fields}: {why}") }
            }
            Sent::HeldBack => return ConnectionCheck { ok: false, message: HELD_BACK.into() },
        };
        let company = company.map(|c| format!(" ({c})")).unwrap_or_default();
        match ((200..300).contains(&resp.status), person_fields_hold(&resp.body, &self.field_key)) {
            (true, Some(true)) => ConnectionCheck {
                ok: true,
                message: format!("the API token works{company} and the person field {} exists", self.field_key),
            },
            (true, Some(false)) => ConnectionCheck {
                ok: false,
                message: format!(
                    "the API token works{company}, but Pipedrive has no person field with the key {}: check \
                     person_field_key (Company settings → Data fields → Person shows each field's API key)",
                    self.field_key
                ),
            },
            _ => {
                let v = parse_answer(resp.status, &resp.body, &resp.headers, self.clock.now());
                ConnectionCheck { ok: false, message: format!("GET {fields}: {}", v.reason) }
            }
        }
    }
}

#[async_trait::async_trait]
impl Connector for PipedriveTarget {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            // The person linked to this lead by an earlier attempt, if any: it is never searched for again.
            let linked = match cx.links.linked(&job.external_id()).await {
                Ok(l) => l,
                Err(e) => {
                    // Not sent: the lead goes back to the queue without using an attempt.
                    tracing::error!(error = %format!("{e:#}"), delivery_id = job.id, "cannot read the link table");
                    out.push(None);
                    continue;
                }
            };
            out.push(Some(self.deliver_one(job, linked, cx).await));
        }
        out
    }

    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        self.preview_one(job)
    }

    async fn check(&self) -> ConnectionCheck {
        self.check_connection().await
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A field Pipedrive blamed, as the mapping writes it: `phones` of the person create (v2's list of the phones the
/// mapping's `/person/phone` gives) is `/person/phone`. A name that is already a pointer stays.
fn within(object: &str, field: &str) -> String {
    let field = match (object, field) {
        ("/person", "phones") => "phone",
        ("/person", "emails") => "email",
        _ => field,
    };
    if field.starts_with('/') {
        field.to_string()
    } else {
        format!("{object}/{field}")
    }
}

#[cfg(test)]
mod tests {
    use super::within;

    #[test]
    fn a_blamed_field_is_named_as_the_mapping_writes_it() {
        assert_eq!(within("/person", "phones"), "/person/phone");
        assert_eq!(within("/person", "emails"), "/person/email");
        assert_eq!(within("/person", "name"), "/person/name");
        assert_eq!(within("/lead", "value"), "/lead/value");
        assert_eq!(within("/person", "/person/name"), "/person/name");
    }
}
