"""The tray app on a real X screen with a real system tray (Xvfb and trayer).

Slow-ish (a fresh app per case, ~3 s each) and only meaningful with a tray: offscreen Qt has
none, and the quit that failed here never failed offscreen.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from xscreen import x_screen

QUIT_SCRIPT = """
import os, signal, sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QSystemTrayIcon
from ui.start import main

how = sys.argv[2]

def started(app):
    print("tray", QSystemTrayIcon.isSystemTrayAvailable(), app.has_tray, flush=True)

    def running():
        if app.service_state != "running":
            QTimer.singleShot(50, running)
            return
        app.window.bring_up()  # the browser on screen, as a person left it
        app.open_licence()

        def close_licence():
            app._licence_dialog.close()
            print("visible", app.window.isVisible(), flush=True)
            if how == "menu":
                QTimer.singleShot(200, app.menu.quit_action.trigger)
            else:
                QTimer.singleShot(200, lambda: os.kill(os.getpid(), signal.SIGTERM))

        QTimer.singleShot(400, close_licence)

    running()

code = main(home=sys.argv[1], tray=True, on_started=started)
print("exited", code, flush=True)
"""


@pytest.mark.parametrize("how", ["menu", "menu", "menu", "sigterm", "sigterm", "sigterm"])
def test_quit_ends_the_process_with_the_browser_open(tmp_path: Path, how: str) -> None:
    """Tray ▸ Quit and SIGTERM end the app with the browser on screen, after the Licence
    window was used. Before, the browser's close (which only hides it while a tray is there)
    refused Qt's quit in about half the tries: the window hid and the process stayed, holding
    the data folder. Three tries each: one try alone would pass half the time without the fix."""
    home = tmp_path / "data"
    with x_screen() as display:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        proc = subprocess.Popen(
            [sys.executable, "-c", QUIT_SCRIPT, str(home), how],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
        try:
            out, err = proc.communicate(timeout=60)  # normally ~3 s
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the app was still running 60 s after Quit ({how}): {out!r}")
    assert "tray True True" in out, err[-2000:]
    assert "visible True" in out, err[-2000:]
    assert proc.returncode == 0 and "exited 0" in out, err[-2000:]
    # The data folder is free again: another app may take it.
    from lexmem.config import Paths
    from ui.app import app_lock

    lock = app_lock(Paths(home).home)
    lock.acquire()  # raises at once while another process holds it (timeout 0)
    lock.release()


HOTKEY_SCRIPT = """
import sys
from PySide6.QtCore import QTimer
from ui.start import main

def started(app):
    print("hotkey", app.hotkey.active, app.hotkey.problem, flush=True)
    print("ready", flush=True)  # the test presses the keys now, from another X client

    def look():
        quick = app._quick
        if quick is not None and quick.isVisible():
            print("quick remember shown", flush=True)
            app.quit()
        else:
            QTimer.singleShot(50, look)

    look()

sys.exit(main(home=sys.argv[1], tray=True, on_started=started))
"""


def _press(display: str, sequence: list[str]) -> None:
    """Press and release keys as a person would, from a client of its own (XTest)."""
    from Xlib import XK, X
    from Xlib import display as xdisplay
    from Xlib.ext import xtest

    disp = xdisplay.Display(display)
    try:
        codes = [disp.keysym_to_keycode(XK.string_to_keysym(name)) for name in sequence]
        for code in codes:
            xtest.fake_input(disp, X.KeyPress, code)
        for code in reversed(codes):
            xtest.fake_input(disp, X.KeyRelease, code)
        disp.sync()
    finally:
        disp.close()


def test_ctrl_shift_m_opens_quick_remember_from_any_window(tmp_path: Path) -> None:
    """The tray menu shows Ctrl+Shift+M for Quick remember; it works with no lexmem window
    focused (before, only while the browser had focus: a Qt shortcut)."""
    with x_screen() as display:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        proc = subprocess.Popen(
            [sys.executable, "-c", HOTKEY_SCRIPT, str(tmp_path / "data")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )  # fmt: skip
        assert proc.stdout is not None
        lines: list[str] = []
        try:
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("ready"):
                    _press(display, ["Control_L", "Shift_L", "m"])
                    break
            out, err = proc.communicate(timeout=60)  # normally ~3 s
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"Quick remember did not open: {''.join(lines) + out!r}")
    out = "".join(lines) + out
    assert "hotkey True" in out, out + err[-2000:]
    assert "quick remember shown" in out and proc.returncode == 0, out + err[-2000:]


def test_a_shortcut_another_program_holds_is_said_not_faked(qtbot: object) -> None:
    """Where another program grabbed Ctrl+Shift+M first, lexmem says so and keeps the
    shortcut for its own windows rather than claiming a global one."""
    from PySide6.QtWidgets import QApplication

    if QApplication.platformName() != "offscreen":
        pytest.skip("runs in the offscreen test process")
    from ui.hotkey import GlobalHotkey, parse

    # Offscreen there is no X session to grab in: said, not pretended.
    hotkey = GlobalHotkey("Ctrl+Shift+M")
    assert not hotkey.start() and not hotkey.active
    assert "lexmem's windows only" in hotkey.problem
    assert parse("Ctrl+Shift+M") == (("Ctrl", "Shift"), "M")
    with pytest.raises(ValueError, match="unknown modifier"):
        parse("Hyper+M")


HOLDER_SCRIPT = """
import sys, time
from Xlib import X, XK, display
d = display.Display()
code = d.keysym_to_keycode(XK.string_to_keysym("m"))
for extra in (0, X.Mod2Mask, X.LockMask, X.Mod2Mask | X.LockMask):
    d.screen().root.grab_key(code, X.ControlMask | X.ShiftMask | extra, True,
                             X.GrabModeAsync, X.GrabModeAsync)
d.sync()
print("held", flush=True)
time.sleep(60)
"""

TAKEN_SCRIPT = """
from PySide6.QtWidgets import QApplication
from ui.hotkey import GlobalHotkey
app = QApplication([])
hotkey = GlobalHotkey("Ctrl+Shift+M")
print(hotkey.start(), hotkey.problem, flush=True)
hotkey.stop()
"""


def test_a_shortcut_held_by_another_program_is_reported(tmp_path: Path) -> None:
    with x_screen() as display:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        root = Path(__file__).resolve().parent.parent
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER_SCRIPT], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().startswith("held")
            proc = subprocess.run(
                [sys.executable, "-c", TAKEN_SCRIPT], env=env, capture_output=True,
                text=True, timeout=60, cwd=root, check=False,
            )  # fmt: skip
        finally:
            holder.kill()
            holder.wait()
    assert proc.stdout.startswith("False Ctrl+Shift+M is taken by another program"), (
        proc.stdout + proc.stderr[-2000:]
    )
