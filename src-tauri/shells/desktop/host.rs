//! The desktop app's engine process: Leadline running here (the ingest server, the worker, the monitor, the
//! database), its tray icon, its notifications and its native confirmations — and no web view. The window is a
//! program of its own (`leadline-window`, [`super::run_window`]), started when someone opens it and gone when they
//! close it; it reaches the engine through [`crate::shells::window::bridge`]. Nothing here calls Tauri, so the
//! `leadline` program does not link WebKitGTK.
//!
//! Why two processes: WebKitGTK's UI side (its libraries, a GL context, the page's IPC) stays in whatever process
//! once showed a web view, about 130 MiB of a desk's memory. A desk spends most of its day in the tray; with the
//! window apart, the process that stays is the engine alone (see the README's memory figures).
//!
//! No GTK either: the tray icon is a StatusNotifierItem spoken over D-Bus, notifications go over D-Bus, start at
//! login is an autostart entry (the platform parts [`crate::platform::tray`], [`crate::platform::notify`],
//! [`crate::platform::autostart`]), and a confirmation is a short-lived `leadline-window --ask` process showing the
//! native dialog ([`crate::platform::dialog`]). GTK, its fonts, its theme and its X connection cost the engine about
//! 12 MiB when it drew its own tray menu (`benches/desk_memory.sh`). This file is what the engine does with those
//! parts; how each speaks to the OS is in `platform/`.
//!
//! Threads: the engine, the tray's D-Bus service and the bridge on one tokio runtime; the main thread waits for
//! Quit ([`Host::quit`]); a confirmation asked from the engine waits (on a blocking thread) for its answer.

use std::io::{BufRead, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{json, Value};

use crate::config::Config;
use crate::demo;
use crate::features::monitor::glance::{self, Glance, GlanceLevel};
use crate::features::monitor::Notifier;
use crate::platform::autostart::Autostart;
use crate::platform::tray::{self, Tray};
use crate::shells::api::{self, Confirm};
use crate::shells::server::{Server, StartOptions};
use crate::shells::window::bridge::{self, Door, EngineSide};
use crate::shells::window::commands::{self, Context};

/// The app's identifier (`tauri.conf.json`): its data and configuration folders are named after it, the same ones
/// the window's process (Tauri) uses.
pub const IDENTIFIER: &str = "dev.leadline.desk";
/// What the engine process shares between its threads.
struct Host {
    rt: tokio::runtime::Handle,
    app: crate::features::app::App,
    confirm: Arc<dyn Confirm>,
    door: Door,
    /// The window's process while it runs: its standard input, where the places it should show are written.
    window: Mutex<Option<std::process::ChildStdin>>,
    autostart: Option<Autostart>,
    /// The state the tray icon shows (the last one given to it).
    in_tray: Mutex<Option<Glance>>,
    quitting: AtomicBool,
    /// Whether this run already said that closing the window leaves Leadline running (said once per run).
    told_about_tray: AtomicBool,
    /// Told when Leadline should end (Quit in the tray, SIGTERM / Ctrl-C); the main thread waits for it.
    quit: tokio::sync::Notify,
}

static HOST: OnceLock<Host> = OnceLock::new();
/// The tray icon, once it runs.
static TRAY: OnceLock<Tray> = OnceLock::new();

/// Whether a system tray shows Leadline's icon ([`Tray::shown`]). Stock GNOME has none without its AppIndicator
/// extension; there the window and its notification say how to reopen and how to quit Leadline without one.
fn tray_shown() -> bool {
    TRAY.get().is_some_and(Tray::shown)
}

/// `leadline` without a command: Leadline here in this process ([`run`]) when it runs here (`--config`, `--demo`,
/// the first start's choice, or a `leadline.toml` in the config folder); otherwise the first start's question or a
/// team desk, which are the window's program alone (`leadline-window --one-process`), put in this process's place.
pub fn start(config: Option<PathBuf>, hidden: bool, demo: bool) -> anyhow::Result<()> {
    let config_dir = dirs::config_dir().context("no platform config folder")?.join(IDENTIFIER);
    if crate::shells::desk::runs_here(&config_dir, config.is_some() || demo) {
        return run(config, hidden, demo);
    }
    use std::os::unix::process::CommandExt;
    let mut window = std::process::Command::new(sibling(WINDOW_PROGRAM)?);
    window.arg("--one-process");
    if hidden {
        window.arg(super::tray::HIDDEN_ARG);
    }
    Err(anyhow::Error::new(window.exec()).context("cannot start leadline-window"))
}

/// The window's program, installed beside `leadline`.
pub const WINDOW_PROGRAM: &str = "leadline-window";

/// A program installed beside this one.
pub fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find Leadline's own program")?;
    let path = exe.with_file_name(name);
    anyhow::ensure!(path.exists(), "{} is missing: it is installed beside {}", path.display(), exe.display());
    Ok(path)
}

