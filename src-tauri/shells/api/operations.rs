//! Every operation the UI uses, registered once: its name, arguments and answer, whether it reads or writes, its
//! HTTP method and path for API clients, whether a person confirms it, and the `api` function it runs.
//!
//! Everything else is derived from this table, and nothing else names an operation by hand:
//!
//! - **one dispatcher**, [`call`]: the arguments come as one JSON object ([`super::args`]), the answer goes back as
//!   a [`Reply`]. The desktop window's commands (`shells/window/commands.rs`, over the engine's bridge) and the
//!   HTTP router (`shells/api/http.rs`, which builds one route per entry and folds path, query and body into that
//!   object) both call it, so the two transports cannot answer differently;
//! - **the window's permissions**: `src-tauri/shells/desktop/command_names.in` (which `build.rs` turns into Tauri
//!   permissions) and `capabilities/default.json` are written from [`all`] by `tests/ts_contract.rs`, which fails
//!   when they are stale;
//! - **the UI's client**: `ui/src/lib/api/operations.ts` (each operation's method, path, argument and answer types),
//!   written by the same test beside the wire types; the page calls `backend.call(name, args)`, sent over Tauri's
//!   `invoke` in the desktop app and over `fetch` in a browser (and, for a desk of a team server, over `fetch`
//!   through the `desk_call` command).
//!
//! Why one generic call rather than code generated per operation (GitButler's `#[but_api]` generates both): a
//! generated Tauri command and axum handler per operation would each still be a copy; with one call there is no
//! copy at all, the generated part is data (names, paths, types), and a test (`tests/operations.rs`) calls every
//! operation through both transports and checks they answer alike.
//!
//! **Confirmations**: an operation with `confirm` changes many leads. The window asks a person natively the question
//! its function in [`super::confirm`] builds from the arguments (a fresh preview or dry run, the count, the
//! reason), then runs with the arguments pinned to what was counted; over HTTP the page asks and sends the count it
//! showed. The operation checks that count either way.
//!
//! **Files**: an export answers an [`ExportFile`]; HTTP serves it as an attachment, the window saves it through its
//! native dialog and answers the page with where it went.
//!
//! Adding an operation: its `api` function (a module beside this one), one entry below, and
//! `UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract` to write what is derived.

use std::any::{Any, TypeId};
use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};

use super::confirm::{self, Confirm};
use super::dto::*;
use super::error::ApiError;
use super::{args, connections, export, letters, lookup, missing_data, monitoring, replaying, settings};
use crate::features::app::App;
use crate::features::contact::speed::ContactSpeed;
use crate::features::dlq::{DeadLetterFilter, DeadLetterGroup};
use crate::features::figures::DeliveryFigures;
use crate::features::monitor::alerts::Alert;
use crate::features::monitor::channels::ChannelView;
use crate::features::monitor::health::HealthView;
use crate::features::monitor::metrics::MetricSeries;
use crate::features::reconcile::ReconciliationRun;
use crate::features::replay::fix::FixReport;
use crate::features::replay::{ReplayPreview, ReplayProgress, ReplayReceipt, ReplayReportItem, ReplaySelection};
use crate::features::settings::{SaveOutcome, SettingsView};
use crate::features::targets::{ConnectionCheck, RequestPreview};
use crate::store::{MissingDataCounts, MissingDataLead};

