//! `[sources.NAME]`: where leads come in — what all sources share, each kind's settings in its own variant of
//! [`SourceSettings`] (read from the file's flat table through `SourceFile`), reconciliation, poll mode and
//! request signatures.

use serde::Deserialize;

use super::*;

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Any JSON body; the event id is read from `id_field`.
    #[default]
    Generic,
    /// Meta Lead Ads webhooks (`leadgen` changes, `X-Hub-Signature-256`).
    Meta,
    /// Google Ads lead form webhooks (Google's `WebhookLead` JSON; the `google_key` in the body is the proof).
    GoogleAds,
    /// A CRM's stage-change webhook (a HubSpot workflow's "Send a webhook"): each stage of a lead Leadline
    /// delivered goes to the route's conversion steps (`stage_webhook` says where the lead and stage are).
    CrmStage,
}

/// One source: what every source has, and its kind's own settings ([`SourceSettings`]). Read from the file's flat
/// table (`kind = "meta"` beside that kind's keys), which stays as it is.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "SourceFile")]
pub struct SourceConfig {
    /// The kind and the settings only it has.
    pub settings: SourceSettings,
    /// The field holding the event id; a top-level name (`id`) or a JSON pointer (`/lead/id`).
    pub id_field: String,
    /// Target names, in order: each step runs only after the previous one was delivered.
    pub route: Vec<String>,
    /// Periodic comparison with the source's own list of leads; missing ones are ingested.
    pub reconcile: Option<ReconcileConfig>,
    /// Poll mode: Leadline asks the source for its new leads at an interval instead of waiting for webhooks.
    pub poll: Option<PollConfig>,
    /// A failing listing raises a `source_failing` alert once it has failed for this long.
    pub failing_alert_minutes: u64,
    /// Largest accepted body for this source (default `server.max_body_bytes`).
    pub max_body_bytes: Option<usize>,
    /// Refuse to start when this source has no signature check.
    pub require_signature: bool,
    /// The time zone of this source's leads (first-contact quiet hours).
    pub time_zone: Option<String>,
    /// Keys the file sets that this kind does not take: `Config::validate` (and, for `google_ads`, its own check)
    /// refuses the first, naming it.
    pub(crate) stray: Vec<&'static str>,
}

/// A source's kind with the settings only that kind has. Every feature reads the variant of the kind it serves;
/// `SourceConfig` holds what all kinds share.
#[derive(Debug, Clone)]
pub enum SourceSettings {
    /// Any JSON body, optionally signed (HMAC-SHA256 over the raw body).
    Generic(GenericSourceSettings),
    Meta(MetaSourceSettings),
    GoogleAds(GoogleAdsSourceSettings),
    CrmStage(CrmStageSettings),
}

/// `kind = "generic"` (the default).
#[derive(Debug, Clone, Default)]
pub struct GenericSourceSettings {
    /// HMAC-SHA256 signature over the raw body.
    pub signature: Option<SignatureConfig>,
}

/// `kind = "meta"`.
#[derive(Debug, Clone, Default)]
pub struct MetaSourceSettings {
    /// Variable holding the app secret that signs `X-Hub-Signature-256`.
    pub app_secret_env: Option<String>,
    /// Variable holding the verify token of the subscription handshake.
    pub verify_token_env: Option<String>,
    /// The Facebook page the lead forms belong to (leads found by reconciliation take it from here).
    pub page_id: Option<String>,
}

/// `kind = "google_ads"`.
#[derive(Debug, Clone, Default)]
pub struct GoogleAdsSourceSettings {
    /// Variable (or keyring entry) holding the key Google sends back in every lead's `google_key`.
    pub key_env: Option<String>,
    /// Deliver the leads Google marks `is_test` along the route like any other.
    pub deliver_test_leads: bool,
}

/// `kind = "crm_stage"`.
#[derive(Debug, Clone, Default)]
pub struct CrmStageSettings {
    /// The webhook's signature: HMAC-SHA256, or HubSpot's own v3.
    pub signature: Option<SignatureConfig>,
    /// Where the lead and its new stage are in the CRM's webhook body (the file's `stage_webhook`, or HubSpot's
    /// workflow body).
    pub stage_webhook: StageWebhookConfig,
}

impl SourceConfig {
    /// What the source receives (the file's `kind`).
    pub fn kind(&self) -> SourceKind {
        match &self.settings {
            SourceSettings::Generic(_) => SourceKind::Generic,
            SourceSettings::Meta(_) => SourceKind::Meta,
            SourceSettings::GoogleAds(_) => SourceKind::GoogleAds,
            SourceSettings::CrmStage(_) => SourceKind::CrmStage,
        }
    }

