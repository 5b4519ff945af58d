fn main() {
    // The app command manifest: an `allow-<command>` permission per desktop command, so the window's capability
    // (capabilities/default.json) grants exactly the commands the UI calls and nothing else.
    #[cfg(feature = "desktop")]
    {
        const COMMANDS: &[&str] = include!("shells/desktop/command_names.in");
        println!("cargo:rerun-if-changed=src-tauri/shells/desktop/command_names.in");
        let manifest = tauri_build::AppManifest::new().commands(COMMANDS);
        tauri_build::try_build(tauri_build::Attributes::new().app_manifest(manifest))
            .expect("the Tauri build step failed");
    }
}
