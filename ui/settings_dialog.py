"""The settings window: every change applies at once, no OK or Apply.

:class:`SettingsDialog` composes one widget per tab (:class:`CaptureTab`,
:class:`PrivacyTab`, :class:`WatchTab`, :class:`EmbeddingTab`, :class:`LlmTab`,
:class:`RetentionTab`, :class:`AppearanceTab`, :class:`DataTab`) and owns what they share:
the one error line under the tabs, the line beside Close, and the long task that keeps
the window open.

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

import contextlib
import copy
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import shiboken6
from PySide6.QtCore import QSignalBlocker, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QCloseEvent, QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

# Constraint: lexmem.desktop (autostart, moving the data folder, a watched folder's first
# scan) sits above the facade, so only this module may reach it (pyproject's ignore line).
from lexmem import desktop
from lexmem.api import (
    CAPTURE,
    CAPTURE_MODES,
    DEFAULT_MODEL,
    ENCODER,
    LicenceStatus,
    Settings,
    llm_status_line,
    llm_url_problem,
)
from lexmem.errors import InvalidInputError, LexmemError
from lexmem.models import Changes

from . import ops, theme
from .context import AppContext, UiChanges
from .licence_dialog import open_licence_dialog, upgrade_prompt, weakly

__all__ = [
    "AppearanceTab",
    "CaptureTab",
    "DataTab",
    "EmbeddingTab",
    "LlmTab",
    "PrivacyTab",
    "RetentionTab",
    "SettingsDialog",
    "SettingsTab",
    "WatchTab",
    "check_url",
]

MODE_LABELS = {"off": "Off", "assist": "Assist", "full": "Full"}
MODE_HELP = {
    "off": "Nothing is captured automatically; only what you ask lexmem to remember.",
    "assist": "Only high-confidence, durable facts: decisions, conventions, corrections.",
    "full": "Broader capture: workflows, configuration and more of each session.",
}
THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}
EXPORT_FORMATS = ("jsonl", "parquet", "csv")


def check_url(text: str) -> str:
    """An LLM endpoint as typed: "" (no LLM) or an http(s) URL with a host."""
    url = text.strip()
    if not url:
        return ""
    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in url:
        raise InvalidInputError(
            f"{url!r} is not an endpoint lexmem can call (use http://host:port/v1 or https://…)"
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise InvalidInputError(f"{url!r} has an invalid port") from exc
    problem = llm_url_problem(url)
    if problem:
        raise InvalidInputError(problem)
    return url


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _muted(text: str = "", *, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    label.setProperty("role", "muted")
    label.setWordWrap(wrap)
    return label


def _form() -> QFormLayout:
    form = QFormLayout()
    # Spin boxes and combos keep their natural width; only text fields stretch.
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
    return form


def _heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setProperty("role", "heading")
    return label


class _FolderList(QWidget):
    """A list of folders with Add… and Remove; the tab decides what they mean."""

    def __init__(self, add_text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setMinimumHeight(90)
        self.add_button = QPushButton(add_text)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setEnabled(False)
        self.list.itemSelectionChanged.connect(self._selection_changed)
        buttons = QVBoxLayout()
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.list, 1)
        row.addLayout(buttons)

    def _selection_changed(self) -> None:
        self.remove_button.setEnabled(bool(self.list.selectedItems()))

    def set_folders(self, folders: list[str]) -> None:
        with QSignalBlocker(self.list):
            self.list.clear()
            self.list.addItems(folders)
        self.remove_button.setEnabled(False)

    def folders(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def selected(self) -> list[str]:
        return [item.text() for item in self.list.selectedItems()]


# Constraint: Qt signals connect to bound methods, never to lambdas holding ``self``:
# PySide keeps a lambda's connection alive past the window, and tearing it down later
# corrupts memory (seen as "shared QObject was deleted directly" and a crash at exit).


class SettingsTab(QWidget):
    """One tab of the settings window: shows its part of the settings and sends edits back
    as operations (:mod:`ui.ops`). What it has to say goes to the window through signals."""

    #: A value was refused or an operation failed: one line for under the tabs.
    failed = Signal(str)
    #: The last refusal no longer holds.
    cleared = Signal()
    #: What just happened, for the line beside Close ("Saved.", "Key stored.").
    notice = Signal(str)
    #: A long task started (what it is) or ended (""): the window stays open meanwhile.
    busy_changed = Signal(str)
    # (task, done, total) from worker threads, delivered queued on the UI thread.
    _progress = Signal(str, int, int)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._busy = ""  # this window's long task, whichever tab runs it
        self._progress.connect(self._on_progress, Qt.ConnectionType.QueuedConnection)

    def reload(self) -> None:
        """Show the shared settings, signals blocked so nothing echoes back as an edit."""

    def set_busy(self, what: str) -> None:
        """A long task of the window started (what it is) or ended ("")."""
        self._busy = what

    def stop(self) -> None:
        """The window closes: stop what runs by itself."""

    # -- screen to model -------------------------------------------------------------------

    def _save(self, op: Callable[..., None], *args: Any) -> None:
        """Run a settings operation (it saves off the UI thread); a value it refuses is
        shown under the tabs, and the reload that follows a save blocks the echo."""
        try:
            op(self.ctx, *args, on_done=weakly(self._saved))
        except (LexmemError, ValueError, OSError) as exc:
            self._fail(_one_line(exc))
            return
        self._clear_error()

    def _saved(self, diff: list[tuple[str, Any, Any]]) -> None:
        if diff:
            self.notice.emit("Saved.")

    def _fail(self, message: str) -> None:
        self.failed.emit(message)

    def _clear_error(self) -> None:
        self.cleared.emit()

    def _set_busy(self, what: str) -> None:
        self.busy_changed.emit(what)

    # -- progress and pickers ----------------------------------------------------------------

    def _report(self, task: str, done: int, total: int) -> None:
        """Called on worker threads: hand the numbers to the UI thread."""
        # RuntimeError: the window is gone; the work goes on without a bar to show it.
        with contextlib.suppress(RuntimeError):
            self._progress.emit(task, done, total)

    def _on_progress(self, task: str, done: int, total: int) -> None:
        pass

    @staticmethod
    def _report_to_bar(bar: QProgressBar, done: int, total: int) -> None:
        # Large folders count bytes beyond a 32-bit int: show thousandths instead.
        if total > 2**31 - 1:
            done, total = done * 1000 // total, 1000
        bar.setRange(0, max(total, 1))
        bar.setValue(min(done, total) if total else 1)
        bar.show()

    def _pick_folder(self, title: str) -> str:
        return QFileDialog.getExistingDirectory(self.window(), title, str(Path.home()))

    def _confirm(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self.window(), title, text)
        return answer == QMessageBox.StandardButton.Yes


# == the tabs ===============================================================================


class CaptureTab(SettingsTab):
    """The capture mode, pausing, and per-project modes."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        form = _form()
        self.mode = QComboBox()
        for mode in CAPTURE_MODES:
            self.mode.addItem(MODE_LABELS[mode], mode)
        self.mode.currentIndexChanged.connect(self._mode_edited)
        self.mode_help = _muted(wrap=False)
        form.addRow("Capture mode", self.mode)
        form.addRow("", self.mode_help)
        pause_row = QHBoxLayout()
        self.pause_status = QLabel()
        self.pause_button = QPushButton("Pause for an hour")
        self.resume_button = QPushButton("Resume")
        self.pause_button.clicked.connect(self._pause_clicked)
        self.resume_button.clicked.connect(self._resume_clicked)
        pause_row.addWidget(self.pause_status, 1)
        pause_row.addWidget(self.pause_button)
        pause_row.addWidget(self.resume_button)
        form.addRow("Status", pause_row)
        v.addLayout(form)
        v.addSpacing(10)
        v.addWidget(_heading("Per-project modes"))
        v.addWidget(_muted("A repository listed here is captured in its own mode."))
        self.project_modes = QTableWidget(0, 2)
        self.project_modes.setHorizontalHeaderLabels(["Project folder", "Mode"])
        header = self.project_modes.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.project_modes.verticalHeader().hide()
        self.project_modes.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.project_modes.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        add = QPushButton("Add project…")
        self.remove_project = QPushButton("Remove")
        add.clicked.connect(self._pick_project)
        self.remove_project.clicked.connect(self._remove_projects)
        buttons = QVBoxLayout()
        buttons.addWidget(add)
        buttons.addWidget(self.remove_project)
        buttons.addStretch(1)
        row = QHBoxLayout()
        row.addWidget(self.project_modes, 1)
        row.addLayout(buttons)
        v.addLayout(row, 1)
        self._pause_timer = QTimer(self)  # the pause ends by itself: keep the line true
        self._pause_timer.setInterval(30_000)
        self._pause_timer.timeout.connect(self._show_pause)
        self._pause_timer.start()

    def reload(self) -> None:
        s = self.ctx.settings
        with QSignalBlocker(self.mode):
            self.mode.setCurrentIndex(max(0, self.mode.findData(s.capture.mode)))
        self.mode_help.setText(MODE_HELP.get(s.capture.mode, ""))
        self._show_pause()
        self._fill_project_modes(s.capture.project_modes)

    def stop(self) -> None:
        self._pause_timer.stop()

    def _fill_project_modes(self, modes: dict[str, str]) -> None:
        table = self.project_modes
        with QSignalBlocker(table):
            table.setRowCount(0)
            for project, mode in sorted(modes.items()):
                row = table.rowCount()
                table.insertRow(row)
                item = QTableWidgetItem(project)
                item.setToolTip(project)
                table.setItem(row, 0, item)
                combo = QComboBox()
                for m in CAPTURE_MODES:
                    combo.addItem(MODE_LABELS[m], m)
                combo.setCurrentIndex(max(0, combo.findData(mode)))
                combo.setProperty("project", project)
                combo.currentIndexChanged.connect(self._project_mode_edited)
                table.setCellWidget(row, 1, combo)

    def _show_pause(self) -> None:
        until = self.ctx.settings.capture.paused_until
        moment = None
        if until:
            try:
                moment = datetime.fromisoformat(until.replace("Z", "+00:00"))
            except ValueError:
                moment = None
        paused = moment is not None and moment > datetime.now(UTC)
        if moment is not None and paused and moment.year >= 9000:
            self.pause_status.setText("Paused until you resume")  # the tray's "until resumed"
        elif moment is not None and paused:
            local = moment.astimezone()
            self.pause_status.setText(f"Paused until {local:%H:%M} ({local:%a %d %b})")
        elif self.ctx.settings.capture.mode == "off":
            self.pause_status.setText("Off: nothing is captured automatically")
        else:
            self.pause_status.setText("Capturing")
        self.resume_button.setVisible(paused)
        self.pause_button.setVisible(not paused)

    def _mode_edited(self, _index: int) -> None:
        mode = str(self.mode.currentData())
        self.mode_help.setText(MODE_HELP.get(mode, ""))
        self._save(ops.set_setting, "capture", "mode", mode)

    def _pause_clicked(self) -> None:
        self.set_paused(timedelta(hours=1))

    def _resume_clicked(self) -> None:
        self.set_paused(None)

    def set_paused(self, duration: timedelta | None) -> None:
        """Pause automatic capture for ``duration``, or resume it (None)."""
        self._save(ops.set_paused, duration)

    def set_project_mode(self, project: str, mode: str | None) -> None:
        """Give ``project`` its own capture mode, or remove its override (None)."""
        self._save(ops.set_project_mode, project, mode)

    def _project_mode_edited(self, _index: int) -> None:
        combo = self.sender()
        if isinstance(combo, QComboBox):
            self.set_project_mode(str(combo.property("project")), str(combo.currentData()))

    def _pick_project(self) -> None:
        picked = self._pick_folder("A project with its own capture mode")
        if picked:
            self._save(ops.add_project_mode, picked)

    def _remove_projects(self) -> None:
        rows = sorted({i.row() for i in self.project_modes.selectedIndexes()})
        for row in rows:
            item = self.project_modes.item(row, 0)
            if item is not None:
                self.set_project_mode(item.text(), None)


