//! Twilio's Messages API, as a first contact by SMS uses it: pure — requests built, answers and status callbacks
//! read, signatures computed; no I/O.
//!
//! Documented shapes this module follows (twilio.com/docs: "Messages resource", "Message resource: list",
//! "Error and warning dictionary", "Track the message status of outbound messages", "Webhooks security"):
//! - send: `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, Basic auth (Account SID : auth token),
//!   form-encoded `To` (E.164), `From` or `MessagingServiceSid`, `Body`, `StatusCallback`;
//! - answer: `201 {"sid":"SM…","status":"queued"|"accepted","to","from","body","date_created",…}`;
//! - errors: `{"code":21211,"message","more_info","status":400}` ([`classify_error`]);
//! - list: `GET …/Messages.json?To=<E.164>&PageSize=<n>`, newest first: `{"messages":[{"sid","to","body",
//!   "status","date_created":"<RFC 2822>"}],"next_page_uri"}`;
//! - status callbacks: a form-encoded POST with `MessageSid`, `MessageStatus` (`queued`, `sent`, `delivered`,
//!   `undelivered`, `failed`), `ErrorCode` (30003 unreachable, 30005 unknown, 30007 filtered…), `To`,
//!   `AccountSid`; signed in `X-Twilio-Signature`: Base64 of HMAC-SHA1, keyed with the auth token, over the full
//!   URL followed by each POST parameter's name and value, sorted by name ([`signature`]).

use base64::Engine as _;
use chrono::{DateTime, Duration, Utc};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};

use super::super::vendor::{encode_component, mask, retry_after, HeaderLookup, VendorVerdict};
use crate::model::{default_class_for_status, ContactStatus, ErrorClass, Receipt};

/// How long the account waits after a 429 or 20429 that names no time.
pub const RATE_HOLD: Duration = Duration::seconds(2);

/// A message found in the list sent at most this long before the send in doubt counts as it (the clocks of
/// Leadline and Twilio differ by a little).
pub const CLOCK_SLACK: Duration = Duration::seconds(60);

/// `{base}/2010-04-01/Accounts/{sid}/Messages.json`.
pub fn messages_url(base: &str, account_sid: &str) -> String {
    format!("{}/2010-04-01/Accounts/{}/Messages.json", base.trim_end_matches('/'), account_sid)
}

/// The send's form, in order: `To`, `From` or `MessagingServiceSid`, `Body`, `StatusCallback`.
pub fn send_form(
    to: &str,
    from: Option<&str>,
    messaging_service_sid: Option<&str>,
    body: &str,
    status_callback: Option<&str>,
) -> Vec<(String, String)> {
    let mut form = vec![("To".to_string(), to.to_string())];
    if let Some(f) = from {
        form.push(("From".into(), f.to_string()));
    }
    if let Some(s) = messaging_service_sid {
        form.push(("MessagingServiceSid".into(), s.to_string()));
    }
    form.push(("Body".into(), body.to_string()));
    if let Some(cb) = status_callback {
        form.push(("StatusCallback".into(), cb.to_string()));
    }
    form
}

/// The status callback address of one step: the configured address with the step's key as `step`, so a
/// callback for a send whose answer was lost still names its step.
pub fn callback_for(status_callback: &str, step_key: &str) -> String {
    let sep = if status_callback.contains('?') { '&' } else { '?' };
    format!("{status_callback}{sep}step={}", encode_component(step_key))
}

/// A refused send: its verdict, Twilio's code, and whether the number opted out (21610).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub verdict: VendorVerdict,
    pub code: Option<String>,
    pub opted_out: bool,
}

/// What a send's answer means: `Ok(sid)`, or the refusal.
pub fn parse_send<H: HeaderLookup + ?Sized>(
    status: u16,
    body: &[u8],
    headers: &H,
    now: DateTime<Utc>,
) -> Result<String, Box<Refusal>> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if (200..300).contains(&status) {
        return match json.as_ref().and_then(|j| j.get("sid")).and_then(Value::as_str) {
            Some(sid) if !sid.is_empty() => Ok(sid.to_string()),
            _ => Err(Box::new(Refusal {
                verdict: VendorVerdict::failed(
                    ErrorClass::Transient,
                    format!("Twilio answered HTTP {status} without a sid"),
                ),
                code: None,
                opted_out: false,
            })),
        };
    }
    let code = json.as_ref().and_then(|j| j.get("code")).and_then(Value::as_i64);
    let message = json.as_ref().and_then(|j| j.get("message")).and_then(Value::as_str).map(mask);
    let verdict = classify_error(status, code, message.as_deref(), retry_after(headers, now), now);
    Err(Box::new(Refusal { verdict, code: code.map(|c| c.to_string()), opted_out: code == Some(21610) }))
}