/// Runs Leadline here with its tray, and opens the window unless `hidden`. Returns when someone quits (from the
/// tray, or SIGTERM / Ctrl-C), after the worker has finished or released the deliveries in flight.
pub fn run(config: Option<PathBuf>, hidden: bool, demo: bool) -> anyhow::Result<()> {
    commands::LAUNCHED.get_or_init(std::time::Instant::now);
    let data_dir = dirs::data_dir().context("no platform data folder")?.join(IDENTIFIER);
    let config_dir = dirs::config_dir().context("no platform config folder")?.join(IDENTIFIER);
    std::fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
    // One Leadline per user: a second start asks the running one to open its window, and ends.
    let socket_path = doorbell(&data_dir);
    if let Ok(mut running) = UnixStream::connect(&socket_path) {
        writeln!(running, "open").context("cannot reach the running Leadline")?;
        tracing::info!("Leadline already runs: its window opens");
        return Ok(());
    }
    let _ = std::fs::remove_file(&socket_path);
    // A socket's path has a length limit (108 bytes): a data folder deep enough to pass it runs without the guard.
    let doorbell = UnixListener::bind(&socket_path)
        .map_err(|e| tracing::warn!(error = %e, path = %socket_path.display(), "a second start cannot find this one"))
        .ok();

    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let server = rt.block_on(start_engine(&data_dir, &config_dir, config, demo, Arc::new(DeskNotifier)))?;
    let app = server.app.clone();
    // Every confirmation is asked of a person: no variable, flag or file answers it (tests/architecture.rs).
    let confirm: Arc<dyn Confirm> = Arc::new(DialogConfirm);
    let autostart = std::env::current_exe()
        .map_err(|e| e.to_string())
        .and_then(|program| Autostart::new(super::APP_NAME, &program, &[super::tray::HIDDEN_ARG]))
        .map_err(|e| tracing::warn!(error = %e, "start at login is not available"))
        .ok();
    let cx = Context { app: app.clone(), confirm: confirm.clone(), actor: commands::os_user() };
    let door = rt.block_on(bridge::open(cx, Arc::new(Engine)))?;
    let host = Host {
        rt: rt.handle().clone(),
        app: app.clone(),
        confirm,
        door,
        window: Mutex::new(None),
        autostart,
        in_tray: Mutex::new(None),
        quitting: AtomicBool::new(false),
        told_about_tray: AtomicBool::new(false),
        quit: tokio::sync::Notify::new(),
    };
    if HOST.set(host).is_err() {
        anyhow::bail!("the engine process started twice");
    }
    rt.block_on(start_tray());
    rt.spawn(follow_in_tray(app.clone()));
    std::thread::spawn(move || {
        for visitor in doorbell.iter().flat_map(|d| d.incoming()).flatten() {
            let mut line = String::new();
            let _ = std::io::BufReader::new(visitor).read_line(&mut line);
            tracing::info!("Leadline was started again: its window opens");
            open_window(None);
        }
    });
    // SIGTERM / Ctrl-C end the app like Quit, without asking.
    rt.spawn(async {
        crate::shells::server::shutdown_signal().await;
        end_main();
    });
    if hidden {
        tracing::info!("started hidden: Leadline is in the tray, its window made when opened");
    } else {
        open_window(None);
    }
    if let Some(host) = HOST.get() {
        rt.block_on(host.quit.notified());
    }

    // Quitting: the window goes (its process ends when its input closes), then the worker finishes or releases
    // what is in flight.
    if let Some(host) = HOST.get() {
        host.quitting.store(true, Ordering::SeqCst);
        host.window.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
    if let Some(tray) = TRAY.get() {
        rt.block_on(tray.shutdown());
    }
    let stopped = rt.block_on(server.shutdown());
    let _ = std::fs::remove_file(&socket_path);
    if let Err(e) = &stopped {
        tracing::error!(error = %format!("{e:#}"), "unclean shutdown");
    }
    stopped
}

/// The native confirmation dialog: a GTK dialog shown by the window's program (`leadline-window --ask`), a
/// process of its own that ends with the answer, so that this one never loads GTK; the asking thread waits.
struct DialogConfirm;

impl Confirm for DialogConfirm {
    fn confirm(&self, title: &str, message: &str) -> bool {
        // Logged, so the desktop tests can check the wording of the dialog they answer.
        tracing::info!(title, text = message, "asking for confirmation");
        let answer = sibling(WINDOW_PROGRAM).and_then(|program| {
            let status = std::process::Command::new(program)
                .args([super::ASK_ARG, title, message])
                .stdin(std::process::Stdio::null())
                .status()
                .context("cannot show the confirmation dialog")?;
            match status.code() {
                Some(0) => Ok(true),
                Some(1) => Ok(false),
                _ => anyhow::bail!("the confirmation dialog failed ({status})"),
            }
        });
        let yes = answer.unwrap_or_else(|e| {
            tracing::error!(error = %format!("{e:#}"), title, "no confirmation could be asked: taken as Cancel");
            false
        });
        tracing::info!(title, yes, "confirmation answered");
        yes
    }
}

/// Alerts as desktop notifications (the notification service over D-Bus); one with a place opens the window there
/// when clicked.
struct DeskNotifier;

impl Notifier for DeskNotifier {
    fn notify(&self, title: &str, body: &str) {
        notify(title, body, None);
    }

    fn notify_at(&self, title: &str, body: &str, place: &crate::model::Place) {
        notify(title, body, serde_json::to_value(place).ok());
    }
}

fn notify(title: &str, body: &str, place: Option<Value>) {
    let on_click = place.map(|place| -> Box<dyn FnOnce() + Send> {
        Box::new(move || {
            tracing::info!(place = %place, "notification clicked: window opened");
            open_window(Some(place));
        })
    });
    crate::platform::notify::show(super::APP_NAME, title, body, on_click);
}

/// Opens the window (its process, started when none runs) on `place` if given.
fn open_window(place: Option<Value>) {
    let Some(host) = HOST.get() else { return };
    if host.quitting.load(Ordering::SeqCst) {
        return;
    }
    let line = json!({ "place": place }).to_string();
    let mut window = host.window.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(input) = window.as_mut() {
        if writeln!(input, "{line}").is_ok() {
            return;
        }
    }
    match start_window(host, &line) {
        Ok(input) => *window = Some(input),
        Err(e) => tracing::error!(error = %format!("{e:#}"), "cannot open the window"),
    }
}

/// Starts the window's process and tells it where to open; a thread waits for it to end (the window closed).
fn start_window(host: &Host, first: &str) -> anyhow::Result<std::process::ChildStdin> {
    let mut command = std::process::Command::new(sibling(WINDOW_PROGRAM)?);
    command
        .env(bridge::ENV_URL, &host.door.url)
        .env(bridge::ENV_SECRET, &host.door.secret)
        .stdin(std::process::Stdio::piped());
    *commands::WINDOW_MADE.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
    let mut child = command.spawn().context("cannot start the window's process")?;
    let mut input = child.stdin.take().context("the window's process has no input")?;
    writeln!(input, "{first}")?;
    let pid = child.id();
    tracing::info!(pid, "window made: its process starts");
    std::thread::spawn(move || {
        let status = child.wait();
        let Some(host) = HOST.get() else { return };
        tracing::info!(pid, status = ?status.ok().and_then(|s| s.code()), "the window's process ended");
        if host.quitting.load(Ordering::SeqCst) {
            return;
        }
        // The window that ended is the one held (a newer one would have replaced it only after this one ended).
        host.window.lock().unwrap_or_else(|e| e.into_inner()).take();
        if !host.told_about_tray.swap(true, Ordering::SeqCst) {
            notify("Leadline is still running", still_running_text(tray_shown()), None);
        }
    });
    Ok(input)
}

/// What the first close of the window says: that delivery goes on, and how to come back and to quit — from the
/// tray's icon, or without a tray (no icon on this desktop) by starting Leadline again and from Settings.
fn still_running_text(tray_shown: bool) -> &'static str {
    if tray_shown {
        "Leads keep being delivered while the window is closed. Open it or quit from Leadline's icon in the tray."
    } else {
        "Leads keep being delivered while the window is closed. This desktop shows no tray icons: start Leadline \
         again to open its window, and quit it from its Settings page."
    }
}

