//! Poll mode: Leadline asks a source for its new leads instead of waiting for webhooks.
//!
//! A laptop has no public address, so Meta cannot send it a webhook; a source that can list its leads can be
//! polled instead (`[sources.NAME.poll]`). Every `interval_seconds` (60 by default) each list is read from where
//! the last read stopped, and every lead not yet stored goes through the normal ingest path: the same group-commit
//! writer and duplicate check (the lead's id at the source) as a webhook, marked `via = poll` so its story says
//! "polled". Listing is reconciliation's code (`reconcile::graph_page`, `reconcile::generic_page`): the same
//! endpoints read the same way, with Graph's throttling honoured.
//!
//! - Meta: per lead form, `GET {graph}/{form_id}/leads` with `filtering` on `time_created`, following `paging.next`.
//! - Generic: `GET list_url` with `{since}`, following the page link at `next_pointer`.
//!
//! The place in each list is a cursor in the database (`poll_cursor`, per source and form), so a restart neither
//! skips nor repeats:
//! - `since` is the committed watermark: for a Meta form the newest creation time among the leads stored from it
//!   (Meta's own clock, so no clock skew), for a generic list the start of the last complete pass. A pass lists
//!   from it less `overlap_seconds`, so a lead created while Leadline was down is listed by the next pass.
//! - A pass that reads several pages records, after each page's leads are committed, the next page (Graph's
//!   `paging.cursors.after`, a generic list's next URL) — never before, so a crash repeats at most a page whose
//!   leads are then duplicates. A restart goes on from that page. `since` moves only when the pass is complete,
//!   so no lead is skipped whatever order the source lists in. Graph's cursors do not last for ever: a stored
//!   cursor Graph no longer takes starts the pass over from its watermark (the leads read again are duplicates).
//!
//! Finding leads is what polling is for: it raises no `reconciliation_found` alert (that one means webhooks are
//! lost). A poll that fails keeps the cursor where it was, is tried again after a backoff (Graph's announced wait
//! when throttled), and alerts like a failing reconciliation: `credentials` at once for a refused token,
//! `source_failing` once polling has failed for `failing_alert_minutes`; both resolve after a good poll. Polled
//! leads are the source's volume for the silence and volume-drop checks, like webhooks.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::config::{PollConfig, ReconcileConfig, SourceConfig, SourceKind};
use crate::features::app::{App, LiveEvent};
use crate::features::graph::GraphErrorKind;
use crate::features::ingest::IngestState;
use crate::features::monitor::alerts::{AlertKind, AlertSpec, Severity};
use crate::features::monitor::{self, Notifier};
use crate::features::pipeline;
use crate::features::reconcile::{self, ReconcileError};
use crate::store::{InsertOutcome, NewEvent, PollCursor, PollPass, Via};

/// Most pages read in one poll of one list; a longer list goes on from its cursor at the next poll.
const MAX_PAGES: usize = 200;

/// How often the schedule looks at the configuration again (a source put in poll mode by new settings).
const SCHEDULE_RECHECK: Duration = Duration::from_secs(5);

/// A source in poll mode as the Sources page shows it.
#[derive(Debug, Clone, Serialize, PartialEq, ts_rs::TS)]
pub struct PollView {
    pub interval_seconds: u64,
    /// When the source was last asked (the latest of its forms).
    pub last_poll_at: Option<DateTime<Utc>>,
    /// When it is asked next.
    pub next_poll_at: Option<DateTime<Utc>>,
    /// Leads new to Leadline in the last poll (all forms).
    pub last_found: i64,
    /// Why the last poll failed (the first failing form's reason); `None` when it worked.
    pub last_error: Option<String>,
    /// Leads that came by polling in the last 7 days.
    pub polled_7d: i64,
}

/// What one poll of a source did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PollOutcome {
    /// Leads listed (pages read in this poll).
    pub listed: i64,
    /// Leads not stored before, now stored.
    pub found: i64,
}

