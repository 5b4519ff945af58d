//! The typed contract with the UI, and what the desktop window may call, derived from the Rust code and committed:
//!
//! - `ui/src/lib/api/wire.ts`: the wire types, generated from the Rust DTOs (ts-rs) — those listed below and every
//!   type an operation of the registry (`shells/api/operations.rs`) takes or answers;
//! - `ui/src/lib/api/operations.ts`: each operation's method, path, argument and answer types, and its example
//!   with the request Leadline's router answers for it;
//! - `src-tauri/shells/desktop/command_names.in` (turned into Tauri permissions by `build.rs`, which cannot read
//!   the crate) and `capabilities/default.json`: the window's commands — every operation, the engine's own and the
//!   window's own — and nothing else.
//!
//! Each test fails when its file is stale; `UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract`
//! rewrites them all.
//!
//! 64-bit integers are declared as `number`: JSON carries them as numbers, and Leadline's ids and counts stay
//! far below 2^53.

use leadline::api::operations;
use leadline::api::WebhookSetup;
use leadline::api::{
    BreakerView, DeadLetterList, DeadLetterView, EditRequest, ErrorBody, FixAndReplayPreview, FixAndReplayReceipt,
    FixAndReplayRequest, FixRequest, HealthVerdict, HealthView, LiveEvent, ReplayRequest, ResolveRequest,
    RevealRequest, SecretReload, Session, SourceView, TargetSituation, TargetView, VerdictLevel,
};
use leadline::api::{LeadSearch, LeadStory};
use leadline::api::{SecretEntry, SecretStored, SettingsEdit};
use leadline::config::SecretSource;
use leadline::delivery::breaker::BreakerState;
use leadline::delivery::worker::{Hold, HoldReason};
use leadline::dlq::{Attempt, DeadLetter, DeadLetterDetail, DeadLetterFilter, DeadLetterGroup, PayloadFix};
use leadline::features::settings::{
    AlertSettings, Change, FieldError, KeyringStatus, QuietHours, SaveOutcome, SecretField, SettingsView,
    SourceSettings, TargetSettings,
};
use leadline::figures::{DeliveryFigures, RouteFigures, TargetFigures};
use leadline::model::{Page, Place};
use leadline::monitor::alerts::Alert;
use leadline::monitor::channels::ChannelView;
use leadline::monitor::metrics::MetricSeries;
use leadline::monitor::sources::{SourceState, SourceStatus};
use leadline::monitor::volume::{Assessment, BaselineKind, Verdict};
use leadline::poll::PollView;
use leadline::reconcile::ReconciliationRun;
use leadline::replay::fix::{FieldFix, FieldOp, FixReport, FixSample};
use leadline::replay::{
    FallbackPlan, NotEligible, ReplayEvent, ReplayHistoryEntry, ReplayOptions, ReplayPreview, ReplayProgress,
    ReplayReceipt, ReplayReportItem, ReplaySelection,
};
use leadline::shells::desk::{DeskAnswer, DeskView};
use leadline::shells::window::commands;
use leadline::store::ChannelTrouble;
use leadline::store::{
    AlertKind, AlertState, DeliveryState, ErrorClass, Held, QueueHealth, ReplayEventKind, ReplayOutcome, ReplayPhase,
    ReplayStatus, Resolution, ResolutionFilter, Reveal, Severity, TargetHealth,
};
use leadline::store::{LeadMatch, LeadRecord, LeadStatus, LeadStep};
use leadline::targets::{ConnectionCheck, RequestPreview};
use ts_rs::TS;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ui/src/lib/api/wire.ts");
const OPERATIONS_TS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ui/src/lib/api/operations.ts");
const COMMAND_NAMES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src-tauri/shells/desktop/command_names.in");
const CAPABILITY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/capabilities/default.json");
const REGENERATE: &str = "UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract";

