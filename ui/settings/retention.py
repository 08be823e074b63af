"""The Retention tab: how long archived memories are kept, decay, and the size of the
context digest."""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker
from PySide6.QtWidgets import QDoubleSpinBox, QSpinBox, QVBoxLayout, QWidget

from .. import ops
from ..context import AppContext
from .common import SettingsTab, form_layout, heading, muted

__all__ = ["RetentionTab"]


class RetentionTab(SettingsTab):
    """How long archived memories are kept, decay, and the size of the context digest."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        v = QVBoxLayout(self)
        v.addWidget(heading("Retention and decay"))
        form = form_layout()
        self.retention = QSpinBox()
        self.retention.setRange(0, 36_500)
        self.retention.setSuffix(" days")
        self.retention.setSpecialValueText("keep forever")
        self.retention.setKeyboardTracking(False)
        self.retention.valueChanged.connect(self._retention_edited)
        self.decay = QDoubleSpinBox()
        self.decay.setRange(0.5, 1.0)
        self.decay.setDecimals(3)
        self.decay.setSingleStep(0.005)
        self.decay.setKeyboardTracking(False)
        self.decay.valueChanged.connect(self._decay_edited)
        self.floor = QDoubleSpinBox()
        self.floor.setRange(0.0, 0.5)
        self.floor.setDecimals(2)
        self.floor.setSingleStep(0.01)
        self.floor.setKeyboardTracking(False)
        self.floor.valueChanged.connect(self._floor_edited)
        form.addRow("Forget archived memories after", self.retention)
        form.addRow("", muted("Pinned memories are never forgotten.", wrap=False))
        form.addRow("Decay per run", self.decay)
        form.addRow(
            "", muted("Each decay run multiplies salience by this (1.000: no decay).", wrap=False)
        )
        form.addRow("Salience floor", self.floor)
        v.addLayout(form)
        v.addWidget(heading("Context digest"))
        form2 = form_layout()
        self.digest = QSpinBox()
        self.digest.setRange(512, 65_536)
        self.digest.setSingleStep(512)
        self.digest.setSuffix(" bytes")
        self.digest.setKeyboardTracking(False)
        self.digest.valueChanged.connect(self._digest_edited)
        form2.addRow("Digest size", self.digest)
        form2.addRow(
            "",
            muted(
                "What an agent sees when a session starts. Claude Code previews about 10 KB.",
                wrap=False,
            ),
        )
        v.addLayout(form2)
        v.addStretch(1)

    def reload(self) -> None:
        s = self.ctx.settings
        for ispin, ivalue in ((self.retention, s.store.retention_days), (self.digest, s.context.digest_bytes)):  # fmt: skip
            with QSignalBlocker(ispin):
                ispin.setValue(ivalue)
        for fspin, fvalue in ((self.decay, s.store.decay_factor), (self.floor, s.store.salience_floor)):  # fmt: skip
            with QSignalBlocker(fspin):
                fspin.setValue(fvalue)

    def _retention_edited(self, value: int) -> None:
        self._save(ops.set_setting, "store", "retention_days", int(value))

    def _decay_edited(self, value: float) -> None:
        self._save(ops.set_setting, "store", "decay_factor", float(value))

    def _floor_edited(self, value: float) -> None:
        self._save(ops.set_setting, "store", "salience_floor", float(value))

    def _digest_edited(self, value: int) -> None:
        self._save(ops.set_setting, "context", "digest_bytes", int(value))
