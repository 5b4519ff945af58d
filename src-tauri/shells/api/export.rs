//! CSV exports: the dead letters of a filter and a replay's report, for a spreadsheet, a ticket or a CRM team.
//! What a list shows, not more: reasons with personal values masked, never a lead's data (revealing is audited
//! one lead at a time). Dates are RFC 3339 in UTC, so a spreadsheet in any time zone reads them alike.

use chrono::{DateTime, SecondsFormat, Utc};

use super::dto::ExportFile;
use super::error::ApiError;
use super::letters::check_filter;
use super::masking::mask_letter;
use super::replaying::replay_progress;
use crate::features::app::App;
use crate::features::dlq::{self, DeadLetter, DeadLetterFilter};
use crate::features::replay::{self, ReplayReportItem};
use crate::model::privacy;
use crate::store::MissingDataLead;

/// At most this many rows in one export: a filter narrows a bigger one.
pub const MAX_ROWS: usize = 100_000;

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn finish(writer: csv::Writer<Vec<u8>>) -> Result<String, ApiError> {
    let bytes = writer.into_inner().map_err(|e| ApiError::Internal(format!("cannot write the CSV: {e}")))?;
    String::from_utf8(bytes).map_err(|e| ApiError::Internal(format!("cannot write the CSV: {e}")))
}

fn row_error(e: csv::Error) -> ApiError {
    ApiError::Internal(format!("cannot write the CSV: {e}"))
}

/// The dead letters as CSV, newest first. Pure.
pub fn dead_letters_csv(letters: &[DeadLetter]) -> Result<String, ApiError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "delivery_id",
        "parked_at",
        "received_at",
        "source",
        "lead_id",
        "target",
        "class",
        "http_status",
        "field",
        "reason",
        "attempts",
        "status",
        "fixed",
    ])
    .map_err(row_error)?;
    for d in letters {
        w.write_record([
            d.delivery_id.to_string(),
            time(d.dead_at),
            time(d.received_at),
            d.source.clone(),
            d.source_ref.clone(),
            d.target.clone(),
            d.class.map(|c| c.as_str().to_string()).unwrap_or_default(),
            d.http_status.map(|s| s.to_string()).unwrap_or_default(),
            d.field.clone().unwrap_or_default(),
            d.reason.clone(),
            d.attempts.to_string(),
            d.resolution.as_str().to_string(),
            if d.fixed { "yes" } else { "no" }.to_string(),
        ])
        .map_err(row_error)?;
    }
    finish(w)
}

/// A replay's report as CSV: every lead with its outcome. Pure.
pub fn replay_report_csv(items: &[ReplayReportItem]) -> Result<String, ApiError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "delivery_id",
        "source",
        "lead_id",
        "target",
        "outcome",
        "reason_before",
        "reason_now",
        "fallback_to",
        "fixed",
    ])
    .map_err(row_error)?;
    for i in items {
        w.write_record([
            i.delivery_id.to_string(),
            i.source.clone(),
            i.source_ref.clone(),
            i.target.clone(),
            i.outcome.as_str().to_string(),
            i.prior_reason.clone().unwrap_or_default(),
            i.reason.clone().unwrap_or_default(),
            i.fallback_to.clone().unwrap_or_default(),
            if i.fixed { "yes" } else { "no" }.to_string(),
        ])
        .map_err(row_error)?;
    }
    finish(w)
}

/// The leads delivered with missing data as CSV, newest first: one row per field left out. Pure.
pub fn missing_data_csv(leads: &[MissingDataLead]) -> Result<String, ApiError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["delivery_id", "delivered_at", "source", "lead_id", "target", "crm_id", "field", "reason", "task"])
        .map_err(row_error)?;
    for lead in leads {
        for f in &lead.fields {
            w.write_record([
                lead.delivery_id.to_string(),
                lead.delivered_at.map(time).unwrap_or_default(),
                lead.source.clone(),
                lead.source_ref.clone(),
                lead.target.clone(),
                lead.crm_id.clone().unwrap_or_default(),
                f.field.clone(),
                f.reason.clone(),
                lead.task.clone().unwrap_or_default(),
            ])
            .map_err(row_error)?;
        }
    }
    finish(w)
}

/// Every dead letter the filter matches (its `limit` and `before_id` are ignored), masked as the list shows them,
/// newest first; refused above [`MAX_ROWS`].
pub async fn dead_letters(app: &App, filter: &DeadLetterFilter) -> Result<String, ApiError> {
    check_filter(filter)?;
    let mut all = Vec::new();
    let mut page = DeadLetterFilter { limit: Some(1000), before_id: None, ..filter.clone() };
    loop {
        let items = dlq::list(&app.store, &page).await?;
        let Some(last) = items.last().map(|d| d.delivery_id) else { break };
        let full = items.len() == 1000;
        all.extend(items.into_iter().map(mask_letter));
        if all.len() > MAX_ROWS {
            return Err(ApiError::BadRequest(format!(
                "more than {MAX_ROWS} dead letters match: narrow the filter (a target, a class, a time) and export in parts"
            )));
        }
        if !full {
            break;
        }
        page.before_id = Some(last);
    }
    dead_letters_csv(&all)
}

