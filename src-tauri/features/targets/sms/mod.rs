//! A first contact by SMS (`kind = "sms"`) through Twilio's Messages API. [`wire`] builds the request and reads
//! the answers, lists and status callbacks; [`super::contact`] keeps it to one message per lead; this module
//! sends, and looks a send whose answer was lost up in Twilio's list of messages.

pub mod check;
pub mod wire;

use anyhow::Context;
use serde_json::Value;

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::contact::{self, Channel, LookUp, Prepared, SendOutcome};
use super::mapping;
use super::request::{client_for, excerpt, send, Outcome, Unwatched};
use super::vendor::VendorVerdict;
use crate::config::{Config, SmsConfig, TargetConfig, TargetSettings};
use crate::model::{ContactMessage, Failure, Job};

/// An `sms` step.
pub struct SmsStep {
    pub name: String,
    pub config: TargetConfig,
    sms: SmsConfig,
    client: reqwest::Client,
    url: String,
    auth_token: String,
    clock: crate::clock::Clock,
    /// Each source's `time_zone` (the lead's quiet hours are kept in it).
    zones: std::collections::BTreeMap<String, String>,
}

impl SmsStep {
    pub fn new(
        name: &str,
        config: &TargetConfig,
        secrets: &Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<SmsStep> {
        let TargetSettings::Sms(sms) = &config.settings else {
            anyhow::bail!("targets.{name} is not an sms step");
        };
        let sms = sms.clone().with_context(|| format!("targets.{name}.sms is required"))?;
        let auth_token = secrets.secret(&format!("targets.{name}.sms.auth_token_env"), &sms.auth_token_env)?;
        Ok(SmsStep {
            name: name.to_string(),
            url: wire::messages_url(&config.url, &sms.account_sid),
            client: client_for(config)?,
            config: config.clone(),
            sms,
            auth_token,
            clock,
            zones: contact::source_zones(secrets),
        })
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, url)
            .basic_auth(&self.sms.account_sid, Some(&self.auth_token))
            .timeout(std::time::Duration::from_millis(self.config.timeout_ms))
    }

    fn form(&self, prepared: &Prepared) -> Vec<(String, String)> {
        prepared
            .body
            .as_object()
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
            .unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl Channel for SmsStep {
    fn channel(&self) -> &'static str {
        "sms"
    }

    fn config(&self) -> &TargetConfig {
        &self.config
    }

    fn prepare(&self, job: &Job, step_key: &str) -> Result<Prepared, Failure> {
        let record = mapping::mapped_record(&self.config.mapping, job)?;
        let recipient = contact::recipient(&record)?;
        let text = contact::render(&self.sms.body, &record)?;
        let callback = self.sms.status_callback.as_deref().map(|cb| wire::callback_for(cb, step_key));
        let form = wire::send_form(
            &recipient,
            self.sms.from.as_deref(),
            self.sms.messaging_service_sid.as_deref(),
            &text,
            callback.as_deref(),
        );
        // The form's fields as an object (what the preview shows; the order of a form's fields means nothing).
        let body = Value::Object(form.into_iter().map(|(k, v)| (k, Value::String(v))).collect());
        Ok(Prepared { recipient, body })
    }

    async fn send(&self, prepared: &Prepared, _step_key: &str, cx: &Exchange<'_>) -> SendOutcome {
        let request = self.request(reqwest::Method::POST, &self.url).form(&self.form(prepared));
        match send(request, &self.clock, cx.answers).await {
            Outcome::Answered(resp) => match wire::parse_send(resp.status, &resp.body, &resp.headers, self.clock.now())
            {
                // The answer holds the number and the text: only the sid is kept.
                Ok(sid) => SendOutcome::Accepted {
                    status: resp.status,
                    excerpt: Some(serde_json::json!({ "sid": sid }).to_string()),
                    provider_id: sid,
                },
                Err(r) => SendOutcome::Refused {
                    status: resp.status,
                    verdict: r.verdict,
                    error_code: r.code,
                    opted_out: r.opted_out,
                    excerpt: excerpt(&resp.body).map(|e| super::vendor::mask(&e)),
                },
            },
            Outcome::Unsent(why) => SendOutcome::NotSent(why),
            Outcome::HeldBack => SendOutcome::HeldBack,
            Outcome::Unanswered(why) => SendOutcome::NoAnswer(why),
        }
    }

    /// Twilio creates the message before it answers, so its list shows every send that reached it: found, it
    /// went out; not found, it never arrived and may be sent.
    async fn look_up(&self, message: &ContactMessage, prepared: &Prepared, cx: &Exchange<'_>) -> LookUp {
        let mut url = wire::list_url(&self.config.url, &self.sms.account_sid, &message.recipient, 50);
        let text = prepared.body.get("Body").and_then(Value::as_str).unwrap_or_default().to_string();
        // Page by page (`next_page_uri`), newest first, until the message is found or the pages reach back
        // before the send: only then is "not found" an answer.
        for _ in 0..wire::MAX_PAGES {
            let resp = match send(self.request(reqwest::Method::GET, &url), &self.clock, cx.answers).await {
                Outcome::Answered(resp) if (200..300).contains(&resp.status) => resp,
                Outcome::Answered(resp) => {
                    return LookUp::Unknown(format!("Twilio's list answered HTTP {}", resp.status))
                }
                Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                    return LookUp::Unknown(format!("Twilio's list: {why}"))
                }
                Outcome::HeldBack => return LookUp::Unknown("Twilio asked to wait before its list is read".into()),
            };
            match wire::find_in_list(&resp.body, &message.recipient, &text, message.sent_at) {
                Ok(Some((sid, status))) => return LookUp::Found { provider_id: sid, status },
                Ok(None) => {}
                Err(why) => return LookUp::Unknown(format!("Twilio's list could not be read: {why}")),
            }
            match wire::next_page(&self.config.url, &resp.body, message.sent_at) {
                Some(next) => url = next,
                None => return LookUp::NotFound,
            }
        }
        LookUp::Unknown(format!("not in the first {} pages of Twilio's list", wire::MAX_PAGES))
    }

