//! A GTK process with a tray icon (AppIndicator, as Tauri's tray uses) and one desktop notification, and nothing
//! else: its memory, measured by `measure.sh`, is what a WebKit-free tray process adds to the engine.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // A tray process draws no GL: without this, GTK probes GLX at start and a software driver maps 43 MiB of LLVM.
    std::env::set_var("GDK_GL", "disable");
    gtk::init().expect("no display");
    let menu = tray_icon::menu::Menu::new();
    menu.append(&tray_icon::menu::MenuItem::new("Leadline — all delivered", false, None)).unwrap();
    menu.append(&tray_icon::menu::MenuItem::new("Open Leadline", true, None)).unwrap();
    menu.append(&tray_icon::menu::MenuItem::new("Quit Leadline…", true, None)).unwrap();
    let icon = tray_icon::Icon::from_rgba(vec![128u8; 64 * 64 * 4], 64, 64).unwrap();
    let _tray = tray_icon::TrayIconBuilder::new()
        .with_menu(Box::new(menu))
        .with_icon(icon)
        .with_tooltip("Leadline")
        .build()
        .expect("no tray icon");
    std::thread::spawn(|| {
        let _ = notify_rust::Notification::new().summary("Leadline").body("tray probe").show();
    });
    eprintln!("tray up");
    gtk::main();
}
