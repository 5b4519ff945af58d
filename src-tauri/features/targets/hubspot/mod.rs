//! HubSpot CRM v3 (`kind = "hubspot"`): records upserted in batches by a unique property. [`wire`] builds the
//! requests and reads the answers; this module sends them.

pub mod check;
pub mod wire;

use chrono_tz::Tz;
use serde_json::{Map, Value};

use super::connector::{AttemptReport, ConnectionCheck, Connector, Exchange, RequestPreview};
use super::request::{excerpt, masked_headers, send, Outcome, Unwatched, HELD_BACK};
use super::vendor::{encode_component, json_id, VendorVerdict};
use super::{mapping, HttpTarget};
use crate::model::{ErrorClass, Failure, Job, Verdict};
use wire::{batch_upsert_body, check_message, first_of_each, item_excerpt, parse_batch_answer, DEFAULT_ACCOUNT_TZ};
pub use wire::{Clock, MAX_BATCH};

/// One batch input: the unique value and the properties.
type Input = (String, Map<String, Value>);

/// A `kind = "hubspot"` target: leads upserted in batches of up to [`MAX_BATCH`] by `id_property`.
pub struct HubspotTarget {
    /// The HTTP client and the `Authorization` header (built like any target's).
    http: HttpTarget,
    id_property: String,
    object: String,
    /// The variable holding the token, named when HubSpot refuses it.
    token_env: String,
    account_tz: Tz,
}

impl HubspotTarget {
    pub fn new(
        name: &str,
        config: &crate::config::TargetConfig,
        secrets: &crate::config::Config,
        clock: crate::clock::Clock,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        let crate::config::TargetSettings::Hubspot(settings) = &config.settings else {
            anyhow::bail!("targets.{name} is not a hubspot target");
        };
        let http = HttpTarget::new(name, config, secrets, clock)?;
        let id_property =
            settings.id_property.clone().with_context(|| format!("targets.{name}.id_property is required"))?;
        let token_env = match &config.auth {
            Some(crate::config::AuthConfig::BearerEnv(var)) => var.clone(),
            _ => anyhow::bail!("targets.{name}.auth: {{ bearer_env = \"VAR\" }} is required for kind = \"hubspot\""),
        };
        Ok(HubspotTarget {
            http,
            id_property,
            object: config.hubspot_object().to_string(),
            token_env,
            account_tz: DEFAULT_ACCOUNT_TZ,
        })
    }

    pub fn name(&self) -> &str {
        &self.http.name
    }

    fn base(&self) -> &str {
        self.http.config.url.trim_end_matches('/')
    }

    /// `{url}/crm/v3/objects/{object}/batch/upsert`.
    pub fn batch_url(&self) -> String {
        format!("{}/crm/v3/objects/{}/batch/upsert", self.base(), self.object)
    }

    /// The batch input for `job`: its unique value and its properties, or the failure that keeps it out of the
    /// batch (the mapping cannot use the lead). The unique value is the mapped record's value for `id_property`,
    /// else the lead's external id; it is always among the properties, so HubSpot's answer echoes it and the
    /// result can be tied back to the lead.
    pub fn input(&self, job: &Job) -> Result<(String, Map<String, Value>), Failure> {
        let mut properties = mapping::record_for(&self.http.config.mapping, self.http.config.missing_data_tag(), job)?;
        let id = match properties.get(&self.id_property) {
            None => job.external_id(),
            Some(v) => json_id(v).ok_or_else(|| Failure {
                class: ErrorClass::PermanentData,
                reason: format!(
                    "not sent: the unique property {} must be text or a number to upsert by",
                    self.id_property
                ),
                field: Some(self.id_property.clone()),
            })?,
        };
        properties.entry(self.id_property.clone()).or_insert_with(|| Value::String(id.clone()));
        Ok((id, properties))
    }

