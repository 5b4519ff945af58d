//! Team mode: three `leadline serve` processes on one PostgreSQL database.
//!
//! 20,000 leads are posted round-robin, each twice to two different processes (a repeated webhook reaching
//! another machine behind a load balancer); meanwhile the leader process is killed with SIGKILL and restarted,
//! the CRM has an outage, says "come back at <date>", and allows only 550 writes a second against a declared
//! budget of 500/s for the whole team. At the end the mock CRM holds every lead exactly once, the breaker opened
//! once for the team (not once per process), one alert was raised for the outage, the team kept to its shared
//! budget (almost no 429s from the token bucket), and the leader's duties passed to another process.
//!
//! Always on PostgreSQL (team mode is a PostgreSQL feature): it runs in the default pass of the integration
//! tests and is skipped in the second pass (`LEADLINE_TEST_BACKEND=postgres`), which would run it again as is.

mod common;

use std::net::TcpListener;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use leadline::demo::mock_crm::{Behaviour, MockCrm};
use leadline::store::{AlertKind, Store};
use serde_json::json;

const LEADS: usize = 20_000;
const PROCESSES: usize = 3;

fn config(crm: std::net::SocketAddr, db_url: &str, port: u16) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:{port}"

[database]
url = "{db_url}"

[worker]
lease_seconds = 3
poll_interval_ms = 250
rescue_interval_seconds = 1
shutdown_grace_seconds = 2

[sources.plain]
route = ["crm"]

[targets.crm]
url = "http://{crm}/crm/leads"
strategy = "idempotency_key"
search_url = "http://{crm}/crm/leads/search/{{external_id}}"
timeout_ms = 2000
concurrency = 8
rate = "500/s"
backoff = {{ base_ms = 20, cap_ms = 300, max_attempts = 50, budget_seconds = 900 }}
breaker = {{ consecutive_failures = 5, failure_ratio = 0.0, cooldown_ms = 500 }}
"#
    )
}

fn start(config: &std::path::Path, log: &std::path::Path) -> Child {
    serve_command(config)
        .env("RUST_LOG", "warn,leadline=info")
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("start leadline")
}

/// The pid in the leader lease's owner (`host:pid:random`), if a process holds it.
async fn leader_pid(store: &Store) -> Option<u32> {
    let owner = store.lease_owner(leadline::runtime::leadership::ROLE).await.unwrap()?;
    owner.split(':').nth(1)?.parse().ok()
}

