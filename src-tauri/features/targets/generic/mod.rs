//! The generic `http` target: any CRM that takes a JSON request, with one of four idempotency strategies
//! (docs/architecture.md, "The delivery model"):
//!
//! - `idempotency_key`: POST with `Idempotency-Key: source:source_ref:target`; the CRM replays its stored
//!   answer to a repeat, so retrying after no answer is safe.
//! - `upsert`: PUT/PATCH to a URL containing the external id; writing twice changes nothing.
//! - `search_then_create`: the local link table first, then GET `search_url`, and POST only when nothing was
//!   found; the created id is linked locally in the same transaction that marks the step delivered.
//! - `none`: a plain POST; after an ambiguous outcome the lead is looked up when `search_url` is set, and
//!   otherwise parked in the DLQ as ambiguous — never retried blindly.
//!
//! Every request carries the same JSON envelope ([`wire::envelope`]), or the mapped record when the target has a
//! field mapping.

pub mod wire;

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::classify::classify;
use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::mapping;
use super::request::{
    client_for, error_chain, excerpt, masked_headers, send, AnswerWatch, Outcome, Unwatched, HELD_BACK,
};
use crate::clock::Clock;
use crate::config::{AuthConfig, Config, Strategy, TargetConfig};
use crate::model::{ErrorClass, Failure, Job, Observed, Verdict};
use wire::{crm_id_in, search_hit};

pub struct HttpTarget {
    pub name: String,
    pub config: TargetConfig,
    pub(super) client: reqwest::Client,
    pub(super) headers: HeaderMap,
    /// What time it is (the runtime's clock): when an answer arrived, what a `Retry-After` date means.
    pub(super) clock: Clock,
}

enum Lookup {
    Found(String),
    NotFound,
    Failed(LookupFailure),
    /// Not sent: the target was held meanwhile.
    HeldBack,
}

/// A look-up that did not answer "found" or "not found", classified like any other answer: a 429 is a rate
/// limit (with its `Retry-After`), a 401 a configuration problem, a 5xx or no answer a transient one.
struct LookupFailure {
    class: ErrorClass,
    reason: String,
    field: Option<String>,
    status: Option<u16>,
    retry_after: Option<DateTime<Utc>>,
    excerpt: Option<String>,
}

impl LookupFailure {
    /// Puts the look-up's answer on the attempt's report, under `reason`.
    fn report(self, report: &mut AttemptReport, reason: String) {
        report.verdict = Verdict::Failed(Failure { class: self.class, reason, field: self.field });
        report.http_status = self.status;
        report.retry_after = self.retry_after;
        report.excerpt = self.excerpt;
    }
}