/// The table: each entry becomes one [`Operation`] whose `run` parses the arguments, asks the confirmation in the
/// window, runs the entry's expression and turns its answer into a [`Reply`].
macro_rules! operations {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $access:ident $method:ident $path:literal ($a:ident: $args:ty) -> $answer:ty,
        $(confirm $confirm:path,)?
        $(refused if $refused:expr,)?
        example $example:tt,
        |$cx:ident| $run:expr;
    )*) => {
        fn registry() -> Vec<Operation> {
            vec![$(
                Operation {
                    name: stringify!($name),
                    doc: concat!($($doc, "\n",)*),
                    access: operations!(@access $access),
                    method: operations!(@method $method),
                    path: $path,
                    confirmed: operations!(@given $($confirm)?),
                    refusal: operations!(@given $($refused)?),
                    file: TypeId::of::<$answer>() == TypeId::of::<ExportFile>(),
                    example: || serde_json::json!($example),
                    run: |cx: Caller, args: Value| -> BoxFuture<'static, Result<Reply, ApiError>> {
                        Box::pin(async move {
                            let $a: $args = args::parse(stringify!($name), args)?;
                            $(
                                let $a = match &cx.confirm {
                                    Some(confirm) => $confirm(&cx.app, &cx.actor, $a).await?.answered(confirm.clone()).await?,
                                    None => $a,
                                };
                            )?
                            let $cx = &cx;
                            let answer: Result<$answer, ApiError> = $run;
                            let answer = answer?;
                            $(
                                if ($refused)(&answer) {
                                    return Ok(Reply::Refusal(json(&answer)?));
                                }
                            )?
                            reply(answer)
                        })
                    },
                    types: Types::of::<$args, $answer>,
                },
            )*]
        }
    };
    (@access read) => { Access::Read };
    (@access write) => { Access::Write };
    (@method GET) => { Method::Get };
    (@method POST) => { Method::Post };
    (@method PUT) => { Method::Put };
    (@given) => { false };
    (@given $($t:tt)+) => { true };
}

