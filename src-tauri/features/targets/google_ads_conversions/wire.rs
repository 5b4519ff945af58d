//! Google Ads click conversions over REST, as Google documents them (`customers.uploadClickConversions`,
//! "Upload click conversions"; the errors in "Partial failures" and `ConversionUploadErrorEnum`):
//!
//! ```json
//! POST /v{N}/customers/{customer_id}:uploadClickConversions
//! {"conversions": [{"gclid": "…", "conversionAction": "customers/1/conversionActions/2",
//!   "conversionDateTime": "2026-12-05 12:00:00+00:00", "conversionValue": 1200.0, "currencyCode": "EUR",
//!   "orderId": "google:GL-1:customer"}], "partialFailure": true}
//! ```
//!
//! The answer has one `results[]` entry per conversion (an empty object for a failed one) and, when some failed,
//! `partialFailureError`: a `google.rpc.Status` whose `details[]` hold a `GoogleAdsFailure` with `errors[]`, each
//! naming its row in `location.fieldPathElements` (`{"fieldName": "conversions", "index": 3}`) and its cause in
//! `errorCode` (`{"conversionUploadError": "EVENT_NOT_FOUND"}`). An error of the whole call (authentication,
//! quota) is `{"error": {"code", "message", "status", "details"}}`. Pure: no I/O.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::model::{ErrorClass, Failure};

/// Most conversions Google takes in one request.
pub const MAX_CONVERSIONS: usize = 2_000;

/// Google takes a click's conversions up to 90 days after the click.
pub const WINDOW_DAYS: u32 = 90;

/// `conversionDateTime` in Google's format (`yyyy-mm-dd hh:mm:ss+hh:mm`), in UTC.
pub fn date_time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S+00:00").to_string()
}

/// Google's `orderId` (at most 64 characters): the conversion's key, or its SHA-256 when longer.
pub fn order_id(key: &str) -> String {
    if key.len() <= 64 {
        key.to_string()
    } else {
        crate::features::targets::meta_conversions::wire::sha256_hex(key)
    }
}

/// One row of the request.
pub fn row(gclid: &str, action: &str, at: DateTime<Utc>, value: Option<f64>, currency: &str, order: &str) -> Value {
    let mut r = json!({"gclid": gclid, "conversionAction": action, "conversionDateTime": date_time(at),
        "orderId": order_id(order)});
    if let Some(v) = value {
        r["conversionValue"] = json!(v);
        r["currencyCode"] = json!(currency);
    }
    r
}

pub fn body(rows: &[Value]) -> Value {
    json!({"conversions": rows, "partialFailure": true})
}

/// What became of one row.
#[derive(Debug, Clone, PartialEq)]
pub enum RowOutcome {
    Uploaded,
    /// Google already has this conversion (the same order id): nothing more to do.
    AlreadyThere,
    /// Google says the click is past its window: the step ends as reported.
    TooOld(String),
    Failed(Failure),
}

/// Every row's outcome of a `200` answer for `rows` rows.
pub fn rows(body: &[u8], rows: usize) -> Vec<RowOutcome> {
    let answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut out = vec![RowOutcome::Uploaded; rows];
    let details = answer.pointer("/partialFailureError/details").and_then(Value::as_array).cloned().unwrap_or_default();
    for d in details {
        for e in d.get("errors").and_then(Value::as_array).cloned().unwrap_or_default() {
            let index = e
                .pointer("/location/fieldPathElements")
                .and_then(Value::as_array)
                .and_then(|p| p.iter().find(|el| el.get("fieldName").and_then(Value::as_str) == Some("conversions")))
                .and_then(|el| el.get("index"))
                .and_then(Value::as_u64)
                .map(|i| i as usize);
            let Some(i) = index.filter(|i| *i < rows) else { continue };
            out[i] = row_error(&e);
        }
    }
    // A row with an empty result and no error named: Google did not take it, and did not say why.
    if let Some(results) = answer.get("results").and_then(Value::as_array) {
        for (i, r) in results.iter().enumerate().take(rows) {
            if out[i] == RowOutcome::Uploaded && r.as_object().is_some_and(|o| o.is_empty()) {
                out[i] = RowOutcome::Failed(Failure {
                    class: ErrorClass::Transient,
                    reason: "Google Ads returned no result for this conversion and named no error".into(),
                    field: None,
                });
            }
        }
    }
    out
}

/// One row's error (`errorCode` has one member: the error's enum and its value).
fn row_error(e: &Value) -> RowOutcome {
    let (kind, code) = e
        .get("errorCode")
        .and_then(Value::as_object)
        .and_then(|o| o.iter().next())
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .unwrap_or_default();
    let message = e.get("message").and_then(Value::as_str).unwrap_or("no message");
    let fail = |class, what: &str| {
        RowOutcome::Failed(Failure { class, reason: format!("Google Ads: {code} — {what} ({message})"), field: None })
    };
    match code.as_str() {
        "CLICK_CONVERSION_ALREADY_EXISTS" | "DUPLICATE_ORDER_ID" => RowOutcome::AlreadyThere,
        "EXPIRED_EVENT" | "CONVERSION_PRECEDES_EVENT" => {
            RowOutcome::TooOld(format!("reported: too old for Google's conversion window ({code}): not sent"))
        }
        "EVENT_NOT_FOUND" => fail(
            ErrorClass::PermanentData,
            "Google does not know this click (a gclid from another account, or mistyped)",
        ),
        "UNPARSEABLE_GCLID" | "INVALID_CONVERSION_DATE_TIME" | "CONVERSION_PRECEDES_GCLID" => {
            fail(ErrorClass::PermanentData, "the lead's click id or time cannot be used")
        }
        "TOO_RECENT_EVENT" | "TOO_RECENT_CONVERSION_ACTION" => {
            fail(ErrorClass::Transient, "Google is not ready for this click yet; it goes again later")
        }
        _ if kind == "conversionActionError"
            || code.contains("CONVERSION_ACTION")
            || kind == "authorizationError"
            || code == "CUSTOMER_NOT_ACCEPTED_CUSTOMER_DATA_TERMS" =>
        {
            fail(ErrorClass::PermanentConfig, "check the conversion action and the account's settings")
        }
        _ => fail(ErrorClass::PermanentData, "Google refused this conversion"),
    }
}

