"""The tray app's first moments: the icon before the core.

A bare PySide6 tray shows its icon in about 0.2 s. Importing the core (``lexmem.api``
and below: ~0.4 s), opening the data folder and its store, and building the capture
service take seconds on a busy machine. So :func:`main` shows the tray icon first,
with a menu that says lexmem is starting (and can quit), and does all of that on a
thread (:class:`Starting`). When the core is open, :class:`~ui.app.App` takes the
icon over with its full menu, the browser and the capture service. Only this module
and :mod:`ui.theme` are imported before the icon shows; the event loop never waits
for the core.

Single instance: the first app holds ``app.lock`` in the data folder; a second
launch finds it held, drops a ``show_app`` event in the inbox and exits, and the
running app raises its browser when the service reads that event.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon

from .theme import apply_theme, icon, tray_icon

if TYPE_CHECKING:
    from lexmem.api import CaptureService, FileLock, Lexmem

    from .app import App

# Given the open core: the reader socket's handlers by request kind, and what the service
# runs once its socket is up (lexmem.cli.reader_setup).
ReaderSetup = Callable[[Any], tuple[Any, Any]]

__all__ = ["Opened", "Starting", "main"]

log = logging.getLogger("lexmem.ui")

STARTING_TEXT = "lexmem is starting…"


class Opened:
    """What :class:`Starting` hands to the app: the core, the app's lock, the writer."""

    __slots__ = ("lm", "lock", "service")

    def __init__(self, lm: Lexmem, lock: FileLock, service: CaptureService) -> None:
        self.lm, self.lock, self.service = lm, lock, service


