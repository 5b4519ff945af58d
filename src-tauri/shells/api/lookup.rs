//! The lead lookup: find any lead by what an operator has at hand and read its whole story, personal data
//! masked until revealed (the same audited reveal as a dead letter's).

use serde::{Deserialize, Serialize};

use super::{ApiError, App, RevealRequest};
use crate::model::privacy;
use crate::store::{LeadMatch, LeadRecord, Reveal, FIND_LIMIT};

/// What a search found.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct LeadSearch {
    /// Newest first, at most [`FIND_LIMIT`].
    pub items: Vec<LeadMatch>,
    /// More leads may match than were returned.
    pub truncated: bool,
}

#[derive(Debug, Clone, Default, Deserialize, ts_rs::TS)]
#[serde(default)]
pub struct LeadQuery {
    /// An e-mail address, a phone number (or part of one), a name, the source's id, the CRM's record id or the
    /// lead's id.
    pub q: String,
}

/// A lead's whole story: the lead (masked unless revealed), its steps with attempts, CRM ids and replays, fixes,
/// and who had it revealed.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct LeadStory {
    #[serde(flatten)]
    pub lead: LeadRecord,
    /// Per step (same order as `steps`), the CRM record's web address when the target's `record_url` is set
    /// and the step has a CRM id.
    pub crm_urls: Vec<Option<String>>,
    /// Whether personal data is shown as it is (after an audited reveal) rather than masked (the default).
    pub revealed: bool,
    /// Who had this lead shown unmasked, newest first (the audit).
    pub reveals: Vec<Reveal>,
}

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
    super::reveal_dead_letter(app, step.delivery_id, request, actor).await?;
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
    Ok(LeadStory { lead, crm_urls, revealed: true, reveals })
}

/// The story with every personal value masked: the lead (as it is and as received), fixes, and the CRM's
/// messages and answers in the attempts and steps.
fn mask_story(mut story: LeadStory) -> LeadStory {
    let l = &mut story.lead;
    l.payload = privacy::mask_lead(&l.payload);
    l.original_payload = l.original_payload.as_ref().map(privacy::mask_lead);
    for s in &mut l.steps {
        s.dead_reason = s.dead_reason.as_deref().map(privacy::mask_text);
        for a in &mut s.attempts_timeline {
            a.reason = privacy::mask_text(&a.reason);
            a.response_excerpt = a.response_excerpt.as_deref().map(privacy::mask_answer);
        }
        for r in &mut s.replays {
            r.prior_reason = r.prior_reason.as_deref().map(privacy::mask_text);
        }
    }
    for f in &mut l.fixes {
        let field = f.operation.get("field").and_then(serde_json::Value::as_str).unwrap_or_default();
        f.before = privacy::mask_field_value(field, &f.before);
        f.after = privacy::mask_field_value(field, &f.after);
    }
    story.revealed = false;
    story
}
