//! What the API takes and answers: the requests and views its functions exchange, serialised with serde and
//! declared for the UI by ts-rs (`ui/src/lib/api/wire.ts`, see `tests/ts_contract.rs`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::features::contact::doubt::ContactDoubt;
use crate::features::delivery::breaker::BreakerState;
use crate::features::dlq::{DeadLetter, DeadLetterDetail};
use crate::features::monitor::sources::SourceStatus;
use crate::features::reconcile::ReconciliationRun;
use crate::features::replay::fix::{FieldFix, FixReport};
use crate::features::replay::{ReplayHistoryEntry, ReplayOptions, ReplayPreview, ReplaySelection};
use crate::features::settings::{Change, SettingsView};
use crate::store::{LeadMatch, LeadRecord, Resolution, Reveal};

#[derive(Debug, Clone, Serialize, serde::Deserialize, ts_rs::TS)]
pub struct Session {
    pub version: String,
    /// Who this session acts as in the audit: the operator's token name (`alice`), the browser token
    /// (``browser token `default` ``) or the desktop's OS user.
    pub operator: String,
    pub demo: bool,
    pub worker: bool,
    pub sources: Vec<String>,
    pub targets: Vec<String>,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct DeadLetterList {
    pub items: Vec<DeadLetter>,
    /// Open dead letters by class, over everything (not only this page).
    pub open_by_class: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct DeadLetterView {
    #[serde(flatten)]
    pub detail: DeadLetterDetail,
    /// The CRM record, when a step of this lead was delivered (e.g. after a replay).
    #[ts(type = "unknown")]
    pub crm_record: Option<serde_json::Value>,
    pub replays: Vec<ReplayHistoryEntry>,
    /// Whether personal data is shown as it is (after an audited reveal) rather than masked (the default).
    pub revealed: bool,
    /// Who had this lead shown unmasked, newest first (the audit).
    pub reveals: Vec<Reveal>,
    /// A first contact in doubt: "did this lead get our message?", for a person to answer
    /// (`answer_contact_doubt`).
    pub contact_doubt: Option<ContactDoubt>,
}

/// A person's answer to a first contact in doubt (the dead letter `id`).
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct ContactDoubtArgs {
    pub id: i64,
    /// `true`: the lead got the message (nothing is sent again, the route goes on); `false`: send it once more.
    pub arrived: bool,
    /// How the person knows (kept with the replay), e.g. "the lead confirmed on the phone".
    #[serde(default)]
    pub note: String,
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct RevealRequest {
    /// Why the operator needs to see the lead's personal data (kept in the audit).
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct ReplayRequest {
    pub selection: ReplaySelection,
    /// The preview's `eligible`: the replay runs only if the selection still matches it.
    pub expected: i64,
    /// Why (kept in the audit).
    pub reason: String,
    #[serde(default)]
    pub options: ReplayOptions,
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct ResolveRequest {
    pub selection: ReplaySelection,
    /// `discarded` or `fixed_manually`.
    pub resolution: Resolution,
    /// Why (kept with each dead letter).
    pub note: String,
    /// How many the operator saw; nothing happens if the selection changed.
    pub expected: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct FixRequest {
    pub selection: ReplaySelection,
    pub fix: FieldFix,
    /// Why (kept with each change). Not needed for a dry run.
    #[serde(default)]
    pub reason: String,
    /// Only count and show examples.
    #[serde(default)]
    pub dry_run: bool,
}

/// A field fix and the replay of the leads it changes, previewed, confirmed and done as one act.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct FixAndReplayRequest {
    pub selection: ReplaySelection,
    pub fix: FieldFix,
    /// Why: kept with each change and with the replay.
    pub reason: String,
    /// How many leads the preview said the fix changes: nothing happens if that is no longer true.
    pub expected_changed: i64,
    #[serde(default)]
    pub options: ReplayOptions,
}

/// What a fix-and-replay would do: the fix (count, before/after samples) and the replay of the leads it changes.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct FixAndReplayPreview {
    pub fix: FixReport,
    /// `null` when the fix changes no lead (then there is nothing to replay).
    pub replay: Option<ReplayPreview>,
    /// When the selection was counted: the request pinned to it ([`ReplaySelection::as_of`]) fixes and replays
    /// exactly the leads counted here, not dead letters of the same cause parked since.
    pub as_of: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct FixAndReplayReceipt {
    /// Leads whose data was corrected.
    pub fixed: i64,
    /// The replay that sends them again.
    pub replay_id: i64,
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct EditRequest {
    #[ts(type = "unknown")]
    pub payload: serde_json::Value,
    pub reason: String,
}

/// A source as the Sources page shows it: its volume against the baseline and its last reconciliation.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct SourceView {
    #[serde(flatten)]
    pub status: SourceStatus,
    /// `generic` or `meta`.
    pub kind: String,
    pub reconciles: bool,
    /// Whether requests must carry a valid signature; an unsigned source takes leads from anyone who reaches it.
    pub signed: bool,
    pub last_reconciliation: Option<ReconciliationRun>,
    /// Leads recovered by reconciliation in the last 7 days.
    pub recovered_7d: i64,
    /// Poll mode: Leadline asks the source for its leads (last and next poll); `None` for a webhook-fed source.
    pub poll: Option<crate::features::poll::PollView>,
    /// What to paste into the ad platform's webhook settings (Google Ads: the URL and the key); `None` for a
    /// source set up elsewhere.
    pub webhook: Option<WebhookSetup>,
}

/// A Google Ads source's key, unmasked: what the advertiser pastes into the lead form's "Key" field.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct SourceKey {
    pub source: String,
    pub key: String,
}

/// A Google Ads lead form's webhook integration, as the advertiser fills it in ("Webhook URL" and "Key").
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct WebhookSetup {
    /// `/ingest/{source}` on this server.
    pub path: String,
    /// The whole address, when `monitor.public_url` says how the server is reached from outside.
    pub url: Option<String>,
    /// The key Google sends back in each lead, masked like every secret (`••••` and its last 4 characters);
    /// `None` when the source's `key_env` cannot be read. The key itself comes only from `reveal_source_key`, an
    /// explicit, logged action of the person pasting it into Google Ads.
    pub key_masked: Option<String>,
    /// Google's test leads ("send test data") are delivered like any other (`deliver_test_leads`).
    pub delivers_test_leads: bool,
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct TargetView {
    pub name: String,
    /// `http`, `meta_lead`, ... (what the target speaks).
    pub kind: String,
    /// Scheme, host and port of the target's URL (never credentials or paths with ids).
    pub endpoint: String,
    pub strategy: String,
    /// Nothing is sent before `until`: the target said when to come back, or refused a credential.
    pub hold: Option<crate::features::delivery::worker::Hold>,
    /// The rate requests are paced to (declared, or learned from the target's headers), like `190/10s`.
    pub rate: Option<String>,
    /// Requests that may be in flight now (lowered while the target answers 429).
    pub concurrency: u32,
    /// How a lead becomes this target's record (the configured rules, as written).
    #[ts(type = "unknown[]")]
    pub mapping: Vec<serde_json::Value>,
    pub breaker: Option<BreakerState>,
    pub breaker_opened_at: Option<DateTime<Utc>>,
    pub paused: bool,
    pub paused_by: Option<String>,
    pub paused_at: Option<DateTime<Utc>>,
}

/// What a reload of secrets did to one target, in words.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct SecretReload {
    pub target: String,
    pub ok: bool,
    pub message: String,
}

/// What a search found.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct LeadSearch {
    /// Newest first, at most [`FIND_LIMIT`].
    pub items: Vec<LeadMatch>,
    /// More leads may match than were returned.
    pub truncated: bool,
}

#[derive(Debug, Clone, Default, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct LeadQuery {
    /// An e-mail address, a phone number (or part of one), a name, the source's id, the CRM's record id or the
    /// lead's id.
    pub q: String,
}

/// A lead's whole story: the lead (masked unless revealed), its steps with attempts, CRM ids and replays, fixes,
/// and who had it revealed.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct LeadStory {
    #[serde(flatten)]
    pub lead: LeadRecord,
    /// Per step (same order as `steps`), the CRM record's web address when the target's `record_url` is set
    /// and the step has a CRM id.
    pub crm_urls: Vec<Option<String>>,
    /// Whether personal data is shown as it is (after an audited reveal) rather than masked (the default).
    pub revealed: bool,
    /// Who had this lead shown unmasked, newest first (the audit).
    pub reveals: Vec<Reveal>,
    /// Every death of any of its steps, oldest first: each its own episode, never overwritten.
    pub episodes: Vec<crate::store::Episode>,
    /// Its steps delivered without a field the CRM refused (a target's `missing_data`): which field, why.
    pub missing_data: Vec<crate::store::MissingDataLead>,
    /// Its first contacts' receipts (sent, delivered, read, failed), oldest first, each naming its step by
    /// `delivery_id`.
    pub receipts: Vec<crate::store::ReceiptEntry>,
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct SettingsEdit {
    pub changes: Vec<Change>,
}

/// A secret typed into the settings page, for the variable a field names.
#[derive(Clone, Deserialize, ts_rs::TS)]
pub struct SecretEntry {
    pub variable: String,
    pub value: String,
}

/// What storing a secret did.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct SecretStored {
    pub message: String,
    pub settings: SettingsView,
}

// The arguments of operations that take no request of their own (see `operations.rs`): path and query
// parameters, and a request body, folded into one object.

/// No arguments.
#[derive(Debug, Clone, Default, Deserialize, ts_rs::TS)]
pub struct NoArgs {}

/// One thing by its id: a dead letter (its delivery id), a lead (its event id), a replay or an alert.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct IdArgs {
    pub id: i64,
}