/// Compares `fresh` with the committed file at `path`, or writes it when `UPDATE_TS_TYPES` is set.
fn check_generated(path: &str, fresh: &str) {
    if std::env::var_os("UPDATE_TS_TYPES").is_some() {
        std::fs::write(path, fresh).unwrap_or_else(|e| panic!("write {path}: {e}"));
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(committed == fresh, "{path} is stale: run `{REGENERATE}` and commit it");
}

fn generated() -> String {
    let cfg = ts_rs::Config::new().with_large_int("number");
    let decls = [
        ErrorBody::decl(&cfg),
        Session::decl(&cfg),
        DeskView::decl(&cfg),
        DeskAnswer::decl(&cfg),
        HealthView::decl(&cfg),
        HealthVerdict::decl(&cfg),
        VerdictLevel::decl(&cfg),
        QueueHealth::decl(&cfg),
        TargetHealth::decl(&cfg),
        BreakerView::decl(&cfg),
        TargetSituation::decl(&cfg),
        BreakerState::decl(&cfg),
        Hold::decl(&cfg),
        HoldReason::decl(&cfg),
        RequestPreview::decl(&cfg),
        ConnectionCheck::decl(&cfg),
        SecretReload::decl(&cfg),
        MetricSeries::decl(&cfg),
        DeadLetterFilter::decl(&cfg),
        DeadLetterList::decl(&cfg),
        DeadLetter::decl(&cfg),
        DeadLetterDetail::decl(&cfg),
        DeadLetterView::decl(&cfg),
        Attempt::decl(&cfg),
        ReplaySelection::decl(&cfg),
        ReplayRequest::decl(&cfg),
        ReplayPreview::decl(&cfg),
        ReplayReceipt::decl(&cfg),
        ReplayProgress::decl(&cfg),
        ReplayHistoryEntry::decl(&cfg),
        DeadLetterGroup::decl(&cfg),
        PayloadFix::decl(&cfg),
        FallbackPlan::decl(&cfg),
        NotEligible::decl(&cfg),
        ReplayOptions::decl(&cfg),
        ReplayEvent::decl(&cfg),
        ReplayReportItem::decl(&cfg),
        ResolveRequest::decl(&cfg),
        FixRequest::decl(&cfg),
        FixAndReplayRequest::decl(&cfg),
        FixAndReplayPreview::decl(&cfg),
        FixAndReplayReceipt::decl(&cfg),
        EditRequest::decl(&cfg),
        RevealRequest::decl(&cfg),
        Reveal::decl(&cfg),
        LeadSearch::decl(&cfg),
        LeadMatch::decl(&cfg),
        LeadStatus::decl(&cfg),
        LeadStory::decl(&cfg),
        LeadRecord::decl(&cfg),
        LeadStep::decl(&cfg),
        FieldFix::decl(&cfg),
        FieldOp::decl(&cfg),
        FixReport::decl(&cfg),
        FixSample::decl(&cfg),
        Alert::decl(&cfg),
        ChannelView::decl(&cfg),
        ChannelTrouble::decl(&cfg),
        Place::decl(&cfg),
        Page::decl(&cfg),
        SourceView::decl(&cfg),
        WebhookSetup::decl(&cfg),
        SourceStatus::decl(&cfg),
        SourceState::decl(&cfg),
        Assessment::decl(&cfg),
        BaselineKind::decl(&cfg),
        Verdict::decl(&cfg),
        ReconciliationRun::decl(&cfg),
        PollView::decl(&cfg),
        DeliveryFigures::decl(&cfg),
        RouteFigures::decl(&cfg),
        TargetFigures::decl(&cfg),
        TargetView::decl(&cfg),
        SettingsView::decl(&cfg),
        SourceSettings::decl(&cfg),
        TargetSettings::decl(&cfg),
        SecretField::decl(&cfg),
        SecretSource::decl(&cfg),
        AlertSettings::decl(&cfg),
        QuietHours::decl(&cfg),
        KeyringStatus::decl(&cfg),
        FieldError::decl(&cfg),
        SaveOutcome::decl(&cfg),
        SettingsEdit::decl(&cfg),
        Change::decl(&cfg),
        SecretEntry::decl(&cfg),
        SecretStored::decl(&cfg),
        LiveEvent::decl(&cfg),
        ErrorClass::decl(&cfg),
        DeliveryState::decl(&cfg),
        Resolution::decl(&cfg),
        ResolutionFilter::decl(&cfg),
        Severity::decl(&cfg),
        AlertKind::decl(&cfg),
        AlertState::decl(&cfg),
        Held::decl(&cfg),
        ReplayStatus::decl(&cfg),
        ReplayPhase::decl(&cfg),
        ReplayOutcome::decl(&cfg),
        ReplayEventKind::decl(&cfg),
    ];
    // Then every type an operation takes or answers, and what those name, that the list above does not hold.
    let mut decls: Vec<String> = decls.into();
    let mut declared: std::collections::BTreeSet<String> = decls.iter().map(|d| declared_name(d)).collect();
    // Sorted by name: the order a type's dependencies are visited in may differ from one build to the next, and the
    // file must not (TypeScript does not care where a type is declared).
    let mut more: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for op in operations::all() {
        for (name, decl) in op.typescript(&cfg).declarations {
            if declared.insert(name.clone()) {
                more.insert(name, decl);
            }
        }
    }
    decls.extend(more.into_values());
    let mut out = String::from(
        "// Wire types of Leadline's API, generated from the Rust DTOs by tests/ts_contract.rs.\n\
         // Do not edit: run `UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract`.\n\n",
    );
    for d in decls {
        out.push_str("export ");
        out.push_str(&d);
        out.push_str("\n\n");
    }
    out.trim_end().to_string() + "\n"
}

/// The name a declaration declares: `type Name = …`.
fn declared_name(decl: &str) -> String {
    let rest = decl.split_once("type ").map_or(decl, |(_, r)| r);
    rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default().to_string()
}

#[test]
fn committed_typescript_types_match_the_rust_dtos() {
    check_generated(PATH, &generated());
}

/// A value as TypeScript source (JSON is TypeScript).
fn ts_value(v: &serde_json::Value) -> String {
    serde_json::to_string(v).unwrap()
}

/// `ui/src/lib/api/operations.ts`: the registry as the UI's client reads it.
fn operations_ts() -> String {
    let cfg = ts_rs::Config::new().with_large_int("number");
    let declared: std::collections::BTreeSet<String> = generated()
        .lines()
        .filter_map(|l| l.strip_prefix("export type "))
        .map(|l| declared_name(&format!("type {l}")))
        .collect();
    let mut imports = std::collections::BTreeSet::new();
    let (mut types, mut routes, mut examples) = (String::new(), String::new(), String::new());
    for op in operations::all() {
        let ts = op.typescript(&cfg);
        let answer = if op.file { "string | null".to_string() } else { ts.answer };
        for name in format!("{} {answer}", ts.args).split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if declared.contains(name) {
                imports.insert(name.to_string());
            }
        }
        let doc = op.doc.trim().replace('\n', "\n   * ");
        types.push_str(&format!("  /** {doc} */\n  {}: {{ args: {}; answer: {answer} }};\n", op.name, ts.args));
        routes.push_str(&format!(
            "  {}: {{ method: '{}', path: '{}', access: '{}', confirmed: {}, file: {}, refusal: {} }},\n",
            op.name,
            op.method.as_str(),
            op.path,
            if op.access == operations::Access::Read { "read" } else { "write" },
            op.confirmed,
            op.file,
            op.refusal,
        ));
        let args = (op.example)();
        let request = op.request(&args).unwrap();
        examples.push_str(&format!(
            "  {}: {{\n    args: {},\n    request: {{ method: '{}', path: {}, body: {} }},\n  }},\n",
            op.name,
            ts_value(&args),
            request.method.as_str(),
            ts_value(&serde_json::Value::String(request.path)),
            request.body.as_ref().map_or("null".to_string(), ts_value),
        ));
    }
    let imports: Vec<String> = imports.into_iter().collect();
    format!(
        "// Leadline's operations, generated from the registry (src-tauri/shells/api/operations.rs) by\n\
         // tests/ts_contract.rs. Do not edit: run `{REGENERATE}`.\n\n\
         import type {{ {} }} from './wire';\n\n\
         /** Each operation's arguments and answer. An export answers where its file was saved (`null`: not saved). */\n\
         export type Operations = {{\n{types}}};\n\n\
         export type OperationName = keyof Operations;\n\n\
         /** How an operation travels: its HTTP method and path (`{{name}}`: the argument of that name), whether it only\n\
          * reads, whether a person confirms it, whether it answers a file, and whether HTTP 422 carries a refusal as its\n\
          * answer. */\n\
         export type OperationRoute = {{\n  method: 'GET' | 'POST' | 'PUT';\n  path: string;\n  access: 'read' | 'write';\n  \
         confirmed: boolean;\n  file: boolean;\n  refusal: boolean;\n}};\n\n\
         export const OPERATIONS: {{ readonly [N in OperationName]: OperationRoute }} = {{\n{routes}}};\n\n\
         /** Each operation's example arguments, and the request Leadline's router answers for them (backend-http.test.ts\n\
          * checks that the client builds the same). */\n\
         export const EXAMPLES: {{\n  readonly [N in OperationName]: {{\n    args: Record<string, unknown>;\n    \
         request: {{ method: string; path: string; body: unknown }};\n  }};\n}} = {{\n{examples}}};\n",
        imports.join(", ")
    )
}