    /// Upserts `jobs` in one request. One report per job, in order; `None` for a job not sent this time because
    /// an earlier job of the batch has the same unique value (HubSpot refuses duplicate ids in one batch): it goes
    /// back to the queue without using an attempt. A job the mapping cannot use is reported without being sent.
    pub async fn deliver_batch(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        let now = cx.now;
        let started = std::time::Instant::now();
        let mut out: Vec<Option<AttemptReport>> = vec![None; jobs.len()];
        let mut inputs: Vec<Input> = Vec::new();
        let mut slots: Vec<usize> = Vec::new();
        let prepared: Vec<Result<Input, Failure>> = jobs.iter().map(|j| self.input(j)).collect();
        let ids: Vec<Option<&str>> = prepared.iter().map(|p| p.as_ref().ok().map(|(id, _)| id.as_str())).collect();
        let send_now = first_of_each(&ids);
        for (i, p) in prepared.into_iter().enumerate() {
            match p {
                Err(failure) => {
                    let mut r = AttemptReport::new(now);
                    r.verdict = Verdict::Failed(failure);
                    out[i] = Some(r);
                }
                Ok(input) if send_now[i] => {
                    inputs.push(input);
                    slots.push(i);
                }
                Ok(_) => {}
            }
        }
        if inputs.is_empty() {
            return out;
        }
        let input_ids: Vec<String> = inputs.iter().map(|(id, _)| id.clone()).collect();
        let request = self
            .http
            .client
            .post(self.batch_url())
            .headers(self.http.headers.clone())
            .timeout(std::time::Duration::from_millis(self.http.config.timeout_ms))
            .json(&batch_upsert_body(&self.id_property, &inputs));
        let sent = send(request, &self.http.clock, cx.answers).await;
        let duration_ms = started.elapsed().as_millis() as i64;
        let failed_all = |reason: String| {
            let mut r = AttemptReport::new(now);
            r.verdict = Verdict::Failed(Failure { class: ErrorClass::Transient, reason, field: None });
            vec![r; input_ids.len()]
        };
        let reports = match sent {
            Outcome::HeldBack => {
                let mut r = AttemptReport::new(now);
                r.held_back = true;
                vec![r; input_ids.len()]
            }
            Outcome::Unsent(why) => failed_all(format!("could not connect to HubSpot: {why}")),
            Outcome::Unanswered(why) => failed_all(format!(
                "no answer from HubSpot ({why}); safe to retry: the upsert by {} is idempotent",
                self.id_property
            )),
            Outcome::Answered(resp) => {
                let clock = Clock { now: self.http.clock.now(), account_tz: self.account_tz };
                let whole = !matches!(resp.status, 200 | 201 | 207);
                parse_batch_answer(resp.status, &resp.body, &resp.headers, &self.id_property, &input_ids, &clock)
                    .into_iter()
                    .map(|item| {
                        let mut r = AttemptReport::new(now);
                        r.http_status = Some(resp.status);
                        // A whole-request error is kept as HubSpot said it; a batch answer holds every lead's
                        // data, so each lead keeps only its own part, in Leadline's (masked) words.
                        r.excerpt = if whole { excerpt(&resp.body) } else { Some(item_excerpt(&item.verdict)) };
                        self.apply(&item.verdict, &mut r);
                        r
                    })
                    .collect()
            }
        };
        for (slot, mut r) in slots.into_iter().zip(reports) {
            r.duration_ms = duration_ms;
            out[slot] = Some(r);
        }
        out
    }

    /// One lead's verdict into the worker's report.
    fn apply(&self, v: &VendorVerdict, r: &mut AttemptReport) {
        r.verdict = v.verdict();
        r.crm_id = v.crm_id.clone();
        if v.is_delivered() {
            r.note = Some(v.reason.clone());
        }
        r.retry_after = v.hold_until;
        r.slow_down = v.slow_down;
        if v.credential_problem {
            r.credential_refused = Some(self.token_env.clone());
        }
        // The one rate limit that alerts is the daily one: its hold lasts until the account's midnight.
        r.quota_wait = v.class == Some(ErrorClass::RateLimited) && v.alert && v.hold_until.is_some();
    }

    /// The request `deliver_batch` would make for `job` alone (nothing is sent; the token is masked).
    pub fn preview_one(&self, job: &Job) -> Result<RequestPreview, Failure> {
        let input = self.input(job)?;
        let mut headers = masked_headers(&self.http.headers);
        headers.push(("content-type".into(), "application/json".into()));
        Ok(RequestPreview {
            method: "POST".into(),
            url: self.batch_url(),
            headers,
            body: batch_upsert_body(&self.id_property, &[input]),
            notes: vec![format!(
                "sent together with other due leads, up to {MAX_BATCH} a request; HubSpot updates the {} record with \
                 this {} or creates it",
                self.object, self.id_property
            )],
        })
    }

