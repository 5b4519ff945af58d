//! Confirmations: what a person is asked before an act that changes many leads, and how the answer is awaited.
//!
//! Each confirmed operation has a *question* here, built from its arguments and a fresh look at the data (a replay's
//! preview, a fix's dry run): the window shows it in a native dialog and, on "yes", runs the operation with the
//! arguments the question returns — pinned to the instant it counted, with the count it stated as `expected`. A
//! browser's page asks the person itself and sends the count it showed. Either way the operation then checks that
//! count against the data, so both ways refuse the same stale request; and a question whose count is not the one
//! the page showed refuses before asking, with the error the operation would give.

use std::sync::Arc;

use super::dto::{
    ContactDoubtArgs, FixAndReplayReceipt, FixAndReplayRequest, FixRequest, ReplayRequest, ResolveRequest,
};
use super::error::ApiError;
use super::letters::fix_dead_letters;
use super::replaying::{contact_doubt_of, fix_and_replay, fix_and_replay_preview, replay, replay_preview};
use crate::features::app::App;
use crate::features::replay::{ReplayError, ReplayOptions, ReplayReceipt, ReplaySelection};
use crate::store::Resolution;

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

/// What to ask a person before an operation runs, and the arguments it then runs with.
pub struct Asked<A> {
    /// `None` when nothing needs asking (a dry run).
    pub question: Option<Question>,
    pub args: A,
}

/// A yes-or-no question: the dialog's title (its first word is the confirming button's) and what will happen.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub title: &'static str,
    pub message: String,
}

impl<A> Asked<A> {
    fn question(title: &'static str, message: String, args: A) -> Asked<A> {
        Asked { question: Some(Question { title, message }), args }
    }

