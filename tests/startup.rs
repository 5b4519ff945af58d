//! `leadline serve` checks its database at start and says plainly what is wrong: unreachable, a missing database,
//! a schema from a newer Leadline — never a pool timeout after half a minute, never the password.

use std::time::{Duration, Instant};

#[tokio::test]
async fn an_unreachable_postgres_is_named_at_once_without_its_password() {
    // Port 1 on loopback: nothing listens, the connection is refused.
    let started = Instant::now();
    let e = leadline::store::Store::open("postgres://leadline:s3cret@127.0.0.1:1/leads").await.err().expect("refused");
    let text = format!("{e:#}");
    assert!(text.contains("cannot reach the database at postgres://leadline:***@127.0.0.1:1/leads"), "{text}");
    assert!(text.contains("is PostgreSQL running"), "{text}");
    assert!(!text.contains("s3cret"), "the password leaked: {text}");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?} to say so", started.elapsed());
}

#[tokio::test]
async fn a_database_from_a_newer_leadline_is_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leadline.db");
    // A database a newer version set up: its schema has a migration this version does not know.
    let url = format!("sqlite://{}", path.display());
    let store = leadline::store::Store::open(&url).await.unwrap();
    store.record_unknown_migration(99999).await.unwrap();
    store.close().await;
    let e = leadline::store::Store::open(&url).await.err().expect("refused");
    let text = format!("{e:#}");
    assert!(text.contains("set up by a newer Leadline (its schema has migration 99999"), "{text}");
}

#[tokio::test]
async fn a_missing_postgres_database_is_named() {
    // Only where the test run has a PostgreSQL server (CI starts one for the whole run).
    let Ok(url) = std::env::var("LEADLINE_TEST_PG_URL") else { return };
    let (base, query) = url.split_once('?').map_or((url.as_str(), ""), |(b, q)| (b, q));
    let server = base.rsplit_once('/').map_or(base, |(s, _)| s);
    let missing = format!("{server}/no_such_leadline_db{}{query}", if query.is_empty() { "" } else { "?" });
    let e = leadline::store::Store::open(&missing).await.err().expect("refused");
    let text = format!("{e:#}");
    assert!(text.contains("does not exist"), "{text}");
}
