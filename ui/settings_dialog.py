"""The settings window: every change applies at once, no OK or Apply.

:class:`SettingsDialog` composes one widget per tab and owns what they share: the one
error line under the tabs, the line beside Close, and the long task that keeps the window
open. The tabs are in :mod:`ui.settings`, one module each (capture, privacy, watch,
embedding, llm, retention, appearance, data).

Each tab only wires model to screen (STYLE.md 6): its ``reload`` writes the shared
settings into its widgets with their signals blocked (no echo), and an edit goes back
through an operation in :mod:`ui.ops`, which saves the file and updates the object the
in-process service reads (lexmem's own settings never become memories). A value that
cannot be used is refused with one line under the tabs and never saved.

Long work (a watched folder's first scan, re-embedding with another model, moving the
data folder, exporting) runs off the UI thread; progress from worker threads reaches the
progress bars through a queued signal.

Secrets never touch the settings file: the LLM's API key goes to the OS keyring. Start
at login is the autostart entry itself (through the facade), not a setting.
"""

from __future__ import annotations

import shiboken6
from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from .context import AppContext, UiChanges
from .settings.appearance import AppearanceTab
from .settings.capture import CaptureTab
from .settings.common import SettingsTab, muted
from .settings.data import DataTab
from .settings.embedding import EmbeddingTab
from .settings.llm import LlmTab, check_url
from .settings.privacy import PrivacyTab
from .settings.retention import RetentionTab
from .settings.watch import WatchTab

__all__ = ["AppearanceTab", "DataTab", "SettingsDialog", "WatchTab", "check_url"]


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
        self.remove_project = c.remove_project
        self.pause_button, self.resume_button = c.pause_button, c.resume_button
        self.user_name = c.user_name
        self.optout, self.allow = p.optout, p.allow
        self.watch, self.watch_bar, self.watch_status = w.watch, w.watch_bar, w.watch_status
        self.reembed_bar, self.reembed_status = e.reembed_bar, e.reembed_status
        self.idle_unload = e.idle_unload
        self.llm_url, self.llm_model, self.llm_licence_note = llm.llm_url, llm.llm_model, llm.llm_licence_note  # fmt: skip
        self.api_key, self.key_remove, self.key_status = llm.api_key, llm.key_remove, llm.key_status
        self.llm_timeout, self.llm_calls, self.llm_tokens = (
            llm.llm_timeout,
            llm.llm_calls,
            llm.llm_tokens,
        )
        self.llm_usage = llm.llm_usage
        self.retention, self.digest = r.retention, r.digest
        self.theme, self.autostart, self.autostart_note = a.theme, a.autostart, a.autostart_note
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
