//! The layering the code promises (docs/architecture.md, "Layers"), checked on the source itself:
//!
//! - no import cycles among the crate's modules (each file is a module; a parent and the children it declares
//!   are one unit, so `use super::…` inside a module family is not a cycle);
//! - only the shells (the desktop app, `server.rs`, the HTTP adapter) import `api`;
//! - the folders are the layers: `platform`, `model`, `store`, `runtime`, `features`, `shells` (and `demo` beside
//!   them);
//! - imports only go down those layers (`platform`, then `model` and the clock, then `config`, `store`, `runtime`,
//!   `features`, the demo, `shells`), and the platform parts import nothing of the app; inside `features` the
//!   connectors (`targets`) import neither the worker nor the store, while the worker names no vendor;
//! - `Utc::now()` is read only by the clock and the demo (tests may use it);
//! - no environment variable, flag or file answers a confirmation in a person's place.
//!
//! It reads `use crate::…` paths (and `crate::…` paths in code) outside `#[cfg(test)]` modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const SRC: &str = "src-tauri";

/// Every `.rs` file under `src-tauri`.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(Path::new(SRC), &mut files);
    files
}

/// Every module file as `(module path, text without comments and test modules)`.
fn modules() -> BTreeMap<String, String> {
    let files = rust_files();
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(SRC).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if matches!(parts.last().map(String::as_str), Some("lib" | "main" | "build")) {
            continue;
        }
        if parts.last().map(String::as_str) == Some("mod") {
            parts.pop();
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let code: String =
            code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
        out.insert(parts.join("::"), code);
    }
    out
}

/// The module a `crate::a::b::Item` path names: its longest prefix that is a module.
fn module_of(path: &str, known: &BTreeMap<String, String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
    (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| known.contains_key(m))
}

