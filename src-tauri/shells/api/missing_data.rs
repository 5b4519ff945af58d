//! Leads delivered with missing data (a target's `missing_data`): the list a person works through, checking each
//! lead ("Needs a person") or correcting the value the CRM refused, which goes to the same record as an update.
//! Personal data is masked as everywhere: the reasons are the CRM's words with values masked.

use serde::Deserialize;

use super::{ApiError, App};
use crate::features::replay::fix::{self, FieldFix};
use crate::model::privacy;
use crate::store::{MissingDataCounts, MissingDataLead};

/// The most leads [`missing_data`] lists (and the CSV export writes).
pub const MISSING_DATA_LIMIT: u32 = 10_000;

/// Leads delivered with missing data (and those corrected since), newest first; reasons masked.
pub async fn missing_data(app: &App) -> Result<Vec<MissingDataLead>, ApiError> {
    let mut leads = app.store.missing_data_leads(MISSING_DATA_LIMIT).await?;
    for lead in &mut leads {
        for f in &mut lead.fields {
            f.reason = privacy::mask_text(&f.reason);
        }
    }
    Ok(leads)
}

/// How many leads are delivered with missing data: overall, waiting for a person, and per target.
pub async fn missing_data_counts(app: &App) -> Result<MissingDataCounts, ApiError> {
    Ok(app.store.missing_data_counts().await?)
}

/// The missing data of step `delivery_id` as the list shows it (reasons masked).
async fn missing_data_of(app: &App, delivery_id: i64) -> Result<MissingDataLead, ApiError> {
    let mut lead = app
        .store
        .missing_data_of(delivery_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("{delivery_id} was not delivered with missing data")))?;
    for f in &mut lead.fields {
        f.reason = privacy::mask_text(&f.reason);
    }
    Ok(lead)
}

/// A correction of a lead delivered with missing data: the field fixed (as a dead letter's fix) and why.
#[derive(Debug, Clone, Deserialize, ts_rs::TS)]
pub struct CorrectionRequest {
    pub fix: FieldFix,
    pub reason: String,
}

/// Corrects the lead of step `delivery_id` and sends the step again with every field, as an update of the record
/// it made; answers the step's missing data as it is now (its task `corrected`).
pub async fn correct_missing_data(
    app: &App,
    delivery_id: i64,
    fix: &FieldFix,
    reason: &str,
    actor: &str,
) -> Result<MissingDataLead, ApiError> {
    fix::correct_missing(&app.store, &app.config, delivery_id, fix, actor, reason, app.clock.now()).await?;
    if let Some(worker) = &app.worker {
        worker.wake.notify_one();
    }
    missing_data_of(app, delivery_id).await
}

/// A person checked the lead of step `delivery_id`: its "Needs a person" task is done. Answers the step's missing
/// data as it is now (its task `done`).
pub async fn close_missing_task(app: &App, delivery_id: i64, actor: &str) -> Result<MissingDataLead, ApiError> {
    if !app.store.close_missing_task(delivery_id).await? {
        return Err(ApiError::BadRequest(format!("{delivery_id} has no open missing-data task")));
    }
    tracing::info!(delivery_id, actor, "missing-data task closed");
    missing_data_of(app, delivery_id).await
}
