//! Leadline's engine benchmark: prints figures, asserts nothing.
//!
//!     cargo bench --no-default-features --bench engine
//!     cargo bench --no-default-features --bench engine -- --health-jobs 200000   # smaller, faster
//!     cargo bench --no-default-features --bench engine -- --backend sqlite       # or postgres; default both
//!
//! Figures 1 to 4 measure the store and run on each backend chosen with `--backend sqlite|postgres|both`
//! (default both); each figure gets a fresh database (a SQLite file in a temporary folder, or a new PostgreSQL
//! database), and a table at the end puts the backends side by side. For PostgreSQL the bench starts its own
//! throwaway cluster with `.ci/pg-start` (stopped and removed at the end, also on a panic) unless
//! `LEADLINE_BENCH_PG_URL` names the admin URL of a running one (it must be allowed to `CREATE DATABASE`).
//! The bulk fills are one transaction each (PostgreSQL's counts its tallies once, after the rows are in).
//!
//! 1. Ingest: concurrent clients (`--clients`, 32) POST signed-off generic webhooks (`--per-client`, 500 each)
//!    over loopback HTTP to `leadline`'s ingest (worker off); accepted per second, p50 and p99 latency. Every 202
//!    is a durable commit (SQLite synchronous=FULL; PostgreSQL fsync on, synchronous_commit on). `--only-ingest`
//!    runs nothing else.
//! 2. Delivery: jobs already queued (`--delivery-jobs`, 20,000) are delivered to a loopback sink that answers at
//!    once; jobs per second, once with 1,000 delivered jobs stored before and once with `--history-jobs`
//!    (1,000,000): the two figures say whether delivery stays flat as history grows. Each figure is the median
//!    of `--drains` (3) drains, each timed from a started server to the last delivery (its start is printed
//!    apart). `--only-delivery` runs nothing else. `--concurrency` (64) is the sink target's connections.
//! 3. Queue health: `api::health` latency with `--health-jobs` (1,000,000) stored jobs (mostly delivered, some
//!    pending and dead).
//! 4. Dead letters: with `--dead-letters` (1,000,000) stored dead letters, the replay preview over all of them and
//!    over one cause, grouping by cause, and the time to requeue the 1% of one cause (recording the replay, then
//!    sending all back at the highest pace). `--only-dead-letters` runs 3 and 4 only.
//! 5. Pacing (SQLite only: it measures the worker's pacing, not the store): a backlog (`--pacing-leads`, 5,000)
//!    drained into a token-bucket CRM that allows R requests a second (burst R/10), for R = 50 and 200: achieved
//!    rate / allowed rate and the share of requests answered 429, with the target's `rate` declared, and without
//!    it (the worker then learns from the 429s and their headers). `--skip-pacing` leaves it out (it takes about
//!    two minutes); `--only-pacing` runs nothing else.
//! 6. HubSpot batches (SQLite only): a backlog (`--hubspot-leads`, 5,000) drained into the mock HubSpot's batch
//!    upsert, once unlimited and once with HubSpot's private-app limit (100 requests per 10 s, declared as the
//!    target's `rate`): leads per second, requests sent, leads per request, 429 answers. `--only-hubspot` runs
//!    nothing else.
//! 7. Team mode (PostgreSQL only, `--only-team`): jobs already queued (`--team-jobs`, 20,000) drained to a
//!    loopback sink by 1, 2 and 4 `leadline serve` processes on one database (this build's binary, started as
//!    child processes; each claims with `SKIP LOCKED`, the team's writes take turns on one advisory lock): jobs
//!    per second for each count.
//! 8. Refusals that name no rate (SQLite only, `--only-refusals`; not run otherwise): a backlog of R × 30 s leads
//!    (`--refusal-seconds`) drained into a target allowing R requests/s (R = 40 and 200; a token bucket, burst
//!    R/10) that refuses the rest naming no rate and no time — a generic CRM's bare `429`, and Salesforce's
//!    concurrent-request `403 REQUEST_LIMIT_EXCEEDED` — with no `rate` declared: leads delivered per second, over
//!    the whole drain and from its 10th second on, and the share of requests refused.
//! 9. First contact (SQLite only, `--only-first-contact`; not run otherwise): leads POSTed to the ingest at a steady
//!    rate (`--contact-rate`, 20/s, for `--contact-seconds`, 30) whose route is one WhatsApp step (SMS when WhatsApp
//!    fails) against the demo's mock WhatsApp Cloud API and mock Twilio on loopback, which answer at once and post
//!    signed receipts: p50 and p95 from the lead's arrival to the message accepted by the provider, and to its
//!    delivery receipt — the same figures as the Overview's "Speed to first contact".

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use leadline::config::Config;
use leadline::server::Server;
use leadline::store::{BenchFill, NewEvent, Store};

