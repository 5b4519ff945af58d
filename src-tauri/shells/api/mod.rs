//! The single surface the outside world uses: plain async functions with serde DTOs. The HTTP routes
//! ([`http`]) and the desktop commands are thin adapters over these; tests call them directly.

pub mod export;
pub mod http;
pub mod lookup;
pub mod settings;
pub mod tokens;

pub use crate::features::app::{App, LiveEvent};
pub use crate::features::monitor::health::{
    situation, verdict, BreakerView, HealthVerdict, HealthView, TargetSituation, VerdictLevel,
};
pub use crate::runtime::Clock;
pub use lookup::{find_leads, lead_story, reveal_lead, LeadQuery, LeadSearch, LeadStory};
pub use settings::{save_settings, settings, store_secret, SecretEntry, SecretStored, SettingsEdit};

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::features::delivery::breaker::BreakerState;
use crate::features::dlq::{self, DeadLetter, DeadLetterDetail, DeadLetterFilter, DeadLetterGroup};
use crate::features::figures::{self, DeliveryFigures};
use crate::features::monitor::alerts::{self, Alert};
use crate::features::monitor::metrics::{self, MetricSeries, Range};
use crate::features::monitor::sources::SourceStatus;
use crate::features::reconcile::{self, ReconcileError, ReconciliationRun};
use crate::features::replay::fix::{self, FieldFix, FixReport};
use crate::features::replay::{
    self, ReplayError, ReplayHistoryEntry, ReplayOptions, ReplayPreview, ReplayProgress, ReplayReceipt,
    ReplayReportItem, ReplaySelection,
};
use crate::model::privacy;
use crate::store::{ReplayOutcome, Resolution, Reveal};

/// Errors at the API boundary, serialised as `{code, message}`; the UI branches on `code`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// The world changed under the request (a replay's selection since its preview).
    #[error("{0}")]
    Conflict(String),
    /// The operator said no in the confirmation dialog.
    #[error("cancelled: nothing was changed")]
    Cancelled,
    #[error("{0}")]
    Unauthorized(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The JSON body of every API error: `{code, message}`.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct ErrorBody {
    #[ts(type = "'not_found' | 'bad_request' | 'conflict' | 'cancelled' | 'unauthorized' | 'internal'")]
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::NotFound(_) => "not_found",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Conflict(_) => "conflict",
            ApiError::Cancelled => "cancelled",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        tracing::error!(error = %format!("{e:#}"), "api error");
        ApiError::Internal(format!("{e:#}"))
    }
}

impl From<ReplayError> for ApiError {
    fn from(e: ReplayError) -> Self {
        match e {
            ReplayError::EmptySelection | ReplayError::NothingEligible => ApiError::BadRequest(e.to_string()),
            ReplayError::SelectionChanged { .. } => ApiError::Conflict(e.to_string()),
            ReplayError::Invalid(m) => ApiError::BadRequest(m),
            ReplayError::NotFound(_) => ApiError::NotFound(e.to_string()),
            ReplayError::Storage(e) => e.into(),
        }
    }
}

impl Serialize for ApiError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("ApiError", 2)?;
        st.serialize_field("code", self.code())?;
        st.serialize_field("message", &self.to_string())?;
        st.end()
    }
}

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

pub fn session(app: &App, operator: &str) -> Session {
    Session {
        version: env!("CARGO_PKG_VERSION").into(),
        operator: operator.to_string(),
        demo: app.demo,
        worker: app.worker.is_some(),
        sources: app.config.sources.keys().cloned().collect(),
        targets: app.config.targets.keys().cloned().collect(),
    }
}

pub async fn health(app: &App) -> Result<HealthView, ApiError> {
    Ok(crate::features::monitor::health(app, app.clock.now()).await?)
}

pub async fn metrics(app: &App, range: &str) -> Result<MetricSeries, ApiError> {
    let range = Range::parse(range)
        .ok_or_else(|| ApiError::BadRequest(format!("unknown range `{range}`: use 1h, 24h or 7d")))?;
    Ok(metrics::series(&app.store, range, app.clock.now()).await?)
}

#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct DeadLetterList {
    pub items: Vec<DeadLetter>,
    /// Open dead letters by class, over everything (not only this page).
    pub open_by_class: BTreeMap<String, i64>,
}

pub(crate) fn check_filter(filter: &DeadLetterFilter) -> Result<(), ApiError> {
    if let (Some(a), Some(b)) = (filter.since, filter.until) {
        if a >= b {
            return Err(ApiError::BadRequest("`since` must be before `until`".into()));
        }
    }
    if let Some(status) = filter.http_status {
        if !(100..=599).contains(&status) {
            return Err(ApiError::BadRequest(format!("`{status}` is not an HTTP status")));
        }
    }
    match (&filter.lead_field, &filter.lead_value) {
        (Some(f), Some(_)) if dlq::json_path(f).is_none() => {
            return Err(ApiError::BadRequest(format!(
                "`{f}` is not a lead field: use a key like `email` or a JSON pointer like `/lead/email`"
            )))
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(ApiError::BadRequest("a lead field and the value to look for go together".into()))
        }
        _ => {}
    }
    Ok(())
}

