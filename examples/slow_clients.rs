//! Slow-body benchmark (issues #11 and #34): starts `leadline serve` on a signed source with the default limits,
//! opens N connections that each announce a webhook body of 1,000,000 bytes, send 900,000 of them (as far as the
//! server takes them) and then stall, and — once the attack is in place — posts good webhooks from another
//! address and times each one's answer. Prints the time to each good webhook's `202`, the server's resident memory
//! (VmRSS) before, at its peak and after, and how the slow connections ended. Prints figures and asserts nothing.
//!
//! ```text
//! cargo build --no-default-features --bin leadline
//! cargo run --no-default-features --example slow_clients -- [connections] [--peers N] [--no-limits]
//! ```
//! `--peers N` spreads the connections over N loopback source addresses, 127.0.0.2 to 127.0.0.(N+1) (default:
//! all from 127.0.0.1); the good webhooks come from 127.0.0.250. `--announce` and `--send` change the body's
//! announced and sent sizes. `--no-limits` lifts the server's slow-client limits (huge timeouts and caps) to show
//! what they prevent. `LEADLINE_BIN` names the binary (default: `$CARGO_TARGET_DIR/debug/leadline`, else
//! `target/debug/leadline`).

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "bench-secret";
/// Where the good webhooks come from: none of the slow connections' addresses.
const GOOD_PEER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 250);

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

fn flag(args: &[String], name: &str) -> Option<usize> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok())
}

/// The source address of slow connection `i` of `n` spread over `peers` addresses.
fn slow_peer(i: usize, peers: usize) -> Ipv4Addr {
    if peers <= 1 {
        Ipv4Addr::LOCALHOST
    } else {
        let k = 2 + (i % peers) as u32;
        Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 0)) + k)
    }
}

/// Posts one signed lead from [`GOOD_PEER`]; returns the status and how long the answer took.
async fn good_webhook(port: u16, n: usize) -> (u16, Duration) {
    let http = reqwest::Client::builder().local_address(IpAddr::V4(GOOD_PEER)).build().unwrap();
    let raw = format!(r#"{{"id": "good-{n}", "name": "Ada Lovelace", "email": "good-{n}@example.com"}}"#);
    let sig = leadline::ingest::signature::sign(SECRET.as_bytes(), raw.as_bytes());
    let started = Instant::now();
    let r = http
        .post(format!("http://127.0.0.1:{port}/ingest/webform"))
        .header("X-Signature-256", sig)
        .header("content-type", "application/json")
        .body(raw)
        .timeout(Duration::from_secs(120))
        .send()
        .await;
    (r.map(|r| r.status().as_u16()).unwrap_or(0), started.elapsed())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let peers = flag(&args, "--peers").unwrap_or(1);
    let announce = flag(&args, "--announce").unwrap_or(1_000_000);
    let send = flag(&args, "--send").unwrap_or(900_000).min(announce.saturating_sub(1));
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
        .env("BENCH_WEBFORM_SECRET", SECRET)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let pid = child.id();
    // The first start prints the browser link with the token: the server is listening.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "leadline serve exited");
        if line.contains("?token=") {
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "{n} slow bodies ({announce} bytes announced, {send} sent, then a stall) from {}; limits: {}",
        if peers <= 1 { "127.0.0.1".to_string() } else { format!("{peers} addresses (127.0.0.2 …)") },
        if no_limits { "lifted (--no-limits)" } else { "defaults" }
    );
    let before = rss_kib(pid);
    println!("before:        VmRSS {}", mib(before));

    // The server's memory, sampled every 100 ms until the end.
    let peak = Arc::new(AtomicU64::new(before));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let head = format!(
        "POST /ingest/webform HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         X-Signature-256: sha256=00\r\nContent-Length: {announce}\r\n\r\n"
    );
    // Each slow connection counts itself here once it has sent what it means to, or the server stopped taking its
    // bytes for a second, or it was answered or closed: the attack is then in place.
    let settled = Arc::new(AtomicUsize::new(0));
    let opened = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..n {
        let head = head.clone();
        let settled = settled.clone();
        let from = slow_peer(i, peers);
        tasks.push(tokio::spawn(async move {
            let settle = || settled.fetch_add(1, Ordering::SeqCst);
            let connect = async {
                let socket = tokio::net::TcpSocket::new_v4()?;
                socket.bind(SocketAddr::new(IpAddr::V4(from), 0))?;
                socket.connect(SocketAddr::from(([127, 0, 0, 1], port))).await
            };
            let Ok(mut s) = connect.await else {
                settle();
                return ("refused at connect".to_string(), opened.elapsed());
            };
            if s.write_all(head.as_bytes()).await.is_err() {
                settle();
                return ("closed".to_string(), opened.elapsed());
            }
            let chunk = vec![b' '; 64 * 1024];
            let mut sent = 0;
            while sent < send {
                let part = &chunk[..chunk.len().min(send - sent)];
                match tokio::time::timeout(Duration::from_secs(1), s.write_all(part)).await {
                    Ok(Ok(())) => sent += part.len(),
                    _ => break,
                }
            }
            settle();
            let mut said = Vec::new();
            let outcome = match tokio::time::timeout(Duration::from_secs(600), s.read_to_end(&mut said)).await {
                Err(_) => "still open after 600 s".to_string(),
                Ok(_) if said.is_empty() => "closed without an answer".to_string(),
                // The status and the `code` of the `{code, message}` body.
                Ok(_) => {
                    let said = String::from_utf8_lossy(&said);
                    let code = said.split("\"code\":\"").nth(1).and_then(|c| c.split('"').next()).unwrap_or("");
                    format!("{} {code}", said.get(9..12).unwrap_or("???"))
                }
            };
            (outcome, opened.elapsed())
        }));
    }
    let waited = tokio::time::timeout(Duration::from_secs(120), async {
        while settled.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let in_place = opened.elapsed();
    println!(
        "attack in place after {in_place:.1?}{}: VmRSS {}",
        if waited.is_err() { " (not every connection settled)" } else { "" },
        mib(rss_kib(pid))
    );

    // Good webhooks while the slow bodies are open: at once, one second later, three seconds later.
    let good: Vec<_> = [0u64, 1, 3]
        .into_iter()
        .enumerate()
        .map(|(k, delay)| {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(delay)).await;
                (delay, good_webhook(port, k).await)
            })
        })
        .collect();
    for g in good {
        let (delay, (status, took)) = g.await.unwrap();
        println!("good webhook (sent {delay} s after the attack was in place): {status} in {took:.3?}");
    }

    if no_limits {
        println!("(limits lifted: the slow connections stay open; stopping here)");
    } else {
        let mut outcomes = std::collections::BTreeMap::<String, (usize, Duration)>::new();
        for t in tasks {
            let (outcome, at) = t.await.unwrap();
            let e = outcomes.entry(outcome).or_default();
            e.0 += 1;
            e.1 = e.1.max(at);
        }
        let ended: Vec<String> =
            outcomes.iter().map(|(o, (count, last))| format!("{o}: {count} (the last at {last:.1?})")).collect();
        println!("slow connections ended: {}", ended.join(", "));
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!("after:         VmRSS {}", mib(rss_kib(pid)));
    }
    sampler.abort();
    println!("peak:          VmRSS {}", mib(peak.load(Ordering::Relaxed).max(rss_kib(pid))));
    let _ = child.kill();
    let _ = child.wait();
}
