"""The settings window: every change applies at once, no OK or Apply.

:class:`SettingsDialog` composes one widget per tab and owns what they share: the one
error line under the tabs, the line beside Close, and the long task that keeps the window
open. The tabs are in :mod:`ui.settings` (capture, privacy, embedding, llm, retention),
except the three that reach :mod:`lexmem.desktop`, here: :class:`WatchTab`,
:class:`AppearanceTab` and :class:`DataTab`.

Each tab only wires model to screen (STYLE.md 6): its ``reload`` writes the shared
settings into its widgets with their signals blocked (no echo), and an edit goes back
through an operation in :mod:`ui.ops`, which saves the file, updates the object the
in-process service reads and turns preference changes into ``config_change`` events. A
value that cannot be used is refused with one line under the tabs and never saved.

Long work (a watched folder's first scan, re-embedding with another model, moving the
data folder, exporting) runs off the UI thread; progress from worker threads reaches the
progress bars through a queued signal.

Secrets never touch the settings file: the LLM's API key goes to the OS keyring. Start
at login is the autostart entry itself (:mod:`lexmem.desktop`), not a setting.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import QSignalBlocker, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QCloseEvent, QDesktopServices
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

# Constraint: lexmem.desktop (autostart, moving the data folder) sits above the facade. Until that work reaches the ui through the facade, only this
# module may import it (pyproject's ignore line names it), so the tabs that need it live here.
from lexmem import desktop
from lexmem.api import CAPTURE
from lexmem.errors import LexmemError
from lexmem.models import Changes

from . import ops, theme
from .context import AppContext, UiChanges
from .licence_dialog import upgrade_prompt, weakly
from .settings.capture import CaptureTab
from .settings.common import FolderList, SettingsTab, form_layout, heading, muted, one_line
from .settings.embedding import EmbeddingTab
from .settings.llm import LlmTab, check_url
from .settings.privacy import PrivacyTab
from .settings.retention import RetentionTab

__all__ = ["AppearanceTab", "DataTab", "SettingsDialog", "WatchTab", "check_url"]

THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}
EXPORT_FORMATS = ("jsonl", "parquet", "csv")


# == the tabs that reach lexmem.desktop ======================================================


class WatchTab(SettingsTab):
    """Folders of Markdown notes that become memories, and the progress of reading them."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        v.addWidget(heading("Markdown folders"))
        v.addWidget(
            muted(
                "Notes (.md) in these folders and below become memories; a changed note "
                "replaces its old memories. Removing a folder keeps what was read."
            )
        )
        self.watch = FolderList("Add folder…")
        self.watch.add_button.clicked.connect(self._add_watch_clicked)
        self.watch.remove_button.clicked.connect(self._remove_watch_clicked)
        v.addWidget(self.watch, 1)
        self.watch_bar = QProgressBar()
        self.watch_bar.setFormat("%v of %m notes")
        self.watch_bar.hide()
        self.watch_status = muted()
        v.addWidget(self.watch_bar)
        v.addWidget(self.watch_status)
        self._watch_poll = QTimer(self)
        self._watch_poll.setInterval(1000)
        self._watch_poll.timeout.connect(self._poll_watch)
        self._polled: Path | None = None

    def reload(self) -> None:
        self.watch.set_folders(list(self.ctx.settings.capture.watch))

    def stop(self) -> None:
        self._watch_poll.stop()

    def _on_progress(self, task: str, done: int, total: int) -> None:
        self._report_to_bar(self.watch_bar, done, total)

    def _add_watch_clicked(self) -> None:
        picked = self._pick_folder("Watch a folder of notes")
        if picked:
            self.add_watched_folder(picked)

    def _remove_watch_clicked(self) -> None:
        self._save(ops.edit_folders, "watch", self.watch.selected(), False)

    def add_watched_folder(self, path: str) -> None:
        """Watch ``path`` and read its notes now, with progress."""
        try:
            ops.watch_folder(
                self.ctx, path,
                on_done=weakly(self._watch_saved),
                on_refused=weakly(self._watch_refused),
                on_error=weakly(self._gate_failed),
            )  # fmt: skip
        except LexmemError as exc:
            self._fail(one_line(exc))
            return
        self._clear_error()

    def _watch_refused(self, folder: Path) -> None:
        upgrade_prompt(
            self.window(), CAPTURE, ctx=self.ctx,
            detail=f"{folder} was not added: watching a folder of notes is automatic "
            "capture. Notes can still be kept one at a time with Quick remember.",
        )  # fmt: skip

    def _watch_saved(self, folder: Path) -> None:
        self._first_scan(folder)

    def _gate_failed(self, exc: BaseException) -> None:
        self._fail(one_line(exc))

    def _first_scan(self, folder: Path) -> None:
        self.watch_bar.setRange(0, 0)
        self.watch_bar.show()
        self.watch_status.setText(f"Reading the notes in {folder}…")
        lm = self.ctx.lm

        def work() -> Any:
            # The single writer reads them, wherever it runs (this app's service, the one
            # in another process, or this process for the scan); this thread waits for it.
            return lm.scan_notes(folder, lambda d, t: self._report("watch", d, t))

        def done(report: Any) -> None:
            if not shiboken6.isValid(self):
                return
            self._report_to_bar(self.watch_bar, report.files, report.files)
            errors = f", {len(report.errors)} could not be read" if report.errors else ""
            self.watch_status.setText(
                f"Read {report.files} notes in {folder.name}: {report.chunks} new memories, "
                f"{report.unchanged} unchanged{errors}."
            )
            self.ctx.emit(UiChanges(memories=Changes(counts=True)))

        def failed(exc: BaseException) -> None:
            if shiboken6.isValid(self):
                self.watch_bar.hide()
                self._fail(one_line(exc))

        self.ctx.read(work, on_done=done, on_error=failed)

    def _poll_watch(self) -> None:
        folder = self._polled
        if folder is None:
            self._watch_poll.stop()
            return
        lm = self.ctx.lm

        def done(counts: tuple[int, int] | None) -> None:
            if not shiboken6.isValid(self):
                return
            if counts is None:  # the writer's scan of it has ended
                self._watch_poll.stop()
                self._polled = None
                return
            read, total = counts
            self._report_to_bar(self.watch_bar, read, total)

        self.ctx.read(lambda: lm.notes_progress(folder), on_done=done)


