//! The WhatsApp Business Cloud API, as a first contact uses it: pure — requests built and answers read, no I/O.
//!
//! Documented shapes this module follows (developers.facebook.com, WhatsApp Cloud API reference: "Messages",
//! "Sending message templates", "Error codes", "Webhooks: messages — status messages"):
//! - send: `POST /{version}/{phone-number-id}/messages`, `Authorization: Bearer <token>`, JSON
//!   `{"messaging_product":"whatsapp","recipient_type":"individual","to":"<E.164 digits>","type":"template",
//!   "template":{"name","language":{"code"},"components":[{"type":"body","parameters":[{"type":"text","text"}]}]},
//!   "biz_opaque_callback_data":"<the step's key>"}`;
//! - answer: `{"messaging_product":"whatsapp","contacts":[{"input","wa_id"}],"messages":[{"id":"wamid…",
//!   "message_status":"accepted"}]}`;
//! - errors in the Graph shape `{"error":{"message","type","code","error_subcode","error_data":{"details"},
//!   "fbtrace_id"}}`, classified by `code` ([`classify_error`]);
//! - receipts: the `messages` field of a WhatsApp Business Account webhook, `entry[].changes[].value.statuses[]`
//!   with `id`, `status` (`sent`, `delivered`, `read`, `failed`), `timestamp` (Unix seconds), `recipient_id`,
//!   `biz_opaque_callback_data` and, when failed, `errors[]` (`code`, `title`). Signed like every Meta webhook:
//!   `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body with the app secret>`.
//!
//! There is no idempotency key and no list of sent messages: a send whose answer was lost is known only by its
//! receipt, which carries the step's key in `biz_opaque_callback_data` (`targets::contact`).

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::{json, Value};

use super::super::vendor::{mask, retry_after, HeaderLookup, VendorVerdict};
use crate::model::{default_class_for_status, ContactStatus, ErrorClass, Receipt};

/// How long the whole number waits after a throughput limit (130429) that names no time.
pub const THROUGHPUT_HOLD: Duration = Duration::seconds(5);

/// The send URL: `{base}/{version}/{phone_number_id}/messages`.
pub fn send_url(base: &str, version: &str, phone_number_id: &str) -> String {
    format!("{}/{}/{}/messages", base.trim_end_matches('/'), version.trim_matches('/'), phone_number_id)
}

/// The body of a template message to `recipient` (E.164; WhatsApp takes the digits, with or without `+`).
pub fn template_body(recipient: &str, template: &str, language: &str, parameters: &[String], key: &str) -> Value {
    let mut t = json!({ "name": template, "language": { "code": language } });
    if !parameters.is_empty() {
        let params: Vec<Value> = parameters.iter().map(|p| json!({ "type": "text", "text": p })).collect();
        t["components"] = json!([{ "type": "body", "parameters": params }]);
    }
    json!({
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": recipient.trim_start_matches('+'),
        "type": "template",
        "template": t,
        "biz_opaque_callback_data": key,
    })
}

/// What a send's answer means: `Ok(message id)`, or the verdict of a refusal with the error code.
pub fn parse_send<H: HeaderLookup + ?Sized>(
    status: u16,
    body: &[u8],
    headers: &H,
    now: DateTime<Utc>,
) -> Result<String, (VendorVerdict, Option<String>)> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if (200..300).contains(&status) {
        return match json.as_ref().and_then(|j| j.pointer("/messages/0/id")).and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok(id.to_string()),
            _ => Err((
                VendorVerdict::failed(
                    ErrorClass::Transient,
                    format!("WhatsApp answered HTTP {status} without a message id"),
                ),
                None,
            )),
        };
    }
    let code = json.as_ref().and_then(|j| j.pointer("/error/code")).and_then(Value::as_i64);
    let message = json.as_ref().and_then(|j| j.pointer("/error/message")).and_then(Value::as_str).map(mask);
    let verdict = classify_error(status, code, message.as_deref(), retry_after(headers, now), now);
    Err((verdict, code.map(|c| c.to_string())))
}

