//! The `meta_lead` step: the first step of a Meta source's route. A Lead Ads webhook carries only ids; this
//! step fetches the lead's answers (`GET /{leadgen_id}?fields=…`, Graph API "Retrieving leads") and replaces
//! the stored lead with its one shape ([`crate::features::graph::canonical_lead`]) in the same commit that marks the step
//! delivered. Later steps (the CRM) therefore always see the real lead, and a crash after the fetch never
//! fetches twice: the step is a checkpoint like any other.
//!
//! Graph's answers are classified by their own codes ([`crate::features::graph::classify_error`]): a throttled fetch
//! holds every request to Graph until the time Graph gave (none is sent before it), an expired page token
//! holds the step and asks a person for a new token (the leads wait, nothing is dead-lettered), a lead that
//! no longer exists is a data dead letter. A lead never goes on to a CRM without its answers.

pub mod check;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::request::{excerpt, send, Outcome, Unwatched, HELD_BACK};
use super::vendor::encode_component;
use crate::config::{Config, TargetConfig, TargetSettings};
use crate::features::graph::{self, GraphErrorKind};
use crate::model::{ErrorClass, Failure, Job, Verdict};

pub struct MetaLeadStep {
    pub name: String,
    pub config: TargetConfig,
    client: reqwest::Client,
    /// `{url}/{api_version}`.
    base: String,
    token: String,
    /// The variable the token came from (named in the alert when Meta refuses it).
    token_env: String,
    /// Sources routed through this step and their configured page, for leads that do not name theirs.
    page_ids: BTreeMap<String, String>,
    clock: crate::clock::Clock,
}

impl MetaLeadStep {
    pub fn new(
        name: &str,
        config: &TargetConfig,
        secrets: &Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<MetaLeadStep> {
        let TargetSettings::MetaLead(settings) = &config.settings else {
            anyhow::bail!("targets.{name} is not a meta_lead step");
        };
        let key = format!("targets.{name}.access_token_env");
        let token_env = settings.access_token_env.clone().with_context(|| format!("{key} is required"))?;
        let token = secrets.secret(&key, &token_env)?;
        let page_ids = secrets
            .sources
            .iter()
            .filter(|(_, s)| s.route.first().map(String::as_str) == Some(name))
            .filter_map(|(n, s)| s.page_id().map(|p| (n.clone(), p.to_string())))
            .collect();
        let client = super::request::client_for(config)?;
        Ok(MetaLeadStep {
            name: name.to_string(),
            config: config.clone(),
            client,
            base: config.graph_base(),
            token,
            token_env,
            page_ids,
            clock,
        })
    }

    /// The Graph API base this step calls (the key of the process-wide throttling hold).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Fetches the lead's answers for `job` (a Meta lead), unless it already has them.
    pub async fn fetch(&self, job: &Job, cx: &Exchange<'_>) -> AttemptReport {
        let now = cx.now;
        let started = Instant::now();
        let mut report = AttemptReport::new(now);
        if graph::has_details(&job.payload) {
            report.note = Some("the lead's answers came with the source's own listing: nothing to fetch".into());
            return report;
        }
        let Some(leadgen_id) = job.payload.get("leadgen_id").and_then(graph::id_text) else {
            report.verdict = Verdict::Failed(Failure {
                class: ErrorClass::PermanentData,
                reason: "the stored Meta lead has no leadgen_id to fetch".into(),
                field: Some("leadgen_id".into()),
            });
            return report;
        };
        let url = match reqwest::Url::parse(&format!("{}/{}", self.base, encode_component(&leadgen_id))) {
            Ok(mut u) => {
                u.query_pairs_mut().append_pair("fields", graph::LEAD_FIELDS).append_pair("access_token", &self.token);
                u
            }
            Err(e) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::PermanentConfig,
                    reason: format!("targets.{}.url does not make a valid Graph URL: {e}", self.name),
                    field: None,
                });
                return report;
            }
        };
        let request = self.client.get(url).timeout(Duration::from_millis(self.config.timeout_ms));
        let sent = send(request, &self.clock, cx.answers).await;
        report.duration_ms = started.elapsed().as_millis() as i64;
        match sent {
            Outcome::HeldBack => report.held_back = true,
            // Reading is always safe to repeat: no answer is simply a temporary problem.
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!("could not reach Meta's Graph API: {}", strip_token(&why, &self.token)),
                    field: None,
                });
            }
            Outcome::Answered(resp) => {
                report.http_status = Some(resp.status);
                let hold = graph::throttled_until(&resp.headers, now);
                if let Some(until) = hold {
                    graph::hold(&self.base, until);
                }
                let answer: Option<Value> = serde_json::from_slice(&resp.body).ok();
                let ok = (200..300).contains(&resp.status)
                    && answer.as_ref().is_some_and(|a| a.get("id").is_some() && a.get("error").is_none());
                if ok {
                    let answer = answer.unwrap_or(Value::Null);
                    let page = self.page_ids.get(&job.source).map(String::as_str);
                    let lead = graph::canonical_lead(&answer, &job.payload, page);
                    let n = lead["fields"].as_object().map_or(0, |f| f.len());
                    report.note = Some(format!("fetched the lead's {n} answers from Meta"));
                    report.payload = Some(lead);
                    // The excerpt of a successful fetch would be the lead's personal data: keep only its shape.
                    report.excerpt = Some(json!({"id": leadgen_id, "fields": n}).to_string());
                } else {
                    let e = graph::classify_error(resp.status, &resp.body);
                    report.excerpt = excerpt(&resp.body).map(|x| strip_token(&x, &self.token));
                    if e.kind == GraphErrorKind::Throttled {
                        report.retry_after = hold.or(resp.retry_after);
                    }
                    if e.kind == GraphErrorKind::Token {
                        report.credential_refused = Some(self.token_env.clone());
                    }
                    report.verdict = Verdict::Failed(Failure { class: e.class, reason: e.reason, field: None });
                }
            }
        }
        report
    }
}

