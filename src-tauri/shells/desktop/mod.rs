//! The desktop shell (feature `desktop`): a Tauri 2 window over the same [`crate::shells::api`] the HTTP server uses.
//!
//! `leadline` with no arguments opens the window; the ingest server, the worker and the monitor run inside
//! the app on the embedded SQLite database in the app's data folder. Configuration comes from `--config` /
//! `LEADLINE_CONFIG`, else `leadline.toml` in the app's config folder; with none, the app runs the demo and the
//! UI says so in a banner. Commands here only adapt [`crate::shells::api`]; replay confirmation is a native dialog
//! (`tauri-plugin-dialog`), alerts become desktop notifications (`tauri-plugin-notification`).
//!
//! Closing the window releases it with its web page (WebKit's web process ends; [`tray::open_window`] makes it
//! anew): delivery goes on, and the tray icon ([`tray`]) shows the state and is the way to quit (which lets
//! in-flight deliveries finish).

mod desk;
mod tray;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tauri::{Emitter, Manager, RunEvent};
use tauri_plugin_dialog::{DialogExt, MessageDialogButtons, MessageDialogKind};
use tauri_plugin_notification::NotificationExt;

use crate::config::Config;
use crate::demo;
use crate::features::dlq::DeadLetterFilter;
use crate::features::monitor::alerts::Alert;
use crate::features::monitor::metrics::MetricSeries;
use crate::features::monitor::Notifier;
use crate::features::replay::{ReplayPreview, ReplayProgress, ReplayReceipt, ReplaySelection};
use crate::shells::api::{
    self, App, Confirm, DeadLetterList, DeadLetterView, HealthView, ScriptedConfirm, Session, TargetView,
};
use crate::shells::server::{Server, StartOptions};

type CommandResult<T> = Result<T, api::ApiError>;

/// When the process started, to report how long the first overview took.
static LAUNCHED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
static FIRST_HEALTH: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
/// Whether this run already said that closing the window leaves Leadline running (said once per run).
static TOLD_ABOUT_TRAY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What the commands reach through Tauri's managed state.
struct Desktop {
    app: App,
    server: Mutex<Option<Server>>,
    confirm: Arc<dyn Confirm>,
    /// Who acts, for the audit: the OS user.
    actor: String,
}

/// Alerts as desktop notifications: one per incident (an alert is announced only when it opens).
struct DesktopNotifier(tauri::AppHandle);

impl Notifier for DesktopNotifier {
    fn notify(&self, title: &str, body: &str) {
        if let Err(e) = self.0.notification().builder().title(title).body(body).show() {
            tracing::warn!(error = %e, "cannot show a desktop notification");
        }
    }

    /// The place travels with the notification: a click on it opens the window there ([`open_clicked_place`]).
    fn notify_at(&self, title: &str, body: &str, place: &crate::model::Place) {
        static NEXT_ID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let shown = self.0.notification().builder().id(id).title(title).body(body).extra("place", place).show();
        if let Err(e) = shown {
            tracing::warn!(error = %e, "cannot show a desktop notification");
        }
    }
}

/// A click on a notification (`tap`): the window comes back, on the place the notification was about (the UI
/// follows the `open-place` event; a notification without a place just opens the window).
fn open_clicked_place(app: &tauri::AppHandle, performed: &tauri_plugin_notification::ActionPerformed) {
    if performed.action_id() != "tap" {
        return;
    }
    let place = performed.notification().and_then(|n| n.extra().get("place").cloned());
    tracing::info!(place = %place.as_ref().map_or("none".into(), |p| p.to_string()), "notification clicked: window opened");
    tray::open_window(app, place);
}

/// Where a clicked notification opens the window, handed to its page: sent as `open-place` to a page that listens,
/// kept for a page that does not yet (a window just made, its page loading) until it asks ([`take_place`]).
#[derive(Default)]
pub(crate) struct PendingPlace(pub Mutex<PlaceHandOff>);

#[derive(Default)]
pub(crate) struct PlaceHandOff {
    pub place: Option<serde_json::Value>,
    /// Whether the window's page listens for `open-place` (it says so by asking for its place).
    pub page_listens: bool,
}

/// The native confirmation dialog.
struct DialogConfirm(tauri::AppHandle);