/// Classifies a refusal by WhatsApp's error `code` (HTTP status when it gave none):
/// - 130429 (throughput) holds the number; 131056 (too many messages to this one recipient) waits for the lead
///   alone — both rate limits, neither the lead's failure;
/// - 131026 (not on WhatsApp, or an old client), 131021 (the recipient is the sender), 131009 (a parameter
///   value, most often the number) are the lead's data;
/// - 132000, 132001, 132005, 132007, 132012, 132015, 132016 (the template: wrong parameters, missing,
///   paused, disabled…), 131047 (free text outside 24 h), 131051, 131030, 131031, 368, 10, 200 are the setup's:
///   they alert, and the step holds its leads until a person fixes it (`contact::hold_on_setup`);
/// - 190 (expired or revoked token) holds the step for its credential, like the CRM connectors;
/// - 1, 2, 131000, 131016, 133004 are temporary.
pub fn classify_error(
    status: u16,
    code: Option<i64>,
    message: Option<&str>,
    retry_after: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> VendorVerdict {
    let said = |what: &str| match (code, message) {
        (Some(c), Some(m)) => format!("{what} (WhatsApp error {c}: {m})"),
        (Some(c), None) => format!("{what} (WhatsApp error {c}, HTTP {status})"),
        (None, Some(m)) => format!("{what} (HTTP {status}: {m})"),
        (None, None) => format!("{what} (HTTP {status})"),
    };
    match code {
        Some(130429) => {
            VendorVerdict::failed(ErrorClass::RateLimited, said("WhatsApp's message throughput was reached"))
                .hold(Some(retry_after.unwrap_or(now + THROUGHPUT_HOLD)))
                .slow_down()
        }
        Some(131056) => VendorVerdict::failed(
            ErrorClass::RateLimited,
            said("too many messages to this number in a short time; this lead waits"),
        ),
        Some(131026) => VendorVerdict::failed(
            ErrorClass::PermanentData,
            said("the number cannot get WhatsApp messages (not on WhatsApp, or an old app)"),
        )
        .with_field(Some("to".into())),
        Some(131021 | 131009) => VendorVerdict::failed(ErrorClass::PermanentData, said("WhatsApp refused the number"))
            .with_field(Some("to".into())),
        Some(132000 | 132001 | 132005 | 132007 | 132012 | 132015 | 132016) => VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            said("the template or its parameters are wrong: check whatsapp.template, language and parameters"),
        )
        .alerting(),
        Some(131047 | 131051 | 131030 | 131031 | 368 | 10 | 200) => {
            VendorVerdict::failed(ErrorClass::PermanentConfig, said("WhatsApp refused the sender's setup")).alerting()
        }
        Some(190) => VendorVerdict::failed(
            ErrorClass::PermanentConfig,
            said("WhatsApp refused the access token (expired or revoked)"),
        )
        .credentials(),
        Some(1 | 2 | 131000 | 131016 | 133004) => {
            VendorVerdict::failed(ErrorClass::Transient, said("WhatsApp had a temporary problem"))
        }
        _ if status == 401 => {
            VendorVerdict::failed(ErrorClass::PermanentConfig, said("WhatsApp refused the access token")).credentials()
        }
        _ if status == 429 => {
            VendorVerdict::failed(ErrorClass::RateLimited, said("WhatsApp limited the requests")).hold(retry_after)
        }
        _ => {
            let class = default_class_for_status(status);
            let class = if class == ErrorClass::RateLimited { ErrorClass::Transient } else { class };
            VendorVerdict::failed(class, said("WhatsApp refused the message"))
        }
    }
}