class PrivacyTab(SettingsTab):
    """Opted-out repositories, and the folders capture is limited to."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        v.addWidget(_heading("Opted-out repositories"))
        v.addWidget(
            _muted(
                "Nothing from these repositories is captured, logged or printed, "
                "not even a digest. A .lexmem-optout file in a repository does the same."
            )
        )
        self.optout = _FolderList("Add…")
        self.optout.add_button.clicked.connect(self._add_optout_clicked)
        self.optout.remove_button.clicked.connect(self._remove_optout_clicked)
        v.addWidget(self.optout, 1)
        v.addWidget(_heading("Capture only from"))
        v.addWidget(
            _muted(
                "When this list is not empty, automatic capture happens only in these "
                "folders and below."
            )
        )
        self.allow = _FolderList("Add…")
        self.allow.add_button.clicked.connect(self._add_allow_clicked)
        self.allow.remove_button.clicked.connect(self._remove_allow_clicked)
        v.addWidget(self.allow, 1)

    def reload(self) -> None:
        s = self.ctx.settings
        self.optout.set_folders(list(s.capture.optout))
        self.allow.set_folders(list(s.capture.allow_paths))

    def edit_folders(self, key: str, paths: str | list[str], add: bool) -> None:
        """Add or remove folders in a ``[capture]`` list: optout, allow_paths or watch."""
        if key not in ops.FOLDER_LISTS:
            raise ValueError(f"not a folder list: {key}")
        self._save(ops.edit_folders, key, [paths] if isinstance(paths, str) else list(paths), add)

    def _add_optout_clicked(self) -> None:
        picked = self._pick_folder("Opt out a repository")
        if picked:
            self.edit_folders("optout", picked, True)

    def _remove_optout_clicked(self) -> None:
        self.edit_folders("optout", self.optout.selected(), False)

    def _add_allow_clicked(self) -> None:
        picked = self._pick_folder("Capture only from")
        if picked:
            self.edit_folders("allow_paths", picked, True)

    def _remove_allow_clicked(self) -> None:
        self.edit_folders("allow_paths", self.allow.selected(), False)


class WatchTab(SettingsTab):
    """Folders of Markdown notes that become memories, and the progress of reading them."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        v.addWidget(_heading("Markdown folders"))
        v.addWidget(
            _muted(
                "Notes (.md) in these folders and below become memories; a changed note "
                "replaces its old memories. Removing a folder keeps what was read."
            )
        )
        self.watch = _FolderList("Add folder…")
        self.watch.add_button.clicked.connect(self._add_watch_clicked)
        self.watch.remove_button.clicked.connect(self._remove_watch_clicked)
        v.addWidget(self.watch, 1)
        self.watch_bar = QProgressBar()
        self.watch_bar.setFormat("%v of %m notes")
        self.watch_bar.hide()
        self.watch_status = _muted()
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
            self._fail(_one_line(exc))
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
        self._fail(_one_line(exc))

    def _first_scan(self, folder: Path) -> None:
        from lexmem.locks import service_running

        self.watch_bar.setRange(0, 0)
        self.watch_bar.show()
        service = self.ctx.service
        if service is None and service_running(self.ctx.paths):
            # Another process's service owns the watcher: measure what it has read.
            self.watch_status.setText(
                f"Watching {folder}. The lexmem service running in another process reads "
                "new folders when it restarts; progress shows here as it reads them."
            )
            self._polled = folder
            self._watch_poll.start()
            self._poll_watch()
            return
        self.watch_status.setText(f"Reading the notes in {folder}…")
        lm = self.ctx.lm

        def work() -> Any:
            # Constraint: on the read pool, not the write thread: a large folder must not
            # hold up a quick remember. The store's write lock orders the writes.
            return desktop.first_scan(
                lm, folder, service=service, progress=lambda d, t: self._report("watch", d, t)
            )

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
                self._fail(_one_line(exc))

        self.ctx.read(work, on_done=done, on_error=failed)

    def _poll_watch(self) -> None:
        folder = self._polled
        if folder is None:
            self._watch_poll.stop()
            return
        lm = self.ctx.lm

        def done(counts: tuple[int, int]) -> None:
            if not shiboken6.isValid(self):
                return
            read, total = counts
            self._report_to_bar(self.watch_bar, read, total)
            if read >= total:
                self._watch_poll.stop()
                self._polled = None
                self.watch_status.setText(f"The service has read all {total} notes in {folder}.")

        self.ctx.read(lambda: desktop.scan_progress(lm, folder), on_done=done)


