//! `[targets.NAME]`: where leads go — what all targets share, each kind's settings in its own variant of
//! [`TargetSettings`] (read from the file's flat table through `TargetFile`), first contact, missing data,
//! authentication, backoff, the breaker and classification.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::model::ErrorClass;

/// The Salesforce REST API version used when a `salesforce` target does not set `api_version`.
pub const SALESFORCE_API_VERSION: &str = "v60.0";

fn default_graph_version() -> String {
    "v21.0".into()
}

#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// POST with an `Idempotency-Key` header derived from the job; the CRM replays its stored answer.
    IdempotencyKey,
    /// PUT/PATCH to a URL containing the external id: writing twice is harmless.
    Upsert,
    /// GET `search_url` for the external id; create only when nothing is found; remember the link locally.
    SearchThenCreate,
    /// Plain POST with no protection: an ambiguous outcome is parked in the DLQ, never retried blindly.
    None,
}

/// What a target speaks.
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// Any JSON endpoint; it receives Leadline's envelope (docs/configuration.md, "What a target receives").
    #[default]
    Http,
    /// Not a CRM: the first step of a Meta source's route, which fetches the lead's answers from the Graph API
    /// (`GET /{leadgen_id}`) and stores them with the lead before any CRM sees it.
    MetaLead,
    /// Pipedrive: find or create the person (exact match on `person_field_key`), then create the lead
    /// (`targets::pipedrive`); always search-then-create with the local link table.
    Pipedrive,
    /// Salesforce REST API: upsert by an external id field, OAuth 2.0 refresh-token flow
    /// (`targets::salesforce`).
    Salesforce,
    /// HubSpot CRM v3: records upserted in batches by a unique property (`POST /crm/v3/objects/{object}/batch/upsert`).
    Hubspot,
    /// A first contact by WhatsApp: an approved template sent through the WhatsApp Business Cloud API
    /// (`POST /{version}/{phone-number-id}/messages`, `targets::whatsapp`); settings under `whatsapp`.
    Whatsapp,
    /// A first contact by SMS through Twilio's Messages API (`targets::sms`); settings under `sms`.
    Sms,
    /// Meta's Conversions API for CRM leads: a lead's stages go back to Meta as events
    /// (`POST /{api_version}/{dataset_id}/events`, `targets::meta_conversions`).
    MetaConversions,
    /// Google Ads click conversions: a lead's stages go back to Google as conversions of its click
    /// (`POST /{api_version}/customers/{customer_id}:uploadClickConversions`, `targets::google_ads_conversions`).
    GoogleAdsConversions,
}

impl TargetKind {
    /// The kind as the file writes it (`google_ads_conversions`).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Http => "http",
            TargetKind::MetaLead => "meta_lead",
            TargetKind::Pipedrive => "pipedrive",
            TargetKind::Salesforce => "salesforce",
            TargetKind::Hubspot => "hubspot",
            TargetKind::Whatsapp => "whatsapp",
            TargetKind::Sms => "sms",
            TargetKind::MetaConversions => "meta_conversions",
            TargetKind::GoogleAdsConversions => "google_ads_conversions",
        }
    }

    /// A first-contact step: a message to the lead, which no provider de-duplicates, so Leadline never sends it
    /// twice (`targets::contact`).
    pub fn is_first_contact(self) -> bool {
        matches!(self, TargetKind::Whatsapp | TargetKind::Sms)
    }
}

