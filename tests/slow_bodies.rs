//! Issue #34: slow webhook bodies cannot hold the door. A thousand stalled bodies — from one address, and spread
//! over 100 loopback addresses — leave a good webhook answered `202` and stored while they are still open; bodies
//! slower than the minimum rate are refused and let go of what they held; one sender's excess is refused at once;
//! a forwarded address counts only when a trusted proxy says it. Refusals are logged without flooding the log.
//!
//! No assertion here is about time: the limits are set small so the test takes seconds, and each step waits for
//! what the server does (a count, an answer), never for a while. Linux only: there the whole of 127.0.0.0/8 is
//! the machine's own, so client sockets can be bound to 100 loopback addresses without setting anything up.
#![cfg(target_os = "linux")]

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::*;
use reqwest::StatusCode;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Announced and sent sizes of a stalled large body (over the 16 KiB a body may have without a turn) and a small
/// one.
const LARGE: (usize, usize) = (20_000, 18_000);
const SMALL: (usize, usize) = (4_000, 100);

fn loopback(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// A connection from `from` that sends a signed-source webhook's headers (`extra` headers among them), announces
/// `announce` bytes of body, sends the first `send` and stalls.
async fn stalled_body(to: SocketAddr, from: IpAddr, (announce, send): (usize, usize), extra: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from, 0)).unwrap();
    let mut stream = socket.connect(to).await.unwrap();
    let head = format!(
        "POST /ingest/webform HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/json\r\nX-Signature-256: \
         sha256=00\r\nContent-Length: {announce}\r\n{extra}\r\n{{\"id\": \"slow"
    );
    let mut bytes = head.into_bytes();
    bytes.resize(bytes.len() + send - 12, b' ');
    stream.write_all(&bytes).await.unwrap();
    stream
}

/// The status and `{code, message}` body of a raw HTTP answer.
fn answer(raw: &str) -> (u16, serde_json::Value) {
    let status = raw.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or_default())
}