class Starting(QObject):
    """The tray icon at once; the core imported and opened on a thread.

    Emits exactly one of :attr:`opened`, :attr:`already_running` or :attr:`failed`
    (queued to the UI thread)."""

    opened = Signal(object)  # Opened
    already_running = Signal()
    failed = Signal(str)  # one line

    def __init__(
        self, home: str | None, *, tray: bool | None = None, readers: ReaderSetup | None = None
    ) -> None:
        super().__init__()
        self.home = home
        self.readers = readers
        self.has_tray = QSystemTrayIcon.isSystemTrayAvailable() if tray is None else tray
        self.icon: QSystemTrayIcon | None = None
        self.menu: QMenu | None = None
        self.result: Opened | None = None
        self._thread: threading.Thread | None = None
        if self.has_tray:
            self.icon = QSystemTrayIcon(tray_icon("off"))
            self.icon.setToolTip(f"lexmem — {STARTING_TEXT}")
            self.menu = QMenu()
            self.starting_action = QAction(STARTING_TEXT, self.menu)
            self.starting_action.setEnabled(False)  # nothing needs the store yet
            self.menu.addAction(self.starting_action)
            self.menu.addSeparator()
            self.quit_action = QAction("Quit lexmem", self.menu)
            self.quit_action.triggered.connect(_quit)
            self.menu.addAction(self.quit_action)
            self.icon.setContextMenu(self.menu)

    def show(self) -> None:
        if self.icon is not None:
            self.icon.show()

    def start(self) -> None:
        """Import and open the core on a thread."""
        self._thread = threading.Thread(target=self._open, name="lexmem-start", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the thread (at quit, so that an opened core is closed, not dropped)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _open(self) -> None:
        try:
            # The core and the app's own modules, imported here rather than on the UI thread.
            from lexmem.api import Lexmem, LockTimeout

            from . import app as app_module
            from . import browser, panels  # noqa: F401 - the window's modules, imported early

            lm = Lexmem.open(self.home)
            # The app stays up for days: its model in a process of its own, so that the
            # idle unload gives back everything the model took (lexmem.embed_worker).
            lm.embedder.isolate = True
        except Exception as exc:
            log.exception("[MEM:UI] the data folder could not be opened")
            self.failed.emit(f"lexmem could not open its data folder: {exc}")
            return
        try:
            lock = app_module.app_lock(lm.paths.home)
            try:
                lock.acquire()
            except LockTimeout:
                app_module.send_show(lm)
                lm.close()
                self.already_running.emit()
                return
            service = lm.capture_service()
            if self.readers is not None:  # what the service answers on its reader socket
                service.readers, service.readers_warm = self.readers(lm)
            self.result = Opened(lm, lock, service)
        except Exception as exc:
            log.exception("[MEM:UI] the app could not start")
            lm.close()
            self.failed.emit(f"lexmem could not start: {exc}")
            return
        self.opened.emit(self.result)


def _quit() -> None:
    app = QApplication.instance()
    if app is not None:
        app.quit()


def main(
    argv: Sequence[str] | None = None,
    *,
    home: str | None = None,
    theme: str | None = None,
    show_window: bool | None = None,
    on_started: Callable[[App], None] | None = None,
    on_starting: Callable[[Starting], None] | None = None,
    tray: bool | None = None,
    readers: ReaderSetup | None = None,
) -> int:
    """Run the tray app until it quits; 0 on a clean exit (or when one already runs).

    ``on_starting`` is called once the icon shows, before the core opens; ``on_started``
    once the app runs on the open core. ``tray`` overrides whether there is a system tray.
    ``readers`` gives the capture service what it answers readers with over its socket
    (the launcher passes the CLI's: CLI reads and MCP sessions).

    A restart (the data folder moved, the embedding model changed) opens the core
    again in the same process: the folder is resolved anew each time.
    """
    qt_app = _qt_app(argv)
    while True:
        if theme:
            apply_theme(qt_app, theme)
        starting = Starting(home, tray=tray, readers=readers)
        starting.show()
        if on_starting is not None:
            on_starting(starting)
        outcome = _run(qt_app, starting, theme=theme, show_window=show_window, on_started=on_started)  # fmt: skip
        if isinstance(outcome, str):
            print(outcome, file=sys.stderr)
            return 1
        if outcome is None:
            return 0
        if not outcome.restart:
            return 0
        show_window = True  # the person was in the settings: bring the browser back


def _noop() -> None:
    pass


def _qt_app(argv: Sequence[str] | None) -> QApplication:
    existing = QApplication.instance()
    qt_app = existing if isinstance(existing, QApplication) else QApplication(
        list(argv or sys.argv[:1])
    )  # fmt: skip
    qt_app.setApplicationName("lexmem")
    qt_app.setApplicationDisplayName("lexmem")
    qt_app.setDesktopFileName("lexmem")
    qt_app.setWindowIcon(icon("lexmem"))
    qt_app.setQuitOnLastWindowClosed(False)  # the tray keeps it alive
    return qt_app


def _run(
    qt_app: QApplication,
    starting: Starting,
    *,
    theme: str | None,
    show_window: bool | None,
    on_started: Callable[[App], None] | None,
) -> App | str | None:
    """Run the loop until the app quits: the :class:`App` that ran, a one-line failure,
    or None (another app runs for this data folder, or Quit before the core opened)."""
    qt_app.processEvents()  # the icon on screen before qasync and the core are imported
    import asyncio

    import qasync

    started = time.monotonic()
    ran: list[App] = []
    failure: list[str] = []
    elsewhere: list[bool] = []

    def opened(result: Opened) -> None:
        from .app import App  # imported by the starting thread already

        apply_theme(qt_app, theme or result.lm.settings.ui.theme)
        app = App(
            result.lm, tray=starting.has_tray, shown_icon=starting.icon,
            capture_service=result.service,
        )  # fmt: skip
        if starting.menu is not None:
            starting.menu.deleteLater()
            starting.menu = None
        ran.append(app)
        app.start(show_window=show_window)
        # Constraint: a full garbage collection walks every object the app holds (~150,000
        # once the window is built) and took 100-280 ms on the UI thread whenever it ran,
        # a tab switch included. What exists now lives as long as the app: out of the scan.
        gc.freeze()
        log.info("[MEM:UI] the core opened %.2f s after the tray icon", time.monotonic() - started)
        if on_started is not None:
            on_started(app)

    def failed(text: str) -> None:
        failure.append(text)
        qt_app.quit()

    starting.opened.connect(opened)
    starting.failed.connect(failed)

    def already_running() -> None:
        elsewhere.append(True)
        qt_app.quit()

    starting.already_running.connect(already_running)

    def quit_now() -> None:
        # Through the app's own quit once it runs: a bare quit() is refused by a browser
        # window that only hides on close while the tray is there.
        if ran:
            ran[0].quit()
        else:
            qt_app.quit()

    async def run() -> None:
        # Qt drives this loop (qasync): coroutines and Qt signals share one thread.
        closing = asyncio.Event()
        qt_app.aboutToQuit.connect(closing.set)
        # A logout or `kill` sends SIGTERM: quit as the menu's Quit does (pending writes
        # finish, the service lets go of the folder). The ticker lets Python see it.
        signal.signal(signal.SIGTERM, lambda *_: quit_now())
        signal.signal(signal.SIGINT, lambda *_: quit_now())
        ticker = QTimer()
        ticker.start(500)
        ticker.timeout.connect(_noop)
        try:
            starting.start()
            await closing.wait()
        finally:
            qt_app.aboutToQuit.disconnect(closing.set)

    # Constraint: not qasync.run, which on Python 3.11 installs a global policy that makes
    # every new asyncio loop a Qt loop; LanceDB, imported on the starting thread while this
    # loop runs, starts its own loop on a thread of its own, and a Qt loop there hangs.
    try:
        with asyncio.Runner(loop_factory=lambda: qasync.QEventLoop(qt_app)) as runner:
            runner.run(run())
    finally:
        starting.wait()  # a core still opening is closed below, not dropped
        result = starting.result
        if ran:
            ran[0].stop()
            ran[0].window.deleteLater()
        elif starting.icon is not None:
            starting.icon.hide()
        if result is not None:
            result.lm.close()
            result.lock.release()
    log.info("[MEM:UI] the app ran for %.0f s", time.monotonic() - started)
    if failure:
        return failure[0]
    if not ran:
        if elsewhere:
            print("lexmem is already running: its memory browser was raised.", file=sys.stderr)
        return None
    return ran[0]