/// One target: what every target has, and its kind's own settings ([`TargetSettings`]). Read from the file's flat
/// table (`kind = "salesforce"` beside the keys of that kind), which stays as it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "TargetFile")]
pub struct TargetConfig {
    /// The kind and the settings only it has.
    pub settings: TargetSettings,
    /// Request URL; `{external_id}` is replaced by the job's external id (required for `upsert`).
    /// `meta_lead`: the Graph API address (`https://graph.facebook.com`).
    pub url: String,
    /// HTTP method; default POST (PUT for `upsert`).
    pub method: Option<String>,
    /// Required for `http`; every other kind has its own (`TargetConfig::strategy`).
    pub strategy: Option<Strategy>,
    /// The vendor's API version, the first path segment of its requests (Graph, Salesforce, Google Ads); for
    /// Salesforce see [`TargetConfig::salesforce_api_version`].
    pub api_version: String,
    /// How a lead becomes the CRM's record. An `http` target with a mapping receives the mapped record as its
    /// body instead of the envelope.
    pub mapping: Vec<crate::model::mapping::FieldRule>,
    /// A GET URL with `{external_id}` for `search_then_create` and ambiguous look-ups.
    pub search_url: Option<String>,
    /// The web address of a record in the CRM's own screens, with `{crm_id}`.
    pub record_url: Option<String>,
    /// JSON pointer to the CRM's record id in a create/upsert/search answer.
    pub id_pointer: String,
    pub headers: BTreeMap<String, String>,
    pub auth: Option<AuthConfig>,
    pub timeout_ms: u64,
    /// Jobs delivered to this target at the same time (per worker process).
    pub concurrency: u32,
    /// The target's declared request budget (`"190/10s"`).
    pub rate: Option<crate::model::Rate>,
    pub backoff: BackoffConfig,
    pub breaker: BreakerConfig,
    pub classify: ClassifyConfig,
    /// A replayed lead older than this runs `fallback` instead.
    pub max_lead_age_minutes: Option<u64>,
    pub fallback: Option<String>,
    pub auto_replay: bool,
    pub on_failure: Option<String>,
    /// First-contact steps (`whatsapp`, `sms`): the wait for an unconfirmed send, quiet hours, the time zone.
    pub first_contact: FirstContactConfig,
    /// Opt-in data fallback: fields a lead may be written without.
    pub missing_data: Option<MissingDataConfig>,
    /// Keys the file sets that this kind does not take: `Config::validate` refuses the first, naming it.
    pub(crate) stray: Vec<&'static str>,
}

/// A target's kind with the settings only that kind has (the keys of the file's table that name a kind in their
/// documentation). Every connector reads its own variant; `TargetConfig` holds what all kinds share. A setting
/// left out is `None` here: the kind's own check (`features::targets::check`) says which are required.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSettings {
    /// Any JSON endpoint: everything it has is shared.
    Http,
    MetaLead(MetaLeadSettings),
    Pipedrive(PipedriveSettings),
    Salesforce(SalesforceSettings),
    Hubspot(HubspotSettings),
    Whatsapp(WhatsappSettings),
    /// The file's `sms` table.
    Sms(Option<SmsConfig>),
    MetaConversions(MetaConversionsSettings),
    GoogleAdsConversions(GoogleAdsSettings),
}

/// `kind = "meta_lead"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaLeadSettings {
    /// Variable holding a page access token with the `leads_retrieval` permission.
    pub access_token_env: Option<String>,
}

/// `kind = "whatsapp"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WhatsappSettings {
    /// Variable holding the system user's access token.
    pub access_token_env: Option<String>,
    /// The file's `whatsapp` table: the sender's phone number id, the template and its parameters.
    pub message: Option<WhatsappConfig>,
}

/// `kind = "pipedrive"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PipedriveSettings {
    /// Variable holding the API token (sent in the `x-api-token` header).
    pub api_token_env: Option<String>,
    /// Key of the custom person field holding Leadline's external id (the exact-match search).
    pub person_field_key: Option<String>,
}

/// The variables of an OAuth 2.0 refresh-token flow (Salesforce, Google Ads): the app's client id and secret and
/// the refresh token of the user Leadline acts as.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthVars {
    pub client_id_env: Option<String>,
    pub client_secret_env: Option<String>,
    pub refresh_token_env: Option<String>,
}

/// `kind = "salesforce"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SalesforceSettings {
    /// The sObject leads are upserted into (default `Lead`, [`TargetConfig::salesforce_object`]).
    pub object: Option<String>,
    /// The external id field the lead's external id is written to and matched by (required).
    pub external_id_field: Option<String>,
    pub oauth: OAuthVars,
}

/// `kind = "hubspot"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HubspotSettings {
    /// The CRM object type written (default `contacts`, [`TargetConfig::hubspot_object`]).
    pub object: Option<String>,
    /// The unique property records are upserted by (`email`, or a custom unique property such as `leadline_id`).
    pub id_property: Option<String>,
}

/// What both conversion kinds have: the CRM's stage names and what the platform gets for each, and its window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConversionSettings {
    /// Stage → Meta's `event_name` or Google's conversion action. A stage not listed is not sent.
    pub stages: BTreeMap<String, String>,
    /// The platform's window in days; an older event is not sent, the step ends as reported.
    pub window_days: Option<u32>,
}