/// Polls every source in poll mode at its interval until aborted. The configuration is read again at every
/// turn, so a source put in (or out of) poll mode by new settings is picked up without a restart.
pub async fn run(app: App, ingest: IngestState, notifier: Arc<dyn Notifier>) {
    let client = reconcile::client();
    let mut due: HashMap<String, tokio::time::Instant> = HashMap::new();
    let mut failures: HashMap<String, u32> = HashMap::new();
    loop {
        let polled: Vec<(String, u64)> = app
            .config
            .sources
            .iter()
            .filter_map(|(name, s)| s.poll.as_ref().map(|p| (name.clone(), p.interval_seconds)))
            .collect();
        due.retain(|name, _| polled.iter().any(|(n, _)| n == name));
        let now_i = tokio::time::Instant::now();
        for (name, _) in &polled {
            due.entry(name.clone()).or_insert(now_i);
        }
        let Some((source, at)) = due.iter().min_by_key(|(_, t)| **t).map(|(s, t)| (s.clone(), *t)) else {
            tokio::time::sleep(SCHEDULE_RECHECK).await;
            continue;
        };
        if at > now_i {
            tokio::time::sleep_until(at.min(now_i + SCHEDULE_RECHECK)).await;
            continue;
        }
        // One process of a team polls: the leader (runtime::leadership).
        app.leadership.wait().await;
        let interval = polled.iter().find(|(n, _)| *n == source).map(|(_, i)| *i).unwrap_or(60);
        let now = app.clock.now();
        let failed = failures.entry(source.clone()).or_default();
        let wait = match poll(&app, &ingest, &client, notifier.as_ref(), &source, now).await {
            Ok(o) => {
                tracing::debug!(source, listed = o.listed, found = o.found, "polled");
                *failed = 0;
                Duration::from_secs(interval)
            }
            Err(e) => {
                tracing::warn!(source, error = %e, "poll failed");
                *failed += 1;
                reconcile::next_try_after(&e, *failed, interval, now, &mut rand::rng())
            }
        };
        due.insert(source.clone(), tokio::time::Instant::now() + wait);
        let next = app.clock.now() + chrono::Duration::from_std(wait).unwrap_or_default();
        if let Err(e) = record_next(&app, &source, next).await {
            tracing::error!(source, error = %format!("{e:#}"), "cannot record the next poll");
        }
        let _ = app.live.send(LiveEvent::SourcesChanged);
    }
}

/// Records when `source` is polled next, on each of its lists.
async fn record_next(app: &App, source: &str, at: DateTime<Utc>) -> anyhow::Result<()> {
    for mut cursor in app.store.poll_cursors(source).await? {
        cursor.next_poll_at = Some(at);
        app.store.save_poll_cursor(&cursor).await?;
    }
    Ok(())
}

/// One poll of `source`: each of its lists from its cursor. Every list is read even when one fails (a form
/// whose id is wrong does not stop the others); the first failure is returned.
pub async fn poll(
    app: &App,
    ingest: &IngestState,
    client: &reqwest::Client,
    notifier: &dyn Notifier,
    source: &str,
    now: DateTime<Utc>,
) -> Result<PollOutcome, ReconcileError> {
    let sc = app.config.sources.get(source).ok_or_else(|| ReconcileError::NotConfigured(source.into()))?.clone();
    let pc = sc.poll.clone().ok_or_else(|| ReconcileError::NotConfigured(source.into()))?;
    let forms: Vec<String> = match sc.kind() {
        SourceKind::Meta => pc.form_ids.clone(),
        SourceKind::Generic => vec![String::new()],
        // The configuration gives no other kind a `poll` section.
        _ => return Err(ReconcileError::NotConfigured(source.into())),
    };
    let mut outcome = PollOutcome::default();
    let mut failure: Option<(ReconcileError, DateTime<Utc>)> = None;
    for form in &forms {
        let start = now - chrono::Duration::minutes(pc.lookback_minutes as i64);
        let mut cursor =
            app.store.poll_cursor(source, form).await?.unwrap_or_else(|| PollCursor::new(source, form, start));
        let read = match sc.kind() {
            SourceKind::Meta => poll_form(app, ingest, client, source, &sc, &pc, &mut cursor, now).await,
            SourceKind::Generic => poll_list(app, ingest, client, source, &sc, &pc, &mut cursor, now).await,
            _ => Err(ReconcileError::NotConfigured(source.into())),
        };
        cursor.last_poll_at = Some(now);
        match read {
            Ok(o) => {
                cursor.last_found = o.found;
                cursor.last_error = None;
                cursor.failing_since = None;
                outcome.listed += o.listed;
                outcome.found += o.found;
            }
            Err(e) => {
                cursor.last_found = 0;
                cursor.last_error = Some(e.to_string());
                let since = *cursor.failing_since.get_or_insert(now);
                if failure.is_none() {
                    failure = Some((e, since));
                }
            }
        }
        app.store.save_poll_cursor(&cursor).await?;
    }
    match failure {
        Some((e, since)) => {
            failure_alert(app, notifier, source, &sc, &e, since, now).await;
            Err(e)
        }
        None => {
            let note = "the next poll worked";
            monitor::resolve(app, AlertKind::SourceFailing, source, note, now).await;
            let credential = reconcile::credential_key(app, &sc, source);
            monitor::resolve(app, AlertKind::Credentials, &credential, note, now).await;
            Ok(outcome)
        }
    }
}

/// Whether a Graph error on a stored cursor means the cursor itself is no longer valid (rather than Graph or the
/// token failing, which any page would meet).
fn cursor_refused(e: &ReconcileError) -> bool {
    matches!(e, ReconcileError::Graph(g) if matches!(g.kind, GraphErrorKind::Gone | GraphErrorKind::Other))
}

