"""The Privacy tab: opted-out repositories, and the folders capture is limited to."""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget

from .. import ops
from ..context import AppContext
from .common import FolderList, SettingsTab, heading, muted

__all__ = ["PrivacyTab"]


class PrivacyTab(SettingsTab):
    """Opted-out repositories, and the folders capture is limited to."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        v.addWidget(heading("Opted-out repositories"))
        v.addWidget(
            muted(
                "Nothing from these repositories is captured, logged or printed, "
                "not even a digest. A .lexmem-optout file in a repository does the same."
            )
        )
        self.optout = FolderList("Add…")
        self.optout.add_button.clicked.connect(self._add_optout_clicked)
        self.optout.remove_button.clicked.connect(self._remove_optout_clicked)
        v.addWidget(self.optout, 1)
        v.addWidget(heading("Capture only from"))
        v.addWidget(
            muted(
                "When this list is not empty, automatic capture happens only in these "
                "folders and below."
            )
        )
        self.allow = FolderList("Add…")
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
