//! HubSpot's request signature v3 (HubSpot's "Validating requests" guide), for `crm_stage` sources fed by a
//! HubSpot app or workflow webhook.
//!
//! HubSpot sends `X-HubSpot-Signature-v3`: the base64 of HMAC-SHA256, keyed with the app's client secret, over
//! the UTF-8 string `method + requestUri + body + timestamp`, where `timestamp` is the `X-HubSpot-Request-Timestamp`
//! header as sent (milliseconds since the epoch) and `requestUri` is the full URL HubSpot called with the
//! characters of HubSpot's table decoded (`%3A` `:`, `%2F` `/`, `%3F` `?`, `%40` `@`, `%21` `!`, `%24` `$`, `%27`
//! `'`, `%28` `(`, `%29` `)`, `%2A` `*`, `%2C` `,`, `%3B` `;`; nothing else). A request whose timestamp is older
//! than 5 minutes is refused. The comparison is constant-time (`Mac::verify_slice`).

use base64::Engine as _;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::signature::SignatureError;

pub const SIGNATURE_HEADER: &str = "X-HubSpot-Signature-v3";
pub const TIMESTAMP_HEADER: &str = "X-HubSpot-Request-Timestamp";
/// HubSpot's limit: a request signed longer ago than this is refused (a replay).
pub const MAX_AGE_MS: i64 = 5 * 60 * 1000;

/// The percent-encodings HubSpot's guide lists as decoded in the signed URI, and what each becomes.
const DECODED: [(&str, char); 12] = [
    ("%3A", ':'),
    ("%2F", '/'),
    ("%3F", '?'),
    ("%40", '@'),
    ("%21", '!'),
    ("%24", '$'),
    ("%27", '\''),
    ("%28", '('),
    ("%29", ')'),
    ("%2A", '*'),
    ("%2C", ','),
    ("%3B", ';'),
];