class EmbeddingTab(SettingsTab):
    """The embedding model in use, and switching to another (which re-embeds everything)."""

    #: The app should reopen its core (the embedding model changed): the reason, one line.
    restart_required = Signal(str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        self.model_current = QLabel()
        self.model_current.setWordWrap(True)
        self.model_current.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.model_current)
        box = QGroupBox("Switch model")
        form = _form()
        box.setLayout(form)
        self.model_name = QComboBox()
        self.model_name.setEditable(True)
        self.model_name.addItem(DEFAULT_MODEL)
        self.model_name.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.model_name.setToolTip(
            "lexmem's embedded model, a fastembed model name (downloaded once), "
            "or any name for a model in a local folder"
        )
        self.model_path = QLineEdit()
        self.model_path.setPlaceholderText("optional: a folder with model.onnx and tokenizer files")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_model_clicked)
        path_row = QHBoxLayout()
        path_row.addWidget(self.model_path, 1)
        path_row.addWidget(browse)
        self.model_dim = QSpinBox()
        self.model_dim.setRange(8, 8192)
        self.model_dim.setToolTip("How many numbers the model's vectors have")
        self.switch_button = QPushButton("Switch and re-embed…")
        self.switch_button.clicked.connect(self._switch_clicked)
        form.addRow("Model", self.model_name)
        form.addRow("Local folder", path_row)
        form.addRow("Dimensions", self.model_dim)
        form.addRow("", self.switch_button)
        v.addWidget(box)
        v.addWidget(
            _muted(
                "Switching recomputes every memory's vector with the new model. Searches "
                "and captures wait until it is done; lexmem then restarts on the new model."
            )
        )
        self.reembed_bar = QProgressBar()
        self.reembed_bar.setFormat("%v of %m memories")
        self.reembed_bar.hide()
        self.reembed_status = _muted()
        v.addWidget(self.reembed_bar)
        v.addWidget(self.reembed_status)
        v.addStretch(1)

    def reload(self) -> None:
        e = self.ctx.settings.embedding
        where = f" from {e.path}" if e.path else ""
        self.model_current.setText(f"In use: <b>{e.model}</b>{where} ({e.dim} dimensions)")
        with QSignalBlocker(self.model_name):
            self.model_name.setEditText(e.model)
        self.model_path.setText(e.path)
        with QSignalBlocker(self.model_dim):
            self.model_dim.setValue(e.dim)

    def set_busy(self, what: str) -> None:
        super().set_busy(what)
        self.switch_button.setEnabled(not what)

    def _on_progress(self, task: str, done: int, total: int) -> None:
        self._report_to_bar(self.reembed_bar, done, total)
        if total:
            self.reembed_status.setText(f"Re-embedding {done} of {total} memories…")

    def _browse_model_clicked(self) -> None:
        picked = self._pick_folder("Model folder")
        if picked:
            self.model_path.setText(picked)

    def _switch_clicked(self) -> None:
        model = self.model_name.currentText().strip()
        path = self.model_path.text().strip()
        dim = self.model_dim.value()
        if self._confirm(
            "Switch the embedding model",
            f"Re-embed every memory with {model}? Searches and captures wait until it is "
            "done, and lexmem restarts afterwards.",
        ):
            self.switch_model(model, path, dim)

    def switch_model(self, model: str, path: str = "", dim: int | None = None) -> None:
        """Re-embed every memory with another model, then use it (lexmem restarts)."""
        current = self.ctx.settings.embedding
        dim = current.dim if dim is None else dim
        try:
            if not model:
                raise InvalidInputError("the model needs a name")
            if path and not Path(path).expanduser().is_dir():
                raise InvalidInputError(f"{path} is not a folder")
            if (model, path, dim) == (current.model, current.path, current.dim):
                raise InvalidInputError(f"{model} is already in use")
        except LexmemError as exc:
            self._fail(_one_line(exc))
            return
        self._clear_error()
        wanted = copy.deepcopy(self.ctx.settings)
        wanted.embedding.model, wanted.embedding.path, wanted.embedding.dim = model, path, dim
        home = self.ctx.paths.home
        self._set_busy("re-embedding")
        self.reembed_bar.setRange(0, 0)
        self.reembed_bar.show()
        self.reembed_status.setText(f"Loading {model}…")

        def work() -> int:
            from lexmem.api import Lexmem

            # Constraint: the app's own core keeps its loaded model until it reopens, so
            # the re-embed runs on a second core built with the new settings; the store's
            # write lock keeps the two apart.
            other = Lexmem.open(home, settings=wanted)
            try:
                other.embedder.embed_one("lexmem checks the model")  # load it, check its size
                self._report("reembed", 0, other.count())
                return other.reembed(lambda d, t: self._report("reembed", d, t))
            finally:
                other.close()

        def done(count: int) -> None:
            def apply(s: Settings) -> None:
                s.embedding.model, s.embedding.path, s.embedding.dim = model, path, dim

            def saved(_diff: list[tuple[str, Any, Any]]) -> None:
                self._set_busy("")
                self.reembed_status.setText(
                    f"Re-embedded {count} memories with {model}. lexmem restarts to use it."
                )
                self.restart_required.emit(f"the embedding model is now {model}")

            self.ctx.update_settings(apply, on_done=saved)

        def failed(exc: BaseException) -> None:
            self._set_busy("")
            self.reembed_bar.hide()
            self.reembed_status.setText("The model in use is unchanged.")
            self._fail(_one_line(exc))

        self.ctx.read(work, on_done=done, on_error=failed)


