//! What the API shows of personal data: masked by default (e-mail addresses, phone numbers, names in a lead and in
//! the CRM's messages), shown as stored only after an audited reveal. The masks themselves are `model::privacy`.

use super::dto::{DeadLetterView, LeadStory};
use crate::features::dlq::DeadLetter;
use crate::model::privacy;

/// A dead letter as the list shows it: the CRM's message with e-mail addresses and phone numbers masked.
pub(crate) fn mask_letter(mut letter: DeadLetter) -> DeadLetter {
    letter.reason = privacy::mask_text(&letter.reason);
    letter
}

/// The view with every personal value masked: the lead (as it is and as received), fixes, the CRM record, and
/// the CRM's messages and answers in the attempts.
pub(crate) fn mask_view(mut view: DeadLetterView) -> DeadLetterView {
    let d = &mut view.detail;
    d.letter = mask_letter(d.letter.clone());
    d.payload = privacy::mask_lead(&d.payload);
    d.original_payload = d.original_payload.as_ref().map(privacy::mask_lead);
    for a in &mut d.attempts_timeline {
        a.reason = privacy::mask_text(&a.reason);
        a.response_excerpt = a.response_excerpt.as_deref().map(privacy::mask_answer);
    }
    for f in &mut d.fixes {
        let field = f.operation.get("field").and_then(serde_json::Value::as_str).unwrap_or_default();
        f.before = privacy::mask_field_value(field, &f.before);
        f.after = privacy::mask_field_value(field, &f.after);
    }
    view.crm_record = view.crm_record.as_ref().map(privacy::mask_lead);
    view.revealed = false;
    view
}

/// The story with every personal value masked: the lead (as it is and as received), fixes, and the CRM's
/// messages and answers in the attempts and steps.
pub(crate) fn mask_story(mut story: LeadStory) -> LeadStory {
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
    for e in &mut story.episodes {
        e.reason = e.reason.as_deref().map(privacy::mask_text);
    }
    for m in &mut story.missing_data {
        for f in &mut m.fields {
            f.reason = privacy::mask_text(&f.reason);
        }
    }
    story.revealed = false;
    story
}
