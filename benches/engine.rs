//! Leadline's engine benchmark: prints figures, asserts nothing.
//!
//!     cargo bench --no-default-features --bench engine
//!     cargo bench --no-default-features --bench engine -- --health-jobs 200000   # smaller, faster
//!
//! 1. Ingest: concurrent clients POST signed-off generic webhooks over loopback HTTP to `leadline`'s ingest
//!    (worker off); accepted per second, p50 and p99 latency. Every 202 is a durable commit (synchronous=FULL).
//! 2. Delivery: jobs already queued (`--delivery-jobs`, 20,000) are delivered to a loopback sink that answers at
//!    once; jobs per second, once with 1,000 delivered jobs stored before and once with `--history-jobs`
//!    (1,000,000): the two figures say whether delivery stays flat as history grows. `--only-delivery` runs
//!    nothing else.
//! 3. Queue health: `api::health` latency with 1,000,000 stored jobs (mostly delivered, some pending and dead).
//! 4. Dead letters: with 1,000,000 stored dead letters, the replay preview over all of them and over one cause,
//!    grouping by cause, and the time to requeue 10,000 (recording the replay, then sending all back at the
//!    highest pace).
//! 5. Pacing: a backlog (`--pacing-leads`, 5,000) drained into a token-bucket CRM that allows R requests a second
//!    (burst R/10), for R = 50 and 200: achieved rate / allowed rate and the share of requests answered 429, with
//!    the target's `rate` declared, and without it (the worker then learns from the 429s and their headers).
//!    `--skip-pacing` leaves it out (it takes about two minutes); `--only-pacing` runs nothing else.
//! 6. HubSpot batches: a backlog (`--hubspot-leads`, 5,000) drained into the mock HubSpot's batch upsert, once
//!    unlimited and once with HubSpot's private-app limit (100 requests per 10 s, declared as the target's
//!    `rate`): leads per second, requests sent, leads per request, 429 answers. `--only-hubspot` runs nothing else.

use std::path::Path;
use std::time::{Duration, Instant};

use leadline::config::Config;
use leadline::server::Server;
use leadline::store::{BenchFill, NewEvent, Store};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config(db: &Path, sink: std::net::SocketAddr, worker: bool) -> Config {
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[database]
url = "sqlite://{db}"
[worker]
enabled = {worker}
batch_size = 256
poll_interval_ms = 5
[sources.bench]
route = ["sink"]
[targets.sink]
url = "http://{sink}/crm/leads/{{external_id}}"
strategy = "upsert"
concurrency = 64
timeout_ms = 5000
"#,
        db = db.display()
    );
    Config::parse(&text, Path::new("bench.toml")).expect("bench config")
}

/// CPU time (user + system) this process has used so far: what a drain costs, whatever else runs on the machine.
fn cpu_time() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn bench_ingest(clients: usize, per_client: usize) {
    let dir = tempfile::tempdir().unwrap();
    let server =
        Server::start(config(&dir.path().join("ingest.db"), "127.0.0.1:9".parse().unwrap(), false)).await.unwrap();
    let url = format!("http://{}/ingest/bench", server.addr);
    let http = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap();
    // Warm up connections.
    for i in 0..clients {
        http.post(&url).json(&serde_json::json!({"id": format!("warm-{i}")})).send().await.unwrap();
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let http = http.clone();
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_client);
            for i in 0..per_client {
                let body = serde_json::json!({"id": format!("c{c}-{i}"), "name": "Ada Lovelace",
                    "email": "ada@example.com", "phone": "+4915112345678", "form": "contact-us"});
                let t = Instant::now();
                let r = http.post(&url).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 202);
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed();
    all.sort();
    let n = all.len();
    println!(
        "ingest:   {n} webhooks, {clients} concurrent clients: {:.0} accepted/s, p50 {}, p99 {}, max {}",
        n as f64 / elapsed.as_secs_f64(),
        ms(percentile(&all, 0.50)),
        ms(percentile(&all, 0.99)),
        ms(*all.last().unwrap())
    );
    server.shutdown().await.unwrap();
}

