//! The typed contract with the UI: `ui/src/lib/api/wire.ts` is generated from the Rust DTOs (ts-rs) and
//! committed. This test fails when it is stale; `UPDATE_TS_TYPES=1 cargo test --test ts_contract` rewrites it.
//!
//! 64-bit integers are declared as `number`: JSON carries them as numbers, and Leadline's ids and counts stay
//! far below 2^53.

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
use leadline::store::ChannelTrouble;
use leadline::store::{
    AlertKind, AlertState, DeliveryState, ErrorClass, Held, QueueHealth, ReplayEventKind, ReplayOutcome, ReplayPhase,
    ReplayStatus, Resolution, ResolutionFilter, Reveal, Severity, TargetHealth,
};
use leadline::store::{LeadMatch, LeadRecord, LeadStatus, LeadStep};
use leadline::targets::{ConnectionCheck, RequestPreview};
use ts_rs::TS;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ui/src/lib/api/wire.ts");

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

#[test]
fn committed_typescript_types_match_the_rust_dtos() {
    let fresh = generated();
    if std::env::var_os("UPDATE_TS_TYPES").is_some() {
        std::fs::write(PATH, &fresh).expect("write wire.ts");
        return;
    }
    let committed = std::fs::read_to_string(PATH).unwrap_or_default();
    assert!(
        committed == fresh,
        "ui/src/lib/api/wire.ts is stale: run `UPDATE_TS_TYPES=1 cargo test --no-default-features --test ts_contract` and commit it"
    );
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

/// The window may call exactly the commands the UI calls: the command list the build turns into permissions, the
/// desktop's handlers (the window's own, and those it sends on to the engine), the window's capability (`allow-<command>`, nothing else but its events) and the UI's
/// `call('…')` sites agree.
#[test]
fn the_window_is_granted_exactly_the_commands_the_ui_calls() {
    let read = |p: &str| std::fs::read_to_string(format!("{}/{p}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let listed = names_in(&read("src-tauri/shells/desktop/command_names.in"), "&[", "]", "\"NAME\"");
    let desktop = read("src-tauri/shells/desktop/mod.rs");
    let mut handled = names_in(&desktop, "generate_handler![", "]", "\n            NAME,");
    handled.extend(names_in(&desktop, "generate_handler![", "]", "\n            desk::NAME,"));
    // The rest the window sends on to the engine process (`shells/window/commands.rs`, `route`).
    handled.extend(listed.iter().filter(|c| leadline::shells::window::commands::route(c).is_some()).cloned());
    let calls: String = ["ui/src/lib/backend-tauri.ts", "ui/src/lib/backend-desk.ts"]
        .iter()
        .flat_map(|f| read(f).lines().filter(|l| l.contains("call<")).map(str::to_string).collect::<Vec<_>>())
        .collect();
    let called = names_in(&format!("\u{1}{calls}\u{2}"), "\u{1}", "\u{2}", ">('NAME'");
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
    assert!(called.iter().all(|c| listed.contains(c)), "the UI calls a command that is not granted: {called:?}");
    assert_eq!(called.len(), listed.len(), "a command nobody calls: {called:?} vs {listed:?}");
}