fn check_selection(selection: &ReplaySelection) -> Result<(), ApiError> {
    if let Some(f) = &selection.filter {
        check_filter(f)?;
    }
    Ok(())
}

/// Dead letters matching `filter`, grouped by cause (class, target and reason with lead-specific values masked).
pub async fn dead_letter_groups(app: &App, filter: &DeadLetterFilter) -> Result<Vec<DeadLetterGroup>, ApiError> {
    check_filter(filter)?;
    Ok(dlq::groups(&app.store, filter).await?)
}

pub async fn dead_letters(app: &App, filter: &DeadLetterFilter) -> Result<DeadLetterList, ApiError> {
    check_filter(filter)?;
    let items = dlq::list(&app.store, filter).await?.into_iter().map(mask_letter).collect();
    let targets: Vec<String> = app.config.targets.keys().cloned().collect();
    let open_by_class = app.store.queue_health(app.clock.now(), &targets).await?.overall.dead_open_by_class;
    Ok(DeadLetterList { items, open_by_class })
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
}

/// A dead letter (or any step) with its lead, attempts and history; personal data masked (see `privacy`).
pub async fn dead_letter(app: &App, delivery_id: i64) -> Result<DeadLetterView, ApiError> {
    Ok(mask_view(dead_letter_as_stored(app, delivery_id).await?))
}

async fn dead_letter_as_stored(app: &App, delivery_id: i64) -> Result<DeadLetterView, ApiError> {
    let detail = dlq::detail(&app.store, delivery_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no delivery with id {delivery_id}")))?;
    let replays = replay::history(&app.store, delivery_id).await?;
    let crm_record = app.store.delivered_record(delivery_id).await?;
    let reveals = app.store.reveals(delivery_id).await?;
    Ok(DeadLetterView { detail, crm_record, replays, revealed: true, reveals })
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct RevealRequest {
    /// Why the operator needs to see the lead's personal data (kept in the audit).
    pub reason: String,
}

/// The dead letter with its personal data unmasked: an explicit request, written to the audit (who, when, why)
/// before anything is shown.
pub async fn reveal_dead_letter(
    app: &App,
    delivery_id: i64,
    request: &RevealRequest,
    actor: &str,
) -> Result<DeadLetterView, ApiError> {
    let reason = request.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::BadRequest(
            "say why the lead's personal data is needed (it is kept in the audit)".into(),
        ));
    }
    if reason.chars().count() > 500 {
        return Err(ApiError::BadRequest("the reason is longer than 500 characters".into()));
    }
    if !app.store.record_reveal(delivery_id, actor, reason, app.clock.now()).await? {
        return Err(ApiError::NotFound(format!("no delivery with id {delivery_id}")));
    }
    tracing::info!(delivery_id, actor, "personal data of a lead revealed");
    dead_letter_as_stored(app, delivery_id).await
}

/// A dead letter as the list shows it: the CRM's message with e-mail addresses and phone numbers masked.
pub(crate) fn mask_letter(mut letter: DeadLetter) -> DeadLetter {
    letter.reason = privacy::mask_text(&letter.reason);
    letter
}

/// The view with every personal value masked: the lead (as it is and as received), fixes, the CRM record, and
/// the CRM's messages and answers in the attempts.
fn mask_view(mut view: DeadLetterView) -> DeadLetterView {
    let d = &mut view.detail;
    d.letter = mask_letter(d.letter.clone());
    d.payload = privacy::mask_lead(&d.payload);
    d.original_payload = d.original_payload.as_ref().map(privacy::mask_lead);
    for a in &mut d.attempts_timeline {
        a.reason = privacy::mask_text(&a.reason);
        a.response_excerpt = a.response_excerpt.as_deref().map(privacy::mask_answer);
    }
    for f in &mut d.fixes {
        let field = f.operation.get("field").and_then(serde_json::Value::as_str).unwrap_or_default();
        f.before = privacy::mask_field_value(field, &f.before);
        f.after = privacy::mask_field_value(field, &f.after);
    }
    view.crm_record = view.crm_record.as_ref().map(privacy::mask_lead);
    view.revealed = false;
    view
}

