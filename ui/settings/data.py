"""The Data tab: the data folder (open it, move it) and exporting everything."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import Moved

from .. import ops
from ..context import AppContext
from ..licence_dialog import weakly
from .common import SettingsTab, heading, muted, one_line

__all__ = ["EXPORT_FORMATS", "DataTab"]

EXPORT_FORMATS = ("jsonl", "parquet", "csv")


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
        self._clear_error()
        self._set_busy("moving the data folder")
        self.move_bar.setRange(0, 0)
        self.move_bar.setFormat("%p%")
        self.move_bar.show()
        self.move_status.setText(f"Copying to {target}…")

        def done(moved: Moved) -> None:
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

        ops.move_data_folder(
            self.ctx, Path(target), progress=lambda d, t: self._report("move", d, t),
            on_done=done, on_error=failed,
        )  # fmt: skip

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