impl Confirm for DialogConfirm {
    fn confirm(&self, title: &str, message: &str) -> bool {
        // Logged, so the desktop smoke test can check the wording of the dialog it answers.
        tracing::info!(title, text = message, "asking for confirmation");
        // The button says what it does: the title's verb ("Replay", "Resolve", "Fix"), not "Replay" for all.
        let verb = title.split_whitespace().next().unwrap_or("OK").to_string();
        let yes = self
            .0
            .dialog()
            .message(message)
            .title(title)
            .kind(MessageDialogKind::Warning)
            .buttons(MessageDialogButtons::OkCancelCustom(verb, "Cancel".into()))
            .blocking_show();
        tracing::info!(title, yes, "confirmation answered");
        yes
    }
}

fn os_user() -> String {
    let name = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into());
    format!("desktop user `{name}`")
}

/// The confirmation the desktop asks for: the native dialog (tests script it with `LEADLINE_CONFIRM`, since
/// native dialogs cannot be clicked by WebDriver).
fn confirmer(handle: &tauri::AppHandle) -> Arc<dyn Confirm> {
    match std::env::var("LEADLINE_CONFIRM").as_deref() {
        Ok("yes") => Arc::new(ScriptedConfirm::always(true)),
        Ok("no") => Arc::new(ScriptedConfirm::always(false)),
        _ => Arc::new(DialogConfirm(handle.clone())),
    }
}

/// Runs Leadline here (the worker, the ingest server, the database) and hands it to the commands and the tray.
async fn start_here(handle: &tauri::AppHandle, config_path: Option<PathBuf>, demo: bool) -> anyhow::Result<()> {
    let desktop = start(handle.clone(), config_path, demo).await?;
    let live = desktop.app.live.subscribe();
    let core = desktop.app.clone();
    handle.manage(desktop);
    let tray = handle.state::<Arc<tray::Tray>>().inner().clone();
    tauri::async_runtime::spawn(follow_in_tray(core, live, tray));
    Ok(())
}

async fn start(handle: tauri::AppHandle, config_path: Option<PathBuf>, demo: bool) -> anyhow::Result<Desktop> {
    let data_dir = handle.path().app_data_dir().context("no app data folder")?;
    let config_dir = handle.path().app_config_dir().context("no app config folder")?;
    let path =
        if demo { None } else { config_path.or_else(|| Some(config_dir.join("leadline.toml")).filter(|p| p.exists())) };
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
            let db = format!("sqlite://{}", data_dir.join("leadline-demo.db").display());
            (demo::demo_config(addr, "127.0.0.1:0".parse()?, Some(db)), Some(crm))
        }
    };
    let notifier = Arc::new(DesktopNotifier(handle.clone()));
    // The demo started at a point of its schedule has been "listening" since its timeline began (see
    // `StartOptions::listened_before`); a real configuration listens from its start.
    let listened_before = if demo_crm.is_some() { demo::clock_offset() } else { Duration::ZERO };
    let options = StartOptions { demo: demo_crm.is_some(), notifier, listened_before, ..Default::default() };
    let server = Server::start_with(config, options).await?;
    if let Some(crm) = demo_crm {
        demo::seed_history(&server.app.store, &server.app.config, server.app.clock.now(), 60.0).await?;
        tokio::spawn(demo::run_schedule(crm.clone()));
        tokio::spawn(demo::run_traffic(server.addr, 60.0, demo::PARTNER_SILENT_AT, crm));
    }
    // Live events to the window.
    let mut live = server.app.live.subscribe();
    let emitter = handle.clone();
    tokio::spawn(async move {
        loop {
            match live.recv().await {
                Ok(e) => {
                    let _ = emitter.emit("live", &e);
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => break,
            }
        }
    });
    let confirm = confirmer(&handle);
    Ok(Desktop { app: server.app.clone(), server: Mutex::new(Some(server)), confirm, actor: os_user() })
}

