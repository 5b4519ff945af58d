//! Reconciliation: the source itself as the check of last resort.
//!
//! Webhooks get lost: a subscription drops, an endpoint was down longer than the source retries, a proxy ate a
//! request. For sources that can list their leads, Leadline periodically asks for the leads created since a
//! watermark, compares them with the stored events and ingests the missing ones through the normal path (the
//! same group-commit writer and duplicate check as a webhook; each recovered event is marked
//! `via = reconciliation`). Each run is recorded (`reconciliation_run`): when, from which watermark, how many
//! were listed, how many were missing, which ones. Finding missing leads raises a `reconciliation_found` alert,
//! because it means webhooks are being lost; a later run that finds none resolves it.
//!
//! - Meta Lead Ads: `GET {graph}/{form_id}/leads?fields=id,created_time,ad_id,form_id,field_data&filtering=
//!   [time_created > watermark]&access_token=…`, following `paging.next`, with the Graph address, version and
//!   token of the source's `meta_lead` step. Listed leads are stored in the one Meta lead shape
//!   ([`crate::features::graph::canonical_lead`]), answers included, so their fetch step has nothing left to ask.
//!   Graph's throttling is honoured: while Graph said to wait, no request is sent (the run is recorded as
//!   throttled).
//! - Generic sources: `GET list_url` with `{since}` replaced by the watermark (Unix seconds); the leads are the
//!   answer itself, its `data` or `items` array, or the array at `items_pointer`; the next page's URL is read at
//!   `next_pointer`. Each lead's id is read with the source's `id_field`, like a webhook.
//!
//! The watermark is the start of the last successful run minus `overlap_minutes` (the first run looks back
//! `lookback_minutes`). A failed run is recorded with its error and does not move the watermark.
//!
//! A failing safety net is itself an alert: a refused token raises `credentials` at once (the key is the
//! environment variable holding it, so the fetch step and reconciliation refusing the same token are one
//! incident); a source that stays unreachable or throttled for `failing_alert_minutes` raises
//! `source_failing`. Both resolve after the next good run. `next` page links are followed only to the origin
//! of the first request, so an answer can never send the credentials elsewhere.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::config::{AuthConfig, ReconcileConfig, SourceConfig, SourceKind, TargetSettings};
use crate::features::app::{App, LiveEvent};
use crate::features::ingest::IngestState;
use crate::features::monitor::alerts::{AlertKind, AlertSpec, Severity};
use crate::features::monitor::{self, Notifier};
use crate::features::pipeline;
use crate::store::{InsertOutcome, NewEvent, RunResult, Store, Via};

/// Most pages read in one run (a safety net against a list endpoint that never ends).
const MAX_PAGES: usize = 200;

pub use crate::store::ReconciliationRun;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("source `{0}` has no [reconcile] section")]
    NotConfigured(String),
    #[error("cannot reach the list endpoint: {0}")]
    Http(String),
    #[error("the list endpoint answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("{}", .0.reason)]
    Graph(crate::features::graph::GraphError),
    #[error("Meta asked to wait until {0}: no request was sent")]
    Throttled(DateTime<Utc>),
    #[error(
        "the next page link points to another address ({0}); not followed, so the credentials stay with the source"
    )]
    ForeignLink(String),
    #[error("the list endpoint's answer is not usable: {0}")]
    Body(String),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Storage(#[from] anyhow::Error),
}

/// Runs every configured source's reconciliation at its interval until aborted; when settings saved in the app
/// put a new configuration in force, the schedule starts over from it (a comparison cut short is safe: the next
/// one reads the list again from the last recorded watermark, and a lead found twice is a duplicate).
pub async fn run(app: App, ingest: IngestState, notifier: std::sync::Arc<dyn Notifier>) {
    let mut changes = app.config.changes();
    loop {
        tokio::select! {
            _ = run_schedule(&app, &ingest, &notifier) => {
                // No source to reconcile: wait for a configuration that has one.
                if changes.changed().await.is_err() {
                    return;
                }
            }
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                tracing::info!("reconciliation: the configuration changed, schedule read again");
            }
        }
    }
}

