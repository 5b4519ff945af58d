//! The native confirmation dialog: a modal warning with the title's verb ("Replay", "Resolve", "Quit") on the
//! confirming button, left of Cancel, centred and kept above. On Linux a GTK message dialog, shown by a process
//! that may load GTK (the window's program, `leadline-window --ask`): the engine process never does.
//!
//! The interface (what a port keeps): [`ask`], blocking until a person answers. A macOS port shows an `NSAlert`
//! (or the native dialog through `rfd`, what Tauri's dialog plugin uses), a Windows port a `TaskDialog`; either may
//! show it in the engine process itself, as neither costs the memory GTK does.

use anyhow::Context as _;

/// Asks `message` under `title` and waits for the answer: `Ok(true)` for the title's verb, `Ok(false)` for Cancel
/// (or the dialog closed). Must run on the thread that owns the toolkit (here: a process's main thread).
pub fn ask(title: &str, message: &str) -> anyhow::Result<bool> {
    use gtk::prelude::*;
    gtk::init().context("cannot start GTK (no display?)")?;
    let dialog = gtk::MessageDialog::new(
        None::<&gtk::Window>,
        gtk::DialogFlags::MODAL,
        gtk::MessageType::Warning,
        gtk::ButtonsType::None,
        title,
    );
    dialog.set_title(title);
    dialog.set_secondary_text(Some(message));
    let verb = title.split_whitespace().next().unwrap_or("OK");
    dialog.add_button(verb, gtk::ResponseType::Ok);
    dialog.add_button("Cancel", gtk::ResponseType::Cancel);
    dialog.set_keep_above(true);
    dialog.set_position(gtk::WindowPosition::Center);
    let answer = dialog.run();
    // SAFETY: the dialog is ours, made above on this thread, and used no more after this.
    unsafe { dialog.destroy() };
    Ok(answer == gtk::ResponseType::Ok)
}