/// Classifies a refusal by Twilio's `code`:
/// - 21211 (invalid `To`), 21614 (not a mobile number), 21612 (cannot be reached from this sender), 21408's
///   sibling 21217 (not a phone number): the lead's data;
/// - 21610 (the recipient replied STOP): the lead's data, and the number is marked opted out by the caller;
/// - 21408 (the region is not enabled), 21606/21212/21659/21660 (the sender), 21602 (an empty body),
///   20404 (no such account): the setup's;
/// - 20003 or HTTP 401: the credential (the step holds, as the CRM connectors do);
/// - 20429 or HTTP 429: a rate limit that holds the account; 5xx: temporary.
pub fn classify_error(
    status: u16,
    code: Option<i64>,
    message: Option<&str>,
    retry_after: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> VendorVerdict {
    let said = |what: &str| match (code, message) {
        (Some(c), Some(m)) => format!("{what} (Twilio error {c}: {m})"),
        (Some(c), None) => format!("{what} (Twilio error {c}, HTTP {status})"),
        (None, Some(m)) => format!("{what} (HTTP {status}: {m})"),
        (None, None) => format!("{what} (HTTP {status})"),
    };
    match code {
        Some(21211 | 21614 | 21612 | 21217) => {
            VendorVerdict::failed(ErrorClass::PermanentData, said("Twilio cannot text this number"))
                .with_field(Some("to".into()))
        }
        Some(21610) => VendorVerdict::failed(
            ErrorClass::PermanentData,
            said("the number unsubscribed (it replied STOP): it is never texted again"),
        )
        .with_field(Some("to".into())),
        Some(21408 | 21606 | 21212 | 21659 | 21660 | 21602 | 20404) => {
            VendorVerdict::failed(ErrorClass::PermanentConfig, said("Twilio refused the sender's setup")).alerting()
        }
        Some(20003) => {
            VendorVerdict::failed(ErrorClass::PermanentConfig, said("Twilio refused the credentials")).credentials()
        }
        Some(20429) => VendorVerdict::failed(ErrorClass::RateLimited, said("Twilio limited the requests"))
            .hold(Some(retry_after.unwrap_or(now + RATE_HOLD)))
            .slow_down(),
        _ if status == 429 => VendorVerdict::failed(ErrorClass::RateLimited, said("Twilio limited the requests"))
            .hold(Some(retry_after.unwrap_or(now + RATE_HOLD))),
        _ if status == 401 => {
            VendorVerdict::failed(ErrorClass::PermanentConfig, said("Twilio refused the credentials")).credentials()
        }
        _ => VendorVerdict::failed(default_class_for_status(status), said("Twilio refused the message")),
    }
}

/// The list URL of messages to `to`, newest first (one page of `page_size`).
pub fn list_url(base: &str, account_sid: &str, to: &str, page_size: u32) -> String {
    format!("{}?To={}&PageSize={page_size}", messages_url(base, account_sid), encode_component(to))
}

/// `to` encoded for a query (what [`list_url`] does).
pub fn encode(to: &str) -> String {
    encode_component(to)
}

/// Most pages of the list read for one look-up (newest first: a send in doubt is recent, so it is on the first
/// pages unless the account sent many messages to the same number since).
pub const MAX_PAGES: usize = 10;

/// The next page of a list answer: Twilio's `next_page_uri` (a path on the API's host, `null` on the last page)
/// joined to `base` — unless this page already reaches back before `sent_at` (less [`CLOCK_SLACK`]): the list is
/// newest first, so later pages hold only older messages, which cannot be the send in doubt.
pub fn next_page(base: &str, body: &[u8], sent_at: DateTime<Utc>) -> Option<String> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let reached_older = json.get("messages").and_then(Value::as_array).is_some_and(|ms| {
        ms.iter().any(|m| {
            m.get("date_created")
                .and_then(Value::as_str)
                .and_then(|d| DateTime::parse_from_rfc2822(d).ok())
                .is_some_and(|d| d.with_timezone(&Utc) < sent_at - CLOCK_SLACK)
        })
    });
    let uri = json.get("next_page_uri").and_then(Value::as_str).filter(|u| u.starts_with('/'))?;
    (!reached_older).then(|| format!("{}{uri}", base.trim_end_matches('/')))
}