/// Opens the window (or only the tray icon when `hidden`). `config` is `--config` (or `LEADLINE_CONFIG`); with it
/// or with `demo`, Leadline runs here; otherwise the first start's choice decides ([`desk::decide`]): run here,
/// or be a desk of a team server.
pub fn run(config: Option<PathBuf>, hidden: bool, demo: bool) -> anyhow::Result<()> {
    LAUNCHED.get_or_init(std::time::Instant::now);
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| tray::show_window(app)))
        .plugin(tauri_plugin_autostart::init(
            tauri_plugin_autostart::MacosLauncher::LaunchAgent,
            Some(vec![tray::HIDDEN_ARG]),
        ))
        .plugin(tauri_plugin_window_state::Builder::default().build())
        .plugin(tauri_plugin_dialog::init())
        .plugin(tauri_plugin_notification::init())
        .manage(PendingPlace::default())
        .setup(move |app| {
            let handle = app.handle().clone();
            let tray = tray::Tray::build(app.handle())?;
            app.manage(tray.clone());
            let config_dir = handle.path().app_config_dir()?;
            let mode = desk::decide(&config_dir, config.is_some() || demo);
            let feed = desk::Feed::default();
            match &mode {
                desk::Mode::Here => tauri::async_runtime::block_on(start_here(&handle, config.clone(), demo))
                    .map_err(|e| -> Box<dyn std::error::Error> { format!("{e:#}").into() })?,
                desk::Mode::Team(link) => desk::follow(&handle, link.clone(), tray.clone(), feed.clone()),
                desk::Mode::Choose { problem, .. } => {
                    tracing::info!(problem = problem.as_deref().unwrap_or("first start"), "asking how to run");
                }
            }
            // Started at login with nothing chosen yet (the choice file was removed): the question needs the window.
            let asking = matches!(mode, desk::Mode::Choose { .. });
            app.manage(desk::DeskState { mode: Mutex::new(mode), config_dir, feed });
            let opener = app.handle().clone();
            app.notification().on_action(move |performed| open_clicked_place(&opener, performed))?;
            // The window is made here, not by the configuration (`create: false`): started hidden, no page is
            // loaded until someone opens it.
            if hidden && !asking {
                tracing::info!("started hidden: Leadline is in the tray, its window made when opened");
            } else {
                tray::show_window(app.handle());
            }
            // SIGTERM / Ctrl-C close the app the same way as its window: through the Exit event below.
            let exit = app.handle().clone();
            tauri::async_runtime::spawn(async move {
                crate::shells::server::shutdown_signal().await;
                exit.exit(0);
            });
            Ok(())
        })
        .on_window_event(|window, event| {
            // Closing the window releases it and its page (WebKit's web process ends with it): the worker and the
            // ingest server go on, the tray stays (quit from there), and opening makes the window anew. A desk
            // that spends its day in the tray holds no web page (see `RunEvent::ExitRequested` below).
            if let tauri::WindowEvent::CloseRequested { .. } = event {
                tracing::info!("window closed: released, delivery goes on in the tray");
                if !TOLD_ABOUT_TRAY.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    let desk = window.app_handle().try_state::<desk::DeskState>().is_some_and(|d| d.is_team());
                    let body = if desk {
                        "The team server goes on delivering, and this desk still raises its alerts while the \
                         window is closed. Open it or quit from Leadline's icon in the tray."
                    } else {
                        "Leads keep being delivered while the window is closed. Open it or quit from \
                         Leadline's icon in the tray."
                    };
                    DesktopNotifier(window.app_handle().clone()).notify("Leadline is still running", body);
                }
            }
        })
        .invoke_handler(tauri::generate_handler![
            session,
            health,
            metrics,
            sources,
            reconcile_now,
            figures,
            dead_letters,
            dead_letter,
            reveal_dead_letter,
            find_leads,
            lead_story,
            reveal_lead,
            replay_preview,
            replay,
            replay_progress,
            replays,
            replay_report,
            control_replay,
            dead_letter_groups,
            resolve_dead_letters,
            fix_dead_letters,
            fix_and_replay_preview,
            fix_and_replay,
            export_dead_letters,
            export_replay_report,
            edit_dead_letter,
            alerts,
            acknowledge_alert,
            alert_channels,
            targets,
            set_target_paused,
            target_preview,
            check_target,
            reload_secrets,
            settings,
            save_settings,
            store_secret,
            autostart,
            set_autostart,
            take_place,
            desk::desk_view,
            desk::choose_here,
            desk::connect_team,
            desk::desk_call,
            desk::desk_export,
            desk::leave_team,
        ])
        .build(tauri::generate_context!())
        .map_err(|e| anyhow::anyhow!("the desktop app could not start: {e}"))?;
    app.run(|handle, event| {
        // The last window closing asks the app to exit (no code): Leadline stays in the tray instead. Quit and
        // SIGTERM exit with a code and go through.
        if let RunEvent::ExitRequested { code: None, api, .. } = &event {
            api.prevent_exit();
            return;
        }
        if let RunEvent::Exit = event {
            // A clean shutdown: the worker finishes or releases in-flight jobs before the process ends.
            if let Some(desktop) = handle.try_state::<Desktop>() {
                let server = desktop.server.lock().ok().and_then(|mut s| s.take());
                if let Some(server) = server {
                    if let Err(e) = tauri::async_runtime::block_on(server.shutdown()) {
                        tracing::error!(error = %format!("{e:#}"), "unclean shutdown");
                    }
                }
            }
        }
    });
    Ok(())
}

