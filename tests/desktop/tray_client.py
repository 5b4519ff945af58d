#!/usr/bin/python3
"""Reads and clicks the app's tray icon the way a desktop panel does, over D-Bus: the StatusNotifierItem's
properties (its icon, by name or as pixels) and its menu (com.canonical.dbusmenu).

    tray_client.py ITEMS_FILE state          -> prints `icon <path>` then one `menu <label>` line per item
    tray_client.py ITEMS_FILE click LABEL    -> clicks the first menu item whose label starts with LABEL
"""
import signal
import subprocess
import sys
import time

import dbus

# Output piped into `grep -q` may close early: end quietly then.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

items_file, command = sys.argv[1], sys.argv[2]
with open(items_file, encoding="utf-8") as f:
    lines = [line.split() for line in f if line.strip()]
if not lines:
    sys.exit("no tray item registered")
name, path = lines[-1]
bus = dbus.SessionBus()
item = bus.get_object(name, path)
props = dbus.Interface(item, dbus.PROPERTIES_IFACE)
menu_path = props.Get("org.kde.StatusNotifierItem", "Menu")
menu = dbus.Interface(bus.get_object(name, menu_path), "com.canonical.dbusmenu")


def entries():
    """(id, label, toggle-state) of every menu item, in order."""
    _revision, layout = menu.GetLayout(0, -1, dbus.Array([], signature="s"))
    out = []

    def walk(node):
        node_id, node_props, children = node
        label = str(node_props.get("label", "")).replace("_", "")
        if node_id != 0 and node_props.get("type", "") != "separator":
            out.append((int(node_id), label, int(node_props.get("toggle-state", -1))))
        for child in children:
            walk(child)

    walk(layout)
    return out


def icon_file():
    """The icon as a panel draws it: a themed name or file (`IconName`), else the largest of the ARGB32 pixmaps
    (`IconPixmap`, network byte order), written out as a PNG beside the items file."""
    name = str(props.Get("org.kde.StatusNotifierItem", "IconName"))
    if name:
        return name
    pixmaps = props.Get("org.kde.StatusNotifierItem", "IconPixmap")
    if not pixmaps:
        return ""
    width, height, data = max(pixmaps, key=lambda p: int(p[0]) * int(p[1]))
    argb = bytes(int(b) for b in data)
    rgba = b"".join(argb[i + 1 : i + 4] + argb[i : i + 1] for i in range(0, len(argb), 4))
    raw, png = f"{items_file}.icon.rgba", f"{items_file}.icon.png"
    with open(raw, "wb") as f:
        f.write(rgba)
    subprocess.run(["convert", "-size", f"{int(width)}x{int(height)}", "-depth", "8", f"rgba:{raw}", png], check=True)
    return png


if command == "state":
    print("icon", icon_file())
    for _id, label, toggle in entries():
        print("menu", label + (f" [{'x' if toggle == 1 else ' '}]" if toggle >= 0 else ""))
elif command == "click":
    wanted = sys.argv[3]
    for node_id, label, _toggle in entries():
        if label.startswith(wanted):
            menu.Event(node_id, "clicked", dbus.Int32(0, variant_level=1), dbus.UInt32(int(time.time())))
            print("clicked", label)
            break
    else:
        sys.exit(f"no menu item starting with {wanted!r}: {[e[1] for e in entries()]}")
else:
    sys.exit(f"unknown command {command}")
