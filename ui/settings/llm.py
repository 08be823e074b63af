"""The LLM tab: the optional LLM's endpoint, model and daily budget, today's use, and its
API key (kept in the OS keyring, never in the settings file)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from PySide6.QtCore import QSignalBlocker, Qt
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from lexmem.api import ENCODER, LicenceStatus, llm_status_line, llm_url_problem
from lexmem.errors import InvalidInputError, LexmemError

from .. import ops
from ..context import AppContext
from ..licence_dialog import open_licence_dialog, weakly
from .common import SettingsTab, form_layout, muted, one_line

__all__ = ["LlmTab", "check_url"]


def check_url(text: str) -> str:
    """An LLM endpoint as typed: "" (no LLM) or an http(s) URL with a host."""
    url = text.strip()
    if not url:
        return ""
    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in url:
        raise InvalidInputError(
            f"{url!r} is not an endpoint lexmem can call (use http://host:port/v1 or https://…)"
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise InvalidInputError(f"{url!r} has an invalid port") from exc
    problem = llm_url_problem(url)
    if problem:
        raise InvalidInputError(problem)
    return url


class LlmTab(SettingsTab):
    """The optional LLM: endpoint, model, limits, today's use, and its API key."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(ctx, parent)
        self._key_available = False
        self._licence: LicenceStatus | None = None  # read off the UI thread
        v = QVBoxLayout(self)
        v.addWidget(
            muted(
                "An OpenAI-compatible endpoint (a local Ollama, for instance) helps the rules: "
                "it classifies what they cannot, finds what is worth keeping in conversations, "
                "words corrections and workflows, and summarises long texts. Empty: no LLM, "
                "and nothing leaves this machine. The budget resets each day."
            )
        )
        form = form_layout()
        self.llm_url = QLineEdit()
        self.llm_url.setPlaceholderText("http://localhost:11434/v1")
        self.llm_url.editingFinished.connect(self._llm_url_edited)
        self.llm_model = QLineEdit()
        self.llm_model.setPlaceholderText("e.g. llama3.2")
        self.llm_model.editingFinished.connect(self._llm_model_edited)
        self.llm_timeout = QDoubleSpinBox()
        self.llm_timeout.setRange(1.0, 600.0)
        self.llm_timeout.setDecimals(0)
        self.llm_timeout.setSuffix(" s")
        self.llm_timeout.setKeyboardTracking(False)
        self.llm_timeout.valueChanged.connect(self._timeout_edited)
        self.llm_calls = QSpinBox()
        self.llm_calls.setRange(0, 1_000_000)
        self.llm_calls.setSingleStep(100)
        self.llm_calls.setSuffix(" calls")
        self.llm_calls.setSpecialValueText("no limit")
        self.llm_calls.setKeyboardTracking(False)
        self.llm_calls.valueChanged.connect(self._llm_calls_edited)
        self.llm_tokens = QSpinBox()
        self.llm_tokens.setRange(0, 100_000_000)
        self.llm_tokens.setSingleStep(10_000)
        self.llm_tokens.setSuffix(" tokens")
        self.llm_tokens.setSpecialValueText("no limit")
        self.llm_tokens.setKeyboardTracking(False)
        self.llm_tokens.valueChanged.connect(self._llm_tokens_edited)
        form.addRow("Endpoint URL", self.llm_url)
        form.addRow("Model", self.llm_model)
        form.addRow("Timeout", self.llm_timeout)
        form.addRow("Daily budget", self.llm_calls)
        form.addRow("", self.llm_tokens)
        v.addLayout(form)
        self.llm_usage = muted("")
        self.llm_usage.setObjectName("llmUsage")
        v.addWidget(self.llm_usage)
        self.llm_licence_note = QLabel("")
        self.llm_licence_note.setObjectName("llmLicenceNote")
        self.llm_licence_note.setWordWrap(True)
        self.llm_licence_note.setTextFormat(Qt.TextFormat.RichText)
        self.llm_licence_note.linkActivated.connect(self._open_licence)
        self.llm_licence_note.hide()
        v.addWidget(self.llm_licence_note)
        key = QGroupBox("API key")
        kv = QVBoxLayout(key)
        row = QHBoxLayout()
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("paste a key to store it in the OS keyring")
        self.api_key.returnPressed.connect(self._store_key_clicked)
        self.key_save = QPushButton("Store")
        self.key_save.clicked.connect(self._store_key_clicked)
        self.key_remove = QPushButton("Remove")
        self.key_remove.clicked.connect(self._remove_key_clicked)
        row.addWidget(self.api_key, 1)
        row.addWidget(self.key_save)
        row.addWidget(self.key_remove)
        kv.addLayout(row)
        self.key_status = muted("Looking for the OS keyring…")
        kv.addWidget(self.key_status)
        for w in (self.api_key, self.key_save, self.key_remove):
            w.setEnabled(False)
        v.addWidget(key)
        v.addStretch(1)

    def reload(self) -> None:
        s = self.ctx.settings
        if not self.llm_url.hasFocus():
            self.llm_url.setText(s.llm.url)
        if not self.llm_model.hasFocus():
            self.llm_model.setText(s.llm.model)
        self._show_llm_licence()
        self.ctx.read(self.ctx.lm.llm_status, on_done=weakly(self._llm_usage_loaded))
        for ispin, ivalue in ((self.llm_calls, s.llm.calls_per_day), (self.llm_tokens, s.llm.tokens_per_day)):  # fmt: skip
            with QSignalBlocker(ispin):
                ispin.setValue(ivalue)
        with QSignalBlocker(self.llm_timeout):
            self.llm_timeout.setValue(s.llm.timeout_s)

    def _llm_usage_loaded(self, figures: dict[str, Any]) -> None:
        line = llm_status_line(figures)
        self.llm_usage.setText(line if figures["configured"] else line.capitalize())

    # -- the licence: under Core the endpoint is kept but not used -------------------------

    def load_licence(self) -> None:
        self.ctx.read(self.ctx.lm.licence.status, on_done=weakly(self._licence_loaded))

    def _licence_loaded(self, status: LicenceStatus) -> None:
        self._licence = status
        self._show_llm_licence()

    def _open_licence(self, _link: str = "") -> None:
        open_licence_dialog(self.ctx, self.window())

    def _show_llm_licence(self) -> None:
        """Under Core an endpoint is kept but not used: say so under it."""
        gated = self._licence is not None and not self._licence.is_enabled(ENCODER)
        if gated and self.ctx.settings.llm.url:
            self.llm_licence_note.setText(
                "LLM-assisted encoding needs Writer Pro: under Core the endpoint is kept but "
                "not used, and the rules classify alone. "
                "<a href='licence'>Enter a licence key…</a>"
            )
            self.llm_licence_note.show()
        else:
            self.llm_licence_note.hide()

    # -- screen to model ----------------------------------------------------------------------

    def _llm_url_edited(self) -> None:
        try:
            url = check_url(self.llm_url.text())
        except (LexmemError, ValueError, OSError) as exc:
            self._fail(one_line(exc))
            return
        if url != self.ctx.settings.llm.url:
            self._save(ops.set_setting, "llm", "url", url)
        else:
            self._clear_error()

    def _llm_model_edited(self) -> None:
        model = self.llm_model.text().strip()
        if model != self.ctx.settings.llm.model:
            self._save(ops.set_setting, "llm", "model", model)

    def _timeout_edited(self, value: float) -> None:
        self._save(ops.set_setting, "llm", "timeout_s", float(value))

    def _llm_calls_edited(self, value: int) -> None:
        self._save(ops.set_setting, "llm", "calls_per_day", int(value))

    def _llm_tokens_edited(self, value: int) -> None:
        self._save(ops.set_setting, "llm", "tokens_per_day", int(value))

    # -- the API key, in the OS keyring ------------------------------------------------------

    def check_keyring(self) -> None:
        ops.keyring_state(
            self.ctx, on_done=weakly(self._keyring_checked), on_error=weakly(self._no_keyring)
        )

    def _keyring_checked(self, result: tuple[bool, str, bool]) -> None:
        ok, why, stored = result
        self._key_available = ok
        for w in (self.api_key, self.key_save):
            w.setEnabled(ok)
        self.key_remove.setEnabled(ok and stored)
        if not ok:
            self.key_status.setText(f"The API key cannot be kept: {why}.")
        else:
            self._show_key(stored, why)

    def _no_keyring(self, exc: BaseException) -> None:
        self.key_status.setText(f"The OS keyring cannot be used: {one_line(exc)}")

    def _show_key(self, stored: bool, backend: str = "") -> None:
        where = f" ({backend})" if backend else ""
        self.key_status.setText(
            f"A key is stored in the OS keyring{where}; it is never written to the settings file."
            if stored
            else f"No key stored. Keys go to the OS keyring{where}, never to the settings file."
        )
        self.key_remove.setEnabled(stored)

    def _store_key_clicked(self) -> None:
        self.store_api_key(self.api_key.text())

    def _remove_key_clicked(self) -> None:
        self.store_api_key("")

    def store_api_key(self, key: str) -> None:
        """Keep ``key`` in the OS keyring (an empty key removes it)."""
        key = key.strip()
        if not self._key_available:
            self._fail("No OS keyring is available, so the key cannot be kept.")
            return
        self._clear_error()
        for w in (self.api_key, self.key_save, self.key_remove):
            w.setEnabled(False)
        stored = bool(key)
        ops.store_api_key(
            self.ctx, key,
            on_done=weakly(self._key_stored, stored), on_error=weakly(self._key_failed),
        )  # fmt: skip

    def _key_stored(self, stored: bool, _none: None) -> None:
        self.api_key.clear()
        for w in (self.api_key, self.key_save):
            w.setEnabled(True)
        self._show_key(stored)
        self.notice.emit("Key stored." if stored else "Key removed.")

    def _key_failed(self, exc: BaseException) -> None:
        for w in (self.api_key, self.key_save, self.key_remove):
            w.setEnabled(True)
        self._fail(one_line(exc))