operations! {
    // The overview, sources and alerts.

    /// Who acts here, and what this process runs.
    session: read GET "/api/session" (_a: NoArgs) -> Session,
        example {},
        |cx| Ok(monitoring::session(&cx.app, &cx.actor));

    /// The queue's health, each target's situation and the verdict.
    health: read GET "/api/health" (_a: NoArgs) -> HealthView,
        example {},
        |cx| monitoring::health(&cx.app).await;

    /// Per-minute (or hourly) metrics over `range` (`1h` unless given).
    metrics: read GET "/api/metrics" (a: RangeArgs) -> MetricSeries,
        example { "range": "1h" },
        |cx| monitoring::metrics(&cx.app, a.range.as_deref().unwrap_or("1h")).await;

    /// Delivery figures over `range` (`24h` unless given).
    figures: read GET "/api/figures" (a: RangeArgs) -> DeliveryFigures,
        example { "range": "24h" },
        |cx| monitoring::figures(&cx.app, a.range.as_deref().unwrap_or("24h")).await;

    /// Speed to first contact over `range` (`24h` unless given): per source, p50 and p95 from a lead's arrival to
    /// its first message accepted by the provider and to its delivery receipt.
    contact_speed: read GET "/api/contact-speed" (a: RangeArgs) -> Vec<ContactSpeed>,
        example { "range": "24h" },
        |cx| monitoring::contact_speed(&cx.app, a.range.as_deref().unwrap_or("24h")).await;

    /// Each source: its volume against its baseline, reconciliation and polling.
    sources: read GET "/api/sources" (_a: NoArgs) -> Vec<SourceView>,
        example {},
        |cx| monitoring::sources(&cx.app).await;

    /// A Google Ads source's key, unmasked, to paste into the lead form's webhook settings; the reveal is logged.
    reveal_source_key: write POST "/api/sources/{source}/key" (a: SourceArgs) -> SourceKey,
        example { "source": "google" },
        |cx| monitoring::reveal_source_key(&cx.app, &a.source, &cx.actor).await;

    /// Compares a source with its own list of leads now and ingests what is missing.
    reconcile_now: write POST "/api/sources/{source}/reconcile" (a: SourceArgs) -> ReconciliationRun,
        example { "source": "meta" },
        |cx| monitoring::reconcile_now(&cx.app, &a.source).await;

    /// The newest alerts.
    alerts: read GET "/api/alerts" (_a: NoArgs) -> Vec<Alert>,
        example {},
        |cx| monitoring::alerts(&cx.app).await;

    /// Acknowledges an alert: someone is on it.
    acknowledge_alert: write POST "/api/alerts/{id}/acknowledge" (a: IdArgs) -> Alert,
        example { "id": 1 },
        |cx| monitoring::acknowledge_alert(&cx.app, a.id, &cx.actor).await;

    /// The alert channels besides the desktop (Slack, e-mail, webhooks) and how each fares.
    alert_channels: read GET "/api/alert-channels" (_a: NoArgs) -> Vec<ChannelView>,
        example {},
        |cx| monitoring::alert_channels(&cx.app).await;

    // Dead letters.

    /// Dead letters matching a filter (open ones unless it says), a page at a time.
    dead_letters: read GET "/api/dead-letters" (a: DeadLetterFilter) -> DeadLetterList,
        example { "target": "crm" },
        |cx| letters::dead_letters(&cx.app, &a).await;

    /// Dead letters matching a filter, grouped by cause.
    dead_letter_groups: read GET "/api/dead-letters/groups" (a: DeadLetterFilter) -> Vec<DeadLetterGroup>,
        example { "target": "crm" },
        |cx| letters::dead_letter_groups(&cx.app, &a).await;

    /// One dead letter with its lead, attempts and history; personal data masked.
    dead_letter: read GET "/api/dead-letters/{id}" (a: IdArgs) -> DeadLetterView,
        example { "id": 1 },
        |cx| letters::dead_letter(&cx.app, a.id).await;

    /// The dead letter with its personal data unmasked; the reason goes to the audit.
    reveal_dead_letter: write POST "/api/dead-letters/{id}/reveal" (a: RevealArgs) -> DeadLetterView,
        example { "id": 1, "reason": "the customer asked what we received" },
        |cx| letters::reveal_dead_letter(&cx.app, a.id, &a.request, &cx.actor).await;

    /// Replaces one dead letter's lead (the original is kept in its history).
    edit_dead_letter: write POST "/api/dead-letters/{id}/edit" (a: EditArgs) -> DeadLetterView,
        example { "id": 3, "payload": { "id": "P-3", "name": "Ada Lovelace", "email": "ada@example.com" },
                  "reason": "the e-mail address had a typo" },
        |cx| letters::edit_dead_letter(&cx.app, a.id, &a.request, &cx.actor).await;

    /// Answers "did this lead get our message?" for a first contact in doubt: it arrived (nothing is sent again,
    /// the lead's route goes on) or it did not (the message is sent once more). Either way the step is replayed.
    answer_contact_doubt: write POST "/api/dead-letters/{id}/contact-doubt" (a: ContactDoubtArgs) -> ReplayReceipt,
        confirm confirm::contact_doubt_question,
        example { "id": 1, "arrived": true, "note": "the lead confirmed on the phone" },
        |cx| replaying::answer_contact_doubt(&cx.app, &a, &cx.actor).await;

    /// Discards dead letters or marks them fixed by hand; answers how many.
    resolve_dead_letters: write POST "/api/dead-letters/resolve" (a: ResolveRequest) -> i64,
        confirm confirm::resolve_question,
        example { "selection": { "ids": [2] }, "resolution": "discarded", "note": "a test lead", "expected": 1 },
        |cx| letters::resolve_dead_letters(&cx.app, &a, &cx.actor).await;

    /// Applies (or with `dry_run` previews) one field fix to the selected dead letters.
    fix_dead_letters: write POST "/api/dead-letters/fix" (a: FixRequest) -> FixReport,
        confirm confirm::fix_question,
        example { "selection": { "ids": [3] }, "fix": { "field": "company", "op": "set", "value": "Analytical Engines" },
                  "reason": "the CRM requires a company", "dry_run": false },
        |cx| letters::fix_dead_letters(&cx.app, &a, &cx.actor).await;

    /// Saves the dead letters of a filter as CSV.
    export_dead_letters: read GET "/api/export/dead-letters" (a: DeadLetterFilter) -> ExportFile,
        example { "target": "crm" },
        |cx| export::dead_letters_file(&cx.app, &a).await;

    // Leads.

    /// Any lead by e-mail, phone (or part of it), name, source id, CRM id or lead id: the newest 50.
    find_leads: read GET "/api/leads" (a: LeadQuery) -> LeadSearch,
        example { "q": "example.com" },
        |cx| lookup::find_leads(&cx.app, &a).await;

    /// A lead's whole story, personal data masked.
    lead_story: read GET "/api/leads/{id}" (a: IdArgs) -> LeadStory,
        example { "id": 1 },
        |cx| lookup::lead_story(&cx.app, a.id).await;

    /// The lead's story with its personal data unmasked; the reason goes to the audit.
    reveal_lead: write POST "/api/leads/{id}/reveal" (a: RevealArgs) -> LeadStory,
        example { "id": 1, "reason": "the customer asked what we received" },
        |cx| lookup::reveal_lead(&cx.app, a.id, &a.request, &cx.actor).await;

    // Leads delivered with missing data (a target's `missing_data`).

    /// How many leads were delivered without a field the CRM refused: overall, waiting for a person, per target.
    missing_data_counts: read GET "/api/missing-data/counts" (_a: NoArgs) -> MissingDataCounts,
        example {},
        |cx| missing_data::missing_data_counts(&cx.app).await;

    /// Leads delivered with missing data (and those corrected since), newest first: which field was left out and
    /// why (masked), and their task.
    missing_data: read GET "/api/missing-data" (_a: NoArgs) -> Vec<MissingDataLead>,
        example {},
        |cx| missing_data::missing_data(&cx.app).await;

    /// Corrects one field of a lead delivered with missing data and sends it again, as an update of its record.
    correct_missing_data: write POST "/api/missing-data/{id}/correct" (a: CorrectArgs) -> MissingDataLead,
        example { "id": 1, "fix": { "field": "phone", "op": "normalize_phone", "country_code": "+49" },
                  "reason": "the customer confirmed the number" },
        |cx| missing_data::correct_missing_data(&cx.app, a.id, &a.request.fix, &a.request.reason, &cx.actor).await;

    /// A person checked a lead delivered with missing data: its "Needs a person" task is done.
    close_missing_task: write POST "/api/missing-data/{id}/close" (a: IdArgs) -> MissingDataLead,
        example { "id": 1 },
        |cx| missing_data::close_missing_task(&cx.app, a.id, &cx.actor).await;

    /// Saves the leads delivered with missing data as CSV.
    export_missing_data: read GET "/api/export/missing-data" (_a: NoArgs) -> ExportFile,
        example {},
        |cx| export::missing_data_file(&cx.app).await;

    // Replays.

    /// What replaying the selection would do, and when it was counted (`as_of`).
    replay_preview: read POST "/api/replays/preview" (a: ReplaySelection) -> ReplayPreview,
        example { "ids": [1] },
        |cx| replaying::replay_preview(&cx.app, &a).await;

    /// Replays the selection if it still holds the `expected` leads the preview counted.
    replay: write POST "/api/replays" (a: ReplayRequest) -> ReplayReceipt,
        confirm confirm::replay_question,
        example { "selection": { "ids": [1] }, "expected": 1, "reason": "the CRM accepts it again" },
        |cx| replaying::replay(&cx.app, &a, &cx.actor).await;

    /// The recent replays.
    replays: read GET "/api/replays" (_a: NoArgs) -> Vec<ReplayProgress>,
        example {},
        |cx| replaying::replays(&cx.app).await;

    /// One replay's progress.
    replay_progress: read GET "/api/replays/{id}" (a: IdArgs) -> ReplayProgress,
        example { "id": 1 },
        |cx| replaying::replay_progress(&cx.app, a.id).await;

    /// A replay's leads and their outcomes (of one outcome, when given).
    replay_report: read GET "/api/replays/{id}/report" (a: ReportArgs) -> Vec<ReplayReportItem>,
        example { "id": 1, "outcome": "delivered" },
        |cx| replaying::replay_report(&cx.app, a.id, a.outcome.as_deref()).await;

    /// Pauses, resumes or cancels a replay.
    control_replay: write POST "/api/replays/{id}/{action}" (a: ControlArgs) -> ReplayProgress,
        example { "id": 1, "action": "pause" },
        |cx| replaying::control_replay(&cx.app, a.id, &a.action, &cx.actor).await;

    /// Saves a replay's whole report as CSV.
    export_replay_report: read GET "/api/export/replays/{id}" (a: IdArgs) -> ExportFile,
        example { "id": 1 },
        |cx| export::replay_report_file(&cx.app, a.id).await;

    /// What a field fix would change, and the replay of the leads it changes.
    fix_and_replay_preview: read POST "/api/dead-letters/fix-and-replay/preview" (a: FixAndReplayPreviewArgs)
        -> FixAndReplayPreview,
        example { "selection": { "ids": [4] }, "fix": { "field": "name", "op": "set", "value": "Ada King" } },
        |cx| replaying::fix_and_replay_preview(&cx.app, &a.selection, &a.fix, &cx.actor).await;

    /// Fixes, then replays exactly the leads the fix changed: one act, one reason.
    fix_and_replay: write POST "/api/dead-letters/fix-and-replay" (a: FixAndReplayRequest) -> FixAndReplayReceipt,
        confirm confirm::fix_and_replay_question,
        example { "selection": { "ids": [4] }, "fix": { "field": "name", "op": "set", "value": "Ada King" },
                  "reason": "the CRM wants the full name", "expected_changed": 1 },
        |cx| replaying::fix_and_replay(&cx.app, &a, &cx.actor).await;

    // Targets.

    /// Each target: its endpoint, pace, hold, breaker and pause.
    targets: read GET "/api/targets" (_a: NoArgs) -> Vec<TargetView>,
        example {},
        |cx| connections::targets(&cx.app).await;

    /// Pauses a target: nothing is sent to it, its leads queue safely.
    pause_target: write POST "/api/targets/{name}/pause" (a: TargetArgs) -> TargetView,
        example { "name": "crm" },
        |cx| connections::set_target_paused(&cx.app, &a.name, true, &cx.actor).await;

    /// Resumes a paused target.
    resume_target: write POST "/api/targets/{name}/resume" (a: TargetArgs) -> TargetView,
        example { "name": "crm" },
        |cx| connections::set_target_paused(&cx.app, &a.name, false, &cx.actor).await;

    /// The exact request a target would send for a stored lead (`source:id`); nothing is sent.
    target_preview: read GET "/api/targets/{name}/preview" (a: TargetPreviewArgs) -> RequestPreview,
        example { "name": "crm", "lead": "plain:P-1" },
        |cx| connections::target_preview(&cx.app, &a.name, &a.lead).await;

    /// One harmless authenticated request to the target, answered in plain words.
    check_target: read POST "/api/targets/{name}/check" (a: TargetArgs) -> ConnectionCheck,
        example { "name": "crm" },
        |cx| connections::check_target(&cx.app, &a.name).await;

    /// Reads every target's credentials again (secrets file, environment): no restart.
    reload_secrets: write POST "/api/secrets/reload" (_a: NoArgs) -> Vec<SecretReload>,
        example {},
        |cx| connections::reload_secrets(&cx.app, &cx.actor).await;

    // Settings.

    /// The configuration in force, as the settings page edits it (secrets only as where they are found).
    settings: read GET "/api/settings" (_a: NoArgs) -> SettingsView,
        example {},
        |cx| settings::settings(&cx.app).await;

    /// Writes changes into the configuration file (comments kept) and puts them in force without a restart; a
    /// refusal names the fields at fault (HTTP 422) and writes nothing.
    save_settings: write PUT "/api/settings" (a: SettingsEdit) -> SaveOutcome,
        refused if |o: &SaveOutcome| !o.saved,
        example { "changes": [{ "path": "targets.crm.timeout_ms", "value": 800 }] },
        |cx| settings::save_settings(&cx.app, &a, &cx.actor).await;

    /// Keeps a secret for a variable the configuration names in the OS keyring (never the file).
    store_secret: write POST "/api/settings/secret" (a: SecretEntry) -> SecretStored,
        example { "variable": "HUBSPOT_TOKEN", "value": "pat-na1-example" },
        |cx| settings::store_secret(&cx.app, &a, &cx.actor).await;
}

