//! Salesforce REST API (`kind = "salesforce"`): a lead upserted by an external id field, with the OAuth 2.0
//! refresh-token flow. [`wire`] builds the requests and reads the answers; this module sends them.

pub mod check;
pub mod wire;

use chrono::Duration;

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, NearLimit, PacingHints, RequestPreview};
use super::mapping;
use super::request::{client_for, excerpt, send, Outcome, Unwatched, HELD_BACK};
use super::vendor::VendorVerdict;
use crate::model::{ErrorClass, Failure, Job, Verdict};
pub use wire::DAILY_LIMIT_HOLD;
use wire::{
    describe_verdict, parse_limit_info, parse_token_answer, parse_upsert_answer, refresh_form, token_url,
    upsert_request, Token, TokenError,
};

/// When delivery slows down near the org's API limit, and how long a spent limit holds the target.
///
/// The rule: once `Sforce-Limit-Info` says more than `slow_above` of the org's rolling 24-hour API allowance is
/// used, this process sends at most one request per `interval` to the org (and the worker claims one lead at a
/// time), so other integrations of the org keep some of the allowance and Leadline does not spend the rest in a
/// burst. Below the threshold nothing is slowed down.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacing {
    pub slow_above: f64,
    pub interval: std::time::Duration,
    /// The longest hold after `REQUEST_LIMIT_EXCEEDED` (the adapter's own is [`DAILY_LIMIT_HOLD`]).
    pub limit_hold: Duration,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing { slow_above: 0.9, interval: std::time::Duration::from_secs(2), limit_hold: DAILY_LIMIT_HOLD }
    }
}

struct Session {
    /// The refresh token in use: the configured one, or the one a rotating org last gave.
    refresh_token: String,
    token: Option<Token>,
    /// Counts refreshes, so that requests that failed with the same session refresh it only once.
    generation: u64,
    /// Why the last refresh failed (requests that saw the same session do not ask again).
    refused: Option<TokenError>,
}

/// A `kind = "salesforce"` target.
pub struct SalesforceTarget {
    pub name: String,
    pub config: crate::config::TargetConfig,
    client: reqwest::Client,
    login: String,
    api_version: String,
    object: String,
    external_id_field: String,
    client_id: String,
    client_secret: String,
    refresh_token_env: String,
    session: tokio::sync::Mutex<Session>,
    pacing: std::sync::Mutex<Pacing>,
    /// What time it is (answers' retry times).
    clock: crate::clock::Clock,
}

