//! The `google_ads_conversions` step: a lead's CRM stages go back to Google Ads as conversions of its click
//! (`uploadClickConversions` over REST with `partialFailure = true`; the shapes are in [`wire`]). Access is an
//! OAuth 2.0 access token from the refresh-token flow (`POST {token_url}`, form `grant_type=refresh_token`,
//! `client_id`, `client_secret`, `refresh_token` → `{access_token, expires_in}`), refreshed before it expires
//! and once when Google refuses it; `login-customer-id` is sent when the account is reached through a manager,
//! and `developer-token` only when one is configured (Google retired them on 2026-09-09).
//!
//! Each row's fate is its own: an unknown click (`EVENT_NOT_FOUND`) is a data dead letter of that lead alone, a
//! conversion Google already has is done, a click past Google's window is reported. Before anything is sent, a
//! lead without a click id, a stage the target does not map and a click older than the window (90 days, or
//! `window_days`) end as reported.

pub mod check;
pub mod wire;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::conversion;
use super::request::{excerpt, send, Outcome, Unwatched};
use crate::config::{Config, TargetConfig, TargetSettings};
use crate::model::{ErrorClass, Failure, Job, Verdict};
use wire::RowOutcome;

pub const DEFAULT_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";

pub struct GoogleConversionsStep {
    pub name: String,
    pub config: TargetConfig,
    client: reqwest::Client,
    /// `{url}/{api_version}/customers/{customer_id}:uploadClickConversions`.
    upload_url: String,
    token_url: String,
    client_id: String,
    client_secret: String,
    refresh_token: String,
    refresh_token_env: String,
    developer_token: Option<String>,
    login_customer_id: Option<String>,
    stages: BTreeMap<String, String>,
    window_days: u32,
    currency: String,
    /// The access token and when it stops working.
    access: tokio::sync::Mutex<Option<(String, DateTime<Utc>)>>,
    clock: crate::clock::Clock,
}

/// Why no access token could be had.
enum TokenTrouble {
    /// Google refused the refresh token or the client (`invalid_grant`, `invalid_client`): a person must act.
    Refused(String),
    /// The token endpoint could not be reached or failed: try again later.
    Unavailable(String),
}

impl GoogleConversionsStep {
    pub fn new(
        name: &str,
        config: &TargetConfig,
        secrets: &Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<GoogleConversionsStep> {
        let TargetSettings::GoogleAdsConversions(settings) = &config.settings else {
            anyhow::bail!("targets.{name} is not a google_ads_conversions step");
        };
        let key = format!("targets.{name}");
        let env = |field: &str, v: &Option<String>| -> anyhow::Result<(String, String)> {
            let var = v.clone().with_context(|| format!("{key}.{field} is required"))?;
            Ok((secrets.secret(&format!("{key}.{field}"), &var)?, var))
        };
        let (client_id, _) = env("client_id_env", &settings.oauth.client_id_env)?;
        let (client_secret, _) = env("client_secret_env", &settings.oauth.client_secret_env)?;
        let (refresh_token, refresh_token_env) = env("refresh_token_env", &settings.oauth.refresh_token_env)?;
        let developer_token = match &settings.developer_token_env {
            Some(var) => Some(secrets.secret(&format!("{key}.developer_token_env"), var)?),
            None => None,
        };
        let customer = settings.customer_id.clone().with_context(|| format!("{key}.customer_id is required"))?;
        let customer: String = customer.chars().filter(char::is_ascii_digit).collect();
        let version = if config.api_version.starts_with("v2") && config.api_version.contains('.') {
            // The serde default is Graph's `v21.0`: for Google it means "not set".
            "v22".to_string()
        } else {
            config.api_version.clone()
        };
        Ok(GoogleConversionsStep {
            name: name.to_string(),
            config: config.clone(),
            client: super::request::client_for(config)?,
            upload_url: format!(
                "{}/{version}/customers/{customer}:uploadClickConversions",
                config.url.trim_end_matches('/')
            ),
            token_url: settings.token_url.clone().unwrap_or_else(|| DEFAULT_TOKEN_URL.into()),
            client_id,
            client_secret,
            refresh_token,
            refresh_token_env,
            developer_token,
            login_customer_id: settings
                .login_customer_id
                .as_ref()
                .map(|c| c.chars().filter(char::is_ascii_digit).collect()),
            stages: settings.conversions.stages.clone(),
            window_days: settings.conversions.window_days.unwrap_or(wire::WINDOW_DAYS),
            currency: settings.currency.clone().unwrap_or_else(|| "EUR".into()),
            access: tokio::sync::Mutex::new(None),
            clock,
        })
    }

    /// An access token valid at `now`: the one held, or a new one. `refused`: the one Google just refused.
    async fn access_token(&self, now: DateTime<Utc>, refused: Option<&str>) -> Result<String, TokenTrouble> {
        let mut held = self.access.lock().await;
        if let Some((token, until)) = held.as_ref() {
            if *until > now + chrono::Duration::seconds(60) && Some(token.as_str()) != refused {
                return Ok(token.clone());
            }
        }
        let form = [
            ("grant_type", "refresh_token"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.as_str()),
            ("refresh_token", self.refresh_token.as_str()),
        ];
        let request =
            self.client.post(&self.token_url).form(&form).timeout(Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock, &Unwatched).await {
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                Err(TokenTrouble::Unavailable(format!("cannot reach Google's OAuth endpoint: {why}")))
            }
            // Never for a request sent unwatched; read as "not now" should it happen.
            Outcome::HeldBack => Err(TokenTrouble::Unavailable(super::request::HELD_BACK.into())),
            Outcome::Answered(resp) => {
                let answer: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
                match answer.get("access_token").and_then(Value::as_str) {
                    Some(token) if (200..300).contains(&resp.status) => {
                        let secs = answer.get("expires_in").and_then(Value::as_i64).unwrap_or(3600);
                        *held = Some((token.to_string(), now + chrono::Duration::seconds(secs)));
                        Ok(token.to_string())
                    }
                    _ if resp.status >= 500 => {
                        Err(TokenTrouble::Unavailable(format!("Google's OAuth endpoint answered HTTP {}", resp.status)))
                    }
                    _ => {
                        let code = answer.get("error").and_then(Value::as_str).unwrap_or("no access token");
                        Err(TokenTrouble::Refused(format!(
                            "Google refused the refresh token in {} ({code}): authorise Leadline again and store the new refresh token",
                            self.refresh_token_env
                        )))
                    }
                }
            }
        }
    }