pub async fn replay_preview(app: &App, selection: &ReplaySelection) -> Result<ReplayPreview, ApiError> {
    check_selection(selection)?;
    let mut preview = replay::preview(&app.store, &app.config, selection, app.clock.now()).await?;
    // Read after the count: every dead letter it counted was parked before this instant.
    preview.as_of = app.clock.now();
    Ok(preview)
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

pub async fn replay(app: &App, request: &ReplayRequest, actor: &str) -> Result<ReplayReceipt, ApiError> {
    check_selection(&request.selection)?;
    let reason = request.reason.trim();
    let reason = if reason.is_empty() { "no reason given" } else { reason };
    let receipt = replay::start(
        &app.store,
        &app.config,
        &request.selection,
        request.expected,
        &request.options,
        actor,
        reason,
        false,
        app.clock.now(),
    )
    .await?;
    let _ = app.live.send(LiveEvent::ReplayChanged { replay_id: receipt.replay_id });
    Ok(receipt)
}

pub async fn replays(app: &App) -> Result<Vec<ReplayProgress>, ApiError> {
    Ok(replay::recent(&app.store, 20).await?)
}

pub async fn replay_report(
    app: &App,
    replay_id: i64,
    outcome: Option<&str>,
) -> Result<Vec<ReplayReportItem>, ApiError> {
    let outcome = outcome
        .map(|o| o.parse::<ReplayOutcome>())
        .transpose()
        .map_err(|e| ApiError::BadRequest(format!("unknown outcome `{}`: use one of {}", e.value, e.expected)))?;
    replay_progress(app, replay_id).await?;
    let mut items = replay::report(&app.store, replay_id, outcome, 500).await?;
    for item in &mut items {
        item.reason = item.reason.as_deref().map(privacy::mask_text);
    }
    Ok(items)
}

/// `cancel`, `pause` or `resume` a replay.
pub async fn control_replay(app: &App, replay_id: i64, action: &str, actor: &str) -> Result<ReplayProgress, ApiError> {
    let now = app.clock.now();
    match action {
        "cancel" => replay::cancel(&app.store, replay_id, actor, now).await?,
        "pause" => replay::pause(&app.store, replay_id, actor, now).await?,
        "resume" => replay::resume(&app.store, replay_id, actor, now).await?,
        other => return Err(ApiError::BadRequest(format!("unknown action `{other}`: use cancel, pause or resume"))),
    }
    let _ = app.live.send(LiveEvent::ReplayChanged { replay_id });
    replay_progress(app, replay_id).await
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

/// Discards dead letters, or marks them fixed by hand. Returns how many.
pub async fn resolve_dead_letters(app: &App, request: &ResolveRequest, actor: &str) -> Result<i64, ApiError> {
    check_selection(&request.selection)?;
    let n = replay::resolve(
        &app.store,
        &request.selection,
        request.resolution,
        &request.note,
        actor,
        request.expected,
        app.clock.now(),
    )
    .await?;
    let _ = app.live.send(LiveEvent::AlertsChanged);
    Ok(n)
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

pub async fn fix_dead_letters(app: &App, request: &FixRequest, actor: &str) -> Result<FixReport, ApiError> {
    check_selection(&request.selection)?;
    let mut report = fix::fix_selection(
        &app.store,
        &app.config,
        &request.selection,
        &request.fix,
        actor,
        &request.reason,
        request.dry_run,
        app.clock.now(),
    )
    .await?;
    // The examples show the change's shape, not the people: masked like the field inside a lead.
    for sample in &mut report.samples {
        sample.before = privacy::mask_field_value(&request.fix.field, &sample.before);
        sample.after = privacy::mask_field_value(&request.fix.field, &sample.after);
    }
    Ok(report)
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

/// The selection of the dead letters whose leads a fix changes.
fn changed_selection(report: &FixReport) -> ReplaySelection {
    ReplaySelection { ids: Some(report.changed_deliveries.clone()), filter: None }
}

pub async fn fix_and_replay_preview(
    app: &App,
    selection: &ReplaySelection,
    fix: &FieldFix,
    actor: &str,
) -> Result<FixAndReplayPreview, ApiError> {
    let request = FixRequest { selection: selection.clone(), fix: fix.clone(), reason: String::new(), dry_run: true };
    let report = fix_dead_letters(app, &request, actor).await?;
    let replay = if report.changed == 0 {
        None
    } else {
        Some(replay::preview(&app.store, &app.config, &changed_selection(&report), app.clock.now()).await?)
    };
    Ok(FixAndReplayPreview { fix: report, replay, as_of: app.clock.now() })
}

/// Corrects the field in every selected dead letter it changes, then replays exactly those — with one reason,
/// after one confirmation (the caller's). Checked first: the fix must still change as many leads as the preview
/// showed. The fix and the replay are two commits: should the replay not start (another replay took the leads
/// meanwhile), the corrected leads stay in the list, marked as fixed, to be replayed from there.
pub async fn fix_and_replay(
    app: &App,
    request: &FixAndReplayRequest,
    actor: &str,
) -> Result<FixAndReplayReceipt, ApiError> {
    check_selection(&request.selection)?;
    let reason = request.reason.trim();
    if reason.is_empty() {
        return Err(ApiError::BadRequest("say why: the reason is kept with each change and with the replay".into()));
    }
    // The check and the fix below look at the same dead letters, even while more of the same cause arrive.
    let selection = request.selection.as_of(app.clock.now());
    let preview = fix_and_replay_preview(app, &selection, &request.fix, actor).await?;
    if preview.fix.changed != request.expected_changed {
        return Err(ApiError::Conflict(format!(
            "the selection changed since the preview: the fix would now change {} leads, not {}; look again",
            preview.fix.changed, request.expected_changed
        )));
    }
    if preview.fix.changed == 0 {
        return Err(ApiError::BadRequest("the fix changes no lead: there is nothing to replay".into()));
    }
    let report =
        fix::fix_selection(&app.store, &app.config, &selection, &request.fix, actor, reason, false, app.clock.now())
            .await?;
    let selection = changed_selection(&report);
    let eligible = replay::preview(&app.store, &app.config, &selection, app.clock.now()).await?.eligible;
    let receipt = replay(
        app,
        &ReplayRequest { selection, expected: eligible, reason: reason.to_string(), options: request.options.clone() },
        actor,
    )
    .await
    .map_err(|e| {
        ApiError::Conflict(format!(
            "{} leads were fixed, but their replay did not start ({e}): replay them from the list, where they are \
             marked as fixed",
            report.changed
        ))
    })?;
    Ok(FixAndReplayReceipt { fixed: report.changed, replay_id: receipt.replay_id })
}

/// Previews, asks once — the fix, the replay's counts and pace, the reason — and does both only on "yes".
pub async fn fix_and_replay_confirmed(
    app: &App,
    request: &FixAndReplayRequest,
    actor: &str,
    confirm: Arc<dyn Confirm>,
) -> Result<FixAndReplayReceipt, ApiError> {
    let preview = fix_and_replay_preview(app, &request.selection, &request.fix, actor).await?;
    let Some(replay) = preview.replay.filter(|_| preview.fix.changed > 0) else {
        return Err(ApiError::BadRequest("the fix changes no lead: there is nothing to replay".into()));
    };
    let message = format!(
        "Change `{}` in {} leads (the data as received stays in each lead's history), then: {}\n\n{} They go \
         through normal delivery again, with fresh attempts. Reason: {}",
        request.fix.field,
        preview.fix.changed,
        replay.summary,
        pace_words(app, &request.options, replay.eligible),
        request.reason.trim()
    );
    ask(confirm, "Fix and replay dead letters", message).await?;
    // What the person said yes to: the leads counted before the question, not those parked while it was open.
    let selection = request.selection.as_of(preview.as_of);
    fix_and_replay(
        app,
        &FixAndReplayRequest { selection, expected_changed: preview.fix.changed, ..request.clone() },
        actor,
    )
    .await
}

#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct EditRequest {
    #[ts(type = "unknown")]
    pub payload: serde_json::Value,
    pub reason: String,
}

pub async fn edit_dead_letter(
    app: &App,
    delivery_id: i64,
    request: &EditRequest,
    actor: &str,
) -> Result<DeadLetterView, ApiError> {
    fix::edit(&app.store, &app.config, delivery_id, &request.payload, actor, &request.reason, app.clock.now()).await?;
    dead_letter(app, delivery_id).await
}

/// Asks a person to confirm something: a native dialog in the desktop app, a script in tests.
pub trait Confirm: Send + Sync + 'static {
    /// Blocks until answered; `true` means go ahead.
    fn confirm(&self, title: &str, message: &str) -> bool;
}

/// A confirmation that answers from a script: a test double for Rust tests that call the library directly. No
/// program uses it — every shell asks a person (a native dialog, or the page's own dialog whose count the server
/// checks) — and no variable, flag or file selects it: `tests/architecture.rs` fails if program code names it.
pub struct ScriptedConfirm {
    answers: std::sync::Mutex<std::collections::VecDeque<bool>>,
    otherwise: bool,
    /// Every message asked, in order.
    pub asked: std::sync::Mutex<Vec<String>>,
}

impl ScriptedConfirm {
    pub fn always(answer: bool) -> Self {
        Self::answers(&[], answer)
    }

    /// Answers `answers` in turn, then `otherwise`.
    pub fn answers(answers: &[bool], otherwise: bool) -> Self {
        Self { answers: std::sync::Mutex::new(answers.iter().copied().collect()), otherwise, asked: Default::default() }
    }
}

impl Confirm for ScriptedConfirm {
    fn confirm(&self, _title: &str, message: &str) -> bool {
        self.asked.lock().expect("asked lock").push(message.to_string());
        self.answers.lock().expect("answers lock").pop_front().unwrap_or(self.otherwise)
    }
}

/// Asks `confirm` on a blocking thread (a native dialog blocks); `Cancelled` on "no".
pub async fn ask(confirm: Arc<dyn Confirm>, title: &str, message: String) -> Result<(), ApiError> {
    let title = title.to_string();
    let yes = tokio::task::spawn_blocking(move || confirm.confirm(&title, &message))
        .await
        .map_err(|e| ApiError::Internal(format!("confirmation dialog failed: {e}")))?;
    if yes {
        Ok(())
    } else {
        Err(ApiError::Cancelled)
    }
}

/// The replay's pace in words: the canary (only when it is part of the selection) and the rate.
fn pace_words(app: &App, options: &ReplayOptions, eligible: i64) -> String {
    let canary = options.canary.unwrap_or(app.config.replay.canary_size);
    let rate = options.rate_per_second.unwrap_or(app.config.replay.rate_per_second);
    if canary > 0 && i64::from(canary) < eligible {
        format!("{canary} go first; the rest follow only if all of those are delivered, {rate} a second.")
    } else {
        format!("They are sent {rate} a second.")
    }
}

/// Previews, asks for confirmation with the preview's sentence (fallbacks and pace included), and starts the
/// replay only on "yes".
pub async fn replay_confirmed(
    app: &App,
    selection: &ReplaySelection,
    reason: &str,
    options: &ReplayOptions,
    actor: &str,
    confirm: Arc<dyn Confirm>,
) -> Result<ReplayReceipt, ApiError> {
    let preview = replay_preview(app, selection).await?;
    if preview.eligible == 0 {
        return Err(ApiError::BadRequest(preview.summary));
    }
    let message = format!(
        "{}\n\n{} They go through normal delivery again, with fresh attempts. Reason: {}",
        preview.summary,
        pace_words(app, options, preview.eligible),
        if reason.trim().is_empty() { "none given" } else { reason.trim() }
    );
    ask(confirm, "Replay dead letters", message).await?;
    // What the person said yes to: the leads counted before the question, not those parked while it was open.
    replay(
        app,
        &ReplayRequest {
            selection: selection.as_of(preview.as_of),
            expected: preview.eligible,
            reason: reason.into(),
            options: options.clone(),
        },
        actor,
    )
    .await
}

pub async fn replay_progress(app: &App, replay_id: i64) -> Result<ReplayProgress, ApiError> {
    replay::progress(&app.store, replay_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no replay with id {replay_id}")))
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
}

pub async fn sources(app: &App) -> Result<Vec<SourceView>, ApiError> {
    let now = app.clock.now();
    let mut out = Vec::new();
    for (name, sc) in &app.config.sources {
        out.push(SourceView {
            status: crate::features::monitor::sources::assess_source(app, name, now).await?,
            kind: match sc.kind {
                crate::config::SourceKind::Generic => "generic".into(),
                crate::config::SourceKind::Meta => "meta".into(),
            },
            reconciles: sc.reconcile.is_some(),
            signed: sc.is_signed(),
            last_reconciliation: reconcile::latest(&app.store, name).await?,
            recovered_7d: reconcile::recovered_since(&app.store, name, now - chrono::Duration::days(7)).await?,
            poll: match &sc.poll {
                Some(pc) => Some(crate::features::poll::view(app, name, pc, now).await?),
                None => None,
            },
        });
    }
    Ok(out)
}

/// Runs a source's reconciliation now (the button on the Sources page), announcing what it finds like a
/// scheduled run does.
pub async fn reconcile_now(app: &App, source: &str) -> Result<ReconciliationRun, ApiError> {
    let sc = app.config.sources.get(source).ok_or_else(|| ApiError::NotFound(format!("no source named `{source}`")))?;
    if sc.reconcile.is_none() {
        return Err(ApiError::BadRequest(format!(
            "source `{source}` cannot be reconciled: add a [sources.{source}.reconcile] section to the configuration"
        )));
    }
    let client = reconcile::client();
    reconcile::reconcile(app, &app.ingest, &client, app.notifier.as_ref(), source, app.clock.now()).await.map_err(|e| {
        match e {
            ReconcileError::Storage(e) => ApiError::Internal(format!("{e:#}")),
            other => ApiError::Conflict(format!("reconciliation failed: {other}")),
        }
    })
}

/// Delivery figures over `range` (`24h` or `7d`).
pub async fn figures(app: &App, range: &str) -> Result<DeliveryFigures, ApiError> {
    let span = Range::parse(range)
        .ok_or_else(|| ApiError::BadRequest(format!("unknown range `{range}`: use 1h, 24h or 7d")))?
        .span();
    let now = app.clock.now();
    let targets: Vec<String> = app.config.targets.keys().cloned().collect();
    Ok(figures::figures(&app.store, &targets, now - span, now).await?)
}

pub async fn alerts(app: &App) -> Result<Vec<Alert>, ApiError> {
    Ok(alerts::list(&app.store, 200).await?)
}

/// The alert channels besides the desktop (Slack, e-mail, webhooks): what each has waiting, when it last
/// delivered, and why its last send failed while that matters.
pub async fn alert_channels(app: &App) -> Result<Vec<crate::features::monitor::channels::ChannelView>, ApiError> {
    Ok(crate::features::monitor::channels::views(app).await?)
}

pub async fn acknowledge_alert(app: &App, id: i64, by: &str) -> Result<Alert, ApiError> {
    let alert = alerts::acknowledge(&app.store, id, by, app.clock.now())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no alert with id {id}")))?;
    let _ = app.live.send(LiveEvent::AlertsChanged);
    Ok(alert)
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

pub async fn targets(app: &App) -> Result<Vec<TargetView>, ApiError> {
    let paused = app.store.target_pauses().await?;
    Ok(app
        .config
        .targets
        .iter()
        .map(|(name, t)| {
            let endpoint = reqwest::Url::parse(&t.url.replace("{external_id}", "x"))
                .map(|u| {
                    format!("{}://{}", u.scheme(), u.host_str().unwrap_or("?"))
                        + &u.port().map(|p| format!(":{p}")).unwrap_or_default()
                })
                .unwrap_or_default();
            let runtime = app.worker.as_ref().and_then(|w| w.targets.get(name));
            let (breaker, opened) =
                runtime.as_ref().map(|r| r.breaker_state()).map_or((None, None), |(s, o)| (Some(s), o));
            let p = paused.iter().find(|p| &p.target == name);
            let (concurrency, rate) = runtime.as_ref().map(|r| r.pace()).unwrap_or((t.concurrency, None));
            TargetView {
                name: name.clone(),
                kind: serde_json::to_value(t.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
                hold: runtime.and_then(|r| r.hold(app.clock.now())),
                rate: rate.or_else(|| t.rate.map(|r| r.to_string())),
                concurrency,
                mapping: t.mapping.iter().filter_map(|r| serde_json::to_value(r).ok()).collect(),
                endpoint,
                strategy: serde_json::to_value(t.strategy())
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                breaker,
                breaker_opened_at: opened,
                paused: p.is_some(),
                paused_by: p.map(|p| p.paused_by.clone()),
                paused_at: p.map(|p| p.paused_at),
            }
        })
        .collect())
}

/// The exact request `target` would send for the stored lead `lead` (its external id, `source:source_ref`):
/// a dry run, nothing is sent. A lead the target's mapping cannot use is answered with the reason.
pub async fn target_preview(
    app: &App,
    target: &str,
    lead: &str,
) -> Result<crate::features::targets::RequestPreview, ApiError> {
    let runtime = target_runtime(app, target)?;
    let job = app.store.job_preview(lead.trim(), target).await?.ok_or_else(|| {
        ApiError::NotFound(format!("no lead `{}` (write it as source:id, e.g. webform:L-1)", lead.trim()))
    })?;
    runtime.preview(&job).map_err(|f| {
        let field = f.field.map(|x| format!(" (field {x})")).unwrap_or_default();
        ApiError::BadRequest(format!("{}{field}", f.reason))
    })
}

/// Test connection: one harmless authenticated request to `target`, answered in plain words.
pub async fn check_target(app: &App, target: &str) -> Result<crate::features::targets::ConnectionCheck, ApiError> {
    Ok(target_runtime(app, target)?.check().await)
}

fn target_runtime(
    app: &App,
    target: &str,
) -> Result<std::sync::Arc<crate::features::delivery::worker::TargetRuntime>, ApiError> {
    if !app.config.targets.contains_key(target) {
        return Err(ApiError::NotFound(format!("no target named `{target}`")));
    }
    app.worker
        .as_ref()
        .and_then(|w| w.targets.get(target))
        .ok_or_else(|| ApiError::BadRequest("this process runs no worker, so it holds no connection to targets".into()))
}

/// What a reload of secrets did to one target, in words.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct SecretReload {
    pub target: String,
    pub ok: bool,
    pub message: String,
}

/// Reads every target's credentials again (the secrets file as it is now, then the environment) and uses them
/// from the next request on — no restart. A target that was refusing its credential sends its waiting leads at
/// once (one probes first, the rest follow when it works). A target whose secret cannot be read keeps the
/// credential it had. Triggered by the UI's *Reload secrets*, `leadline reload` and SIGHUP.
pub async fn reload_secrets(app: &App, by: &str) -> Result<Vec<SecretReload>, ApiError> {
    let worker = app
        .worker
        .as_ref()
        .ok_or_else(|| ApiError::BadRequest("this process runs no worker, so it holds no credentials".into()))?;
    let now = app.clock.now();
    let mut out = Vec::new();
    for (name, runtime) in worker.targets.current().iter() {
        let (ok, message) = match runtime.reload(&app.config) {
            Ok(true) => {
                // Team mode: the other processes end their hold too (the new credential is tried at once).
                if app.store.is_shared() {
                    app.store.end_credential_hold(name).await?;
                }
                let waiting = app.store.make_due(name, now).await?;
                (true, format!("credentials read again; it was refusing them: {waiting} waiting leads go now"))
            }
            Ok(false) => (true, "credentials read again".to_string()),
            Err(e) => (false, format!("{e:#} — it keeps the credentials it had")),
        };
        if ok {
            tracing::info!(target = %name, by, "secrets reloaded");
        } else {
            tracing::warn!(target = %name, by, error = %message, "secrets not reloaded");
        }
        out.push(SecretReload { target: name.clone(), ok, message });
    }
    worker.wake.notify_one();
    Ok(out)
}

/// Pauses or resumes a target: while paused, nothing is sent to it; its leads queue safely.
pub async fn set_target_paused(app: &App, name: &str, paused: bool, by: &str) -> Result<TargetView, ApiError> {
    if !app.config.targets.contains_key(name) {
        return Err(ApiError::NotFound(format!("no target named `{name}`")));
    }
    if paused {
        app.store.pause_target(name, by, app.clock.now()).await?;
    } else {
        app.store.resume_target(name).await?;
    }
    if let Some(r) = app.worker.as_ref().and_then(|w| w.targets.get(name)) {
        r.set_paused(paused);
        if let (false, Some(w)) = (paused, &app.worker) {
            w.wake.notify_one();
        }
    }
    tracing::info!(target = name, paused, by, "target pause changed");
    targets(app).await?.into_iter().find(|t| t.name == name).ok_or_else(|| ApiError::NotFound(name.to_string()))
}

/// Applies the stored pauses to the worker (at start).
pub async fn load_pauses(app: &App) -> anyhow::Result<()> {
    let pauses = app.store.target_pauses().await?;
    if let Some(w) = &app.worker {
        for p in pauses {
            if let Some(r) = w.targets.get(&p.target) {
                r.set_paused(true);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::delivery::worker::{Hold, HoldReason};
    use crate::model::Place;
    use crate::store::{QueueHealth, TargetHealth};

    fn alert(kind: &str, severity: &str, title: &str) -> Alert {
        let t = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z").unwrap().to_utc();
        Alert {
            id: 1,
            kind: kind.parse().unwrap(),
            key: "k".into(),
            severity: severity.parse().unwrap(),
            title: title.into(),
            detail: String::new(),
            opened_at: t,
            last_seen_at: t,
            occurrences: 1,
            acknowledged_at: None,
            acknowledged_by: None,
            resolved_at: None,
            resolution_note: None,
            state: crate::store::AlertState::Open,
            notified_at: None,
            notifications: 0,
            held: None,
            place: crate::model::Place::of_alert(kind.parse().unwrap(), "k"),
        }
    }

    fn queue(pending: i64) -> QueueHealth {
        QueueHealth {
            generated_at: Utc::now(),
            overall: TargetHealth { target: "*".into(), pending, ..Default::default() },
            targets: vec![],
        }
    }

    #[test]
    fn the_verdict_follows_the_worst_fact() {
        let until = Utc::now() + chrono::Duration::minutes(2);
        let ok = verdict(&[], &[("crm".into(), TargetSituation::Sending)], &queue(3));
        assert_eq!(
            (ok.level, ok.reason.as_str(), ok.link),
            (VerdictLevel::AllWell, "3 leads on the way, nothing stuck", None)
        );

        let limited = vec![("crm".into(), TargetSituation::RateLimited { until })];
        let v = verdict(&[], &limited, &queue(3));
        assert_eq!(v.level, VerdictLevel::Degraded);
        assert!(v.reason.starts_with("crm is rate-limited until"), "{}", v.reason);

        let quiet = [alert("volume_drop", "warning", "Fewer leads than usual from meta")];
        let v = verdict(&quiet, &limited, &queue(0));
        assert_eq!((v.level, v.link), (VerdictLevel::Degraded, Some(Place::source("k"))));

        let refused = vec![(
            "meta_details".into(),
            TargetSituation::RefusingCredentials { credential: "META_TOKEN".into(), next_try: until },
        )];
        let v = verdict(&quiet, &refused, &queue(0));
        assert_eq!((v.level, v.link), (VerdictLevel::NeedsPerson, Some(Place::target("meta_details"))));
        assert!(v.reason.contains("META_TOKEN"), "{}", v.reason);

        let down = vec![("crm".into(), TargetSituation::Down { since: None })];
        assert_eq!(verdict(&[], &down, &queue(9)).level, VerdictLevel::NeedsPerson);

        let paused = vec![("crm".into(), TargetSituation::PausedByPerson)];
        let v = verdict(&[], &paused, &queue(9));
        assert_eq!(
            (v.level, v.reason.as_str()),
            (VerdictLevel::Degraded, "crm is paused by a person: its leads wait until resumed")
        );

        let silent = [
            alert("silence", "critical", "No leads from partner for 31 min"),
            alert("source_failing", "critical", "Leadline cannot reach meta's lead list"),
            alert("volume_drop", "warning", "Fewer leads"),
        ];
        let v = verdict(&silent, &[], &queue(0));
        assert_eq!(v.level, VerdictLevel::NeedsPerson);
        assert_eq!(v.reason, "No leads from partner for 31 min (and 1 more)");
        assert_eq!(v.link, Some(Place::source("k")));

        // Open dead letters of a new cause need a person (only one can fix the data or the mapping), although
        // the alert is announced as a warning: above a rate limit and a quieter source, linked to the cause group.
        let cause_key = "crm: Property values were not valid: phone \"…\"";
        let new_cause = Alert {
            key: cause_key.into(),
            place: Place::of_alert(crate::store::AlertKind::NewCause, cause_key),
            ..alert("new_cause", "warning", "A new cause of dead letters at crm: bad lead data")
        };
        let v = verdict(&[quiet[0].clone(), new_cause.clone()], &limited, &queue(3));
        assert_eq!(v.level, VerdictLevel::NeedsPerson);
        assert_eq!(
            v.reason,
            "A new cause of dead letters at crm: bad lead data — its leads are parked until a person fixes the \
             cause and replays them"
        );
        let link = v.link.expect("a link to the cause group");
        assert_eq!(link.page, crate::model::Page::DeadLetters);
        assert_eq!(
            (link.target.as_deref(), link.cause.as_deref()),
            (Some("crm"), Some(cause_key.split_once(": ").unwrap().1))
        );
        let two = verdict(&[new_cause.clone(), new_cause.clone()], &[], &queue(0));
        assert!(
            two.reason.starts_with("A new cause of dead letters at crm: bad lead data (and 1 more) — "),
            "{}",
            two.reason
        );
        // What only a person can fix at a target, and critical alerts, come first.
        let v = verdict(std::slice::from_ref(&new_cause), &down, &queue(0));
        assert_eq!(v.link, Some(Place::target("crm")));
        let v = verdict(&[silent[0].clone(), new_cause.clone()], &[], &queue(0));
        assert_eq!(v.reason, "No leads from partner for 31 min");
        // The tray reads the same verdict: red, with the reason beneath the counts.
        let health = crate::features::monitor::health::HealthView {
            queue: queue(0),
            breakers: vec![],
            verdict: verdict(std::slice::from_ref(&new_cause), &[], &queue(0)),
        };
        let glance = crate::features::monitor::glance::glance(&health);
        assert_eq!(glance.level, crate::features::monitor::glance::GlanceLevel::NeedsPerson);
        assert!(glance.tooltip().contains("A new cause of dead letters at crm"), "{}", glance.tooltip());
    }

    #[test]
    fn a_targets_situation_puts_what_a_person_must_know_first() {
        let until = Utc::now() + chrono::Duration::minutes(2);
        let credentials = Hold { until, reason: HoldReason::Credentials { credential: "T".into() } };
        let limited = Hold { until, reason: HoldReason::RateLimited };
        let opened = Some(Utc::now());
        assert_eq!(
            situation(true, Some(credentials.clone()), BreakerState::Open, opened),
            TargetSituation::PausedByPerson
        );
        assert_eq!(
            situation(false, Some(credentials), BreakerState::Open, opened),
            TargetSituation::RefusingCredentials { credential: "T".into(), next_try: until }
        );
        assert_eq!(
            situation(false, Some(limited.clone()), BreakerState::Open, opened),
            TargetSituation::Down { since: opened }
        );
        assert_eq!(
            situation(false, Some(limited.clone()), BreakerState::HalfOpen, None),
            TargetSituation::RateLimited { until }
        );
        assert_eq!(situation(false, None, BreakerState::HalfOpen, None), TargetSituation::Testing);
        assert_eq!(situation(false, None, BreakerState::Closed, None), TargetSituation::Sending);
    }
}
