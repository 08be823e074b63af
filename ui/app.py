"""The composition root of the desktop app: the one place that wires everything.

``lexmem`` with a display (or ``lexmem app``) starts in :mod:`ui.start`, which shows the
tray icon at once and opens the core on the data folder off the UI thread; then
:class:`App` runs the capture service in-process on its own thread (the single
writer for this data folder), and puts the tray icon's full menu and the memory
browser on the qasync event loop. Only this module reads configuration for the UI
(STYLE.md 7); widgets get an :class:`~ui.context.AppContext`.

Single instance: the first app holds ``app.lock`` in the data folder; a second
launch finds it held, drops a ``show_app`` event in the inbox and exits, and the
running app raises its browser when the service reads that event.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QSystemTrayIcon,
    QTabWidget,
)

from lexmem import __version__
from lexmem.api import (
    CAPTURE,
    CaptureService,
    DrainReport,
    FileLock,
    Lexmem,
    LicenceStatus,
    ServiceBusyError,
    home_short,
    is_paused,
    project_labels,
)
from lexmem.models import Changes

from .context import AppContext, UiChanges
from .hotkey import GlobalHotkey
from .licence_dialog import open_licence_dialog, tier_text, upgrade_prompt
from .theme import icon, tray_icon

__all__ = ["App", "CaptureMenu", "MainWindow", "ServiceThread", "app_lock", "send_show"]

log = logging.getLogger("lexmem.ui")

PAUSE_FOREVER = "9999-12-31T23:59:59Z"  # "until resumed": later than any real time


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the capture service on its own thread ---------------------------------------------


class ServiceThread(QObject):
    """Runs :meth:`CaptureService.run` on a thread; reports come back as queued signals.

    The service is the single writer for the data folder. When another process holds
    its lock (``lexmem serve``), the app runs without one: its writes go through the
    inbox to that process, and this thread retries now and then in case it stops.
    """

    report = Signal(object)  # DrainReport
    state_changed = Signal(str)  # "starting", "running", "elsewhere", "error", "stopped"
    problem = Signal(str)  # one line: the model failed to load, the store failed …
    show_requested = Signal()

    RETRY_S = 10.0

    def __init__(
        self, lm: Lexmem, parent: QObject | None = None, *, service: CaptureService | None = None
    ) -> None:
        super().__init__(parent)
        self.lm = lm
        self.service = service or lm.capture_service()
        self.service.on_show = self.show_requested.emit  # emitted from the thread: queued
        self.state = "stopped"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._main, name="lexmem-service", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        self.service.wake()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wake(self) -> None:
        self.service.wake()

    def _set(self, state: str) -> None:
        self.state = state
        self.state_changed.emit(state)

    def _main(self) -> None:
        # The embedding model loads when a capture first needs it (and unloads when idle):
        # a model that fails to load stops that capture, reported below, and is retried.
        self._set("starting")
        held = False
        delay = 1.0
        while not self._stop.is_set():
            try:
                if not held:
                    self.service.acquire()
                    held = True
                self._set("running")
                self.service.run(self._stop, on_report=self.report.emit)
            except ServiceBusyError:
                if self.state != "elsewhere":
                    self._set("elsewhere")
                self._stop.wait(self.RETRY_S)
                continue
            except Exception as exc:
                # Constraint: the inbox keeps every event, so retrying later loses nothing.
                log.exception("[MEM:UI] the capture service failed; retrying")
                self.problem.emit(f"Capture stopped: {exc}")
                self._set("error")
                self._stop.wait(delay)
                delay = min(delay * 2, 60.0)
                continue
            delay = 1.0
        if held:
            self.service.release()
        self._set("stopped")


# -- the capture menu, shared by the tray and the window ----------------------------------


class CaptureMenu(QObject):
    """The tray menu's actions. The tray shows them in its context menu; without a
    tray, the browser window shows the same actions in its menu bar."""

    quick_remember = Signal()
    open_browser = Signal()
    open_review = Signal()
    open_settings = Signal()
    open_licence = Signal()
    #: A chosen action needs a gate this tier lacks: (gate, one line on what happened).
    licence_required = Signal(str, str)
    quit_requested = Signal()

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.review_count = 0
        self.repositories: list[str] = []  # every repository seen in captured sessions
        self._repo_labels: dict[str, str] = {}  # their labels (lexmem.projects)
        # The tier, read off the UI thread by the app (None until the first answer).
        self.licence: LicenceStatus | None = None

        self.remember_action = QAction("Quick remember…", self)
        self.remember_action.setShortcut(QKeySequence("Ctrl+Shift+M"))
        self.remember_action.triggered.connect(self.quick_remember)
        self.browser_action = QAction("Open memory browser", self)
        self.browser_action.triggered.connect(self.open_browser)
        self.review_action = QAction("Review queue", self)
        self.review_action.triggered.connect(self.open_review)

        self.mode_menu = QMenu("Capture mode")
        self.mode_group = QActionGroup(self)
        self.mode_actions: dict[str, QAction] = {}
        for mode, label in (("off", "Off"), ("assist", "Assist"), ("full", "Full")):
            action = QAction(label, self, checkable=True)
            action.setData(mode)
            self.mode_group.addAction(action)
            self.mode_menu.addAction(action)
            self.mode_actions[mode] = action
        # Constraint: slots are bound methods, not lambdas holding self: PySide drops a
        # bound method's connection with its object, a lambda's it does not.
        self.mode_group.triggered.connect(self._on_mode)

        self.pause_hour_action = QAction("Pause capture for 1 hour", self)
        self.pause_hour_action.triggered.connect(self.pause_for_an_hour)
        self.pause_action = QAction("Pause capture until resumed", self)
        self.pause_action.triggered.connect(self.pause_until_resumed)
        self.resume_action = QAction("Resume capture", self)
        self.resume_action.triggered.connect(self.resume)

        self.repos_menu = QMenu("Repositories")
        self.repos_menu.aboutToShow.connect(self._fill_repositories)
        self.repos_menu.triggered.connect(self._on_repository)

        self.settings_action = QAction("Settings…", self)
        self.settings_action.triggered.connect(self.open_settings)
        self.licence_action = QAction("Licence…", self)
        self.licence_action.triggered.connect(self.open_licence)
        self.quit_action = QAction("Quit lexmem", self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.triggered.connect(self.quit_requested)

        ctx.hub.changed.connect(self._on_changed)
        self.sync()
        self.load_repositories()

    # -- building ----------------------------------------------------------------------

    def fill(self, menu: QMenu) -> None:
        """Put the capture actions into ``menu`` (the tray's, or the window's)."""
        menu.addAction(self.remember_action)
        menu.addAction(self.browser_action)
        menu.addAction(self.review_action)
        menu.addSeparator()
        menu.addMenu(self.mode_menu)
        menu.addAction(self.pause_hour_action)
        menu.addAction(self.pause_action)
        menu.addAction(self.resume_action)
        menu.addMenu(self.repos_menu)
        menu.addSeparator()
        menu.addAction(self.settings_action)
        menu.addAction(self.licence_action)
        menu.addSeparator()
        menu.addAction(self.quit_action)

    def sync(self) -> None:
        """Show the settings as they are now (mode, pause, review count)."""
        capture = self.ctx.settings.capture
        for mode, action in self.mode_actions.items():
            action.setChecked(capture.mode == mode)
        paused = is_paused(capture)
        self.pause_hour_action.setVisible(not paused)
        self.pause_action.setVisible(not paused)
        self.resume_action.setVisible(paused)
        if paused:
            until = capture.paused_until
            self.resume_action.setText(
                "Resume capture (paused until resumed)" if until == PAUSE_FOREVER
                else f"Resume capture (paused until {_local_time(until)})"
            )  # fmt: skip
        n = self.review_count
        self.review_action.setText(f"Review queue ({n})")
        gated = self.capture_gated
        for mode in ("assist", "full"):
            label = mode.capitalize()
            self.mode_actions[mode].setText(f"{label} (needs Writer Pro)" if gated else label)

    @property
    def capture_gated(self) -> bool:
        """Automatic capture is known to be outside this tier."""
        return self.licence is not None and not self.licence.is_enabled(CAPTURE)

    def set_licence(self, status: LicenceStatus) -> None:
        self.licence = status
        self.sync()

    def _on_changed(self, changes: UiChanges) -> None:
        if changes.settings or changes.state:
            self.sync()
        if changes.sessions:
            self.load_repositories()

    # -- repositories ----------------------------------------------------------------

    def load_repositories(self) -> None:
        def work() -> tuple[list[str], dict[str, str]]:
            seen = {s.project for s in self.ctx.lm.sessions(limit=10_000) if s.project}
            repos = sorted(seen | set(self.ctx.settings.capture.optout))
            # Named as every other view names them: against every project, not these alone.
            return repos, project_labels([*repos, *self.ctx.lm.projects()])

        def done(result: tuple[list[str], dict[str, str]]) -> None:
            self.repositories, self._repo_labels = result

        self.ctx.read(work, done)

    def _fill_repositories(self) -> None:
        self.repos_menu.clear()
        if not self.repositories:
            empty = self.repos_menu.addAction("No repositories seen yet")
            empty.setEnabled(False)
            return
        optout = set(self.ctx.settings.capture.optout)
        self.repos_menu.setToolTipsVisible(True)
        for repo in sorted(self.repositories, key=self._repo_label):
            label = self._repo_label(repo)
            action = self.repos_menu.addAction(label)  # the name the browser shows too
            action.setToolTip(f"Capture from {home_short(repo)}")
            action.setCheckable(True)
            action.setChecked(repo not in optout)
            action.setData(repo)

    def _repo_label(self, repo: str) -> str:
        return self._repo_labels.get(repo) or project_labels([repo])[repo]

    def _on_repository(self, action: QAction) -> None:
        if action.isCheckable() and action.data():
            self.set_repository(str(action.data()), action.isChecked())

    def set_repository(self, repo: str, capture: bool) -> None:
        """Capture from ``repo`` or opt it out; saved at once, so the hook follows too.

        Opting out a repository that has memories asks first whether to erase them too
        (:meth:`ask_purge`); the count and the erasure run off the UI thread."""
        if capture:
            self._save_repository(repo, True)
            return

        def asked(n: int) -> None:
            choice = self.ask_purge(repo, n) if n else "keep"
            if choice == "cancel":
                return  # still captured: the submenu is filled afresh when it opens
            self._save_repository(repo, False)
            if choice == "erase":
                self.purge_repository(repo)

        self.ctx.read(lambda: self.ctx.lm.memories_under(repo), asked)

    def _save_repository(self, repo: str, capture: bool) -> None:
        def mutate(s: Any) -> None:
            rest = [r for r in s.capture.optout if r != repo]
            s.capture.optout = rest if capture else [*rest, repo]

        self.ctx.update_settings(mutate)

    def ask_purge(self, repo: str, n: int) -> str:
        """ "erase", "keep" or "cancel": what to do with the ``n`` memories already captured
        from ``repo`` now that it is opted out."""
        box = QMessageBox()
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("Opt out of a repository")
        what = "the memory" if n == 1 else f"the {n} memories"
        box.setText(
            f"Also erase {what} already captured from {repo}? This cannot be undone; "
            "backups made before now still hold them."
        )
        erase = box.addButton("Erase", QMessageBox.ButtonRole.DestructiveRole)
        keep = box.addButton("Keep", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(keep)
        box.exec()
        clicked = box.clickedButton()
        return "erase" if clicked is erase else "keep" if clicked is keep else "cancel"

    def purge_repository(self, repo: str) -> None:
        """Erase everything captured from ``repo``, on the write thread (through the
        inbox, like every write)."""

        def done(changes: Changes) -> None:
            self.ctx.emit(UiChanges.of(changes, review=True, sessions=True))

        self.ctx.runner.run(lambda: self.ctx.writer.purge_project(repo), on_done=done, write=True)

    # -- capture state ------------------------------------------------------------------

    def _on_mode(self, action: QAction) -> None:
        self.set_mode(str(action.data()))

    def pause_for_an_hour(self) -> None:
        self.pause(timedelta(hours=1))

    def pause_until_resumed(self) -> None:
        self.pause(None)

    def set_mode(self, mode: str) -> None:
        """Save the capture mode. Under Core, Assist and Full are saved too (a key may come
        later and they take effect then), and :attr:`licence_required` says why nothing
        is captured yet."""
        self.ctx.update_settings(lambda s: setattr(s.capture, "mode", mode))
        if mode != "off" and self.capture_gated:
            self.licence_required.emit(
                CAPTURE,
                f"Capture mode {mode.capitalize()} is saved and starts as soon as a Writer Pro "
                "key is active. Until then lexmem keeps only what you ask it to remember.",
            )

    def pause(self, duration: timedelta | None) -> None:
        until = PAUSE_FOREVER if duration is None else _stamp(datetime.now(UTC) + duration)
        self.ctx.update_settings(lambda s: setattr(s.capture, "paused_until", until))

    def resume(self) -> None:
        self.ctx.update_settings(lambda s: setattr(s.capture, "paused_until", ""))

    def set_review_count(self, n: int) -> None:
        self.review_count = n
        self.sync()


def _local_time(stamp: str) -> str:
    try:
        t = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return stamp
    return t.astimezone().strftime("%H:%M")


# -- the browser window ------------------------------------------------------------------


class MainWindow(QMainWindow):
    """The memory browser: Memories, Review, Audit, Sessions and Insights tabs."""

    TABS = ("memories", "review", "audit", "sessions", "insights")

    def __init__(self, ctx: AppContext, menu: CaptureMenu, *, has_tray: bool) -> None:
        super().__init__()
        from .browser import MemoriesPage
        from .panels import AuditPanel, InsightsPanel, ReviewPanel, SessionsPanel

        self.ctx = ctx
        self.has_tray = has_tray
        #: Set by :meth:`App.quit`: the close that quitting sends is then accepted.
        self.quitting = False
        self.setWindowTitle("Memory browser — lexmem")
        self.setWindowIcon(icon("lexmem"))
        self.resize(1180, 760)

        self.memories = MemoriesPage(ctx)
        self.review = ReviewPanel(ctx)
        self.audit = AuditPanel(ctx)
        self.sessions = SessionsPanel(ctx)
        self.insights = InsightsPanel(ctx)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for widget, title in (
            (self.memories, "Memories"), (self.review, "Review"), (self.audit, "Audit"),
            (self.sessions, "Sessions"), (self.insights, "Insights"),
        ):  # fmt: skip
            self.tabs.addTab(widget, title)
        self.setCentralWidget(self.tabs)
        # The Edit menu and its shortcuts act on the tab on screen, never a hidden one.
        self.memories.selection_actions.follow(self.tabs)
        self.review.count_changed.connect(self._review_count)
        self.sessions.open_memory.connect(self.show_memory)

        bar = self.menuBar()
        file_menu = bar.addMenu("&lexmem")
        menu.fill(file_menu)
        edit_menu = bar.addMenu("&Edit")
        for action in self.memories.actions():
            if action is None or action.isSeparator():
                edit_menu.addSeparator()
            else:
                edit_menu.addAction(action)
        view_menu = bar.addMenu("&View")
        for i, name in enumerate(self.TABS):
            action = view_menu.addAction(self.tabs.tabText(i))
            action.setShortcut(QKeySequence(f"Ctrl+{i + 1}"))
            action.setData(name)
        view_menu.triggered.connect(self._on_view)
        find = view_menu.addAction("Search memories")
        find.setShortcut(QKeySequence.StandardKey.Find)
        find.triggered.connect(self._find)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction("About lexmem", self._about)

        self.state_label = QLabel()
        self.statusBar().addPermanentWidget(self.state_label)
        ctx.hub.error.connect(self._show_error)
        ctx.hub.notify.connect(self._notify)

    def _on_view(self, action: QAction) -> None:
        if action.data():
            self.show_tab(str(action.data()))

    def _show_error(self, text: str) -> None:
        self.statusBar().showMessage(text, 10_000)

    def _review_count(self, n: int) -> None:
        self.tabs.setTabText(self.TABS.index("review"), f"Review ({n})" if n else "Review")

    def _notify(self, title: str, message: str) -> None:
        if not self.has_tray:
            self.statusBar().showMessage(f"{title}: {message}", 15_000)

    def show_tab(self, name: str) -> None:
        self.tabs.setCurrentIndex(self.TABS.index(name))
        self.bring_up()

    def show_memory(self, memory_id: str) -> None:
        self.show_tab("memories")
        self.memories.select(memory_id)

    def _find(self) -> None:
        self.show_tab("memories")
        self.memories.focus_search()

    def bring_up(self) -> None:
        self.show()
        self.setWindowState(self.windowState() & ~Qt.WindowState.WindowMinimized)
        self.raise_()
        self.activateWindow()

    def set_state(self, text: str) -> None:
        self.state_label.setText(text)

    def _about(self) -> None:
        QMessageBox.about(
            self,
            "About lexmem",
            f"<b>lexmem {__version__}</b><p>Local-first memory for AI agents and the people "
            f"who work with them.</p><p>Data folder: {self.ctx.paths.home}</p>",
        )

    def closeEvent(self, event: QCloseEvent) -> None:
        # The window closing closes the undo windows of its rejects: erased now.
        self.ctx.release_held()
        # With a tray the app lives on in it; without one, closing the window quits.
        # Constraint: Qt 6's quit() first asks every window to close and gives up when one
        # refuses, so the window refuses only a person's close, never the app's quit.
        if self.has_tray and not self.quitting:
            event.ignore()
            self.hide()
        else:
            event.accept()
            app = QApplication.instance()
            if app is not None:
                app.quit()


# -- the app -----------------------------------------------------------------------------


class App(QObject):
    """Everything the tray app runs, started and stopped as one."""

    def __init__(
        self,
        lm: Lexmem,
        *,
        tray: bool | None = None,
        service: bool = True,
        shown_icon: QSystemTrayIcon | None = None,
        capture_service: CaptureService | None = None,
    ) -> None:
        """``shown_icon``: the tray icon :mod:`ui.start` already shows, taken over with its menu
        replaced; ``capture_service``: the writer, already built off the UI thread."""
        super().__init__()
        self.lm = lm
        self.service_thread = ServiceThread(lm, service=capture_service) if service else None
        self.ctx = AppContext(
            lm, service=self.service_thread.service if self.service_thread else None
        )
        self.has_tray = QSystemTrayIcon.isSystemTrayAvailable() if tray is None else tray
        self.menu = CaptureMenu(self.ctx)
        self.window = MainWindow(self.ctx, self.menu, has_tray=self.has_tray)
        self.tray: QSystemTrayIcon | None = None
        self._tray_menu: QMenu | None = None
        self.service_state = "stopped" if service else "elsewhere"
        self.problem = ""
        self._quick: Any = None  # QuickRememberDialog, built on first use
        self._settings: Any = None  # SettingsDialog, built on first use
        self._licence_dialog: Any = None  # LicenceDialog, while it is open
        self._notice_said = False  # "the trial has ended", said once
        self.restart = False  # main() reopens the core and starts again

        self.menu.quick_remember.connect(self.quick_remember)
        self.menu.open_browser.connect(self.window.bring_up)
        self.menu.open_review.connect(self.open_review)
        self.menu.open_settings.connect(self.open_settings)
        self.menu.open_licence.connect(self.open_licence)
        self.menu.licence_required.connect(self._licence_required)
        self.menu.quit_requested.connect(self.quit)
        # The tray menu offers Ctrl+Shift+M while the person works elsewhere: grab it for
        # the whole session where the display allows (X11), not only in lexmem's windows.
        self.hotkey = GlobalHotkey(self.menu.remember_action.shortcut().toString(), self)
        self.hotkey.activated.connect(self.quick_remember)
        self.window.review.count_changed.connect(self._on_review_count)
        self.ctx.hub.changed.connect(self._on_changed)
        self.ctx.hub.show_requested.connect(self.window.bring_up)
        self.ctx.hub.notify.connect(self._notify)

        if self.has_tray:
            if shown_icon is not None:
                shown_icon.setParent(self)
                self.tray = shown_icon
            else:
                self.tray = QSystemTrayIcon(tray_icon("capturing"), self)
            self._tray_menu = QMenu()
            self.menu.fill(self._tray_menu)
            self.tray.setContextMenu(self._tray_menu)
            self.tray.activated.connect(self._on_tray_activated)
        if self.service_thread is not None:
            st = self.service_thread
            st.report.connect(self._on_report)
            st.state_changed.connect(self._on_service_state)
            st.problem.connect(self._on_problem)
            st.show_requested.connect(self.ctx.hub.show_requested)
        # Pauses end by themselves: look again each minute so the icon follows.
        self._clock = QTimer(self)
        self._clock.setInterval(60_000)
        self._clock.timeout.connect(self._refresh_state)
        # The trial's days run out and keys expire: read the tier each minute too.
        self._clock.timeout.connect(self.load_licence)
        # Team sync moves by itself (the writer pushes and pulls): its state is read
        # every few seconds, off the UI thread, from the data folder alone.
        self.team: dict[str, Any] | None = None
        self._team_clock = QTimer(self)
        self._team_clock.setInterval(5_000)
        self._team_clock.timeout.connect(self.load_team)
        self._refresh_state()
        self.load_licence()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, *, show_window: bool | None = None) -> None:
        if self.service_thread is not None:
            self.service_thread.start()
        if self.tray is not None:
            self.tray.show()
            if not self.hotkey.start():
                log.info("[MEM:UI] %s", self.hotkey.problem)
        if show_window if show_window is not None else not self.has_tray:
            self.window.bring_up()
        self._clock.start()
        self._team_clock.start()
        self.load_team()

    def stop(self) -> None:
        self._clock.stop()
        self._team_clock.stop()
        self.hotkey.stop()
        if self.tray is not None:
            self.tray.hide()
        self.ctx.close()  # pending writes finish first: nothing half-done
        if self.service_thread is not None:
            self.service_thread.stop()
        self.window.hide()

    def quit(self) -> None:
        """Quit the app: tray ▸ Quit, the browser's menu, SIGTERM and SIGINT all come here."""
        self.window.quitting = True
        app = QApplication.instance()
        if app is not None:
            app.quit()
        # A window that still refused (the settings wait for a data-folder move) kept the app
        # running: a later close of the browser then hides it again rather than quitting.
        QTimer.singleShot(0, self._quit_done)

    def _quit_done(self) -> None:
        self.window.quitting = False

    # -- dialogs ---------------------------------------------------------------------

    def open_review(self) -> None:
        self.window.show_tab("review")

    def quick_remember(self) -> None:
        from .quick import QuickRememberDialog

        if self._quick is None:
            self._quick = QuickRememberDialog(self.ctx)
            self._quick.remembered.connect(self._remembered)
        self._quick.popup()

    def _remembered(self, _ids: list[str]) -> None:
        """The box closes on a save: say so, quoting what was kept."""
        text = " ".join((self._quick.saved_text if self._quick else "").split())
        quote = text if len(text) <= 80 else text[:79].rstrip() + "…"
        if self.tray is not None:
            self.tray.showMessage(
                "Remembered", quote, QSystemTrayIcon.MessageIcon.Information, 4_000
            )
        else:
            self.window.statusBar().showMessage(f"Remembered: {quote}", 10_000)

    def open_settings(self) -> None:
        from .settings_dialog import SettingsDialog

        if self._settings is None:
            self._settings = SettingsDialog(self.ctx, parent=self.window)
            self._settings.data_folder_moved.connect(self._data_folder_moved)
            self._settings.restart_required.connect(self._restart_required)
        self._settings.show()
        self._settings.raise_()
        self._settings.activateWindow()

    def open_licence(self) -> None:
        self._licence_dialog = open_licence_dialog(self.ctx, self.window)

    def _licence_required(self, gate: str, detail: str) -> None:
        upgrade_prompt(self.window, gate, ctx=self.ctx, detail=detail)

    def _data_folder_moved(self, where: str) -> None:
        self._restart(f"lexmem now keeps its memories in {where}; it restarts there.")

    def _restart_required(self, why: str) -> None:
        self._restart(why)

    def _restart(self, why: str) -> None:
        """Quit the loop and let :func:`main` open the core again (new folder, new model)."""
        self.restart = True
        QMessageBox.information(self.window, "Restarting — lexmem", why)
        self.quit()

    # -- state ------------------------------------------------------------------------

    def _on_tray_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (
            QSystemTrayIcon.ActivationReason.Trigger,
            QSystemTrayIcon.ActivationReason.DoubleClick,
        ):
            self.window.bring_up()

    def _on_report(self, report: DrainReport) -> None:
        changes = UiChanges.of(
            _changes_of(report), review=bool(report.saved), audit=True,
            sessions=bool(report.events), state=False,
        )  # fmt: skip
        self.ctx.emit(changes)
        self.load_team()  # a drain may have queued changes for the team
        if report.quarantined:
            self.ctx.hub.notify.emit(
                "lexmem set an event aside",
                f"{report.quarantined} event(s) could not be read and were quarantined; "
                "run `lexmem doctor` to see why.",
            )

    def load_team(self) -> None:
        """Read where team sync stands (local figures only: no server is asked)."""
        self.ctx.read(
            lambda: self.lm.team_status(reach=False),
            on_done=self._on_team,
            on_error=lambda exc: log.warning("[MEM:UI] team status unread: %s", exc),
        )

    def _on_team(self, status: dict[str, Any]) -> None:
        if status != self.team:
            self.team = status
            self._refresh_state()

    def _on_service_state(self, state: str) -> None:
        self.service_state = state
        if state == "running":
            self.problem = ""
        self._refresh_state()

    def _on_problem(self, text: str) -> None:
        self.problem = text
        self.ctx.hub.notify.emit("lexmem needs attention", text)
        self._refresh_state()

    def _on_review_count(self, n: int) -> None:
        self.menu.set_review_count(n)
        self._refresh_state()

    def _on_changed(self, changes: UiChanges) -> None:
        if changes.settings or changes.state:
            self._refresh_state()
        if changes.state:
            self.load_licence()  # a key activated or removed, the service restarted …

    @property
    def licence(self) -> LicenceStatus | None:
        """The tier as last read (None until the first read answers)."""
        return self.menu.licence

    def load_licence(self) -> None:
        """Read the tier off the UI thread (it may touch the keyring and a file)."""
        self.ctx.read(self.lm.licence.status, on_done=self._on_licence, on_error=self._no_licence)

    def _on_licence(self, status: LicenceStatus) -> None:
        self.menu.set_licence(status)
        self._refresh_state()
        if status.notice and not self._notice_said:
            self._notice_said = True
            self.ctx.hub.notify.emit("lexmem is now Core", status.notice)
            self.ctx.read(self.lm.licence.acknowledge_notice)

    def _no_licence(self, exc: BaseException) -> None:
        log.warning("[MEM:UI] the licence status could not be read: %s", exc)

    def _notify(self, title: str, message: str) -> None:
        if self.tray is not None:
            self.tray.showMessage(title, message, tray_icon("error"), 10_000)

    def tray_state(self) -> str:
        capture = self.lm.settings.capture
        if self.problem or self.service_state == "error":
            return "error"
        if capture.mode == "off" or self.menu.capture_gated:
            return "off"
        if is_paused(capture):
            return "paused"
        return "capturing"

    def status_text(self) -> str:
        state = self.tray_state()
        capture = self.lm.settings.capture
        off = "Capture off"
        if capture.mode != "off" and self.menu.capture_gated:
            off = "Capture off: automatic capture needs Writer Pro"
        words = {
            "capturing": f"Capturing ({capture.mode})",
            "paused": "Capture paused",
            "off": off,
            "error": self.problem or "Capture stopped",
        }[state]
        if self.service_state == "elsewhere":
            words += " · service runs in another process"
        n = self.menu.review_count
        if n:
            words += f" · {n} to review"
        team = team_text(self.team)
        if team:
            words += f" · {team}"
        if self.licence is not None:
            words += f" · {tier_text(self.licence)}"
        return words

    def _refresh_state(self) -> None:
        self.menu.sync()
        text = self.status_text()
        self.window.set_state(text)
        if self.tray is not None:
            self.tray.setIcon(tray_icon(self.tray_state(), self.menu.review_count))
            self.tray.setToolTip(f"lexmem — {text}")