/// `kind = "meta_conversions"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaConversionsSettings {
    /// The dataset (pixel) id the events go to.
    pub dataset_id: Option<String>,
    /// Variable holding the access token.
    pub access_token_env: Option<String>,
    /// The CRM's name, sent as `custom_data.lead_event_source`.
    pub lead_event_source: Option<String>,
    pub conversions: ConversionSettings,
}

/// `kind = "google_ads_conversions"`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GoogleAdsSettings {
    /// The Google Ads account (customer id, digits only) the conversions belong to.
    pub customer_id: Option<String>,
    /// The manager account reached through (`login-customer-id` header), if any.
    pub login_customer_id: Option<String>,
    /// Variable holding a developer token, sent only when set.
    pub developer_token_env: Option<String>,
    /// The OAuth 2.0 token endpoint (default `https://oauth2.googleapis.com/token`).
    pub token_url: Option<String>,
    /// ISO 4217 currency of conversion values (default `EUR`).
    pub currency: Option<String>,
    pub oauth: OAuthVars,
    pub conversions: ConversionSettings,
}

impl TargetSettings {
    /// The kind's own keys that name a credential's variable (`access_token_env`, `api_token_env`, the OAuth
    /// variables), with the variable: those the settings page can store a value for.
    pub fn credential_vars(&self) -> Vec<(&'static str, &str)> {
        fn oauth(o: &OAuthVars) -> [(&'static str, Option<&str>); 3] {
            [
                ("client_id_env", o.client_id_env.as_deref()),
                ("client_secret_env", o.client_secret_env.as_deref()),
                ("refresh_token_env", o.refresh_token_env.as_deref()),
            ]
        }
        let set: Vec<(&'static str, Option<&str>)> = match self {
            TargetSettings::MetaLead(m) => vec![("access_token_env", m.access_token_env.as_deref())],
            TargetSettings::Whatsapp(w) => vec![("access_token_env", w.access_token_env.as_deref())],
            TargetSettings::MetaConversions(m) => vec![("access_token_env", m.access_token_env.as_deref())],
            TargetSettings::Pipedrive(p) => vec![("api_token_env", p.api_token_env.as_deref())],
            TargetSettings::Salesforce(s) => oauth(&s.oauth).to_vec(),
            TargetSettings::GoogleAdsConversions(g) => oauth(&g.oauth).to_vec(),
            TargetSettings::Http | TargetSettings::Hubspot(_) | TargetSettings::Sms(_) => Vec::new(),
        };
        set.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect()
    }

    pub fn kind(&self) -> TargetKind {
        match self {
            TargetSettings::Http => TargetKind::Http,
            TargetSettings::MetaLead(_) => TargetKind::MetaLead,
            TargetSettings::Pipedrive(_) => TargetKind::Pipedrive,
            TargetSettings::Salesforce(_) => TargetKind::Salesforce,
            TargetSettings::Hubspot(_) => TargetKind::Hubspot,
            TargetSettings::Whatsapp(_) => TargetKind::Whatsapp,
            TargetSettings::Sms(_) => TargetKind::Sms,
            TargetSettings::MetaConversions(_) => TargetKind::MetaConversions,
            TargetSettings::GoogleAdsConversions(_) => TargetKind::GoogleAdsConversions,
        }
    }
}

impl From<TargetFile> for TargetConfig {
    /// Moves each key of the kind into its settings; a kind-specific key left over belongs to another kind and
    /// is listed in `stray`.
    fn from(mut f: TargetFile) -> TargetConfig {
        let settings = match f.kind {
            TargetKind::Http => TargetSettings::Http,
            TargetKind::MetaLead => {
                TargetSettings::MetaLead(MetaLeadSettings { access_token_env: f.access_token_env.take() })
            }
            TargetKind::Pipedrive => TargetSettings::Pipedrive(PipedriveSettings {
                api_token_env: f.api_token_env.take(),
                person_field_key: f.person_field_key.take(),
            }),
            TargetKind::Salesforce => TargetSettings::Salesforce(SalesforceSettings {
                object: f.object.take(),
                external_id_field: f.external_id_field.take(),
                oauth: f.take_oauth(),
            }),
            TargetKind::Hubspot => {
                TargetSettings::Hubspot(HubspotSettings { object: f.object.take(), id_property: f.id_property.take() })
            }
            TargetKind::Whatsapp => TargetSettings::Whatsapp(WhatsappSettings {
                access_token_env: f.access_token_env.take(),
                message: f.whatsapp.take(),
            }),
            TargetKind::Sms => TargetSettings::Sms(f.sms.take()),
            TargetKind::MetaConversions => TargetSettings::MetaConversions(MetaConversionsSettings {
                dataset_id: f.dataset_id.take(),
                access_token_env: f.access_token_env.take(),
                lead_event_source: f.lead_event_source.take(),
                conversions: f.take_conversions(),
            }),
            TargetKind::GoogleAdsConversions => TargetSettings::GoogleAdsConversions(GoogleAdsSettings {
                customer_id: f.customer_id.take(),
                login_customer_id: f.login_customer_id.take(),
                developer_token_env: f.developer_token_env.take(),
                token_url: f.token_url.take(),
                currency: f.currency.take(),
                oauth: f.take_oauth(),
                conversions: f.take_conversions(),
            }),
        };
        let stray = [
            ("access_token_env", f.access_token_env.is_some()),
            ("api_token_env", f.api_token_env.is_some()),
            ("person_field_key", f.person_field_key.is_some()),
            ("object", f.object.is_some()),
            ("external_id_field", f.external_id_field.is_some()),
            ("client_id_env", f.client_id_env.is_some()),
            ("client_secret_env", f.client_secret_env.is_some()),
            ("refresh_token_env", f.refresh_token_env.is_some()),
            ("id_property", f.id_property.is_some()),
            ("whatsapp", f.whatsapp.is_some()),
            ("sms", f.sms.is_some()),
            ("stages", !f.stages.is_empty()),
            ("window_days", f.window_days.is_some()),
            ("dataset_id", f.dataset_id.is_some()),
            ("lead_event_source", f.lead_event_source.is_some()),
            ("customer_id", f.customer_id.is_some()),
            ("login_customer_id", f.login_customer_id.is_some()),
            ("developer_token_env", f.developer_token_env.is_some()),
            ("token_url", f.token_url.is_some()),
            ("currency", f.currency.is_some()),
        ]
        .into_iter()
        .filter(|&(_, left)| left)
        .map(|(key, _)| key)
        .collect();
        TargetConfig {
            settings,
            url: f.url,
            method: f.method,
            strategy: f.strategy,
            api_version: f.api_version,
            mapping: f.mapping,
            search_url: f.search_url,
            record_url: f.record_url,
            id_pointer: f.id_pointer,
            headers: f.headers,
            auth: f.auth,
            timeout_ms: f.timeout_ms,
            concurrency: f.concurrency,
            rate: f.rate,
            backoff: f.backoff,
            breaker: f.breaker,
            classify: f.classify,
            max_lead_age_minutes: f.max_lead_age_minutes,
            fallback: f.fallback,
            auto_replay: f.auto_replay,
            on_failure: f.on_failure,
            first_contact: f.first_contact,
            missing_data: f.missing_data,
            stray,
        }
    }
}

/// A target as the file writes it: every kind's keys side by side (the TOML format). Read into this, then into
/// [`TargetConfig`], whose [`TargetSettings`] keeps only the keys of its kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFile {
    #[serde(default)]
    kind: TargetKind,
    /// Request URL; `{external_id}` is replaced by the job's external id (required for `upsert`).
    /// `meta_lead`: the Graph API address (`https://graph.facebook.com`).
    url: String,
    /// HTTP method; default POST (PUT for `upsert`).
    method: Option<String>,
    /// Required for `http`; a `meta_lead` step only reads, which is always safe to repeat.
    strategy: Option<Strategy>,
    /// `meta_lead`: the Graph API version, the first path segment of every request. `salesforce`: the REST API
    /// version (`v60.0`); left out, it is [`SALESFORCE_API_VERSION`] (see [`TargetConfig::salesforce_api_version`]).
    #[serde(default = "default_graph_version")]
    api_version: String,
    /// `meta_lead`: environment variable holding a page access token with the `leads_retrieval` permission.
    access_token_env: Option<String>,
    /// `pipedrive`: environment variable holding the API token (sent in the `x-api-token` header).
    api_token_env: Option<String>,
    /// `pipedrive`: key of the custom person field holding Leadline's external id (the exact-match search).
    person_field_key: Option<String>,
    /// `salesforce`: the sObject leads are upserted into (default `Lead`); `hubspot`: the CRM object type
    /// written (default `contacts`).
    object: Option<String>,
    /// `salesforce`: the external id field the lead's external id is written to and matched by (required).
    external_id_field: Option<String>,
    /// `salesforce`: environment variables holding the connected app's consumer key and secret and the
    /// refresh token of the user Leadline connects as (all required).
    client_id_env: Option<String>,
    client_secret_env: Option<String>,
    refresh_token_env: Option<String>,
    /// `hubspot`: the unique property records are upserted by (`email`, or a custom unique property such as
    /// `leadline_id`). Its value is the mapped record's value for it, else the lead's external id.
    id_property: Option<String>,
    /// How a lead becomes the CRM's record (docs/configuration.md, "Field mapping"). An `http` target with a
    /// mapping receives the mapped record as its body instead of the envelope.
    #[serde(default)]
    mapping: Vec<crate::model::mapping::FieldRule>,
    /// `search_then_create` (required) and ambiguous look-ups (optional for other strategies):
    /// a GET URL with `{external_id}`; 200 with a record means found, 404 or an empty list means not found.
    search_url: Option<String>,
    /// The web address of a record in the CRM's own screens, with `{crm_id}` (e.g.
    /// `https://example.pipedrive.com/person/{crm_id}`): the lead lookup links each delivered lead to it.
    record_url: Option<String>,
    /// JSON pointer to the CRM's record id in a create/upsert/search answer.
    #[serde(default = "default_id_pointer")]
    id_pointer: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    auth: Option<AuthConfig>,
    #[serde(default = "default_timeout_ms")]
    timeout_ms: u64,
    /// Jobs delivered to this target at the same time (per worker process). Lowered by itself while the target
    /// answers 429, and raised back slowly.
    #[serde(default = "default_concurrency")]
    concurrency: u32,
    /// The target's declared request budget (`"190/10s"`, `"100/s"`, `"250000/1d"`): no window of that length
    /// ever carries more requests. Leadline also learns the real limit from the target's rate-limit headers.
    rate: Option<crate::model::Rate>,
    #[serde(default)]
    backoff: BackoffConfig,
    #[serde(default)]
    breaker: BreakerConfig,
    #[serde(default)]
    classify: ClassifyConfig,
    /// Time-sensitive steps: a replayed lead older than this runs `fallback` instead (a welcome SMS an hour
    /// late is worse than none; a call task is not).
    max_lead_age_minutes: Option<u64>,
    /// The target run instead of this one for leads older than `max_lead_age_minutes` on replay.
    fallback: Option<String>,
    /// Replay this target's dead letters by itself once it is healthy again: those that died of a setup problem
    /// (`permanent_config`) or while it was down or limiting (`transient`, `rate_limited`), each at most once,
    /// staged and paced like a manual replay.
    #[serde(default)]
    auto_replay: bool,
    /// The target a lead's step goes to when this one fails for the lead's data or its number (`whatsapp` →
    /// `sms` when the number is not on WhatsApp): tried at once, with fresh attempts.
    #[serde(default)]
    on_failure: Option<String>,
    /// `kind = "whatsapp"`: the sender's phone number id, the template and its parameters.
    #[serde(default)]
    whatsapp: Option<WhatsappConfig>,
    /// `kind = "sms"`: the Twilio account, sender and message body.
    #[serde(default)]
    sms: Option<SmsConfig>,
    /// First-contact steps (`whatsapp`, `sms`): the wait for an unconfirmed send, quiet hours, the default
    /// country of national numbers.
    #[serde(default)]
    first_contact: FirstContactConfig,
    /// Opt-in data fallback (docs/configuration.md, "Missing data"): a lead whose only refused fields are on
    /// `drop` goes again at once without them, tagged, instead of becoming a dead letter.
    #[serde(default)]
    missing_data: Option<MissingDataConfig>,
    /// Conversion steps (`meta_conversions`, `google_ads_conversions`): the CRM's stage names and what each
    /// platform gets for them — Meta's `event_name`, Google's conversion action (`customers/1/conversionActions/2`).
    /// A stage not listed is not sent to this target. `lead` is the stage of a lead reaching this step along its
    /// own source's route (right after the CRM step).
    #[serde(default)]
    stages: BTreeMap<String, String>,
    /// Conversion steps: the platform's window in days (Meta: 7 from the event; Google: 90 from the click, or the
    /// conversion action's own, shorter window). An older event is not sent: the step ends as reported.
    window_days: Option<u32>,
    /// `meta_conversions`: the dataset (pixel) id the events go to.
    dataset_id: Option<String>,
    /// `meta_conversions`: the CRM's name, sent as `custom_data.lead_event_source` (default: the name a stage
    /// webhook's source gives, else "Leadline").
    lead_event_source: Option<String>,
    /// `google_ads_conversions`: the Google Ads account (customer id, digits only) the conversions belong to.
    customer_id: Option<String>,
    /// `google_ads_conversions`: the manager account reached through (`login-customer-id` header), if any.
    login_customer_id: Option<String>,
    /// `google_ads_conversions`: variable holding a developer token, sent only when set (Google retired them on
    /// 2026-09-09; the header is ignored, and a later API version refuses it).
    developer_token_env: Option<String>,
    /// `google_ads_conversions`: the OAuth 2.0 token endpoint (default `https://oauth2.googleapis.com/token`).
    token_url: Option<String>,
    /// `google_ads_conversions`: ISO 4217 currency of conversion values (default `EUR`).
    currency: Option<String>,
}

