"""Quick remember: a small always-on-top box for "remember this", from anywhere.

Enter saves, Shift+Enter starts a new line, Esc cancels. While the person types, the
classifier's guess shows under the text ("auto → procedural (0.82)"), computed off the
UI thread a moment after the typing stops. Saving goes through :func:`ui.ops.remember`
(the inbox and the single writer, like every write); the box closes on success and keeps
the text, with the one-line reason, on failure (and, where Core's limit on active
memories refused it, the upgrade prompt of :mod:`ui.licence_dialog`).
"""

from __future__ import annotations

import logging
from typing import Any

import shiboken6
from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeyEvent, QShowEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import LicenceRequiredError, project_choices
from lexmem.models import Changes, TypeClassification

from . import ops
from .context import AppContext
from .licence_dialog import upgrade_prompt

__all__ = ["TYPES", "QuickRememberDialog"]

#: The type choices: "auto" lets the classifier decide.
TYPES = ("auto", "semantic", "episodic", "procedural")
log = logging.getLogger("lexmem.ui")
GUESS_DELAY_MS = 300  # the classifier runs once the typing pauses this long


class _TextBox(QPlainTextEdit):
    """The text: Enter submits, Shift+Enter starts a new line.

    Constraint: a subclass rather than an event filter on the dialog. Qt calls a filter
    while the dialog is being destroyed, and a Python filter on a half-destroyed object
    corrupts memory at exit.
    """

    submitted = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.textCursor().insertText("\n")
            else:
                self.submitted.emit()
            return
        super().keyPressEvent(event)