/// The schedule of the configuration in force; returns at once when no source is reconciled.
async fn run_schedule(app: &App, ingest: &IngestState, notifier: &std::sync::Arc<dyn Notifier>) {
    let sources: Vec<(String, u64)> = app
        .config
        .sources
        .iter()
        .filter_map(|(name, s)| s.reconcile.as_ref().map(|r| (name.clone(), r.interval_seconds)))
        .collect();
    if sources.is_empty() {
        return;
    }
    let client = client();
    let mut next: Vec<tokio::time::Instant> = sources.iter().map(|_| tokio::time::Instant::now()).collect();
    let mut failures: Vec<u32> = vec![0; sources.len()];
    loop {
        let (i, at) = next.iter().enumerate().min_by_key(|(_, t)| **t).map(|(i, t)| (i, *t)).expect("sources");
        tokio::time::sleep_until(at).await;
        // One process of a team reconciles: the leader (runtime::leadership).
        app.leadership.wait().await;
        let (source, interval) = &sources[i];
        let now = app.clock.now();
        let wait = match reconcile(app, ingest, &client, notifier.as_ref(), source, now).await {
            Ok(r) => {
                if r.missing > 0 {
                    tracing::warn!(source, missing = r.missing, listed = r.listed, "reconciliation recovered leads")
                } else {
                    tracing::debug!(source, listed = r.listed, "reconciliation: nothing missing")
                }
                failures[i] = 0;
                Duration::from_secs(*interval)
            }
            Err(e) => {
                tracing::warn!(source, error = %e, "reconciliation failed");
                failures[i] += 1;
                next_try_after(&e, failures[i], *interval, now, &mut rand::rng())
            }
        };
        next[i] = tokio::time::Instant::now() + wait;
    }
}

/// When to try a failed reconciliation again: at the time the source gave (throttling), else after a
/// full-jitter backoff that starts at 15 s and never exceeds the normal interval — so a blip is retried soon,
/// and a long outage is checked as often as usual (which keeps its `source_failing` alert current).
pub fn next_try_after(
    error: &ReconcileError,
    consecutive_failures: u32,
    interval_seconds: u64,
    now: DateTime<Utc>,
    rng: &mut impl rand::Rng,
) -> Duration {
    if let ReconcileError::Throttled(until) = error {
        return (*until - now).to_std().unwrap_or_default() + Duration::from_secs(1);
    }
    let ceiling = 15u64.saturating_mul(1 << consecutive_failures.min(20)).min(interval_seconds.max(1));
    Duration::from_secs(rng.random_range(ceiling.div_ceil(2)..=ceiling).max(1))
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap_or_default()
}

/// One comparison of `source` with its own list, recorded whatever the outcome.
pub async fn reconcile(
    app: &App,
    ingest: &IngestState,
    client: &reqwest::Client,
    notifier: &dyn Notifier,
    source: &str,
    now: DateTime<Utc>,
) -> Result<ReconciliationRun, ReconcileError> {
    let sc = app.config.sources.get(source).ok_or_else(|| ReconcileError::NotConfigured(source.into()))?;
    let rc = sc.reconcile.as_ref().ok_or_else(|| ReconcileError::NotConfigured(source.into()))?;
    let since = watermark(&app.store, source, rc, now).await?;
    let run_id = app.store.start_reconciliation_run(source, now, since).await?;
    let outcome = compare(app, ingest, client, source, sc, rc, since, now).await;
    let result = match &outcome {
        Ok((listed, missing, ingested, refs)) => RunResult {
            listed: *listed,
            missing: *missing,
            ingested: *ingested,
            missing_refs: refs.clone(),
            error: None,
        },
        Err(e) => RunResult { error: Some(e.to_string()), ..Default::default() },
    };
    let (missing, ingested) = (result.missing, result.ingested);
    app.store.finish_reconciliation_run(run_id, app.clock.now(), &result).await?;
    if let Err(e) = &outcome {
        failure_alert(app, notifier, source, sc, e, now).await;
    } else {
        let note = "the next reconciliation worked";
        monitor::resolve(app, AlertKind::SourceFailing, source, note, now).await;
        monitor::resolve(app, AlertKind::Credentials, &credential_key(app, sc, source), note, now).await;
    }
    outcome?;
    if missing > 0 {
        let spec = AlertSpec {
            kind: AlertKind::ReconciliationFound,
            key: source.to_string(),
            severity: Severity::Warning,
            title: format!(
                "{missing} {} from {source} never arrived as webhooks",
                if missing == 1 { "lead" } else { "leads" }
            ),
            detail: format!(
                "Reconciliation found {missing} listed by {source} but never received, and ingested {ingested} of \
                 them: they are being delivered now. Webhooks from {source} are being lost: check its webhook \
                 subscription and Leadline's reachability."
            ),
        };
        monitor::raise(app, notifier, spec, now).await;
    } else {
        monitor::resolve(app, AlertKind::ReconciliationFound, source, "a later comparison found nothing missing", now)
            .await;
    }
    let _ = app.live.send(LiveEvent::SourcesChanged);
    latest(&app.store, source).await?.ok_or_else(|| ReconcileError::Storage(anyhow::anyhow!("run vanished")))
}