    /// The `signature` of a `generic` or `crm_stage` source.
    pub fn signature(&self) -> Option<&SignatureConfig> {
        match &self.settings {
            SourceSettings::Generic(g) => g.signature.as_ref(),
            SourceSettings::CrmStage(c) => c.signature.as_ref(),
            SourceSettings::Meta(_) | SourceSettings::GoogleAds(_) => None,
        }
    }

    /// A Meta source's page id.
    pub fn page_id(&self) -> Option<&str> {
        match &self.settings {
            SourceSettings::Meta(m) => m.page_id.as_deref(),
            _ => None,
        }
    }

    /// The kind's own keys that name a secret's variable (the signature's `secret_env`, Meta's app secret and
    /// verify token, Google's key), with the variable.
    pub fn secret_vars(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        if let Some(sig) = self.signature() {
            out.push(("signature.secret_env", sig.secret_env.as_str()));
        }
        match &self.settings {
            SourceSettings::Meta(m) => {
                out.extend(m.app_secret_env.as_deref().map(|v| ("app_secret_env", v)));
                out.extend(m.verify_token_env.as_deref().map(|v| ("verify_token_env", v)));
            }
            SourceSettings::GoogleAds(g) => out.extend(g.key_env.as_deref().map(|v| ("key_env", v))),
            SourceSettings::Generic(_) | SourceSettings::CrmStage(_) => {}
        }
        out
    }

    /// Whether the file set `key`, which this kind does not take.
    pub fn sets_stray(&self, key: &str) -> bool {
        self.stray.contains(&key)
    }

    /// The keys the file set that this kind does not take.
    pub fn stray_keys(&self) -> &[&'static str] {
        &self.stray
    }
}

impl From<SourceFile> for SourceConfig {
    /// Moves each key of the kind into its settings; a kind-specific key left over belongs to another kind and
    /// is listed in `stray`.
    fn from(mut f: SourceFile) -> SourceConfig {
        let settings = match f.kind {
            SourceKind::Generic => SourceSettings::Generic(GenericSourceSettings { signature: f.signature.take() }),
            SourceKind::Meta => SourceSettings::Meta(MetaSourceSettings {
                app_secret_env: f.app_secret_env.take(),
                verify_token_env: f.verify_token_env.take(),
                page_id: f.page_id.take(),
            }),
            SourceKind::GoogleAds => SourceSettings::GoogleAds(GoogleAdsSourceSettings {
                key_env: f.key_env.take(),
                deliver_test_leads: std::mem::take(&mut f.deliver_test_leads),
            }),
            SourceKind::CrmStage => SourceSettings::CrmStage(CrmStageSettings {
                signature: f.signature.take(),
                stage_webhook: f.stage_webhook.take().unwrap_or_default(),
            }),
        };
        let stray = [
            ("signature", f.signature.is_some()),
            ("app_secret_env", f.app_secret_env.is_some()),
            ("verify_token_env", f.verify_token_env.is_some()),
            ("page_id", f.page_id.is_some()),
            ("key_env", f.key_env.is_some()),
            ("deliver_test_leads", f.deliver_test_leads),
            ("stage_webhook", f.stage_webhook.is_some()),
        ]
        .into_iter()
        .filter(|&(_, left)| left)
        .map(|(key, _)| key)
        .collect();
        SourceConfig {
            settings,
            id_field: f.id_field,
            route: f.route,
            reconcile: f.reconcile,
            poll: f.poll,
            failing_alert_minutes: f.failing_alert_minutes,
            max_body_bytes: f.max_body_bytes,
            require_signature: f.require_signature,
            time_zone: f.time_zone,
            stray,
        }
    }
}

