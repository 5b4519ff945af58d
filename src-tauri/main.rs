//! The `leadline` binary: `leadline serve` runs the headless server; more shells come with the desktop app.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use leadline::config::{default_data_dir, Config};
use leadline::demo;
use leadline::server::{Server, StartOptions};

#[derive(Parser)]
#[command(
    name = "leadline",
    version,
    about = "Lead delivery you can trust: durable ingest, classified retries, readable dead letters"
)]
struct Cli {
    /// Desktop app: configuration file (TOML). Without one, the app runs the demo.
    #[arg(long, env = "LEADLINE_CONFIG", global = false)]
    config: Option<PathBuf>,
    /// Desktop app: start in the tray with the window hidden (what start at login uses).
    #[arg(long)]
    hidden: bool,
    /// Desktop app: run the demo here (a built-in mock CRM and made-up leads), without asking how to run.
    #[arg(long)]
    demo: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the ingest server and the delivery worker without a window.
    Serve {
        /// Configuration file (TOML). Without it (and without --demo) there is nothing to deliver.
        #[arg(long, env = "LEADLINE_CONFIG")]
        config: Option<PathBuf>,
        /// Run the built-in demo: a mock CRM that misbehaves on a schedule and synthetic traffic.
        #[arg(long)]
        demo: bool,
        /// Override `server.listen`.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Override `database.url`: an SQLite file path or `sqlite://` URL, or `postgres://user:password@host/database`.
        #[arg(long, env = "LEADLINE_DATABASE_URL")]
        database: Option<String>,
        /// Demo only: leads per minute at the daily peak.
        #[arg(long, default_value_t = 60.0)]
        demo_rate: f64,
    },
    /// Replace the browser-mode API token and print the new one.
    ResetToken {
        #[arg(long, env = "LEADLINE_CONFIG")]
        config: Option<PathBuf>,
        #[arg(long, env = "LEADLINE_DATABASE_URL")]
        database: Option<String>,
    },
    /// Operators' own tokens for browser and API access: each acts under its name in the audit.
    Token {
        #[command(subcommand)]
        action: TokenAction,
        #[arg(long, env = "LEADLINE_CONFIG", global = true)]
        config: Option<PathBuf>,
        #[arg(long, env = "LEADLINE_DATABASE_URL", global = true)]
        database: Option<String>,
    },
    /// Check a configuration file and exit: prints the first problem, naming its key.
    CheckConfig {
        #[arg(long)]
        config: PathBuf,
    },
    /// Make the running `leadline serve` read its secrets again (the secrets file, SIGHUP): a renewed token
    /// takes effect without a restart, and leads waiting for it go on.
    Reload {
        #[arg(long, env = "LEADLINE_CONFIG")]
        config: Option<PathBuf>,
        #[arg(long, env = "LEADLINE_DATABASE_URL")]
        database: Option<String>,
    },
    /// Test a target's connection: one harmless authenticated request, and what is wrong in plain words.
    TestConnection {
        #[arg(long, env = "LEADLINE_CONFIG")]
        config: PathBuf,
        /// The target's name (`[targets.NAME]`).
        target: String,
    },
}

