"""The Capture tab: the capture mode, pausing, and per-project modes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from PySide6.QtCore import QSignalBlocker, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import CAPTURE_MODES, project_labels

from .. import ops
from ..context import AppContext
from .common import SettingsTab, form_layout, heading, muted

__all__ = ["MODE_HELP", "MODE_LABELS", "CaptureTab"]

MODE_LABELS = {"off": "Off", "assist": "Assist", "full": "Full"}
MODE_HELP = {
    "off": "Nothing is captured automatically; only what you ask lexmem to remember.",
    "assist": "Only high-confidence, durable facts: decisions, conventions, corrections.",
    "full": "Broader capture: workflows, configuration and more of each session.",
}


def _login_name() -> str:
    """The login name the hook falls back to when no name is set."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


class CaptureTab(SettingsTab):
    """The capture mode, pausing, and per-project modes."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        form = form_layout()
        self.mode = QComboBox()
        for mode in CAPTURE_MODES:
            self.mode.addItem(MODE_LABELS[mode], mode)
        self.mode.currentIndexChanged.connect(self._mode_edited)
        self.mode_help = muted(wrap=False)
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
        self.user_name = QLineEdit()
        self.user_name.setPlaceholderText(_login_name() or "your name")
        self.user_name.setToolTip(
            "Who said your prompts in agent sessions; a search that names you finds them."
        )
        self.user_name.editingFinished.connect(self._user_name_edited)
        form.addRow("Your name", self.user_name)
        v.addLayout(form)
        v.addSpacing(10)
        v.addWidget(heading("Per-project modes"))
        v.addWidget(muted("A repository listed here is captured in its own mode."))
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
        with QSignalBlocker(self.user_name):
            self.user_name.setText(s.capture.user_name)
        self._show_pause()
        self._fill_project_modes(s.capture.project_modes)

    def stop(self) -> None:
        self._pause_timer.stop()

    def _fill_project_modes(self, modes: dict[str, str]) -> None:
        table = self.project_modes
        with QSignalBlocker(table):
            table.setRowCount(0)
            labels = project_labels(modes)
            for project, mode in sorted(modes.items()):
                row = table.rowCount()
                table.insertRow(row)
                # The name every other view gives it; the folder itself on hover.
                item = QTableWidgetItem(labels.get(project, project))
                item.setToolTip(project)
                item.setData(Qt.ItemDataRole.UserRole, project)
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

    def _user_name_edited(self) -> None:
        name = " ".join(self.user_name.text().split())
        if name != self.ctx.settings.capture.user_name:
            self._save(ops.set_setting, "capture", "user_name", name)

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
                self.set_project_mode(str(item.data(Qt.ItemDataRole.UserRole)), None)