/// A source as the file writes it: every kind's keys side by side. Read into this, then into [`SourceConfig`],
/// whose [`SourceSettings`] keeps only the keys of its kind.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceFile {
    #[serde(default)]
    kind: SourceKind,
    /// Generic sources: the field holding the event id; a top-level name (`id`) or a JSON pointer (`/lead/id`).
    #[serde(default = "default_id_field")]
    id_field: String,
    /// Target names, in order: each step runs only after the previous one was delivered.
    route: Vec<String>,
    /// Generic sources: optional HMAC-SHA256 signature over the raw body.
    signature: Option<SignatureConfig>,
    /// Meta sources: environment variable holding the app secret that signs `X-Hub-Signature-256`.
    app_secret_env: Option<String>,
    /// Meta sources: environment variable holding the verify token of the subscription handshake.
    verify_token_env: Option<String>,
    /// Periodic comparison with the source's own list of leads; missing ones are ingested.
    reconcile: Option<ReconcileConfig>,
    /// Poll mode: Leadline asks the source for its new leads at an interval instead of waiting for webhooks (a
    /// laptop has no public address Meta could send a webhook to). Excludes `reconcile`: polling is the listing.
    poll: Option<PollConfig>,
    /// Meta sources: the Facebook page the lead forms belong to. Graph's lead object does not name its page, so
    /// leads found by reconciliation take it from here (webhook leads carry it themselves).
    page_id: Option<String>,
    /// A failing reconciliation (source unreachable, throttled) raises a `source_failing` alert once it has
    /// failed for this long; a refused token raises a `credentials` alert at once.
    #[serde(default = "default_source_failing_minutes")]
    failing_alert_minutes: u64,
    /// Largest accepted body for this source (default `server.max_body_bytes`, which it may not exceed).
    max_body_bytes: Option<usize>,
    /// Refuse to start when this source has no signature check (a generic source without `signature`).
    #[serde(default)]
    require_signature: bool,
    /// `google_ads` sources: environment variable (or keyring entry) holding the key entered beside the webhook
    /// URL in Google Ads; Google sends it back in every lead's `google_key`.
    key_env: Option<String>,
    /// `google_ads` sources: deliver the leads Google marks `is_test` (the form editor's "send test data") along
    /// the route like any other. By default they are stored and shown as test leads and reach no target.
    #[serde(default)]
    deliver_test_leads: bool,
    /// `crm_stage` sources: where the lead and its new stage are in the CRM's webhook body.
    stage_webhook: Option<StageWebhookConfig>,
    /// The time zone of this source's leads (an IANA name, `Europe/Madrid`): first-contact steps keep their
    /// quiet hours in it. Without it, the zone comes from the step's `first_contact.time_zone`, else from the
    /// phone number's country code.
    time_zone: Option<String>,
}

/// Where a CRM's stage-change webhook holds what Leadline needs (JSON pointers). The defaults read a HubSpot
/// contact workflow's "Send a webhook" body (`{"vid": 123, "properties": {"lifecyclestage": {"value": …},
/// "leadline_id": {"value": "google:GL-1"}}}`), with the contact's `leadline_id` property holding the lead's
/// external id (the HubSpot target's `id_property`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StageWebhookConfig {
    /// Leadline's external id of the lead (`{source}:{source_ref}`).
    pub lead_pointer: String,
    /// The CRM's record id, used when the body has no external id (the record a delivered step created).
    pub crm_id_pointer: String,
    /// The new stage.
    pub stage_pointer: String,
    /// When the stage was reached (RFC 3339 text or Unix milliseconds); absent: when the webhook arrived.
    pub changed_at_pointer: String,
    /// The conversion's value (a number or numeric text), if the CRM sends one.
    pub value_pointer: String,
    /// The CRM's name (Meta's `lead_event_source`).
    pub crm_name: String,
}

impl Default for StageWebhookConfig {
    fn default() -> Self {
        StageWebhookConfig {
            lead_pointer: "/properties/leadline_id/value".into(),
            crm_id_pointer: "/vid".into(),
            stage_pointer: "/properties/lifecyclestage/value".into(),
            changed_at_pointer: "/properties/lifecyclestage/timestamp".into(),
            value_pointer: "/properties/amount/value".into(),
            crm_name: "HubSpot".into(),
        }
    }
}

impl SourceKind {
    /// The kind as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Generic => "generic",
            SourceKind::Meta => "meta",
            SourceKind::GoogleAds => "google_ads",
            SourceKind::CrmStage => "crm_stage",
        }
    }
}

impl SourceConfig {
    /// Whether requests to this source must carry a valid HMAC signature (Meta sources always do).
    pub fn is_signed(&self) -> bool {
        match self.kind() {
            SourceKind::Generic | SourceKind::CrmStage => self.signature().is_some(),
            SourceKind::Meta | SourceKind::GoogleAds => true,
        }
    }
}

fn default_source_failing_minutes() -> u64 {
    15
}

