//! Replay: dead letters back through the normal delivery path — previewed, staged, paced, audited.
//!
//! **Preview** counts what a selection (explicit dead letters, or every one matching a filter) would do: how many
//! are eligible, per target; how many are not and why (already resolved, data purged, queued in another running
//! replay, unknown); which time-sensitive steps will run their fallback because the lead is too old. It is one
//! aggregate query, so it stays fast over a million dead letters.
//!
//! **Start** records the replay (who, when, why, the selection, canary size and pace) and its items — each with
//! its prior class and reason, in a fixed order — in one transaction, and refuses when the selection no longer
//! matches the preview (`expected`). Nothing is sent yet.
//!
//! **The runner** ([`runner`]) then sends items back in the background: the canary first (default 10, never more
//! than all but one of the selection: [`canary_for`]); the rest
//! only once every canary lead was delivered, at `rate_per_second`, never while the target's breaker is open, the
//! target is paused or it rate-limited us in the last seconds, and with a bounded number in flight. Sending back
//! is the normal path: state `pending`, attempts reset, trigger `manual`, replay generation + 1 (fresh
//! idempotency keys, so a CRM that stores answers per key cannot replay a stale error). A replay can be cancelled
//! (what was not sent back stays an open dead letter, untouched) or paused and resumed; every step is an event.
//!
//! **Report**: delivered, failed again with the same reason, failed with a new reason — each item linked to its
//! dead letter.

pub mod fix;
pub mod runner;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::store::{
    FallbackRule as Rule, NewReplay, PreviewCategory, ReplayEventKind, ReplayOutcome, ReplayStatus, Resolution,
    ResolveOutcome, StartOutcome, StatusChange, Store,
};
pub use crate::store::{ReplayEvent, ReplayHistoryEntry, ReplayProgress, ReplayReportItem, ReplaySelection};

/// A time-sensitive step that will run its fallback for leads too old for it.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct FallbackPlan {
    pub target: String,
    pub fallback: String,
    pub max_lead_age_minutes: u64,
    /// Eligible leads older than that.
    pub count: i64,
}