/// Whether an operation only reads (safe to repeat, nothing audited) or changes something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The HTTP method an API client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
        }
    }
}

/// Who calls, and how a confirmation is asked.
#[derive(Clone)]
pub struct Caller {
    pub app: App,
    /// Who acts, for the audit: an operator token's name, or the desktop's OS user.
    pub actor: String,
    /// `Some` in the desktop window: a confirmed operation asks its question here first. `None` over HTTP: the
    /// page asked, and the arguments carry the count it showed.
    pub confirm: Option<Arc<dyn Confirm>>,
}

/// What an operation answers.
#[derive(Debug)]
pub enum Reply {
    Answer(Value),
    /// An answer that says the request was refused and why (a settings save with refused fields): HTTP answers it
    /// with 422, the window as any answer.
    Refusal(Value),
    /// A file to save.
    File(ExportFile),
}

impl Reply {
    /// The answer as JSON (a file as `{name, body}`).
    pub fn into_value(self) -> Value {
        match self {
            Reply::Answer(v) | Reply::Refusal(v) => v,
            Reply::File(f) => serde_json::json!({ "name": f.name, "body": f.body }),
        }
    }
}

type Run = fn(Caller, Value) -> BoxFuture<'static, Result<Reply, ApiError>>;

/// One registered operation (see the module's documentation).
pub struct Operation {
    pub name: &'static str,
    /// What it does, in a sentence or two.
    pub doc: &'static str,
    pub access: Access,
    pub method: Method,
    /// The path, with its parameters in braces (`/api/alerts/{id}/acknowledge`): arguments of the same name.
    pub path: &'static str,
    /// Whether a person confirms it (natively in the window; in the page over HTTP).
    pub confirmed: bool,
    /// Whether its answer can be a refusal (HTTP 422).
    pub refusal: bool,
    /// Whether its answer is a file ([`ExportFile`]).
    pub file: bool,
    /// Example arguments, as a client sends them.
    pub example: fn() -> Value,
    run: Run,
    types: fn(&ts_rs::Config) -> Types,
}

