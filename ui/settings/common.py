"""What the settings window's tabs share: :class:`SettingsTab`, the base of each tab,
and a few small widgets and helpers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from lexmem.errors import LexmemError

from ..context import AppContext
from ..licence_dialog import weakly

__all__ = ["FolderList", "SettingsTab", "form_layout", "heading", "muted", "one_line"]


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def muted(text: str = "", *, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    label.setProperty("role", "muted")
    label.setWordWrap(wrap)
    return label


def form_layout() -> QFormLayout:
    form = QFormLayout()
    # Spin boxes and combos keep their natural width; only text fields stretch.
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
    return form


def heading(text: str) -> QLabel:
    label = QLabel(text)
    label.setProperty("role", "heading")
    return label


class FolderList(QWidget):
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
            self._fail(one_line(exc))
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
