//! The `meta_conversions` step: a lead's CRM stages go back to Meta through the Conversions API for CRM leads
//! (the request shape is in [`wire`]). Up to 1,000 events go in one request. Meta discards a whole request for
//! one bad event, so a data error of a request with several events is narrowed down: the request is split in
//! halves and each half sent again (Meta drops a repeated `event_id`, so a resend is safe) until the bad event is
//! alone — it alone is parked as a dead letter, the others go.
//!
//! Before anything is sent: a stage the target does not map is reported, not sent; an event older than Meta's
//! window (7 days from the event, `window_days`) is reported "too old", not sent; a lead with nothing Meta can
//! match it by is a data dead letter. Events of one request go in the order of their time, so a lead's earlier
//! stages go before its later ones. Graph's errors are classified as for the `meta_lead` step
//! ([`crate::features::graph::classify_error`]): throttling holds every request to Graph, a refused token holds
//! the step and asks for a new one.

pub mod check;
pub mod wire;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::conversion::{self, Conversion};
use super::request::{excerpt, send, Outcome, Unwatched};
use crate::config::{Config, TargetConfig, TargetSettings};
use crate::features::graph::{self, GraphErrorKind};
use crate::model::{ErrorClass, Failure, Job, Verdict};

pub struct MetaConversionsStep {
    pub name: String,
    pub config: TargetConfig,
    client: reqwest::Client,
    /// `{url}/{api_version}`: the key of Graph's process-wide throttling hold.
    base: String,
    dataset_id: String,
    token: String,
    token_env: String,
    stages: BTreeMap<String, String>,
    window_days: u32,
    /// `lead_event_source` as configured.
    lead_event_source: Option<String>,
    clock: crate::clock::Clock,
}

impl MetaConversionsStep {
    pub fn new(
        name: &str,
        config: &TargetConfig,
        secrets: &Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<MetaConversionsStep> {
        let TargetSettings::MetaConversions(settings) = &config.settings else {
            anyhow::bail!("targets.{name} is not a meta_conversions step");
        };
        let key = format!("targets.{name}");
        let token_env =
            settings.access_token_env.clone().with_context(|| format!("{key}.access_token_env is required"))?;
        let token = secrets.secret(&format!("{key}.access_token_env"), &token_env)?;
        let dataset_id = settings.dataset_id.clone().with_context(|| format!("{key}.dataset_id is required"))?;
        Ok(MetaConversionsStep {
            name: name.to_string(),
            config: config.clone(),
            client: super::request::client_for(config)?,
            base: config.graph_base(),
            dataset_id,
            token,
            token_env,
            stages: settings.conversions.stages.clone(),
            window_days: settings.conversions.window_days.unwrap_or(wire::WINDOW_DAYS),
            lead_event_source: settings.lead_event_source.clone(),
            clock,
        })
    }

    fn url(&self) -> String {
        format!("{}/{}/events", self.base, super::vendor::encode_component(&self.dataset_id))
    }

    fn lead_event_source(&self, c: &Conversion) -> String {
        self.lead_event_source.clone().or_else(|| c.crm.clone()).unwrap_or_else(|| "Leadline".into())
    }

    /// The event for `job`, or the report that ends its step without sending.
    pub fn plan(&self, job: &Job, now: DateTime<Utc>) -> Result<(Value, DateTime<Utc>), Box<AttemptReport>> {
        let c = conversion::of_job(job);
        let Some(event_name) = self.stages.get(&c.stage) else {
            return Err(Box::new(AttemptReport::reported(
                now,
                format!("reported: stage `{}` is not in targets.{}.stages: not sent to Meta", c.stage, self.name),
            )));
        };
        if let Some(why) = conversion::too_old(c.event_time, now, self.window_days, "Meta", "event") {
            return Err(Box::new(AttemptReport::reported(now, why)));
        }
        match wire::event(&c, event_name, &self.lead_event_source(&c)) {
            Some(event) => Ok((event, c.event_time)),
            None => Err(Box::new(AttemptReport::failed(
                now,
                Failure {
                    class: ErrorClass::PermanentData,
                    reason: "the lead has nothing Meta can match it by: no Meta lead id, e-mail or phone".into(),
                    field: Some("email".into()),
                },
            ))),
        }
    }

    /// Sends `events` in one request; the report every one of them shares.
    async fn post(&self, events: &[Value], cx: &Exchange<'_>) -> AttemptReport {
        let now = cx.now;
        let started = Instant::now();
        let mut report = AttemptReport::new(now);
        let request = self
            .client
            .post(self.url())
            .query(&[("access_token", &self.token)])
            .json(&wire::body(events))
            .timeout(Duration::from_millis(self.config.timeout_ms));
        let sent = send(request, &self.clock, cx.answers).await;
        report.duration_ms = started.elapsed().as_millis() as i64;
        match sent {
            // Not sent: Graph held this address while the request was prepared.
            Outcome::HeldBack => report.held_back = true,
            // Meta drops a repeated event_id: an event sent without an answer may simply go again.
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                report.verdict = Verdict::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: format!("could not reach Meta's Conversions API: {}", strip(&why, &self.token)),
                    field: None,
                });
            }
            Outcome::Answered(resp) => {
                report.http_status = Some(resp.status);
                report.excerpt = excerpt(&resp.body).map(|x| strip(&x, &self.token));
                let hold = graph::throttled_until(&resp.headers, now);
                if let Some(until) = hold {
                    graph::hold(&self.base, until);
                }
                if (200..300).contains(&resp.status) && wire::events_received(&resp.body).is_some() {
                    report.note = Some(format!("received by Meta in a request of {} events", events.len()));
                } else {
                    let e = graph::classify_error(resp.status, &resp.body);
                    if e.kind == GraphErrorKind::Throttled {
                        report.retry_after = hold.or(resp.retry_after);
                    }
                    if e.kind == GraphErrorKind::Token {
                        report.credential_refused = Some(self.token_env.clone());
                    }
                    report.verdict = Verdict::Failed(capi_failure(&e));
                }
            }
        }
        report
    }
}