def team_text(status: dict[str, Any] | None, now: datetime | None = None) -> str:
    """Team sync in a few words, for the tray and the window's status line ("" when no
    project is shared)."""
    if not status or not status.get("joined"):
        return ""
    error = str(status.get("last_error") or "").strip()
    if error:
        return f"Team: not syncing ({error.splitlines()[0]})"
    if lost := len(status.get("lost") or ()):
        return f"Team: {lost} of your edits lost a conflict (lexmem team status)"
    waiting = int(status.get("outbox") or 0)
    if waiting:
        return f"Team: {waiting} waiting to sync"
    last = status.get("last_sync")
    if not last:
        return "Team: not synced yet"
    try:
        when = datetime.fromisoformat(str(last))
    except ValueError:
        return "Team: synced"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ago = ((now or datetime.now(UTC)) - when).total_seconds()
    if ago < 60:
        return "Team: synced"
    if ago < 3600:
        return f"Team: synced {int(ago // 60)} min ago"
    return f"Team: last synced {when.astimezone().strftime('%d %b %H:%M')}"


def _changes_of(report: DrainReport) -> Any:
    from lexmem.models import Changes

    return Changes(created=tuple(report.memory_ids), counts=bool(report.memory_ids))


# -- starting ------------------------------------------------------------------------------


def app_lock(lm_home: Path) -> FileLock:
    return FileLock(lm_home / "app.lock", timeout=0)


def send_show(lm: Lexmem) -> None:
    """Ask the running app to raise its browser (through the inbox, like every request)."""
    lm.post_event("show_app", session_id="app", agent="app")