/// Whether the server has said nothing on `stream` and kept it open: asks the socket itself (a peek that reads
/// nothing away), not tokio's record of its readiness, which may not have caught up yet.
fn still_open(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 1];
    // SAFETY: a non-blocking peek of at most one byte into a buffer of one byte, on a socket `stream` keeps open.
    let n = unsafe { libc::recv(stream.as_raw_fd(), buf.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}

/// Posts a good signed lead from `from`, with `extra` headers; returns the status and the answer's body.
async fn post_good(app: &TestApp, from: IpAddr, id: &str, extra: &[(&str, &str)]) -> (StatusCode, serde_json::Value) {
    let raw = lead(id).to_string();
    let sig = leadline::ingest::signature::sign(SECRET.as_bytes(), raw.as_bytes());
    let mut request = reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap()
        .post(app.url("/ingest/webform"))
        .header("X-Signature-256", sig)
        .header("content-type", "application/json")
        .body(raw);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let r = request.send().await.unwrap();
    (r.status(), r.json().await.unwrap_or_default())
}

async fn ingest_counts(app: &TestApp) -> (usize, usize) {
    let ingest = &app.server.app.ingest;
    (ingest.bodies_on_their_way(), ingest.large_body_turns_taken())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_webhook_is_accepted_while_a_thousand_slow_bodies_are_open() {
    let log = capture_log();
    // Slow bodies have two minutes here, far longer than the test: the good webhook must get through while they
    // are all still open.
    let app = spawn_limited(
        "max_body_bytes = 65536\nmax_connections = 2200\nbody_timeout_seconds = 120\nbody_stall_seconds = 120\n\
         max_ingest_in_flight = 8\nmax_bodies_per_peer = 10",
    )
    .await;
    let to = app.server.addr;

    // 1,000 stalled bodies from 127.0.0.2 … 127.0.0.101, ten each (the cap): half of them large.
    let mut spread = Vec::new();
    for i in 0..1000 {
        let size = if i % 2 == 0 { LARGE } else { SMALL };
        spread.push(stalled_body(to, loopback(2 + (i % 100) as u8), size, "").await);
    }
    wait_for("1,000 bodies on their way and every turn for a large one taken", Duration::from_secs(60), async || {
        ingest_counts(&app).await == (1000, 8)
    })
    .await;
    let (status, body) = post_good(&app, loopback(200), "GOOD-1", &[]).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["events"][0]["source_ref"], "GOOD-1");
    assert_eq!(app.server.app.store.count_events().await.unwrap(), 1, "the good lead is stored, no slow one");
    assert!(spread.iter().all(still_open), "the slow bodies were still open when the good webhook was accepted");
    assert_eq!(ingest_counts(&app).await, (1000, 8));

    // 1,000 more from one address: its first ten are taken, the rest refused at once (429) and closed.
    let one = loopback(102);
    let mut flood = Vec::new();
    for _ in 0..1000 {
        flood.push(stalled_body(to, one, SMALL, "").await);
    }
    let (answered_tx, mut answered) = tokio::sync::mpsc::unbounded_channel();
    let mut readers = Vec::new();
    for mut stream in flood {
        let answered_tx = answered_tx.clone();
        readers.push(tokio::spawn(async move {
            let said = read_until_closed(&mut stream).await;
            let _ = answered_tx.send(said);
        }));
    }
    let mut refusals = Vec::new();
    while refusals.len() < 990 {
        let said = tokio::time::timeout(Duration::from_secs(60), answered.recv())
            .await
            .expect("the excess of one address is refused")
            .unwrap();
        refusals.push(answer(&said));
    }
    for (status, body) in &refusals {
        assert_eq!(*status, 429, "{body}");
        assert_eq!(body["code"], "too_many_bodies");
        assert!(body["message"].as_str().unwrap().contains("127.0.0.102"), "{body}");
    }
    assert_eq!(ingest_counts(&app).await, (1010, 8), "ten from the one address are on their way");
    // That address's own good webhook is over its cap too; another address's goes through.
    let (status, body) = post_good(&app, one, "GOOD-2", &[]).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::TOO_MANY_REQUESTS, Some("too_many_bodies")));
    let (status, _) = post_good(&app, loopback(201), "GOOD-3", &[]).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(app.server.app.store.count_events().await.unwrap(), 2);
    assert!(spread.iter().all(still_open));
    assert!(answered.try_recv().is_err(), "the ten taken from the one address are still open");

    // 991 refusals, a handful of lines: the first, and one every ten seconds after it with the count left out.
    let logged = log.text();
    let lines = logged.lines().filter(|l| l.contains("too_many_bodies") && l.contains("127.0.0.102")).count();
    assert!((1..=5).contains(&lines), "{lines} lines for 991 refusals");
    // The clients hang up: every body still on its way ends (its read fails), and the server stops at once.
    drop(spread);
    readers.iter().for_each(|r| r.abort());
    app.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_slower_than_the_minimum_rate_are_refused_and_let_go_of_what_they_held() {
    let log = capture_log();
    // A body must keep up 100 bytes a second and may fall 2 s behind; the body timeout is far away.
    let app = spawn_limited(
        "max_body_bytes = 65536\nmax_connections = 1200\nbody_timeout_seconds = 120\nmin_body_bytes_per_second = \
         100\nbody_stall_seconds = 2\nmax_ingest_in_flight = 8\nmax_bodies_per_peer = 10",
    )
    .await;
    let to = app.server.addr;
    // 1,000 stalled bodies from 100 addresses; 16 are large, twice the turns there are: the second eight get a
    // turn only when the first eight let go of theirs.
    let mut stalled = Vec::new();
    for i in 0..1000 {
        let size = if i % 60 == 0 && i / 60 < 16 { LARGE } else { SMALL };
        stalled.push(stalled_body(to, loopback(2 + (i % 100) as u8), size, "").await);
    }
    // One never stops but sends 10 bytes a second; another sends 1,000 bytes a second — slow, and fast enough.
    let trickle = |id: &'static str, every: Duration, piece: usize, from: IpAddr| async move {
        let body =
            format!(r#"{{"id": "{id}", "name": "Ada", "email": "{id}@example.com", "pad": "{}"}}"#, " ".repeat(3000));
        let sig = leadline::ingest::signature::sign(SECRET.as_bytes(), body.as_bytes());
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(from, 0)).unwrap();
        let stream = socket.connect(to).await.unwrap();
        let (mut reader, mut writer) = stream.into_split();
        let head = format!(
            "POST /ingest/webform HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/json\r\nX-Signature-256: \
             {sig}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        writer.write_all(head.as_bytes()).await.unwrap();
        let sending = tokio::spawn(async move {
            for piece in body.as_bytes().chunks(piece) {
                if writer.write_all(piece).await.is_err() {
                    return;
                }
                tokio::time::sleep(every).await;
            }
        });
        let mut said = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut said).await;
        sending.abort();
        answer(&String::from_utf8_lossy(&said))
    };
    let too_slow = tokio::spawn(trickle("TRICKLE-1", Duration::from_millis(100), 1, loopback(210)));
    let fast_enough = tokio::spawn(trickle("STEADY-1", Duration::from_millis(100), 100, loopback(211)));

    let mut answers = Vec::new();
    for mut stream in stalled {
        answers.push(answer(&read_until_closed(&mut stream).await));
    }
    for (status, body) in &answers {
        assert_eq!((*status, body["code"].as_str()), (408, Some("body_too_slow")), "{body}");
        assert!(body["message"].as_str().unwrap().contains("100 bytes a second"), "{body}");
    }
    let (status, body) = too_slow.await.unwrap();
    assert_eq!((status, body["code"].as_str()), (408, Some("body_too_slow")), "a trickle below the rate: {body}");
    let (status, body) = fast_enough.await.unwrap();
    assert_eq!(status, 202, "a slow body that keeps the rate: {body}");
    assert_eq!(body["events"][0]["source_ref"], "STEADY-1");
    // Everything the slow bodies held is free again; only the steady lead was stored.
    wait_for("the slow bodies' counts and turns given back", Duration::from_secs(10), async || {
        ingest_counts(&app).await == (0, 0)
    })
    .await;
    assert_eq!(app.server.app.store.count_events().await.unwrap(), 1);
    let (status, _) = post_good(&app, loopback(2), "GOOD-1", &[]).await;
    assert_eq!(status, StatusCode::ACCEPTED, "an address whose slow bodies were refused is served again");
    let lines = log.text().lines().filter(|l| l.contains("body_too_slow")).count();
    assert!((1..=10).contains(&lines), "{lines} lines for 1,001 refusals");
    app.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_address_counts_only_when_a_trusted_proxy_says_it() {
    let app = spawn_limited(
        "max_body_bytes = 65536\nbody_timeout_seconds = 120\nbody_stall_seconds = 120\nmax_bodies_per_peer = 2\n\
         trusted_proxies = [\"127.0.0.50\", \"10.0.0.0/8\"]",
    )
    .await;
    let to = app.server.addr;
    let (proxy, stranger) = (loopback(50), loopback(51));
    let mut open = Vec::new();
    // Sends a stalled body from `from` with `extra` headers and says who it was counted against: `Ok(())` when it
    // is on its way (the server's count went up), or the refusal's message.
    let mut send = async |from: IpAddr, extra: &str| -> Result<(), String> {
        let before = app.server.app.ingest.bodies_on_their_way();
        let mut stream = stalled_body(to, from, SMALL, extra).await;
        let mut said = String::new();
        wait_for("the body taken or refused", Duration::from_secs(30), async || {
            if app.server.app.ingest.bodies_on_their_way() > before {
                return true;
            }
            if !still_open(&stream) {
                said = read_until_closed(&mut stream).await;
                return true;
            }
            false
        })
        .await;
        if said.is_empty() {
            open.push(stream);
            return Ok(());
        }
        let (status, body) = answer(&said);
        assert_eq!((status, body["code"].as_str()), (429, Some("too_many_bodies")), "{said}");
        Err(body["message"].as_str().unwrap().to_string())
    };

    // Through the trusted proxy, each forwarded client has its own count.
    let xff = |client: &str| format!("X-Forwarded-For: {client}\r\n");
    assert_eq!(send(proxy, &xff("203.0.113.7")).await, Ok(()));
    assert_eq!(send(proxy, &xff("203.0.113.7")).await, Ok(()));
    let refused = send(proxy, &xff("203.0.113.7")).await.unwrap_err();
    assert!(refused.contains("from 203.0.113.7"), "{refused}");
    assert_eq!(send(proxy, &xff("198.51.100.9")).await, Ok(()));
    // What a client wrote left of the address the proxy appended proves nothing; a chain of trusted proxies is
    // skipped to the client.
    assert!(send(proxy, &xff("198.51.100.77, 203.0.113.7")).await.unwrap_err().contains("from 203.0.113.7"));
    assert!(send(proxy, &xff("203.0.113.7, 10.1.2.3")).await.unwrap_err().contains("from 203.0.113.7"));
    // The header the proxy does not write (`Forwarded`, with `x-forwarded-for` configured) is ignored: those
    // requests count against the proxy itself.
    assert_eq!(send(proxy, "Forwarded: for=192.0.2.1\r\n").await, Ok(()));
    assert_eq!(send(proxy, "Forwarded: for=192.0.2.2\r\n").await, Ok(()));
    assert!(send(proxy, "Forwarded: for=192.0.2.3\r\n").await.unwrap_err().contains("from 127.0.0.50"));
    // From a peer that is not a trusted proxy the header is ignored: a new address in it each time does not help.
    assert_eq!(send(stranger, &xff("192.0.2.10")).await, Ok(()));
    assert_eq!(send(stranger, &xff("192.0.2.11")).await, Ok(()));
    let refused = send(stranger, &xff("192.0.2.12")).await.unwrap_err();
    assert!(refused.contains("from 127.0.0.51"), "{refused}");
    assert_eq!(app.server.app.ingest.bodies_on_their_way(), 7);

    // Good webhooks through the proxy: a client with room is accepted, one at its cap is not.
    let (status, _) = post_good(&app, proxy, "GOOD-1", &[("x-forwarded-for", "192.0.2.77")]).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, body) = post_good(&app, proxy, "GOOD-2", &[("x-forwarded-for", "203.0.113.7")]).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::TOO_MANY_REQUESTS, Some("too_many_bodies")));
    assert_eq!(app.server.app.store.count_events().await.unwrap(), 1);
    drop(open);
    app.server.shutdown().await.unwrap();
}