/// In a list answer, the message to `to` with `body`, created at or after `sent_at` (less [`CLOCK_SLACK`]): its
/// sid and status. `Err` when the answer cannot be read.
pub fn find_in_list(
    body: &[u8],
    to: &str,
    text: &str,
    sent_at: DateTime<Utc>,
) -> Result<Option<(String, ContactStatus)>, String> {
    let json: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let messages = json.get("messages").and_then(Value::as_array).ok_or("no `messages` list")?;
    for m in messages {
        let same =
            m.get("to").and_then(Value::as_str) == Some(to) && m.get("body").and_then(Value::as_str) == Some(text);
        let created = m
            .get("date_created")
            .and_then(Value::as_str)
            .and_then(|d| DateTime::parse_from_rfc2822(d).ok())
            .map(|d| d.with_timezone(&Utc));
        if same && created.is_some_and(|c| c >= sent_at - CLOCK_SLACK) {
            let sid = m.get("sid").and_then(Value::as_str).unwrap_or_default().to_string();
            let status = m.get("status").and_then(Value::as_str).and_then(status_of).unwrap_or(ContactStatus::Accepted);
            return Ok(Some((sid, status)));
        }
    }
    Ok(None)
}

/// A Twilio `MessageStatus` in Leadline's words (`undelivered` is a failure too); `None` for one that says
/// nothing new (`queued`, `sending`, `accepted`, `scheduled`).
pub fn status_of(s: &str) -> Option<ContactStatus> {
    Some(match s {
        "queued" | "accepted" | "sending" | "scheduled" => ContactStatus::Accepted,
        "sent" => ContactStatus::Sent,
        "delivered" => ContactStatus::Delivered,
        "read" => ContactStatus::Read,
        "undelivered" | "failed" => ContactStatus::Failed,
        _ => return None,
    })
}

/// A status callback's form as a receipt, at `now` (callbacks carry no time). `None` without a sid or a known
/// status.
pub fn parse_callback(form: &[(String, String)], step_key: Option<String>, now: DateTime<Utc>) -> Option<Receipt> {
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty());
    let provider_id = get("MessageSid").or_else(|| get("SmsSid"))?.to_string();
    let status = status_of(get("MessageStatus").or_else(|| get("SmsStatus"))?)?;
    let error_code = get("ErrorCode").map(String::from);
    let error_title = error_code.as_deref().map(|c| {
        match c {
            "30003" => "unreachable destination handset",
            "30004" => "message blocked",
            "30005" => "unknown destination handset",
            "30006" => "landline or unreachable carrier",
            "30007" => "message filtered",
            "30008" => "unknown error",
            _ => "undelivered",
        }
        .to_string()
    });
    Some(Receipt { provider_id, step_key, status, error_code, error_title, at: now })
}