#[derive(Subcommand)]
enum TokenAction {
    /// Make a token for a person and print it once (with the browser link when the server's address is known).
    Create {
        /// Who uses it: a name or e-mail address, shown in every audit of what they do.
        name: String,
    },
    /// Revoke a person's token: it stops working at once, an open browser session included.
    Revoke { name: String },
    /// Every token: who, since when, revoked or not (never the tokens themselves).
    List,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| leadline::default_log_filter().into()),
        )
        // Logs go to stderr; stdout carries only what is meant for the person at the terminal (the browser link
        // with its token), so a log collector never receives the token.
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::CheckConfig { config }) => check_config(&config),
        Some(Command::TestConnection { config, target }) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
            .and_then(|rt| rt.block_on(test_connection(config, target))),
        Some(Command::Reload { config, database }) => reload(config, database),
        Some(Command::Token { action, config, database }) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
            .and_then(|rt| rt.block_on(token(action, config, database))),
        Some(Command::ResetToken { config, database }) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
            .and_then(|rt| rt.block_on(reset_token(config, database))),
        Some(Command::Serve { config, demo, listen, database, demo_rate }) => {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")
                .and_then(|rt| rt.block_on(serve(config, demo, listen, database, demo_rate)))
        }
        #[cfg(feature = "desktop")]
        None => leadline::desktop::host::start(cli.config, cli.hidden, cli.demo),
        #[cfg(not(feature = "desktop"))]
        None => {
            let _ = (cli.config, cli.hidden, cli.demo);
            eprintln!("leadline: built without the desktop window (feature `desktop`); run `leadline serve --demo`");
            Ok(())
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leadline: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve(
    config_path: Option<PathBuf>,
    demo_mode: bool,
    listen: Option<SocketAddr>,
    database: Option<String>,
    demo_rate: f64,
) -> anyhow::Result<()> {
    let mut crm = None;
    let mut whatsapp = None;
    let mut config = match (&config_path, demo_mode) {
        (Some(path), false) => Config::load(path)?,
        (None, true) => {
            let (mock, addr) = demo::mock_crm::MockCrm::start("127.0.0.1:0".parse()?).await?;
            demo::enter_schedule(&mock);
            tracing::info!(%addr, "demo: mock CRM started");
            // Printed for people and end-to-end tests who want to look at what the "CRM" received.
            println!("Demo CRM (mock HubSpot and the other demo endpoints): http://{addr}");
            crm = Some(mock);
            // First contacts go to the demo's own mock WhatsApp and Twilio.
            let (wa, _tw, contact) = demo::start_contact_mocks().await?;
            whatsapp = Some(wa);
            let db = format!("sqlite://{}", default_data_dir()?.join("leadline-demo.db").display());
            demo::demo_config(addr, contact, listen.unwrap_or("127.0.0.1:8787".parse()?), Some(db))
        }
        (Some(_), true) => anyhow::bail!("--demo runs its own configuration; leave out --config"),
        (None, false) => anyhow::bail!("nothing to run: pass --config FILE, or --demo to see Leadline on demo traffic"),
    };
    if let Some(l) = listen {
        config.server.listen = l;
    }
    if let Some(db) = database {
        config.database.url = Some(db);
    }
    let demo_running = crm.is_some();
    let pid_file = config.pid_file()?;
    // The demo started at a point of its schedule has been "listening" since its timeline began (see
    // `StartOptions::listened_before`); a real run listens from its start.
    let listened_before = if demo_running { demo::clock_offset() } else { Duration::ZERO };
    let server =
        Server::start_with(config, StartOptions { demo: demo_running, listened_before, ..Default::default() }).await?;
    // `leadline reload` finds this process here.
    if let Some(dir) = pid_file.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(&pid_file, format!("{}\n", std::process::id())) {
        tracing::warn!(file = %pid_file.display(), error = %e, "cannot write the pid file: `leadline reload` will not find this process");
    }
    // A real deployment shows its token once. The demo's throwaway database gets a fresh one at every start, so
    // the link below always works.
    let token = match (&server.new_token, demo_running) {
        (Some(t), _) => Some(t.clone()),
        (None, true) => Some(leadline::api::http::reset_token(&server.app.store, server.app.clock.now()).await?),
        (None, false) => None,
    };
    if let Some(token) = token {
        let note = if demo_running { "demo" } else { "shown once; `leadline reset-token` makes a new one" };
        println!("Browser access ({note}): http://{}/?token={token}", server.addr);
    }
    if let Some(wa) = &whatsapp {
        demo::connect_receipts(wa, server.addr);
    }
    if let Some(mock) = crm {
        demo::seed_history(&server.app.store, &server.app.config, server.app.clock.now(), demo_rate).await?;
        tokio::spawn(demo::run_schedule(mock.clone()));
        tokio::spawn(demo::run_traffic(server.addr, demo_rate, demo::PARTNER_SILENT_AT, mock));
        println!("Leadline demo running: open the link above in a browser. Ctrl-C to stop.");
    }
    leadline::server::shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = std::fs::remove_file(&pid_file);
    server.shutdown().await
}

/// Sends SIGHUP to the `leadline serve` of this configuration (its pid file): it reads its secrets again.
fn reload(config: Option<PathBuf>, database: Option<String>) -> anyhow::Result<()> {
    let mut c = match config {
        Some(p) => Config::load(&p)?,
        None => Config::default(),
    };
    if database.is_some() {
        c.database.url = database;
    }
    let pid_file = c.pid_file()?;
    let text = std::fs::read_to_string(&pid_file)
        .with_context(|| format!("no running `leadline serve` found ({} cannot be read)", pid_file.display()))?;
    let pid: i32 = text.trim().parse().with_context(|| format!("{} does not hold a process id", pid_file.display()))?;
    hang_up(pid).with_context(|| format!("cannot signal process {pid} (from {})", pid_file.display()))?;
    println!("asked leadline (process {pid}) to read its secrets again; its log says what each target did");
    Ok(())
}

#[cfg(unix)]
fn hang_up(pid: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) with a plain pid and signal number has no memory-safety preconditions.
    if unsafe { libc::kill(pid, libc::SIGHUP) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(unix))]