/// One pass (or its next part) over a Meta form's leads, storing each page before recording that it was read.
#[allow(clippy::too_many_arguments)]
async fn poll_form(
    app: &App,
    ingest: &IngestState,
    client: &reqwest::Client,
    source: &str,
    sc: &SourceConfig,
    pc: &PollConfig,
    cursor: &mut PollCursor,
    now: DateTime<Utc>,
) -> Result<PollOutcome, ReconcileError> {
    let listing = reconcile::graph_listing(app, sc)?;
    let form = cursor.form.clone();
    // Graph filters `time_created GREATER_THAN` whole seconds: one second less lists the watermark's own second
    // again, so a lead created in the same second as the newest one stored is not left out.
    let fresh_since = cursor.since - chrono::Duration::seconds(pc.overlap_seconds as i64 + 1);
    let (since, mut newest, mut resumed) = match &cursor.pass {
        Some(p) => (p.since, p.newest, true),
        None => (fresh_since, None, false),
    };
    let first = listing.url(&form, since, None)?;
    let mut url = listing.url(&form, since, cursor.pass.as_ref().map(|p| p.after.as_str()))?;
    let mut outcome = PollOutcome::default();
    let mut pages = 0;
    loop {
        let page = match reconcile::graph_page(client, &listing, sc, &form, &first, &url, now).await {
            Ok(page) => page,
            Err(e) if resumed && cursor_refused(&e) => {
                tracing::info!(source, form, error = %e, "poll: Graph no longer takes the stored cursor; the pass starts over");
                resumed = false;
                url = first.clone();
                continue;
            }
            Err(e) => return Err(e),
        };
        resumed = false;
        pages += 1;
        outcome.listed += page.leads.len() as i64;
        newest = newest.max(page.leads.iter().filter_map(|(_, _, created)| *created).max());
        let leads = page.leads.into_iter().map(|(id, payload, _)| (id, payload)).collect();
        outcome.found += ingest_new(app, ingest, source, sc, leads).await?;
        match (page.next, page.after) {
            (Some(next), after) => {
                // The page's leads are committed: only now is the next page recorded as the place to go on from.
                // Without a cursor (never seen from Graph) the place cannot be kept; a restart starts the pass over.
                if let Some(after) = after {
                    cursor.pass = Some(PollPass { since, after, newest });
                    app.store.save_poll_cursor(cursor).await?;
                }
                if pages >= MAX_PAGES {
                    return Ok(outcome);
                }
                url = next;
            }
            (None, _) => {
                cursor.since = cursor.since.max(newest.unwrap_or(cursor.since));
                cursor.pass = None;
                return Ok(outcome);
            }
        }
    }
}

/// One pass (or its next part) over a generic source's list. The watermark it commits is the time the pass began
/// (the list says nothing of creation times in a known place); `overlap_seconds` covers the clocks' difference.
#[allow(clippy::too_many_arguments)]
async fn poll_list(
    app: &App,
    ingest: &IngestState,
    client: &reqwest::Client,
    source: &str,
    sc: &SourceConfig,
    pc: &PollConfig,
    cursor: &mut PollCursor,
    now: DateTime<Utc>,
) -> Result<PollOutcome, ReconcileError> {
    let rc: ReconcileConfig = pc.listing();
    let auth = reconcile::generic_auth(app, &rc)?;
    let (since, began) = match &cursor.pass {
        Some(p) => (p.since, p.newest.unwrap_or(now)),
        None => (cursor.since - chrono::Duration::seconds(pc.overlap_seconds as i64), now),
    };
    let first = reconcile::generic_first_url(&rc, since)?;
    let mut url = match &cursor.pass {
        // A stored link is checked like any link an answer gives: only on the list's own origin.
        Some(p) => {
            reqwest::Url::parse(&p.after).ok().filter(|u| u.origin() == first.origin()).unwrap_or_else(|| first.clone())
        }
        None => first.clone(),
    };
    let mut outcome = PollOutcome::default();
    let mut pages = 0;
    loop {
        let (leads, next) = reconcile::generic_page(client, sc, &rc, auth.clone(), &first, &url).await?;
        pages += 1;
        outcome.listed += leads.len() as i64;
        outcome.found += ingest_new(app, ingest, source, sc, leads).await?;
        match next {
            Some(next) => {
                cursor.pass = Some(PollPass { since, after: next.to_string(), newest: Some(began) });
                app.store.save_poll_cursor(cursor).await?;
                if pages >= MAX_PAGES {
                    return Ok(outcome);
                }
                url = next;
            }
            None => {
                cursor.since = cursor.since.max(began);
                cursor.pass = None;
                return Ok(outcome);
            }
        }
    }
}