/// The URI as HubSpot signs it: the listed encodings decoded (either case of hex digit), every other `%XX` kept.
pub fn signed_uri(uri: &str) -> String {
    let mut out = String::with_capacity(uri.len());
    let mut rest = uri;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let candidate = rest.get(at..at + 3).map(str::to_ascii_uppercase);
        match candidate.and_then(|c| DECODED.iter().find(|(code, _)| *code == c)) {
            Some((_, ch)) => {
                out.push(*ch);
                rest = &rest[at + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The header value HubSpot would send for this request (used by tests and mocks).
pub fn sign(secret: &[u8], method: &str, uri: &str, body: &[u8], timestamp: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(mac(secret, method, uri, body, timestamp).finalize().into_bytes())
}

/// Verifies a request's v3 signature at `now`: missing headers, a timestamp that is not a number, one older
/// than [`MAX_AGE_MS`], or a signature that does not match are each refused.
pub fn verify(
    secret: &[u8],
    method: &str,
    uri: &str,
    body: &[u8],
    signature: Option<&str>,
    timestamp: Option<&str>,
    now: DateTime<Utc>,
) -> Result<(), SignatureError> {
    let signature = signature.map(str::trim).filter(|h| !h.is_empty()).ok_or(SignatureError::Missing)?;
    let timestamp = timestamp.map(str::trim).filter(|h| !h.is_empty()).ok_or(SignatureError::Missing)?;
    let sent_ms: i64 = timestamp.parse().map_err(|_| SignatureError::Malformed)?;
    if now.timestamp_millis().saturating_sub(sent_ms) > MAX_AGE_MS {
        return Err(SignatureError::Stale);
    }
    let expected =
        base64::engine::general_purpose::STANDARD.decode(signature).map_err(|_| SignatureError::Malformed)?;
    mac(secret, method, uri, body, timestamp).verify_slice(&expected).map_err(|_| SignatureError::Mismatch)
}

fn new_mac(secret: &[u8]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length")
}

fn mac(secret: &[u8], method: &str, uri: &str, body: &[u8], timestamp: &str) -> Hmac<Sha256> {
    let mut mac = new_mac(secret);
    mac.update(method.as_bytes());
    mac.update(signed_uri(uri).as_bytes());
    mac.update(body);
    mac.update(timestamp.as_bytes());
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy";
    const BODY: &[u8] = br#"{"example_field":"example_value"}"#;
    const SENT: &str = "1700000000000";

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).unwrap()
    }

    // Fixtures computed outside this code, per the guide: base64(HMAC-SHA256(secret, method + uri + body +
    // timestamp)) with Python's hmac/hashlib/base64, the second over the URI with the listed characters decoded
    // (`https://www.example.com/webhook_uri?portal:1=@x(y)`).
    const PLAIN: &str = "rQEKkaNUiu+1qGF//O/pw4BCzstSqO1PyUnGICmf+7o=";
    const DECODED_QUERY: &str = "xc6y6Zvg4GlQa5ePzzk/Z7ofl/JanQE3JxfGD7DMPa0=";

    #[test]
    fn accepts_hubspots_signature() {
        let uri = "https://www.example.com/webhook_uri";
        let now = at(1_700_000_000_000 + 1_000);
        assert_eq!(verify(SECRET, "POST", uri, BODY, Some(PLAIN), Some(SENT), now), Ok(()));
        assert_eq!(sign(SECRET, "POST", uri, BODY, SENT), PLAIN);
    }

    #[test]
    fn decodes_the_listed_characters_of_the_uri_and_only_those() {
        let encoded = "https://www.example.com/webhook_uri?portal%3A1=%40x%28y%29";
        let now = at(1_700_000_000_000);
        assert_eq!(verify(SECRET, "POST", encoded, BODY, Some(DECODED_QUERY), Some(SENT), now), Ok(()));
        assert_eq!(signed_uri("https://h/p?a%3a1%2F%3F%40%21%24%27%28%29%2A%2C%3B"), "https://h/p?a:1/?@!$'()*,;");
        // A space, `&`, `=` and `%` itself stay encoded; a lone `%` is kept.
        assert_eq!(signed_uri("https://h/p?q=a%20b%26c%3Dd%25%"), "https://h/p?q=a%20b%26c%3Dd%25%");
    }

    #[test]
    fn refuses_stale_missing_malformed_and_wrong() {
        let uri = "https://www.example.com/webhook_uri";
        let sent = 1_700_000_000_000;
        let v = |sig: Option<&str>, ts: Option<&str>, now: i64| verify(SECRET, "POST", uri, BODY, sig, ts, at(now));
        // Exactly 5 minutes old is still taken; a millisecond more is a replay.
        assert_eq!(v(Some(PLAIN), Some(SENT), sent + MAX_AGE_MS), Ok(()));
        assert_eq!(v(Some(PLAIN), Some(SENT), sent + MAX_AGE_MS + 1), Err(SignatureError::Stale));
        assert_eq!(v(None, Some(SENT), sent), Err(SignatureError::Missing));
        assert_eq!(v(Some(PLAIN), None, sent), Err(SignatureError::Missing));
        assert_eq!(v(Some(PLAIN), Some("yesterday"), sent), Err(SignatureError::Malformed));
        assert_eq!(v(Some("not base64!"), Some(SENT), sent), Err(SignatureError::Malformed));
        // The timestamp is signed: a fresh timestamp on an old signature does not match.
        assert_eq!(v(Some(PLAIN), Some("1700000000001"), sent), Err(SignatureError::Mismatch));
        // Another body, method, URL or secret does not match.
        assert_eq!(
            verify(SECRET, "POST", uri, b"{}", Some(PLAIN), Some(SENT), at(sent)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify(SECRET, "PUT", uri, BODY, Some(PLAIN), Some(SENT), at(sent)), Err(SignatureError::Mismatch));
        let other = "https://www.example.com/other";
        assert_eq!(
            verify(SECRET, "POST", other, BODY, Some(PLAIN), Some(SENT), at(sent)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"other", "POST", uri, BODY, Some(PLAIN), Some(SENT), at(sent)),
            Err(SignatureError::Mismatch)
        );
    }
}
