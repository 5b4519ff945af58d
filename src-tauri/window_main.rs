//! The `leadline-window` program: the desktop app's window (Tauri 2 on WebKitGTK), apart from `leadline` so that
//! the engine, which stays running in the tray, never loads WebKit (`shells/desktop/mod.rs`).
//!
//! - Started by `leadline` (the bridge's address and secret in its environment): the window of Leadline running
//!   here; it ends when the window is closed.
//! - `--one-process [--hidden]`: the first start's question, or a desk of a team server, in this one process.
//! - `--ask TITLE MESSAGE`: the engine's confirmation dialog; the exit status is the answer (0 yes, 1 no).
//! - Anything else (started by hand, or by a login item written by a team desk): `leadline` is started in its
//!   place with the same arguments, and decides.

use std::os::unix::process::CommandExt;

use leadline::desktop::{self, host};

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| leadline::default_log_filter().into()),
        )
        .with_writer(std::io::stderr)
        .init();
    lighter_webview();
    // The window is Leadline's to a dock: its WM_CLASS is `leadline` (the desktop entry's StartupWMClass, the name
    // of the program the entry starts), not this program's name.
    gtk::glib::set_prgname(Some("leadline"));
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(desktop::ASK_ARG) {
        let (title, message) = (args.get(1).map_or("Leadline", String::as_str), args.get(2).map_or("", String::as_str));
        return match leadline::platform::dialog::ask(title, message) {
            Ok(true) => std::process::ExitCode::SUCCESS,
            Ok(false) => std::process::ExitCode::from(1),
            Err(e) => {
                eprintln!("leadline-window: {e:#}");
                std::process::ExitCode::from(2)
            }
        };
    }
    let result = if std::env::var_os(leadline::shells::window::bridge::ENV_URL).is_some() {
        desktop::run_window()
    } else if args.first().map(String::as_str) == Some("--one-process") {
        desktop::run_in_one_process(args.iter().any(|a| a == "--hidden"))
    } else {
        host::sibling("leadline")
            .and_then(|leadline| Err(anyhow::Error::new(std::process::Command::new(leadline).args(&args).exec())))
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leadline-window: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// On Linux the window is WebKitGTK, whose accelerated compositing keeps a GPU (or, without one, Mesa's llvmpipe)
/// rendering context in the web process. A desk of tables and small charts does not need it, and without it the
/// window's processes hold about 150 MiB less (measured under Xvfb, `benches/desk_memory.sh desktop`: 600 → 450
/// MiB summed over the process tree). Set here, before GTK or any thread starts; a user who sets the variable
/// (`WEBKIT_DISABLE_COMPOSITING_MODE=0` turns compositing back on) keeps their choice.
fn lighter_webview() {
    if std::env::var_os("WEBKIT_DISABLE_COMPOSITING_MODE").is_none() {
        std::env::set_var("WEBKIT_DISABLE_COMPOSITING_MODE", "1");
    }
}
