#!/usr/bin/python3
"""Closes X windows the way a window manager's close button does: a WM_DELETE_WINDOW client message (the window
is asked to close; the app decides what closing means). Xvfb runs no window manager, so the test sends it itself.
    close_window.py WINDOW_ID...
"""
import sys

from Xlib import X, display, protocol

d = display.Display()
protocols = d.intern_atom("WM_PROTOCOLS")
delete = d.intern_atom("WM_DELETE_WINDOW")
sent = 0
for wid in sys.argv[1:]:
    window = d.create_resource_object("window", int(wid))
    accepted = window.get_full_property(protocols, X.AnyPropertyType)
    if accepted is None or delete not in accepted.value:
        continue
    event = protocol.event.ClientMessage(window=window, client_type=protocols, data=(32, [delete, X.CurrentTime, 0, 0, 0]))
    window.send_event(event, event_mask=X.NoEventMask)
    sent += 1
d.flush()
if sent == 0:
    sys.exit("none of the windows accepts WM_DELETE_WINDOW")
print(f"asked {sent} window(s) to close")