/// The key of the `credentials` alert a refusal of `source`'s listing raises: the environment variable holding
/// its credential, or, when it sends none, the source's name. Raised and resolved under the same key.
pub(crate) fn credential_key(app: &App, sc: &SourceConfig, source: &str) -> String {
    credential_of(app, sc).unwrap_or_else(|| source.to_string())
}

/// The environment variable holding the credential `source`'s listing (reconciliation or polling) uses.
pub(crate) fn credential_of(app: &App, sc: &SourceConfig) -> Option<String> {
    match sc.kind() {
        SourceKind::Meta => match sc.route.first().and_then(|t| app.config.targets.get(t)).map(|t| &t.settings) {
            Some(TargetSettings::MetaLead(m)) => m.access_token_env.clone(),
            _ => None,
        },
        SourceKind::Generic => match sc
            .reconcile
            .as_ref()
            .and_then(|r| r.auth.as_ref())
            .or_else(|| sc.poll.as_ref().and_then(|p| p.auth.as_ref()))
        {
            Some(AuthConfig::BearerEnv(var)) | Some(AuthConfig::Header { value_env: var, .. }) => Some(var.clone()),
            None => None,
        },
        _ => None,
    }
}

/// A refused credential alerts at once; anything else once the source has failed for `failing_alert_minutes`.
async fn failure_alert(
    app: &App,
    notifier: &dyn Notifier,
    source: &str,
    sc: &SourceConfig,
    error: &ReconcileError,
    now: DateTime<Utc>,
) {
    let refused = match error {
        ReconcileError::Graph(g) => g.kind == crate::features::graph::GraphErrorKind::Token,
        ReconcileError::Status { status, .. } => matches!(status, 401 | 403),
        _ => false,
    };
    if refused {
        let credential = credential_key(app, sc, source);
        let spec = AlertSpec {
            kind: AlertKind::Credentials,
            key: credential.clone(),
            severity: Severity::Critical,
            title: format!("{source} refused Leadline's access token: its leads cannot be fetched or checked"),
            detail: format!(
                "{error}. Put a new token in the environment variable {credential} and restart Leadline. Until then \
                 leads from {source} wait (nothing is lost) and lost webhooks are not recovered."
            ),
        };
        return monitor::raise(app, notifier, spec, now).await;
    }
    let since = match failing_since(&app.store, source).await {
        Ok(Some(t)) => t,
        Ok(None) => now,
        Err(e) => return tracing::error!(error = %format!("{e:#}"), "cannot read reconciliation history"),
    };
    if now - since < chrono::Duration::minutes(sc.failing_alert_minutes as i64) {
        return;
    }
    let minutes = (now - since).num_minutes();
    let throttled = matches!(error, ReconcileError::Throttled(_))
        || matches!(error, ReconcileError::Graph(g) if g.kind == crate::features::graph::GraphErrorKind::Throttled);
    let spec = AlertSpec {
        kind: AlertKind::SourceFailing,
        key: source.to_string(),
        severity: if throttled { Severity::Warning } else { Severity::Critical },
        title: if throttled {
            format!("{source} has been throttling Leadline for {minutes} min: lost webhooks are not being recovered")
        } else {
            format!(
                "Leadline cannot reach {source}'s lead list for {minutes} min: lost webhooks are not being recovered"
            )
        },
        detail: format!(
            "Every reconciliation since {} failed; the last said: {error}. Leads that arrive by webhook still flow; \
             leads whose webhook was lost are found once the list answers again.",
            since.format("%H:%M UTC")
        ),
    };
    monitor::raise(app, notifier, spec, now).await;
}