/// Every operation, in the order of the table above.
pub fn all() -> &'static [Operation] {
    static ALL: LazyLock<Vec<Operation>> = LazyLock::new(registry);
    &ALL
}

/// The operation named `name`.
pub fn find(name: &str) -> Option<&'static Operation> {
    all().iter().find(|op| op.name == name)
}

/// Runs the operation `name` with `args` (one JSON object) for `cx`.
pub async fn call(cx: &Caller, name: &str, args: Value) -> Result<Reply, ApiError> {
    let op = find(name).ok_or_else(|| ApiError::NotFound(format!("no operation `{name}`")))?;
    op.run(cx.clone(), args).await
}

impl Operation {
    /// Runs this operation with `args` (one JSON object) for `cx`.
    pub fn run(&self, cx: Caller, args: Value) -> BoxFuture<'static, Result<Reply, ApiError>> {
        (self.run)(cx, args)
    }

    /// Its argument and answer types in TypeScript, with the declarations they need.
    pub fn typescript(&self, cfg: &ts_rs::Config) -> Types {
        (self.types)(cfg)
    }

    /// The parameters its path names (`{id}` → `id`).
    pub fn path_params(&self) -> Vec<&'static str> {
        self.path.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect()
    }

    /// The request an API client sends for `args`: the path's parameters filled in (percent-encoded as
    /// JavaScript's `encodeURIComponent` does); for a GET the other arguments as the query, in the order of their
    /// names (`null` and empty text left out); otherwise the other arguments as the JSON body, or no body when none
    /// is left. The UI's client (`ui/src/lib/backend-http.ts`) builds the same (its unit test checks the examples).
    pub fn request(&self, args: &Value) -> Result<Request, String> {
        let mut rest: Map<String, Value> = match args {
            Value::Object(m) => m.clone(),
            Value::Null => Map::new(),
            other => return Err(format!("the arguments of `{}` are not an object: {other}", self.name)),
        };
        let mut path = String::new();
        for segment in self.path.split('/').skip(1) {
            path.push('/');
            match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(param) => match rest.remove(param) {
                    Some(Value::String(s)) => path.push_str(&encode_component(&s)),
                    Some(Value::Number(n)) => path.push_str(&n.to_string()),
                    other => return Err(format!("`{}` needs `{param}` for its path, not {other:?}", self.name)),
                },
                None => path.push_str(segment),
            }
        }
        if self.method != Method::Get {
            let body = (!rest.is_empty()).then_some(Value::Object(rest));
            return Ok(Request { method: self.method, path, body });
        }
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        let mut by_name: Vec<(&String, &Value)> = rest.iter().collect();
        by_name.sort_by_key(|(key, _)| *key);
        for (key, value) in by_name {
            match value {
                Value::Null => {}
                Value::String(s) if s.is_empty() => {}
                Value::String(s) => {
                    query.append_pair(key, s);
                }
                Value::Number(_) | Value::Bool(_) => {
                    query.append_pair(key, &value.to_string());
                }
                other => return Err(format!("`{}` cannot send `{key}` = {other} in a query", self.name)),
            }
        }
        let query = query.finish();
        if !query.is_empty() {
            path = format!("{path}?{query}");
        }
        Ok(Request { method: self.method, path, body: None })
    }
}