#[test]
fn the_committed_operations_client_matches_the_registry() {
    check_generated(OPERATIONS_TS, &operations_ts());
}

/// The window's commands: every operation, then the engine's own, then the window's own.
fn window_commands() -> Vec<&'static str> {
    let mut names: Vec<&str> = operations::all().iter().map(|op| op.name).collect();
    names.extend(commands::ENGINE_OWN);
    names.extend(commands::WINDOW_OWN);
    names
}

#[test]
fn the_window_permissions_list_every_command_and_nothing_else() {
    let list: String = window_commands().iter().map(|c| format!("    \"{c}\",\n")).collect();
    check_generated(
        COMMAND_NAMES,
        &format!(
            "// The desktop app's commands, the only ones the window may call: src-tauri/build.rs generates an\n\
             // `allow-<command>` permission for each (the app command manifest), and capabilities/default.json grants\n\
             // them. Generated from the operations' registry (shells/api/operations.rs) and the commands the engine and\n\
             // the window answer themselves (shells/window/commands.rs) by tests/ts_contract.rs: do not edit, run\n\
             // `{REGENERATE}`.\n&[\n{list}]\n"
        ),
    );
    let mut permissions = vec!["core:event:default".to_string()];
    permissions.extend(window_commands().iter().map(|c| format!("allow-{}", c.replace('_', "-"))));
    let capability = serde_json::json!({
        "$schema": "../gen/schemas/desktop-schema.json",
        "identifier": "default",
        "description": "The main window: its events (the live feed) and Leadline's own commands, one by one. Native dialogs, notifications and the window's state are driven from Rust, so the page is granted none of their commands. Generated by tests/ts_contract.rs.",
        "windows": ["main"],
        "permissions": permissions,
    });
    check_generated(CAPABILITY, &(serde_json::to_string_pretty(&capability).unwrap() + "\n"));
}

