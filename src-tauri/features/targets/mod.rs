//! CRM targets. The generic HTTP target covers any CRM that takes a JSON request, with one of three
//! idempotency strategies (docs/architecture.md, "The delivery model"):
//!
//! - `idempotency_key`: POST with `Idempotency-Key: source:source_ref:target`; the CRM replays its stored
//!   answer to a repeat, so retrying after no answer is safe.
//! - `upsert`: PUT/PATCH to a URL containing the external id; writing twice changes nothing.
//! - `search_then_create`: the local `crm_link` table first, then GET `search_url`, and POST only when
//!   nothing was found; the created id is linked locally in the same transaction that marks the step delivered.
//! - `none`: a plain POST; after an ambiguous outcome the lead is looked up when `search_url` is set, and
//!   otherwise parked in the DLQ as ambiguous — never retried blindly.
//!
//! Every request carries the same JSON envelope (`docs/configuration.md`, "What a target receives").

pub mod hubspot;
pub mod mapping;
pub mod meta_lead;
pub mod pipedrive;
pub mod salesforce;
pub mod vendor;

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::clock::Clock;
use crate::config::{AuthConfig, Config, Strategy, TargetConfig};
use crate::features::delivery::backoff::parse_retry_after;
use crate::features::delivery::classify::{classify, truncate_chars, ErrorClass, Failure, Observed, Verdict};
use crate::store::Job;

/// Longest response excerpt kept with an attempt, in characters.
pub const EXCERPT_CHARS: usize = 2_000;

pub struct HttpTarget {
    pub name: String,
    pub config: TargetConfig,
    client: reqwest::Client,
    headers: HeaderMap,
    /// What time it is (the runtime's clock): when an answer arrived, what a `Retry-After` date means.
    clock: Clock,
}

/// The result of one delivery attempt, ready for the worker's decision.
#[derive(Debug, Clone)]
pub struct AttemptReport {
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub http_status: Option<u16>,
    pub excerpt: Option<String>,
    pub verdict: Verdict,
    pub retry_after: Option<DateTime<Utc>>,
    /// The CRM's record id, when delivered.
    pub crm_id: Option<String>,
    /// search_then_create: a new link to remember (external id, CRM id).
    pub link: Option<(String, String)>,
    /// What happened, in words, when it is not obvious from the status (found by look-up, safe to retry...).
    pub note: Option<String>,
    /// A retry must first check whether the CRM already has the lead.
    pub in_doubt: bool,
    /// The lead as it should be stored from now on (a `meta_lead` step fetched its answers).
    pub payload: Option<serde_json::Value>,
    /// The target refused this credential (the environment variable naming it): hold the whole target and
    /// ask a person for a new one, instead of dead-lettering every lead.
    pub credential_refused: Option<String>,
    /// The status and headers of the last answer, for the target's pacer to learn its limits from.
    pub answered: Option<(u16, HeaderMap)>,
    /// The target's quota is used up until `retry_after` (HubSpot's daily limit): the lead waits for it without
    /// using an attempt or its time budget — the quota is not the lead's failure.
    pub quota_wait: bool,
}

impl AttemptReport {
    pub fn new(now: DateTime<Utc>) -> AttemptReport {
        AttemptReport {
            started_at: now,
            duration_ms: 0,
            http_status: None,
            excerpt: None,
            verdict: Verdict::Delivered,
            retry_after: None,
            crm_id: None,
            link: None,
            note: None,
            in_doubt: false,
            payload: None,
            credential_refused: None,
            answered: None,
            quota_wait: false,
        }
    }
}

/// The exact request Leadline would send for a lead (a dry run: nothing is sent). Credentials are masked.
#[derive(Debug, Clone, serde::Serialize, PartialEq, ts_rs::TS)]
pub struct RequestPreview {
    pub method: String,
    pub url: String,
    /// Header name and value; credentials appear as `••••`.
    pub headers: Vec<(String, String)>,
    #[ts(type = "unknown")]
    pub body: serde_json::Value,
    /// What happens around it (a search first, a second request after it), in words.
    pub notes: Vec<String>,
}