impl TargetFile {
    /// Moves out the OAuth 2.0 variables (Salesforce, Google Ads).
    fn take_oauth(&mut self) -> OAuthVars {
        OAuthVars {
            client_id_env: self.client_id_env.take(),
            client_secret_env: self.client_secret_env.take(),
            refresh_token_env: self.refresh_token_env.take(),
        }
    }

    /// Moves out a conversion step's stages and window.
    fn take_conversions(&mut self) -> ConversionSettings {
        ConversionSettings { stages: std::mem::take(&mut self.stages), window_days: self.window_days.take() }
    }
}

/// The age limit of a first-contact step that sets none: an automatic "we will call you now" to a lead older
/// than an hour sets a false expectation.
pub const FIRST_CONTACT_MAX_AGE_MINUTES: u64 = 60;

/// `kind = "whatsapp"` (docs/configuration.md, "First contact").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WhatsappConfig {
    /// The WhatsApp Business phone number id messages are sent from (the path segment of `/{id}/messages`).
    pub phone_number_id: String,
    /// The approved template's name.
    pub template: String,
    /// The template's language code (`de`, `en_US`).
    pub language: String,
    /// The template body's parameters in order: names of fields of the mapped record (`first_name`).
    #[serde(default)]
    pub parameters: Vec<String>,
    /// Environment variable holding the app secret that signs status webhooks (`X-Hub-Signature-256`).
    pub app_secret_env: Option<String>,
    /// Environment variable holding the token Meta's webhook verification request must echo.
    pub verify_token_env: Option<String>,
}