/// The value of `--name N`, if given.
fn given(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

fn arg(name: &str, default: usize) -> usize {
    given(name).unwrap_or(default)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn column(self) -> usize {
        self as usize
    }
}

/// A size flag: its default, and PostgreSQL's (smaller where its bulk fill would make the run too long) unless
/// the flag is given.
fn size(flag: &str, default: usize) -> usize {
    given(flag).unwrap_or(default)
}

/// `.ci/pg-start`, which starts and stops a throwaway cluster.
fn pg_start() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/pg-start")
}

/// A throwaway PostgreSQL cluster in a temporary folder; dropping it (also when a figure panics) stops it and
/// removes the folder.
struct PgCluster {
    dir: PathBuf,
}

impl PgCluster {
    /// Starts the cluster and returns it with its admin URL.
    fn start() -> (PgCluster, String) {
        let dir = tempfile::Builder::new().prefix("leadline-bench-pg-").tempdir().expect("a temporary folder").keep();
        let cluster = PgCluster { dir };
        let out = Command::new("bash").arg(pg_start()).arg(&cluster.dir).output().expect("running .ci/pg-start");
        if !out.status.success() {
            panic!("PostgreSQL could not be started: {}", String::from_utf8_lossy(&out.stderr));
        }
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (cluster, url)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(pg_start()).arg("--stop").arg(&self.dir).status();
    }
}

/// Where each figure gets a fresh, empty database: a SQLite file in a temporary folder, or a new database on
/// the PostgreSQL server at `pg_admin`.
struct Databases {
    files: tempfile::TempDir,
    pg_admin: Option<String>,
    seq: AtomicUsize,
}

impl Databases {
    async fn fresh(&self, backend: Backend, name: &str) -> String {
        let name = format!("bench_{name}_{}_{}", std::process::id(), self.seq.fetch_add(1, Ordering::Relaxed));
        match backend {
            Backend::Sqlite => format!("sqlite://{}", self.files.path().join(format!("{name}.db")).display()),
            Backend::Postgres => {
                let admin = self.pg_admin.as_deref().expect("a PostgreSQL server");
                leadline::store::postgres::create_database(admin, &name).await.expect("a fresh PostgreSQL database")
            }
        }
    }

    /// Removes a database made by [`Databases::fresh`] (its store must be closed).
    async fn discard(&self, url: &str) {
        match (&self.pg_admin, url.strip_prefix("sqlite://")) {
            (_, Some(path)) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{path}{suffix}"));
                }
            }
            (Some(admin), None) => {
                leadline::store::postgres::drop_database(admin, url).await.expect("the database dropped");
            }
            (None, None) => {}
        }
    }
}

/// The figures of each backend, printed side by side at the end: rows in the order first put.
#[derive(Default)]
struct Table {
    rows: Vec<(String, [Option<String>; 2])>,
}

impl Table {
    fn put(&mut self, backend: Backend, figures: Vec<(String, String)>) {
        for (figure, value) in figures {
            let i = match self.rows.iter().position(|(f, _)| *f == figure) {
                Some(i) => i,
                None => {
                    self.rows.push((figure, [None, None]));
                    self.rows.len() - 1
                }
            };
            self.rows[i].1[backend.column()] = Some(value);
        }
    }

    fn print(&self) {
        let width = self.rows.iter().map(|(f, _)| f.chars().count()).max().unwrap_or(0).max(6);
        let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let w1 = self.rows.iter().map(|(_, v)| cell(&v[0]).chars().count()).max().unwrap_or(0).max(6);
        let w2 = self.rows.iter().map(|(_, v)| cell(&v[1]).chars().count()).max().unwrap_or(0).max(10);
        println!();
        println!("{:<width$} | {:>w1$} | {:>w2$} | goal", "figure", "SQLite", "PostgreSQL");
        println!("{}-|-{}-|-{}-|-{}", "-".repeat(width), "-".repeat(w1), "-".repeat(w2), "-".repeat(12));
        for (figure, values) in &self.rows {
            println!("{figure:<width$} | {:>w1$} | {:>w2$} | {}", cell(&values[0]), cell(&values[1]), goal(figure));
        }
    }
}

