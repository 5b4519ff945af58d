//! The generic webhook: one JSON POST per announcement, for a receiver of your own (an on-call tool, a chat bot,
//! a script). Documented in `docs/operators.md`:
//!
//! ```json
//! { "type": "alert" | "reminder" | "digest", "channel": "…", "idempotency_key": "…", "sent_at": "…",
//!   "alerts": [ { "id", "kind", "key", "severity", "title", "detail", "state", "opened_at", "place", "link" } ] }
//! ```
//!
//! Headers: `Idempotency-Key` (the same for every try of one announcement: a receiver dedupes on it) and, with
//! `secret_env`, `X-Leadline-Signature-256: sha256=<hex HMAC-SHA256 of the body>` (the format Leadline checks on
//! its own webhooks). Any 2xx is a success.

use hmac::{Hmac, Mac};
use serde_json::{json, Value};

use super::message::Announcement;

pub const SIGNATURE_HEADER: &str = "X-Leadline-Signature-256";

/// The JSON body.
pub fn body(n: &Announcement) -> Value {
    let alerts: Vec<Value> = n
        .alerts
        .iter()
        .map(|a| {
            json!({
                "id": a.id,
                "kind": a.kind,
                "key": a.key,
                "severity": a.severity,
                "title": a.title,
                "detail": n.detail(a),
                "state": a.state,
                "opened_at": a.opened_at,
                "place": a.place,
                "link": n.link(a),
            })
        })
        .collect();
    json!({
        "type": n.what.as_str(),
        "channel": n.channel,
        "idempotency_key": n.idempotency_key,
        "sent_at": n.sent_at,
        "alerts": alerts,
    })
}

/// `sha256=<hex>` of HMAC-SHA256(secret, body).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::super::message::{tests::alert, What};
    use super::*;
    use crate::store::{AlertKind, Severity};

    #[test]
    fn the_body_carries_each_alert_and_its_place() {
        let at = "2026-03-02T10:05:00Z".parse().unwrap();
        let a = alert(5, AlertKind::BreakerOpen, "crm", Severity::Critical);
        let b = body(&Announcement::new("hook", What::Opened, vec![(a, 0)], at, Some("https://d.example.com")));
        assert_eq!(b["type"], "alert");
        assert_eq!(b["idempotency_key"], "leadline-hook-5-1");
        assert_eq!(b["alerts"][0]["kind"], "breaker_open");
        assert_eq!(b["alerts"][0]["severity"], "critical");
        assert_eq!(b["alerts"][0]["state"], "open");
        assert_eq!(b["alerts"][0]["opened_at"], "2026-03-02T10:00:00Z");
        assert_eq!(b["alerts"][0]["place"]["target"], "crm");
        assert_eq!(b["alerts"][0]["link"], "https://d.example.com/#/targets/crm");
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