/// The names in `text` between `start` and the next `end`, as `pattern` captures them.
fn names_in(text: &str, start: &str, end: &str, pattern: &str) -> std::collections::BTreeSet<String> {
    let from = text.find(start).unwrap_or_else(|| panic!("`{start}` not found")) + start.len();
    let block = &text[from..from + text[from..].find(end).unwrap_or(text.len() - from)];
    let (prefix, suffix) = pattern.split_once("NAME").unwrap();
    let mut names = std::collections::BTreeSet::new();
    let mut rest = block;
    while let Some(at) = rest.find(prefix) {
        rest = &rest[at + prefix.len()..];
        let Some(stop) = rest.find(suffix) else { break };
        let name = &rest[..stop];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == '-') {
            names.insert(name.to_string());
            rest = &rest[stop + suffix.len()..];
        }
    }
    names
}

/// What the UI calls: operations by name anywhere in its source (`.call('NAME'`), and the engine's and the
/// window's own commands where its transports invoke them (`command<…>('NAME'`).
fn called_by_the_ui() -> std::collections::BTreeSet<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "ts" || e == "svelte") {
                out.push(path);
            }
        }
    }
    let ui = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/src");
    let mut files = Vec::new();
    walk(&ui, &mut files);
    let mut names = std::collections::BTreeSet::new();
    for file in files.iter().filter(|f| !f.ends_with("api/operations.ts") && !f.to_string_lossy().ends_with(".test.ts"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        names.extend(names_in(&format!("\u{1}{text}\u{2}"), "\u{1}", "\u{2}", ".call('NAME'"));
    }
    for transport in ["lib/backend-tauri.ts", "lib/backend-desk.ts"] {
        for line in std::fs::read_to_string(ui.join(transport)).unwrap().lines() {
            let Some(at) = line.find("command<") else { continue };
            let Some(open) = line[at..].find(">('") else { continue };
            let rest = &line[at + open + 3..];
            names.insert(rest[..rest.find('\'').unwrap()].to_string());
        }
    }
    names
}