impl HttpTarget {
    pub fn new(name: &str, config: &TargetConfig, secrets: &Config, clock: Clock) -> anyhow::Result<HttpTarget> {
        let key = format!("targets.{name}");
        let mut headers = HeaderMap::new();
        for (k, v) in &config.headers {
            headers.insert(
                HeaderName::from_bytes(k.as_bytes()).with_context(|| format!("{key}.headers.{k}: invalid name"))?,
                HeaderValue::from_str(v).with_context(|| format!("{key}.headers.{k}: invalid value"))?,
            );
        }
        match &config.auth {
            Some(AuthConfig::BearerEnv(var)) => {
                let token = secrets.secret(&format!("{key}.auth.bearer_env"), var)?;
                let mut v = HeaderValue::from_str(&format!("Bearer {token}"))
                    .with_context(|| format!("{key}.auth: the token in {var} is not a valid header value"))?;
                v.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, v);
            }
            Some(AuthConfig::Header { name: header, value_env }) => {
                let value = secrets.secret(&format!("{key}.auth.header.value_env"), value_env)?;
                let mut v = HeaderValue::from_str(&value)
                    .with_context(|| format!("{key}.auth: the value in {value_env} is not a valid header value"))?;
                v.set_sensitive(true);
                headers.insert(HeaderName::from_bytes(header.as_bytes())?, v);
            }
            None => {}
        }
        let client = client_for(config)?;
        Ok(HttpTarget { name: name.to_string(), config: config.clone(), client, headers, clock })
    }

    /// The body sent for `job`: the mapped record when the target has a mapping, else the envelope. A lead the
    /// mapping cannot use (a required field missing, a phone that is not one) fails here, before any request,
    /// as a data problem naming the CRM field.
    pub fn body(&self, job: &Job) -> Result<serde_json::Value, Failure> {
        if self.config.mapping.is_empty() {
            return Ok(wire::envelope(job));
        }
        mapping::record_for(&self.config.mapping, self.config.missing_data_tag(), job).map(serde_json::Value::Object)
    }

    /// The request `deliver` would make for `job` now (no look-up is made).
    pub fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        let body = self.body(job)?;
        let external_id = job.external_id();
        let mut headers = masked_headers(&self.headers);
        headers.push(("content-type".into(), "application/json".into()));
        let mut notes = Vec::new();
        match self.config.strategy() {
            Strategy::IdempotencyKey => headers.push(("Idempotency-Key".into(), job.idempotency_key())),
            Strategy::SearchThenCreate => notes.push(format!(
                "first GET {} (and the local link table); sent only when the CRM does not have the lead",
                self.config.search_url.as_deref().map(|u| wire::url(u, &external_id)).unwrap_or_default()
            )),
            _ => {}
        }
        Ok(RequestPreview {
            method: self.config.method().to_string(),
            url: wire::url(&self.config.url, &external_id),
            headers,
            body,
            notes,
        })
    }

    /// Test connection: a harmless request to the target (the search URL with an id that cannot exist, or
    /// `OPTIONS` on the endpoint), said in plain words.
    async fn check_connection(&self) -> ConnectionCheck {
        let (method, url) = match &self.config.search_url {
            Some(search) => (reqwest::Method::GET, wire::url(search, "leadline-connection-check")),
            None => (reqwest::Method::OPTIONS, wire::url(&self.config.url, "leadline-connection-check")),
        };
        let request = self
            .client
            .request(method.clone(), &url)
            .headers(self.headers.clone())
            .timeout(Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock, &Unwatched).await {
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                ConnectionCheck { ok: false, message: format!("cannot reach {url}: {why}") }
            }
            Outcome::HeldBack => ConnectionCheck { ok: false, message: HELD_BACK.into() },
            Outcome::Answered(resp) => match resp.status {
                401 => ConnectionCheck {
                    ok: false,
                    message: format!("{method} {url} answered 401: the credential is wrong or expired"),
                },
                403 => ConnectionCheck {
                    ok: false,
                    message: format!("{method} {url} answered 403: the credential lacks a permission"),
                },
                s if s >= 500 => ConnectionCheck {
                    ok: false,
                    message: format!("{method} {url} answered {s}: the target has a problem"),
                },
                s => ConnectionCheck {
                    ok: true,
                    message: format!("{method} {url} answered {s}: reachable, credential accepted"),
                },
            },
        }
    }

    /// Performs one attempt for `job`, resolving doubt first where the strategy allows.
    /// `linked` is the CRM id already linked to this external id locally (search_then_create), if any.
    ///
    /// A `401` (to the write or to a look-up) that the classification leaves a configuration problem means the
    /// credential is refused: the report names it, so the worker holds the target and alerts once while the
    /// leads wait, instead of dead-lettering every lead.
    async fn deliver_one(&self, job: &Job, linked: Option<String>, cx: &Exchange<'_>) -> AttemptReport {
        let mut report = self.attempt(job, linked, cx.now, cx.answers).await;
        if let (Some(401), Verdict::Failed(f)) = (report.http_status, &report.verdict) {
            if f.class == ErrorClass::PermanentConfig {
                report.credential_refused = Some(self.credential_name());
            }
        }
        report
    }

    /// What the alert of a refused credential names: the environment variable (or secrets-file entry) holding
    /// it, or the missing `auth` setting.
    pub fn credential_name(&self) -> String {
        match &self.config.auth {
            Some(AuthConfig::BearerEnv(var)) => var.clone(),
            Some(AuthConfig::Header { value_env, .. }) => value_env.clone(),
            None => format!("targets.{}.auth (not set)", self.name),
        }
    }

    async fn attempt(
        &self,
        job: &Job,
        linked: Option<String>,
        now: DateTime<Utc>,
        answers: &dyn AnswerWatch,
    ) -> AttemptReport {
        let started = Instant::now();
        let external_id = job.external_id();
        let mut report = AttemptReport::new(now);
        let strategy = self.config.strategy();

        // 1. Does the CRM already have this lead? (search_then_create always; others only when in doubt.)
        let must_look = strategy == Strategy::SearchThenCreate || (job.in_doubt && strategy == Strategy::None);
        if let Some(crm_id) = linked.filter(|_| strategy == Strategy::SearchThenCreate) {
            report.crm_id = Some(crm_id);
            report.note = Some("already linked to a CRM record: not sent again".into());
            report.duration_ms = started.elapsed().as_millis() as i64;
            return report;
        }
        if must_look {
            match self.lookup(&external_id, answers).await {
                Lookup::Found(crm_id) => {
                    report.note = Some(if job.in_doubt {
                        "the earlier attempt did reach the CRM: record found by look-up".into()
                    } else {
                        "found by search: not created again".into()
                    });
                    if strategy == Strategy::SearchThenCreate {
                        report.link = Some((external_id, crm_id.clone()));
                    }
                    report.crm_id = Some(crm_id);
                    report.duration_ms = started.elapsed().as_millis() as i64;
                    return report;
                }
                Lookup::NotFound => {}
                Lookup::HeldBack => {
                    report.held_back = true;
                    return report;
                }
                Lookup::Failed(failure) => {
                    // Searching is harmless to repeat; the doubt (if any) stays until a look-up answers.
                    let reason = format!("could not check whether the CRM already has the lead: {}", failure.reason);
                    failure.report(&mut report, reason);
                    report.in_doubt = job.in_doubt;
                    report.duration_ms = started.elapsed().as_millis() as i64;
                    return report;
                }
            }
        } else if job.in_doubt
            && strategy == Strategy::None
            && self.config.search_url.is_none()
            && job.trigger != "manual"
        {
            // A manual replay of such a lead is a person's decision after checking the CRM (the dead letter and
            // the replay preview say so); a scheduled retry never sends it blindly.
            report.verdict = Verdict::Failed(Failure {
                class: ErrorClass::Ambiguous,
                reason: "the previous attempt was interrupted after sending and this target cannot look leads up: \
                         check the CRM, then mark as fixed or replay"
                    .into(),
                field: None,
            });
            return report;
        }

        // 2. Send.
        let body = match self.body(job) {
            Ok(b) => b,
            Err(failure) => {
                report.verdict = Verdict::Failed(failure);
                report.in_doubt = job.in_doubt;
                return report;
            }
        };
        let url = wire::url(&self.config.url, &external_id);
        let mut request = self
            .client
            .request(self.config.method(), &url)
            .headers(self.headers.clone())
            .timeout(Duration::from_millis(self.config.timeout_ms))
            .json(&body);
        if strategy == Strategy::IdempotencyKey {
            request = request.header("Idempotency-Key", job.idempotency_key());
        }
        // The configured parts were checked at start, so a request that cannot be built is this lead's data (a
        // control character bound for a header): a data error for this lead, never the target's failure.
        let (client, built) = request.build_split();
        let request = match built {
            Ok(r) => reqwest::RequestBuilder::from_parts(client, r),
            Err(e) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::PermanentData,
                    reason: format!("not sent: the request cannot be built from this lead: {}", error_chain(&e)),
                    field: None,
                });
                report.in_doubt = job.in_doubt;
                return report;
            }
        };
        let sent = send(request, &self.clock, answers).await;
        report.duration_ms = started.elapsed().as_millis() as i64;
        match sent {
            Outcome::Unsent(why) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!("could not connect to the target: {why}"),
                    field: None,
                });
            }
            Outcome::Unanswered(why) => self.after_no_answer(&mut report, &external_id, why, strategy, answers).await,
            Outcome::HeldBack => report.held_back = true,
            Outcome::Answered(resp) => {
                report.http_status = Some(resp.status);
                report.excerpt = excerpt(&resp.body);
                report.retry_after = resp.retry_after;
                report.verdict =
                    classify(&Observed::Response { status: resp.status, body: &resp.body }, &self.config.classify);
                // 409: the CRM says the lead exists already (or a request with this key is still being processed).
                // Where the target can look leads up, that is settled now by a look-up, not by retrying for hours.
                if resp.status == 409 && self.config.search_url.is_some() {
                    if let Lookup::Found(crm_id) = self.lookup(&external_id, answers).await {
                        report.verdict = Verdict::Delivered;
                        report.note = Some("the CRM answered 409 (already there): the look-up found the record".into());
                        if strategy == Strategy::SearchThenCreate {
                            report.link = Some((external_id, crm_id.clone()));
                        }
                        report.crm_id = Some(crm_id);
                        report.duration_ms = started.elapsed().as_millis() as i64;
                        return report;
                    }
                }
                if report.verdict == Verdict::Delivered {
                    report.crm_id = crm_id_in(&resp.body, &self.config.id_pointer);
                    if strategy == Strategy::SearchThenCreate {
                        match &report.crm_id {
                            Some(id) => report.link = Some((external_id, id.clone())),
                            None => {
                                report.note = Some(format!(
                                    "created, but the answer has no id at {}: not linked",
                                    self.config.id_pointer
                                ))
                            }
                        }
                    }
                }
            }
        }
        report.duration_ms = started.elapsed().as_millis() as i64;
        report
    }

    /// The request went out and no answer came. Decide, per strategy, whether a retry is safe.
    async fn after_no_answer(
        &self,
        report: &mut AttemptReport,
        external_id: &str,
        why: String,
        strategy: Strategy,
        answers: &dyn AnswerWatch,
    ) {
        match strategy {
            Strategy::IdempotencyKey | Strategy::Upsert => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!("no answer ({why}); safe to retry: the request is idempotent"),
                    field: None,
                });
            }
            Strategy::SearchThenCreate | Strategy::None => {
                if self.config.search_url.is_none() {
                    report.verdict = Verdict::Failed(Failure {
                        class: ErrorClass::Ambiguous,
                        reason: format!(
                            "no answer after sending ({why}); the CRM may have the lead and this target cannot \
                             look it up: check the CRM, then mark as fixed or replay"
                        ),
                        field: None,
                    });
                    return;
                }
                match self.lookup(external_id, answers).await {
                    Lookup::Found(crm_id) => {
                        report.verdict = Verdict::Delivered;
                        report.note = Some(format!("no answer ({why}), but the look-up found the record"));
                        if strategy == Strategy::SearchThenCreate {
                            report.link = Some((external_id.to_string(), crm_id.clone()));
                        }
                        report.crm_id = Some(crm_id);
                    }
                    Lookup::NotFound => {
                        report.verdict = Verdict::Failed(Failure {
                            class: ErrorClass::Transient,
                            reason: format!("no answer ({why}); the look-up found no record, so it is safe to retry"),
                            field: None,
                        });
                    }
                    Lookup::Failed(failure) => {
                        let reason = format!(
                            "no answer ({why}) and the look-up failed ({}); it will be looked up again before any resend",
                            failure.reason
                        );
                        failure.report(report, reason);
                        report.in_doubt = true;
                    }
                    Lookup::HeldBack => {
                        // The write went out: this attempt counts, and the lead is looked up before any resend.
                        report.verdict = Verdict::Failed(Failure {
                            class: ErrorClass::Transient,
                            reason: format!(
                                "no answer ({why}); the target asked to wait before the look-up, which is made \
                                 before any resend"
                            ),
                            field: None,
                        });
                        report.in_doubt = true;
                    }
                }
            }
        }
    }

    async fn lookup(&self, external_id: &str, answers: &dyn AnswerWatch) -> Lookup {
        let Some(template) = &self.config.search_url else {
            return Lookup::NotFound;
        };
        let request = self
            .client
            .get(wire::url(template, external_id))
            .headers(self.headers.clone())
            .timeout(Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock, answers).await {
            Outcome::Answered(resp) if resp.status == 404 => Lookup::NotFound,
            Outcome::Answered(resp) if (200..300).contains(&resp.status) => {
                match search_hit(&resp.body, &self.config.id_pointer) {
                    Some(id) => Lookup::Found(id),
                    None => Lookup::NotFound,
                }
            }
            Outcome::Answered(resp) => {
                let (class, said, field) = match classify(
                    &Observed::Response { status: resp.status, body: &resp.body },
                    &self.config.classify,
                ) {
                    // A search cannot deliver; a 2xx was handled above, so this is only for completeness.
                    Verdict::Delivered => (ErrorClass::Transient, String::new(), None),
                    Verdict::Failed(f) => (f.class, f.reason, f.field),
                };
                Lookup::Failed(LookupFailure {
                    class,
                    reason: format!(
                        "the search answered HTTP {}{}",
                        resp.status,
                        if said.is_empty() { String::new() } else { format!(": {said}") }
                    ),
                    field,
                    status: Some(resp.status),
                    retry_after: resp.retry_after,
                    excerpt: excerpt(&resp.body),
                })
            }
            Outcome::HeldBack => Lookup::HeldBack,
            Outcome::Unsent(why) | Outcome::Unanswered(why) => Lookup::Failed(LookupFailure {
                // Reading again is always safe: no answer to a search is a transient problem, never "ambiguous".
                class: ErrorClass::Transient,
                reason: why,
                field: None,
                status: None,
                retry_after: None,
                excerpt: None,
            }),
        }
    }
}

#[async_trait::async_trait]
impl Connector for HttpTarget {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            let linked = if self.config.strategy() == Strategy::SearchThenCreate {
                match cx.links.linked(&job.external_id()).await {
                    Ok(l) => l,
                    Err(e) => {
                        // Not sent: the lead goes back to the queue without using an attempt.
                        tracing::error!(error = %format!("{e:#}"), delivery_id = job.id, "cannot read the link table");
                        out.push(None);
                        continue;
                    }
                }
            } else {
                None
            };
            out.push(Some(self.deliver_one(job, linked, cx).await));
        }
        out
    }

    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        HttpTarget::preview(self, job)
    }

    async fn check(&self) -> ConnectionCheck {
        self.check_connection().await
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