/// Keeps the tray icon on the state of the queue: once now, then at every health update of the live feed.
async fn follow_in_tray(
    app: App,
    mut live: tokio::sync::broadcast::Receiver<crate::runtime::LiveEvent>,
    tray: Arc<tray::Tray>,
) {
    if let Ok(h) = api::health(&app).await {
        tray.show(&h);
    }
    loop {
        match live.recv().await {
            Ok(crate::runtime::LiveEvent::Health(h)) => tray.show(&h),
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => break,
        }
    }
}

type S<'a> = tauri::State<'a, Desktop>;

#[tauri::command]
fn session(state: S<'_>) -> Session {
    api::session(&state.app, &state.actor)
}

#[tauri::command]
async fn health(state: S<'_>) -> CommandResult<HealthView> {
    let health = api::health(&state.app).await;
    if FIRST_HEALTH.swap(false, std::sync::atomic::Ordering::SeqCst) {
        let ms = LAUNCHED.get().map_or(0, |t| t.elapsed().as_millis());
        tracing::info!(ms, "first overview request {ms} ms after launch");
    }
    // How long a window made anew (after it was closed) takes to ask for its overview: what releasing it costs.
    if let Some(made) = tray::WINDOW_MADE.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let ms = made.elapsed().as_millis();
        tracing::info!(ms, "the window's overview asked {ms} ms after the window was made");
    }
    health
}

#[tauri::command]
async fn metrics(state: S<'_>, range: String) -> CommandResult<MetricSeries> {
    api::metrics(&state.app, &range).await
}

#[tauri::command]
async fn sources(state: S<'_>) -> CommandResult<Vec<api::SourceView>> {
    api::sources(&state.app).await
}

#[tauri::command]
async fn reconcile_now(state: S<'_>, source: String) -> CommandResult<crate::features::reconcile::ReconciliationRun> {
    api::reconcile_now(&state.app, &source).await
}

#[tauri::command]
async fn figures(state: S<'_>, range: String) -> CommandResult<crate::features::figures::DeliveryFigures> {
    api::figures(&state.app, &range).await
}

#[tauri::command]
async fn dead_letters(state: S<'_>, filter: DeadLetterFilter) -> CommandResult<DeadLetterList> {
    api::dead_letters(&state.app, &filter).await
}

#[tauri::command]
async fn dead_letter(state: S<'_>, id: i64) -> CommandResult<DeadLetterView> {
    api::dead_letter(&state.app, id).await
}

#[tauri::command]
async fn replay_preview(state: S<'_>, selection: ReplaySelection) -> CommandResult<ReplayPreview> {
    api::replay_preview(&state.app, &selection).await
}

/// Replays after a native confirmation dialog that states how many leads go to which target.
#[tauri::command]
async fn replay(
    state: S<'_>,
    selection: ReplaySelection,
    reason: String,
    options: Option<crate::features::replay::ReplayOptions>,
) -> CommandResult<ReplayReceipt> {
    let options = options.unwrap_or_default();
    api::replay_confirmed(&state.app, &selection, &reason, &options, &state.actor, state.confirm.clone()).await
}

#[tauri::command]
async fn replays(state: S<'_>) -> CommandResult<Vec<ReplayProgress>> {
    api::replays(&state.app).await
}

#[tauri::command]
async fn replay_report(
    state: S<'_>,
    id: i64,
    outcome: Option<String>,
) -> CommandResult<Vec<crate::features::replay::ReplayReportItem>> {
    api::replay_report(&state.app, id, outcome.as_deref()).await
}