    /// Asks the question (if any) and gives back the arguments to run with; `Cancelled` on "no".
    pub async fn answered(self, confirm: Arc<dyn Confirm>) -> Result<A, ApiError> {
        if let Some(q) = self.question {
            ask(confirm, q.title, q.message).await?;
        }
        Ok(self.args)
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

/// A replay's question: the preview's sentence (fallbacks included), the pace and the reason. Refused without
/// asking when nothing is eligible, or when the preview no longer counts `expected`.
pub async fn replay_question(
    app: &App,
    _actor: &str,
    request: ReplayRequest,
) -> Result<Asked<ReplayRequest>, ApiError> {
    let preview = replay_preview(app, &request.selection).await?;
    if preview.eligible == 0 {
        return Err(ApiError::BadRequest(preview.summary));
    }
    if preview.eligible != request.expected {
        return Err(ReplayError::SelectionChanged { expected: request.expected, found: preview.eligible }.into());
    }
    let message = format!(
        "{}\n\n{} They go through normal delivery again, with fresh attempts. Reason: {}",
        preview.summary,
        pace_words(app, &request.options, preview.eligible),
        if request.reason.trim().is_empty() { "none given" } else { request.reason.trim() }
    );
    // What the person says yes to: the leads counted before the question, not those parked while it is open.
    let args = ReplayRequest { selection: request.selection.as_of(preview.as_of), ..request };
    Ok(Asked::question("Replay dead letters", message, args))
}

/// Discarding dead letters or marking them fixed by hand: how many (when the page counted them) and the note.
pub async fn resolve_question(
    _app: &App,
    _actor: &str,
    request: ResolveRequest,
) -> Result<Asked<ResolveRequest>, ApiError> {
    let n = request.expected.map(|n| n.to_string()).unwrap_or_else(|| "the selected".into());
    let what = if request.resolution == Resolution::Discarded { "Discard" } else { "Mark as fixed by hand" };
    let message =
        format!("{what}: {n} dead letters? They leave the list and are not sent. Note: {}", request.note.trim());
    Ok(Asked::question("Resolve dead letters", message, request))
}

/// An answer to "did this lead get our message?": what it leads to. Refused without asking when the dead letter is
/// not a first contact in doubt.
pub async fn contact_doubt_question(
    app: &App,
    _actor: &str,
    args: ContactDoubtArgs,
) -> Result<Asked<ContactDoubtArgs>, ApiError> {
    let (letter, doubt) = contact_doubt_of(app, args.id).await?;
    let channel = if doubt.channel == "sms" { "SMS" } else { "WhatsApp message" };
    let sent = doubt.sent_at.format("%Y-%m-%d %H:%M UTC");
    let note = if args.note.trim().is_empty() { "none given" } else { args.note.trim() };
    let (title, message) = if args.arrived {
        (
            "Continue the lead's route",
            format!(
                "Lead {} got the {channel} sent at {sent}: it is recorded as delivered, nothing is sent again, and                  the lead's route goes on from step `{}`. Note: {note}",
                letter.source_ref, letter.target
            ),
        )
    } else {
        (
            "Send the message again",
            format!(
                "Send the {channel} of step `{}` to lead {} once more? The first, sent at {sent}, got no answer and                  no receipt. Send again only if you know it did not arrive: a second hello makes the business look                  careless. The usual checks still apply (opt-out, quiet hours, the lead's age). Note: {note}",
                letter.target, letter.source_ref
            ),
        )
    };
    Ok(Asked::question(title, message, args))
}

/// A field fix: how many leads it changes (a dry run now). A dry run itself is not asked.
pub async fn fix_question(app: &App, actor: &str, request: FixRequest) -> Result<Asked<FixRequest>, ApiError> {
    if request.dry_run {
        return Ok(Asked { question: None, args: request });
    }
    let dry = FixRequest { dry_run: true, ..request.clone() };
    let preview = fix_dead_letters(app, &dry, actor).await?;
    let message = format!(
        "Change `{}` in {} leads? The original data is kept in each lead's history.",
        request.fix.field, preview.changed
    );
    Ok(Asked::question("Fix lead data", message, request))
}

/// A fix and its replay, asked once: the fix, the replay's counts and pace, the reason. Refused without asking
/// when the fix no longer changes `expected_changed` leads, or changes none.
pub async fn fix_and_replay_question(
    app: &App,
    actor: &str,
    request: FixAndReplayRequest,
) -> Result<Asked<FixAndReplayRequest>, ApiError> {
    let preview = fix_and_replay_preview(app, &request.selection, &request.fix, actor).await?;
    if preview.fix.changed != request.expected_changed {
        return Err(ApiError::Conflict(format!(
            "the selection changed since the preview: the fix would now change {} leads, not {}; look again",
            preview.fix.changed, request.expected_changed
        )));
    }
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
    // What the person says yes to: the leads counted before the question, not those parked while it is open.
    let args = FixAndReplayRequest { selection: request.selection.as_of(preview.as_of), ..request };
    Ok(Asked::question("Fix and replay dead letters", message, args))
}

/// Previews, asks for confirmation with the preview's sentence (fallbacks and pace included), and starts the
/// replay only on "yes": the window's `replay` for a caller that has not previewed (its count is taken now).
pub async fn replay_confirmed(
    app: &App,
    selection: &ReplaySelection,
    reason: &str,
    options: &ReplayOptions,
    actor: &str,
    confirm: Arc<dyn Confirm>,
) -> Result<ReplayReceipt, ApiError> {
    let expected = replay_preview(app, selection).await?.eligible;
    let request =
        ReplayRequest { selection: selection.clone(), expected, reason: reason.into(), options: options.clone() };
    let request = replay_question(app, actor, request).await?.answered(confirm).await?;
    replay(app, &request, actor).await
}

/// Previews, asks once — the fix, the replay's counts and pace, the reason — and does both only on "yes".
pub async fn fix_and_replay_confirmed(
    app: &App,
    request: &FixAndReplayRequest,
    actor: &str,
    confirm: Arc<dyn Confirm>,
) -> Result<FixAndReplayReceipt, ApiError> {
    let request = fix_and_replay_question(app, actor, request.clone()).await?.answered(confirm).await?;
    fix_and_replay(app, &request, actor).await
}
