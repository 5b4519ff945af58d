//! Replays: the preview, the replay itself, its progress, report and controls, and a field fix with the replay
//! of the leads it changes as one act.

use super::dto::{
    ContactDoubtArgs, FixAndReplayPreview, FixAndReplayReceipt, FixAndReplayRequest, FixRequest, ReplayRequest,
};
use super::error::ApiError;
use super::letters::{check_selection, fix_dead_letters};
use crate::features::app::{App, LiveEvent};
use crate::features::contact::doubt::{self, ContactDoubt};
use crate::features::replay::fix::{self, FieldFix, FixReport};
use crate::features::replay::ReplayOptions;
use crate::features::replay::{self, ReplayPreview, ReplayProgress, ReplayReceipt, ReplayReportItem, ReplaySelection};
use crate::model::privacy;
use crate::store::DeadLetter;
use crate::store::ReplayOutcome;

pub async fn replay_preview(app: &App, selection: &ReplaySelection) -> Result<ReplayPreview, ApiError> {
    check_selection(selection)?;
    let mut preview = replay::preview(&app.store, &app.config, selection, app.clock.now()).await?;
    // Read after the count: every dead letter it counted was parked before this instant.
    preview.as_of = app.clock.now();
    Ok(preview)
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

pub async fn replay_progress(app: &App, replay_id: i64) -> Result<ReplayProgress, ApiError> {
    replay::progress(&app.store, replay_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no replay with id {replay_id}")))
}

/// The dead letter `id` and the first contact it is in doubt about; refused for any other dead letter.
pub(crate) async fn contact_doubt_of(app: &App, id: i64) -> Result<(DeadLetter, ContactDoubt), ApiError> {
    let letter = app
        .store
        .dead_letter_detail(id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no delivery with id {id}")))?
        .letter;
    match doubt::doubt_of(&app.store, &app.config, &letter).await? {
        Some(d) => Ok((letter, d)),
        None => Err(ApiError::BadRequest(format!(
            "dead letter {id} is not a first contact in doubt: there is no question about its message to answer"
        ))),
    }
}

/// A person's answer to "did this lead get our message?" on a first contact in doubt (`features::contact::doubt`):
/// the answer is recorded on the message, then the step is replayed — it goes on without sending (it arrived) or
/// sends the message once more (it did not).
pub async fn answer_contact_doubt(app: &App, args: &ContactDoubtArgs, actor: &str) -> Result<ReplayReceipt, ApiError> {
    let note = args.note.trim();
    if note.chars().count() > 500 {
        return Err(ApiError::BadRequest("the note is longer than 500 characters".into()));
    }
    let (letter, _) = contact_doubt_of(app, args.id).await?;
    let selection = ReplaySelection { ids: Some(vec![args.id]), filter: None };
    let preview = replay_preview(app, &selection).await?;
    if preview.eligible != 1 {
        return Err(ApiError::BadRequest(preview.summary));
    }
    let now = app.clock.now();
    if !doubt::settle(&app.store, &letter, args.arrived, now).await? {
        return Err(ApiError::Conflict(
            "the message is no longer in doubt (a receipt came, or someone answered): look again".into(),
        ));
    }
    let how = if note.is_empty() { "a person said so" } else { note };
    let reason = if args.arrived {
        format!("the lead got the first message ({how}): nothing is sent again, the route goes on")
    } else {
        format!("the lead did not get the first message ({how}): it is sent once more")
    };
    let options = ReplayOptions::default();
    let receipt = replay::start(&app.store, &app.config, &selection, 1, &options, actor, &reason, false, now).await?;
    tracing::info!(delivery_id = args.id, arrived = args.arrived, actor, "first contact in doubt answered");
    let _ = app.live.send(LiveEvent::ReplayChanged { replay_id: receipt.replay_id });
    Ok(receipt)
}