/// The answer to "test connection": one harmless authenticated read, in plain words.
#[derive(Debug, Clone, serde::Serialize, PartialEq, ts_rs::TS)]
pub struct ConnectionCheck {
    pub ok: bool,
    /// What was tried and what it showed ("the token works; 3 of 190 requests used in this 10 s window"), or
    /// what is wrong and what to do ("the token lacks the crm.objects.contacts.write scope").
    pub message: String,
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

enum Lookup {
    Found(String),
    NotFound,
    Failed(LookupFailure),
}

/// A look-up that did not answer "found" or "not found", classified like any other answer: a 429 is a rate
/// limit (with its `Retry-After`), a 401 a configuration problem, a 5xx or no answer a transient one.
struct LookupFailure {
    class: ErrorClass,
    reason: String,
    field: Option<String>,
    status: Option<u16>,
    retry_after: Option<DateTime<Utc>>,
    answered: Option<(u16, HeaderMap)>,
    excerpt: Option<String>,
}

impl LookupFailure {
    /// Puts the look-up's answer on the attempt's report, under `reason`.
    fn report(self, report: &mut AttemptReport, reason: String) {
        report.verdict = Verdict::Failed(Failure { class: self.class, reason, field: self.field });
        report.http_status = self.status;
        report.retry_after = self.retry_after;
        report.answered = self.answered;
        report.excerpt = self.excerpt;
    }
}

struct Response {
    status: u16,
    body: Vec<u8>,
    retry_after: Option<DateTime<Utc>>,
    headers: HeaderMap,
}

/// What became of a request: an answer, never sent (connection failed), or sent without an answer.
enum Outcome {
    Answered(Response),
    Unsent(String),
    Unanswered(String),
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

    /// The JSON body sent for a job.
    pub fn envelope(job: &Job) -> serde_json::Value {
        serde_json::json!({
            "external_id": job.external_id(),
            "idempotency_key": job.idempotency_key(),
            "source": job.source,
            "source_ref": job.source_ref,
            "received_at": job.received_at,
            "revision": job.revision,
            "lead": job.payload,
            "previous_steps": job.previous,
        })
    }

    /// The body sent for `job`: the mapped record when the target has a mapping, else the envelope. A lead the
    /// mapping cannot use (a required field missing, a phone that is not one) fails here, before any request,
    /// as a data problem naming the CRM field.
    pub fn body(&self, job: &Job) -> Result<serde_json::Value, Failure> {
        if self.config.mapping.is_empty() {
            return Ok(Self::envelope(job));
        }
        mapped_record(&self.config.mapping, job).map(serde_json::Value::Object)
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
                self.config.search_url.as_deref().map(|u| Self::url(u, &external_id)).unwrap_or_default()
            )),
            _ => {}
        }
        Ok(RequestPreview {
            method: self.config.method().to_string(),
            url: Self::url(&self.config.url, &external_id),
            headers,
            body,
            notes,
        })
    }

    /// Test connection: a harmless request to the target (the search URL with an id that cannot exist, or
    /// `OPTIONS` on the endpoint), said in plain words.
    pub async fn check(&self) -> ConnectionCheck {
        let (method, url) = match &self.config.search_url {
            Some(search) => (reqwest::Method::GET, Self::url(search, "leadline-connection-check")),
            None => (reqwest::Method::OPTIONS, Self::url(&self.config.url, "leadline-connection-check")),
        };
        let request = self
            .client
            .request(method.clone(), &url)
            .headers(self.headers.clone())
            .timeout(Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock).await {
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                ConnectionCheck { ok: false, message: format!("cannot reach {url}: {why}") }
            }
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

    fn url(template: &str, external_id: &str) -> String {
        template.replace("{external_id}", &urlencode(external_id))
    }

    /// Performs one attempt for `job`, resolving doubt first where the strategy allows.
    /// `linked` is the CRM id already linked to this external id locally (search_then_create), if any.
    ///
    /// A `401` (to the write or to a look-up) that the classification leaves a configuration problem means the
    /// credential is refused: the report names it, so the worker holds the target and alerts once while the
    /// leads wait, instead of dead-lettering every lead.
    pub async fn deliver(&self, job: &Job, linked: Option<String>, now: DateTime<Utc>) -> AttemptReport {
        let mut report = self.attempt(job, linked, now).await;
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

    async fn attempt(&self, job: &Job, linked: Option<String>, now: DateTime<Utc>) -> AttemptReport {
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
            match self.lookup(&external_id).await {
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
        let url = Self::url(&self.config.url, &external_id);
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
        let sent = send(request, &self.clock).await;
        report.duration_ms = started.elapsed().as_millis() as i64;
        match sent {
            Outcome::Unsent(why) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!("could not connect to the target: {why}"),
                    field: None,
                });
            }
            Outcome::Unanswered(why) => self.after_no_answer(&mut report, &external_id, why, strategy).await,
            Outcome::Answered(resp) => {
                report.http_status = Some(resp.status);
                report.excerpt = excerpt(&resp.body);
                report.retry_after = resp.retry_after;
                report.answered = Some((resp.status, resp.headers.clone()));
                report.verdict =
                    classify(&Observed::Response { status: resp.status, body: &resp.body }, &self.config.classify);
                // 409: the CRM says the lead exists already (or a request with this key is still being processed).
                // Where the target can look leads up, that is settled now by a look-up, not by retrying for hours.
                if resp.status == 409 && self.config.search_url.is_some() {
                    if let Lookup::Found(crm_id) = self.lookup(&external_id).await {
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
    async fn after_no_answer(&self, report: &mut AttemptReport, external_id: &str, why: String, strategy: Strategy) {
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
                match self.lookup(external_id).await {
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
                }
            }
        }
    }

    async fn lookup(&self, external_id: &str) -> Lookup {
        let Some(template) = &self.config.search_url else {
            return Lookup::NotFound;
        };
        let request = self
            .client
            .get(Self::url(template, external_id))
            .headers(self.headers.clone())
            .timeout(Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock).await {
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
                    answered: Some((resp.status, resp.headers)),
                })
            }
            Outcome::Unsent(why) | Outcome::Unanswered(why) => Lookup::Failed(LookupFailure {
                // Reading again is always safe: no answer to a search is a transient problem, never "ambiguous".
                class: ErrorClass::Transient,
                reason: why,
                field: None,
                status: None,
                retry_after: None,
                answered: None,
                excerpt: None,
            }),
        }
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

/// What a mapping reads: the lead, plus what Leadline knows about it under `$`-names that no source uses —
/// `$external_id`, `$source`, `$source_ref`, `$received_at`, `$revision` (1, then 2 for the first change) and
/// `$previous_steps` (the earlier steps' results, e.g. `/$previous_steps/crm/crm_id`).
pub fn mapping_input(job: &Job) -> serde_json::Value {
    let mut input = match &job.payload {
        serde_json::Value::Object(m) => m.clone(),
        other => {
            let mut m = serde_json::Map::new();
            m.insert("$lead".into(), other.clone());
            m
        }
    };
    input.insert("$external_id".into(), job.external_id().into());
    input.insert("$source".into(), job.source.clone().into());
    input.insert("$source_ref".into(), job.source_ref.clone().into());
    input.insert("$received_at".into(), serde_json::to_value(job.received_at).unwrap_or_default());
    input.insert("$revision".into(), job.revision.into());
    input.insert("$previous_steps".into(), serde_json::Value::Object(job.previous.clone()));
    serde_json::Value::Object(input)
}

/// The CRM record for `job` by `rules`, or the data failure that names the field.
pub fn mapped_record(
    rules: &[mapping::FieldRule],
    job: &Job,
) -> Result<serde_json::Map<String, serde_json::Value>, Failure> {
    mapping::apply(rules, &mapping_input(job)).map_err(|e| Failure {
        class: match e {
            mapping::MissingOrInvalid::Rules(_) => ErrorClass::PermanentConfig,
            _ => ErrorClass::PermanentData,
        },
        reason: format!("not sent: {e}"),
        field: e.field().map(String::from),
    })
}

/// Sends `request`; a `Retry-After` date in the answer is read on `clock` when the answer arrived.
async fn send(request: reqwest::RequestBuilder, clock: &Clock) -> Outcome {
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) if e.is_connect() || e.is_builder() => return Outcome::Unsent(error_chain(&e)),
        Err(e) => return Outcome::Unanswered(error_chain(&e)),
    };
    let status = response.status().as_u16();
    let headers = response.headers().clone();
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

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn excerpt(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    Some(truncate_chars(&String::from_utf8_lossy(body), EXCERPT_CHARS))
}