/// The engine's answers to the window that are not the queue's: start at login (the tray's check mark), whether
/// a tray shows the icon, and *Quit Leadline…* from the window.
struct Engine;

impl EngineSide for Engine {
    fn autostart(&self) -> bool {
        autostart_enabled()
    }

    fn set_autostart(&self, on: bool) -> Result<bool, String> {
        set_autostart(on)
    }

    fn tray_shown(&self) -> bool {
        tray_shown()
    }

    fn quit(&self) -> futures_util::future::BoxFuture<'static, bool> {
        Box::pin(ask_to_quit("the window"))
    }
}

fn autostart_enabled() -> bool {
    HOST.get().and_then(|h| h.autostart.as_ref()).is_some_and(Autostart::is_enabled)
}

/// Turns start at login on or off (the tray's item, the settings page's switch); the check mark follows.
fn set_autostart(on: bool) -> Result<bool, String> {
    let launcher = HOST
        .get()
        .and_then(|h| h.autostart.as_ref())
        .ok_or_else(|| "start at login is not available on this computer".to_string())?;
    let now = launcher.set(on)?;
    if let (Some(host), Some(tray)) = (HOST.get(), TRAY.get()) {
        host.rt.spawn(tray.set_autostart(now));
    }
    Ok(now)
}

/// What the tray's icon and menu do: each runs on the runtime, so that the tray's service does not wait.
struct TrayActions;

