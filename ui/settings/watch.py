"""The Watched folders tab: folders of Markdown notes that become memories, and the
progress of reading a newly added one (the single writer reads it, wherever it runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtWidgets import QProgressBar, QVBoxLayout, QWidget

from lexmem.api import CAPTURE
from lexmem.errors import LexmemError
from lexmem.models import Changes

from .. import ops
from ..context import AppContext, UiChanges
from ..licence_dialog import upgrade_prompt, weakly
from .common import FolderList, SettingsTab, heading, muted, one_line

__all__ = ["WatchTab"]


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

    def reload(self) -> None:
        self.watch.set_folders(list(self.ctx.settings.capture.watch))

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