/// The start of the first failed run after the last good one, if the latest run failed.
async fn failing_since(store: &Store, source: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
    store.reconciliation_failing_since(source).await
}

async fn watermark(
    store: &Store,
    source: &str,
    rc: &ReconcileConfig,
    now: DateTime<Utc>,
) -> anyhow::Result<DateTime<Utc>> {
    let last = store.last_good_reconciliation(source).await?;
    Ok(match last {
        Some(t) => t - chrono::Duration::minutes(rc.overlap_minutes as i64),
        None => now - chrono::Duration::minutes(rc.lookback_minutes as i64),
    })
}

/// Lists, compares and ingests. Returns (listed, missing, ingested, missing refs).
#[allow(clippy::too_many_arguments)]
async fn compare(
    app: &App,
    ingest: &IngestState,
    client: &reqwest::Client,
    source: &str,
    sc: &SourceConfig,
    rc: &ReconcileConfig,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(i64, i64, i64, Vec<String>), ReconcileError> {
    let listed: Vec<(String, Value)> = match sc.kind() {
        SourceKind::Meta => list_meta(app, client, sc, rc, since, now).await?,
        SourceKind::Generic => list_generic(app, client, sc, rc, since).await?,
        // The configuration gives no other kind a `reconcile` section.
        _ => return Err(ReconcileError::NotConfigured(source.into())),
    };
    // Compare with what is stored.
    let listed_refs: Vec<String> = listed.iter().map(|(r, _)| r.clone()).collect();
    let known: BTreeSet<String> = app.store.stored_refs(source, &listed_refs).await?.into_iter().collect();
    let mut seen = BTreeSet::new();
    let missing: Vec<NewEvent> = listed
        .iter()
        .filter(|(r, _)| !known.contains(r) && seen.insert(r.clone()))
        .map(|(r, payload)| NewEvent {
            via: Via::Reconciliation,
            ..pipeline::new_event(source, sc, r.clone(), payload.clone(), now)
        })
        .collect();
    let refs: Vec<String> = missing.iter().map(|e| e.source_ref.clone()).collect();
    let mut ingested = 0;
    for chunk in missing.chunks(500) {
        let outcomes = ingest.submit(chunk.to_vec()).await.map_err(|e| ReconcileError::Storage(anyhow::anyhow!(e)))?;
        ingested += outcomes.iter().filter(|o| matches!(o, InsertOutcome::Inserted(_))).count() as i64;
    }
    Ok((listed.len() as i64, refs.len() as i64, ingested, refs))
}

/// One GET. Returns the JSON answer and its headers; a non-success status is `Status` with an excerpt.
async fn get_json(
    client: &reqwest::Client,
    url: &reqwest::Url,
    auth: Option<(String, String)>,
) -> Result<(Value, reqwest::header::HeaderMap), (ReconcileError, Option<reqwest::header::HeaderMap>)> {
    let mut req = client.get(url.clone());
    if let Some((name, value)) = auth {
        req = req.header(name, value);
    }
    let resp = req.send().await.map_err(|e| (ReconcileError::Http(e.without_url().to_string()), None))?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.map_err(|e| (ReconcileError::Http(e.without_url().to_string()), None))?;
    if !status.is_success() {
        let body: String = text.chars().take(2_000).collect();
        return Err((ReconcileError::Status { status: status.as_u16(), body }, Some(headers)));
    }
    let json = serde_json::from_str(&text).map_err(|e| (ReconcileError::Body(format!("not JSON: {e}")), None))?;
    Ok((json, headers))
}

/// The next page's address, only on the origin of the first request.
fn follow(first: &reqwest::Url, next: Option<&str>) -> Result<Option<reqwest::Url>, ReconcileError> {
    match next {
        None | Some("") => Ok(None),
        Some(link) => crate::features::graph::same_origin(first, link).map(Some).ok_or_else(|| {
            let origin = reqwest::Url::parse(link)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_else(|_| "not a URL".into());
            ReconcileError::ForeignLink(origin)
        }),
    }
}

/// The header a generic source's list endpoint is asked with (`auth`), its secret read from the environment.
pub(crate) fn generic_auth(app: &App, rc: &ReconcileConfig) -> Result<Option<(String, String)>, ReconcileError> {
    Ok(match &rc.auth {
        Some(AuthConfig::BearerEnv(var)) => Some((
            "Authorization".to_string(),
            format!(
                "Bearer {}",
                app.config.secret("reconcile.auth", var).map_err(|e| ReconcileError::Config(e.to_string()))?
            ),
        )),
        Some(AuthConfig::Header { name, value_env }) => Some((
            name.clone(),
            app.config.secret("reconcile.auth", value_env).map_err(|e| ReconcileError::Config(e.to_string()))?,
        )),
        None => None,
    })
}

/// The first page of a generic source's list: `list_url` with `{since}` replaced by `since` (Unix seconds).
pub(crate) fn generic_first_url(rc: &ReconcileConfig, since: DateTime<Utc>) -> Result<reqwest::Url, ReconcileError> {
    let template = rc.list_url.as_deref().unwrap_or_default();
    reqwest::Url::parse(&template.replace("{since}", &since.timestamp().to_string()))
        .map_err(|e| ReconcileError::Config(format!("list_url: {e}")))
}

/// One page of a generic source's list: its leads (id, lead) and the next page's address (checked to be on the
/// origin of `first`).
pub(crate) async fn generic_page(
    client: &reqwest::Client,
    sc: &SourceConfig,
    rc: &ReconcileConfig,
    auth: Option<(String, String)>,
    first: &reqwest::Url,
    url: &reqwest::Url,
) -> Result<(Vec<(String, Value)>, Option<reqwest::Url>), ReconcileError> {
    let (body, _) = get_json(client, url, auth).await.map_err(|(e, _)| e)?;
    let items = match &rc.items_pointer {
        Some(p) => body.pointer(p),
        None if body.is_array() => Some(&body),
        None => body.get("data").or_else(|| body.get("items")),
    }
    .and_then(Value::as_array)
    .ok_or_else(|| ReconcileError::Body("no array of leads in the answer (see items_pointer)".into()))?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let id = pipeline::event_id(item, &sc.id_field)
            .ok_or_else(|| ReconcileError::Body(format!("a listed lead has no id at `{}`", sc.id_field)))?;
        out.push((id, item.clone()));
    }
    let next = follow(first, rc.next_pointer.as_deref().and_then(|p| body.pointer(p)).and_then(Value::as_str))?;
    Ok((out, next))
}