impl SalesforceTarget {
    pub fn new(
        name: &str,
        config: &crate::config::TargetConfig,
        secrets: &crate::config::Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<SalesforceTarget> {
        use anyhow::Context;
        let crate::config::TargetSettings::Salesforce(settings) = &config.settings else {
            anyhow::bail!("targets.{name} is not a salesforce target");
        };
        let key = format!("targets.{name}");
        let env = |k: &str, v: &Option<String>| -> anyhow::Result<(String, String)> {
            let var = v.clone().with_context(|| format!("{key}.{k} is required"))?;
            Ok((secrets.secret(&format!("{key}.{k}"), &var)?, var))
        };
        let (client_id, _) = env("client_id_env", &settings.oauth.client_id_env)?;
        let (client_secret, _) = env("client_secret_env", &settings.oauth.client_secret_env)?;
        let (refresh_token, refresh_token_env) = env("refresh_token_env", &settings.oauth.refresh_token_env)?;
        let external_id_field =
            settings.external_id_field.clone().with_context(|| format!("{key}.external_id_field is required"))?;
        let client = client_for(config)?;
        Ok(SalesforceTarget {
            name: name.to_string(),
            config: config.clone(),
            client,
            login: config.url.trim_end_matches('/').to_string(),
            api_version: config.salesforce_api_version().to_string(),
            object: config.salesforce_object().to_string(),
            external_id_field,
            client_id,
            client_secret,
            refresh_token_env,
            session: tokio::sync::Mutex::new(Session { refresh_token, token: None, generation: 0, refused: None }),
            pacing: std::sync::Mutex::new(Pacing::default()),
            clock,
        })
    }

    pub fn pacing(&self) -> Pacing {
        *self.pacing.lock().expect("pacing lock")
    }

    /// Changes the pacing rule (tests and the demo shorten it).
    pub fn set_pacing(&self, pacing: Pacing) {
        *self.pacing.lock().expect("pacing lock") = pacing;
    }

    /// The current session, or a new one. `stale`: the generation of a session Salesforce just refused; it is
    /// refreshed once, however many requests saw it fail.
    async fn session(&self, stale: Option<u64>) -> Result<(Token, u64), TokenError> {
        let mut s = self.session.lock().await;
        match (stale, &s.token) {
            (None, Some(t)) => return Ok((t.clone(), s.generation)),
            (Some(g), Some(t)) if g != s.generation => return Ok((t.clone(), s.generation)),
            (Some(g), None) if g != s.generation => {
                if let Some(e) = &s.refused {
                    return Err(e.clone());
                }
            }
            _ => {}
        }
        s.generation += 1;
        match self.request_token(&s.refresh_token).await {
            Ok(token) => {
                if let Some(new) = token.refresh_token.as_ref().filter(|new| **new != s.refresh_token) {
                    // Refresh-token rotation: the old token no longer works. The new one is kept in memory only;
                    // persisting it (so a restart does not need the old, now spent, value) is not done yet.
                    tracing::info!(target = %self.name, credential = %self.refresh_token_env,
                        "Salesforce rotated the refresh token; using the new one (kept in memory only)");
                    s.refresh_token = new.clone();
                }
                tracing::info!(target = %self.name, "Salesforce session refreshed");
                s.token = Some(token.clone());
                s.refused = None;
                Ok((token, s.generation))
            }
            Err(e) => {
                tracing::warn!(target = %self.name, reason = %e.reason, "Salesforce refused to refresh the session");
                s.token = None;
                s.refused = Some(e.clone());
                Err(e)
            }
        }
    }

    async fn request_token(&self, refresh_token: &str) -> Result<Token, TokenError> {
        let url = token_url(&self.login);
        let request = self
            .client
            .post(&url)
            .form(&refresh_form(&self.client_id, &self.client_secret, refresh_token))
            .timeout(std::time::Duration::from_millis(self.config.timeout_ms));
        match send(request, &self.clock, &Unwatched).await {
            Outcome::Answered(resp) => parse_token_answer(resp.status, &resp.body),
            Outcome::Unsent(why) | Outcome::Unanswered(why) => Err(TokenError {
                class: ErrorClass::Transient,
                reason: format!("cannot reach Salesforce's login host {url}: {why}"),
            }),
            Outcome::HeldBack => Err(TokenError { class: ErrorClass::Transient, reason: HELD_BACK.into() }),
        }
    }

    fn apply(&self, report: &mut AttemptReport, v: &VendorVerdict) {
        report.verdict = v.verdict();
        report.crm_id = v.crm_id.clone();
        if v.is_delivered() {
            report.note = Some(v.reason.clone());
        }
        if let Some(until) = v.hold_until {
            report.retry_after = Some(until.min(report.started_at + self.pacing().limit_hold));
        }
        report.slow_down = v.slow_down;
        if v.credential_problem {
            report.credential_refused = Some(self.refresh_token_env.clone());
        }
    }

    /// Upserts the lead of `job`: refreshes the session first when there is none, and once more when Salesforce
    /// says it expired (`INVALID_SESSION_ID`); a second refusal holds the target for a person.
    async fn deliver_one(&self, job: &Job, cx: &Exchange<'_>) -> AttemptReport {
        let now = cx.now;
        let started = std::time::Instant::now();
        let mut report = AttemptReport::new(now);
        let fields = match mapping::record_for(&self.config.mapping, self.config.missing_data_tag(), job) {
            Ok(f) => f,
            Err(failure) => {
                report.verdict = Verdict::Failed(failure);
                return report;
            }
        };
        let external_id = job.external_id();
        let mut stale = None;
        loop {
            let (token, generation) = match self.session(stale).await {
                Ok(t) => t,
                Err(e) => {
                    self.apply(&mut report, &e.verdict());
                    break;
                }
            };
            let request = upsert_request(
                &token.instance_url,
                &self.api_version,
                &self.object,
                &self.external_id_field,
                &external_id,
                &fields,
            );
            let (method, url, body) = match request {
                Ok(r) => r,
                Err(v) => {
                    self.apply(&mut report, &v);
                    break;
                }
            };
            let request = self
                .client
                .request(method, &url)
                .bearer_auth(&token.access_token)
                .timeout(std::time::Duration::from_millis(self.config.timeout_ms))
                .json(&body);
            match send(request, &self.clock, cx.answers).await {
                Outcome::HeldBack => report.held_back = true,
                Outcome::Unsent(why) => {
                    self.apply(
                        &mut report,
                        &VendorVerdict::failed(
                            ErrorClass::Transient,
                            format!("could not connect to Salesforce: {why}"),
                        ),
                    );
                }
                Outcome::Unanswered(why) => {
                    // An upsert by external id writes the same record again: repeating it is safe.
                    self.apply(
                        &mut report,
                        &VendorVerdict::failed(
                            ErrorClass::Transient,
                            format!("no answer ({why}); safe to retry: an upsert by external id is idempotent"),
                        ),
                    );
                }
                Outcome::Answered(resp) => {
                    report.http_status = Some(resp.status);
                    report.excerpt = excerpt(&resp.body);
                    let v = parse_upsert_answer(resp.status, &resp.body, self.clock.now());
                    if v.credential_problem && stale.is_none() {
                        tracing::info!(target = %self.name, "Salesforce session expired: refreshing it once");
                        stale = Some(generation);
                        continue;
                    }
                    self.apply(&mut report, &v);
                }
            }
            break;
        }
        report.duration_ms = started.elapsed().as_millis() as i64;
        report
    }

    /// The upsert `deliver` would send for `job` now (nothing is sent). Without a session yet, the instance URL
    /// is a placeholder: a token refresh comes first and its answer names the instance.
    pub fn preview_one(&self, job: &Job) -> Result<RequestPreview, Failure> {
        let fields = mapping::record_for(&self.config.mapping, self.config.missing_data_tag(), job)?;
        let instance = self.session.try_lock().ok().and_then(|s| s.token.as_ref().map(|t| t.instance_url.clone()));
        let mut notes = Vec::new();
        if instance.is_none() {
            notes.push(format!(
                "first POST {} (grant_type=refresh_token): the answer gives the access token and the instance URL",
                token_url(&self.login)
            ));
        }
        notes.push(format!(
            "upsert by {}: 201 created, 200/204 updated, 300 several records match (a person must merge them); an \
             expired session is refreshed once and the request repeated",
            self.external_id_field
        ));
        let instance = instance.unwrap_or_else(|| "https://{instance_url}".into());
        let (method, url, body) = upsert_request(
            &instance,
            &self.api_version,
            &self.object,
            &self.external_id_field,
            &job.external_id(),
            &fields,
        )
        .map_err(|v| match v.verdict() {
            Verdict::Failed(f) => f,
            Verdict::Delivered => unreachable!("upsert_request only fails"),
        })?;
        Ok(RequestPreview {
            method: method.to_string(),
            url,
            headers: vec![
                ("authorization".into(), "Bearer ••••".into()),
                ("content-type".into(), "application/json".into()),
            ],
            body,
            notes,
        })
    }

    /// Test connection: refresh the session, then describe the object and look for the external id field.
    async fn check_connection(&self) -> ConnectionCheck {
        let fail = |message: String| ConnectionCheck { ok: false, message };
        let generation = self.session.lock().await.generation;
        let token = match self.session(Some(generation)).await {
            Ok((t, _)) => t,
            Err(e) => return fail(e.reason),
        };
        let url =
            format!("{}/services/data/{}/sobjects/{}/describe", token.instance_url, self.api_version, self.object);
        let request = self
            .client
            .get(&url)
            .bearer_auth(&token.access_token)
            .timeout(std::time::Duration::from_millis(self.config.timeout_ms));
        let resp = match send(request, &self.clock, &Unwatched).await {
            Outcome::Answered(resp) => resp,
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                return fail(format!("the session was refreshed, but {} cannot be reached: {why}", token.instance_url))
            }
            Outcome::HeldBack => return fail(HELD_BACK.into()),
        };
        let usage = resp
            .headers
            .get("sforce-limit-info")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_limit_info)
            .map(|(u, m)| format!("; {u} of {m} API requests used in the last 24 hours"));
        match resp.status {
            200 => match describe_verdict(&self.object, &self.external_id_field, &resp.body) {
                Ok(words) => ConnectionCheck {
                    ok: true,
                    message: format!("the token works; {words}{}", usage.unwrap_or_default()),
                },
                Err(words) => fail(words),
            },
            404 => fail(format!(
                "Salesforce has no object {} (or the connected user cannot see it): check object",
                self.object
            )),
            401 => fail("Salesforce refused the new session at once: reconnect Salesforce".into()),
            s => fail(format!(
                "describing {} answered HTTP {s}: {}",
                self.object,
                parse_upsert_answer(s, &resp.body, self.clock.now()).reason
            )),
        }
    }
}