    /// The row for `job`, or the report that ends its step without sending.
    fn plan(&self, job: &Job, now: DateTime<Utc>) -> Result<Value, Box<AttemptReport>> {
        let c = conversion::of_job(job);
        let Some(action) = self.stages.get(&c.stage) else {
            return Err(Box::new(AttemptReport::reported(
                now,
                format!("reported: stage `{}` is not in targets.{}.stages: not sent to Google Ads", c.stage, self.name),
            )));
        };
        let Some(gclid) = c.gclid() else {
            return Err(Box::new(AttemptReport::reported(
                now,
                "reported: the lead has no Google click id (gclid): not a Google Ads click, not sent".into(),
            )));
        };
        if let Some(why) = conversion::too_old(c.lead_time, now, self.window_days, "Google Ads", "click") {
            return Err(Box::new(AttemptReport::reported(now, why)));
        }
        let currency = c.currency.clone().unwrap_or_else(|| self.currency.clone());
        Ok(wire::row(&gclid, action, c.event_time, c.value, &currency, &c.key()))
    }

    fn request(&self, token: &str, rows: &[Value]) -> reqwest::RequestBuilder {
        let mut r = self
            .client
            .post(&self.upload_url)
            .bearer_auth(token)
            .json(&wire::body(rows))
            .timeout(Duration::from_millis(self.config.timeout_ms));
        if let Some(login) = &self.login_customer_id {
            r = r.header("login-customer-id", login);
        }
        if let Some(dev) = &self.developer_token {
            r = r.header("developer-token", dev);
        }
        r
    }
}