class LlmTab(SettingsTab):
    """The optional LLM: endpoint, model, limits, today's use, and its API key."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        self._key_available = False
        self._licence: LicenceStatus | None = None  # read off the UI thread
        v = QVBoxLayout(self)
        v.addWidget(
            _muted(
                "An OpenAI-compatible endpoint (a local Ollama, for instance) helps the rules: "
                "it classifies what they cannot, finds what is worth keeping in conversations, "
                "words corrections and workflows, and summarises long texts. Empty: no LLM, "
                "and nothing leaves this machine. The budget resets each day."
            )
        )
        form = _form()
        self.llm_url = QLineEdit()
        self.llm_url.setPlaceholderText("http://localhost:11434/v1")
        self.llm_url.editingFinished.connect(self._llm_url_edited)
        self.llm_model = QLineEdit()
        self.llm_model.setPlaceholderText("e.g. llama3.2")
        self.llm_model.editingFinished.connect(self._llm_model_edited)
        self.llm_timeout = QDoubleSpinBox()
        self.llm_timeout.setRange(1.0, 600.0)
        self.llm_timeout.setDecimals(0)
        self.llm_timeout.setSuffix(" s")
        self.llm_timeout.setKeyboardTracking(False)
        self.llm_timeout.valueChanged.connect(self._timeout_edited)
        self.llm_calls = QSpinBox()
        self.llm_calls.setRange(0, 1_000_000)
        self.llm_calls.setSingleStep(100)
        self.llm_calls.setSuffix(" calls")
        self.llm_calls.setSpecialValueText("no limit")
        self.llm_calls.setKeyboardTracking(False)
        self.llm_calls.valueChanged.connect(self._llm_calls_edited)
        self.llm_tokens = QSpinBox()
        self.llm_tokens.setRange(0, 100_000_000)
        self.llm_tokens.setSingleStep(10_000)
        self.llm_tokens.setSuffix(" tokens")
        self.llm_tokens.setSpecialValueText("no limit")
        self.llm_tokens.setKeyboardTracking(False)
        self.llm_tokens.valueChanged.connect(self._llm_tokens_edited)
        form.addRow("Endpoint URL", self.llm_url)
        form.addRow("Model", self.llm_model)
        form.addRow("Timeout", self.llm_timeout)
        form.addRow("Daily budget", self.llm_calls)
        form.addRow("", self.llm_tokens)
        v.addLayout(form)
        self.llm_usage = _muted("")
        self.llm_usage.setObjectName("llmUsage")
        v.addWidget(self.llm_usage)
        self.llm_licence_note = QLabel("")
        self.llm_licence_note.setObjectName("llmLicenceNote")
        self.llm_licence_note.setWordWrap(True)
        self.llm_licence_note.setTextFormat(Qt.TextFormat.RichText)
        self.llm_licence_note.linkActivated.connect(self._open_licence)
        self.llm_licence_note.hide()
        v.addWidget(self.llm_licence_note)
        key = QGroupBox("API key")
        kv = QVBoxLayout(key)
        row = QHBoxLayout()
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("paste a key to store it in the OS keyring")
        self.api_key.returnPressed.connect(self._store_key_clicked)
        self.key_save = QPushButton("Store")
        self.key_save.clicked.connect(self._store_key_clicked)
        self.key_remove = QPushButton("Remove")
        self.key_remove.clicked.connect(self._remove_key_clicked)
        row.addWidget(self.api_key, 1)
        row.addWidget(self.key_save)
        row.addWidget(self.key_remove)
        kv.addLayout(row)
        self.key_status = _muted("Looking for the OS keyring…")
        kv.addWidget(self.key_status)
        for w in (self.api_key, self.key_save, self.key_remove):
            w.setEnabled(False)
        v.addWidget(key)
        v.addStretch(1)

    def reload(self) -> None:
        s = self.ctx.settings
        if not self.llm_url.hasFocus():
            self.llm_url.setText(s.llm.url)
        if not self.llm_model.hasFocus():
            self.llm_model.setText(s.llm.model)
        self._show_llm_licence()
        self.ctx.read(self.ctx.lm.llm_status, on_done=weakly(self._llm_usage_loaded))
        for ispin, ivalue in ((self.llm_calls, s.llm.calls_per_day), (self.llm_tokens, s.llm.tokens_per_day)):  # fmt: skip
            with QSignalBlocker(ispin):
                ispin.setValue(ivalue)
        with QSignalBlocker(self.llm_timeout):
            self.llm_timeout.setValue(s.llm.timeout_s)

    def _llm_usage_loaded(self, figures: dict[str, Any]) -> None:
        line = llm_status_line(figures)
        self.llm_usage.setText(line if figures["configured"] else line.capitalize())

    # -- the licence: under Core the endpoint is kept but not used -------------------------

    def load_licence(self) -> None:
        self.ctx.read(self.ctx.lm.licence.status, on_done=weakly(self._licence_loaded))

    def _licence_loaded(self, status: LicenceStatus) -> None:
        self._licence = status
        self._show_llm_licence()

    def _open_licence(self, _link: str = "") -> None:
        open_licence_dialog(self.ctx, self.window())

    def _show_llm_licence(self) -> None:
        """Under Core an endpoint is kept but not used: say so under it."""
        gated = self._licence is not None and not self._licence.is_enabled(ENCODER)
        if gated and self.ctx.settings.llm.url:
            self.llm_licence_note.setText(
                "LLM-assisted encoding needs Writer Pro: under Core the endpoint is kept but "
                "not used, and the rules classify alone. "
                "<a href='licence'>Enter a licence key…</a>"
            )
            self.llm_licence_note.show()
        else:
            self.llm_licence_note.hide()

    # -- screen to model ----------------------------------------------------------------------

    def _llm_url_edited(self) -> None:
        try:
            url = check_url(self.llm_url.text())
        except (LexmemError, ValueError, OSError) as exc:
            self._fail(_one_line(exc))
            return
        if url != self.ctx.settings.llm.url:
            self._save(ops.set_setting, "llm", "url", url)
        else:
            self._clear_error()

    def _llm_model_edited(self) -> None:
        model = self.llm_model.text().strip()
        if model != self.ctx.settings.llm.model:
            self._save(ops.set_setting, "llm", "model", model)

    def _timeout_edited(self, value: float) -> None:
        self._save(ops.set_setting, "llm", "timeout_s", float(value))

    def _llm_calls_edited(self, value: int) -> None:
        self._save(ops.set_setting, "llm", "calls_per_day", int(value))

    def _llm_tokens_edited(self, value: int) -> None:
        self._save(ops.set_setting, "llm", "tokens_per_day", int(value))

    # -- the API key, in the OS keyring ------------------------------------------------------

    def check_keyring(self) -> None:
        ops.keyring_state(
            self.ctx, on_done=weakly(self._keyring_checked), on_error=weakly(self._no_keyring)
        )

    def _keyring_checked(self, result: tuple[bool, str, bool]) -> None:
        ok, why, stored = result
        self._key_available = ok
        for w in (self.api_key, self.key_save):
            w.setEnabled(ok)
        self.key_remove.setEnabled(ok and stored)
        if not ok:
            self.key_status.setText(f"The API key cannot be kept: {why}.")
        else:
            self._show_key(stored, why)

    def _no_keyring(self, exc: BaseException) -> None:
        self.key_status.setText(f"The OS keyring cannot be used: {_one_line(exc)}")

    def _show_key(self, stored: bool, backend: str = "") -> None:
        where = f" ({backend})" if backend else ""
        self.key_status.setText(
            f"A key is stored in the OS keyring{where}; it is never written to the settings file."
            if stored
            else f"No key stored. Keys go to the OS keyring{where}, never to the settings file."
        )
        self.key_remove.setEnabled(stored)

    def _store_key_clicked(self) -> None:
        self.store_api_key(self.api_key.text())

    def _remove_key_clicked(self) -> None:
        self.store_api_key("")

    def store_api_key(self, key: str) -> None:
        """Keep ``key`` in the OS keyring (an empty key removes it)."""
        key = key.strip()
        if not self._key_available:
            self._fail("No OS keyring is available, so the key cannot be kept.")
            return
        self._clear_error()
        for w in (self.api_key, self.key_save, self.key_remove):
            w.setEnabled(False)
        stored = bool(key)
        ops.store_api_key(
            self.ctx, key,
            on_done=weakly(self._key_stored, stored), on_error=weakly(self._key_failed),
        )  # fmt: skip

    def _key_stored(self, stored: bool, _none: None) -> None:
        self.api_key.clear()
        for w in (self.api_key, self.key_save):
            w.setEnabled(True)
        self._show_key(stored)
        self.notice.emit("Key stored." if stored else "Key removed.")

    def _key_failed(self, exc: BaseException) -> None:
        for w in (self.api_key, self.key_save, self.key_remove):
            w.setEnabled(True)
        self._fail(_one_line(exc))


class RetentionTab(SettingsTab):
    """How long archived memories are kept, decay, and the size of the context digest."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        v.addWidget(_heading("Retention and decay"))
        form = _form()
        self.retention = QSpinBox()
        self.retention.setRange(0, 36_500)
        self.retention.setSuffix(" days")
        self.retention.setSpecialValueText("keep forever")
        self.retention.setKeyboardTracking(False)
        self.retention.valueChanged.connect(self._retention_edited)
        self.decay = QDoubleSpinBox()
        self.decay.setRange(0.5, 1.0)
        self.decay.setDecimals(3)
        self.decay.setSingleStep(0.005)
        self.decay.setKeyboardTracking(False)
        self.decay.valueChanged.connect(self._decay_edited)
        self.floor = QDoubleSpinBox()
        self.floor.setRange(0.0, 0.5)
        self.floor.setDecimals(2)
        self.floor.setSingleStep(0.01)
        self.floor.setKeyboardTracking(False)
        self.floor.valueChanged.connect(self._floor_edited)
        form.addRow("Forget archived memories after", self.retention)
        form.addRow("", _muted("Pinned memories are never forgotten.", wrap=False))
        form.addRow("Decay per run", self.decay)
        form.addRow(
            "", _muted("Each decay run multiplies salience by this (1.000: no decay).", wrap=False)
        )
        form.addRow("Salience floor", self.floor)
        v.addLayout(form)
        v.addWidget(_heading("Context digest"))
        form2 = _form()
        self.digest = QSpinBox()
        self.digest.setRange(512, 65_536)
        self.digest.setSingleStep(512)
        self.digest.setSuffix(" bytes")
        self.digest.setKeyboardTracking(False)
        self.digest.valueChanged.connect(self._digest_edited)
        form2.addRow("Digest size", self.digest)
        form2.addRow(
            "",
            _muted(
                "What an agent sees when a session starts. Claude Code previews about 10 KB.",
                wrap=False,
            ),
        )
        v.addLayout(form2)
        v.addStretch(1)

    def reload(self) -> None:
        s = self.ctx.settings
        for ispin, ivalue in ((self.retention, s.store.retention_days), (self.digest, s.context.digest_bytes)):  # fmt: skip
            with QSignalBlocker(ispin):
                ispin.setValue(ivalue)
        for fspin, fvalue in ((self.decay, s.store.decay_factor), (self.floor, s.store.salience_floor)):  # fmt: skip
            with QSignalBlocker(fspin):
                fspin.setValue(fvalue)

    def _retention_edited(self, value: int) -> None:
        self._save(ops.set_setting, "store", "retention_days", int(value))

    def _decay_edited(self, value: float) -> None:
        self._save(ops.set_setting, "store", "decay_factor", float(value))

    def _floor_edited(self, value: float) -> None:
        self._save(ops.set_setting, "store", "salience_floor", float(value))

    def _digest_edited(self, value: int) -> None:
        self._save(ops.set_setting, "context", "digest_bytes", int(value))


