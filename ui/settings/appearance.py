"""The Appearance tab: the theme, and whether lexmem starts at login (the autostart
entry itself is the setting, not a line in the settings file)."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSignalBlocker
from PySide6.QtWidgets import QApplication, QCheckBox, QComboBox, QVBoxLayout, QWidget

from lexmem.api import (
    autostart_command,
    autostart_enabled,
    autostart_path,
    autostart_supported,
    home_short,
)
from lexmem.api import set_autostart as write_autostart
from lexmem.errors import LexmemError

from .. import ops, theme
from ..context import AppContext
from .common import SettingsTab, form_layout, muted, one_line

__all__ = ["THEME_LABELS", "AppearanceTab"]

THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


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
        self.autostart_note = muted()  # wraps: the path is long in a deep home folder
        form.addRow("Startup", self.autostart)
        form.addRow("", self.autostart_note)
        v.addLayout(form)
        v.addStretch(1)

    def reload(self) -> None:
        with QSignalBlocker(self.theme):
            self.theme.setCurrentIndex(max(0, self.theme.findData(self.ctx.settings.ui.theme)))
        supported, why = autostart_supported()
        with QSignalBlocker(self.autostart):
            self.autostart.setChecked(supported and autostart_enabled())
        self.autostart.setEnabled(supported)
        where = home_short(str(autostart_path()))
        self.autostart_note.setText(why or f"Writes {where} (runs `lexmem app`).")

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
            command = autostart_command(Path(home) if home else None)
            write_autostart(enabled, command=command)
        except LexmemError as exc:
            with QSignalBlocker(self.autostart):
                self.autostart.setChecked(autostart_enabled())
            self._fail(one_line(exc))
            return
        self._clear_error()
        self.notice.emit(
            "lexmem starts at login." if enabled else "lexmem no longer starts at login."
        )