/// The receipts of a webhook body (every `statuses[]` entry of every change of field `messages`). Entries
/// without an id or with an unknown status are passed over; a body that is not such a webhook is an error.
pub fn parse_statuses(body: &[u8]) -> Result<Vec<Receipt>, String> {
    let json: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let entries = json.get("entry").and_then(Value::as_array).ok_or("no `entry` list")?;
    let mut out = Vec::new();
    for change in entries.iter().filter_map(|e| e.get("changes").and_then(Value::as_array)).flatten() {
        if change.get("field").and_then(Value::as_str).is_some_and(|f| f != "messages") {
            continue;
        }
        let Some(statuses) = change.pointer("/value/statuses").and_then(Value::as_array) else { continue };
        for s in statuses {
            let Some(id) = s.get("id").and_then(Value::as_str).filter(|i| !i.is_empty()) else { continue };
            let status = match s.get("status").and_then(Value::as_str) {
                Some("sent") => ContactStatus::Sent,
                Some("delivered") => ContactStatus::Delivered,
                Some("read") => ContactStatus::Read,
                Some("failed") => ContactStatus::Failed,
                _ => continue,
            };
            let at = s
                .get("timestamp")
                .and_then(|t| t.as_str().and_then(|t| t.parse::<i64>().ok()).or_else(|| t.as_i64()))
                .and_then(|t| Utc.timestamp_opt(t, 0).single());
            let error = s.pointer("/errors/0");
            out.push(Receipt {
                provider_id: id.to_string(),
                step_key: s.get("biz_opaque_callback_data").and_then(Value::as_str).map(String::from),
                status,
                error_code: error.and_then(|e| e.get("code")).map(|c| match c {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }),
                error_title: error
                    .and_then(|e| e.get("title").or_else(|| e.get("message")))
                    .and_then(Value::as_str)
                    .map(mask),
                at: at.unwrap_or(DateTime::<Utc>::MIN_UTC),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 5, 10, 0, 0).unwrap()
    }

    fn refusal(code: i64) -> VendorVerdict {
        let body = json!({"error": {"message": "(#x) something", "type": "OAuthException", "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": "d"}, "fbtrace_id": "A"}});
        parse_send(400, body.to_string().as_bytes(), &[] as &[(&str, &str)], now()).unwrap_err().0
    }

    #[test]
    fn the_request_is_a_template_with_the_steps_key() {
        let b = template_body("+4915112345678", "lead_welcome", "de", &["Ada".into()], "web:1:hello");
        assert_eq!(b["to"], "4915112345678");
        assert_eq!(b["type"], "template");
        assert_eq!(b["template"]["name"], "lead_welcome");
        assert_eq!(b["template"]["language"]["code"], "de");
        assert_eq!(b["template"]["components"][0]["parameters"][0], json!({"type": "text", "text": "Ada"}));
        assert_eq!(b["biz_opaque_callback_data"], "web:1:hello");
        assert_eq!(
            send_url("https://graph.facebook.com/", "v21.0", "123"),
            "https://graph.facebook.com/v21.0/123/messages"
        );
    }

    #[test]
    fn an_accepted_message_gives_its_id() {
        let ok = br#"{"messaging_product":"whatsapp","contacts":[{"input":"4915112345678","wa_id":"4915112345678"}],"messages":[{"id":"wamid.HBgL","message_status":"accepted"}]}"#;
        assert_eq!(parse_send(200, ok, &[] as &[(&str, &str)], now()).unwrap(), "wamid.HBgL");
        let (v, _) = parse_send(200, b"{}", &[] as &[(&str, &str)], now()).unwrap_err();
        assert_eq!(v.class, Some(ErrorClass::Transient));
    }

    #[test]
    fn errors_are_classified_by_their_code() {
        let r = refusal(130429);
        assert_eq!(r.class, Some(ErrorClass::RateLimited));
        assert_eq!(r.hold_until, Some(now() + THROUGHPUT_HOLD));
        let pair = refusal(131056);
        assert_eq!((pair.class, pair.hold_until), (Some(ErrorClass::RateLimited), None), "only this lead waits");
        assert_eq!(refusal(131026).class, Some(ErrorClass::PermanentData));
        assert_eq!(refusal(131026).field.as_deref(), Some("to"));
        for code in [132000, 132001] {
            let v = refusal(code);
            assert_eq!(v.class, Some(ErrorClass::PermanentConfig), "{code}");
            assert!(v.alert && !v.credential_problem, "{code}");
        }
        let token = refusal(190);
        assert!(token.credential_problem && token.class == Some(ErrorClass::PermanentConfig));
        assert_eq!(refusal(131000).class, Some(ErrorClass::Transient));
        let (v, code) = parse_send(500, b"oops", &[] as &[(&str, &str)], now()).unwrap_err();
        assert_eq!((v.class, code), (Some(ErrorClass::Transient), None));
    }

    #[test]
    fn receipts_are_read_from_a_status_webhook() {
        // The shape of a "status messages" webhook, with a failure's `errors`.
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
            "statuses": [
                {"id": "wamid.A", "status": "delivered", "timestamp": "1764928800", "recipient_id": "4915112345678",
                 "biz_opaque_callback_data": "web:1:hello"},
                {"id": "wamid.B", "status": "failed", "timestamp": "1764928801", "recipient_id": "4915100000000",
                 "errors": [{"code": 131026, "title": "Message undeliverable"}]},
                {"id": "wamid.C", "status": "deleted", "timestamp": "1764928802"}
            ]}}]}]});
        let r = parse_statuses(body.to_string().as_bytes()).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].status, r[0].step_key.as_deref()), (ContactStatus::Delivered, Some("web:1:hello")));
        assert_eq!(r[0].at, Utc.timestamp_opt(1_764_928_800, 0).unwrap());
        assert_eq!((r[1].status, r[1].error_code.as_deref()), (ContactStatus::Failed, Some("131026")));
        assert!(parse_statuses(b"[]").is_err());
    }
}
