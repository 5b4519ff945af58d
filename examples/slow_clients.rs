//! Slow-client benchmark (issue #11): starts `leadline serve` on a signed source, opens N connections that each
//! announce a 1 MiB webhook body, send most of it and then stall, and prints the server's resident memory
//! (VmRSS) before, during and after, and whether the API still answers during the attack. Prints figures and
//! asserts nothing.
//!
//! ```text
//! cargo build --no-default-features --bin leadline
//! cargo run --no-default-features --example slow_clients -- [connections] [--no-limits]
//! ```
//! `--no-limits` lifts the server's slow-client limits (huge timeouts and caps) to show what they prevent.
//! `LEADLINE_BIN` names the binary (default: `$CARGO_TARGET_DIR/debug/leadline`, else `target/debug/leadline`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY: usize = 1024 * 1024;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(1000);
    let no_limits = args.iter().any(|a| a == "--no-limits");
    let bin = std::env::var("LEADLINE_BIN").unwrap_or_else(|_| {
        let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
        format!("{target}/debug/leadline")
    });
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let limits = if no_limits {
        "max_connections = 100000\nheader_timeout_seconds = 3600\nbody_timeout_seconds = 3600\nmax_ingest_in_flight = 100000"
    } else {
        ""
    };
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
{limits}

[database]
url = "sqlite://{db}"

[worker]
enabled = false

[sources.webform]
route = ["crm"]
signature = {{ header = "X-Signature-256", secret_env = "BENCH_WEBFORM_SECRET" }}

[targets.crm]
url = "http://127.0.0.1:9/crm"
strategy = "idempotency_key"
"#,
        db = dir.path().join("bench.db").display()
    );
    let config_path = dir.path().join("bench.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut child = Command::new(&bin)
        .args(["serve", "--config"])
        .arg(&config_path)
        .env("BENCH_WEBFORM_SECRET", "bench-secret")
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let pid = child.id();
    // The first start prints the browser link with the token.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let token = loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "leadline serve exited");
        if let Some((_, t)) = line.trim().split_once("?token=") {
            break t.to_string();
        }
    };
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let health = |http: reqwest::Client, base: String, token: String| async move {
        let started = Instant::now();
        let r = http.get(format!("{base}/api/health")).bearer_auth(token).timeout(Duration::from_secs(30)).send().await;
        (r.map(|r| r.status().as_u16()).unwrap_or(0), started.elapsed())
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("limits: {}", if no_limits { "lifted (--no-limits)" } else { "defaults" });
    println!("before:  VmRSS {}", mib(rss_kib(pid)));

    let head = format!(
        "POST /ingest/webform HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         X-Signature-256: sha256=00\r\nContent-Length: {BODY}\r\n\r\n"
    );
    let chunk = vec![b' '; 64 * 1024];
    let opened = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..n {
        let head = head.clone();
        let chunk = chunk.clone();
        tasks.push(tokio::spawn(async move {
            let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return "refused" };
            if s.write_all(head.as_bytes()).await.is_err() {
                return "closed";
            }
            // Send all but the last byte of the body (as far as the server takes it), then stall.
            let mut sent = 0;
            while sent < BODY - chunk.len() {
                match tokio::time::timeout(Duration::from_secs(2), s.write_all(&chunk)).await {
                    Ok(Ok(())) => sent += chunk.len(),
                    _ => break,
                }
            }
            let mut buf = [0u8; 512];
            match tokio::time::timeout(Duration::from_secs(600), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => "closed",
                Ok(Ok(_)) if buf.starts_with(b"HTTP/1.1 408") => "408",
                Ok(Ok(_)) if buf.starts_with(b"HTTP/1.1 503") => "503",
                Ok(Ok(_)) => "other answer",
                Err(_) => "still open after 600 s",
            }
        }));
    }
    let mut peak = 0;
    for second in [2u64, 5, 10, 20] {
        tokio::time::sleep_until(tokio::time::Instant::from_std(opened + Duration::from_secs(second))).await;
        let rss = rss_kib(pid);
        peak = peak.max(rss);
        let (status, took) = health(http.clone(), base.clone(), token.clone()).await;
        println!("t+{second:>2}s:  VmRSS {}  GET /api/health -> {status} in {took:?}", mib(rss));
    }
    if no_limits {
        println!("(limits lifted: the connections stay open; stopping here)");
    } else {
        let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
        for t in tasks {
            *outcomes.entry(t.await.unwrap()).or_default() += 1;
        }
        println!("slow connections ended after {:?}: {outcomes:?}", opened.elapsed());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (status, took) = health(http.clone(), base.clone(), token.clone()).await;
        println!("after:   VmRSS {}  GET /api/health -> {status} in {took:?}", mib(rss_kib(pid)));
    }
    println!("peak during: VmRSS {}", mib(peak));
    let _ = child.kill();
    let _ = child.wait();
}