#[tauri::command]
async fn control_replay(state: S<'_>, id: i64, action: String) -> CommandResult<ReplayProgress> {
    api::control_replay(&state.app, id, &action, &state.actor).await
}

#[tauri::command]
async fn dead_letter_groups(
    state: S<'_>,
    filter: DeadLetterFilter,
) -> CommandResult<Vec<crate::features::dlq::DeadLetterGroup>> {
    api::dead_letter_groups(&state.app, &filter).await
}

/// Discarding or marking fixed is confirmed in a native dialog, like a replay.
#[tauri::command]
async fn resolve_dead_letters(state: S<'_>, request: api::ResolveRequest) -> CommandResult<i64> {
    let n = request.expected.map(|n| n.to_string()).unwrap_or_else(|| "the selected".into());
    let what =
        if request.resolution == crate::store::Resolution::Discarded { "Discard" } else { "Mark as fixed by hand" };
    api::ask(
        state.confirm.clone(),
        "Resolve dead letters",
        format!("{what}: {n} dead letters? They leave the list and are not sent. Note: {}", request.note.trim()),
    )
    .await?;
    api::resolve_dead_letters(&state.app, &request, &state.actor).await
}

/// Applying a field fix is confirmed in a native dialog; a dry run is not.
#[tauri::command]
async fn fix_dead_letters(
    state: S<'_>,
    request: api::FixRequest,
) -> CommandResult<crate::features::replay::fix::FixReport> {
    if !request.dry_run {
        let preview =
            api::fix_dead_letters(&state.app, &api::FixRequest { dry_run: true, ..request.clone() }, &state.actor)
                .await?;
        api::ask(
            state.confirm.clone(),
            "Fix lead data",
            format!(
                "Change `{}` in {} leads? The original data is kept in each lead's history.",
                request.fix.field, preview.changed
            ),
        )
        .await?;
    }
    api::fix_dead_letters(&state.app, &request, &state.actor).await
}

#[tauri::command]
async fn fix_and_replay_preview(
    state: S<'_>,
    selection: ReplaySelection,
    fix: crate::features::replay::fix::FieldFix,
) -> CommandResult<api::FixAndReplayPreview> {
    api::fix_and_replay_preview(&state.app, &selection, &fix, &state.actor).await
}

/// Fixing and replaying is one act, confirmed once in a native dialog that states both.
#[tauri::command]
async fn fix_and_replay(state: S<'_>, request: api::FixAndReplayRequest) -> CommandResult<api::FixAndReplayReceipt> {
    api::fix_and_replay_confirmed(&state.app, &request, &state.actor, state.confirm.clone()).await
}

/// Asks where to save `what` (a native save dialog) and writes `body` there; `None` when the person cancelled.
async fn save_csv(handle: tauri::AppHandle, name: String, body: String) -> CommandResult<Option<String>> {
    let chosen = tauri::async_runtime::spawn_blocking(move || {
        handle.dialog().file().set_file_name(&name).add_filter("CSV", &["csv"]).blocking_save_file()
    })
    .await
    .map_err(|e| api::ApiError::Internal(format!("the save dialog failed: {e}")))?;
    let Some(path) = chosen.and_then(|p| p.into_path().ok()) else { return Ok(None) };
    std::fs::write(&path, body)
        .map_err(|e| api::ApiError::BadRequest(format!("cannot write {}: {e}", path.display())))?;
    Ok(Some(path.display().to_string()))
}

/// Saves the dead letters of the filter as CSV where the person chooses.
#[tauri::command]
async fn export_dead_letters(
    handle: tauri::AppHandle,
    state: S<'_>,
    filter: DeadLetterFilter,
) -> CommandResult<Option<String>> {
    let body = api::export::dead_letters(&state.app, &filter).await?;
    save_csv(handle, api::export::file_name("dead-letters", state.app.clock.now()), body).await
}

/// Saves a replay's report as CSV where the person chooses.
#[tauri::command]
async fn export_replay_report(handle: tauri::AppHandle, state: S<'_>, id: i64) -> CommandResult<Option<String>> {
    let body = api::export::replay_report(&state.app, id).await?;
    save_csv(handle, api::export::file_name(&format!("replay-{id}"), state.app.clock.now()), body).await
}