#[async_trait::async_trait]
impl Connector for GoogleConversionsStep {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let now = cx.now;
        let mut out: Vec<Option<AttemptReport>> = vec![None; jobs.len()];
        let mut ready: Vec<(usize, Value)> = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            match self.plan(job, now) {
                Ok(row) => ready.push((i, row)),
                Err(report) => out[i] = Some(*report),
            }
        }
        if ready.is_empty() {
            return out;
        }
        let rows: Vec<Value> = ready.iter().map(|(_, r)| r.clone()).collect();
        let started = Instant::now();
        let mut refused: Option<String> = None;
        // At most two tries: the second only after Google refused an access token that was then refreshed.
        let (status, body, retry_after, failure) = loop {
            let token = match self.access_token(now, refused.as_deref()).await {
                Ok(t) => t,
                Err(trouble) => {
                    let (class, reason, credential) = match trouble {
                        TokenTrouble::Refused(r) => {
                            (ErrorClass::PermanentConfig, r, Some(self.refresh_token_env.clone()))
                        }
                        TokenTrouble::Unavailable(r) => (ErrorClass::Transient, r, None),
                    };
                    let mut report = AttemptReport::failed(now, Failure { class, reason, field: None });
                    report.credential_refused = credential;
                    report.duration_ms = started.elapsed().as_millis() as i64;
                    for (i, _) in &ready {
                        out[*i] = Some(report.clone());
                    }
                    return out;
                }
            };
            match send(self.request(&token, &rows), &self.clock, cx.answers).await {
                Outcome::HeldBack => {
                    // Not sent: the account was held while this upload was prepared; the leads go back unsent.
                    let mut report = AttemptReport::new(now);
                    report.held_back = true;
                    for (i, _) in &ready {
                        out[*i] = Some(report.clone());
                    }
                    return out;
                }
                Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                    // The orderId makes a resend safe: Google drops a conversion it already has.
                    let f = Failure {
                        class: ErrorClass::Transient,
                        reason: format!("could not reach Google Ads: {why}"),
                        field: None,
                    };
                    break (None, Vec::new(), None, Some(f));
                }
                Outcome::Answered(resp) if resp.status == 401 && refused.is_none() => {
                    refused = Some(token);
                    continue;
                }
                Outcome::Answered(resp) if (200..300).contains(&resp.status) => {
                    break (Some(resp.status), resp.body, None, None);
                }
                Outcome::Answered(resp) => {
                    let (f, delay) = wire::call_error(resp.status, &resp.body);
                    let retry_after = resp.retry_after.or(delay.map(|d| self.clock.now() + d));
                    break (Some(resp.status), resp.body, retry_after, Some(f));
                }
            }
        };
        let mut base = AttemptReport::new(now);
        base.duration_ms = started.elapsed().as_millis() as i64;
        base.http_status = status;
        base.excerpt = excerpt(&body);
        base.retry_after = retry_after;
        match failure {
            Some(f) => {
                if status == Some(401) {
                    base.credential_refused = Some(self.refresh_token_env.clone());
                }
                base.verdict = Verdict::Failed(f);
                for (i, _) in &ready {
                    out[*i] = Some(base.clone());
                }
            }
            None => {
                for ((i, _), fate) in ready.iter().zip(wire::rows(&body, rows.len())) {
                    let mut r = base.clone();
                    match fate {
                        RowOutcome::Uploaded => r.note = Some("uploaded to Google Ads".into()),
                        RowOutcome::AlreadyThere => r.note = Some("Google Ads already had this conversion".into()),
                        RowOutcome::TooOld(why) => {
                            r.note = Some(why.clone());
                            r.reported = Some(why);
                        }
                        RowOutcome::Failed(f) => r.verdict = Verdict::Failed(f),
                    }
                    out[*i] = Some(r);
                }
            }
        }
        out
    }

    fn batch_capacity(&self) -> usize {
        wire::MAX_CONVERSIONS
    }

    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        let row = self.plan(job, self.clock.now()).map_err(|r| match r.verdict {
            Verdict::Failed(f) => f,
            Verdict::Delivered => {
                Failure { class: ErrorClass::PermanentData, reason: r.reported.unwrap_or_default(), field: None }
            }
        })?;
        let mut headers = vec![("Authorization".to_string(), "Bearer ••••".to_string())];
        if let Some(login) = &self.login_customer_id {
            headers.push(("login-customer-id".into(), login.clone()));
        }
        if self.developer_token.is_some() {
            headers.push(("developer-token".into(), "••••".into()));
        }
        Ok(RequestPreview {
            method: "POST".into(),
            url: self.upload_url.clone(),
            headers,
            body: wire::body(&[row]),
            notes: vec!["an access token is first obtained with the refresh token (OAuth 2.0)".into()],
        })
    }

    /// Test connection: the refresh token is exchanged for an access token.
    async fn check(&self) -> ConnectionCheck {
        match self.access_token(self.clock.now(), None).await {
            Ok(_) => ConnectionCheck {
                ok: true,
                message: format!("the refresh token in {} gives an access token", self.refresh_token_env),
            },
            Err(TokenTrouble::Refused(m)) | Err(TokenTrouble::Unavailable(m)) => {
                ConnectionCheck { ok: false, message: m }
            }
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