/// The performance issue's goal for a figure of the table, in its words ("" where it sets none).
fn goal(figure: &str) -> &'static str {
    match figure {
        f if f.starts_with("ingest: p50 / p99") => "p99 < 20 ms",
        f if f.starts_with("ingest: ") => ">= 5,000 /s",
        f if f.starts_with("queue health: p50") => "< 5 ms",
        f if f.starts_with("dead letters: preview of all") => "< 200 ms",
        f if f.starts_with("dead letters: group all by cause") => "< 100 ms",
        f if f.starts_with("delivery: large history / small") => ">= 90 %",
        f if f.starts_with("delivery: ") && f.ends_with(" stored") && !f.contains("(fill time)") => ">= 10,000 /s",
        _ => "",
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn per_second(n: usize, d: Duration) -> String {
    format!("{} /s", thousands((n as f64 / d.as_secs_f64()).round() as usize))
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn config(url: &str, sink: std::net::SocketAddr, worker: bool) -> Config {
    // The sink target's connections (`--concurrency`, 64).
    let concurrency = arg("--concurrency", 64);
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[database]
url = "{url}"
[worker]
enabled = {worker}
batch_size = 256
poll_interval_ms = 5
[sources.bench]
route = ["sink"]
[targets.sink]
url = "http://{sink}/crm/leads/{{external_id}}"
strategy = "upsert"
concurrency = {concurrency}
timeout_ms = 5000
# The filled history is dated 2025-11-30: kept, so the purge's first catch-up does not run beside the figures.
[privacy]
delivered_payload_retention_days = 0
"#
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

/// Ingest into the database at `url`: accepted per second, p50 and p99.
async fn bench_ingest(url: &str, clients: usize, per_client: usize) -> Vec<(String, String)> {
    let server = Server::start(config(url, "127.0.0.1:9".parse().unwrap(), false)).await.unwrap();
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
    vec![
        (format!("ingest: {} webhooks, {clients} clients", thousands(n)), per_second(n, elapsed)),
        ("ingest: p50 / p99".into(), format!("{} / {}", ms(percentile(&all, 0.50)), ms(percentile(&all, 0.99)))),
    ]
}

/// Delivery: `history` already-delivered jobs stored in the empty database at `url` (one event, one delivered
/// step and one attempt each), then `jobs` new jobs queued and drained to a loopback sink. Returns the jobs per
/// second, the drain's CPU time per job and the time the history took to fill.
async fn bench_delivery(url: &str, jobs: usize, history: usize) -> (f64, Duration, Duration) {
    let (_sink, sink_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let fill = Instant::now();
    if history > 0 {
        let store = Store::open(url).await.unwrap();
        store.bench_fill(BenchFill::DeliveredHistory, history as u64).await.unwrap();
        store.close().await;
    }
    let fill_time = fill.elapsed();
    // Each drain is short (about two seconds): the median of several says more than one.
    let drains = arg("--drains", 3).max(1);
    let mut rates = Vec::with_capacity(drains);
    let mut cpu_total = Duration::ZERO;
    for round in 0..drains {
        {
            let store = Store::open(url).await.unwrap();
            queue_jobs(&store, &format!("d{round}"), jobs).await;
            store.close().await;
        }
        let before = history + round * jobs;
        let begin = Instant::now();
        let cpu = cpu_time();
        let server = Server::start(config(url, sink_addr, true)).await.unwrap();
        let started = begin.elapsed();
        // A mark for a profiler attached to the drain only (`perf record -p`).
        eprintln!("delivery: {jobs} jobs queued; draining");
        let start = Instant::now();
        loop {
            let h = leadline::api::health(&server.app).await.unwrap().queue.overall;
            if h.delivered as usize == before + jobs {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let elapsed = start.elapsed();
        let cpu = cpu_time() - cpu;
        cpu_total += cpu;
        let rate = jobs as f64 / elapsed.as_secs_f64();
        println!(
            "delivery: {jobs} jobs to a loopback sink (concurrency {}), {before} delivered jobs stored before: \
             {rate:.0} delivered/s ({:.2} s after a start of {} ms; CPU {:.2} s = {:.0} µs per job, sink and start \
             included)",
            arg("--concurrency", 64),
            elapsed.as_secs_f64(),
            started.as_millis(),
            cpu.as_secs_f64(),
            cpu.as_secs_f64() * 1e6 / jobs as f64
        );
        server.shutdown().await.unwrap();
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "delivery: history {history} (filled in {:.1} s): median of {drains} drains {median:.0} delivered/s \
         (lowest {:.0}, highest {:.0})",
        fill_time.as_secs_f64(),
        rates[0],
        rates[rates.len() - 1]
    );
    (median, cpu_total / (jobs * drains) as u32, fill_time)
}

/// Queues `jobs` leads from the `bench` source for the `sink` target (`{prefix}-{i}`), 1,000 per insert.
async fn queue_jobs(store: &Store, prefix: &str, jobs: usize) {
    let now = chrono::Utc::now();
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
        let events: Vec<NewEvent> = chunk
            .iter()
            .map(|i| NewEvent {
                source: "bench".into(),
                source_ref: format!("{prefix}-{i}"),
                payload: serde_json::json!({"id": format!("{prefix}-{i}"), "name": "Ada"}),
                route: vec!["sink".into()],
                received_at: now,
                via: Default::default(),
                lead_at: None,
                on_change: Default::default(),
            })
            .collect();
        store.insert_events(&events).await.unwrap();
    }
}

/// Team mode: `jobs` queued in the empty PostgreSQL database at `url`, drained to a loopback sink by `processes`
/// `leadline serve` processes. Returns the jobs per second.
async fn bench_team(url: &str, jobs: usize, processes: usize) -> f64 {
    let (_sink, sink_addr) = leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let store = Store::open(url).await.unwrap();
    queue_jobs(&store, "t", jobs).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("team.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[server]
listen = "127.0.0.1:0"
[database]
url = "{url}"
[worker]
batch_size = 256
poll_interval_ms = 5
[sources.bench]
route = ["sink"]
[targets.sink]
url = "http://{sink_addr}/crm/leads/{{external_id}}"
strategy = "upsert"
concurrency = 64
timeout_ms = 5000
"#
        ),
    )
    .unwrap();
    let start = Instant::now();
    let mut children: Vec<std::process::Child> = (0..processes)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_leadline"))
                .args(["serve", "--config"])
                .arg(&config)
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("start leadline serve")
        })
        .collect();
    let targets = vec!["sink".to_string()];
    loop {
        let h = store.queue_health(chrono::Utc::now(), &targets).await.unwrap().overall;
        if h.delivered as usize >= jobs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = start.elapsed();
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    store.close().await;
    let rate = jobs as f64 / elapsed.as_secs_f64();
    println!(
        "team:     {jobs} jobs to a loopback sink by {processes} `leadline serve` process(es) on one PostgreSQL \
         database: {rate:.0} delivered/s ({:.2} s, process start included)",
        elapsed.as_secs_f64()
    );
    rate
}

/// Queue health with `total` jobs stored in the empty database at `url`.
async fn bench_health(url: &str, total: usize) -> Vec<(String, String)> {
    let store = Store::open(url).await.unwrap();
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
    vec![
        ("queue health: stored jobs (fill time)".into(), format!("{} ({})", thousands(total), secs(fill_time))),
        ("queue health: p50 / p99".into(), format!("{} / {}", ms(percentile(&lat, 0.5)), ms(percentile(&lat, 0.99)))),
    ]
}

/// Dead letters: `total` of them stored in the empty database at `url`; preview, grouping and requeue times.
async fn bench_dead_letters(url: &str, total: usize) -> Vec<(String, String)> {
    use leadline::replay::{self, runner, ReplayOptions, ReplaySelection};
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[database]
url = "{url}"
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
"#
    );
    let config = Config::parse(&text, Path::new("bench.toml")).unwrap();
    let server = Server::start(config).await.unwrap();
    let app = server.app.clone();
    let fill = Instant::now();
    // Every job dead: three targets, three classes, ten causes; one in a hundred (id % 100 = 7) has its own
    // cause, so exactly 1% form one group.
    app.store.bench_fill(BenchFill::DeadLetters, total as u64).await.unwrap();
    let fill_time = fill.elapsed();
    let mut figures =
        vec![("dead letters: stored (fill time)".to_string(), format!("{} ({})", thousands(total), secs(fill_time)))];
    let mut time = |label: &str, runs: Vec<Duration>| {
        let mut runs = runs;
        runs.sort();
        println!("dead letters: {label}: median {}, slowest {}", ms(runs[runs.len() / 2]), ms(*runs.last().unwrap()));
        figures.push((format!("dead letters: {label}, median"), ms(runs[runs.len() / 2])));
    };
    let all = ReplaySelection { ids: None, filter: Some(Default::default()) };
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        replay::preview(&app.store, &app.config, &all, chrono::Utc::now()).await.unwrap();
        runs.push(t.elapsed());
    }
    println!("dead letters: {total} stored (filled in {:.1} s)", fill_time.as_secs_f64());
    time("preview of all", runs);
    let special = leadline::dlq::DeadLetterFilter { cause: Some("cause special".into()), ..Default::default() };
    let group = ReplaySelection { ids: None, filter: Some(special.clone()) };
    let mut runs = Vec::new();
    let mut n = 0;
    for _ in 0..5 {
        let t = Instant::now();
        n = replay::preview(&app.store, &app.config, &group, chrono::Utc::now()).await.unwrap().eligible;
        runs.push(t.elapsed());
    }
    time("preview of one cause (1%)", runs);
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        leadline::dlq::groups(&app.store, &Default::default()).await.unwrap();
        runs.push(t.elapsed());
    }
    time("group all by cause", runs);

    // Requeue the 1% of one cause: record the replay, then send everything back at the highest pace.
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
    figures.push((
        "dead letters: requeue 1%: recorded / all back".into(),
        format!("{} / {}", ms(recorded), ms(total_time)),
    ));
    figures
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
                lead_at: None,
                on_change: Default::default(),
            }
        })
        .collect();
    for chunk in events.chunks(1000) {
        store.insert_events(chunk).await.unwrap();
    }
    store.close().await;
}

