"""The licence window, and the prompt shown where a gated action was refused.

:class:`LicenceDialog` shows the tier lexmem runs as (Core, Writer Pro, or the Writer Pro
trial), who the key belongs to and which gates it opens, and takes a new key: a pasted
key is verified as it arrives (off the UI thread, a moment after the typing stops) and
Activate keeps it in the OS keyring. Where there is no keyring it says how a key can be
given instead (``LEXMEM_LICENCE`` or ``LEXMEM_LICENCE_FILE``).

:func:`upgrade_prompt` is the one message a refused action shows: what was refused,
what Writer Pro adds, and a way to enter a key. Neither window ever blocks the event
loop (both open with ``open()``/``show()``), and neither shows an activated key again:
only its key id.
"""

from __future__ import annotations

import html
import weakref
from collections.abc import Callable
from datetime import datetime
from typing import Any

import shiboken6
from PySide6.QtCore import QEvent, QSignalBlocker, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontDatabase, QPalette, QShowEvent, QTextOption
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import (
    CAPTURE,
    CORE_ACTIVE_LIMIT,
    ENCODER,
    GATES,
    KEY_URL,
    STORAGE,
    TIER_NAMES,
    TRIAL_DAYS,
    Licence,
    LicenceError,
    LicenceStatus,
    keyring_available,
)

from .context import AppContext, UiChanges

__all__ = [
    "GATE_TITLES",
    "LicenceDialog",
    "UpgradePrompt",
    "open_key_page",
    "open_licence_dialog",
    "tier_text",
    "upgrade_prompt",
    "weakly",
]

#: What each gate's refused action is called in a sentence ("… needs Writer Pro").
GATE_TITLES = {
    CAPTURE: "Automatic capture",
    ENCODER: "LLM-assisted encoding",
    STORAGE: f"Keeping more than {CORE_ACTIVE_LIMIT:,} active memories",
}
# Constraint: PySide deletes a window without a parent when Python drops its last
# reference; prompts and licence windows opened that way are held here until they close.
_KEPT: set[QDialog] = set()
CHECK_DELAY_MS = 250  # a pasted or typed key is verified once the typing pauses this long
_SOURCES = {
    "key (keyring)": "kept in the OS keyring",
    "key (LEXMEM_LICENCE)": "from the LEXMEM_LICENCE variable",
}


def tier_text(status: LicenceStatus) -> str:
    """The tier in a few words: "Core", "Writer Pro", "Writer Pro trial · 9 days left"."""
    if status.source == "trial":
        n = status.trial_days_left or 0
        return f"Writer Pro trial · {n} day{'' if n == 1 else 's'} left"
    return status.tier_name


def _date(moment: datetime) -> str:
    return f"{moment.day} {moment:%B %Y}"


