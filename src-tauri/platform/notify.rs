//! Desktop notifications: on Linux the notification service over D-Bus (`notify-rust`), a click on one being the
//! specification's `default` action.
//!
//! The interface (what a port keeps): [`show`]. `notify-rust` also speaks macOS's and Windows' notification
//! centres; a port keeps this file with those back ends, or uses the notifications Tauri's plugin shows.

/// Shows a notification from `app_name`; `on_click`, when given, runs if the person clicks it. Returns at once:
/// the D-Bus calls, and waiting for a click (until the notification goes), run on a thread of their own.
pub fn show(app_name: &str, title: &str, body: &str, on_click: Option<Box<dyn FnOnce() + Send>>) {
    let (app_name, title, body) = (app_name.to_string(), title.to_string(), body.to_string());
    std::thread::spawn(move || {
        let mut n = notify_rust::Notification::new();
        n.appname(&app_name).summary(&title).body(&body);
        if on_click.is_some() {
            // The specification's `default` action: a click on the notification itself.
            n.action("default", "");
        }
        match n.show() {
            Ok(shown) => {
                if let Some(on_click) = on_click {
                    shown.wait_for_action(|action| {
                        if action == "default" {
                            on_click();
                        }
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot show a desktop notification"),
        }
    });
}
