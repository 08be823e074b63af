"""Render the app's windows to PNG, in the light and the dark theme.

    python tools/screenshots.py [--out DIR] [--memories N | --quick] [--data DIR] [--display]
    (``make screenshots`` / ``./dev screenshots``)

It builds a realistic data folder with tools/demo_data.py (thousands of memories, twelve
projects, five Claude Code sessions through the hook; ``--quick``: sixty memories), or
uses one it built before (``--data``), opens the real app on it and saves: the tray menu,
the memory browser (a fresh row, a long title, a supersede chain, a captured correction,
a configuration memory, a search, the project filter's list, the Edit menu), the review,
audit, sessions and insights tabs, quick remember and its project list, every settings
tab, the licence window, the upgrade prompt and the About box.

Offscreen by default. ``--display`` starts its own X screen (Xvfb on :78, or
``--display-name``) with a system tray (trayer), runs the app there with its tray icon,
and photographs the whole screen for each view too (``screen-*.png``). Both stop by
process id when it ends. Each view's worst block of the UI thread while it loaded is
printed (``blocked``) and kept in ``views.json`` beside the pictures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

SIZE = (1280, 800)
TRAY_HEIGHT = 28  # trayer's panel, across the top right of the X screen


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def x_screen(display: str) -> Iterator[None]:
    """Xvfb with trayer on it, stopped by process id; the app is pointed at it."""
    number = display.lstrip(":")
    if Path(f"/tmp/.X11-unix/X{number}").exists() or Path(f"/tmp/.X{number}-lock").exists():
        raise SystemExit(f"error: display {display} is in use: pick another with --display-name")
    quiet = subprocess.DEVNULL
    procs: list[subprocess.Popen[bytes]] = []
    try:
        xvfb = ["Xvfb", display, "-screen", "0", f"{SIZE[0]}x{SIZE[1]}x24", "-nolisten", "tcp"]
        procs.append(subprocess.Popen(xvfb, stdout=quiet, stderr=quiet))
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{number}").exists():
            if procs[0].poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"error: Xvfb did not start on {display}")
            time.sleep(0.05)
        env = {**os.environ, "DISPLAY": display}
        trayer = ["trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel",
                  "--width", "120", "--height", str(TRAY_HEIGHT), "--SetDockType", "true"]  # fmt: skip
        procs.append(subprocess.Popen(trayer, env=env, stdout=quiet, stderr=quiet))
        os.environ.update(DISPLAY=display, QT_QPA_PLATFORM="xcb")
        yield
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Shooter:
    """Runs the app on a data folder and saves each view, with its worst UI block."""

    def __init__(self, out: Path, *, on_screen: bool) -> None:
        from PySide6.QtCore import QElapsedTimer, QTimer, qInstallMessageHandler
        from PySide6.QtWidgets import QApplication, QSystemTrayIcon

        def quiet(_mode: Any, _context: Any, message: str) -> None:
            # The offscreen platform says so each time a window is raised or grabs the
            # keyboard; anything else is worth seeing.
            if not message.startswith("This plugin does not support"):
                log(message)

        qInstallMessageHandler(quiet)
        qt = QApplication.instance() or QApplication(sys.argv[:1])
        assert isinstance(qt, QApplication)
        self.qt = qt
        self.out = out
        self.on_screen = on_screen
        self.views: list[dict[str, Any]] = []
        # The UI thread's longest gap between two 10 ms ticks: how long it was blocked.
        self._clock = QElapsedTimer()
        self._last = 0
        self.worst = 0
        self._ticker = QTimer()
        self._ticker.setInterval(10)
        self._ticker.timeout.connect(self._tick)
        if on_screen:  # trayer docks a moment after it starts
            deadline = time.monotonic() + 10
            while not QSystemTrayIcon.isSystemTrayAvailable():
                if time.monotonic() > deadline:
                    raise SystemExit("error: no system tray appeared on the X screen")
                self.pause(100)

    def _tick(self) -> None:
        now = self._clock.elapsed()
        self.worst = max(self.worst, now - self._last)
        self._last = now

    def pause(self, ms: int) -> None:
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    def settle(self, app: Any, until: Callable[[], bool] = lambda: True, ms: int = 60_000) -> None:
        """Run the loop until ``until()`` holds and nothing is running in the background."""
        waited = 0
        while waited < ms and not (until() and app.ctx.runner.pending == 0):
            self.pause(50)
            waited += 50
        for _ in range(5):  # let queued repaints land
            self.pause(20)

    @contextmanager
    def timed(self) -> Iterator[None]:
        """Measure the worst UI block from here to the end of the block."""
        self._clock.start()
        self._last = 0
        self.worst = 0
        self._ticker.start()
        t0 = time.perf_counter()
        yield
        self._ticker.stop()
        self._tick()
        self.first_call_ms = (time.perf_counter() - t0) * 1000

    def save(self, widget: Any, name: str, theme: str, blocked_ms: float | None = None) -> None:
        path = self.out / f"{name}-{theme}.png"
        widget.grab().save(str(path))
        entry: dict[str, Any] = {"view": name, "theme": theme, "png": str(path)}
        if blocked_ms is not None:
            entry["blocked_ms"] = round(blocked_ms)
        if self.on_screen:
            screen = self.qt.primaryScreen().grabWindow(0)
            shot = self.out / f"screen-{name}-{theme}.png"
            screen.save(str(shot))
            entry["screen_png"] = str(shot)
        self.views.append(entry)
        note = f"  (blocked {blocked_ms:.0f} ms)" if blocked_ms is not None else ""
        log(f"  {path}{note}")


def find_ids(lm: Any) -> dict[str, str]:
    """The memories worth showing in the detail panel, found by what they are."""
    from lexmem.api import MemoryFilter
    from lexmem.models import MemorySource, MemoryStatus

    found: dict[str, str] = {}
    pinned = lm.memories_for(lm.list_ids(MemoryFilter(pinned=True)))
    long_titles = sorted((m for m in pinned if len(m.title) > 120), key=lambda m: m.title)
    if long_titles:
        found["long-title"] = long_titles[0].id
    superseded = lm.memories_for(lm.list_ids(MemoryFilter(status=MemoryStatus.SUPERSEDED)))
    newer = {m.id: m.superseded_by for m in superseded}

    def head(mid: str) -> str:
        while newer.get(mid):
            mid = str(newer[mid])
        return mid

    # The longest chain's newest version: the one with the most versions before it.
    heads = [head(m.id) for m in superseded]
    if heads:
        found["chain"] = max(sorted(set(heads)), key=heads.count)
    for source, name in ((MemorySource.CORRECTION, "correction"),
                         (MemorySource.CONFIGURATION, "configuration")):  # fmt: skip
        for session in lm.sessions():
            ids = lm.list_ids(MemoryFilter(source=source, session_id=session.id))
            if ids:
                found[name] = ids[0]
                break
        else:
            ids = lm.list_ids(MemoryFilter(source=source))
            if ids:
                found[name] = ids[0]
    return found


def render(shooter: Shooter, home: Path) -> None:
    from PySide6.QtCore import QPoint, QTimer
    from PySide6.QtWidgets import QApplication, QMenu, QMessageBox

    from lexmem.api import Lexmem
    from lexmem.licence import CAPTURE
    from ui.app import App
    from ui.theme import apply_theme

    qt = shooter.qt
    assert isinstance(qt, QApplication)
    lm = Lexmem.open(home)
    app = App(lm, tray=shooter.on_screen)  # the capture service runs, as in the real app
    window = app.window
    page = window.memories
    with shooter.timed():
        app.start(show_window=True)
        if shooter.on_screen:  # clear of the tray's panel, so both are in the photographs
            window.move(0, TRAY_HEIGHT)
        window.resize(*SIZE)
        shooter.settle(app, lambda: page.model.rowCount() > 0)
    active = lm.status_counts()["active"]
    log(f"the browser opened on {active:,} active memories (blocked {shooter.worst} ms)")
    ids = find_ids(lm)

    def view(name: str, theme: str, act: Callable[[], None], *, widget: Any = None,
             until: Callable[[], bool] = lambda: True) -> None:  # fmt: skip
        with shooter.timed():
            act()
            shooter.settle(app, until)
        shooter.save(widget or window, name, theme, float(shooter.worst))

    def popup(name: str, theme: str, menu: QMenu, at: QPoint) -> None:
        menu.popup(at)
        shooter.settle(app)
        shooter.save(menu, name, theme)
        menu.hide()

    def modal(name: str, theme: str, opener: Callable[[], None]) -> None:
        """A dialog that runs its own loop: photographed and closed from inside it."""

        def shoot() -> None:
            box = QApplication.activeModalWidget()
            if box is None:
                QTimer.singleShot(50, shoot)
                return
            shooter.pause(200)
            shooter.save(box, name, theme)
            box.close()

        QTimer.singleShot(100, shoot)
        opener()

    for theme in ("light", "dark"):
        apply_theme(qt, theme)
        log(f"{theme} theme:")

        if app.tray is not None and app._tray_menu is not None:
            rect = app.tray.geometry()
            popup("tray-menu", theme, app._tray_menu, rect.bottomLeft())
        else:
            menu = QMenu()
            app.menu.fill(menu)
            menu.adjustSize()
            popup("tray-menu", theme, menu, QPoint(SIZE[0] - menu.width(), TRAY_HEIGHT))

        # The tray menu's submenus: the capture modes, and the repositories agents used.
        for name, sub in (("tray-capture-mode", app.menu.mode_menu),
                          ("tray-repositories", app.menu.repos_menu)):  # fmt: skip
            sub.aboutToShow.emit()  # as when the pointer opens it
            sub.adjustSize()
            popup(name, theme, sub, QPoint(SIZE[0] - 300 - sub.width(), TRAY_HEIGHT + 80))

        view("browser", theme, lambda: window.show_tab("memories"),
             until=lambda: page.model.rowCount() > 0)  # fmt: skip
        first = lm.list_ids()[0]
        view("browser-newest", theme, partial(page.select, first))
        for name in ("long-title", "chain", "correction", "configuration"):
            if name in ids:
                view(f"browser-{name}", theme, partial(page.select, ids[name]))
        view("browser-search", theme, lambda: page.set_query("which database does the shop use"),
             until=lambda: page.model.rowCount() > 0)  # fmt: skip
        page.set_query("")
        shooter.settle(app)
        combo = page.project_filter
        combo.showPopup()
        shooter.settle(app)
        shooter.save(combo.view().window(), "browser-projects", theme)
        combo.hidePopup()
        edit_menu = next(a.menu() for a in window.menuBar().actions() if "Edit" in a.text())
        assert isinstance(edit_menu, QMenu)
        popup("edit-menu", theme, edit_menu, window.mapToGlobal(QPoint(60, 24)))

        for tab in ("review", "audit", "sessions", "insights"):
            view(tab, theme, partial(window.show_tab, tab))
        sessions = window.sessions.sessions()
        if sessions:
            busiest = max(sessions, key=lambda s: (s.memory_count, s.event_count))

            def open_busiest(sid: str = busiest.id) -> None:
                window.show_tab("sessions")
                window.sessions.open_session(sid)

            view("sessions-open", theme, open_busiest)

        with shooter.timed():
            app.quick_remember()
            quick = app._quick
            quick.text.setPlainText("Always run the database migrations before the deploy")
            shooter.settle(app)
        shooter.save(quick, "quick-remember", theme, float(shooter.worst))
        quick.project.showPopup()
        shooter.settle(app)
        shooter.save(quick.project.view().window(), "quick-remember-projects", theme)
        quick.project.hidePopup()
        quick.hide()

        app.open_settings()
        dialog = app._settings
        shooter.settle(app)
        for i in range(dialog.tabs.count()):
            name = dialog.tabs.tabText(i).lower().replace(" ", "-").replace("&", "")
            view(f"settings-{i}-{name}", theme, partial(dialog.tabs.setCurrentIndex, i),
                 widget=dialog)  # fmt: skip
        dialog.hide()

        app.open_licence()
        licence = app._licence_dialog
        shooter.settle(app, lambda: app._licence_dialog.status is not None)
        shooter.save(licence, "licence", theme)
        licence.close()

        app.menu.licence_required.emit(
            CAPTURE,
            "Capture mode Full is saved and starts as soon as a Writer Pro key is active. "
            "Until then lexmem keeps only what you ask it to remember.",
        )
        shooter.settle(app)
        prompt = window.findChild(QMessageBox, "upgradePrompt")
        assert prompt is not None, "the upgrade prompt did not open"
        shooter.save(prompt, "upgrade-prompt", theme)
        prompt.close()
        shooter.settle(app)

        modal("about", theme, window._about)
        shooter.settle(app)

    window.show_tab("memories")
    shooter.settle(app)
    if shooter.on_screen:  # the tray icon itself, four times its size: its badge
        from PySide6.QtCore import Qt

        spot = app.tray.geometry() if app.tray is not None else None
        if spot is not None and spot.width() > 0:
            icon = qt.primaryScreen().grabWindow(0, spot.x(), spot.y(), spot.width(), spot.height())
            big = icon.scaled(
                spot.width() * 4, spot.height() * 4, Qt.AspectRatioMode.KeepAspectRatio
            )
            big.save(str(shooter.out / "tray-icon-x4.png"))
    app.stop()
    lm.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("build/screenshots"))
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--memories", type=int, default=3000,
                      help="generated notes in the demo data (default 3000)")  # fmt: skip
    size.add_argument("--quick", action="store_true", help="a small data set: 60 notes")
    size.add_argument("--data", type=Path,
                      help="a folder tools/demo_data.py built, used as it is")  # fmt: skip
    parser.add_argument("--seed", type=int, default=18, help="the demo data's seed")
    parser.add_argument("--display", action="store_true",
                        help="run on an X screen of its own with a system tray")  # fmt: skip
    parser.add_argument("--display-name", default=":78", help="that screen (default :78)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    import demo_data

    screen = x_screen(args.display_name) if args.display else nullcontext()
    with screen, tempfile.TemporaryDirectory(prefix="lexmem-shots-") as tmp:
        if not args.display:
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        if args.data is not None:
            base = args.data.expanduser().absolute()
            if not (base / "lexmem").is_dir():
                raise SystemExit(f"error: {base} holds no lexmem/ folder from tools/demo_data.py")
            data, _ = demo_data.environment(base)
        else:
            t0 = time.perf_counter()
            memories = 60 if args.quick else args.memories
            log(f"building the demo data ({memories:,} generated notes) …")
            figures = demo_data.build(Path(tmp), memories, 5, args.seed)
            log(f"  {figures['memories']:,} memories, {figures['sessions']} sessions in "
                f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
            data = Path(figures["data"])
        shooter = Shooter(args.out, on_screen=args.display)
        render(shooter, data)
        (args.out / "views.json").write_text(json.dumps(shooter.views, indent=1) + "\n")
    log(f"screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