async fn list_generic(
    app: &App,
    client: &reqwest::Client,
    sc: &SourceConfig,
    rc: &ReconcileConfig,
    since: DateTime<Utc>,
) -> Result<Vec<(String, Value)>, ReconcileError> {
    let auth = generic_auth(app, rc)?;
    let first = generic_first_url(rc, since)?;
    let mut url = Some(first.clone());
    let mut out = Vec::new();
    let mut pages = 0;
    while let Some(u) = url.take() {
        pages += 1;
        let (leads, next) = generic_page(client, sc, rc, auth.clone(), &first, &u).await?;
        out.extend(leads);
        if pages < MAX_PAGES {
            url = next;
        }
    }
    Ok(out)
}

/// Where a Meta source's forms are listed: the Graph API address and page access token of its `meta_lead` step.
pub(crate) struct GraphListing {
    pub base: String,
    token: String,
}

pub(crate) fn graph_listing(app: &App, sc: &SourceConfig) -> Result<GraphListing, ReconcileError> {
    let step = sc.route.first().and_then(|t| app.config.targets.get(t));
    let Some((step, TargetSettings::MetaLead(settings))) = step.map(|s| (s, &s.settings)) else {
        return Err(ReconcileError::Config("the source's route does not start with a meta_lead step".into()));
    };
    let token_env = settings.access_token_env.as_deref().unwrap_or_default();
    let token = app.config.secret("access_token_env", token_env).map_err(|e| ReconcileError::Config(e.to_string()))?;
    Ok(GraphListing { base: step.graph_base(), token })
}

impl GraphListing {
    /// `GET {graph}/{form}/leads` for leads created after `since`, from the page after the cursor `after` (Graph's
    /// cursor-based pagination) or from the first.
    pub(crate) fn url(
        &self,
        form: &str,
        since: DateTime<Utc>,
        after: Option<&str>,
    ) -> Result<reqwest::Url, ReconcileError> {
        let filtering = json!([{"field": "time_created", "operator": "GREATER_THAN", "value": since.timestamp()}]);
        let mut url = reqwest::Url::parse(&format!("{}/{form}/leads", self.base))
            .map_err(|e| ReconcileError::Config(format!("the meta_lead step's url: {e}")))?;
        url.query_pairs_mut()
            .append_pair("fields", crate::features::graph::LEAD_FIELDS)
            .append_pair("filtering", &filtering.to_string())
            .append_pair("access_token", &self.token);
        if let Some(after) = after {
            url.query_pairs_mut().append_pair("after", after);
        }
        Ok(url)
    }
}

