//! Slack through an incoming webhook: a JSON body with `text` (what the phone's notification shows) and `blocks`
//! (mrkdwn sections: the alert, what it is about and where to act), as Slack documents for incoming webhooks
//! ("Sending messages using incoming webhooks"; Block Kit's section and context blocks). Slack answers `200 ok`;
//! anything else (`400 invalid_payload`, `403 action_prohibited`, `404 channel_not_found`, `410
//! channel_is_archived`, `500 rollup_error`) is a failed send, retried later.

use serde_json::{json, Value};

use super::message::{clip, place_label, severity_word, state_note, Announcement, What};
use crate::store::{Alert, Severity};

/// Slack's limit on a section's text is 3,000 characters, on a message's blocks 50.
const SECTION_TEXT_MAX: usize = 2_900;
const DIGEST_ALERTS_MAX: usize = 20;

/// `&`, `<` and `>` are the three characters mrkdwn takes as markup (links, mentions); Slack asks for them
/// escaped as HTML entities.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn mark(s: Severity) -> &'static str {
    match s {
        Severity::Critical => ":rotating_light:",
        Severity::Warning => ":warning:",
        Severity::Info => ":information_source:",
    }
}

/// "Critical · credentials · opened 10:00 UTC · <https://…|Open Targets>"
fn context(n: &Announcement, a: &Alert) -> String {
    let mut parts = vec![
        severity_word(a.severity).to_string(),
        a.kind.as_str().to_string(),
        format!("opened {} UTC", a.opened_at.format("%Y-%m-%d %H:%M")),
    ];
    let label = place_label(&a.place);
    parts.push(match n.link(a) {
        Some(url) => format!("<{}|{}>", escape(&url), escape(&label)),
        None => escape(&label),
    });
    parts.join(" · ")
}

/// The incoming webhook's JSON body.
pub fn payload(n: &Announcement) -> Value {
    let headline = n.headline();
    match (n.what, n.alerts.as_slice()) {
        (What::Opened | What::Reminder, [a]) => {
            let body =
                format!("{} *{}*{}\n{}", mark(a.severity), escape(&headline), state_note(a), escape(&n.detail(a)));
            let body = clip(&body, SECTION_TEXT_MAX);
            json!({
                "text": format!("{} {}", mark(a.severity), headline),
                "blocks": [
                    { "type": "section", "text": { "type": "mrkdwn", "text": body } },
                    { "type": "context", "elements": [ { "type": "mrkdwn", "text": context(n, a) } ] },
                ],
            })
        }
        (_, alerts) => {
            let mut blocks = vec![json!({
                "type": "section",
                "text": { "type": "mrkdwn", "text": format!("*{}*", escape(&headline)) },
            })];
            for a in alerts.iter().take(DIGEST_ALERTS_MAX) {
                let text = format!(
                    "{} *{}*{}\n{}",
                    mark(a.severity),
                    escape(&a.title),
                    state_note(a),
                    escape(&clip(&n.detail(a), 600))
                );
                blocks.push(
                    json!({ "type": "section", "text": { "type": "mrkdwn", "text": clip(&text, SECTION_TEXT_MAX) } }),
                );
                blocks.push(json!({ "type": "context", "elements": [ { "type": "mrkdwn", "text": context(n, a) } ] }));
            }
            if alerts.len() > DIGEST_ALERTS_MAX {
                let more = alerts.len() - DIGEST_ALERTS_MAX;
                blocks.push(json!({
                    "type": "context",
                    "elements": [ { "type": "mrkdwn", "text": format!("… and {more} more in the desk") } ],
                }));
            }
            json!({ "text": headline, "blocks": blocks })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::message::tests::alert;
    use super::*;
    use crate::store::AlertKind;

    #[test]
    fn one_alert_is_a_section_and_a_context_with_the_place() {
        let at = "2026-03-02T10:05:00Z".parse().unwrap();
        let a = alert(9, AlertKind::Credentials, "HUBSPOT_TOKEN", Severity::Critical);
        let n = Announcement::new("oncall", What::Opened, vec![(a, 0)], at, Some("https://desk.example.com"));
        let p = payload(&n);
        assert_eq!(p["text"], ":rotating_light: title 9");
        let section = p["blocks"][0]["text"]["text"].as_str().unwrap();
        assert_eq!(section, ":rotating_light: *title 9*\ndetail 9 &lt;b&gt;&amp;", "mrkdwn escaped");
        let context = p["blocks"][1]["elements"][0]["text"].as_str().unwrap();
        assert!(context.ends_with("<https://desk.example.com/#/targets|Open Targets>"), "{context}");
    }

    #[test]
    fn a_digest_lists_each_alert() {
        let at = "2026-03-02T10:05:00Z".parse().unwrap();
        let alerts = (1..=3).map(|i| (alert(i, AlertKind::VolumeDrop, "webform", Severity::Warning), 0)).collect();
        let p = payload(&Announcement::new("oncall", What::Digest, alerts, at, None));
        assert_eq!(p["text"], "Leadline: 3 alerts");
        assert_eq!(p["blocks"].as_array().unwrap().len(), 1 + 3 * 2);
    }
}