/// What a Graph error means for events: "Invalid parameter" (code 100) names the events' data — narrowed down
/// to the bad event, then its data dead letter — while an object that does not exist is the dataset, a setup
/// problem. The rest as for any Graph call.
fn capi_failure(e: &graph::GraphError) -> Failure {
    let class = match (&e.kind, e.code) {
        (GraphErrorKind::Gone, _) => ErrorClass::PermanentConfig,
        (GraphErrorKind::Other, Some(100)) => ErrorClass::PermanentData,
        _ => e.class,
    };
    let reason = match class {
        ErrorClass::PermanentData => {
            format!("{} — Meta refused this event's data", e.reason.split(": ").next().unwrap_or_default())
        }
        ErrorClass::PermanentConfig if e.kind == GraphErrorKind::Gone => {
            format!("{} — check targets' dataset_id and that the token may send events to it", e.reason)
        }
        _ => e.reason.clone(),
    };
    Failure { class, reason, field: None }
}

/// Whether a failed request of several events is narrowed down: only a data error (one event is bad), never a
/// refusal of the whole request (token, throttling, an outage).
fn narrow(report: &AttemptReport, events: usize) -> bool {
    events > 1 && matches!(&report.verdict, Verdict::Failed(f) if f.class == ErrorClass::PermanentData)
}

#[async_trait::async_trait]
impl Connector for MetaConversionsStep {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let mut out: Vec<Option<AttemptReport>> = vec![None; jobs.len()];
        let mut ready: Vec<(usize, Value, DateTime<Utc>)> = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            match self.plan(job, cx.now) {
                Ok((event, at)) => ready.push((i, event, at)),
                Err(report) => out[i] = Some(*report),
            }
        }
        // Earlier stages before later ones (stable: the claim's order among equal times).
        ready.sort_by_key(|(_, _, at)| *at);
        let mut groups: Vec<Vec<(usize, Value)>> =
            ready.chunks(wire::MAX_EVENTS).map(|c| c.iter().map(|(i, e, _)| (*i, e.clone())).collect()).collect();
        groups.reverse();
        while let Some(group) = groups.pop() {
            let events: Vec<Value> = group.iter().map(|(_, e)| e.clone()).collect();
            let report = self.post(&events, cx).await;
            if narrow(&report, group.len()) {
                tracing::info!(target = %self.name, events = group.len(), "Meta refused a request for one event: narrowing it down");
                let (first, second) = group.split_at(group.len() / 2);
                // The first half next, then the second: the order of time holds.
                groups.push(second.to_vec());
                groups.push(first.to_vec());
                continue;
            }
            for (i, _) in group {
                out[i] = Some(report.clone());
            }
        }
        out
    }

    fn batch_capacity(&self) -> usize {
        wire::MAX_EVENTS
    }

    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        let now = self.clock.now();
        let (event, _) = self.plan(job, now).map_err(|r| match r.verdict {
            Verdict::Failed(f) => f,
            Verdict::Delivered => {
                Failure { class: ErrorClass::PermanentData, reason: r.reported.unwrap_or_default(), field: None }
            }
        })?;
        Ok(RequestPreview {
            method: "POST".into(),
            url: format!("{}?access_token=••••", self.url()),
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: wire::body(&[event]),
            notes: vec![format!(
                "up to {} events go in one request; a request Meta refuses for one event is split until that event is alone",
                wire::MAX_EVENTS
            )],
        })
    }

    /// `GET /{dataset_id}` with the token: the dataset's name, or what Graph thinks is wrong.
    async fn check(&self) -> ConnectionCheck {
        let url = format!("{}/{}", self.base, super::vendor::encode_component(&self.dataset_id));
        let request = self
            .client
            .get(url)
            .query(&[("access_token", &self.token)])
            .timeout(Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock, &Unwatched).await {
            Outcome::Unsent(why) | Outcome::Unanswered(why) => ConnectionCheck {
                ok: false,
                message: format!("cannot reach Meta's Graph API at {}: {}", self.base, strip(&why, &self.token)),
            },
            Outcome::HeldBack => ConnectionCheck { ok: false, message: super::request::HELD_BACK.into() },
            Outcome::Answered(resp) if (200..300).contains(&resp.status) => ConnectionCheck {
                ok: true,
                message: format!("the token in {} can read dataset {}", self.token_env, self.dataset_id),
            },
            Outcome::Answered(resp) => {
                let e = graph::classify_error(resp.status, &resp.body);
                ConnectionCheck { ok: false, message: format!("the token in {}: {}", self.token_env, e.reason) }
            }
        }
    }

    fn held_until(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        graph::held_until(&self.base, now)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Error texts can carry the request URL, and with it the token.
fn strip(text: &str, token: &str) -> String {
    if token.is_empty() {
        text.to_string()
    } else {
        text.replace(token, "[token]")
    }
}
