//! Confirmations: what a person is asked before an act that changes many leads, and how the answer is awaited.

use std::sync::Arc;

use super::dto::{FixAndReplayReceipt, FixAndReplayRequest, ReplayRequest};
use super::error::ApiError;
use super::replaying::{fix_and_replay, fix_and_replay_preview, replay, replay_preview};
use crate::features::app::App;
use crate::features::replay::{ReplayOptions, ReplayReceipt, ReplaySelection};

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