/// A replay's whole report (reasons masked).
pub async fn replay_report(app: &App, replay_id: i64) -> Result<String, ApiError> {
    replay_progress(app, replay_id).await?;
    let mut items = replay::report(&app.store, replay_id, None, MAX_ROWS as u32).await?;
    for item in &mut items {
        item.prior_reason = item.prior_reason.as_deref().map(privacy::mask_text);
        item.reason = item.reason.as_deref().map(privacy::mask_text);
    }
    replay_report_csv(&items)
}

/// The dead letters of `filter` as the file to save ([`dead_letters`] under [`file_name`]).
pub async fn dead_letters_file(app: &App, filter: &DeadLetterFilter) -> Result<ExportFile, ApiError> {
    let body = dead_letters(app, filter).await?;
    Ok(ExportFile { name: file_name("dead-letters", app.clock.now()), body })
}

/// A replay's whole report as the file to save ([`replay_report`] under [`file_name`]).
pub async fn replay_report_file(app: &App, replay_id: i64) -> Result<ExportFile, ApiError> {
    let body = replay_report(app, replay_id).await?;
    Ok(ExportFile { name: file_name(&format!("replay-{replay_id}"), app.clock.now()), body })
}

/// The leads delivered with missing data (reasons masked, as the list shows them) as the file to save.
pub async fn missing_data_file(app: &App) -> Result<ExportFile, ApiError> {
    let leads = super::missing_data::missing_data(app).await?;
    Ok(ExportFile { name: file_name("missing-data", app.clock.now()), body: missing_data_csv(&leads)? })
}

/// A file name for an export made at `now`: `leadline-dead-letters-20261201-0930.csv`.
pub fn file_name(what: &str, now: DateTime<Utc>) -> String {
    format!("leadline-{what}-{}.csv", now.format("%Y%m%d-%H%M"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ErrorClass, ReplayOutcome, Resolution};

    fn letter(reason: &str) -> DeadLetter {
        let t = DateTime::parse_from_rfc3339("2026-12-01T09:30:00Z").unwrap().to_utc();
        DeadLetter {
            delivery_id: 7,
            event_id: 3,
            source: "webform".into(),
            source_ref: "wf-1".into(),
            target: "crm".into(),
            step_index: 0,
            class: Some(ErrorClass::PermanentData),
            http_status: Some(422),
            reason: reason.into(),
            cause: reason.into(),
            field: Some("phone".into()),
            attempts: 1,
            received_at: t,
            dead_at: t,
            resolution: Resolution::Open,
            resolved_by: None,
            resolved_at: None,
            resolution_note: None,
            purged: false,
            queued_in_replay: None,
            fixed: true,
        }
    }

    #[test]
    fn a_reason_with_commas_quotes_and_a_newline_stays_one_cell() {
        let text = dead_letters_csv(&[letter("phone \"0151…\" is invalid,\nuse +49")]).unwrap();
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 1);
        assert_eq!(&rows[0][0], "7");
        assert_eq!(&rows[0][1], "2026-12-01T09:30:00Z");
        assert_eq!(&rows[0][6], "permanent_data");
        assert_eq!(&rows[0][9], "phone \"0151…\" is invalid,\nuse +49");
        assert_eq!((&rows[0][11], &rows[0][12]), ("open", "yes"));
        assert_eq!(reader.headers().unwrap().len(), 13);
    }

    #[test]
    fn a_row_per_field_left_out() {
        let t = DateTime::parse_from_rfc3339("2026-12-01T09:30:00Z").unwrap().to_utc();
        let field =
            |name: &str| crate::store::MissingField { field: name.into(), reason: format!("{name}, refused"), at: t };
        let lead = MissingDataLead {
            delivery_id: 4,
            event_id: 2,
            source: "webform".into(),
            source_ref: "wf-2".into(),
            target: "crm".into(),
            delivered_at: Some(t),
            crm_id: Some("101".into()),
            fields: vec![field("phone"), field("company")],
            task: Some("open".into()),
        };
        assert_eq!(
            missing_data_csv(&[lead]).unwrap(),
            "delivery_id,delivered_at,source,lead_id,target,crm_id,field,reason,task\n\
             4,2026-12-01T09:30:00Z,webform,wf-2,crm,101,phone,\"phone, refused\",open\n\
             4,2026-12-01T09:30:00Z,webform,wf-2,crm,101,company,\"company, refused\",open\n"
        );
    }

    #[test]
    fn a_report_row_per_lead() {
        let item = ReplayReportItem {
            delivery_id: 9,
            source: "meta".into(),
            source_ref: "m-1".into(),
            target: "crm".into(),
            outcome: ReplayOutcome::FailedNewReason,
            prior_reason: Some("HTTP 503".into()),
            reason: Some("HTTP 422".into()),
            fallback_to: None,
            fixed: false,
        };
        let text = replay_report_csv(&[item]).unwrap();
        assert_eq!(
            text,
            "delivery_id,source,lead_id,target,outcome,reason_before,reason_now,fallback_to,fixed\n\
             9,meta,m-1,crm,failed_new_reason,HTTP 503,HTTP 422,,no\n"
        );
        assert_eq!(
            file_name("dead-letters", DateTime::parse_from_rfc3339("2026-12-01T09:05:00Z").unwrap().to_utc()),
            "leadline-dead-letters-20261201-0905.csv"
        );
    }
}