/// Module → the modules it imports (`crate::` paths, braces expanded one level), parents and children left out.
fn imports(known: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in known {
        // `super::x` in `a::b` is `crate::a::x`.
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        let code = code.replace(
            "super::",
            &format!("crate::{}", if parent.is_empty() { String::new() } else { format!("{parent}::") }),
        );
        let mut rest = code.as_str();
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let end =
                rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{')).unwrap_or(rest.len());
            let path = &rest[..end];
            let mut targets = Vec::new();
            if let Some((head, _)) = path.split_once('{') {
                let close = rest.find('}').unwrap_or(rest.len());
                for item in rest[head.len() + 1..close].split(',') {
                    targets.push(format!("{head}{}", item.trim().split(['{', ' ']).next().unwrap_or_default()));
                }
            } else {
                targets.push(path.to_string());
            }
            for t in targets {
                let Some(target) = module_of(t.trim_end_matches(':'), known) else { continue };
                let family = target == *module
                    || module.starts_with(&format!("{target}::"))
                    || target.starts_with(&format!("{module}::"));
                if !family {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    edges
}

#[test]
fn the_modules_import_each_other_without_cycles() {
    let known = modules();
    let edges = imports(&known);
    assert!(
        edges.get("features::delivery::worker::target").is_some_and(|e| e.contains("features::targets")),
        "the reader finds imports"
    );
    // Depth-first search for a back edge; report the cycle it closes.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == next).unwrap();
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in known.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            if let Some(cycle) = visit(m, &edges, &mut state, &mut Vec::new()) {
                panic!("import cycle: {}", cycle.join(" → "));
            }
        }
    }
}

/// The layer of a module, by its top-level folder: each may import only the layers before it (and itself).
/// `platform` (the desk's OS parts: keyring, tray, dialog, start at login) is the lowest: the keyring is read by
/// `config` and the settings feature, so the folder must sit below them; it imports nothing of the app at all
/// ([`the_platform_parts_import_nothing_of_the_app`]), so that a port replaces it without touching the rest.
fn layer(module: &str) -> Option<(usize, &'static str)> {
    const LAYERS: [(&str, usize, &str); 9] = [
        ("platform", 0, "platform"),
        ("model", 1, "model"),
        // `clock` sits with `model`.
        ("clock", 1, "model"),
        ("config", 2, "config"),
        ("store", 3, "store"),
        ("runtime", 4, "runtime"),
        ("features", 5, "features"),
        ("demo", 6, "demo"),
        ("shells", 7, "shells"),
    ];
    let top = module.split("::").next()?;
    LAYERS.iter().find(|(folder, _, _)| *folder == top).map(|(_, rank, name)| (*rank, *name))
}

#[test]
fn imports_only_go_down() {
    let known = modules();
    let mut upward = Vec::new();
    for (from, to) in imports(&known) {
        let Some((low, low_name)) = layer(&from) else { continue };
        for target in to {
            let Some((high, high_name)) = layer(&target) else { continue };
            if high > low {
                upward.push(format!("{from} ({low_name}) imports {target} ({high_name})"));
            }
        }
    }
    assert!(upward.is_empty(), "imports that run back up the layers:\n{}", upward.join("\n"));
    // The ranks hold what the docs say.
    assert!(layer("clock").unwrap().0 < layer("config").unwrap().0);
    assert!(layer("features::delivery").unwrap().0 < layer("shells::api").unwrap().0);
    assert!(layer("platform::keyring").unwrap().0 < layer("config").unwrap().0);
}

/// The platform parts (`src-tauri/platform/`) import nothing of the app: their interfaces take and give plain
/// text, pixels and callbacks, so that a macOS or Windows port replaces those files and nothing else.
#[test]
fn the_platform_parts_import_nothing_of_the_app() {
    let known = modules();
    assert!(known.contains_key("platform::keyring"), "the reader finds the platform folder");
    let wrong: Vec<String> = imports(&known)
        .into_iter()
        .filter(|(from, _)| from == "platform" || from.starts_with("platform::"))
        .flat_map(|(from, to)| {
            to.into_iter().filter(|t| !t.starts_with("platform::")).map(move |t| format!("{from} imports {t}"))
        })
        .collect();
    assert!(wrong.is_empty(), "the platform parts import the app:\n{}", wrong.join("\n"));
}

#[test]
fn connectors_stand_apart_from_the_worker() {
    const VENDORS: [&str; 5] = ["generic", "hubspot", "salesforce", "pipedrive", "meta_lead"];
    let known = modules();
    let edges = imports(&known);
    let mut wrong = Vec::new();
    for (from, to) in &edges {
        for target in to {
            let connector = from.starts_with("features::targets");
            if connector && (target.starts_with("features::delivery") || target.starts_with("store")) {
                wrong.push(format!("the connector module {from} imports {target}"));
            }
            let worker = from.starts_with("features::delivery");
            if worker && VENDORS.iter().any(|v| target.starts_with(&format!("features::targets::{v}"))) {
                wrong.push(format!("the worker module {from} names the vendor module {target}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        edges.get("features::delivery::worker::target").is_some_and(|e| e.contains("features::targets")),
        "the check reads the worker's imports of the connectors"
    );
}

#[test]
fn only_the_shells_import_the_api() {
    let known = modules();
    // The shells are everything under `shells` (the desktop app and its tray, the server, the API and its adapters).
    let importers: Vec<String> = imports(&known)
        .into_iter()
        .filter(|(m, to)| to.iter().any(|t| t.starts_with("shells::api")) && !m.starts_with("shells::"))
        .map(|(m, _)| m)
        .collect();
    assert!(importers.is_empty(), "modules below the shells import api: {importers:?}");
}

#[test]
fn the_folders_are_the_layers() {
    let mut top: Vec<String> = std::fs::read_dir(SRC)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    top.sort();
    let expected = [
        "build.rs",
        "clock.rs",
        "config",
        "demo",
        "features",
        "lib.rs",
        "main.rs",
        "model",
        "platform",
        "runtime",
        "shells",
        "store",
        "window_main.rs",
    ];
    assert_eq!(top, expected, "a newcomer reads the architecture in src-tauri's folder names");
}

#[test]
fn only_the_clock_and_the_demo_read_the_system_time() {
    let readers: Vec<String> = modules()
        .into_iter()
        .filter(|(m, code)| code.contains("Utc::now()") && m != "clock" && m != "demo" && !m.starts_with("demo::"))
        .map(|(m, _)| m)
        .collect();
    assert!(readers.is_empty(), "read the injected clock instead of Utc::now(): {readers:?}");
}

/// Unit tests too stand at a time they choose: the functions they test take `now` as an argument, and a test that
/// read the system time would test a different moment on every run.
#[test]
fn unit_tests_do_not_read_the_system_time() {
    let files = rust_files();
    let readers: Vec<String> = files
        .into_iter()
        .filter(|f| !f.starts_with(Path::new(SRC).join("demo")) && f != &Path::new(SRC).join("clock.rs"))
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines().any(|l| !l.trim_start().starts_with("//") && l.contains("Utc::now()"))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(readers.is_empty(), "stand at a fixed instant instead of Utc::now(): {readers:?}");
}

/// Every source file of the programs (`leadline`, `leadline-window` and the library they share) as
/// `(path under src-tauri, code)`: comments and every `#[cfg(test)]` item (a test module, a test-only function)
/// left out, wherever in the file it stands.
fn program_code() -> Vec<(String, String)> {
    /// The text without the item each `#[cfg(test)]` stands on: up to its `;`, or to the brace closing its body.
    fn without_test_items(code: &str) -> String {
        let mut out = String::new();
        let mut rest = code;
        while let Some(at) = rest.find("#[cfg(test)]") {
            out.push_str(&rest[..at]);
            rest = &rest[at + "#[cfg(test)]".len()..];
            let body = rest.find('{');
            match rest.find(';') {
                Some(semi) if body.is_none_or(|b| semi < b) => rest = &rest[semi + 1..],
                _ => {
                    let Some(open) = body else { return out };
                    let mut depth = 0usize;
                    let mut end = rest.len();
                    for (i, c) in rest[open..].char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' => {
                                depth -= 1;
                                if depth == 0 {
                                    end = open + i + 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    rest = &rest[end..];
                }
            }
        }
        out.push_str(rest);
        out
    }
    let mut files = rust_files();
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let code: String =
                text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
            (file.strip_prefix(SRC).unwrap().to_string_lossy().into_owned(), without_test_items(&code))
        })
        .collect()
}

/// What each environment variable the programs read is for. None answers a question a person is asked: a new
/// read must be added here, with its purpose, by someone who has checked that.
const ENVIRONMENT_READ: &[(&str, &str)] = &[
    ("LEADLINE_CONFIG", "the configuration file (`--config`)"),
    ("LEADLINE_DATABASE_URL", "the database (`--database-url`)"),
    ("LEADLINE_DEMO_CLOCK_OFFSET", "where in its schedule the demo starts"),
    ("LEADLINE_DEMO_MISSING_DATA", "off: the demo CRM target without its missing_data setting, for the end-to-end specs that need phone dead letters"),
    ("HOSTNAME", "the worker's name on its leases"),
    ("USER", "the desktop operator's name in the audit"),
    ("USERNAME", "the desktop operator's name in the audit"),
    ("DBUS_SESSION_BUS_ADDRESS", "whether the OS keyring can be reached"),
    ("WEBKIT_DISABLE_COMPOSITING_MODE", "left as the user set it (window_main.rs)"),
    ("ENV_URL", "the bridge's address, handed to the window by the engine"),
    ("ENV_SECRET", "the bridge's secret, handed to the window by the engine"),
    ("var", "a secret named in the configuration (`Config::secret`, `secret_source`)"),
];

/// Issue #34: `LEADLINE_CONFIRM=yes` once answered the desktop's native confirmation without asking anyone. No
/// environment variable, flag or file may make a program skip a confirmation: the programs read only the variables
/// listed above, only the native dialogs implement `Confirm` in program code, and the scripted test double is
/// named by no program code but its own definition (tests/desktop/ click the real dialog, with the old variable
/// set to show it is ignored).
#[test]
fn no_switch_answers_a_confirmation() {
    let code = program_code();

    // The variables read: `env::var(NAME)`, `env::var_os(NAME)`, and clap's `env = "NAME"`.
    let mut read = BTreeMap::<String, BTreeSet<String>>::new();
    for (file, text) in &code {
        for call in ["env::var(", "env::var_os(", "env::vars(", "env::vars_os(", "env = \""] {
            for (at, _) in text.match_indices(call) {
                // `env = "…"` is clap's attribute, not the end of a name such as `token_env = "…"`.
                if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let arg = &text[at + call.len()..];
                let arg = arg[..arg.find([')', ',', ']']).unwrap_or(arg.len())].trim();
                let name = arg.trim_matches('"').rsplit("::").next().unwrap_or_default();
                let name = if name.is_empty() { format!("every variable ({call}…)") } else { name.to_string() };
                read.entry(name).or_default().insert(file.clone());
            }
        }
    }
    assert!(
        read.contains_key("HOSTNAME") && read.contains_key("LEADLINE_CONFIG") && read.contains_key("ENV_SECRET"),
        "the reader finds the variables read: {read:?}"
    );
    let unexplained: Vec<String> = read
        .iter()
        .filter(|(name, _)| !ENVIRONMENT_READ.iter().any(|(known, _)| known == name))
        .map(|(name, files)| format!("{name} (in {})", files.iter().cloned().collect::<Vec<_>>().join(", ")))
        .collect();
    assert!(
        unexplained.is_empty(),
        "the programs read environment variables not in ENVIRONMENT_READ: {unexplained:?} — none may answer a \
         confirmation; add each with its purpose once checked"
    );

    // Only the native dialogs confirm in program code.
    let mut confirmers = Vec::new();
    for (file, text) in &code {
        for (at, _) in text.match_indices("impl Confirm for ") {
            let rest = &text[at + "impl Confirm for ".len()..];
            confirmers.push(format!("{file}: {}", rest[..rest.find([' ', '{']).unwrap_or(rest.len())].trim()));
        }
    }
    assert_eq!(
        confirmers,
        [
            "shells/api/confirm.rs: ScriptedConfirm",
            "shells/desktop/host.rs: DialogConfirm",
            "shells/desktop/mod.rs: DialogConfirm",
        ],
        "a new way to answer a confirmation in program code: it must ask a person"
    );

    // The scripted double is defined in the api (`shells/api/confirm.rs`, re-exported as `api::ScriptedConfirm`
    // for the tests) and used by tests only.
    let users: Vec<&String> = code
        .iter()
        .filter(|(file, text)| {
            text.contains("ScriptedConfirm") && file != "shells/api/confirm.rs" && file != "shells/api/mod.rs"
        })
        .map(|(file, _)| file)
        .collect();
    assert!(users.is_empty(), "program code names the scripted confirmation (tests only): {users:?}");
    let source = |name: &str| &code.iter().find(|(file, _)| file == name).expect("the api's source").1;
    assert_eq!(source("shells/api/mod.rs").matches("ScriptedConfirm").count(), 1, "the api only re-exports it");
    let api = source("shells/api/confirm.rs");
    let named = api.matches("ScriptedConfirm").count();
    assert_eq!(named, 3, "the api names ScriptedConfirm only in its definition (struct, impl, impl Confirm)");
}