/// `kind = "sms"` (docs/configuration.md, "First contact").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SmsConfig {
    /// The Twilio Account SID (`AC…`): the path of the Messages resource and the Basic auth user.
    pub account_sid: String,
    /// Environment variable holding the account's auth token (Basic auth password, and the key of
    /// `X-Twilio-Signature`).
    pub auth_token_env: String,
    /// The sender number (E.164), or leave it out and name a Messaging Service.
    pub from: Option<String>,
    pub messaging_service_sid: Option<String>,
    /// The message, with `{field}` replaced by the mapped record's fields (`Hi {first_name}, …`).
    pub body: String,
    /// The address Twilio posts status callbacks to: Leadline's `/receipts/sms/{target}` as Twilio reaches it.
    /// The signature is checked over this exact URL.
    pub status_callback: Option<String>,
}

/// What first-contact steps share.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FirstContactConfig {
    /// How long a send whose answer was lost waits for its receipt (or, for SMS, to show in the provider's list)
    /// before a person is asked whether the lead got it.
    pub in_doubt_minutes: u64,
    /// No message in these hours of the lead's local time (`{ from = "21:00", until = "08:00" }`): held until the
    /// morning, shown as scheduled.
    pub quiet_hours: Option<QuietHours>,
    /// The lead's time zone when its number's country does not tell (an IANA name, `Europe/Berlin`).
    pub time_zone: Option<String>,
}