/// One page of a Meta form's leads, as Graph lists them.
pub(crate) struct GraphPage {
    /// Each lead's id, its canonical shape (answers included) and its creation time.
    pub leads: Vec<(String, Value, Option<DateTime<Utc>>)>,
    /// The next page (`paging.next`, on the origin of `first`); `None` on the last page.
    pub next: Option<reqwest::Url>,
    /// The cursor of the next page (`paging.cursors.after`), when there is a next page.
    pub after: Option<String>,
}

/// Reads one page, honouring Graph's throttling: while Graph said to wait no request is sent, and the usage
/// headers of every answer (and of a throttled one) are remembered for the next request to this Graph.
pub(crate) async fn graph_page(
    client: &reqwest::Client,
    listing: &GraphListing,
    sc: &SourceConfig,
    form: &str,
    first: &reqwest::Url,
    url: &reqwest::Url,
    now: DateTime<Utc>,
) -> Result<GraphPage, ReconcileError> {
    let base = &listing.base;
    if let Some(until) = crate::features::graph::held_until(base, now) {
        return Err(ReconcileError::Throttled(until));
    }
    let (body, headers) = match get_json(client, url, None).await {
        Ok(answer) => answer,
        Err((ReconcileError::Status { status, body }, headers)) => {
            let e = crate::features::graph::classify_error(status, body.as_bytes());
            if let Some(until) = headers.as_ref().and_then(|h| crate::features::graph::throttled_until(h, now)) {
                crate::features::graph::hold(base, until);
            }
            return Err(ReconcileError::Graph(e));
        }
        Err((e, _)) => return Err(e),
    };
    if let Some(until) = crate::features::graph::throttled_until(&headers, now) {
        crate::features::graph::hold(base, until);
    }
    if body.get("error").is_some() {
        return Err(ReconcileError::Graph(crate::features::graph::classify_error(200, body.to_string().as_bytes())));
    }
    let data = body.get("data").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut leads = Vec::with_capacity(data.len());
    for lead in data {
        let Some(id) = pipeline::event_id(&lead, "id") else { continue };
        let created = lead
            .get("created_time")
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%z").ok())
            .map(|t| t.with_timezone(&Utc));
        let payload = crate::features::graph::canonical_lead(&lead, &json!({"form_id": form}), sc.page_id());
        leads.push((id, payload, created));
    }
    let next = follow(first, body.pointer("/paging/next").and_then(Value::as_str))?;
    let after = next
        .as_ref()
        .and(body.pointer("/paging/cursors/after").and_then(Value::as_str))
        .filter(|a| !a.is_empty())
        .map(str::to_string);
    Ok(GraphPage { leads, next, after })
}

async fn list_meta(
    app: &App,
    client: &reqwest::Client,
    sc: &SourceConfig,
    rc: &ReconcileConfig,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<(String, Value)>, ReconcileError> {
    let listing = graph_listing(app, sc)?;
    let mut out = Vec::new();
    for form in &rc.form_ids {
        let first = listing.url(form, since, None)?;
        let mut next = Some(first.clone());
        let mut pages = 0;
        while let Some(u) = next.take() {
            pages += 1;
            let page = graph_page(client, &listing, sc, form, &first, &u, now).await?;
            out.extend(page.leads.into_iter().map(|(id, payload, _)| (id, payload)));
            if pages < MAX_PAGES {
                next = page.next;
            }
        }
    }
    Ok(out)
}

/// The latest run of `source`.
pub async fn latest(store: &Store, source: &str) -> anyhow::Result<Option<ReconciliationRun>> {
    store.latest_reconciliation(source).await
}

/// Leads of `source` recovered by reconciliation since `since`.
pub async fn recovered_since(store: &Store, source: &str, since: DateTime<Utc>) -> anyhow::Result<i64> {
    store.recovered_since(source, since).await
}