/// `X-Twilio-Signature` for a POST to `url` with `params`: Base64(HMAC-SHA1(auth_token, url + each name and
/// value, sorted by name)).
pub fn signature(auth_token: &str, url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(auth_token.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(url.as_bytes());
    for (k, v) in sorted {
        mac.update(k.as_bytes());
        mac.update(v.as_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Whether `given` is the signature of `url` and `params` (compared in constant time).
pub fn verify(auth_token: &str, url: &str, params: &[(String, String)], given: Option<&str>) -> bool {
    let Some(given) = given.map(str::trim).filter(|g| !g.is_empty()) else { return false };
    let Ok(given) = base64::engine::general_purpose::STANDARD.decode(given) else { return false };
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(auth_token.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(url.as_bytes());
    for (k, v) in sorted {
        mac.update(k.as_bytes());
        mac.update(v.as_bytes());
    }
    mac.verify_slice(&given).is_ok()
}

/// The answer Twilio gives a created message (for the mock and the tests).
pub fn created_answer(sid: &str, to: &str, body: &str, date_created: DateTime<Utc>) -> Value {
    json!({"sid": sid, "status": "queued", "to": to, "body": body, "date_created": date_created.to_rfc2822(),
           "error_code": null, "error_message": null})
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 5, 10, 0, 0).unwrap()
    }

    fn refusal(status: u16, code: i64) -> (VendorVerdict, bool) {
        let body = json!({"code": code, "message": "The 'To' number +4915112345678 is not valid.",
            "more_info": format!("https://www.twilio.com/docs/errors/{code}"), "status": status});
        let r = *parse_send(status, body.to_string().as_bytes(), &[] as &[(&str, &str)], now()).unwrap_err();
        assert_eq!(r.code, Some(code.to_string()));
        (r.verdict, r.opted_out)
    }

    #[test]
    fn the_list_is_followed_page_by_page_until_it_reaches_older_messages() {
        let recent = created_answer("SM2", "+4915112345678", "other", now());
        let next = "/2010-04-01/Accounts/AC1/Messages.json?To=%2B4915112345678&PageSize=1&Page=1&PageToken=PA1";
        let page = json!({"messages": [recent], "next_page_uri": next}).to_string();
        assert_eq!(next_page("http://127.0.0.1:9/", page.as_bytes(), now()), Some(format!("http://127.0.0.1:9{next}")));
        let last = json!({"messages": [], "next_page_uri": null}).to_string();
        assert_eq!(next_page("http://x", last.as_bytes(), now()), None);
        let old = created_answer("SM1", "+4915112345678", "other", now() - Duration::hours(3));
        let older = json!({"messages": [old], "next_page_uri": next}).to_string();
        assert_eq!(next_page("http://x", older.as_bytes(), now()), None, "nothing newer further on");
    }

    #[test]
    fn the_form_and_the_callback_name_the_step() {
        let cb = callback_for("https://leadline.example.com/receipts/sms/sms", "web:1:sms");
        assert_eq!(cb, "https://leadline.example.com/receipts/sms/sms?step=web%3A1%3Asms");
        let form = send_form("+4915112345678", Some("+15005550006"), None, "Hi Ada", Some(&cb));
        let names: Vec<&str> = form.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["To", "From", "Body", "StatusCallback"]);
        let service = send_form("+4915112345678", None, Some("MG1"), "Hi", None);
        assert_eq!(service[1], ("MessagingServiceSid".to_string(), "MG1".to_string()));
    }

    #[test]
    fn errors_are_classified_by_their_code() {
        let (v, stop) = refusal(400, 21211);
        assert_eq!((v.class, stop), (Some(ErrorClass::PermanentData), false));
        assert!(!v.reason.contains("4915112345678"), "the number is masked: {}", v.reason);
        let (v, stop) = refusal(400, 21610);
        assert_eq!((v.class, stop), (Some(ErrorClass::PermanentData), true));
        let (v, _) = refusal(400, 21408);
        assert_eq!(v.class, Some(ErrorClass::PermanentConfig));
        assert!(v.alert);
        let (v, _) = refusal(429, 20429);
        assert_eq!((v.class, v.hold_until), (Some(ErrorClass::RateLimited), Some(now() + RATE_HOLD)));
        let (v, _) = refusal(401, 20003);
        assert!(v.credential_problem);
        let ok = created_answer("SM1", "+4915112345678", "Hi", now()).to_string();
        assert_eq!(parse_send(201, ok.as_bytes(), &[] as &[(&str, &str)], now()).unwrap(), "SM1");
    }

    #[test]
    fn a_message_in_doubt_is_found_in_the_list_by_number_body_and_time() {
        let list = json!({"messages": [
            created_answer("SM3", "+4915112345678", "Hi Ada", now() + Duration::seconds(1)),
            created_answer("SM2", "+4915112345678", "Hi Bob", now() + Duration::seconds(1)),
            created_answer("SM1", "+4915112345678", "Hi Ada", now() - Duration::hours(3)),
        ], "next_page_uri": null})
        .to_string();
        let found = find_in_list(list.as_bytes(), "+4915112345678", "Hi Ada", now()).unwrap();
        assert_eq!(found, Some(("SM3".to_string(), ContactStatus::Accepted)));
        let older =
            json!({"messages": [created_answer("SM1", "+4915112345678", "Hi Ada", now() - Duration::hours(3))]});
        assert_eq!(find_in_list(older.to_string().as_bytes(), "+4915112345678", "Hi Ada", now()).unwrap(), None);
    }

    #[test]
    fn the_signature_follows_twilios_documented_example() {
        // Twilio's "Webhooks security" example: this URL, these parameters and the token 12345.
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        let params: Vec<(String, String)> = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+12349013030"),
            ("Digits", "1234"),
            ("From", "+12349013030"),
            ("To", "+18005551212"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let sig = signature("12345", url, &params);
        assert_eq!(sig, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=");
        assert!(verify("12345", url, &params, Some(&sig)));
        assert!(!verify("12345", url, &params[1..], Some(&sig)));
        assert!(!verify("other", url, &params, Some(&sig)));
        assert!(!verify("12345", url, &params, None));
    }

    #[test]
    fn status_callbacks_become_receipts() {
        let form: Vec<(String, String)> =
            [("MessageSid", "SM1"), ("MessageStatus", "undelivered"), ("ErrorCode", "30003")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let r = parse_callback(&form, Some("web:1:sms".into()), now()).unwrap();
        assert_eq!((r.status, r.error_code.as_deref()), (ContactStatus::Failed, Some("30003")));
        assert_eq!(r.step_key.as_deref(), Some("web:1:sms"));
    }
}
