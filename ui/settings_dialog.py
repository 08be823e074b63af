"""The settings window: every change applies at once, no OK or Apply.

Each widget only wires model to screen (STYLE.md 6): :meth:`SettingsDialog.reload` writes
the shared settings into the widgets with their signals blocked (no echo), and an edit
goes back through :meth:`AppContext.update_settings`, which saves the file, updates the
object the in-process service reads and turns preference changes into
``config_change`` events. A value that cannot be used is refused with one line under
the tabs and never saved.

Long work (a watched folder's first scan, re-embedding with another model, moving the
data folder, exporting) runs off the UI thread; progress from worker threads reaches the
progress bars through a queued signal.

Secrets never touch the settings file: the LLM's API key goes to the OS keyring
(:mod:`lexmem.keystore`). Start at login is the autostart entry itself
(:mod:`lexmem.desktop`), not a setting.
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

from lexmem import desktop, keystore
from lexmem.api import Settings
from lexmem.config import CAPTURE_MODES, DEFAULT_MODEL, llm_url_problem
from lexmem.errors import InvalidInputError, LexmemError
from lexmem.licence import CAPTURE, ENCODER, LicenceStatus
from lexmem.llm import status_line
from lexmem.models import Changes

from . import theme
from .context import AppContext, UiChanges
from .licence_dialog import open_licence_dialog, upgrade_prompt, weakly

__all__ = ["SettingsDialog", "check_url"]

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


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _FolderList(QWidget):
    """A list of folders with Add… and Remove; the dialog decides what they mean."""

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


class SettingsDialog(QDialog):
    """lexmem's settings, in tabs; changes apply as they are made."""

    #: The data folder moved to this path: the app restarts on it (lexmem's own core and
    #: service still have the old folder open).
    data_folder_moved = Signal(str)
    #: The app should reopen its core (the embedding model changed): the reason, one line.
    restart_required = Signal(str)
    # (task, done, total) from worker threads, delivered queued on the UI thread.
    _progress = Signal(str, int, int)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._busy: str = ""  # a long task that must finish before the window closes
        self._key_available = False
        self._licence: LicenceStatus | None = None  # read off the UI thread
        self.setWindowTitle("Settings — lexmem")
        self.setMinimumSize(700, 500)

        self.tabs = QTabWidget()
        self.tabs.setUsesScrollButtons(True)
        self.tabs.addTab(self._capture_tab(), "Capture")
        self.tabs.addTab(self._privacy_tab(), "Privacy")
        self.tabs.addTab(self._watch_tab(), "Watched folders")
        self.tabs.addTab(self._embedding_tab(), "Embedding")
        self.tabs.addTab(self._llm_tab(), "LLM")
        self.tabs.addTab(self._memory_tab(), "Retention")
        self.tabs.addTab(self._appearance_tab(), "Appearance")
        self.tabs.addTab(self._data_tab(), "Data")

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

        self._progress.connect(self._on_progress, Qt.ConnectionType.QueuedConnection)
        ctx.hub.changed.connect(self._on_changed)
        # A save that fails (an unwritable settings file) reports through the hub.
        ctx.hub.error.connect(self._on_hub_error)
        self._pause_timer = QTimer(self)  # the pause ends by itself: keep the line true
        self._pause_timer.setInterval(30_000)
        self._pause_timer.timeout.connect(self._show_pause)
        self._pause_timer.start()
        self._watch_poll = QTimer(self)
        self._watch_poll.setInterval(1000)
        self._watch_poll.timeout.connect(self._poll_watch)
        self._polled: Path | None = None
        self.reload()
        self._check_keyring()
        self._load_licence()

    # == building the tabs ================================================================

    def _capture_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    def _privacy_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    def _watch_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    def _embedding_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    def _llm_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    def _memory_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    def _appearance_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    def _data_tab(self) -> QWidget:
        page = QWidget()
        v = QVBoxLayout(page)
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
        return page

    # == model to screen ==================================================================

    def reload(self) -> None:
        """Show the shared settings, signals blocked so nothing echoes back as an edit."""
        s = self.ctx.settings
        with QSignalBlocker(self.mode):
            self.mode.setCurrentIndex(max(0, self.mode.findData(s.capture.mode)))
        self.mode_help.setText(MODE_HELP.get(s.capture.mode, ""))
        self._show_pause()
        self._fill_project_modes(s.capture.project_modes)
        self.optout.set_folders(list(s.capture.optout))
        self.allow.set_folders(list(s.capture.allow_paths))
        self.watch.set_folders(list(s.capture.watch))

        e = s.embedding
        where = f" from {e.path}" if e.path else ""
        self.model_current.setText(f"In use: <b>{e.model}</b>{where} ({e.dim} dimensions)")
        with QSignalBlocker(self.model_name):
            self.model_name.setEditText(e.model)
        self.model_path.setText(e.path)
        with QSignalBlocker(self.model_dim):
            self.model_dim.setValue(e.dim)

        if not self.llm_url.hasFocus():
            self.llm_url.setText(s.llm.url)
        if not self.llm_model.hasFocus():
            self.llm_model.setText(s.llm.model)
        self._show_llm_licence()
        self.ctx.read(self.ctx.lm.llm_status, on_done=weakly(self._llm_usage_loaded))
        for ispin, ivalue in (
            (self.retention, s.store.retention_days), (self.digest, s.context.digest_bytes),
            (self.llm_calls, s.llm.calls_per_day), (self.llm_tokens, s.llm.tokens_per_day),
        ):  # fmt: skip
            with QSignalBlocker(ispin):
                ispin.setValue(ivalue)
        for fspin, fvalue in (
            (self.llm_timeout, s.llm.timeout_s), (self.decay, s.store.decay_factor),
            (self.floor, s.store.salience_floor),
        ):  # fmt: skip
            with QSignalBlocker(fspin):
                fspin.setValue(fvalue)

        with QSignalBlocker(self.theme):
            self.theme.setCurrentIndex(max(0, self.theme.findData(s.ui.theme)))
        supported, why = desktop.autostart_supported()
        with QSignalBlocker(self.autostart):
            self.autostart.setChecked(supported and desktop.autostart_enabled())
        self.autostart.setEnabled(supported)
        self.autostart_note.setText(
            why or f"Writes {desktop.autostart_path()} (runs `lexmem app`)."
        )

        self.home_label.setText(str(self.ctx.paths.home))
        pinned_by_env = bool(os.environ.get("LEXMEM_HOME", "").strip())
        self.move_button.setEnabled(not pinned_by_env and not self._busy)
        self.move_note.setText(
            "LEXMEM_HOME is set, so it decides the data folder: change it to use another one."
            if pinned_by_env
            else "Moving copies everything, checks the copy, then removes the old folder; "
            "lexmem restarts on the new one."
        )

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

    def _on_hub_error(self, message: str) -> None:
        if shiboken6.isValid(self) and self.isVisible():
            self._fail(message.strip().splitlines()[0] if message.strip() else "")

    def _on_changed(self, changes: UiChanges) -> None:
        if changes.settings and shiboken6.isValid(self):
            self.reload()
        if changes.state and shiboken6.isValid(self):
            self._load_licence()  # a key activated or removed

    def _load_licence(self) -> None:
        self.ctx.read(self.ctx.lm.licence.status, on_done=weakly(self._licence_loaded))

    def _licence_loaded(self, status: LicenceStatus) -> None:
        self._licence = status
        self._show_llm_licence()

    def _open_licence(self, _link: str = "") -> None:
        open_licence_dialog(self.ctx, self)

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

    # -- the widgets' slots ------------------------------------------------------------------
    # Constraint: Qt signals connect to bound methods, never to lambdas holding ``self``:
    # PySide keeps a lambda's connection alive past the window, and tearing it down later
    # corrupts memory (seen as "shared QObject was deleted directly" and a crash at exit).

    def _pause_clicked(self) -> None:
        self.set_paused(timedelta(hours=1))

    def _resume_clicked(self) -> None:
        self.set_paused(None)

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

    def _add_watch_clicked(self) -> None:
        picked = self._pick_folder("Watch a folder of notes")
        if picked:
            self.add_watched_folder(picked)

    def _remove_watch_clicked(self) -> None:
        self.edit_folders("watch", self.watch.selected(), False)

    def _browse_model_clicked(self) -> None:
        picked = self._pick_folder("Model folder")
        if picked:
            self.model_path.setText(picked)

    def _timeout_edited(self, value: float) -> None:
        self._apply(lambda s: setattr(s.llm, "timeout_s", float(value)))

    def _llm_calls_edited(self, value: int) -> None:
        self._apply(lambda s: setattr(s.llm, "calls_per_day", int(value)))

    def _llm_tokens_edited(self, value: int) -> None:
        self._apply(lambda s: setattr(s.llm, "tokens_per_day", int(value)))

    def _llm_usage_loaded(self, figures: dict[str, Any]) -> None:
        line = status_line(figures)
        self.llm_usage.setText(line if figures["configured"] else line.capitalize())

    def _retention_edited(self, value: int) -> None:
        self._apply(lambda s: setattr(s.store, "retention_days", int(value)))

    def _decay_edited(self, value: float) -> None:
        self._apply(lambda s: setattr(s.store, "decay_factor", float(value)))

    def _floor_edited(self, value: float) -> None:
        self._apply(lambda s: setattr(s.store, "salience_floor", float(value)))

    def _digest_edited(self, value: int) -> None:
        self._apply(lambda s: setattr(s.context, "digest_bytes", int(value)))

    def _theme_edited(self, _index: int) -> None:
        self.set_theme(str(self.theme.currentData()))

    def _store_key_clicked(self) -> None:
        self.store_api_key(self.api_key.text())

    def _remove_key_clicked(self) -> None:
        self.store_api_key("")

    def _open_folder_clicked(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.ctx.paths.home)))

    def _project_mode_edited(self, _index: int) -> None:
        combo = self.sender()
        if isinstance(combo, QComboBox):
            self.set_project_mode(str(combo.property("project")), str(combo.currentData()))

    # == screen to model ==================================================================

    def _apply(self, mutate: Callable[[Settings], None]) -> None:
        """Save one edit (off the UI thread); the reload that follows blocks the echo."""
        self._clear_error()

        def done(diff: list[tuple[str, Any, Any]]) -> None:
            if diff and shiboken6.isValid(self):
                self.saved.setText("Saved.")

        self.ctx.update_settings(mutate, on_done=done)

    def _fail(self, message: str) -> None:
        self.error.setText(message)
        self.error.show()

    def _clear_error(self) -> None:
        self.error.setText("")
        self.error.hide()

    def _guarded(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except (LexmemError, ValueError, OSError) as exc:
            self._fail(_one_line(exc))

    def _mode_edited(self, _index: int) -> None:
        mode = str(self.mode.currentData())
        self.mode_help.setText(MODE_HELP.get(mode, ""))
        self._apply(lambda s: setattr(s.capture, "mode", mode))

    def set_paused(self, duration: timedelta | None) -> None:
        """Pause automatic capture for ``duration``, or resume it (None)."""
        until = _stamp(datetime.now(UTC) + duration) if duration else ""
        self._apply(lambda s: setattr(s.capture, "paused_until", until))

    def set_project_mode(self, project: str, mode: str | None) -> None:
        """Give ``project`` its own capture mode, or remove its override (None)."""
        if mode is not None and mode not in CAPTURE_MODES:
            self._fail(f"capture mode must be one of {', '.join(CAPTURE_MODES)}, not {mode!r}")
            return

        def mutate(s: Settings) -> None:
            modes = dict(s.capture.project_modes)
            if mode is None:
                modes.pop(project, None)
            else:
                modes[project] = mode
            s.capture.project_modes = modes

        self._apply(mutate)

    def _pick_project(self) -> None:
        def add(path: str) -> None:
            folder = self._folder(path)
            if str(folder) in self.ctx.settings.capture.project_modes:
                raise InvalidInputError(f"{folder} already has its own mode")
            self.set_project_mode(str(folder), "off")

        self._pick_and("A project with its own capture mode", add)

    def _remove_projects(self) -> None:
        rows = sorted({i.row() for i in self.project_modes.selectedIndexes()})
        for row in rows:
            item = self.project_modes.item(row, 0)
            if item is not None:
                self.set_project_mode(item.text(), None)

    @staticmethod
    def _folder(path: str) -> Path:
        folder = Path(path).expanduser()
        if not folder.is_absolute():
            raise InvalidInputError(f"{path!r} is not an absolute folder path")
        return folder.resolve()

    def edit_folders(self, key: str, paths: str | list[str], add: bool) -> None:
        """Add or remove folders in a ``[capture]`` list: optout, allow_paths or watch."""
        if key not in ("optout", "allow_paths", "watch"):
            raise ValueError(f"not a folder list: {key}")
        items = [paths] if isinstance(paths, str) else list(paths)

        def check() -> None:
            # Removal takes the stored strings as they are: a folder that has since moved
            # or vanished must still be removable.
            folders = [str(self._folder(p)) for p in items] if add else items
            if add:
                current = getattr(self.ctx.settings.capture, key)
                known = [f for f in folders if f in current]
                if known:
                    raise InvalidInputError(f"{known[0]} is already in the list")

            def mutate(s: Settings) -> None:
                current = [f for f in getattr(s.capture, key) if f not in folders]
                setattr(s.capture, key, sorted(current + folders) if add else current)

            self._apply(mutate)

        self._guarded(check)

    # -- watched folders -------------------------------------------------------------------

    def add_watched_folder(self, path: str) -> None:
        """Watch ``path`` and read its notes now, with progress."""
        try:
            folder = self._folder(path)
            if not folder.is_dir():
                raise InvalidInputError(f"{folder} is not a folder")
            if str(folder) in self.ctx.settings.capture.watch:
                raise InvalidInputError(f"{folder} is already watched")
        except LexmemError as exc:
            self._fail(_one_line(exc))
            return
        self._clear_error()
        # The gate is asked off the UI thread: the status may read the keyring and a file.
        lm = self.ctx.lm
        self.ctx.read(
            lambda: lm.licence.is_enabled(CAPTURE),
            on_done=weakly(self._watch_licensed, folder),
            on_error=weakly(self._gate_failed),
        )

    def _watch_licensed(self, folder: Path, enabled: bool) -> None:
        if not enabled:  # watched Markdown folders are automatic capture: add nothing
            upgrade_prompt(
                self, CAPTURE, ctx=self.ctx,
                detail=f"{folder} was not added: watching a folder of notes is automatic "
                "capture. Notes can still be kept one at a time with Quick remember.",
            )  # fmt: skip
            return

        def mutate(s: Settings) -> None:
            s.capture.watch = sorted([*s.capture.watch, str(folder)])

        def saved(diff: list[tuple[str, Any, Any]]) -> None:
            if shiboken6.isValid(self):
                self._first_scan(folder)

        self.ctx.update_settings(mutate, on_done=saved)

    def _gate_failed(self, exc: BaseException) -> None:
        self._fail(_one_line(exc))

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
                self._fail(_one_line(exc))

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

    # -- embedding model -------------------------------------------------------------------

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
        self._set_busy("re-embedding")
        self.reembed_bar.setRange(0, 0)
        self.reembed_bar.show()
        self.reembed_status.setText(f"Loading {model}…")

        def work() -> int:
            # The single writer re-embeds, loading the new model; the app's own core keeps
            # its model until lexmem restarts. Searches keep working meanwhile.
            return self.ctx.lm.reembed(
                lambda d, t: self._report("reembed", d, t), embedding=wanted.embedding
            )

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

    # -- LLM ---------------------------------------------------------------------------

    def _llm_url_edited(self) -> None:
        def check() -> None:
            url = check_url(self.llm_url.text())
            if url != self.ctx.settings.llm.url:
                self._apply(lambda s: setattr(s.llm, "url", url))
            else:
                self._clear_error()

        self._guarded(check)

    def _llm_model_edited(self) -> None:
        model = self.llm_model.text().strip()
        if model != self.ctx.settings.llm.model:
            self._apply(lambda s: setattr(s.llm, "model", model))

    def _check_keyring(self) -> None:
        def probe() -> tuple[bool, str, bool]:
            ok, why = keystore.backend_available()
            stored = ok and keystore.get_secret(keystore.LLM_API_KEY) is not None
            return ok, why, stored

        def done(result: tuple[bool, str, bool]) -> None:
            if not shiboken6.isValid(self):
                return
            ok, why, stored = result
            self._key_available = ok
            for w in (self.api_key, self.key_save):
                w.setEnabled(ok)
            self.key_remove.setEnabled(ok and stored)
            if not ok:
                self.key_status.setText(f"The API key cannot be kept: {why}.")
            else:
                self._show_key(stored, why)

        def failed(exc: BaseException) -> None:
            if shiboken6.isValid(self):
                self.key_status.setText(f"The OS keyring cannot be used: {_one_line(exc)}")

        self.ctx.read(probe, on_done=done, on_error=failed)

    def _show_key(self, stored: bool, backend: str = "") -> None:
        where = f" ({backend})" if backend else ""
        self.key_status.setText(
            f"A key is stored in the OS keyring{where}; it is never written to the settings file."
            if stored
            else f"No key stored. Keys go to the OS keyring{where}, never to the settings file."
        )
        self.key_remove.setEnabled(stored)

    def store_api_key(self, key: str) -> None:
        """Keep ``key`` in the OS keyring (an empty key removes it)."""
        key = key.strip()
        if not self._key_available:
            self._fail("No OS keyring is available, so the key cannot be kept.")
            return
        self._clear_error()
        for w in (self.api_key, self.key_save, self.key_remove):
            w.setEnabled(False)

        def done(_none: None) -> None:
            if not shiboken6.isValid(self):
                return
            self.api_key.clear()
            for w in (self.api_key, self.key_save):
                w.setEnabled(True)
            self._show_key(bool(key))
            self.saved.setText("Key stored." if key else "Key removed.")

        def failed(exc: BaseException) -> None:
            if shiboken6.isValid(self):
                for w in (self.api_key, self.key_save, self.key_remove):
                    w.setEnabled(True)
                self._fail(_one_line(exc))

        def work() -> None:
            keystore.set_secret(keystore.LLM_API_KEY, key)

        self.ctx.read(work, on_done=done, on_error=failed)

    # -- appearance and startup -------------------------------------------------------

    def set_theme(self, name: str) -> None:
        """Apply the theme now and keep it."""
        app = QApplication.instance()
        try:
            if isinstance(app, QApplication):
                theme.apply_theme(app, name)
        except ValueError as exc:
            self._fail(_one_line(exc))
            return
        self._apply(lambda s: setattr(s.ui, "theme", name))

    def set_autostart(self, enabled: bool) -> None:
        """Write or remove the autostart entry (its presence is the setting)."""
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
        self.saved.setText(
            "lexmem starts at login." if enabled else "lexmem no longer starts at login."
        )

    # -- data folder ---------------------------------------------------------------------

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
            self, "Export everything to a new folder", start, "Export folder (*)"
        )
        if chosen:
            self.export_to(chosen, fmt)

    def export_to(self, folder: str, fmt: str = "jsonl") -> None:
        """Export every memory, link and confidence point to a new (or empty) ``folder``."""
        out = Path(folder).expanduser()
        lm = self.ctx.lm
        self._clear_error()
        self.export_button.setEnabled(False)
        self.export_bar.show()
        self.export_status.setText(f"Exporting to {out}…")

        def done(counts: dict[str, int]) -> None:
            if not shiboken6.isValid(self):
                return
            self.export_button.setEnabled(True)
            self.export_bar.hide()
            self.export_status.setText(
                f"Exported {counts.get('memories', 0)} memories, {counts.get('links', 0)} links "
                f"and {counts.get('confidence', 0)} confidence points to {out} ({fmt})."
            )

        def failed(exc: BaseException) -> None:
            if shiboken6.isValid(self):
                self.export_button.setEnabled(True)
                self.export_bar.hide()
                self.export_status.setText("")
                self._fail(_one_line(exc))

        self.ctx.read(lambda: lm.export(out, fmt), on_done=done, on_error=failed)

    # == progress, pickers, closing ========================================================

    def _report(self, task: str, done: int, total: int) -> None:
        """Called on worker threads: hand the numbers to the UI thread."""
        # RuntimeError: the window is gone; the work goes on without a bar to show it.
        with contextlib.suppress(RuntimeError):
            self._progress.emit(task, done, total)

    def _on_progress(self, task: str, done: int, total: int) -> None:
        bar = {"watch": self.watch_bar, "reembed": self.reembed_bar, "move": self.move_bar}[task]
        self._report_to_bar(bar, done, total)
        if task == "reembed" and total:
            self.reembed_status.setText(f"Re-embedding {done} of {total} memories…")

    @staticmethod
    def _report_to_bar(bar: QProgressBar, done: int, total: int) -> None:
        # Large folders count bytes beyond a 32-bit int: show thousandths instead.
        if total > 2**31 - 1:
            done, total = done * 1000 // total, 1000
        bar.setRange(0, max(total, 1))
        bar.setValue(min(done, total) if total else 1)
        bar.show()

    def _set_busy(self, what: str) -> None:
        self._busy = what
        for w in (self.switch_button, self.move_button):
            w.setEnabled(not what)

    def _pick_folder(self, title: str) -> str:
        return QFileDialog.getExistingDirectory(self, title, str(Path.home()))

    def _pick_and(self, title: str, then: Callable[[str], None]) -> None:
        picked = self._pick_folder(title)
        if picked:
            self._guarded(lambda: then(picked))

    def _confirm(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self, title, text)
        return answer == QMessageBox.StandardButton.Yes

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._busy:
            self._fail(f"Wait until {self._busy} has finished.")
            event.ignore()
            return
        self._pause_timer.stop()
        self._watch_poll.stop()
        super().closeEvent(event)

    def reject(self) -> None:
        if self._busy:
            self._fail(f"Wait until {self._busy} has finished.")
            return
        super().reject()
