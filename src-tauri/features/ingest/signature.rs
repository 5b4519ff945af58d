//! HMAC-SHA256 webhook signatures, verified over the raw body in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, PartialEq, Eq)]
pub enum SignatureError {
    Missing,
    Malformed,
    Mismatch,
    /// A signed timestamp older than the sender allows (HubSpot's v3: 5 minutes).
    Stale,
}

/// Verifies `header` (hex, optionally prefixed `sha256=`) against HMAC-SHA256(secret, body).
/// The comparison is constant-time (`Mac::verify_slice`).
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), SignatureError> {
    let header = header.map(str::trim).filter(|h| !h.is_empty()).ok_or(SignatureError::Missing)?;
    let hex_part = header.strip_prefix("sha256=").unwrap_or(header);
    let expected = hex::decode(hex_part).map_err(|_| SignatureError::Malformed)?;
    let mut mac = HmacSha256::new_from_slice(secret).map_err(|_| SignatureError::Malformed)?;
    mac.update(body);
    mac.verify_slice(&expected).map_err(|_| SignatureError::Mismatch)
}

/// The header value a sender would compute (`sha256=<hex>`): used by the demo traffic and tests.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // RFC 4231 test case 2.
        let sig = sign(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(sig, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn accepts_with_and_without_prefix() {
        let sig = sign(b"s3cret", b"{\"id\":1}");
        assert_eq!(verify(b"s3cret", b"{\"id\":1}", Some(&sig)), Ok(()));
        let bare = sig.trim_start_matches("sha256=");
        assert_eq!(verify(b"s3cret", b"{\"id\":1}", Some(bare)), Ok(()));
    }

    #[test]
    fn rejects_missing_malformed_and_wrong() {
        let body = b"{\"id\":1}";
        assert_eq!(verify(b"k", body, None), Err(SignatureError::Missing));
        assert_eq!(verify(b"k", body, Some("  ")), Err(SignatureError::Missing));
        assert_eq!(verify(b"k", body, Some("sha256=zz")), Err(SignatureError::Malformed));
        let other_key = sign(b"other", body);
        assert_eq!(verify(b"k", body, Some(&other_key)), Err(SignatureError::Mismatch));
        // One changed byte of the body fails.
        let sig = sign(b"k", body);
        assert_eq!(verify(b"k", b"{\"id\":2}", Some(&sig)), Err(SignatureError::Mismatch));
        // A truncated signature fails rather than matching a prefix.
        assert_eq!(verify(b"k", body, Some(&sig[..sig.len() - 2])), Err(SignatureError::Mismatch));
    }
}