/// Reconciliation with a source that can list its leads (see `reconcile`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ReconcileConfig {
    /// How often to compare.
    #[serde(default = "default_reconcile_interval")]
    pub interval_seconds: u64,
    /// The first comparison looks this far back; later ones start at the previous run (minus `overlap_minutes`).
    #[serde(default = "default_lookback")]
    pub lookback_minutes: u64,
    /// Leads can appear in a source's list a little after their creation time: each run re-reads this much of
    /// the previous one.
    #[serde(default = "default_overlap")]
    pub overlap_minutes: u64,
    /// Generic sources: GET URL listing leads; `{since}` is replaced by the watermark (Unix seconds).
    pub list_url: Option<String>,
    /// Generic sources: JSON pointer to the array of leads in the answer (default: the answer itself, or its
    /// `data` or `items` field).
    pub items_pointer: Option<String>,
    /// Generic sources: JSON pointer to the next page's URL (absent or null on the last page).
    pub next_pointer: Option<String>,
    /// Generic sources: authentication for the list endpoint.
    pub auth: Option<AuthConfig>,
    /// Meta sources: the lead forms to list. The Graph API address, version and page access token are the
    /// source's `meta_lead` step's (the first target of its route), so listing and fetching share them.
    #[serde(default)]
    pub form_ids: Vec<String>,
}

fn default_reconcile_interval() -> u64 {
    300
}

/// Poll mode (see `poll`): the source's list of leads is read every `interval_seconds` from where the last read
/// stopped (a cursor kept in the database), and every lead not yet stored is ingested like a webhook's.
///
/// The listing settings are reconciliation's (the same endpoints are read the same way): `form_ids` for a Meta
/// source, `list_url`, `items_pointer`, `next_pointer` and `auth` for a generic one.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PollConfig {
    /// How often to ask (per source; every form of a Meta source is read in each poll).
    #[serde(default = "default_poll_interval")]
    pub interval_seconds: u64,
    /// The first poll (no cursor stored yet) lists leads created this far back.
    #[serde(default = "default_lookback")]
    pub lookback_minutes: u64,
    /// Each pass re-reads this much before the stored watermark, for a lead that shows up in the list a little
    /// after its creation time (a lead already stored is a duplicate and costs nothing downstream).
    #[serde(default = "default_poll_overlap")]
    pub overlap_seconds: u64,
    /// Generic sources: GET URL listing leads; `{since}` is replaced by the watermark (Unix seconds).
    pub list_url: Option<String>,
    /// Generic sources: JSON pointer to the array of leads in the answer (default: the answer itself, or its
    /// `data` or `items` field).
    pub items_pointer: Option<String>,
    /// Generic sources: JSON pointer to the next page's URL (absent or null on the last page).
    pub next_pointer: Option<String>,
    /// Generic sources: authentication for the list endpoint.
    pub auth: Option<AuthConfig>,
    /// Meta sources: the lead forms to poll. The Graph API address, version and page access token are the
    /// source's `meta_lead` step's (the first target of its route).
    #[serde(default)]
    pub form_ids: Vec<String>,
}

impl PollConfig {
    /// The listing part, in reconciliation's terms: polling and reconciliation read a list the same way.
    pub fn listing(&self) -> ReconcileConfig {
        ReconcileConfig {
            interval_seconds: self.interval_seconds,
            lookback_minutes: self.lookback_minutes,
            overlap_minutes: 0,
            list_url: self.list_url.clone(),
            items_pointer: self.items_pointer.clone(),
            next_pointer: self.next_pointer.clone(),
            auth: self.auth.clone(),
            form_ids: self.form_ids.clone(),
        }
    }
}

fn default_poll_interval() -> u64 {
    60
}
fn default_poll_overlap() -> u64 {
    60
}
fn default_lookback() -> u64 {
    24 * 60
}
fn default_overlap() -> u64 {
    10
}
fn default_id_field() -> String {
    "id".to_string()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureConfig {
    /// How requests are signed: a shared secret's HMAC of the body in `header` (the default), or HubSpot's own
    /// request signature v3 (`crm_stage` sources only).
    #[serde(default)]
    pub scheme: SignatureScheme,
    /// Header carrying the hex HMAC-SHA256 of the raw body (an optional `sha256=` prefix is accepted).
    #[serde(default = "default_signature_header")]
    pub header: String,
    /// Environment variable holding the shared secret (`hubspot_v3`: the HubSpot app's client secret).
    pub secret_env: String,
    /// `hubspot_v3`: the URL HubSpot calls, exactly as entered in HubSpot; the signature covers it.
    pub url: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SignatureScheme {
    /// Hex HMAC-SHA256 of the raw body with a shared secret, in the configured header.
    #[default]
    HmacSha256,
    /// HubSpot's `X-HubSpot-Signature-v3` with `X-HubSpot-Request-Timestamp` (features/ingest/hubspot_v3.rs).
    HubspotV3,
}

pub fn default_signature_header() -> String {
    "X-Signature-256".to_string()
}