/// A request to Leadline's HTTP API (see [`Operation::request`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    #[serde(serialize_with = "method_name")]
    pub method: Method,
    /// The path and query.
    pub path: String,
    pub body: Option<Value>,
}

fn method_name<S: serde::Serializer>(m: &Method, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.as_str())
}

/// Percent-encodes a path segment as JavaScript's `encodeURIComponent` does.
fn encode_component(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An operation's types in TypeScript: the names of its arguments and its answer, and the declarations of every
/// type they name (`(name, declaration)`, each once).
pub struct Types {
    pub args: String,
    pub answer: String,
    pub declarations: Vec<(String, String)>,
}

impl Types {
    fn of<A: ts_rs::TS + 'static, R: ts_rs::TS + 'static>(cfg: &ts_rs::Config) -> Types {
        let mut declared = Declared { cfg, seen: HashSet::new(), out: Vec::new() };
        ts_rs::TypeVisitor::visit::<A>(&mut declared);
        ts_rs::TypeVisitor::visit::<R>(&mut declared);
        Types { args: A::name(cfg), answer: R::name(cfg), declarations: declared.out }
    }
}

/// Collects the declarations of a type and of every type it names, once each.
struct Declared<'a> {
    cfg: &'a ts_rs::Config,
    seen: HashSet<TypeId>,
    out: Vec<(String, String)>,
}

