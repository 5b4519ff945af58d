//! The window's commands, by name: what the UI's desktop backend (`ui/src/lib/backend-tauri.ts`) invokes, each an
//! adapter of [`crate::shells::api`], with the native confirmation where the browser's page confirms for itself.
//!
//! One dispatcher serves both ways the window reaches Leadline: in the process that runs it (the first start, when
//! "run here" was just chosen) and, from the window's own process, over the engine's bridge ([`crate::shells::window::bridge`]).
//! It holds no Tauri types: the engine process ([`crate::shells::desktop`]'s engine process) never starts Tauri. Arguments come as the JSON
//! object the page sent (`invoke('replay', {selection, reason, options})`); answers go back as JSON, errors as the
//! [`ApiError`]'s `{code, message}`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::features::dlq::DeadLetterFilter;
use crate::features::replay::{ReplayOptions, ReplaySelection};
use crate::shells::api::{self, ApiError, App, Confirm};

/// When the process started, to report how long the first overview took.
pub static LAUNCHED: OnceLock<Instant> = OnceLock::new();
static FIRST_HEALTH: AtomicBool = AtomicBool::new(true);
/// When the window was last made, until its page first asks for the overview (the time is logged then).
pub static WINDOW_MADE: Mutex<Option<Instant>> = Mutex::new(None);

/// What the commands act on and as whom.
pub struct Context {
    pub app: App,
    pub confirm: Arc<dyn Confirm>,
    /// Who acts, for the audit: the OS user.
    pub actor: String,
}

/// The commands [`dispatch`] answers (the rest are the window's own: its place, saving a file, how it runs).
pub const NAMES: &[&str] = &[
    "session",
    "health",
    "metrics",
    "sources",
    "reconcile_now",
    "figures",
    "dead_letters",
    "dead_letter",
    "reveal_dead_letter",
    "find_leads",
    "lead_story",
    "reveal_lead",
    "replay_preview",
    "replay",
    "replay_progress",
    "replays",
    "replay_report",
    "control_replay",
    "dead_letter_groups",
    "resolve_dead_letters",
    "fix_dead_letters",
    "fix_and_replay_preview",
    "fix_and_replay",
    "edit_dead_letter",
    "alerts",
    "acknowledge_alert",
    "alert_channels",
    "targets",
    "set_target_paused",
    "target_preview",
    "check_target",
    "reload_secrets",
    "settings",
    "save_settings",
    "store_secret",
    CSV_DEAD_LETTERS,
    CSV_REPLAY_REPORT,
];

/// The commands the window's page invokes that the window answers itself: where a clicked notification opened it
/// (`take_place`), how this app runs and the first start's choice or a team desk's calls (`shells/desktop/desk.rs`).
pub const WINDOW_OWN: &[&str] =
    &["take_place", "desk_view", "choose_here", "connect_team", "desk_call", "desk_export", "leave_team"];

/// Where a command of the window goes when Leadline runs in the engine process: `Some((the engine's command, whether
/// its answer is a CSV the window saves))`, or `None` for the window's own commands ([`WINDOW_OWN`]). Start at login
/// is the engine's (its tray shows it); an export is the CSV's body from the engine, saved by the window.
pub fn route(name: &str) -> Option<(&'static str, bool)> {
    match name {
        "export_dead_letters" => Some((CSV_DEAD_LETTERS, true)),
        "export_replay_report" => Some((CSV_REPLAY_REPORT, true)),
        "autostart" => Some(("autostart", false)),
        "set_autostart" => Some(("set_autostart", false)),
        "tray_shown" => Some(("tray_shown", false)),
        "quit_app" => Some(("quit_app", false)),
        n => NAMES.iter().find(|known| **known == n).map(|known| (*known, false)),
    }
}

/// The body of a dead-letter export (the window saves it where the person chooses): `{name, body}`.
pub const CSV_DEAD_LETTERS: &str = "csv_dead_letters";
/// The body of a replay report's export: `{name, body}`.
pub const CSV_REPLAY_REPORT: &str = "csv_replay_report";

/// An export to save: the file name offered and the CSV.
#[derive(Serialize, serde::Deserialize)]
pub struct Csv {
    pub name: String,
    pub body: String,
}

pub fn os_user() -> String {
    let name = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into());
    format!("desktop user `{name}`")
}

/// One argument of the page's call (`null` when absent, which an `Option` reads as `None`).
fn arg<T: DeserializeOwned>(args: &Value, key: &str) -> Result<T, ApiError> {
    let value = args.get(key).cloned().unwrap_or(Value::Null);
    serde_json::from_value(value).map_err(|e| ApiError::BadRequest(format!("the command's `{key}` is not valid: {e}")))
}

fn json<T: Serialize>(value: Result<T, ApiError>) -> Result<Value, ApiError> {
    value.and_then(|v| serde_json::to_value(v).map_err(|e| ApiError::Internal(e.to_string())))
}