/// Delivery: `history` already-delivered jobs stored (one event, one delivered step and one attempt each), then
/// `jobs` new jobs queued and drained to a loopback sink; jobs per second. The same figure with a small and a
/// large history says whether delivery stays flat as the tables grow.
async fn bench_delivery(jobs: usize, history: usize) -> f64 {
    let (_sink, sink_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("delivery.db");
    let fill = Instant::now();
    {
        let store = Store::open(&format!("sqlite://{}", db.display())).await.unwrap();
        if history > 0 {
            store.bench_fill(BenchFill::DeliveredHistory, history as u64).await.unwrap();
        }
        let now = chrono::Utc::now();
        for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
            let events: Vec<NewEvent> = chunk
                .iter()
                .map(|i| NewEvent {
                    source: "bench".into(),
                    source_ref: format!("d-{i}"),
                    payload: serde_json::json!({"id": format!("d-{i}"), "name": "Ada"}),
                    route: vec!["sink".into()],
                    received_at: now,
                    via: Default::default(),
                })
                .collect();
            store.insert_events(&events).await.unwrap();
        }
        store.close().await;
    }
    let fill_time = fill.elapsed();
    let start = Instant::now();
    let cpu = cpu_time();
    let server = Server::start(config(&db, sink_addr, true)).await.unwrap();
    loop {
        let h = leadline::api::health(&server.app).await.unwrap().queue.overall;
        if h.delivered as usize == jobs + history {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = start.elapsed();
    let cpu = cpu_time() - cpu;
    let rate = jobs as f64 / elapsed.as_secs_f64();
    println!(
        "delivery: {jobs} jobs to a loopback sink (concurrency 64), {history} delivered jobs stored before \
         (filled in {:.1} s): {rate:.0} delivered/s ({:.2} s; CPU {:.2} s = {:.0} µs per job, sink included)",
        fill_time.as_secs_f64(),
        elapsed.as_secs_f64(),
        cpu.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / jobs as f64
    );
    server.shutdown().await.unwrap();
    rate
}

async fn bench_health(total: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("health.db");
    let store = Store::open(&format!("sqlite://{}", db.display())).await.unwrap();
    let fill = Instant::now();
    // 1 event and 1 delivery per job; 1% pending, 0.5% dead (by class), the rest delivered.
    store.bench_fill(BenchFill::QueueMix, total as u64).await.unwrap();
    let fill_time = fill.elapsed();
    let targets = vec!["crm".to_string(), "notify".to_string(), "erp".to_string()];
    let mut lat = Vec::new();
    let mut last = None;
    for _ in 0..200 {
        let t = Instant::now();
        last = Some(store.queue_health(chrono::Utc::now(), &targets).await.unwrap());
        lat.push(t.elapsed());
    }
    lat.sort();
    let h = last.unwrap();
    println!(
        "health:   {total} stored jobs ({} pending, {} dead, {} delivered; filled in {:.1} s): p50 {}, p99 {}",
        h.overall.pending,
        h.overall.dead_open,
        h.overall.delivered,
        fill_time.as_secs_f64(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    );
    store.close().await;
}

async fn bench_dead_letters(total: usize) {
    use leadline::replay::{self, runner, ReplayOptions, ReplaySelection};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("dead.db");
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[database]
url = "sqlite://{db}"
[worker]
enabled = false
[sources.bench]
route = ["crm"]
[targets.crm]
url = "http://127.0.0.1:9/crm"
strategy = "idempotency_key"
[targets.notify]
url = "http://127.0.0.1:9/notify/{{external_id}}"
strategy = "upsert"
[targets.erp]
url = "http://127.0.0.1:9/erp"
strategy = "idempotency_key"
"#,
        db = db.display()
    );
    let config = Config::parse(&text, Path::new("bench.toml")).unwrap();
    let server = Server::start(config).await.unwrap();
    let app = server.app.clone();
    let fill = Instant::now();
    // Every job dead: three targets, three classes, ten causes; one in a hundred (id % 100 = 7) has its own
    // cause, so exactly 1% form one group.
    app.store.bench_fill(BenchFill::DeadLetters, total as u64).await.unwrap();
    let fill_time = fill.elapsed();
    let time = |label: &str, runs: Vec<Duration>| {
        let mut runs = runs;
        runs.sort();
        println!("dead letters: {label}: median {}, slowest {}", ms(runs[runs.len() / 2]), ms(*runs.last().unwrap()));
    };
    let all = ReplaySelection { ids: None, filter: Some(Default::default()) };
    let mut runs = Vec::new();
    let mut eligible = 0;
    for _ in 0..5 {
        let t = Instant::now();
        eligible = replay::preview(&app.store, &app.config, &all, chrono::Utc::now()).await.unwrap().eligible;
        runs.push(t.elapsed());
    }
    println!("dead letters: {total} stored (filled in {:.1} s)", fill_time.as_secs_f64());
    time(&format!("preview of all ({eligible} eligible)"), runs);
    let special = leadline::dlq::DeadLetterFilter { cause: Some("cause special".into()), ..Default::default() };
    let group = ReplaySelection { ids: None, filter: Some(special.clone()) };
    let mut runs = Vec::new();
    let mut n = 0;
    for _ in 0..5 {
        let t = Instant::now();
        n = replay::preview(&app.store, &app.config, &group, chrono::Utc::now()).await.unwrap().eligible;
        runs.push(t.elapsed());
    }
    time(&format!("preview of one cause ({n} eligible)"), runs);
    let mut runs = Vec::new();
    let mut groups = 0;
    for _ in 0..5 {
        let t = Instant::now();
        groups = leadline::dlq::groups(&app.store, &Default::default()).await.unwrap().len();
        runs.push(t.elapsed());
    }
    time(&format!("group all by cause ({groups} groups)"), runs);

    // Requeue the 10,000 of one cause: record the replay, then send everything back at the highest pace.
    let t = Instant::now();
    let options = ReplayOptions { canary: Some(0), rate_per_second: Some(10_000.0) };
    let receipt =
        replay::start(&app.store, &app.config, &group, n, &options, "bench", "bench", false, chrono::Utc::now())
            .await
            .unwrap();
    let recorded = t.elapsed();
    let mut state = runner::RunnerState::default();
    loop {
        runner::step(&app, &mut state, chrono::Utc::now()).await.unwrap();
        let p = replay::progress(&app.store, receipt.replay_id).await.unwrap().unwrap();
        if p.queued == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let total_time = t.elapsed();
    println!(
        "dead letters: requeue {}: replay recorded in {}, all back in the queue after {} (pace 10,000/s)",
        receipt.queued,
        ms(recorded),
        ms(total_time)
    );
    server.shutdown().await.unwrap();
}

/// Queues `leads` leads of source `bench` for target `sink` in the database at `db` (ids `<prefix>-<n>`).
async fn queue_leads(db: &Path, leads: usize, prefix: &str, payload: impl Fn(&str) -> serde_json::Value) {
    let store = Store::open(&format!("sqlite://{}", db.display())).await.unwrap();
    let now = chrono::Utc::now();
    let events: Vec<NewEvent> = (0..leads)
        .map(|i| {
            let id = format!("{prefix}-{i}");
            NewEvent {
                source: "bench".into(),
                payload: payload(&id),
                source_ref: id,
                route: vec!["sink".into()],
                received_at: now,
                via: Default::default(),
            }
        })
        .collect();
    for chunk in events.chunks(1000) {
        store.insert_events(chunk).await.unwrap();
    }
    store.close().await;
}

async fn bench_pacing(leads: usize, allowed: f64, declared: bool) {
    let (crm, crm_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    crm.set_behaviour(leadline::demo::mock_crm::Behaviour {
        token_bucket: Some((allowed, (allowed / 10.0).max(1.0))),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pacing.db");
    queue_leads(&db, leads, "p", |id| serde_json::json!({ "id": id })).await;
    let mut config = config(&db, crm_addr, true);
    let sink = config.targets.get_mut("sink").unwrap();
    sink.concurrency = 16;
    sink.backoff.max_attempts = 1000;
    if declared {
        sink.rate = Some(format!("{allowed}/s").parse().unwrap());
    }
    let start = Instant::now();
    let server = Server::start(config).await.unwrap();
    loop {
        let h = leadline::api::health(&server.app).await.unwrap().queue.overall;
        if h.delivered as usize >= leads || h.dead_open > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let stats = crm.stats();
    println!(
        "pacing: {leads} leads into a CRM allowing {allowed:.0}/s, {}: achieved {:.1}/s = {:.1} % of allowed, \
         {:.2} % of {} requests answered 429",
        if declared { format!("rate = \"{allowed}/s\" declared") } else { "no rate declared".into() },
        leads as f64 / elapsed,
        100.0 * leads as f64 / elapsed / allowed,
        100.0 * stats.rate_limited as f64 / stats.requests.max(1) as f64,
        stats.requests
    );
    server.shutdown().await.unwrap();
}

async fn bench_hubspot(leads: usize, limited: bool) {
    use leadline::demo::mock_hubspot::{HubspotBehaviour, MockHubspot, Secondly, TOKEN};
    let (hubspot, addr) = MockHubspot::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    if limited {
        hubspot
            .set(HubspotBehaviour { secondly: Some(Secondly { max: 100, interval_ms: 10_000 }), ..Default::default() });
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hubspot.db");
    queue_leads(&db, leads, "h", |id| serde_json::json!({ "id": id, "email": format!("{id}@example.com") })).await;
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[database]
url = "sqlite://{db}"
[worker]
batch_size = 256
poll_interval_ms = 5
[sources.bench]
route = ["sink"]
[targets.sink]
kind = "hubspot"
url = "http://{addr}"
auth = {{ bearer_env = "BENCH_HUBSPOT_TOKEN" }}
id_property = "leadline_id"
concurrency = 2
timeout_ms = 10000
{rate}
mapping = [
  {{ to = "leadline_id", from = "$external_id", required = true }},
  {{ to = "email", from = "email", required = true }},
]
"#,
        db = db.display(),
        rate = if limited { "rate = \"100/10s\"" } else { "" },
    );
    let mut config = Config::parse(&text, Path::new("bench.toml")).expect("bench config");
    config.inline_secrets.insert("BENCH_HUBSPOT_TOKEN".into(), TOKEN.into());
    let start = Instant::now();
    let server = Server::start(config).await.unwrap();
    loop {
        let h = leadline::api::health(&server.app).await.unwrap().queue.overall;
        if h.delivered as usize >= leads || h.dead_open > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let stats = hubspot.stats();
    println!(
        "hubspot: {leads} leads by batch upsert, {}: {:.0} leads/s ({:.2} s), {} requests, {:.1} leads per request \
         (largest {}), {} answered 429, {} contacts",
        if limited { "limit 100 requests/10 s, rate declared" } else { "no limit" },
        leads as f64 / elapsed,
        elapsed,
        stats.upsert_requests,
        leads as f64 / stats.upsert_requests.max(1) as f64,
        stats.largest_batch,
        stats.rate_limited,
        stats.contacts
    );
    server.shutdown().await.unwrap();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "leadline engine benchmark ({} cores, SQLite, synchronous=FULL)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    rt.block_on(async {
        let only = |name: &str| std::env::args().any(|a| a == name);
        if only("--only-dead-letters") {
            bench_health(arg("--health-jobs", 1_000_000)).await;
            bench_dead_letters(arg("--dead-letters", 1_000_000)).await;
            return;
        }
        if only("--only-hubspot") {
            let leads = arg("--hubspot-leads", 5_000);
            bench_hubspot(leads, false).await;
            bench_hubspot(leads, true).await;
            return;
        }
        if !std::env::args().any(|a| a == "--only-pacing") {
            if !only("--only-delivery") {
                bench_ingest(arg("--clients", 32), arg("--per-client", 500)).await;
            }
            let jobs = arg("--delivery-jobs", 20_000);
            let small = bench_delivery(jobs, 1_000).await;
            let large = bench_delivery(jobs, arg("--history-jobs", 1_000_000)).await;
            println!("delivery: with the large history at {:.0} % of the small one", 100.0 * large / small);
            if only("--only-delivery") {
                return;
            }
            bench_health(arg("--health-jobs", 1_000_000)).await;
            bench_dead_letters(arg("--dead-letters", 1_000_000)).await;
        }
        if !std::env::args().any(|a| a == "--skip-pacing") {
            let leads = arg("--pacing-leads", 5_000);
            for allowed in [50.0, 200.0] {
                bench_pacing(leads, allowed, true).await;
                bench_pacing(leads.min(1_000), allowed, false).await;
            }
        }
        if !only("--only-pacing") {
            let leads = arg("--hubspot-leads", 5_000);
            bench_hubspot(leads, false).await;
            bench_hubspot(leads, true).await;
        }
    });
}