impl tray::Actions for TrayActions {
    fn open(&self) {
        in_background(|| open_window(None));
    }

    fn set_autostart(&self, on: bool) {
        in_background(move || {
            if let Err(e) = set_autostart(on) {
                tracing::warn!(error = %e, "cannot change start at login");
            }
        });
    }

    fn quit(&self) {
        quit();
    }
}

/// Runs `f` on the runtime's blocking threads.
fn in_background(f: impl FnOnce() + Send + 'static) {
    if let Some(host) = HOST.get() {
        host.rt.spawn_blocking(f);
    }
}

/// What the tray shows for a state of the queue (`None`: not known yet, while Leadline starts): the drawn icon,
/// the menu's first line with the counts, the tooltip.
fn tray_look(shown: Option<&Glance>) -> tray::Look {
    let level = shown.map_or(GlanceLevel::Waiting, |g| g.level);
    let (status, tooltip) = match shown {
        Some(g) => (format!("Leadline — {}", g.headline), g.tooltip()),
        None => ("Leadline — starting…".to_string(), "Leadline — starting…".to_string()),
    };
    tray::Look { rgba: glance::icon_rgba(level, tray::ICON_SIZE), status, tooltip }
}

/// Starts the tray icon. Without a system tray (none yet at login, or none at all) Leadline runs on, and the icon
/// registers when a tray appears.
async fn start_tray() {
    match Tray::start(tray_look(None), autostart_enabled(), Arc::new(TrayActions)).await {
        Ok(tray) => {
            let _ = TRAY.set(tray);
        }
        Err(e) => tracing::warn!(error = %e, "no tray icon"),
    }
}

/// Shows a state in the tray (only what changed: a panel redraws the icon on every change).
async fn show_glance(g: Glance) {
    let (Some(host), Some(tray)) = (HOST.get(), TRAY.get()) else { return };
    let look = {
        let mut in_tray = host.in_tray.lock().unwrap_or_else(|e| e.into_inner());
        if in_tray.as_ref() == Some(&g) {
            return;
        }
        tracing::info!(state = g.level.as_str(), headline = %g.headline, "tray shows");
        let look = tray_look(Some(&g));
        *in_tray = Some(g);
        look
    };
    tray.show(look).await;
}