impl Default for FirstContactConfig {
    fn default() -> Self {
        FirstContactConfig { in_doubt_minutes: 30, quiet_hours: None, time_zone: None }
    }
}

/// Quiet hours, local time of the lead: from `from` until `until` (over midnight when `until` is earlier).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuietHours {
    pub from: String,
    pub until: String,
}

impl QuietHours {
    /// The two ends as times of day, or what is wrong with them.
    pub fn times(&self) -> Result<(chrono::NaiveTime, chrono::NaiveTime), String> {
        let parse = |v: &str| {
            chrono::NaiveTime::parse_from_str(v, "%H:%M").map_err(|_| format!("`{v}` is not a time like \"21:00\""))
        };
        Ok((parse(&self.from)?, parse(&self.until)?))
    }
}

/// `missing_data = { drop = ["phone"], tag = { property = "lead_status_note", value = "missing data: {fields}" },
/// task = "call_task" }`: which CRM fields a lead may go without, how the record says so, and who checks it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MissingDataConfig {
    /// The CRM fields (as the mapping's `to` names them) a lead may be written without when the CRM, or the
    /// mapping, refuses them. Never the field the target upserts by.
    pub drop: Vec<String>,
    /// Written into the record sent without them, so the CRM's users see what is missing.
    pub tag: Option<MissingDataTag>,
    /// A target run as a follow-up step for each lead written without a field (a call task in the CRM); without
    /// one, Leadline lists the lead as "Needs a person".
    pub task: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MissingDataTag {
    /// The CRM field the tag is written to (a name, or a JSON pointer like the mapping's `to`).
    pub property: String,
    /// The text written; `{fields}` becomes the fields left out (`phone, website`).
    #[serde(default = "default_missing_data_tag")]
    pub value: String,
}