fn json_id(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn crm_id_in(body: &[u8], pointer: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    json.pointer(pointer).and_then(json_id)
}

/// A search answer holds a record when the id is at `pointer`, or in the first element of a list
/// (a bare array, or `results`/`data`/`records` as HubSpot, Pipedrive and Salesforce answer).
fn search_hit(body: &[u8], pointer: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    if let Some(id) = json.pointer(pointer).and_then(json_id) {
        return Some(id);
    }
    let first = match &json {
        serde_json::Value::Array(items) => items.first(),
        serde_json::Value::Object(map) => ["results", "data", "records", "items"]
            .iter()
            .find_map(|k| map.get(*k).and_then(|v| v.as_array()).and_then(|a| a.first())),
        _ => None,
    }?;
    first.pointer(pointer).and_then(json_id)
}

// An external id is always one path segment: everything but unreserved characters percent-encoded.
use vendor::encode_component as urlencode;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_hits_in_the_shapes_crms_answer() {
        assert_eq!(search_hit(br#"{"id":"c-1"}"#, "/id").as_deref(), Some("c-1"));
        assert_eq!(search_hit(br#"[{"id":7}]"#, "/id").as_deref(), Some("7"));
        assert_eq!(search_hit(br#"{"results":[{"id":"h"}],"total":1}"#, "/id").as_deref(), Some("h"));
        assert_eq!(search_hit(br#"{"results":[],"total":0}"#, "/id"), None);
        assert_eq!(search_hit(br#"[]"#, "/id"), None);
        assert_eq!(search_hit(b"not json", "/id"), None);
    }

    #[test]
    fn external_ids_are_one_path_segment() {
        assert_eq!(urlencode("meta:123/4 5"), "meta%3A123%2F4%205");
        assert_eq!(HttpTarget::url("http://x/leads/{external_id}", "a:b"), "http://x/leads/a%3Ab");
    }
}