/// Keeps the tray icon on the state of the queue: once now, then at every health update of the live feed.
async fn follow_in_tray(app: crate::features::app::App) {
    let mut live = app.live.subscribe();
    if let Ok(h) = api::health(&app).await {
        show_glance(glance::glance(&h)).await;
    }
    loop {
        match live.recv().await {
            Ok(crate::features::app::LiveEvent::Health(h)) => show_glance(glance::glance(&h)).await,
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => break,
        }
    }
}

/// *Quit Leadline…* in the tray: asked on the runtime, so that the tray's D-Bus service does not wait.
fn quit() {
    if let Some(host) = HOST.get() {
        host.rt.spawn(ask_to_quit("the tray"));
    }
}

/// Asks whether to quit (what is in flight, what waits) and, if so, lets the main thread go on: [`run`] then lets
/// in-flight deliveries finish before the process ends. `from` names where it was asked, for the log.
async fn ask_to_quit(from: &'static str) -> bool {
    let Some(host) = HOST.get() else { return false };
    let (app, confirm) = (host.app.clone(), host.confirm.clone());
    let grace = app.config.worker.shutdown_grace_seconds;
    let question = match api::health(&app).await {
        Ok(h) => glance::quit_question(&h, grace),
        Err(e) => format!("Leadline cannot read its queue ({e}). Quit anyway? Deliveries in flight finish first."),
    };
    let yes = tokio::task::spawn_blocking(move || confirm.confirm("Quit Leadline", &question)).await.unwrap_or(false);
    if yes {
        tracing::info!("quitting from {from}: deliveries in flight finish first");
        end_main();
    }
    yes
}

/// Lets the main thread, waiting in [`run`], go on to the shutdown.
fn end_main() {
    if let Some(host) = HOST.get() {
        host.quit.notify_one();
    }
}

/// Where a running Leadline listens for a second start (which asks it to open its window, and ends).
fn doorbell(data_dir: &Path) -> PathBuf {
    data_dir.join("desk.sock")
}

/// Starts Leadline here: the configuration (`config_path`, else `leadline.toml` in `config_dir`, else the demo with
/// its mock CRM), the ingest server, the worker and the monitor, the database in `data_dir` unless configured.
pub async fn start_engine(
    data_dir: &Path,
    config_dir: &Path,
    config_path: Option<PathBuf>,
    demo: bool,
    notifier: Arc<dyn Notifier>,
) -> anyhow::Result<Server> {
    let path =
        if demo { None } else { config_path.or_else(|| Some(config_dir.join("leadline.toml")).filter(|p| p.exists())) };
    let mut whatsapp = None;
    let (config, demo_crm) = match path {
        Some(p) => {
            let mut c = Config::load(&p)?;
            if c.database.url.is_none() {
                c.database.url = Some(format!("sqlite://{}", data_dir.join("leadline.db").display()));
            }
            (c, None)
        }
        None => {
            let (crm, addr) = demo::mock_crm::MockCrm::start("127.0.0.1:0".parse()?).await?;
            demo::enter_schedule(&crm);
            tracing::info!(%addr, "demo CRM listening");
            // First contacts go to the demo's own mock WhatsApp and Twilio.
            let (wa, _tw, contact) = demo::start_contact_mocks().await?;
            whatsapp = Some(wa);
            let db = format!("sqlite://{}", data_dir.join("leadline-demo.db").display());
            (demo::demo_config(addr, contact, "127.0.0.1:0".parse()?, Some(db)), Some(crm))
        }
    };
    // The demo started at a point of its schedule has been "listening" since its timeline began (see
    // `StartOptions::listened_before`); a real configuration listens from its start.
    let listened_before = if demo_crm.is_some() { demo::clock_offset() } else { Duration::ZERO };
    let options = StartOptions { demo: demo_crm.is_some(), notifier, listened_before, ..Default::default() };
    let server = Server::start_with(config, options).await?;
    if let Some(wa) = &whatsapp {
        demo::connect_receipts(wa, server.addr);
    }
    if let Some(crm) = demo_crm {
        demo::seed_history(&server.app.store, &server.app.config, server.app.clock.now(), 60.0).await?;
        tokio::spawn(demo::run_schedule(crm.clone()));
        tokio::spawn(demo::run_traffic(server.addr, 60.0, demo::PARTNER_SILENT_AT, crm));
    }
    Ok(server)
}
