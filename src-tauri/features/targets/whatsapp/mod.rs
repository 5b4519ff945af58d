//! A first contact by WhatsApp (`kind = "whatsapp"`): an approved template sent through the Cloud API. [`wire`]
//! builds the request and reads the answers and receipts; [`super::contact`] keeps it to one message per lead;
//! this module sends.

pub mod check;
pub mod wire;

use anyhow::Context;

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::contact::{self, Channel, LookUp, Prepared, SendOutcome};
use super::mapping;
use super::request::{client_for, excerpt, send, Outcome, Unwatched};
use super::vendor::VendorVerdict;
use crate::config::{Config, TargetConfig, TargetSettings, WhatsappConfig};
use crate::model::{ContactMessage, Failure, Job};

/// A `whatsapp` step.
pub struct WhatsappStep {
    pub name: String,
    pub config: TargetConfig,
    whatsapp: WhatsappConfig,
    client: reqwest::Client,
    url: String,
    token: reqwest::header::HeaderValue,
    token_env: String,
    clock: crate::clock::Clock,
    /// Each source's `time_zone` (the lead's quiet hours are kept in it).
    zones: std::collections::BTreeMap<String, String>,
}

impl WhatsappStep {
    pub fn new(
        name: &str,
        config: &TargetConfig,
        secrets: &Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<WhatsappStep> {
        let TargetSettings::Whatsapp(settings) = &config.settings else {
            anyhow::bail!("targets.{name} is not a whatsapp step");
        };
        let key = format!("targets.{name}.access_token_env");
        let token_env = settings.access_token_env.clone().with_context(|| format!("{key} is required"))?;
        let mut token =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {}", secrets.secret(&key, &token_env)?))
                .with_context(|| format!("{key}: the token in {token_env} is not a valid header value"))?;
        token.set_sensitive(true);
        let whatsapp = settings.message.clone().with_context(|| format!("targets.{name}.whatsapp is required"))?;
        Ok(WhatsappStep {
            name: name.to_string(),
            url: wire::send_url(&config.url, &config.api_version, &whatsapp.phone_number_id),
            whatsapp,
            client: client_for(config)?,
            config: config.clone(),
            token,
            token_env,
            clock,
            zones: contact::source_zones(secrets),
        })
    }
}

#[async_trait::async_trait]
impl Channel for WhatsappStep {
    fn channel(&self) -> &'static str {
        "whatsapp"
    }

    fn config(&self) -> &TargetConfig {
        &self.config
    }

    fn prepare(&self, job: &Job, step_key: &str) -> Result<Prepared, Failure> {
        let record = mapping::mapped_record(&self.config.mapping, job)?;
        let recipient = contact::recipient(&record)?;
        let mut parameters = Vec::with_capacity(self.whatsapp.parameters.len());
        for p in &self.whatsapp.parameters {
            parameters.push(contact::text_of(&record, p).ok_or_else(|| Failure {
                class: crate::model::ErrorClass::PermanentData,
                reason: format!("not sent: the template needs `{p}`, which the lead does not have"),
                field: Some(p.clone()),
            })?);
        }
        let body =
            wire::template_body(&recipient, &self.whatsapp.template, &self.whatsapp.language, &parameters, step_key);
        Ok(Prepared { recipient, body })
    }

    async fn send(&self, prepared: &Prepared, _step_key: &str, cx: &Exchange<'_>) -> SendOutcome {
        let request = self
            .client
            .post(&self.url)
            .header(reqwest::header::AUTHORIZATION, self.token.clone())
            .timeout(std::time::Duration::from_millis(self.config.timeout_ms))
            .json(&prepared.body);
        match send(request, &self.clock, cx.answers).await {
            Outcome::Answered(resp) => {
                match wire::parse_send(resp.status, &resp.body, &resp.headers, self.clock.now()) {
                    // The answer holds the number: only the id is kept.
                    Ok(id) => SendOutcome::Accepted {
                        status: resp.status,
                        excerpt: Some(serde_json::json!({ "message_id": id }).to_string()),
                        provider_id: id,
                    },
                    Err((verdict, code)) => SendOutcome::Refused {
                        status: resp.status,
                        verdict,
                        error_code: code,
                        opted_out: false,
                        excerpt: excerpt(&resp.body).map(|e| super::vendor::mask(&e)),
                    },
                }
            }
            Outcome::Unsent(why) => SendOutcome::NotSent(why),
            Outcome::HeldBack => SendOutcome::HeldBack,
            Outcome::Unanswered(why) => SendOutcome::NoAnswer(why),
        }
    }

    async fn look_up(&self, _message: &ContactMessage, _prepared: &Prepared, _cx: &Exchange<'_>) -> LookUp {
        LookUp::Unknown("WhatsApp has no list of sent messages; its receipt carries the step's key".into())
    }

    fn refused(&self, report: &mut AttemptReport, v: &VendorVerdict) {
        report.verdict = v.verdict();
        report.retry_after = v.hold_until;
        report.slow_down = v.slow_down;
        if v.credential_problem {
            report.credential_refused = Some(self.token_env.clone());
        }
        contact::hold_on_setup(report, v);
    }

    fn source_zone(&self, source: &str) -> Option<&str> {
        self.zones.get(source).map(String::as_str)
    }
}

#[async_trait::async_trait]
impl Connector for WhatsappStep {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            out.push(contact::deliver(self, job, cx).await);
        }
        out
    }

    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        let prepared = self.prepare(job, &contact::step_key(job))?;
        Ok(RequestPreview {
            method: "POST".into(),
            url: self.url.clone(),
            headers: vec![("authorization".into(), "••••".into()), ("content-type".into(), "application/json".into())],
            body: prepared.body,
            notes: vec![
                "sent once: not when this lead's message went out before (a retry or a replay never repeats it), \
                 the number opted out, or the lead's quiet hours hold it"
                    .into(),
            ],
        })
    }

    async fn check(&self) -> ConnectionCheck {
        // `GET /{version}/{phone-number-id}`: the number's own record, readable with the messaging token.
        let url = self.url.trim_end_matches("/messages").to_string();
        let request = self
            .client
            .get(&url)
            .header(reqwest::header::AUTHORIZATION, self.token.clone())
            .timeout(std::time::Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock, &Unwatched).await {
            Outcome::Answered(r) if (200..300).contains(&r.status) => ConnectionCheck {
                ok: true,
                message: format!("the token works and the phone number {} is readable", self.whatsapp.phone_number_id),
            },
            Outcome::Answered(r) => {
                let v = match wire::parse_send(r.status, &r.body, &r.headers, self.clock.now()) {
                    Err((v, _)) => v,
                    Ok(_) => VendorVerdict::failed(crate::model::ErrorClass::Transient, "unexpected answer"),
                };
                ConnectionCheck { ok: false, message: format!("GET {url}: {}", v.reason) }
            }
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                ConnectionCheck { ok: false, message: format!("WhatsApp did not answer at {url}: {why}") }
            }
            Outcome::HeldBack => ConnectionCheck { ok: false, message: super::request::HELD_BACK.into() },
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