    /// Test connection: `GET /crm/v3/properties/{object}/{id_property}`, a harmless authenticated read that also
    /// shows whether the unique property exists.
    async fn check_connection(&self) -> ConnectionCheck {
        let url = format!("{}/crm/v3/properties/{}/{}", self.base(), self.object, encode_component(&self.id_property));
        let request = self
            .http
            .client
            .get(&url)
            .headers(self.http.headers.clone())
            .timeout(std::time::Duration::from_millis(self.http.config.timeout_ms));
        let answer = match send(request, &self.http.clock, &Unwatched).await {
            Outcome::Unsent(why) | Outcome::Unanswered(why) => {
                return ConnectionCheck { ok: false, message: format!("cannot reach HubSpot at {url}: {why}") }
            }
            Outcome::HeldBack => return ConnectionCheck { ok: false, message: HELD_BACK.into() },
            Outcome::Answered(resp) => resp,
        };
        let clock = Clock { now: self.http.clock.now(), account_tz: self.account_tz };
        check_message(
            answer.status,
            &answer.body,
            &answer.headers,
            &self.object,
            &self.id_property,
            &self.token_env,
            &clock,
        )
    }
}

#[async_trait::async_trait]
impl Connector for HubspotTarget {
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>> {
        self.deliver_batch(jobs, cx).await
    }

    fn batch_capacity(&self) -> usize {
        MAX_BATCH
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use ErrorClass::PermanentData;

    fn clock() -> Clock {
        Clock::new(chrono::DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z").unwrap().to_utc())
    }

    fn target(id_property: &str) -> HubspotTarget {
        let text = format!(
            r#"
            [targets.hs]
            kind = "hubspot"
            url = "https://api.hubapi.com/"
            auth = {{ bearer_env = "HS_TOKEN" }}
            id_property = "{id_property}"
            [[targets.hs.mapping]]
            to = "email"
            from = "/fields/email"
            transform = ["trim", "lowercase"]
            required = true
            [[targets.hs.mapping]]
            to = "firstname"
            from = "/fields/full_name"
            transform = ["first_name"]
            "#
        );
        let mut config = crate::config::Config::parse(&text, std::path::Path::new("t.toml")).unwrap();
        config.inline_secrets.insert("HS_TOKEN".into(), "pat-na1-secret".into());
        HubspotTarget::new("hs", &config.targets["hs"], &config, crate::clock::Clock::system()).unwrap()
    }

    fn job(fields: Value) -> Job {
        Job {
            id: 1,
            event_id: 1,
            step_index: 0,
            target: "hs".into(),
            attempts: 0,
            pending_since: clock().now,
            lease_token: 1,
            in_doubt: false,
            trigger: "ingest".into(),
            replay_generation: 0,
            revision: 1,
            key_revision: 1,
            source: "meta".into(),
            source_ref: "700".into(),
            received_at: clock().now,
            payload: json!({ "fields": fields }),
            previous: Map::new(),
            dropped: Vec::new(),
        }
    }

    #[test]
    fn inputs_are_keyed_by_the_mapped_unique_value_or_the_external_id() {
        let lead = job(json!({"email": " Ada@Example.com ", "full_name": "Ada Lovelace"}));
        let (id, props) = target("email").input(&lead).unwrap();
        assert_eq!(id, "ada@example.com");
        assert_eq!(props, props_of(&[("email", "ada@example.com"), ("firstname", "Ada")]));

        // A custom unique property the mapping does not set: the external id, also written as a property so that
        // HubSpot's answer echoes it.
        let (id, props) = target("leadline_id").input(&lead).unwrap();
        assert_eq!(id, "meta:700");
        assert_eq!(props["leadline_id"], "meta:700");

        // A lead the mapping cannot use is never part of a batch.
        let e = target("email").input(&job(json!({"full_name": "Ada"}))).unwrap_err();
        assert_eq!(e.class, PermanentData);
        assert_eq!(e.field.as_deref(), Some("email"));
    }

    fn props_of(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect()
    }

    #[test]
    fn the_preview_is_the_single_lead_batch_with_the_token_masked() {
        let t = target("leadline_id");
        let p = t.preview_one(&job(json!({"email": "ada@example.com"}))).unwrap();
        assert_eq!(p.method, "POST");
        assert_eq!(p.url, "https://api.hubapi.com/crm/v3/objects/contacts/batch/upsert");
        assert!(p.headers.contains(&("authorization".into(), "••••".into())), "{:?}", p.headers);
        assert!(!format!("{p:?}").contains("pat-na1-secret"));
        assert_eq!(
            p.body,
            json!({"inputs": [{"id": "meta:700", "idProperty": "leadline_id",
                               "properties": {"email": "ada@example.com", "leadline_id": "meta:700"}}]})
        );
    }
}