fn default_missing_data_tag() -> String {
    "missing data: {fields}".to_string()
}

fn default_id_pointer() -> String {
    "/id".to_string()
}
fn default_timeout_ms() -> u64 {
    10_000
}
fn default_concurrency() -> u32 {
    8
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum AuthConfig {
    /// `Authorization: Bearer <value of the env variable>`.
    BearerEnv(String),
    /// A custom header whose value comes from an env variable.
    Header { name: String, value_env: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackoffConfig {
    pub base_ms: u64,
    pub cap_ms: u64,
    /// Counted attempts (rate-limited answers do not count) before a job is dead-lettered.
    pub max_attempts: u32,
    /// Longest time from a step becoming due to its delivery; past it the job is dead-lettered.
    pub budget_seconds: u64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self { base_ms: 1_000, cap_ms: 5 * 60_000, max_attempts: 12, budget_seconds: 6 * 3600 }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Consecutive failures (transient or ambiguous) that open the breaker.
    pub consecutive_failures: u32,
    /// Failure ratio over the last `window` results that also opens it (0 disables).
    pub failure_ratio: f64,
    pub window: u32,
    /// Time the breaker stays open before one probe is let through.
    pub cooldown_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self { consecutive_failures: 5, failure_ratio: 0.5, window: 20, cooldown_ms: 30_000 }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// Status code → class, overriding the default mapping (`"403" = "rate_limited"`).
    pub status: BTreeMap<String, ErrorClass>,
    /// JSON pointer to a field of the error body holding the CRM's error code (`/0/errorCode`).
    pub body_field: Option<String>,
    /// Value of `body_field` → class; takes precedence over the status mapping.
    pub body_values: BTreeMap<String, ErrorClass>,
    /// JSON pointer to the CRM's human message; tried before the built-in guesses.
    pub message_pointer: Option<String>,
    /// JSON pointer to the offending field name; tried before the built-in guesses.
    pub field_pointer: Option<String>,
}

impl TargetConfig {
    /// What the target speaks (the file's `kind`).
    pub fn kind(&self) -> TargetKind {
        self.settings.kind()
    }

    /// A conversion step's stages and window (`meta_conversions`, `google_ads_conversions`).
    pub fn conversions(&self) -> Option<&ConversionSettings> {
        match &self.settings {
            TargetSettings::MetaConversions(m) => Some(&m.conversions),
            TargetSettings::GoogleAdsConversions(g) => Some(&g.conversions),
            _ => None,
        }
    }

    /// The idempotency strategy: as configured for `http`; a `meta_lead` step only reads (an upsert in effect:
    /// repeating it changes nothing).
    /// Whether sending a lead again updates the record it created before, so a changed lead (a new revision) can
    /// go again once delivered: an upsert (PUT/PATCH by external id, Salesforce, HubSpot). A keyed POST, a plain
    /// POST or search-then-create (Pipedrive) is a create: sent again, it would make a second record. A
    /// `meta_lead` step only reads.
    pub fn updates_records(&self) -> bool {
        self.kind() != TargetKind::MetaLead && self.strategy() == Strategy::Upsert
    }

    /// How old a lead may be for this step to run rather than its `fallback`: `max_lead_age_minutes`, or for a
    /// first-contact step [`FIRST_CONTACT_MAX_AGE_MINUTES`] when it names a fallback without a limit.
    pub fn max_lead_age(&self) -> Option<u64> {
        self.max_lead_age_minutes.or((self.kind().is_first_contact()).then_some(FIRST_CONTACT_MAX_AGE_MINUTES))
    }

    /// The tag a record sent without some fields carries (`missing_data.tag`), if any.
    pub fn missing_data_tag(&self) -> Option<crate::model::mapping::Tag<'_>> {
        let tag = self.missing_data.as_ref()?.tag.as_ref()?;
        Some(crate::model::mapping::Tag { property: &tag.property, value: &tag.value })
    }

    /// The CRM field a target finds a lead's record by (HubSpot's `id_property`, Salesforce's
    /// `external_id_field`): a lead refused for it is never written without it.
    pub fn upsert_key_field(&self) -> Option<&str> {
        match &self.settings {
            TargetSettings::Hubspot(h) => h.id_property.as_deref(),
            TargetSettings::Salesforce(s) => s.external_id_field.as_deref(),
            _ => None,
        }
    }

    pub fn strategy(&self) -> Strategy {
        match self.kind() {
            TargetKind::Http => self.strategy.unwrap_or(Strategy::None),
            TargetKind::MetaLead => Strategy::Upsert,
            // Person and lead are created after a search, linked locally (`targets::pipedrive`).
            TargetKind::Pipedrive => Strategy::SearchThenCreate,
            // Salesforce: PATCH by the external id field, an upsert.
            TargetKind::Salesforce => Strategy::Upsert,
            // Upserting by a unique property is HubSpot's idempotency: a repeat changes nothing.
            TargetKind::Hubspot => Strategy::Upsert,
            // A message cannot be updated or searched for by a key of ours: each send is a new message. Leadline's
            // own record of what was sent (`contact_message`) keeps it to one.
            TargetKind::Whatsapp | TargetKind::Sms => Strategy::None,
            // Each conversion carries its own key (Meta's event_id, Google's orderId): a repeat is dropped.
            TargetKind::MetaConversions | TargetKind::GoogleAdsConversions => Strategy::Upsert,
        }
    }

    /// The Salesforce REST API version: as configured, or [`SALESFORCE_API_VERSION`] when `api_version` was left
    /// out. `api_version`'s serde default is Meta's Graph version (`v21.0`); Salesforce retired its own 21.0 in
    /// 2025, so that value can only mean "not set" here.
    pub fn salesforce_api_version(&self) -> &str {
        if self.api_version == default_graph_version() {
            SALESFORCE_API_VERSION
        } else {
            &self.api_version
        }
    }

    /// `salesforce`: the sObject leads go to.
    pub fn salesforce_object(&self) -> &str {
        match &self.settings {
            TargetSettings::Salesforce(s) => s.object.as_deref().unwrap_or("Lead"),
            _ => "Lead",
        }
    }

    /// `hubspot`: the object type written (`contacts` unless configured).
    pub fn hubspot_object(&self) -> &str {
        match &self.settings {
            TargetSettings::Hubspot(h) => h.object.as_deref().unwrap_or("contacts"),
            _ => "contacts",
        }
    }

    /// The base of Graph API requests of a `meta_lead` step: address and version.
    pub fn graph_base(&self) -> String {
        format!("{}/{}", self.url.trim_end_matches('/'), self.api_version.trim_matches('/'))
    }

    pub fn method(&self) -> reqwest::Method {
        match &self.method {
            Some(m) => reqwest::Method::from_bytes(m.as_bytes()).unwrap_or(reqwest::Method::POST),
            None if self.strategy() == Strategy::Upsert => reqwest::Method::PUT,
            None => reqwest::Method::POST,
        }
    }
}
