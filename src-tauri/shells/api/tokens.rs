//! People, not one shared token: each operator of a server gets a token of their own, and every audited action
//! (replay, fix, discard, acknowledge, pause, reveal) records whose token did it.
//!
//! - `default` is the browser token the server makes on its first start and prints once (`leadline reset-token`
//!   replaces it); it acts as [`BROWSER_ACTOR`].
//! - `leadline token create NAME` makes a token for a person and prints it once; it acts as `NAME`.
//! - `leadline token revoke NAME` ends it at once: the next request with it is refused, and a live feed opened with
//!   it is closed within [`LIVE_FEED_RECHECK`] (`token list` shows who has access and since when).
//!
//! Only a token's SHA-256 is stored. A token is 24 random bytes, so looking it up by its hash gives nothing to
//! guess from timing.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::store::{OperatorToken, Store};

/// The name the browser token (`default`) acts under in audits.
pub const BROWSER_ACTOR: &str = "browser token `default`";

/// How often an open live feed checks that its token still works (a revocation closes it within this time).
pub const LIVE_FEED_RECHECK: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "`{0}` is not a usable name: 1 to 64 letters, digits, spaces or . _ @ - (a person's name or e-mail address)"
    )]
    BadName(String),
    #[error("`default` is the browser token: `leadline reset-token` replaces it")]
    Reserved,
    #[error("{0} already has a token that works: `leadline token revoke {0}` first")]
    Exists(String),
    #[error("there is no working token named {0} (`leadline token list` shows them)")]
    Unknown(String),
    #[error(transparent)]
    Storage(#[from] anyhow::Error),
}

/// The SHA-256 (hex) a token is stored as.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Whether `name` can name a person's token. Pure.
pub fn valid_name(name: &str) -> bool {
    let n = name.trim();
    !n.is_empty()
        && n == name
        && n.chars().count() <= 64
        && n.chars().all(|c| c.is_alphanumeric() || matches!(c, ' ' | '.' | '_' | '@' | '-'))
}

/// How an operator appears in audits: the browser token as [`BROWSER_ACTOR`], a person by name.
pub fn actor(name: &str) -> String {
    if name == "default" {
        BROWSER_ACTOR.to_string()
    } else {
        name.to_string()
    }
}

/// Makes a token for `name` and returns it (to be shown once).
pub async fn create(store: &Store, name: &str, now: DateTime<Utc>) -> Result<String, TokenError> {
    if name == "default" {
        return Err(TokenError::Reserved);
    }
    if !valid_name(name) {
        return Err(TokenError::BadName(name.to_string()));
    }
    let token = hex::encode(rand::random::<[u8; 24]>());
    if !store.add_operator_token(name, &hash(&token), now).await? {
        return Err(TokenError::Exists(name.to_string()));
    }
    Ok(token)
}

/// Revokes `name`'s token.
pub async fn revoke(store: &Store, name: &str, now: DateTime<Utc>) -> Result<(), TokenError> {
    if store.revoke_operator_token(name, now).await? {
        Ok(())
    } else {
        Err(TokenError::Unknown(name.to_string()))
    }
}

/// Every token, for `leadline token list`.
pub async fn list(store: &Store) -> Result<Vec<OperatorToken>, TokenError> {
    Ok(store.operator_tokens().await?)
}

/// The operator (as audits name them) whose working token `given` is; `None` for an unknown or revoked token.
pub async fn operator(store: &Store, given: &str) -> anyhow::Result<Option<String>> {
    Ok(store.operator_of(&hash(given)).await?.map(|name| actor(&name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_a_persons_name_or_address() {
        for ok in ["alice", "Alice Martin", "alice@example.com", "ops-2", "jörg.müller"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", " alice", "alice ", "a/b", "x;y", &"a".repeat(65), "tab\there"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_browser_token_keeps_its_audit_name() {
        assert_eq!(actor("default"), super::BROWSER_ACTOR);
        assert_eq!(actor("alice"), "alice");
    }
}