class AppearanceTab(SettingsTab):
    """The theme, and whether lexmem starts at login."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        form = form_layout()
        self.theme = QComboBox()
        for name, label in THEME_LABELS.items():
            self.theme.addItem(label, name)
        # The style sheet's padding is not in the natural width: size to the longest entry.
        self.theme.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.theme.setMinimumContentsLength(max(len(t) for t in THEME_LABELS.values()) + 2)
        self.theme.currentIndexChanged.connect(self._theme_edited)
        form.addRow("Theme", self.theme)
        self.autostart = QCheckBox("Start lexmem when I log in")
        self.autostart.toggled.connect(self.set_autostart)
        self.autostart_note = muted(wrap=False)
        form.addRow("Startup", self.autostart)
        form.addRow("", self.autostart_note)
        v.addLayout(form)
        v.addStretch(1)

    def reload(self) -> None:
        with QSignalBlocker(self.theme):
            self.theme.setCurrentIndex(max(0, self.theme.findData(self.ctx.settings.ui.theme)))
        supported, why = desktop.autostart_supported()
        with QSignalBlocker(self.autostart):
            self.autostart.setChecked(supported and desktop.autostart_enabled())
        self.autostart.setEnabled(supported)
        self.autostart_note.setText(
            why or f"Writes {desktop.autostart_path()} (runs `lexmem app`)."
        )

    def _theme_edited(self, _index: int) -> None:
        self.set_theme(str(self.theme.currentData()))

    def set_theme(self, name: str) -> None:
        """Apply the theme now and keep it."""
        app = QApplication.instance()
        try:
            if isinstance(app, QApplication):
                theme.apply_theme(app, name)
        except ValueError as exc:
            self._fail(one_line(exc))
            return
        self._save(ops.set_setting, "ui", "theme", name)

    def set_autostart(self, enabled: bool) -> None:
        """Write or remove the autostart entry (its presence is the setting)."""
        # On the UI thread: a small file, and the box shows what is on disk at once.
        home = os.environ.get("LEXMEM_HOME", "").strip()
        try:
            command = desktop.autostart_command(Path(home) if home else None)
            desktop.set_autostart(enabled, command=command)
        except LexmemError as exc:
            with QSignalBlocker(self.autostart):
                self.autostart.setChecked(desktop.autostart_enabled())
            self._fail(one_line(exc))
            return
        self._clear_error()
        self.notice.emit(
            "lexmem starts at login." if enabled else "lexmem no longer starts at login."
        )


class DataTab(SettingsTab):
    """The data folder (open it, move it) and exporting everything."""

    #: The data folder moved to this path: the app restarts on it (lexmem's own core and
    #: service still have the old folder open).
    data_folder_moved = Signal(str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        v.addWidget(heading("Data folder"))
        self.home_label = QLabel()
        self.home_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.home_label.setWordWrap(True)
        v.addWidget(self.home_label)
        row = QHBoxLayout()
        open_button = QPushButton("Open folder")
        open_button.clicked.connect(self._open_folder_clicked)
        self.move_button = QPushButton("Move…")
        self.move_button.clicked.connect(self._move_clicked)
        row.addWidget(open_button)
        row.addWidget(self.move_button)
        row.addStretch(1)
        v.addLayout(row)
        self.move_note = muted()
        self.move_bar = QProgressBar()
        self.move_bar.hide()
        self.move_status = muted()
        v.addWidget(self.move_note)
        v.addWidget(self.move_bar)
        v.addWidget(self.move_status)
        v.addSpacing(12)
        v.addWidget(heading("Export"))
        v.addWidget(
            muted(
                "Every memory (with its vector), link and confidence point, in a new "
                "folder you can import elsewhere with `lexmem import`."
            )
        )
        erow = QHBoxLayout()
        self.export_format = QComboBox()
        self.export_format.addItems(EXPORT_FORMATS)
        self.export_button = QPushButton("Export everything…")
        self.export_button.clicked.connect(self._export_clicked)
        erow.addWidget(QLabel("Format"))
        erow.addWidget(self.export_format)
        erow.addWidget(self.export_button)
        erow.addStretch(1)
        v.addLayout(erow)
        self.export_bar = QProgressBar()
        self.export_bar.setRange(0, 0)  # the export reports no steps: a busy bar
        self.export_bar.hide()
        self.export_status = muted()
        v.addWidget(self.export_bar)
        v.addWidget(self.export_status)
        v.addStretch(1)

    def reload(self) -> None:
        self.home_label.setText(str(self.ctx.paths.home))
        pinned_by_env = bool(os.environ.get("LEXMEM_HOME", "").strip())
        self.move_button.setEnabled(not pinned_by_env and not self._busy)
        self.move_note.setText(
            "LEXMEM_HOME is set, so it decides the data folder: change it to use another one."
            if pinned_by_env
            else "Moving copies everything, checks the copy, then removes the old folder; "
            "lexmem restarts on the new one."
        )

    def set_busy(self, what: str) -> None:
        super().set_busy(what)
        self.move_button.setEnabled(not what)

    def _on_progress(self, task: str, done: int, total: int) -> None:
        self._report_to_bar(self.move_bar, done, total)

    def _open_folder_clicked(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.ctx.paths.home)))

    def _move_clicked(self) -> None:
        picked = self._pick_folder("Move the data folder to…")
        if not picked:
            return
        target = self.move_target(picked)
        if self._confirm(
            "Move the data folder",
            f"Move everything lexmem keeps from\n{self.ctx.paths.home}\nto\n{target}?\n\n"
            "lexmem restarts on the new folder; the old one is removed once the copy is checked.",
        ):
            self.move_data_folder_to(str(target))

    @staticmethod
    def move_target(picked: str) -> Path:
        """The folder a move goes to: the picked folder when empty, else a new ``lexmem``
        folder inside it."""
        folder = Path(picked).expanduser()
        if folder.is_dir() and any(folder.iterdir()):
            return folder / "lexmem"
        return folder

    def move_data_folder_to(self, target: str) -> None:
        """Move the data folder (copy, verify, repoint, remove the old one), then announce
        :attr:`data_folder_moved`."""
        # Constraint: here, not in ui.ops: moving is lexmem.desktop's, above the facade.
        paths = self.ctx.paths
        self._clear_error()
        self._set_busy("moving the data folder")
        self.move_bar.setRange(0, 0)
        self.move_bar.setFormat("%p%")
        self.move_bar.show()
        self.move_status.setText(f"Copying to {target}…")

        def work() -> desktop.Moved:
            return desktop.move_data_folder(
                paths, Path(target), progress=lambda d, t: self._report("move", d, t)
            )

        def done(moved: desktop.Moved) -> None:
            self._set_busy("")
            self.move_button.setEnabled(False)  # this window still shows the old folder
            self._report_to_bar(self.move_bar, 1, 1)
            left = (
                f" The old folder could not be removed: {moved.left_behind}."
                if moved.left_behind
                else ""
            )
            self.home_label.setText(str(moved.paths.home))
            self.move_status.setText(
                f"Moved {moved.files} files to {moved.paths.home}. "
                f"lexmem restarts on the new folder.{left}"
            )
            self.data_folder_moved.emit(str(moved.paths.home))

        def failed(exc: BaseException) -> None:
            self._set_busy("")
            self.move_bar.hide()
            self.move_status.setText("Nothing was moved.")
            self._fail(one_line(exc))

        # On the write thread: the app's own writes wait until the folder has moved.
        self.ctx.runner.run(work, on_done=done, on_error=failed, write=True)

    def _export_clicked(self) -> None:
        fmt = self.export_format.currentText()
        stamp = datetime.now().strftime("%Y-%m-%d")
        start = str(Path.home() / f"lexmem-export-{stamp}")
        chosen, _filter = QFileDialog.getSaveFileName(
            self.window(), "Export everything to a new folder", start, "Export folder (*)"
        )
        if chosen:
            self.export_to(chosen, fmt)

    def export_to(self, folder: str, fmt: str = "jsonl") -> None:
        """Export every memory, link and confidence point to a new (or empty) ``folder``."""
        out = Path(folder).expanduser()
        self._clear_error()
        self.export_button.setEnabled(False)
        self.export_bar.show()
        self.export_status.setText(f"Exporting to {out}…")
        ops.export(
            self.ctx, out, fmt,
            on_done=weakly(self._exported, out, fmt), on_error=weakly(self._export_failed),
        )  # fmt: skip

    def _exported(self, out: Path, fmt: str, counts: dict[str, int]) -> None:
        self.export_button.setEnabled(True)
        self.export_bar.hide()
        self.export_status.setText(
            f"Exported {counts.get('memories', 0)} memories, {counts.get('links', 0)} links "
            f"and {counts.get('confidence', 0)} confidence points to {out} ({fmt})."
        )

    def _export_failed(self, exc: BaseException) -> None:
        self.export_button.setEnabled(True)
        self.export_bar.hide()
        self.export_status.setText("")
        self._fail(one_line(exc))


# == the window =============================================================================


class SettingsDialog(QDialog):
    """lexmem's settings, in tabs; changes apply as they are made."""

    #: The data folder moved to this path: the app restarts on it (lexmem's own core and
    #: service still have the old folder open).
    data_folder_moved = Signal(str)
    #: The app should reopen its core (the embedding model changed): the reason, one line.
    restart_required = Signal(str)

    move_target = staticmethod(DataTab.move_target)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._busy: str = ""  # a long task that must finish before the window closes
        self.setWindowTitle("Settings — lexmem")
        self.setMinimumSize(700, 500)

        self.capture_tab = CaptureTab(ctx)
        self.privacy_tab = PrivacyTab(ctx)
        self.watch_tab = WatchTab(ctx)
        self.embedding_tab = EmbeddingTab(ctx)
        self.llm_tab = LlmTab(ctx)
        self.retention_tab = RetentionTab(ctx)
        self.appearance_tab = AppearanceTab(ctx)
        self.data_tab = DataTab(ctx)
        self.pages: list[SettingsTab] = [
            self.capture_tab, self.privacy_tab, self.watch_tab, self.embedding_tab,
            self.llm_tab, self.retention_tab, self.appearance_tab, self.data_tab,
        ]  # fmt: skip
        self.tabs = QTabWidget()
        self.tabs.setUsesScrollButtons(True)
        titles = ("Capture", "Privacy", "Watched folders", "Embedding", "LLM", "Retention",
                  "Appearance", "Data")  # fmt: skip
        for page, title in zip(self.pages, titles, strict=True):
            self.tabs.addTab(page, title)
            page.failed.connect(self._fail)
            page.cleared.connect(self._clear_error)
            page.notice.connect(self._notice)
            page.busy_changed.connect(self._set_busy)
        self.embedding_tab.restart_required.connect(self.restart_required)
        self.data_tab.data_folder_moved.connect(self.data_folder_moved)

        self.error = QLabel("")
        self.error.setObjectName("settingsError")
        self.error.setStyleSheet("color: #e03131;")
        self.error.setWordWrap(True)
        self.error.hide()
        self.saved = muted("Changes apply at once.", wrap=False)
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        bottom = QHBoxLayout()
        bottom.addWidget(self.saved, 1)
        bottom.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.error)
        layout.addLayout(bottom)

        # The widgets and actions callers reach on the window (tests, the tray, screenshots).
        c, p, w, e = self.capture_tab, self.privacy_tab, self.watch_tab, self.embedding_tab
        llm, r, a, d = self.llm_tab, self.retention_tab, self.appearance_tab, self.data_tab
        self.mode, self.pause_status, self.project_modes = c.mode, c.pause_status, c.project_modes
        self.pause_button, self.resume_button = c.pause_button, c.resume_button
        self.user_name = c.user_name
        self.optout, self.allow = p.optout, p.allow
        self.watch, self.watch_bar, self.watch_status = w.watch, w.watch_bar, w.watch_status
        self.reembed_bar, self.reembed_status = e.reembed_bar, e.reembed_status
        self.llm_url, self.llm_model, self.llm_licence_note = llm.llm_url, llm.llm_model, llm.llm_licence_note  # fmt: skip
        self.api_key, self.key_remove, self.key_status = llm.api_key, llm.key_remove, llm.key_status
        self.llm_timeout, self.llm_calls, self.llm_tokens = (
            llm.llm_timeout,
            llm.llm_calls,
            llm.llm_tokens,
        )
        self.llm_usage = llm.llm_usage
        self.retention, self.digest = r.retention, r.digest
        self.theme, self.autostart = a.theme, a.autostart
        self.move_button, self.move_status = d.move_button, d.move_status
        self.export_status = d.export_status
        self.set_paused, self.set_project_mode = c.set_paused, c.set_project_mode
        self.edit_folders = p.edit_folders
        self.add_watched_folder = w.add_watched_folder
        self.switch_model = e.switch_model
        self.store_api_key = llm.store_api_key
        self.set_theme, self.set_autostart = a.set_theme, a.set_autostart
        self.move_data_folder_to, self.export_to = d.move_data_folder_to, d.export_to

        ctx.hub.changed.connect(self._on_changed)
        # A save that fails (an unwritable settings file) reports through the hub.
        ctx.hub.error.connect(self._on_hub_error)
        self.reload()
        self.llm_tab.check_keyring()
        self.llm_tab.load_licence()

    # == model to screen ==================================================================

    def reload(self) -> None:
        """Show the shared settings, signals blocked so nothing echoes back as an edit."""
        for page in self.pages:
            page.reload()

    def _on_hub_error(self, message: str) -> None:
        if shiboken6.isValid(self) and self.isVisible():
            self._fail(message.strip().splitlines()[0] if message.strip() else "")

    def _on_changed(self, changes: UiChanges) -> None:
        if changes.settings and shiboken6.isValid(self):
            self.reload()
        if changes.state and shiboken6.isValid(self):
            self.llm_tab.load_licence()  # a key activated or removed

    def _fail(self, message: str) -> None:
        self.error.setText(message)
        self.error.show()

    def _clear_error(self) -> None:
        self.error.setText("")
        self.error.hide()

    def _notice(self, text: str) -> None:
        self.saved.setText(text)

    def _set_busy(self, what: str) -> None:
        self._busy = what
        for page in self.pages:
            page.set_busy(what)

    # == closing ===========================================================================

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._busy:
            self._fail(f"Wait until {self._busy} has finished.")
            event.ignore()
            return
        for page in self.pages:
            page.stop()
        super().closeEvent(event)

    def reject(self) -> None:
        if self._busy:
            self._fail(f"Wait until {self._busy} has finished.")
            return
        super().reject()