class AppearanceTab(SettingsTab):
    """The theme, and whether lexmem starts at login."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        form = _form()
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
        self.autostart_note = _muted(wrap=False)
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
            self._fail(_one_line(exc))
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
            self._fail(_one_line(exc))
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
        v.addWidget(_heading("Data folder"))
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
        self.move_note = _muted()
        self.move_bar = QProgressBar()
        self.move_bar.hide()
        self.move_status = _muted()
        v.addWidget(self.move_note)
        v.addWidget(self.move_bar)
        v.addWidget(self.move_status)
        v.addSpacing(12)
        v.addWidget(_heading("Export"))
        v.addWidget(
            _muted(
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
        self.export_status = _muted()
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
            self._fail(_one_line(exc))

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
        self._fail(_one_line(exc))


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
        self.saved = _muted("Changes apply at once.", wrap=False)
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
        self.optout, self.allow = p.optout, p.allow
        self.watch, self.watch_bar, self.watch_status = w.watch, w.watch_bar, w.watch_status
        self.reembed_bar, self.reembed_status = e.reembed_bar, e.reembed_status
        self.llm_url, self.llm_model, self.llm_licence_note = llm.llm_url, llm.llm_model, llm.llm_licence_note  # fmt: skip
        self.api_key, self.key_remove, self.key_status = llm.api_key, llm.key_remove, llm.key_status
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