impl MetaLeadStep {
    /// The fetch this step would make for `job` (the token masked).
    pub fn preview_one(&self, job: &Job) -> RequestPreview {
        let id = job.payload.get("leadgen_id").and_then(graph::id_text).unwrap_or_else(|| "{leadgen_id}".into());
        let mut notes = Vec::new();
        if graph::has_details(&job.payload) {
            notes.push("this lead already has its answers: nothing would be fetched".into());
        }
        notes.push("the answer replaces the stored lead with its fields (see \"What a Meta lead looks like\")".into());
        RequestPreview {
            method: "GET".into(),
            url: format!("{}/{}?fields={}&access_token=••••", self.base, encode_component(&id), graph::LEAD_FIELDS),
            headers: vec![],
            body: Value::Null,
            notes,
        }
    }

    /// Test connection: `GET /me` with the page token says whose token it is, or what Graph thinks is wrong.
    async fn check_connection(&self) -> ConnectionCheck {
        let url = match reqwest::Url::parse_with_params(&format!("{}/me", self.base), [("access_token", &self.token)]) {
            Ok(u) => u,
            Err(e) => return ConnectionCheck { ok: false, message: format!("the Graph URL is not valid: {e}") },
        };
        let request = self.client.get(url).timeout(Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock, &Unwatched).await {
            Outcome::Unsent(why) | Outcome::Unanswered(why) => ConnectionCheck {
                ok: false,
                message: format!("cannot reach Meta's Graph API at {}: {}", self.base, strip_token(&why, &self.token)),
            },
            Outcome::HeldBack => ConnectionCheck { ok: false, message: HELD_BACK.into() },
            Outcome::Answered(resp) if (200..300).contains(&resp.status) => {
                let me: Value = serde_json::from_slice(&resp.body).unwrap_or_default();
                let name = me.get("name").and_then(Value::as_str).unwrap_or("(no name)");
                ConnectionCheck {
                    ok: true,
                    message: format!("the page token in {} works: it belongs to \"{name}\"", self.token_env),
                }
            }
            Outcome::Answered(resp) => {
                let e = graph::classify_error(resp.status, &resp.body);
                ConnectionCheck { ok: false, message: format!("the token in {}: {}", self.token_env, e.reason) }
            }
        }
    }
}

#[async_trait::async_trait]
impl Connector for MetaLeadStep {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            out.push(Some(self.fetch(job, cx).await));
        }
        out
    }

    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        Ok(self.preview_one(job))
    }

    async fn check(&self) -> ConnectionCheck {
        self.check_connection().await
    }

    /// Graph throttles the app and the page: its answers to reconciliation hold this step too.
    fn held_until(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        graph::held_until(&self.base, now)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Error texts can carry the request URL, and with it the token: never log or store it.
fn strip_token(text: &str, token: &str) -> String {
    if token.is_empty() {
        text.to_string()
    } else {
        text.replace(token, "[token]")
    }
}