fn hang_up(_pid: i32) -> std::io::Result<()> {
    Err(std::io::Error::other("use the Reload secrets button in the app on this system"))
}

/// Runs every check `serve` runs before it starts (secrets, header values...), and warns about unsigned sources.
fn check_config(path: &std::path::Path) -> anyhow::Result<()> {
    let c = Config::load(path)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let warnings = runtime.block_on(async { leadline::server::preflight(&c) })?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    println!(
        "{}: ok ({} sources, {} targets, {} unsigned)",
        path.display(),
        c.sources.len(),
        c.targets.len(),
        warnings.len()
    );
    Ok(())
}

async fn test_connection(config: PathBuf, target: String) -> anyhow::Result<()> {
    let c = leadline::features::checks::load(&config)?;
    let tc = c.targets.get(&target).with_context(|| format!("{}: no target named `{target}`", config.display()))?;
    let runtime = leadline::delivery::worker::TargetRuntime::new(&target, tc, &c, leadline::clock::Clock::system())?;
    let check = runtime.check().await;
    println!("{target}: {}", check.message);
    if check.ok {
        Ok(())
    } else {
        anyhow::bail!("{target}: the connection check failed")
    }
}

/// The store of the server that `--config` / `--database` name (what `reset-token` and `token` work on).
async fn server_store(
    config: Option<PathBuf>,
    database: Option<String>,
) -> anyhow::Result<(Config, leadline::store::Store)> {
    let mut c = match config {
        Some(p) => Config::load(&p)?,
        None => Config::default(),
    };
    if database.is_some() {
        c.database.url = database;
    }
    let store = leadline::store::Store::open(&c.database_url()?).await?;
    Ok((c, store))
}

async fn token(action: TokenAction, config: Option<PathBuf>, database: Option<String>) -> anyhow::Result<()> {
    use leadline::api::tokens;
    let (c, store) = server_store(config, database).await?;
    let now = leadline::clock::Clock::system().now();
    match action {
        TokenAction::Create { name } => {
            let token = tokens::create(&store, &name, now).await?;
            println!("Token for {name} (shown once; `leadline token revoke {name}` ends it): {token}");
            let l = c.server.listen;
            let host = if l.ip().is_unspecified() { "<this server>".to_string() } else { l.ip().to_string() };
            println!("Browser link: http://{host}:{}/?token={token}", l.port());
        }
        TokenAction::Revoke { name } => {
            tokens::revoke(&store, &name, now).await?;
            println!("{name}'s token is revoked: it no longer works, an open browser session included.");
        }
        TokenAction::List => {
            let all = tokens::list(&store).await?;
            if all.is_empty() {
                println!("No tokens yet: `leadline serve` makes the browser token on its first start.");
            }
            for t in all {
                let state = match t.revoked_at {
                    Some(at) => format!("revoked {}", at.format("%Y-%m-%d %H:%M UTC")),
                    None => "works".to_string(),
                };
                let who = if t.name == "default" { "default (the browser token)".to_string() } else { t.name };
                println!("{who:<32} created {}  {state}", t.created_at.format("%Y-%m-%d %H:%M UTC"));
            }
        }
    }
    Ok(())
}

async fn reset_token(config: Option<PathBuf>, database: Option<String>) -> anyhow::Result<()> {
    let (_, store) = server_store(config, database).await?;
    let token = leadline::api::http::reset_token(&store, leadline::clock::Clock::system().now()).await?;
    println!("New browser token (the old one no longer works): {token}");
    Ok(())
}
