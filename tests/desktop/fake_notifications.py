#!/usr/bin/python3
"""A fake org.freedesktop.Notifications service for the desktop test: it owns the name on the (private) session
bus, answers like a notification daemon, and appends every notification it receives to a JSON-lines file. The test
can click a notification as a person would (`Click` on the `org.leadline.FakeNotifications` interface): the
service then emits the specification's `ActionInvoked` signal with the `default` action."""
import json
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

LOG = sys.argv[1]


class Notifications(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, "/org/freedesktop/Notifications")
        self.next_id = 1
        self.shown = []  # (id, summary, actions)

    @dbus.service.method("org.freedesktop.Notifications", in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app_name, replaces_id, icon, summary, body, actions, hints, timeout):
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"app": str(app_name), "summary": str(summary), "body": str(body),
                                "actions": [str(a) for a in actions]}) + "\n")
        self.next_id += 1
        self.shown.append((self.next_id, str(summary), [str(a) for a in actions]))
        return dbus.UInt32(self.next_id)

    @dbus.service.method("org.leadline.FakeNotifications", in_signature="s", out_signature="s")
    def Click(self, text):
        """Clicks the newest notification whose summary contains `text` and that can be clicked (offers the
        `default` action); returns its summary, or "" when there is none."""
        for nid, summary, actions in reversed(self.shown):
            if text in summary and "default" in actions[::2]:
                self.ActionInvoked(dbus.UInt32(nid), "default")
                return summary
        return ""

    @dbus.service.signal("org.freedesktop.Notifications", signature="us")
    def ActionInvoked(self, nid, action_key):
        pass

    @dbus.service.method("org.freedesktop.Notifications", in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["body", "actions"]

    @dbus.service.method("org.freedesktop.Notifications", in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("leadline-test", "leadline", "1.0", "1.2")

    @dbus.service.method("org.freedesktop.Notifications", in_signature="u", out_signature="")
    def CloseNotification(self, id):
        pass


DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
name = dbus.service.BusName("org.freedesktop.Notifications", bus)
service = Notifications(bus)
open(LOG, "a").close()
print("fake notification service ready", flush=True)
GLib.MainLoop().run()