/// An error of the whole call: its class, words, and any retry delay Google gave (`retryDelay: "30s"`).
pub fn call_error(status: u16, body: &[u8]) -> (Failure, Option<chrono::Duration>) {
    let answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let err = answer.get("error");
    let state = err.and_then(|e| e.get("status")).and_then(Value::as_str).unwrap_or_default();
    let message = err.and_then(|e| e.get("message")).and_then(Value::as_str).unwrap_or("no message");
    let delay = find_retry_delay(&answer);
    let class = match (status, state) {
        (429, _) | (_, "RESOURCE_EXHAUSTED") => ErrorClass::RateLimited,
        (401, _) | (_, "UNAUTHENTICATED") | (403, _) | (_, "PERMISSION_DENIED") => ErrorClass::PermanentConfig,
        (500..=599, _) | (_, "UNAVAILABLE") | (_, "INTERNAL") | (_, "DEADLINE_EXCEEDED") => ErrorClass::Transient,
        (404, _) => ErrorClass::PermanentConfig,
        (400, _) => ErrorClass::PermanentConfig,
        _ => crate::model::default_class_for_status(status),
    };
    let words = match class {
        ErrorClass::RateLimited => "Google Ads' quota is used up for now",
        ErrorClass::Transient => "Google Ads is not answering properly",
        _ => "Google Ads refused the request: check the account, the manager account and the OAuth client",
    };
    (Failure { class, reason: format!("{words} (HTTP {status} {state}: {message})"), field: None }, delay)
}

/// The first `retryDelay` (`"30s"`) anywhere in the answer (`google.rpc.RetryInfo`, or a quota error's details).
fn find_retry_delay(v: &Value) -> Option<chrono::Duration> {
    match v {
        Value::Object(o) => o
            .get("retryDelay")
            .and_then(Value::as_str)
            .and_then(|s| s.trim_end_matches('s').parse::<f64>().ok())
            .map(|s| chrono::Duration::milliseconds((s * 1000.0) as i64))
            .or_else(|| o.values().find_map(find_retry_delay)),
        Value::Array(a) => a.iter().find_map(find_retry_delay),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_row_follows_the_documented_shape() {
        let at = Utc.with_ymd_and_hms(2026, 12, 5, 12, 30, 0).unwrap();
        let r = row("Cj0", "customers/1/conversionActions/2", at, Some(99.5), "EUR", "google:GL-1:customer");
        assert_eq!(r["conversionDateTime"], "2026-12-05 12:30:00+00:00");
        assert_eq!(r["orderId"], "google:GL-1:customer");
        assert_eq!(r["currencyCode"], "EUR");
        assert_eq!(body(&[r])["partialFailure"], true);
        assert_eq!(order_id(&"x".repeat(80)).len(), 64);
    }

    /// A partial failure as Google documents it: row 1 an unknown click, row 2 already uploaded.
    #[test]
    fn partial_failures_are_read_per_row() {
        let answer = json!({
            "results": [{"gclid": "a", "conversionAction": "customers/1/conversionActions/2"}, {}, {}],
            "partialFailureError": {"code": 3, "message": "Multiple errors in 'details'.", "details": [{
                "@type": "type.googleapis.com/google.ads.googleads.v22.errors.GoogleAdsFailure",
                "errors": [
                    {"errorCode": {"conversionUploadError": "EVENT_NOT_FOUND"}, "message": "The click was not found.",
                     "location": {"fieldPathElements": [{"fieldName": "conversions", "index": 1}]}},
                    {"errorCode": {"conversionUploadError": "CLICK_CONVERSION_ALREADY_EXISTS"}, "message": "dup",
                     "location": {"fieldPathElements": [{"fieldName": "conversions", "index": 2}]}}
                ]}]}
        });
        let out = rows(answer.to_string().as_bytes(), 3);
        assert_eq!(out[0], RowOutcome::Uploaded);
        assert!(
            matches!(&out[1], RowOutcome::Failed(f) if f.class == ErrorClass::PermanentData && f.reason.contains("EVENT_NOT_FOUND"))
        );
        assert_eq!(out[2], RowOutcome::AlreadyThere);
    }

    #[test]
    fn whole_call_errors() {
        let quota = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota", "details": [
            {"@type": "type.googleapis.com/google.ads.googleads.v22.errors.GoogleAdsFailure",
             "errors": [{"errorCode": {"quotaError": "RESOURCE_EXHAUSTED"}, "details": {"quotaErrorDetails": {"retryDelay": "30s"}}}]}]}});
        let (f, delay) = call_error(429, quota.to_string().as_bytes());
        assert_eq!(f.class, ErrorClass::RateLimited);
        assert_eq!(delay, Some(chrono::Duration::seconds(30)));
        let (f, _) = call_error(401, br#"{"error": {"code": 401, "status": "UNAUTHENTICATED", "message": "bad"}}"#);
        assert_eq!(f.class, ErrorClass::PermanentConfig);
        assert_eq!(call_error(503, b"").0.class, ErrorClass::Transient);
    }
}
