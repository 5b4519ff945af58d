//! A real PostgreSQL server for tests.
//!
//! `LEADLINE_TEST_PG_URL`, when set, is the admin URL of a running cluster (`.ci/pg-start` starts one for a whole
//! CI run, so the test binaries share it). Otherwise the first test that asks starts one throwaway cluster for
//! this test process: `initdb` into a temporary folder (`-A trust`; as the `postgres` user when running as root,
//! since PostgreSQL refuses to run as root), then `pg_ctl start` listening only on a Unix socket in that folder
//! (`listen_addresses = ''`, so no TCP port can clash with anything; fsync on). A watcher process stops it and
//! removes the folder when this process ends (best effort: the test harness runs no destructors on exit).
//!
//! Each test gets its own database ([`fresh_database_url`]), so tests never see each other's rows.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The admin URL (a superuser, database `postgres`) of the cluster this process uses; starts one if needed.
/// Panics with the reason when PostgreSQL cannot be started: PostgreSQL tests are never skipped.
pub fn admin_url() -> String {
    static ADMIN: OnceLock<Result<String, String>> = OnceLock::new();
    ADMIN
        .get_or_init(|| match std::env::var("LEADLINE_TEST_PG_URL") {
            Ok(url) if !url.is_empty() => Ok(url),
            _ => start_cluster(),
        })
        .clone()
        .unwrap_or_else(|e| panic!("PostgreSQL for the tests could not be started: {e}"))
}

/// Creates a new, empty database on the test cluster and returns its URL. The store's migrations are applied
/// when it is opened.
pub async fn fresh_database_url() -> String {
    tokio::task::spawn_blocking(fresh_database_url_blocking).await.expect("creating a test database")
}

/// [`fresh_database_url`] for synchronous callers (it runs its own small runtime on a thread of its own, so it
/// may be called from inside an async test too).
pub fn fresh_database_url_blocking() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let admin = admin_url();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    let name = format!("leadline_test_{}_{}_{nanos}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(leadline::store::postgres::create_database(&admin, &name))
            .unwrap_or_else(|e| panic!("cannot create a test database on {admin}: {e:#}"))
    })
    .join()
    .expect("creating a test database")
}

/// Where PostgreSQL's server programs are: Debian keeps them in `/usr/lib/postgresql/<version>/bin` (newest
/// first), off the PATH; otherwise the PATH.
fn bin(program: &str) -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin").join(program))))
        .filter(|(_, p)| p.exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p).unwrap_or_else(|| PathBuf::from(program))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `program args…`, as the `postgres` user when we are root.
fn command(program: &str) -> Command {
    let path = bin(program);
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(path);
        c
    } else {
        Command::new(path)
    }
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out = c.stdin(Stdio::null()).output().map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Starts a throwaway cluster and returns its admin URL.
fn start_cluster() -> Result<String, String> {
    let dir = tempfile::Builder::new()
        .prefix("leadline-pg-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary folder: {e}"))?
        .keep();
    let data = dir.join("data");
    if is_root() {
        run(
            {
                let mut c = Command::new("chown");
                c.arg("postgres:").arg(&dir);
                c
            },
            "chown of the cluster folder to postgres",
        )?;
    }
    let mut initdb = command("initdb");
    initdb.arg("-D").arg(&data).args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]);
    run(initdb, "initdb")?;
    // Any port will do: the server listens only on the Unix socket `<dir>/.s.PGSQL.<port>`.
    let port = 5432;
    let options = format!(
        "-k {} -p {port} -c listen_addresses='' -c fsync=on -c max_connections=300 -c shared_buffers=32MB",
        dir.display()
    );
    let mut start = command("pg_ctl");
    start.arg("-D").arg(&data).arg("-l").arg(dir.join("server.log")).args(["-o", &options, "-w", "-t", "60", "start"]);
    if let Err(e) = run(start, "pg_ctl start") {
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        return Err(format!("{e}\nserver log:\n{log}"));
    }
    watch_and_stop(&dir, &data);
    Ok(format!("postgres://postgres@localhost:{port}/postgres?host={}", dir.display()))
}

/// A detached watcher: when this test process is gone, stop the cluster and remove its folder.
fn watch_and_stop(dir: &Path, data: &Path) {
    let pg_ctl = bin("pg_ctl");
    let as_postgres = if is_root() { "runuser -u postgres -- " } else { "" };
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {as_postgres}'{pg_ctl}' -D '{data}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir}'",
        pid = std::process::id(),
        pg_ctl = pg_ctl.display(),
        data = data.display(),
        dir = dir.display(),
    );
    let _ = Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}