/// Why selected dead letters cannot be replayed.
#[derive(Debug, Clone, Default, Serialize, PartialEq, ts_rs::TS)]
pub struct NotEligible {
    /// Replayed, discarded or fixed by hand before.
    pub already_resolved: i64,
    /// The lead's data was purged (retention).
    pub payload_purged: i64,
    /// Waiting in another replay that is still running.
    pub queued_in_another_replay: i64,
    /// Chosen ids that are not dead letters.
    pub unknown: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayPreview {
    /// Open dead letters that will be sent back.
    pub eligible: i64,
    pub by_target: BTreeMap<String, i64>,
    /// Selected but not eligible (the sum of `reasons`).
    pub not_eligible: i64,
    pub reasons: NotEligible,
    pub fallbacks: Vec<FallbackPlan>,
    /// Eligible leads received more than 24 h ago.
    pub older_than_24h: i64,
    /// The sentence the confirmation shows.
    pub summary: String,
    /// When it was counted: every dead letter counted was parked before this instant. Replaying the selection
    /// pinned to it ([`ReplaySelection::as_of`]) replays exactly these, not those parked since.
    pub as_of: DateTime<Utc>,
}

/// How to pace a replay; the configured defaults (`[replay]`) apply when left out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, ts_rs::TS)]
#[serde(default)]
pub struct ReplayOptions {
    /// Leads sent first; the rest wait until all of these were delivered. 0: no canary.
    pub canary: Option<u32>,
    /// Leads sent back per second after the canary.
    pub rate_per_second: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct ReplayReceipt {
    pub replay_id: i64,
    /// Items the replay will send back.
    pub queued: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("nothing selected: choose dead letters or a filter")]
    EmptySelection,
    #[error("the selection changed since the preview ({expected} expected, {found} now): preview again")]
    SelectionChanged { expected: i64, found: i64 },
    #[error("nothing to replay: none of the selected leads is an open dead letter")]
    NothingEligible,
    #[error("{0}")]
    Invalid(String),
    #[error("no replay with id {0}")]
    NotFound(i64),
    #[error(transparent)]
    Storage(#[from] anyhow::Error),
}

fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Time-sensitive targets: where leads too old for them go instead.
fn time_sensitive(config: &Config) -> Vec<Rule> {
    config
        .targets
        .iter()
        .filter_map(|(name, t)| {
            Some(Rule { target: name.clone(), fallback: t.fallback.clone()?, max_lead_age_minutes: t.max_lead_age()? })
        })
        .collect()
}

pub async fn preview(
    store: &Store,
    config: &Config,
    selection: &ReplaySelection,
    now: DateTime<Utc>,
) -> Result<ReplayPreview, ReplayError> {
    if selection.is_empty() {
        return Err(ReplayError::EmptySelection);
    }
    let plans = time_sensitive(config);
    let rows = store.replay_preview(selection, &plans, now).await?;

    let mut by_target: BTreeMap<String, i64> = BTreeMap::new();
    let mut reasons = NotEligible::default();
    let mut older = 0;
    let mut fallback_counts: BTreeMap<String, i64> = BTreeMap::new();
    let mut found = 0;
    for row in rows {
        let n = row.count;
        found += n;
        match row.category {
            PreviewCategory::Eligible => {
                *by_target.entry(row.target.clone()).or_default() += n;
                older += row.older_than_24h;
                if row.fallback.is_some() {
                    *fallback_counts.entry(row.target).or_default() += n;
                }
            }
            PreviewCategory::Resolved => reasons.already_resolved += n,
            PreviewCategory::Purged => reasons.payload_purged += n,
            PreviewCategory::Queued => reasons.queued_in_another_replay += n,
        }
    }
    if let Some(ids) = &selection.ids {
        let distinct: std::collections::BTreeSet<i64> = ids.iter().copied().collect();
        reasons.unknown = (distinct.len() as i64 - found).max(0);
    }
    let fallbacks: Vec<FallbackPlan> = plans
        .iter()
        .filter_map(|rule| {
            let count = fallback_counts.get(&rule.target).copied().unwrap_or(0);
            (count > 0).then(|| FallbackPlan {
                target: rule.target.clone(),
                fallback: rule.fallback.clone(),
                max_lead_age_minutes: rule.max_lead_age_minutes,
                count,
            })
        })
        .collect();
    let eligible: i64 = by_target.values().sum();
    let not_eligible =
        reasons.already_resolved + reasons.payload_purged + reasons.queued_in_another_replay + reasons.unknown;
    let summary = summarize(eligible, &by_target, &reasons, &fallbacks, older);
    Ok(ReplayPreview {
        eligible,
        by_target,
        not_eligible,
        reasons,
        fallbacks,
        older_than_24h: older,
        summary,
        as_of: now,
    })
}

/// The confirmation's sentence: what will happen, in words.
pub fn summarize(
    eligible: i64,
    by_target: &BTreeMap<String, i64>,
    reasons: &NotEligible,
    fallbacks: &[FallbackPlan],
    older: i64,
) -> String {
    let targets = by_target
        .iter()
        .map(|(t, c)| if by_target.len() == 1 { t.clone() } else { format!("{t} ({c})") })
        .collect::<Vec<_>>()
        .join(" and ");
    let mut s = if eligible == 0 {
        "Nothing to replay: no selected lead is an open dead letter.".to_string()
    } else {
        format!("Replay {} to {targets}?", plural(eligible, "lead", "leads"))
    };
    for f in fallbacks {
        s.push_str(&format!(
            " {} older than {} min for {}: they get {} instead.",
            plural(f.count, "lead is", "leads are"),
            f.max_lead_age_minutes,
            f.target,
            f.fallback
        ));
    }
    if older > 0 && fallbacks.is_empty() {
        s.push_str(&format!(" {} older than 24 h.", plural(older, "lead is", "leads are")));
    }
    let skipped: Vec<String> = [
        (reasons.already_resolved, "already resolved"),
        (reasons.payload_purged, "with purged data"),
        (reasons.queued_in_another_replay, "queued in another replay"),
        (reasons.unknown, "unknown"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, why)| format!("{n} {why}"))
    .collect();
    if !skipped.is_empty() {
        s.push_str(&format!(" Skipped: {}.", skipped.join(", ")));
    }
    s
}

/// The canary a replay of `selection` leads gets when `requested` were asked for (by a person, or the
/// configuration's `replay.canary_size` for an auto-replay): a part of the selection sent first, so never all of
/// it — at most all but one lead, for a canary of the whole selection would hold nothing back — and none for one
/// or two leads, where a canary would only delay the other. The UI's dialogs apply the same rule. Pure.
pub fn canary_for(requested: u32, selection: i64) -> u32 {
    if selection <= 2 {
        0
    } else {
        requested.min(u32::try_from(selection - 1).unwrap_or(u32::MAX))
    }
}

/// Records the replay and its items (nothing is sent yet; the runner does that). `expected` is the preview's
/// `eligible`: if the selection changed since, nothing happens and `SelectionChanged` says so.
#[allow(clippy::too_many_arguments)]
pub async fn start(
    store: &Store,
    config: &Config,
    selection: &ReplaySelection,
    expected: i64,
    options: &ReplayOptions,
    actor: &str,
    reason: &str,
    auto: bool,
    now: DateTime<Utc>,
) -> Result<ReplayReceipt, ReplayError> {
    let canary = canary_for(options.canary.unwrap_or(config.replay.canary_size), expected);
    let rate = options.rate_per_second.unwrap_or(config.replay.rate_per_second);
    if !(rate > 0.0 && rate <= 10_000.0) {
        return Err(ReplayError::Invalid("the pace must be between 0 and 10,000 leads a second".into()));
    }
    if selection.is_empty() {
        return Err(ReplayError::EmptySelection);
    }
    let plans = time_sensitive(config);
    // Recorded only when exactly `expected` leads are queued: the detail can say so beforehand.
    let detail = format!(
        "{} queued by {actor}: {}; {}, then {rate} a second.",
        plural(expected, "lead", "leads"),
        reason,
        if canary > 0 { format!("canary of {canary} first") } else { "no canary".into() }
    );
    let outcome = store
        .start_replay(&NewReplay {
            selection,
            expected,
            actor,
            reason,
            canary,
            rate_per_second: rate,
            auto,
            fallbacks: &plans,
            detail: &detail,
            now,
        })
        .await?;
    match outcome {
        StartOutcome::Started { replay_id, queued } => {
            tracing::info!(replay_id, queued, actor, reason, "replay started");
            Ok(ReplayReceipt { replay_id, queued })
        }
        StartOutcome::Changed { found } => Err(ReplayError::SelectionChanged { expected, found }),
        StartOutcome::NothingEligible => Err(ReplayError::NothingEligible),
    }
}

/// Stops a replay: what was not sent back stays an open dead letter, untouched; what was sent goes on.
pub async fn cancel(store: &Store, replay_id: i64, actor: &str, now: DateTime<Utc>) -> Result<(), ReplayError> {
    set_status(
        store,
        replay_id,
        &[ReplayStatus::Running, ReplayStatus::Paused],
        ReplayStatus::Cancelled,
        ReplayEventKind::Cancelled,
        &format!("cancelled by {actor}"),
        now,
    )
    .await
}

/// Pauses a running replay (nothing more is sent back until resumed).
pub async fn pause(store: &Store, replay_id: i64, actor: &str, now: DateTime<Utc>) -> Result<(), ReplayError> {
    set_status(
        store,
        replay_id,
        &[ReplayStatus::Running],
        ReplayStatus::Paused,
        ReplayEventKind::Paused,
        &format!("paused by {actor}"),
        now,
    )
    .await
}

/// Resumes a paused replay — also one the canary stopped, which then goes on past the canary.
pub async fn resume(store: &Store, replay_id: i64, actor: &str, now: DateTime<Utc>) -> Result<(), ReplayError> {
    set_status(
        store,
        replay_id,
        &[ReplayStatus::Paused],
        ReplayStatus::Running,
        ReplayEventKind::Resumed,
        &format!("resumed by {actor}"),
        now,
    )
    .await
}

async fn set_status(
    store: &Store,
    replay_id: i64,
    from: &[ReplayStatus],
    to: ReplayStatus,
    kind: ReplayEventKind,
    detail: &str,
    now: DateTime<Utc>,
) -> Result<(), ReplayError> {
    match store.change_replay_status(replay_id, from, to, kind, detail, now).await? {
        StatusChange::Changed => Ok(()),
        StatusChange::NotFound => Err(ReplayError::NotFound(replay_id)),
        StatusChange::Refused(status) => {
            Err(ReplayError::Invalid(format!("replay {replay_id} is {status}: it cannot be {kind}")))
        }
    }
}

pub async fn progress(store: &Store, replay_id: i64) -> anyhow::Result<Option<ReplayProgress>> {
    store.replay_progress(replay_id).await
}

/// The most recent replays, newest first.
pub async fn recent(store: &Store, limit: u32) -> anyhow::Result<Vec<ReplayProgress>> {
    let mut out = Vec::new();
    for id in store.recent_replay_ids(limit).await? {
        if let Some(p) = progress(store, id).await? {
            out.push(p);
        }
    }
    Ok(out)
}

/// The items of a replay with their outcome, optionally only one outcome; failures first.
pub async fn report(
    store: &Store,
    replay_id: i64,
    outcome: Option<ReplayOutcome>,
    limit: u32,
) -> anyhow::Result<Vec<ReplayReportItem>> {
    store.replay_report(replay_id, outcome, limit).await
}

pub async fn history(store: &Store, delivery_id: i64) -> anyhow::Result<Vec<ReplayHistoryEntry>> {
    store.replay_history(delivery_id).await
}

/// Marks the selection's open dead letters as resolved by hand — `discarded` (not wanted: spam, a test lead) or
/// `fixed_manually` (someone entered it in the CRM) — with who, when and why. Returns how many.
pub async fn resolve(
    store: &Store,
    selection: &ReplaySelection,
    resolution: Resolution,
    note: &str,
    actor: &str,
    expected: Option<i64>,
    now: DateTime<Utc>,
) -> Result<i64, ReplayError> {
    if !matches!(resolution, Resolution::Discarded | Resolution::FixedManually) {
        return Err(ReplayError::Invalid(format!(
            "`{resolution}` is not a resolution: use discarded or fixed_manually"
        )));
    }
    if note.trim().is_empty() {
        return Err(ReplayError::Invalid("say why: the note is kept with each dead letter".into()));
    }
    if selection.is_empty() {
        return Err(ReplayError::EmptySelection);
    }
    let n = match store.resolve_dead_letters(selection, resolution, note, actor, expected, now).await? {
        ResolveOutcome::Resolved(n) => n,
        ResolveOutcome::Changed { found } => {
            return Err(ReplayError::SelectionChanged { expected: expected.unwrap_or(found), found })
        }
    };
    tracing::info!(resolution = resolution.as_str(), n, actor, "dead letters resolved by hand");
    Ok(n)
}

/// Purges the data of leads whose dead letters were resolved by hand more than `days` ago and that have nothing
/// left to deliver. Rows, attempts and statistics stay; fixes lose their before/after values. Returns how many
/// leads were purged.
pub async fn purge_resolved(store: &Store, days: u64, now: DateTime<Utc>) -> anyhow::Result<u64> {
    if days == 0 {
        return Ok(0);
    }
    let n = store.purge_resolved_leads(now - chrono::Duration::days(days as i64), now).await?;
    if n > 0 {
        tracing::info!(leads = n, days, "purged the data of leads resolved by hand");
    }
    Ok(n)
}

/// Purges the data of leads delivered everywhere more than `days` ago (`privacy.delivered_payload_retention_days`),
/// in batches of 10,000 until none is left, pausing between batches as long as each took, so that delivery, which
/// shares the one writer, keeps going while a large backlog is caught up (the first run after an upgrade, say). Returns how many
/// leads were purged.
pub async fn purge_delivered(store: &Store, days: u64, now: DateTime<Utc>) -> anyhow::Result<u64> {
    if days == 0 {
        return Ok(0);
    }
    let cutoff = now - chrono::Duration::days(days as i64);
    let mut total = 0;
    loop {
        let started = std::time::Instant::now();
        let n = store.purge_delivered_leads(cutoff, now).await?;
        total += n;
        if n < 10_000 {
            break;
        }
        // As long again as the batch took (at least 0.1 s): the purge holds the writer at most half the time.
        tokio::time::sleep(started.elapsed().max(std::time::Duration::from_millis(100))).await;
    }
    if total > 0 {
        tracing::info!(
            leads = total,
            days,
            "purged the data of delivered leads (privacy.delivered_payload_retention_days)"
        );
    }
    Ok(total)
}

/// The open dead letters the selection holds now: (delivery id, event id). For fixes.
pub async fn selected_events(store: &Store, selection: &ReplaySelection) -> Result<Vec<(i64, i64)>, ReplayError> {
    if selection.is_empty() {
        return Err(ReplayError::EmptySelection);
    }
    Ok(store.selected_open_events(selection).await?)
}

#[cfg(test)]
mod tests {
    use super::canary_for;

    #[test]
    fn a_canary_is_a_part_of_the_selection_never_all_of_it() {
        // The configuration's 10 for an auto-replay of 3 leads: 2 go first, the third waits for them.
        assert_eq!(canary_for(10, 3), 2);
        assert_eq!(canary_for(10, 11), 10);
        assert_eq!(canary_for(10, 10), 9);
        assert_eq!(canary_for(500, 10_000), 500);
        // One or two leads: no canary.
        assert_eq!(canary_for(10, 2), 0);
        assert_eq!(canary_for(10, 1), 0);
        assert_eq!(canary_for(10, 0), 0);
        assert_eq!(canary_for(0, 100), 0);
        assert_eq!(canary_for(u32::MAX, i64::MAX), u32::MAX);
    }
}
