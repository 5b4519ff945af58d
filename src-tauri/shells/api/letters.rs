//! Dead letters: the list and its groups, one dead letter (masked, or revealed under audit), and what a person
//! does to them by hand — resolve, fix a field, edit a lead.

use super::dto::{DeadLetterList, DeadLetterView, EditRequest, FixRequest, ResolveRequest, RevealRequest};
use super::error::ApiError;
use super::masking::{mask_letter, mask_view};
use crate::features::app::{App, LiveEvent};
use crate::features::contact::doubt;
use crate::features::dlq::{self, DeadLetterFilter, DeadLetterGroup};
use crate::features::replay::fix::{self, FixReport};
use crate::features::replay::{self, ReplaySelection};
use crate::model::privacy;

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

pub(crate) fn check_selection(selection: &ReplaySelection) -> Result<(), ApiError> {
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
    let contact_doubt = doubt::doubt_of(&app.store, &app.config, &detail.letter).await?;
    Ok(DeadLetterView { detail, crm_record, replays, revealed: true, reveals, contact_doubt })
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

pub async fn edit_dead_letter(
    app: &App,
    delivery_id: i64,
    request: &EditRequest,
    actor: &str,
) -> Result<DeadLetterView, ApiError> {
    fix::edit(&app.store, &app.config, delivery_id, &request.payload, actor, &request.reason, app.clock.now()).await?;
    dead_letter(app, delivery_id).await
}
