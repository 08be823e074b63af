"""A shortcut that works from any window: Quick remember's Ctrl+Shift+M on X11.

Qt's shortcuts fire only while one of the app's own windows has focus, but the tray menu
offers Quick remember as the thing to press while working elsewhere. On an X11 session
the key is grabbed on the root window over a connection of its own (python-xlib) and
waited for on a thread; each press reaches the UI thread as a queued :attr:`activated`.

Wayland gives a program no such grab (its portal for global shortcuts is not in Qt 6.8),
and another program may hold the same keys already: :meth:`GlobalHotkey.start` then says
why in :attr:`GlobalHotkey.problem` and the shortcut works inside lexmem's windows only.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication

log = logging.getLogger("lexmem.ui")

#: Qt's names of the modifiers a hotkey may use, in the order Qt writes them.
_MODIFIERS = ("Ctrl", "Shift", "Alt", "Meta")


def parse(sequence: str) -> tuple[tuple[str, ...], str]:
    """("Ctrl+Shift+M") → (("Ctrl", "Shift"), "M"); a one-line ValueError when it is not
    modifiers and one key."""
    parts = [p.strip() for p in sequence.split("+")]
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"not a shortcut of modifiers and one key: {sequence!r}")
    *mods, key = parts
    unknown = [m for m in mods if m not in _MODIFIERS]
    if unknown:
        raise ValueError(f"unknown modifier {unknown[0]!r} in {sequence!r}")
    return tuple(mods), key


class GlobalHotkey(QObject):
    """One key combination grabbed for the whole X session while started."""

    activated = Signal()

    def __init__(self, sequence: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.mods, self.key = parse(sequence)
        self.sequence = sequence
        self.problem = ""  # why it is not global, once start() said no
        self._thread: threading.Thread | None = None
        self._stop_r, self._stop_w = -1, -1
        self._display: Any = None

    @property
    def active(self) -> bool:
        return self._thread is not None

    def start(self) -> bool:
        """Grab the keys; False (with :attr:`problem` set) where that cannot be done."""
        if self._thread is not None:
            return True
        platform = QGuiApplication.platformName()
        if platform != "xcb" or not os.environ.get("DISPLAY"):
            self.problem = f"{self.sequence} works in lexmem's windows only on this display"
            return False
        try:
            from Xlib import XK, X, error
            from Xlib import display as xdisplay
        except ImportError:
            self.problem = "python-xlib is not installed: the shortcut works in lexmem only"
            return False
        try:
            disp = xdisplay.Display()
        except (error.DisplayError, error.XauthError, OSError) as exc:
            self.problem = f"could not reach the X display: {exc}"
            return False
        keysym = XK.string_to_keysym(self.key.lower() if len(self.key) == 1 else self.key)
        keycode = disp.keysym_to_keycode(keysym) if keysym else 0
        if not keycode:
            disp.close()
            self.problem = f"this keyboard has no key {self.key!r}"
            return False
        mask = 0
        for mod in self.mods:
            mask |= {"Ctrl": X.ControlMask, "Shift": X.ShiftMask, "Alt": X.Mod1Mask,
                     "Meta": X.Mod4Mask}[mod]  # fmt: skip
        root = disp.screen().root
        caught = error.CatchError(error.BadAccess)
        # Num Lock and Caps Lock are modifiers to X: grab with each of them on as well.
        for extra in (0, X.Mod2Mask, X.LockMask, X.Mod2Mask | X.LockMask):
            root.grab_key(keycode, mask | extra, True, X.GrabModeAsync, X.GrabModeAsync,
                          onerror=caught)  # fmt: skip
        disp.sync()
        if caught.get_error() is not None:
            for extra in (0, X.Mod2Mask, X.LockMask, X.Mod2Mask | X.LockMask):
                root.ungrab_key(keycode, mask | extra)
            disp.close()
            self.problem = f"{self.sequence} is taken by another program"
            return False
        self._display = disp
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(
            target=self._wait, args=(disp, X.KeyPress, error), name="lexmem-hotkey", daemon=True
        )
        self._thread.start()
        self.problem = ""
        log.info("[MEM:UI] %s is grabbed for Quick remember", self.sequence)
        return True

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        os.write(self._stop_w, b"x")
        thread.join(5)
        for fd in (self._stop_r, self._stop_w):
            os.close(fd)
        self._display.close()  # the server drops the grabs with the connection
        self._display = None

    def _wait(self, disp: Any, key_press: int, error: Any) -> None:
        # Constraint: only this thread reads the connection while it runs; the UI thread
        # touches it again in stop(), after this loop has returned.
        fd = disp.fileno()
        while True:
            if not disp.pending_events():
                ready, _, _ = select.select([fd, self._stop_r], [], [])
                if self._stop_r in ready:
                    return
            try:
                event = disp.next_event()
            except (error.ConnectionClosedError, OSError) as exc:  # the display went away
                log.warning("the global shortcut stopped: %s", exc)
                return
            if event.type == key_press:
                self.activated.emit()  # queued: the receiver lives on the UI thread
