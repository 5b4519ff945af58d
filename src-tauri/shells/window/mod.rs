//! What the desktop app's window asks of Leadline running here, in either process layout: the window's commands by
//! name ([`commands`]), and the engine's door for a window in a process of its own ([`bridge`]).
//!
//! No Tauri or GTK here (the engine process never loads a web view, and the headless build compiles and tests
//! this): the desktop shell (`shells/desktop/`) wires it to the window and to the tray.

pub mod bridge;
pub mod commands;