#[async_trait::async_trait]
impl Connector for SalesforceTarget {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            out.push(Some(self.deliver_one(job, cx).await));
        }
        out
    }

    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure> {
        self.preview_one(job)
    }

    async fn check(&self) -> ConnectionCheck {
        self.check_connection().await
    }

    /// Near the org's daily API allowance, one request per [`Pacing::interval`] (the org's other integrations
    /// share the allowance and must keep some of it); once it is used up, one check per [`Pacing::limit_hold`].
    fn pacing_hints(&self) -> PacingHints {
        let pacing = self.pacing();
        PacingHints {
            near_limit: Some(NearLimit { above: pacing.slow_above, interval: pacing.interval }),
            used_up_recheck: pacing.limit_hold.to_std().ok(),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use serde_json::{Map, Value};

    fn target() -> SalesforceTarget {
        let text = r#"
            [sources.webform]
            route = ["sf"]
            [targets.sf]
            kind = "salesforce"
            url = "https://login.salesforce.com/"
            external_id_field = "Leadline_Id__c"
            client_id_env = "SF_ID"
            client_secret_env = "SF_SECRET"
            refresh_token_env = "SF_REFRESH"
            mapping = [{ to = "LastName", from = "/fields/full_name", transform = ["last_name"], required = true }]
        "#;
        let mut config = crate::config::Config::parse(text, std::path::Path::new("t.toml")).unwrap();
        for var in ["SF_ID", "SF_SECRET", "SF_REFRESH"] {
            config.inline_secrets.insert(var.into(), format!("secret-{var}"));
        }
        SalesforceTarget::new("sf", &config.targets["sf"], &config, crate::clock::Clock::system()).unwrap()
    }

    fn job(payload: Value) -> crate::model::Job {
        let now = Utc.with_ymd_and_hms(2025, 3, 14, 15, 0, 0).unwrap();
        crate::model::Job {
            id: 1,
            event_id: 1,
            step_index: 0,
            target: "sf".into(),
            attempts: 0,
            pending_since: now,
            lease_token: 1,
            in_doubt: false,
            trigger: "ingest".into(),
            replay_generation: 0,
            revision: 1,
            key_revision: 1,
            source: "meta".into(),
            source_ref: "123/4".into(),
            received_at: now,
            payload,
            previous: Map::new(),
            dropped: Vec::new(),
        }
    }

    #[test]
    fn the_preview_is_the_patch_with_the_token_masked_and_the_refresh_first() {
        let t = target();
        let p = t.preview_one(&job(serde_json::json!({"fields": {"full_name": "Ada Lovelace"}}))).unwrap();
        assert_eq!(p.method, "PATCH");
        assert_eq!(p.url, "https://{instance_url}/services/data/v60.0/sobjects/Lead/Leadline_Id__c/meta%3A123%2F4");
        assert_eq!(p.body, serde_json::json!({"LastName": "Lovelace"}));
        assert!(p.headers.contains(&("authorization".into(), "Bearer ••••".into())));
        assert!(!format!("{p:?}").contains("secret-"), "no credential in a preview");
        assert!(
            p.notes[0].starts_with("first POST https://login.salesforce.com/services/oauth2/token"),
            "{:?}",
            p.notes
        );
        // A lead the mapping cannot use fails before any request, naming the field.
        let f = t.preview_one(&job(serde_json::json!({"fields": {}}))).unwrap_err();
        assert_eq!((f.class, f.field.as_deref()), (ErrorClass::PermanentData, Some("LastName")));
    }
}
