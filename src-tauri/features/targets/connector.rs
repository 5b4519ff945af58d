//! What a connector is: the one trait through which the delivery worker speaks to any target.
//!
//! Each vendor (the generic `http` target, HubSpot, Salesforce, Pipedrive, the Graph API's `meta_lead` step) is a
//! folder of its own with a pure wire format (`wire.rs`: requests built and answers read, no I/O) and a connector
//! (`mod.rs`) implementing [`Connector`]. The worker holds each target's connector as `Arc<dyn Connector>` and
//! never names a vendor; [`super::connector_for`] is the one place that maps a configured kind to its connector.
//! A connector imports neither the worker nor the store: what it needs from them while it sends — the time, the
//! moment an answer arrives, a local link between a lead and its CRM record — comes through [`Exchange`].

use chrono::{DateTime, Utc};

use super::request::AnswerWatch;
use crate::model::{ContactMessage, ContactStatus, Failure, Job, Verdict};

/// How a target is spoken to.
#[async_trait::async_trait]
pub trait Connector: Send + Sync + 'static {
    /// Delivers `jobs`: one, or up to [`Connector::batch_capacity`] for a vendor that takes several leads in one
    /// request. One entry per job, in order: what its attempt came to, or `None` when it was not sent this time
    /// (it goes back to the queue without using an attempt).
    async fn deliver(&self, jobs: &[Job], cx: &Exchange<'_>) -> Vec<Option<AttemptReport>>;

    /// Most leads one request carries (HubSpot's batch upsert: 100); 1 for a vendor that takes one at a time.
    fn batch_capacity(&self) -> usize {
        1
    }

    /// The exact request [`Connector::deliver`] would make for `job` now (a dry run: nothing is sent), or the
    /// failure that would keep it from being sent.
    fn preview(&self, job: &Job) -> Result<RequestPreview, Failure>;

    /// Test connection: one harmless authenticated request, in plain words.
    async fn check(&self) -> ConnectionCheck;

    /// Until when nothing may be sent to this target, whatever it answered itself: a limit shared beyond it (Graph
    /// throttles the app and the page, for reconciliation and the `meta_lead` step alike).
    fn held_until(&self, _now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        None
    }

    /// How this vendor wants to be paced beyond what its answers say (see [`PacingHints`]).
    fn pacing_hints(&self) -> PacingHints {
        PacingHints::default()
    }

    /// The vendor's own type, for tests and the demo that reach into one (`as_any().downcast_ref()`).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// What a vendor asks of the pacer that its answers do not say.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PacingHints {
    /// Once more than this share of a daily allowance is used (`0.9`), send at most one request per `interval`
    /// instead of spreading what is left over the day: Salesforce's org allowance is shared with the org's other
    /// integrations, which must keep some of it.
    pub near_limit: Option<NearLimit>,
    /// How long to wait, once a daily allowance is used up, before one request checks whether it renewed (the
    /// pacer's own default is 15 minutes; Salesforce's org allowance is a rolling 24-hour count, checked hourly).
    pub used_up_recheck: Option<std::time::Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NearLimit {
    pub above: f64,
    pub interval: std::time::Duration,
}

/// What a connector may ask of the rest of Leadline while it delivers.
pub struct Exchange<'a> {
    /// When the attempt started.
    pub now: DateTime<Utc>,
    /// Hears every answer's status and headers the moment they arrive (the worker's pacer).
    pub answers: &'a dyn AnswerWatch,
    /// The local table of leads and their CRM records (search-then-create).
    pub links: &'a dyn LinkBook,
    /// What first-contact steps sent, and the numbers that opted out.
    pub contacts: &'a dyn ContactBook,
}

/// The record of first contacts (`contact_message`) and of numbers that opted out, for the `whatsapp` and `sms`
/// connectors: each write is committed before it returns.
#[async_trait::async_trait]
pub trait ContactBook: Send + Sync {
    /// The message of step `step_key`, if one was sent or tried.
    async fn message(&self, step_key: &str) -> anyhow::Result<Option<ContactMessage>>;
    /// Records that `message` is leaving (status `sending`), before its request is made: a crash or a lost
    /// answer then leaves a message in doubt, never one nobody knows of.
    async fn sending(&self, message: &ContactMessage) -> anyhow::Result<()>;
    /// Records what became of the send of `step_key`: accepted (with the provider's id), or refused.
    async fn answered(
        &self,
        step_key: &str,
        status: ContactStatus,
        provider_id: Option<&str>,
        error_code: Option<&str>,
        at: DateTime<Utc>,
    ) -> anyhow::Result<()>;
    /// Whether `recipient` (E.164) opted out of messages.
    async fn opted_out(&self, recipient: &str) -> anyhow::Result<bool>;
    /// Marks `recipient` opted out (the provider said it unsubscribed): no step texts it again.
    async fn opt_out(&self, recipient: &str, reason: &str, at: DateTime<Utc>) -> anyhow::Result<()>;
}