/// The window may call exactly the commands the UI calls: the command list the build turns into permissions, the
/// desktop's handlers (the window's own, and those it sends on to the engine), the window's capability
/// (`allow-<command>`, nothing else but its events), and what the UI calls — operations by name
/// (`backend.call('NAME'`), the window's and the engine's own commands through `command<…>('NAME'` — agree.
#[test]
fn the_window_is_granted_exactly_the_commands_the_ui_calls() {
    let read = |p: &str| std::fs::read_to_string(format!("{}/{p}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let listed = names_in(&read("src-tauri/shells/desktop/command_names.in"), "&[", "]", "\"NAME\"");
    let desktop = read("src-tauri/shells/desktop/mod.rs");
    let mut handled = names_in(&desktop, "generate_handler![", "]", "\n            NAME,");
    handled.extend(names_in(&desktop, "generate_handler![", "]", "\n            desk::NAME,"));
    // The rest the window sends on to the engine process (`shells/window/commands.rs`, `route`).
    handled.extend(listed.iter().filter(|c| commands::route(c).is_some()).cloned());
    let called = called_by_the_ui();
    let capability: serde_json::Value = serde_json::from_str(&read("capabilities/default.json")).unwrap();
    let granted: std::collections::BTreeSet<String> = capability["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().expect("plain permission names").to_string())
        .filter(|p| p != "core:event:default")
        .collect();
    assert!(listed.len() > 20, "{listed:?}");
    assert_eq!(handled, listed, "desktop/mod.rs handler vs command_names.in");
    let want: std::collections::BTreeSet<String> =
        listed.iter().map(|c| format!("allow-{}", c.replace('_', "-"))).collect();
    assert_eq!(granted, want, "capabilities/default.json grants more or less than the commands");
    let not_granted: Vec<&String> = called.iter().filter(|c| !listed.contains(*c)).collect();
    assert!(not_granted.is_empty(), "the UI calls commands that are not granted: {not_granted:?}");
    let not_called: Vec<&String> = listed.iter().filter(|c| !called.contains(*c)).collect();
    assert!(not_called.is_empty(), "granted commands nobody calls: {not_called:?}");
}