/// Answers the command `name` with `args`.
pub async fn dispatch(cx: &Context, name: &str, args: Value) -> Result<Value, ApiError> {
    let app = &cx.app;
    let actor = cx.actor.as_str();
    let a = &args;
    match name {
        "session" => json(Ok(api::session(app, actor))),
        "health" => {
            let health = api::health(app).await;
            if FIRST_HEALTH.swap(false, Ordering::SeqCst) {
                let ms = LAUNCHED.get().map_or(0, |t| t.elapsed().as_millis());
                tracing::info!(ms, "first overview request {ms} ms after launch");
            }
            // How long a window made anew (after it was closed) takes to ask for its overview: what releasing
            // it costs.
            if let Some(made) = WINDOW_MADE.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let ms = made.elapsed().as_millis();
                tracing::info!(ms, "the window's overview asked {ms} ms after the window was made");
            }
            json(health)
        }
        "metrics" => json(api::metrics(app, &arg::<String>(a, "range")?).await),
        "sources" => json(api::sources(app).await),
        "reconcile_now" => json(api::reconcile_now(app, &arg::<String>(a, "source")?).await),
        "figures" => json(api::figures(app, &arg::<String>(a, "range")?).await),
        "dead_letters" => json(api::dead_letters(app, &arg::<DeadLetterFilter>(a, "filter")?).await),
        "dead_letter" => json(api::dead_letter(app, arg(a, "id")?).await),
        "reveal_dead_letter" => json(api::reveal_dead_letter(app, arg(a, "id")?, &arg(a, "request")?, actor).await),
        "find_leads" => json(api::find_leads(app, &api::LeadQuery { q: arg(a, "q")? }).await),
        "lead_story" => json(api::lead_story(app, arg(a, "id")?).await),
        "reveal_lead" => json(api::reveal_lead(app, arg(a, "id")?, &arg(a, "request")?, actor).await),
        "replay_preview" => json(api::replay_preview(app, &arg::<ReplaySelection>(a, "selection")?).await),
        // Replays after a native confirmation dialog that states how many leads go to which target.
        "replay" => {
            let options: ReplayOptions = arg::<Option<ReplayOptions>>(a, "options")?.unwrap_or_default();
            let selection: ReplaySelection = arg(a, "selection")?;
            let reason: String = arg(a, "reason")?;
            json(api::replay_confirmed(app, &selection, &reason, &options, actor, cx.confirm.clone()).await)
        }
        "replay_progress" => json(api::replay_progress(app, arg(a, "id")?).await),
        "replays" => json(api::replays(app).await),
        "replay_report" => {
            let outcome: Option<String> = arg(a, "outcome")?;
            json(api::replay_report(app, arg(a, "id")?, outcome.as_deref()).await)
        }
        "control_replay" => json(api::control_replay(app, arg(a, "id")?, &arg::<String>(a, "action")?, actor).await),
        "dead_letter_groups" => json(api::dead_letter_groups(app, &arg::<DeadLetterFilter>(a, "filter")?).await),
        // Discarding or marking fixed is confirmed in a native dialog, like a replay.
        "resolve_dead_letters" => {
            let request: api::ResolveRequest = arg(a, "request")?;
            let n = request.expected.map(|n| n.to_string()).unwrap_or_else(|| "the selected".into());
            let what = if request.resolution == crate::store::Resolution::Discarded {
                "Discard"
            } else {
                "Mark as fixed by hand"
            };
            api::ask(
                cx.confirm.clone(),
                "Resolve dead letters",
                format!(
                    "{what}: {n} dead letters? They leave the list and are not sent. Note: {}",
                    request.note.trim()
                ),
            )
            .await?;
            json(api::resolve_dead_letters(app, &request, actor).await)
        }
        // Applying a field fix is confirmed in a native dialog; a dry run is not.
        "fix_dead_letters" => {
            let request: api::FixRequest = arg(a, "request")?;
            if !request.dry_run {
                let dry = api::FixRequest { dry_run: true, ..request.clone() };
                let preview = api::fix_dead_letters(app, &dry, actor).await?;
                api::ask(
                    cx.confirm.clone(),
                    "Fix lead data",
                    format!(
                        "Change `{}` in {} leads? The original data is kept in each lead's history.",
                        request.fix.field, preview.changed
                    ),
                )
                .await?;
            }
            json(api::fix_dead_letters(app, &request, actor).await)
        }
        "fix_and_replay_preview" => {
            json(api::fix_and_replay_preview(app, &arg(a, "selection")?, &arg(a, "fix")?, actor).await)
        }
        // Fixing and replaying is one act, confirmed once in a native dialog that states both.
        "fix_and_replay" => {
            json(api::fix_and_replay_confirmed(app, &arg(a, "request")?, actor, cx.confirm.clone()).await)
        }
        "edit_dead_letter" => json(api::edit_dead_letter(app, arg(a, "id")?, &arg(a, "request")?, actor).await),
        "alerts" => json(api::alerts(app).await),
        "acknowledge_alert" => json(api::acknowledge_alert(app, arg(a, "id")?, actor).await),
        "alert_channels" => json(api::alert_channels(app).await),
        "targets" => json(api::targets(app).await),
        "set_target_paused" => {
            json(api::set_target_paused(app, &arg::<String>(a, "name")?, arg(a, "paused")?, actor).await)
        }
        "target_preview" => {
            json(api::target_preview(app, &arg::<String>(a, "name")?, &arg::<String>(a, "lead")?).await)
        }
        "check_target" => json(api::check_target(app, &arg::<String>(a, "name")?).await),
        "reload_secrets" => json(api::reload_secrets(app, actor).await),
        // Settings (the settings page): the configuration in force, a save written back into the file and put in
        // force without a restart, secrets kept in the OS keyring. The same functions as the HTTP routes.
        "settings" => json(api::settings(app).await),
        "save_settings" => json(api::save_settings(app, &arg(a, "edit")?, actor).await),
        "store_secret" => json(api::store_secret(app, &arg(a, "entry")?, actor).await),
        CSV_DEAD_LETTERS => {
            let body = api::export::dead_letters(app, &arg::<DeadLetterFilter>(a, "filter")?).await?;
            json(Ok(Csv { name: api::export::file_name("dead-letters", app.clock.now()), body }))
        }
        CSV_REPLAY_REPORT => {
            let id: i64 = arg(a, "id")?;
            let body = api::export::replay_report(app, id).await?;
            json(Ok(Csv { name: api::export::file_name(&format!("replay-{id}"), app.clock.now()), body }))
        }
        other => Err(ApiError::NotFound(format!("no command `{other}`"))),
    }
}