#[tauri::command]
async fn edit_dead_letter(state: S<'_>, id: i64, request: api::EditRequest) -> CommandResult<DeadLetterView> {
    api::edit_dead_letter(&state.app, id, &request, &state.actor).await
}

#[tauri::command]
async fn reveal_dead_letter(state: S<'_>, id: i64, request: api::RevealRequest) -> CommandResult<DeadLetterView> {
    api::reveal_dead_letter(&state.app, id, &request, &state.actor).await
}

#[tauri::command]
async fn find_leads(state: S<'_>, q: String) -> CommandResult<api::LeadSearch> {
    api::find_leads(&state.app, &api::LeadQuery { q }).await
}

#[tauri::command]
async fn lead_story(state: S<'_>, id: i64) -> CommandResult<api::LeadStory> {
    api::lead_story(&state.app, id).await
}

#[tauri::command]
async fn reveal_lead(state: S<'_>, id: i64, request: api::RevealRequest) -> CommandResult<api::LeadStory> {
    api::reveal_lead(&state.app, id, &request, &state.actor).await
}

#[tauri::command]
async fn replay_progress(state: S<'_>, id: i64) -> CommandResult<ReplayProgress> {
    api::replay_progress(&state.app, id).await
}

#[tauri::command]
async fn alerts(state: S<'_>) -> CommandResult<Vec<Alert>> {
    api::alerts(&state.app).await
}

#[tauri::command]
async fn alert_channels(state: S<'_>) -> CommandResult<Vec<crate::features::monitor::channels::ChannelView>> {
    api::alert_channels(&state.app).await
}

#[tauri::command]
async fn acknowledge_alert(state: S<'_>, id: i64) -> CommandResult<Alert> {
    api::acknowledge_alert(&state.app, id, &state.actor).await
}

#[tauri::command]
async fn targets(state: S<'_>) -> CommandResult<Vec<TargetView>> {
    api::targets(&state.app).await
}

#[tauri::command]
async fn target_preview(
    state: S<'_>,
    name: String,
    lead: String,
) -> CommandResult<crate::features::targets::RequestPreview> {
    api::target_preview(&state.app, &name, &lead).await
}

#[tauri::command]
async fn reload_secrets(state: S<'_>) -> CommandResult<Vec<api::SecretReload>> {
    api::reload_secrets(&state.app, &state.actor).await
}

#[tauri::command]
async fn check_target(state: S<'_>, name: String) -> CommandResult<crate::features::targets::ConnectionCheck> {
    api::check_target(&state.app, &name).await
}

#[tauri::command]
async fn set_target_paused(state: S<'_>, name: String, paused: bool) -> CommandResult<TargetView> {
    api::set_target_paused(&state.app, &name, paused, &state.actor).await
}

// Settings (the settings page): the configuration in force, a save written back into the file and put in force
// without a restart, secrets kept in the OS keyring. The same `api::settings` functions as the HTTP routes.

#[tauri::command]
async fn settings(state: S<'_>) -> CommandResult<crate::features::settings::SettingsView> {
    api::settings(&state.app).await
}

#[tauri::command]
async fn save_settings(state: S<'_>, edit: api::SettingsEdit) -> CommandResult<crate::features::settings::SaveOutcome> {
    api::save_settings(&state.app, &edit, &state.actor).await
}

#[tauri::command]
async fn store_secret(state: S<'_>, entry: api::SecretEntry) -> CommandResult<api::SecretStored> {
    api::store_secret(&state.app, &entry, &state.actor).await
}

// This computer (the settings page's first section, desktop only): whether Leadline starts at login.

#[tauri::command]
fn autostart(app: tauri::AppHandle) -> bool {
    tray::autostart_enabled(&app)
}

#[tauri::command]
fn set_autostart(app: tauri::AppHandle, enabled: bool) -> CommandResult<bool> {
    tray::set_autostart(&app, enabled).map_err(api::ApiError::Internal)
}

/// The place a clicked notification opened a new window on, once (the page asks when it starts listening).
#[tauri::command]
fn take_place(pending: tauri::State<'_, PendingPlace>) -> Option<serde_json::Value> {
    let mut hand_off = pending.0.lock().unwrap_or_else(|e| e.into_inner());
    hand_off.page_listens = true;
    let place = hand_off.place.take();
    if let Some(p) = &place {
        tracing::info!(place = %p, "the new window opens on its place");
    }
    place
}