/// Stores the listed leads Leadline does not hold yet, through the ingest path; returns how many were new. It
/// returns only once they are committed.
async fn ingest_new(
    app: &App,
    ingest: &IngestState,
    source: &str,
    sc: &SourceConfig,
    leads: Vec<(String, Value)>,
) -> Result<i64, ReconcileError> {
    let refs: Vec<String> = leads.iter().map(|(r, _)| r.clone()).collect();
    let known: BTreeSet<String> = app.store.stored_refs(source, &refs).await?.into_iter().collect();
    let mut seen = BTreeSet::new();
    let received = app.clock.now();
    let new: Vec<NewEvent> = leads
        .into_iter()
        .filter(|(r, _)| !known.contains(r) && seen.insert(r.clone()))
        .map(|(r, payload)| NewEvent { via: Via::Poll, ..pipeline::new_event(source, sc, r, payload, received) })
        .collect();
    let mut stored = 0;
    for chunk in new.chunks(500) {
        let outcomes = ingest.submit(chunk.to_vec()).await.map_err(|e| ReconcileError::Storage(anyhow::anyhow!(e)))?;
        stored += outcomes.iter().filter(|o| matches!(o, InsertOutcome::Inserted(_))).count() as i64;
    }
    Ok(stored)
}

/// A refused credential alerts at once; anything else once polling has failed for `failing_alert_minutes`.
async fn failure_alert(
    app: &App,
    notifier: &dyn Notifier,
    source: &str,
    sc: &SourceConfig,
    error: &ReconcileError,
    failing_since: DateTime<Utc>,
    now: DateTime<Utc>,
) {
    let refused = match error {
        ReconcileError::Graph(g) => g.kind == GraphErrorKind::Token,
        ReconcileError::Status { status, .. } => matches!(status, 401 | 403),
        _ => false,
    };
    if refused {
        // Keyed by the token's variable, or by the source when it sends none: a good poll resolves the same key.
        let credential = reconcile::credential_key(app, sc, source);
        let kept = format!(
            "Nothing is lost: Leadline keeps its place in {source}'s list and reads every lead created meanwhile once \
             it is let in."
        );
        let (title, detail) = match reconcile::credential_of(app, sc) {
            Some(var) => (
                format!("{source} refused Leadline's access token: its new leads cannot be polled"),
                format!("{error}. Put a new token in the environment variable {var} and restart Leadline. {kept}"),
            ),
            None => (
                format!("{source} refused Leadline's polls: its new leads cannot be polled"),
                format!(
                    "{error}. Leadline sends no credential to this list: give it one with `auth` in \
                     [sources.{source}.poll] (a bearer token or a header, read from an environment variable) and \
                     restart Leadline. {kept}"
                ),
            ),
        };
        let spec =
            AlertSpec { kind: AlertKind::Credentials, key: credential, severity: Severity::Critical, title, detail };
        return monitor::raise(app, notifier, spec, now).await;
    }
    if now - failing_since < chrono::Duration::minutes(sc.failing_alert_minutes as i64) {
        return;
    }
    let minutes = (now - failing_since).num_minutes();
    let throttled = matches!(error, ReconcileError::Throttled(_))
        || matches!(error, ReconcileError::Graph(g) if g.kind == GraphErrorKind::Throttled);
    let spec = AlertSpec {
        kind: AlertKind::SourceFailing,
        key: source.to_string(),
        severity: if throttled { Severity::Warning } else { Severity::Critical },
        title: if throttled {
            format!("{source} has been throttling Leadline's polls for {minutes} min: new leads are waiting there")
        } else {
            format!("Leadline cannot poll {source} for {minutes} min: new leads are waiting there")
        },
        detail: format!(
            "Every poll since {} failed; the last said: {error}. Nothing is lost: Leadline keeps its place in \
             {source}'s list and reads every lead created meanwhile once it answers again.",
            failing_since.format("%H:%M UTC")
        ),
    };
    monitor::raise(app, notifier, spec, now).await;
}

/// What the Sources page shows of a polled source: its last and next poll, from its cursors.
pub async fn view(app: &App, source: &str, pc: &PollConfig, now: DateTime<Utc>) -> anyhow::Result<PollView> {
    let cursors = app.store.poll_cursors(source).await?;
    Ok(PollView {
        interval_seconds: pc.interval_seconds,
        last_poll_at: cursors.iter().filter_map(|c| c.last_poll_at).max(),
        next_poll_at: cursors.iter().filter_map(|c| c.next_poll_at).min(),
        last_found: cursors.iter().map(|c| c.last_found).sum(),
        last_error: cursors.iter().find_map(|c| c.last_error.clone()),
        polled_7d: app.store.polled_since(source, now - chrono::Duration::days(7)).await?,
    })
}