async fn bench_first_contact(rate: usize, seconds: usize) {
    use leadline::demo::mock_twilio::{self, MockTwilio};
    use leadline::demo::mock_whatsapp::{self, MockWhatsapp};
    let (wa, wa_addr) = MockWhatsapp::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (_tw, tw_addr) = MockTwilio::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"

[database]
url = "sqlite://{db}"

[sources.web]
route = ["hello"]

[targets.hello]
kind = "whatsapp"
url = "http://{wa_addr}"
api_version = "v21.0"
access_token_env = "BENCH_WA_TOKEN"
concurrency = 16
on_failure = "sms"
whatsapp = {{ phone_number_id = "106540352242922", template = "lead_welcome", language = "de", parameters = ["first_name"], app_secret_env = "BENCH_WA_SECRET" }}
mapping = [{{ to = "to", from = "phone", transform = [{{ phone_e164 = {{ default_country = "+49" }} }}], required = true }}, {{ to = "first_name", from = "name", transform = ["first_name"] }}]

[targets.sms]
kind = "sms"
url = "http://{tw_addr}"
concurrency = 16
sms = {{ account_sid = "{sid}", auth_token_env = "BENCH_TW_TOKEN", from = "+15005550006", body = "Hi {{first_name}}, thanks for your request.", status_callback = "http://127.0.0.1:{port}/receipts/sms/sms" }}
mapping = [{{ to = "to", from = "phone", transform = [{{ phone_e164 = {{ default_country = "+49" }} }}], required = true }}, {{ to = "first_name", from = "name", transform = ["first_name"] }}]
"#,
        db = dir.path().join("contact.db").display(),
        sid = mock_twilio::ACCOUNT_SID,
    );
    let mut config = Config::parse(&text, Path::new("bench.toml")).unwrap();
    config.inline_secrets.insert("BENCH_WA_TOKEN".into(), mock_whatsapp::TOKEN.into());
    config.inline_secrets.insert("BENCH_WA_SECRET".into(), mock_whatsapp::APP_SECRET.into());
    config.inline_secrets.insert("BENCH_TW_TOKEN".into(), mock_twilio::AUTH_TOKEN.into());
    let server = Server::start(config).await.unwrap();
    wa.post_receipts_to(&format!("http://{}/receipts/whatsapp/hello", server.addr));
    let client = reqwest::Client::new();
    let leads = rate * seconds;
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    for i in 0..leads {
        tick.tick().await;
        let (client, url) = (client.clone(), format!("http://{}/ingest/web", server.addr));
        tokio::spawn(async move {
            let lead =
                serde_json::json!({"id": format!("c{i}"), "name": "Ada Lovelace", "phone": format!("+49151{i:08}")});
            let _ = client.post(url).json(&lead).send().await;
        });
    }
    let store = &server.app.store;
    let since = chrono::DateTime::<chrono::Utc>::MIN_UTC;
    let deadline = Instant::now() + Duration::from_secs(120);
    let times = loop {
        let times = store.contact_times(since).await.unwrap();
        let done = times.iter().map(|t| t.delivered_ms.len()).sum::<usize>();
        if done >= leads || Instant::now() > deadline {
            break times;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ms = |v: Option<i64>| v.map_or("-".to_string(), |v| format!("{v} ms"));
    for f in leadline::contact::speed::figures(&times) {
        println!(
            "first contact: {leads} leads at {rate}/s over {:.0} s, source {}: accepted {} (p50 {} / p95 {}), \
             delivered {} (p50 {} / p95 {})",
            started.elapsed().as_secs_f64(),
            f.source,
            f.accepted,
            ms(f.accepted_p50_ms),
            ms(f.accepted_p95_ms),
            f.delivered,
            ms(f.delivered_p50_ms),
            ms(f.delivered_p95_ms)
        );
    }
    server.shutdown().await.unwrap();
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
    let mut config = config(&format!("sqlite://{}", db.display()), crm_addr, true);
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

/// A target that refuses above its limit without saying how many or for how long (figure 8).
#[derive(Clone, Copy)]
enum Refuser {
    /// The generic CRM's token bucket answering a bare `429`: no `Retry-After`, no rate-limit headers.
    Bare429,
    /// Salesforce's concurrent-request limit: `403 REQUEST_LIMIT_EXCEEDED` "ConcurrentPerOrgLongTxn".
    SalesforceConcurrent,
}

/// Figure 8: a backlog of `allowed × seconds` leads drained into a target that allows `allowed` requests a second
/// (a token bucket, burst a tenth of that) and refuses the rest in words that name no rate and no time; no rate is
/// declared, so the pace is learned from the refusals alone. Prints the leads delivered per second over the whole
/// drain and from its 10th second on (once the pace is found), as shares of the limit, and the share of requests
/// refused.
async fn bench_refusals(refuser: Refuser, allowed: f64, seconds: usize) {
    use leadline::demo::mock_salesforce::{self as sf_mock, MockSalesforce, SalesforceBehaviour};
    let leads = (allowed as usize) * seconds;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("refusals.db");
    queue_leads(
        &db,
        leads,
        "r",
        |id| serde_json::json!({ "id": id, "name": "Ada Lovelace", "email": format!("{id}@example.com") }),
    )
    .await;
    let burst = (allowed / 10.0).max(1.0);
    // What was sent and what was refused, read from the mock at the end.
    let counts: Box<dyn Fn() -> (u64, u64)>;
    let config = match refuser {
        Refuser::Bare429 => {
            let (crm, crm_addr) =
                leadline::demo::mock_crm::MockCrm::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
            crm.set_behaviour(leadline::demo::mock_crm::Behaviour {
                token_bucket: Some((allowed, burst)),
                bare_429: true,
                ..Default::default()
            });
            let mut config = config(&format!("sqlite://{}", db.display()), crm_addr, true);
            let sink = config.targets.get_mut("sink").unwrap();
            sink.concurrency = 16;
            sink.backoff.max_attempts = 1000;
            counts = Box::new(move || {
                let stats = crm.stats();
                (stats.requests, stats.rate_limited)
            });
            config
        }
        Refuser::SalesforceConcurrent => {
            let (sf, addr) = MockSalesforce::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
            sf.set_behaviour(SalesforceBehaviour { concurrent_limit: Some((allowed, burst)), ..Default::default() });
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
kind = "salesforce"
url = "http://{addr}"
external_id_field = "Leadline_Id__c"
client_id_env = "BENCH_SF_CLIENT_ID"
client_secret_env = "BENCH_SF_CLIENT_SECRET"
refresh_token_env = "BENCH_SF_REFRESH_TOKEN"
concurrency = 16
timeout_ms = 5000
backoff = {{ max_attempts = 1000 }}
mapping = [
  {{ to = "LastName", from = "name", transform = ["last_name"] }},
  {{ to = "Email", from = "email" }},
  {{ to = "Company", constant = "Unknown" }},
]
"#,
                db = db.display(),
            );
            let mut config = Config::parse(&text, Path::new("bench.toml")).expect("bench config");
            config.inline_secrets.insert("BENCH_SF_CLIENT_ID".into(), sf_mock::CLIENT_ID.into());
            config.inline_secrets.insert("BENCH_SF_CLIENT_SECRET".into(), sf_mock::CLIENT_SECRET.into());
            config.inline_secrets.insert("BENCH_SF_REFRESH_TOKEN".into(), sf_mock::REFRESH_TOKEN.into());
            counts = Box::new(move || {
                let requests = sf.waits().requests();
                let refused = requests.iter().filter(|r| r.status == Some(403)).count();
                (requests.len() as u64, refused as u64)
            });
            config
        }
    };
    let start = Instant::now();
    let server = Server::start(config).await.unwrap();
    let mut at_ten = None;
    let delivered = loop {
        let h = leadline::api::health(&server.app).await.unwrap().queue.overall;
        if at_ten.is_none() && start.elapsed() >= Duration::from_secs(10) {
            at_ten = Some((start.elapsed(), h.delivered as usize));
        }
        if h.delivered as usize >= leads || h.dead_open > 0 {
            break h.delivered as usize;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let elapsed = start.elapsed();
    let (requests, refused) = counts();
    let overall = delivered as f64 / elapsed.as_secs_f64();
    let settled = match at_ten {
        Some((t, n)) if elapsed > t => {
            let rate = (delivered - n) as f64 / (elapsed - t).as_secs_f64();
            format!("{rate:.1}/s = {:.0} % of the limit", 100.0 * rate / allowed)
        }
        _ => "(drained within 10 s)".into(),
    };
    println!(
        "refusals: {delivered} leads into {} allowing {allowed:.0} requests/s, no rate declared: {overall:.1} leads/s \
         = {:.0} % of the limit over {:.1} s; from the 10th second on {settled}; {refused} of {requests} requests \
         refused ({:.2} %)",
        match refuser {
            Refuser::Bare429 => "a CRM answering bare 429s",
            Refuser::SalesforceConcurrent => "Salesforce answering 403 REQUEST_LIMIT_EXCEEDED (concurrent)",
        },
        100.0 * overall / allowed,
        elapsed.as_secs_f64(),
        100.0 * refused as f64 / requests.max(1) as f64,
    );
    server.shutdown().await.unwrap();
}

/// Figures 1 to 4 on each backend in `backends`, side by side in `table`.
async fn store_figures(dbs: &Databases, backends: &[Backend], table: &mut Table) {
    let only = |name: &str| std::env::args().any(|a| a == name);
    if !only("--only-dead-letters") {
        if !only("--only-delivery") {
            for &b in backends {
                let url = dbs.fresh(b, "ingest").await;
                table.put(b, bench_ingest(&url, arg("--clients", 32), arg("--per-client", 500)).await);
                dbs.discard(&url).await;
            }
            if only("--only-ingest") {
                return;
            }
        }
        let jobs = arg("--delivery-jobs", 20_000);
        for &b in backends {
            let history = size("--history-jobs", 1_000_000);
            let url = dbs.fresh(b, "delivery").await;
            let (small, _, _) = bench_delivery(&url, jobs, 1_000).await;
            dbs.discard(&url).await;
            let url = dbs.fresh(b, "delivery").await;
            let (large, cpu, fill) = bench_delivery(&url, jobs, history).await;
            dbs.discard(&url).await;
            let rate = |r: f64| format!("{} /s", thousands(r.round() as usize));
            println!("delivery: with the large history at {:.0} % of the small one", 100.0 * large / small);
            table.put(
                b,
                vec![
                    (format!("delivery: {} jobs, 1,000 delivered stored", thousands(jobs)), rate(small)),
                    (
                        "delivery: large history stored (fill time)".into(),
                        format!("{} ({})", thousands(history), secs(fill)),
                    ),
                    (format!("delivery: {} jobs, large history stored", thousands(jobs)), rate(large)),
                    ("delivery: large history / small".into(), format!("{:.0} %", 100.0 * large / small)),
                    ("delivery: CPU per job, sink included".into(), format!("{:.0} µs", cpu.as_secs_f64() * 1e6)),
                ],
            );
        }
        if only("--only-delivery") {
            return;
        }
    }
    for &b in backends {
        let url = dbs.fresh(b, "health").await;
        table.put(b, bench_health(&url, size("--health-jobs", 1_000_000)).await);
        dbs.discard(&url).await;
    }
    for &b in backends {
        let url = dbs.fresh(b, "dead").await;
        table.put(b, bench_dead_letters(&url, size("--dead-letters", 1_000_000)).await);
        dbs.discard(&url).await;
    }
}

fn main() {
    let only = |name: &str| std::env::args().any(|a| a == name);
    let args: Vec<String> = std::env::args().collect();
    let backend = args.iter().position(|a| a == "--backend").and_then(|i| args.get(i + 1)).map_or("both", |s| s);
    let backends = match backend {
        "sqlite" => vec![Backend::Sqlite],
        "postgres" => vec![Backend::Postgres],
        "both" => vec![Backend::Sqlite, Backend::Postgres],
        other => panic!("--backend {other}: expected sqlite, postgres or both"),
    };
    let store_figures_run =
        !only("--only-pacing") && !only("--only-hubspot") && !only("--only-refusals") && !only("--only-first-contact");
    let team_run = only("--only-team");
    // Declared before the runtime, so it is dropped (the cluster stopped) after everything using it, and also
    // when a figure panics.
    let mut _cluster = None;
    let pg_admin = if (store_figures_run && backends.contains(&Backend::Postgres)) || team_run {
        match std::env::var("LEADLINE_BENCH_PG_URL") {
            Ok(url) if !url.is_empty() => Some(url),
            _ => {
                let (cluster, url) = PgCluster::start();
                _cluster = Some(cluster);
                Some(url)
            }
        }
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "leadline engine benchmark ({} cores; SQLite synchronous=FULL; PostgreSQL {})",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        match (&pg_admin, &_cluster) {
            (None, _) => "not run".to_string(),
            (Some(_), Some(_)) => "in a throwaway cluster from .ci/pg-start, fsync on".to_string(),
            (Some(url), None) => format!("at {}", leadline::store::postgres::redact(url)),
        }
    );
    rt.block_on(async {
        if only("--only-team") {
            let dbs = Databases { files: tempfile::tempdir().unwrap(), pg_admin, seq: AtomicUsize::new(0) };
            let jobs = arg("--team-jobs", 20_000);
            let mut figures = Vec::new();
            for processes in [1, 2, 4] {
                let url = dbs.fresh(Backend::Postgres, "team").await;
                figures.push((processes, bench_team(&url, jobs, processes).await));
                dbs.discard(&url).await;
            }
            println!("\n| processes | delivered/s |\n|---|---|");
            for (n, rate) in figures {
                println!("| {n} | {} |", thousands(rate.round() as usize));
            }
            return;
        }
        if store_figures_run {
            let dbs = Databases { files: tempfile::tempdir().unwrap(), pg_admin, seq: AtomicUsize::new(0) };
            let mut table = Table::default();
            store_figures(&dbs, &backends, &mut table).await;
            table.print();
            if only("--only-delivery") || only("--only-dead-letters") || only("--only-ingest") {
                return;
            }
        }
        if only("--only-first-contact") {
            bench_first_contact(arg("--contact-rate", 20), arg("--contact-seconds", 30)).await;
            return;
        }
        if only("--only-refusals") {
            let seconds = arg("--refusal-seconds", 30);
            for allowed in [40.0, 200.0] {
                bench_refusals(Refuser::Bare429, allowed, seconds).await;
                bench_refusals(Refuser::SalesforceConcurrent, allowed, seconds).await;
            }
            return;
        }
        if only("--only-hubspot") {
            let leads = arg("--hubspot-leads", 5_000);
            bench_hubspot(leads, false).await;
            bench_hubspot(leads, true).await;
            return;
        }
        if !only("--skip-pacing") {
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