/// The local table of which CRM record a lead became, for vendors that cannot upsert by Leadline's id
/// (search-then-create): read before a search, written before a second write that depends on the first.
#[async_trait::async_trait]
pub trait LinkBook: Send + Sync {
    /// The CRM record already linked to `external_id` in this target, if any.
    async fn linked(&self, external_id: &str) -> anyhow::Result<Option<String>>;
    /// Remembers — committed before it returns — that `external_id` is the CRM record `crm_id`, and returns the
    /// record it is linked to from now on: `crm_id`, or the one another writer linked first.
    async fn remember(&self, external_id: &str, crm_id: &str) -> anyhow::Result<String>;
}

/// The result of one delivery attempt, ready for the worker's decision.
#[derive(Debug, Clone)]
pub struct AttemptReport {
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub http_status: Option<u16>,
    pub excerpt: Option<String>,
    pub verdict: Verdict,
    /// The vendor said when to come back (`Retry-After`, a quota's reset): no request to the target before then.
    pub retry_after: Option<DateTime<Utc>>,
    /// The vendor refused for load without saying for how long or at what rate ("too many", Salesforce's
    /// concurrent-request limit): the target's pace is lowered instead of holding it for a fixed time.
    pub slow_down: bool,
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
    /// The target refused its own setup, not this lead (an unknown template, a region not enabled — these
    /// words): hold the whole target and alert, instead of dead-lettering every lead the same way.
    pub setup_refused: Option<String>,
    /// The target's quota is used up until `retry_after` (HubSpot's daily limit): the lead waits for it without
    /// using an attempt or its time budget — the quota is not the lead's failure.
    pub quota_wait: bool,
    /// Nothing was sent and nothing failed: the step is due again at this time, without using an attempt (a
    /// first contact held by quiet hours, or in doubt and waiting for its receipt). `note` says why; `in_doubt`
    /// is kept.
    pub not_before: Option<DateTime<Utc>>,
    /// Nothing was sent: the lead is too old for this time-sensitive step, which runs its `fallback` instead (a
    /// first contact decides this itself, since quiet hours that held it do not age it).
    pub run_fallback: bool,
    /// Not sent after all: another request's answer held the target while this one was prepared
    /// ([`super::request::Outcome::HeldBack`]), before anything of this attempt could have changed the CRM. The
    /// lead goes back to the queue without using an attempt, like one never sent.
    pub held_back: bool,
    /// Not sent, and never will be: the step ends here as reported, with these words ("reported: too old for
    /// Meta's 7-day window …"). A final state of its own — neither a dead letter nor a retry.
    pub reported: Option<String>,
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
            slow_down: false,
            crm_id: None,
            link: None,
            note: None,
            in_doubt: false,
            payload: None,
            credential_refused: None,
            setup_refused: None,
            quota_wait: false,
            not_before: None,
            run_fallback: false,
            held_back: false,
            reported: None,
        }
    }

    /// A step that ends without sending: `why` is what the lead's story shows (see [`AttemptReport::reported`]).
    pub fn reported(now: DateTime<Utc>, why: String) -> AttemptReport {
        AttemptReport { note: Some(why.clone()), reported: Some(why), ..AttemptReport::new(now) }
    }

    /// A report of a lead that failed before any request (its data, the mapping): `failure` as the verdict.
    pub fn failed(now: DateTime<Utc>, failure: Failure) -> AttemptReport {
        AttemptReport { verdict: Verdict::Failed(failure), ..AttemptReport::new(now) }
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

/// A [`LinkBook`] with no links, for a connector used outside the worker (previews, the benchmark's sink).
pub struct NoLinks;

#[async_trait::async_trait]
impl LinkBook for NoLinks {
    async fn linked(&self, _external_id: &str) -> anyhow::Result<Option<String>> {
        Ok(None)
    }
    async fn remember(&self, _external_id: &str, _crm_id: &str) -> anyhow::Result<String> {
        anyhow::bail!("no link table here")
    }
}

/// A [`ContactBook`] that knows no message and no opt-out and keeps nothing, for a connector used outside the
/// worker (previews, connection checks).
pub struct NoContacts;

#[async_trait::async_trait]
impl ContactBook for NoContacts {
    async fn message(&self, _step_key: &str) -> anyhow::Result<Option<ContactMessage>> {
        Ok(None)
    }
    async fn sending(&self, _message: &ContactMessage) -> anyhow::Result<()> {
        anyhow::bail!("no contact record here")
    }
    async fn answered(
        &self,
        _step_key: &str,
        _status: ContactStatus,
        _provider_id: Option<&str>,
        _error_code: Option<&str>,
        _at: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        anyhow::bail!("no contact record here")
    }
    async fn opted_out(&self, _recipient: &str) -> anyhow::Result<bool> {
        Ok(false)
    }
    async fn opt_out(&self, _recipient: &str, _reason: &str, _at: DateTime<Utc>) -> anyhow::Result<()> {
        anyhow::bail!("no contact record here")
    }
}
