//! The lead lookup: find any lead by what an operator has at hand and read its whole story, personal data
//! masked until revealed (the same audited reveal as a dead letter's).

use super::dto::{LeadQuery, LeadSearch, LeadStory, RevealRequest};
use super::error::ApiError;
use super::letters::reveal_dead_letter;
use super::masking::mask_story;
use crate::features::app::App;
use crate::store::FIND_LIMIT;

/// The newest leads matching `query` (see `store::find_leads`); an empty query is refused.
pub async fn find_leads(app: &App, query: &LeadQuery) -> Result<LeadSearch, ApiError> {
    let q = query.q.trim();
    if q.is_empty() {
        return Err(ApiError::BadRequest(
            "type an e-mail address, a phone number, a name, a source id, a CRM id or a lead id".into(),
        ));
    }
    if q.chars().count() > 200 {
        return Err(ApiError::BadRequest("the search is longer than 200 characters".into()));
    }
    let mut items = app.store.find_leads(q, FIND_LIMIT + 1).await?;
    let truncated = items.len() > FIND_LIMIT as usize;
    items.truncate(FIND_LIMIT as usize);
    Ok(LeadSearch { items, truncated })
}

/// A lead's story with its personal data masked.
pub async fn lead_story(app: &App, event_id: i64) -> Result<LeadStory, ApiError> {
    Ok(mask_story(lead_story_as_stored(app, event_id).await?))
}

/// The lead's story with its personal data unmasked: an explicit request, written to the audit (who, when, why)
/// before anything is shown — the same audit as a dead letter's reveal.
pub async fn reveal_lead(
    app: &App,
    event_id: i64,
    request: &RevealRequest,
    actor: &str,
) -> Result<LeadStory, ApiError> {
    let story = lead_story_as_stored(app, event_id).await?;
    let Some(step) = story.lead.steps.first() else {
        return Err(ApiError::BadRequest("this lead has no steps: there is nothing to reveal".into()));
    };
    reveal_dead_letter(app, step.delivery_id, request, actor).await?;
    lead_story_as_stored(app, event_id).await
}

async fn lead_story_as_stored(app: &App, event_id: i64) -> Result<LeadStory, ApiError> {
    let lead = app
        .store
        .lead_story(event_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no lead with id {event_id}")))?;
    let reveals = match lead.steps.first() {
        Some(step) => app.store.reveals(step.delivery_id).await?,
        None => Vec::new(),
    };
    let crm_urls = lead
        .steps
        .iter()
        .map(|s| {
            let template = app.config.targets.get(&s.target)?.record_url.as_ref()?;
            let id = s.crm_id.as_ref()?;
            Some(template.replace("{crm_id}", &crate::features::targets::vendor::encode_component(id)))
        })
        .collect();
    let episodes = app.store.episodes_of_lead(event_id).await?;
    let missing_data = app.store.missing_data_of_lead(event_id).await?;
    let step_ids: Vec<i64> = lead.steps.iter().map(|s| s.delivery_id).collect();
    let receipts = app.store.receipts_of(&step_ids).await?;
    Ok(LeadStory { lead, crm_urls, revealed: true, reveals, episodes, missing_data, receipts })
}