def _sentence(text: str) -> str:
    """A core message ("the licence key expired on …") as a sentence on screen."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = line[:1].upper() + line[1:]
    return line if not line or line.endswith((".", ":", "?", "!", ")")) else line + "."


def _valid_line(lic: Licence) -> str:
    who = lic.licensee or lic.email or "an unnamed licensee"
    until = f"until {_date(lic.expires)}" if lic.expires else "with no end date"
    return f"Valid: {_tier_name(lic)} for {who} {until}"


def _tier_name(lic: Licence) -> str:
    return TIER_NAMES.get(lic.tier, lic.tier)


def _is_dark(widget: QWidget) -> bool:
    return widget.palette().color(QPalette.ColorRole.Window).lightness() < 128


def _tone(label: QLabel, tone: str) -> None:
    """Colour a line "ok" (green), "error" (red), "muted" or "" (the text colour),
    readable on both themes."""
    label.setProperty("tone", tone)
    dark = _is_dark(label)
    colour = {
        "ok": "#51cf66" if dark else "#2b8a3e",
        "error": "#ff8787" if dark else "#c92a2a",
        "muted": "#adb5bd" if dark else "#6c757d",
    }.get(tone, "")
    label.setStyleSheet(f"color: {colour};" if colour else "")


def weakly(method: Callable[..., None], *args: Any) -> Callable[[Any], None]:
    """A background task's callback that does not keep its window alive.

    Constraint: a runner thread holds a task's callbacks until it moves on to the next
    task. Were they to hold the window, that thread could be the last to let go of it,
    and a widget destroyed off the UI thread leaves its timers dangling (a crash later).
    """
    ref = weakref.WeakMethod(method)

    def call(value: Any) -> None:
        bound = ref()
        if bound is not None and shiboken6.isValid(getattr(bound, "__self__", None)):
            bound(*args, value)

    return call


def _muted(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setProperty("role", "muted")
    label.setWordWrap(True)
    return label


class _KeyBox(QPlainTextEdit):
    """The paste box: plain text only (a key pasted from a web page brings no markup)."""

    def __init__(self) -> None:
        super().__init__()
        self.setTabChangesFocus(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)  # a key has no spaces
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.setFont(font)
        self.setPlaceholderText("Paste a licence key (it starts with LXM1.)")
        self.setFixedHeight(self.fontMetrics().lineSpacing() * 4 + 12)


class LicenceDialog(QDialog):
    """The tier, the key and its gates; paste a key to activate it, or remove it."""

    #: A key was activated or removed: the tier may have changed.
    licence_changed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.status: LicenceStatus | None = None
        self.keyring_ok = True
        self.keyring_why = ""
        self.candidate: Licence | None = None  # the pasted key, once verified
        self._generation = 0  # a verification's answer counts only if nothing was typed since
        self._busy = False
        self.setObjectName("licenceDialog")
        self.setWindowTitle("Licence — lexmem")
        self.setMinimumWidth(560)

        # -- the tier ---------------------------------------------------------------------
        self.tier = QLabel("Looking up the licence…")
        self.tier.setObjectName("licenceTier")
        self.tier.setStyleSheet("font-size: 15pt; font-weight: 600;")
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.hide()

        self.gates_box = QGroupBox("What this tier includes")
        grid = QGridLayout(self.gates_box)
        grid.setColumnStretch(1, 1)
        grid.setHorizontalSpacing(10)
        self.gate_marks: dict[str, QLabel] = {}
        self.gate_labels: dict[str, QLabel] = {}
        for row, (gate, description) in enumerate(GATES.items()):
            mark = QLabel("")
            mark.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
            mark.setMinimumWidth(mark.fontMetrics().horizontalAdvance("✗ No") + 6)
            text = QLabel(description[:1].upper() + description[1:])
            text.setWordWrap(True)
            text.setToolTip(f"Feature gate {gate}")
            grid.addWidget(mark, row, 0)
            grid.addWidget(text, row, 1)
            self.gate_marks[gate] = mark
            self.gate_labels[gate] = text
        always = _muted(
            "In every tier: remember by hand, search, browse, export and forget. "
            "Nothing you stored is ever locked away."
        )
        grid.addWidget(always, len(GATES), 0, 1, 2)

        # -- a new key --------------------------------------------------------------------
        key_box = QGroupBox("Licence key")
        kv = QVBoxLayout(key_box)
        self.key = _KeyBox()
        self.key.textChanged.connect(self._key_edited)
        self.verdict = QLabel("")
        self.verdict.setObjectName("licenceVerdict")
        self.verdict.setWordWrap(True)
        self.verdict.hide()
        self.no_keyring = QLabel("")
        self.no_keyring.setWordWrap(True)
        self.no_keyring.setObjectName("licenceNoKeyring")
        self.no_keyring.hide()
        self.remove_button = QPushButton("Remove key…")
        self.remove_button.setEnabled(False)
        self.remove_button.setToolTip("Remove the key from the OS keyring")
        self.remove_button.clicked.connect(self._remove_clicked)
        self.activate_button = QPushButton("Activate")
        self.activate_button.setEnabled(False)
        self.activate_button.clicked.connect(self.activate)
        self.get_button = QPushButton("Get a key…")
        self.get_button.setAutoDefault(False)
        self.get_button.setToolTip(f"Buy Writer Pro, or find the key you bought: {KEY_URL}")
        self.get_button.clicked.connect(lambda: open_key_page(self))
        buttons = QHBoxLayout()
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        buttons.addWidget(self.get_button)
        buttons.addWidget(self.activate_button)
        kv.addWidget(self.key)
        kv.addWidget(self.verdict)
        kv.addWidget(self.no_keyring)
        kv.addLayout(buttons)

        close = QPushButton("Close")
        close.setAutoDefault(False)
        close.clicked.connect(self.close)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(close)

        layout = QVBoxLayout(self)
        layout.setSpacing(8)
        layout.addWidget(self.tier)
        layout.addWidget(self.details)
        layout.addWidget(self.problem)
        layout.addSpacing(4)
        layout.addWidget(self.gates_box)
        layout.addWidget(key_box)
        layout.addStretch(1)  # a line that comes and goes never stretches the boxes
        layout.addLayout(bottom)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(CHECK_DELAY_MS)
        self._timer.timeout.connect(self._verify)
        ctx.hub.changed.connect(self._on_changed)
        self.refresh()

    # -- model to screen -------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the status (it may touch the keyring and a file) off the UI thread."""
        svc = self.ctx.lm.licence

        def work() -> tuple[LicenceStatus, bool, str]:
            ok, why = keyring_available()
            return svc.status(), ok, why

        self.ctx.read(work, on_done=weakly(self._show), on_error=weakly(self._unreadable))

    def _unreadable(self, exc: BaseException) -> None:
        self.tier.setText("The licence could not be read")
        self._show_problem(_sentence(str(exc)))

    def _show(self, result: tuple[LicenceStatus, bool, str]) -> None:
        st, self.keyring_ok, self.keyring_why = result
        first = self.status is None
        self.status = st
        self.tier.setText(tier_text(st))
        self.details.setText(self._describe(st))
        self._show_problem(_sentence(st.problem) if st.problem else "")
        for gate, mark in self.gate_marks.items():
            on = st.is_enabled(gate)
            mark.setText("✓ Yes" if on else "✗ No")
            _tone(mark, "ok" if on else "muted")
        if self.keyring_ok:
            self.no_keyring.hide()
        else:
            self.no_keyring.setText(
                f"This window cannot keep a key: {self.keyring_why}. Give lexmem the key "
                "instead through LEXMEM_LICENCE (the key itself) or LEXMEM_LICENCE_FILE (a "
                "file only you can read: chmod 600)."
            )
            self.no_keyring.show()
        self.remove_button.setEnabled(
            not self._busy and self.keyring_ok and st.source == "key (keyring)"
        )
        self._update_activate()
        self._fit(shrink=first)

    def _fit(self, *, shrink: bool = False) -> None:
        """Make room for a line that appeared (Qt's minimum size ignores how wrapped
        lines grow); ``shrink`` fits the window to its content, as on the first answer,
        when the wrapped lines had guessed their height before the window had its width."""
        width = max(self.width(), self.minimumWidth())
        height = self.heightForWidth(width)
        if height > 0 and (shrink or height > self.height()):
            self.resize(width, height)

    @staticmethod
    def _describe(st: LicenceStatus) -> str:
        lic = st.licence
        if lic is not None:
            who = lic.licensee or "An unnamed licensee"
            lines = [f"Licensed to {who}" + (f" <{lic.email}>" if lic.email else "")]
            lines.append(
                f"Valid until {_date(lic.expires)}" if lic.expires else "Valid with no end date"
            )
            where = _SOURCES.get(st.source, f"from {st.source.removeprefix('key (')[:-1]}")
            seats = f" · {lic.seats} seats" if lic.seats else ""
            lines.append(f"Key id {lic.key_id}{seats} · {where}")
            return "\n".join(lines)
        if st.source == "trial":
            ends = f" ends on {_date(st.trial_ends)}" if st.trial_ends else " is running"
            return (
                f"Every Writer Pro feature, free for {TRIAL_DAYS} days: the trial{ends}. "
                "Enter a key below to keep them afterwards."
            )
        ended = f"The Writer Pro trial ended on {_date(st.trial_ends)}. " if st.trial_ends else ""
        return (
            f"{ended}Core is free and keeps up to {CORE_ACTIVE_LIMIT:,} active memories, saved "
            "when you ask lexmem to remember. A Writer Pro key adds what is marked No below."
        )

    def _show_problem(self, text: str) -> None:
        self.problem.setText(text)
        _tone(self.problem, "error")
        self.problem.setVisible(bool(text))
        self._fit()

    def _on_changed(self, changes: UiChanges) -> None:
        # Another window (or the CLI, through the app) changed the state: look again.
        if changes.state and shiboken6.isValid(self) and self.isVisible() and not self._busy:
            self.refresh()

    # -- the pasted key --------------------------------------------------------------------

    def _key_edited(self) -> None:
        self._generation += 1
        self.candidate = None
        self._update_activate()
        if not self.key.toPlainText().strip():
            self._timer.stop()
            self._set_verdict("", "")
            return
        self._timer.start()

    def _verify(self) -> None:
        text = self.key.toPlainText().strip()
        if not text:
            return
        lm = self.ctx.lm
        generation = self._generation

        def work() -> Licence:
            return lm.verify_licence_key(text)

        self.ctx.read(
            work,
            on_done=weakly(self._verified, generation),
            on_error=weakly(self._not_verified, generation),
        )

    def _verified(self, generation: int, lic: Licence) -> None:
        if generation == self._generation:  # nothing typed since
            self.candidate = lic
            self._set_verdict(_valid_line(lic), "ok")
            self._update_activate()

    def _not_verified(self, generation: int, exc: BaseException) -> None:
        if generation == self._generation:
            message = str(exc) if isinstance(exc, LicenceError) else f"cannot check it: {exc}"
            self._set_verdict(_sentence(message), "error")

    def _set_verdict(self, text: str, tone: str) -> None:
        self.verdict.setText(text)
        _tone(self.verdict, tone)
        self.verdict.setVisible(bool(text))
        self._fit()

    def _update_activate(self) -> None:
        self.activate_button.setEnabled(
            self.candidate is not None and self.keyring_ok and not self._busy
        )
        self.activate_button.setDefault(self.activate_button.isEnabled())

    def verdict_text(self) -> str:
        """What the dialog says about the pasted key ("" while nothing is pasted)."""
        return self.verdict.text() if self.verdict.isVisibleTo(self) else ""

    # -- activating and removing -----------------------------------------------------------

    def activate(self) -> None:
        """Keep the pasted key in the OS keyring (on the read pool: no store write)."""
        text = self.key.toPlainText().strip()
        if self.candidate is None or not text or self._busy:
            return
        svc = self.ctx.lm.licence
        self._set_busy(True)
        self.ctx.read(
            lambda: svc.activate(text),
            on_done=weakly(self._activated),
            on_error=weakly(self._key_failed),
        )

    def _activated(self, lic: Licence) -> None:
        self._set_busy(False)
        self._generation += 1
        with QSignalBlocker(self.key):
            self.key.clear()  # the key is never shown again once kept
        self.candidate = None
        who = lic.licensee or lic.email
        self._set_verdict(f"Activated: {_tier_name(lic)}" + (f" for {who}." if who else "."), "ok")
        self._changed()

    def _key_failed(self, exc: BaseException) -> None:
        self._set_busy(False)
        self._set_verdict(_sentence(str(exc)), "error")

    def _remove_clicked(self) -> None:
        box = QMessageBox(self)
        box.setObjectName("removeLicenceConfirm")
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Remove the licence key")
        box.setText("Remove the licence key from the OS keyring?")
        box.setInformativeText(
            "lexmem falls back to the trial while it lasts, then to Core. Everything you "
            "stored stays. Keep a copy of the key if you mean to use it again."
        )
        box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.finished.connect(self._remove_answered)
        box.open()  # window-modal, without a nested event loop

    def _remove_answered(self, result: int) -> None:
        if result == QMessageBox.StandardButton.Yes.value and shiboken6.isValid(self):
            self.remove()

    def remove(self) -> None:
        """Remove the key from the OS keyring (no confirmation: the button asks first)."""
        if self._busy:
            return
        svc = self.ctx.lm.licence
        self._set_busy(True)
        self.ctx.read(svc.remove, on_done=weakly(self._removed), on_error=weakly(self._key_failed))

    def _removed(self, removed: bool) -> None:
        self._set_busy(False)
        self._set_verdict("Removed the key." if removed else "There was no key to remove.", "")
        self._changed()

    def _changed(self) -> None:
        self.refresh()
        self.licence_changed.emit()
        self.ctx.emit(UiChanges(state=True))

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.key.setEnabled(not busy)
        self.remove_button.setEnabled(False)
        self._update_activate()

    # -- Qt ----------------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # the theme changed: recolour
            for label in (self.verdict, self.problem, *self.gate_marks.values()):
                _tone(label, str(label.property("tone") or ""))

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.status is not None:
            self.refresh()  # the trial's days go by while the window is hidden

    def closeEvent(self, event: Any) -> None:
        self._timer.stop()
        super().closeEvent(event)

    def done(self, result: int) -> None:
        super().done(result)
        _KEPT.discard(self)