/// A time range: `1h`, `24h` or `7d` (each operation says which it takes when none is given).
#[derive(Debug, Clone, Default, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct RangeArgs {
    pub range: Option<String>,
}

/// A reveal of a dead letter's or a lead's personal data, with the reason kept in the audit.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct RevealArgs {
    pub id: i64,
    #[serde(flatten)]
    pub request: RevealRequest,
}

/// An edit of one dead letter's lead.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct EditArgs {
    pub id: i64,
    #[serde(flatten)]
    pub request: EditRequest,
}

/// A correction of one lead delivered with missing data (`id`: its step's delivery id).
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct CorrectArgs {
    pub id: i64,
    #[serde(flatten)]
    pub request: super::missing_data::CorrectionRequest,
}

/// A replay's report, of every lead or of one outcome (`delivered`, `failed_new_reason`, …).
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct ReportArgs {
    pub id: i64,
    #[serde(default)]
    pub outcome: Option<String>,
}

/// `cancel`, `pause` or `resume` a replay.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct ControlArgs {
    pub id: i64,
    #[ts(type = "'cancel' | 'pause' | 'resume'")]
    pub action: String,
}

/// One target by name.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct TargetArgs {
    pub name: String,
}

/// A target and a stored lead (`source:id`, e.g. `webform:L-1`) to show the request it would send.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct TargetPreviewArgs {
    pub name: String,
    pub lead: String,
}

/// One source by name.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct SourceArgs {
    pub source: String,
}

/// A field fix to preview with the replay of the leads it changes.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct FixAndReplayPreviewArgs {
    pub selection: ReplaySelection,
    pub fix: FieldFix,
}

/// An export: the file name offered and its CSV. HTTP serves it as an attachment (`text/csv`); the desktop window
/// saves it where the person chooses and answers the page with where it went.
#[derive(Debug, Clone, Serialize, Deserialize, ts_rs::TS)]
pub struct ExportFile {
    pub name: String,
    pub body: String,
}