impl ts_rs::TypeVisitor for Declared<'_> {
    fn visit<T: ts_rs::TS + 'static + ?Sized>(&mut self) {
        if !self.seen.insert(TypeId::of::<T>()) {
            return;
        }
        if T::output_path().is_some() {
            self.out.push((T::ident(self.cfg), T::decl(self.cfg)));
        }
        T::visit_dependencies(self);
        T::visit_generics(self);
    }
}

/// An answer as a [`Reply`]: a file when it is an [`ExportFile`], JSON otherwise.
fn reply<R: Serialize + 'static>(answer: R) -> Result<Reply, ApiError> {
    let mut slot = Some(answer);
    if let Some(file) = (&mut slot as &mut dyn Any).downcast_mut::<Option<ExportFile>>().and_then(Option::take) {
        return Ok(Reply::File(file));
    }
    Ok(Reply::Answer(json(&slot)?))
}

fn json<R: Serialize>(answer: &R) -> Result<Value, ApiError> {
    serde_json::to_value(answer).map_err(|e| ApiError::Internal(format!("the answer cannot be written: {e}")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_operation_has_a_unique_name_and_route_and_a_request_for_its_example() {
        let mut names = HashSet::new();
        let mut routes = HashSet::new();
        for op in all() {
            assert!(names.insert(op.name), "`{}` is registered twice", op.name);
            assert!(routes.insert((op.method, op.path)), "{} {} is registered twice", op.method.as_str(), op.path);
            assert!(op.path.starts_with("/api/"), "{}", op.path);
            assert!(!op.doc.trim().is_empty(), "`{}` says what it does", op.name);
            let request = op.request(&(op.example)()).unwrap_or_else(|e| panic!("{e}"));
            assert!(!request.path.contains('{'), "{request:?}");
            assert!(!(op.access == Access::Write && op.method == Method::Get), "a GET changes nothing");
        }
        assert!(all().len() > 30);
    }

    #[test]
    fn a_request_fills_the_path_and_puts_the_rest_in_the_query_or_the_body() {
        let get = |name: &str, args: Value| find(name).unwrap().request(&args).unwrap();
        let r = get("target_preview", json!({"name": "crm eu/1", "lead": "plain:P 1"}));
        assert_eq!(
            (r.method, r.path.as_str(), r.body),
            (Method::Get, "/api/targets/crm%20eu%2F1/preview?lead=plain%3AP+1", None)
        );
        let r = get("dead_letters", json!({"target": "crm", "class": null, "text": "", "limit": 50}));
        assert_eq!(r.path, "/api/dead-letters?limit=50&target=crm");
        let r = get("acknowledge_alert", json!({"id": 7}));
        assert_eq!((r.method, r.path.as_str(), r.body), (Method::Post, "/api/alerts/7/acknowledge", None));
        let r = get("reveal_dead_letter", json!({"id": 7, "reason": "why"}));
        assert_eq!((r.path.as_str(), r.body), ("/api/dead-letters/7/reveal", Some(json!({"reason": "why"}))));
        let r = get("save_settings", json!({"changes": []}));
        assert_eq!((r.method, r.body), (Method::Put, Some(json!({"changes": []}))));
        assert!(find("dead_letter").unwrap().request(&json!({})).is_err(), "a path parameter is needed");
    }

    #[test]
    fn exports_answer_files_and_a_save_may_be_refused() {
        let files: Vec<&str> = all().iter().filter(|op| op.file).map(|op| op.name).collect();
        assert_eq!(files, ["export_dead_letters", "export_missing_data", "export_replay_report"]);
        let refusals: Vec<&str> = all().iter().filter(|op| op.refusal).map(|op| op.name).collect();
        assert_eq!(refusals, ["save_settings"]);
        let confirmed: Vec<&str> = all().iter().filter(|op| op.confirmed).map(|op| op.name).collect();
        assert_eq!(
            confirmed,
            ["answer_contact_doubt", "resolve_dead_letters", "fix_dead_letters", "replay", "fix_and_replay"]
        );
    }
}
