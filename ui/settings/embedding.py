"""The Embedding tab: the model in use, how long it stays loaded when idle, and switching
to another (which re-embeds every memory)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import DEFAULT_MODEL, Settings
from lexmem.errors import InvalidInputError, LexmemError

from .. import ops
from ..context import AppContext
from .common import SettingsTab, form_layout, muted, one_line

__all__ = ["EmbeddingTab"]


class EmbeddingTab(SettingsTab):
    """The embedding model in use, and switching to another (which re-embeds everything)."""

    #: The app should reopen its core (the embedding model changed): the reason, one line.
    restart_required = Signal(str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        self.model_current = QLabel()
        self.model_current.setWordWrap(True)
        self.model_current.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        v.addWidget(self.model_current)
        idle = QFormLayout()
        self.idle_unload = QSpinBox()
        self.idle_unload.setRange(0, 24 * 60)
        self.idle_unload.setSuffix(" min")
        self.idle_unload.setSpecialValueText("never")
        self.idle_unload.setKeyboardTracking(False)
        self.idle_unload.setToolTip(
            "The model takes about 250 MB while loaded; it loads again (about a second) "
            "when a capture or a search next needs it"
        )
        self.idle_unload.valueChanged.connect(self._idle_unload_edited)
        idle.addRow("Unload the model when idle for", self.idle_unload)
        v.addLayout(idle)
        box = QGroupBox("Switch model")
        form = form_layout()
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
            muted(
                "Switching recomputes every memory's vector with the new model. Searches "
                "and captures wait until it is done; lexmem then restarts on the new model."
            )
        )
        self.reembed_bar = QProgressBar()
        self.reembed_bar.setFormat("%v of %m memories")
        self.reembed_bar.hide()
        self.reembed_status = muted()
        v.addWidget(self.reembed_bar)
        v.addWidget(self.reembed_status)
        v.addStretch(1)

    def reload(self) -> None:
        e = self.ctx.settings.embedding
        where = f" from {e.path}" if e.path else ""
        self.model_current.setText(f"In use: <b>{e.model}</b>{where} ({e.dim} dimensions)")
        with QSignalBlocker(self.model_name):
            self.model_name.setEditText(e.model)
        self.model_path.setText(e.path)
        with QSignalBlocker(self.model_dim):
            self.model_dim.setValue(e.dim)
        with QSignalBlocker(self.idle_unload):
            self.idle_unload.setValue(round(e.idle_unload_minutes))

    def _idle_unload_edited(self, minutes: int) -> None:
        self._save(ops.set_setting, "embedding", "idle_unload_minutes", float(minutes))

    def set_busy(self, what: str) -> None:
        super().set_busy(what)
        self.switch_button.setEnabled(not what)

    def _on_progress(self, task: str, done: int, total: int) -> None:
        self._report_to_bar(self.reembed_bar, done, total)
        if total:
            self.reembed_status.setText(f"Re-embedding {done} of {total} memories…")

    def _browse_model_clicked(self) -> None:
        picked = self._pick_folder("Model folder")
        if picked:
            self.model_path.setText(picked)

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
            self._fail(one_line(exc))
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
            self._fail(one_line(exc))

        self.ctx.read(work, on_done=done, on_error=failed)