    fn refused(&self, report: &mut AttemptReport, v: &VendorVerdict) {
        report.verdict = v.verdict();
        report.retry_after = v.hold_until;
        report.slow_down = v.slow_down;
        if v.credential_problem {
            report.credential_refused = Some(self.sms.auth_token_env.clone());
        }
        contact::hold_on_setup(report, v);
    }

    fn source_zone(&self, source: &str) -> Option<&str> {
        self.zones.get(source).map(String::as_str)
    }
}

#[async_trait::async_trait]
impl Connector for SmsStep {
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
            headers: vec![
                ("authorization".into(), "••••".into()),
                ("content-type".into(), "application/x-www-form-urlencoded".into()),
            ],
            body: prepared.body,
            notes: vec![
                "sent once: not when this lead's message went out before (a retry or a replay never repeats it), \
                 the number opted out (STOP), or the lead's quiet hours hold it; a send whose answer was lost is \
                 looked up in Twilio's list of messages before anything is sent again"
                    .into(),
            ],
        })
    }

    async fn check(&self) -> ConnectionCheck {
        // `GET /2010-04-01/Accounts/{sid}.json`: the account itself, readable with its credentials.
        let url = self.url.trim_end_matches("/Messages.json").to_string() + ".json";
        match send(self.request(reqwest::Method::GET, &url), &self.clock, &Unwatched).await {
            Outcome::Answered(r) if (200..300).contains(&r.status) => ConnectionCheck {
                ok: true,
                message: format!("the credentials of account {} work", self.sms.account_sid),
            },
            Outcome::Answered(r) => {
                let v = match wire::parse_send(r.status, &r.body, &r.headers, self.clock.now()) {
                    Err(r) => r.verdict,
                    Ok(_) => VendorVerdict::failed(crate::model::ErrorClass::Transient, "unexpected answer"),
                };
                ConnectionCheck { ok: false, message: format!("GET {url}: {}", v.reason) }
            }
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                ConnectionCheck { ok: false, message: format!("Twilio did not answer at {url}: {why}") }
            }
            Outcome::HeldBack => ConnectionCheck { ok: false, message: super::request::HELD_BACK.into() },
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