class QuickRememberDialog(QDialog):
    """The quick-remember box. ``remembered`` carries the ids of the memories it created
    (empty when a busy service queued the event and will store it shortly)."""

    remembered = Signal(list)

    def __init__(
        self, ctx: AppContext, parent: QWidget | None = None, *, project: str | None = None
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._guess_generation = 0
        self._saving = False
        self.saved_text = ""  # the last text saved (for the app's confirmation)
        self.setWindowTitle("Remember — lexmem")
        self.setWindowFlags(
            Qt.WindowType.Dialog
            | Qt.WindowType.FramelessWindowHint
            | Qt.WindowType.WindowStaysOnTopHint
        )
        # Constraint: no translucent background and no rounded corners: without a
        # compositor (many X11 desktops) the transparent corners paint black.
        self.setMinimumWidth(520)

        frame = QFrame(self)
        frame.setObjectName("quickFrame")
        frame.setStyleSheet(
            "QFrame#quickFrame { background: palette(window); border: 1px solid palette(mid); }"
        )
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(frame)
        box = QVBoxLayout(frame)
        box.setContentsMargins(14, 12, 14, 12)
        box.setSpacing(8)

        heading = QLabel("Remember")
        heading.setProperty("role", "heading")
        hint = QLabel("Enter saves · Shift+Enter new line · Esc cancels")
        hint.setProperty("role", "muted")
        top = QHBoxLayout()
        top.addWidget(heading)
        top.addStretch(1)
        top.addWidget(hint)
        box.addLayout(top)

        self.text = _TextBox()
        self.text.setPlaceholderText("What should lexmem remember?")
        self.text.setTabChangesFocus(True)
        self.text.setMinimumHeight(96)
        self.text.submitted.connect(self.save)
        box.addWidget(self.text)

        row = QHBoxLayout()
        self.type = QComboBox()
        self.type.addItems(TYPES)
        self.type.setToolTip("The memory's type; auto lets the classifier choose")
        self.project = QComboBox()
        self.project.setEditable(True)
        self.project.setMinimumWidth(200)
        self.project.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        line = self.project.lineEdit()
        if line is not None:
            line.setPlaceholderText("no project")
        if project:
            self.project.setEditText(project)
        self.pin = QCheckBox("Pin")
        self.pin.setToolTip("A pinned memory survives decay and leads its project's digest")
        row.addWidget(QLabel("Type"))
        row.addWidget(self.type)
        row.addSpacing(8)
        row.addWidget(QLabel("Project"))
        row.addWidget(self.project, 1)
        row.addSpacing(8)
        row.addWidget(self.pin)
        box.addLayout(row)

        bottom = QHBoxLayout()
        self.guess = QLabel("")
        self.guess.setProperty("role", "muted")
        self.error = QLabel("")
        self.error.setStyleSheet("color: #e03131;")
        self.error.hide()
        self.cancel_button = QPushButton("Cancel")
        self.save_button = QPushButton("Remember")
        self.save_button.setDefault(True)
        self.cancel_button.clicked.connect(self.reject)
        self.save_button.clicked.connect(self.save)
        bottom.addWidget(self.guess, 1)
        bottom.addWidget(self.cancel_button)
        bottom.addWidget(self.save_button)
        box.addWidget(self.error)
        box.addLayout(bottom)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(GUESS_DELAY_MS)
        self._timer.timeout.connect(self._classify)
        self.text.textChanged.connect(self._timer.start)
        # Constraint: bound methods, not lambdas holding ``self``: PySide keeps a lambda's
        # connection alive past the dialog, and its teardown then crashes at exit.
        self.type.currentTextChanged.connect(self._type_changed)

    # -- showing ---------------------------------------------------------------------

    def popup(self) -> None:
        """Show in the upper third of the screen under the pointer, focused on the text."""
        self.adjustSize()
        screen = QGuiApplication.screenAt(self.cursor().pos()) or QGuiApplication.primaryScreen()
        if screen is not None:
            area = screen.availableGeometry()
            self.move(area.center().x() - self.width() // 2, area.top() + area.height() // 4)
        self.show()
        self.raise_()
        self.activateWindow()
        self.text.setFocus()

    def _type_changed(self, _text: str) -> None:
        self._timer.start()

    def _load_projects(self) -> None:
        def done(projects: list[str]) -> None:
            if not shiboken6.isValid(self):
                return
            # Names, as the browser shows them, with the key each stands for; no blank
            # entry: an empty box is "no project" (its placeholder says so).
            typed = self.project.currentText()
            with QSignalBlocker(self.project):
                self.project.clear()
                for key, label in project_choices(projects):
                    self.project.addItem(label, key)
                    self.project.setItemData(
                        self.project.count() - 1, key, Qt.ItemDataRole.ToolTipRole
                    )
                self.project.setCurrentIndex(-1)
                self.project.setEditText(typed)

        def failed(exc: BaseException) -> None:
            # The list is a convenience: a project can still be typed.
            log.warning("could not list the projects: %s", exc)

        self.ctx.read(self.ctx.lm.projects, on_done=done, on_error=failed)

    # -- the live guess ------------------------------------------------------------------

    def _classify(self) -> None:
        text = self.text.toPlainText().strip()
        self._guess_generation += 1
        generation = self._guess_generation
        if not text:
            self.guess.setText("")
            return

        def done(result: TypeClassification) -> None:
            if shiboken6.isValid(self) and generation == self._guess_generation:
                self.guess.setText(self.describe_guess(result))

        def failed(exc: BaseException) -> None:
            if shiboken6.isValid(self) and generation == self._guess_generation:
                self.guess.setText("")

        self.ctx.read(lambda: self.ctx.lm.classify(text), on_done=done, on_error=failed)

    def describe_guess(self, result: TypeClassification) -> str:
        chosen = self.type.currentText()
        guess = f"{result.type} ({result.confidence:.2f})"
        if chosen == "auto":
            return f"auto → {guess}"
        return f"{chosen} (the classifier would say {guess})"

    # -- saving ----------------------------------------------------------------------

    def save(self) -> None:
        if self._saving:
            return
        text = self.text.toPlainText().strip()
        if not text:
            self._show_error("Nothing to remember: the text is empty")
            return
        chosen = self.type.currentText()
        self._set_saving(True)

        def done(changes: Changes) -> None:
            if not shiboken6.isValid(self):
                return
            self._set_saving(False)
            self.saved_text = text  # what the app's confirmation quotes
            self.reset()  # the app shows this box again: it starts empty next time
            self.remembered.emit(list(changes.created))
            self.accept()

        def failed(exc: BaseException) -> None:
            if not shiboken6.isValid(self):
                return
            self._set_saving(False)
            self._show_error(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
            if isinstance(exc, LicenceRequiredError):  # Core's cap on active memories
                upgrade_prompt(
                    self, exc.gate, ctx=self.ctx,
                    detail="Nothing was saved: your text stays in the box. Archive or forget "
                    "some memories to make room, or enter a Writer Pro key.",
                )  # fmt: skip

        ops.remember(
            self.ctx, text, mtype=None if chosen == "auto" else chosen,
            # As typed or picked: the writer reads a name or a label back to its project
            # (Lexmem.project_meant), as for every other way of remembering.
            project=self.project.currentText().strip() or None, pin=self.pin.isChecked(),
            on_done=done, on_error=failed,
        )  # fmt: skip

    def reset(self) -> None:
        """Empty the box for the next memory (a cancelled draft is kept instead)."""
        self._timer.stop()
        self._guess_generation += 1
        with QSignalBlocker(self.text):
            self.text.clear()
        self.type.setCurrentIndex(0)
        self.pin.setChecked(False)
        self.guess.setText("")
        self.error.hide()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._load_projects()  # projects seen since the box was last open
        self.text.setFocus()

    def _set_saving(self, saving: bool) -> None:
        self._saving = saving
        for w in (self.text, self.type, self.project, self.pin, self.save_button):
            w.setEnabled(not saving)
        self.save_button.setText("Saving…" if saving else "Remember")
        if saving:
            self.error.hide()

    def _show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.show()
        self.text.setFocus()

    def reject(self) -> None:
        self._timer.stop()
        super().reject()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        # Enter outside the text box saves too (the default button would, but only when
        # it has focus rules on its side); Esc falls through to QDialog's reject.
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.save()
            return
        super().keyPressEvent(event)

    def closeEvent(self, event: Any) -> None:
        self._timer.stop()
        super().closeEvent(event)