/// Posts lead `i` to process `first` and then (its duplicate) to the next one, each until a process accepts it
/// (a killed process refuses connections: the sender tries the next, as a load balancer would).
async fn post_lead(http: &reqwest::Client, bases: &[String], i: usize, first: usize) {
    for copy in 0..2 {
        let mut at = first + copy;
        loop {
            let base = &bases[at % bases.len()];
            let sent = http
                .post(format!("{base}/ingest/plain"))
                .json(&json!({"id": format!("T-{i}"), "email": format!("t{i}@example.com")}))
                .timeout(Duration::from_secs(10))
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => break,
                _ => {
                    at += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_processes_deliver_every_lead_once_and_decide_once_for_the_team() {
    if on_postgres() {
        eprintln!("team mode runs on PostgreSQL in the default pass already");
        return;
    }
    let db_url = pg::fresh_database_url().await;
    let (crm, crm_addr) = MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    // The CRM allows 550 writes a second (a token bucket); the team declares 500/s for all its processes.
    crm.set_behaviour(Behaviour { token_bucket: Some((550.0, 20.0)), ..Default::default() });
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> =
        (0..PROCESSES).map(|_| TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()).collect();
    let configs: Vec<std::path::PathBuf> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let path = dir.path().join(format!("leadline-{i}.toml"));
            std::fs::write(&path, config(crm_addr, &db_url, *port)).unwrap();
            path
        })
        .collect();
    let logs: Vec<std::path::PathBuf> = (0..PROCESSES).map(|i| dir.path().join(format!("leadline-{i}.log"))).collect();
    let bases: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let http = reqwest::Client::new();
    // The first process makes the schema; the others start on it.
    let mut children: Vec<Child> = vec![start(&configs[0], &logs[0])];
    wait_up(&http, &bases[0]).await;
    for i in 1..PROCESSES {
        children.push(start(&configs[i], &logs[i]));
    }
    for base in &bases {
        wait_up(&http, base).await;
    }
    let store = Store::open(&db_url).await.unwrap();

    // Post every lead twice, to two processes, from 24 senders.
    let next = Arc::new(AtomicUsize::new(0));
    let mut senders = tokio::task::JoinSet::new();
    for _ in 0..24 {
        let (http, bases, next) = (http.clone(), bases.clone(), next.clone());
        senders.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= LEADS {
                    return;
                }
                post_lead(&http, &bases, i, i % PROCESSES).await;
            }
        });
    }

    let wait_records = async |n: usize, within: Duration| {
        let deadline = tokio::time::Instant::now() + within;
        while crm.stats().records < n {
            assert!(tokio::time::Instant::now() < deadline, "only {} records after {within:?}", crm.stats().records);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    // Kill the leader mid-run and start it again.
    wait_records(3_000, Duration::from_secs(60)).await;
    let leader = leader_pid(&store).await.expect("a process leads");
    let killed = children.iter().position(|c| c.id() == leader).expect("the leader is one of the three");
    children[killed].kill().unwrap(); // SIGKILL
    children[killed].wait().unwrap();
    let killed_at = tokio::time::Instant::now();
    // How long until another process holds the leader lease (at most a lease's 15 s, plus a renewal's 5 s).
    let took_over = {
        let store = store.clone();
        tokio::spawn(async move {
            loop {
                if leader_pid(&store).await.is_some_and(|pid| pid != leader) {
                    return killed_at.elapsed();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // The two left go on without the leader before it comes back.
    wait_records(crm.stats().records + 500, Duration::from_secs(60)).await;
    children[killed] = start(&configs[killed], &dir.path().join("leadline-restarted.log"));
    wait_up(&http, &bases[killed]).await;

    // An outage: every write answered 503 until the team's breaker has opened and its alert is raised.
    wait_records(8_000, Duration::from_secs(60)).await;
    crm.set_behaviour(Behaviour { fail_with: Some(503), token_bucket: Some((550.0, 20.0)), ..Default::default() });
    wait_for("the breaker to open and its alert", Duration::from_secs(60), async || {
        let transitions = store.breaker_transitions("crm").await.unwrap();
        let alerts = store.alerts(100).await.unwrap();
        transitions.iter().any(|t| t.from_state == "closed" && t.to_state == "open")
            && alerts.iter().any(|a| a.kind == AlertKind::BreakerOpen)
    })
    .await;
    crm.set_behaviour(Behaviour { token_bucket: Some((550.0, 20.0)), ..Default::default() });

    // "Come back at <date>": every request answered 429 with an HTTP-date for two seconds. Its 429s are counted
    // once the team has met it, the date has passed and the team writes again.
    wait_records(13_000, Duration::from_secs(90)).await;
    let before_limit = crm.stats().rate_limited;
    let until = chrono::Utc::now() + chrono::Duration::seconds(2);
    crm.set_behaviour(Behaviour {
        limited_until: Some(until),
        token_bucket: Some((550.0, 20.0)),
        ..Default::default()
    });
    wait_for("the team to meet the 'come back at' date", Duration::from_secs(30), async || {
        crm.stats().rate_limited > before_limit
    })
    .await;
    wait_for("the date to pass", Duration::from_secs(30), async || chrono::Utc::now() > until).await;
    wait_records(crm.stats().records + 1, Duration::from_secs(60)).await;
    let limited_429s = crm.stats().rate_limited - before_limit;
    crm.set_behaviour(Behaviour { token_bucket: Some((550.0, 20.0)), ..Default::default() });

    while senders.join_next().await.is_some() {}
    wait_records(LEADS, Duration::from_secs(180)).await;
    // Everything settled: nothing pending, nothing running, nothing dead.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let h = store.queue_health(chrono::Utc::now(), &["crm".to_string()]).await.unwrap();
        if h.overall.pending == 0 && h.overall.running == 0 {
            assert_eq!(h.overall.delivered, LEADS as i64, "{h:?}");
            assert_eq!(h.overall.dead_open, 0, "{h:?}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "did not settle: {h:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Another process took the leader's duties within a lease's time of the kill.
    let new_leader = leader_pid(&store).await.expect("a process leads");
    assert_ne!(new_leader, leader, "the killed leader's lease was taken over");
    let took_over = tokio::time::timeout(Duration::from_secs(60), took_over)
        .await
        .expect("another process takes the leader lease once it has run out")
        .unwrap();
    eprintln!("another process took the leader's duties {took_over:.1?} after the kill");

    let stats = crm.stats();
    eprintln!(
        "crm: {} records, {} requests, {} answered 429 ({} in the 'come back at' window), {} inside the announced wait",
        stats.records, stats.requests, stats.rate_limited, limited_429s, stats.requests_inside_retry_after
    );
    assert_eq!(stats.records, LEADS, "every lead reached the CRM");
    assert_eq!(stats.duplicated_external_ids, 0, "no lead was written twice");
    assert_eq!(crm.distinct_leads(), LEADS);

    // The team kept to its one budget of 500/s: three processes pacing on their own would send 1,500/s into a
    // bucket of 550/s and most requests would be refused.
    let bucket_429s = stats.rate_limited - limited_429s;
    let share = bucket_429s as f64 / stats.requests as f64;
    assert!(share < 0.05, "{bucket_429s} of {} requests refused by the CRM's bucket ({share:.3})", stats.requests);

    // The outage opened the breaker once for the team, and raised one alert.
    let transitions = store.breaker_transitions("crm").await.unwrap();
    let opened = transitions.iter().filter(|t| t.from_state == "closed" && t.to_state == "open").count();
    assert_eq!(opened, 1, "the breaker opened once for the team: {transitions:#?}");
    let alerts = store.alerts(100).await.unwrap();
    let breaker_alerts = alerts.iter().filter(|a| a.kind == AlertKind::BreakerOpen).count();
    assert_eq!(breaker_alerts, 1, "one alert for the outage: {alerts:#?}");

    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    store.close().await;
}