def open_licence_dialog(ctx: AppContext, parent: QWidget | None = None) -> LicenceDialog:
    """Show the licence window for ``ctx``: the open one, raised, or a new one."""
    for widget in QApplication.topLevelWidgets():
        # A closed window waits for its deletion: open a new one rather than revive it.
        if isinstance(widget, LicenceDialog) and widget.ctx is ctx and widget.isVisible():
            dialog = widget
            break
    else:
        dialog = LicenceDialog(ctx, parent)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        if parent is None:
            _KEPT.add(dialog)  # nothing else holds a window without a parent
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog


class UpgradePrompt(QMessageBox):
    """What a refused action shows: what needs Writer Pro, what it adds, and the way to
    a key. Find it as ``parent.findChild(QMessageBox, "upgradePrompt")``."""

    def __init__(
        self, parent: QWidget | None, gate: str, *, ctx: AppContext, detail: str = ""
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.gate = gate
        self.setObjectName("upgradePrompt")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setIcon(QMessageBox.Icon.Information)
        self.setWindowTitle("Writer Pro — lexmem")
        self.setTextFormat(Qt.TextFormat.RichText)
        title = GATE_TITLES.get(gate, GATES.get(gate, gate))
        self.setText(f"<b>{html.escape(title)} needs Writer Pro.</b>")
        adds = "".join(
            f"<li>{html.escape(d[:1].upper() + d[1:])}</li>" for d in GATES.values()
        )  # fmt: skip
        said = f"<p>{html.escape(detail)}</p>" if detail else ""
        self.setInformativeText(
            f"{said}<p>Writer Pro adds:</p><ul style='margin-left:-20px'>{adds}</ul>"
            "<p>Search, browse, export and forget work in every tier: nothing you stored "
            "is locked away.</p>"
        )
        self.enter_button = self.addButton(
            "Enter a licence key…", QMessageBox.ButtonRole.AcceptRole
        )
        # The prompt closes with any click: the licence window opens behind the page, ready
        # for the key the person comes back with.
        self.get_button = self.addButton("Get a key…", QMessageBox.ButtonRole.ActionRole)
        self.get_button.clicked.connect(self._get_key)
        self.close_button = self.addButton(QMessageBox.StandardButton.Close)
        self.setDefaultButton(self.enter_button)
        self.setEscapeButton(self.close_button)
        self.enter_button.clicked.connect(self._enter_key)
        if parent is None:
            _KEPT.add(self)

    def done(self, result: int) -> None:
        super().done(result)
        _KEPT.discard(self)

    def _get_key(self) -> None:
        self._enter_key()
        owner = self.parentWidget()
        open_key_page(owner.window() if owner is not None else None)

    def _enter_key(self) -> None:
        # The prompt closes with the click: the licence window belongs to its parent.
        owner = self.parentWidget()
        open_licence_dialog(self.ctx, owner.window() if owner is not None else None)


def open_key_page(parent: QWidget | None) -> bool:
    """Open :data:`KEY_URL` in the person's browser; where none opens, show the address so
    it can be copied. Nothing is fetched by lexmem itself."""
    if QDesktopServices.openUrl(QUrl(KEY_URL)):
        return True
    box = QMessageBox(parent)
    box.setObjectName("keyPageAddress")
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setWindowTitle("Get a key — lexmem")
    box.setText("No web browser opened. Writer Pro keys are at this address:")
    box.setInformativeText(KEY_URL)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.open()
    return False


def upgrade_prompt(parent: QWidget | None, gate: str, *, ctx: AppContext, detail: str = "") -> None:
    """Say that ``gate`` refused an action, without blocking the event loop.

    One prompt per parent: a second refusal replaces the first rather than stacking.
    """
    if parent is not None:
        for old in parent.findChildren(QMessageBox, "upgradePrompt"):
            old.close()
    UpgradePrompt(parent, gate, ctx=ctx, detail=detail).open()
