//! The process killed with SIGKILL mid-batch: after a restart nothing is lost and nothing is duplicated.

mod common;

use std::net::TcpListener;
use std::process::Child;
use std::time::Duration;

use common::*;
use leadline::demo::mock_crm::{Behaviour, MockCrm};
use serde_json::json;

fn start(config: &std::path::Path) -> Child {
    serve_command(config).spawn().expect("start leadline")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_batch_loses_and_duplicates_nothing() {
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    // Slow enough that many requests are in flight when the process dies.
    crm.set_behaviour(Behaviour { latency_ms: 40, ..Default::default() });
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // A plain POST (a repeat makes a second record), with a look-up for leads left in doubt by the crash.
    let target = format!(
        r#"
[targets.crm]
url = "http://{crm_addr}/crm/plain"
strategy = "none"
search_url = "http://{crm_addr}/crm/leads/search/{{external_id}}"
timeout_ms = 2000
concurrency = 16
backoff = {{ base_ms = 20, cap_ms = 200, max_attempts = 30, budget_seconds = 600 }}
"#
    );
    let text = config_text(crm_addr, &dir.path().join("leadline.db"), &target)
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""))
        .replace("lease_seconds = 5", "lease_seconds = 2")
        .replace(r#"signature = { header = "X-Signature-256", secret_env = "TEST_WEBFORM_SECRET" }"#, "")
        .replace(
            "kind = \"meta\"\nroute = [\"meta_fetch\", \"crm\"]\napp_secret_env = \"TEST_META_SECRET\"\nverify_token_env = \"TEST_META_VERIFY\"\npage_id = \"99\"",
            "route = [\"crm\"]",
        );
    let config = dir.path().join("leadline.toml");
    std::fs::write(&config, text).unwrap();
    let token = preset_token(&dir.path().join("leadline.db")).await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    let mut child = start(&config);
    wait_up(&http, &base).await;
    let n = 400;
    for i in 0..n {
        let r = http.post(format!("{base}/ingest/plain")).json(&json!({"id": format!("K-{i}")})).send().await.unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    }
    // Kill it while it is busy delivering.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while crm.stats().records < 80 {
        assert!(tokio::time::Instant::now() < deadline, "deliveries did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = crm.stats().records;
    assert!(at_kill < n, "killed too late to prove anything ({at_kill} delivered)");

    let mut child = start(&config);
    wait_up(&http, &base).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let h: serde_json::Value =
            http.get(format!("{base}/api/health")).bearer_auth(&token).send().await.unwrap().json().await.unwrap();
        let o = &h["overall"];
        if o["pending"] == 0 && o["running"] == 0 {
            assert_eq!(o["delivered"], n, "{h}");
            assert_eq!(o["dead_open"], 0, "{h}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "did not finish after restart: {h}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The jobs in flight at the kill were rescued after their lease expired and checked before any resend.
    let store = leadline::store::Store::open(&database_url(&dir.path().join("leadline.db"))).await.unwrap();
    let rescued = store.all_attempts().await.unwrap().iter().filter(|a| a.outcome == "rescued").count();
    assert!(rescued > 0, "no job was in flight at the kill: the test proved nothing");
    let stats = crm.stats();
    assert_eq!(stats.records, n, "every accepted lead reached the CRM");
    assert_eq!(stats.duplicated_external_ids, 0, "no lead was written twice");
    assert_eq!(crm.distinct_leads(), n);
}
