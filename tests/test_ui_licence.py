"""The licence window and the upgrade prompt, driven as a person would: a real core, real
runner threads, keys signed in the test with its own Ed25519 key pair, an in-memory
keyring (conftest), and a clock the test moves (never the wall clock)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import keyring
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from keyring.backends import fail
from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox, QWidget

from lexmem.api import Lexmem
from lexmem.config import Paths
from lexmem.embedder import Embedder
from lexmem.licence import (
    CAPTURE,
    CORE_ACTIVE_LIMIT,
    GATES,
    KEY_URL,
    KEYRING_ENTRY,
    STORAGE,
    LicenceService,
    encode_token,
)
from lexmem.models import Memory
from lexmem.settings import load_settings
from ui.app import App
from ui.context import AppContext, UiChanges
from ui.licence_dialog import LicenceDialog, UpgradePrompt
from ui.quick import QuickRememberDialog
from ui.settings_dialog import SettingsDialog

WAIT = 30_000
KID = "test-2026"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Clock:
    """The licence's notion of now; the test moves it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _key(private: Ed25519PrivateKey, **fields: Any) -> str:
    payload = {
        "licensee": "Ada Lovelace", "email": "ada@example.org", "tier": "writer_pro",
        "issued": "2026-02-20T00:00:00+00:00", "starts": "2026-02-20T00:00:00+00:00",
        "expires": "2027-02-20T00:00:00+00:00", "kid": KID, **fields,
    }  # fmt: skip
    return encode_token(payload, private.sign)


@pytest.fixture
def signer() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def lm(data_home: Path, embedder: Embedder, signer: Ed25519PrivateKey, clock: Clock) -> Iterator[Lexmem]:  # fmt: skip
    public = _b64(signer.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    paths = Paths(data_home)
    paths.ensure()
    licence = LicenceService(paths, public_keys={KID: public}, clock=clock, environ={})
    licence.status()  # the data folder's first run: the trial starts at T0
    core = Lexmem.open(data_home, embedder=embedder, licence=licence)
    yield core
    core.close()


def _core(clock: Clock) -> None:
    clock.now = T0 + timedelta(days=15)  # the 14-day trial is over


def _prompt(parent: QWidget, qtbot: Any) -> UpgradePrompt:
    qtbot.waitUntil(
        lambda: parent.findChild(QMessageBox, "upgradePrompt") is not None, timeout=WAIT
    )
    prompt = parent.findChild(QMessageBox, "upgradePrompt")
    assert isinstance(prompt, UpgradePrompt) and prompt.isVisible()
    return prompt


def _licence_windows() -> list[LicenceDialog]:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, LicenceDialog)]


def _says_what_writer_pro_adds(prompt: UpgradePrompt) -> None:
    text = prompt.informativeText()
    for description in GATES.values():
        assert description[1:].replace("&", "&amp;") in text
    assert prompt.enter_button.text() == "Enter a licence key…"
    # The gate's internal key is lexmem's business, not the reader's (issue 18, defect 8).
    assert prompt.gate not in text and "Feature gate" not in text


def _open_key_window_from(prompt: UpgradePrompt, qtbot: Any) -> LicenceDialog:
    prompt.enter_button.click()
    qtbot.waitUntil(lambda: bool(_licence_windows()), timeout=WAIT)
    (dialog,) = _licence_windows()
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.status is not None, timeout=WAIT)
    return dialog


# -- the licence window ------------------------------------------------------------------------


def test_a_pasted_key_is_checked_live_activated_into_the_keyring_and_removed(
    qtbot: Any, ctx: AppContext, signer: Ed25519PrivateKey, clock: Clock, memory_keyring: Any
) -> None:
    dialog = LicenceDialog(ctx)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.status is not None, timeout=WAIT)
    assert dialog.tier.text() == "Writer Pro trial · 14 days left"
    assert "16 March 2026" in dialog.details.text()
    assert [m.text() for m in dialog.gate_marks.values()] == ["✓ Yes"] * 3
    assert not dialog.activate_button.isEnabled() and not dialog.remove_button.isEnabled()

    good = _key(signer)
    head, body, signature = good.split(".")
    tampered = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    tampered["expires"] = None  # a perpetual key, wished for
    cases = [
        (f"{head}.{_b64(json.dumps(tampered).encode())}.{signature}", "The licence key's signature does not match"),
        (_key(Ed25519PrivateKey.generate()), "The licence key's signature does not match"),  # forged
        (_key(signer, expires="2026-03-01T00:00:00+00:00"), "The licence key expired on 2026-03-01."),
        (_key(signer, kid="elsewhere"), "The licence key was signed with an unknown key"),
        (good[: len(good) // 3], "The licence key is incomplete"),
    ]  # fmt: skip
    for text, says in cases:
        dialog.key.setPlainText(text)  # what a paste does
        qtbot.waitUntil(lambda: dialog.verdict_text().startswith(says), timeout=WAIT)  # noqa: B023
        assert not dialog.activate_button.isEnabled()
    dialog.key.clear()
    qtbot.keyClicks(dialog.key, "ABCD-1234")  # typed, not pasted: checked once typing stops
    qtbot.waitUntil(
        lambda: dialog.verdict_text().startswith("Not a lexmem licence key"), timeout=WAIT
    )

    dialog.key.setPlainText(good[:40] + "\n" + good[40:])  # wrapped by a mail client
    qtbot.waitUntil(dialog.activate_button.isEnabled, timeout=WAIT)
    assert dialog.verdict_text() == "Valid: Writer Pro for Ada Lovelace until 20 February 2027"

    seen: list[UiChanges] = []
    ctx.hub.changed.connect(seen.append)
    with qtbot.waitSignal(dialog.licence_changed, timeout=WAIT):
        dialog.activate_button.click()
    assert memory_keyring.without_trial() == {("lexmem", KEYRING_ENTRY): good}
    assert any(c.state for c in seen)
    qtbot.waitUntil(lambda: dialog.tier.text() == "Writer Pro", timeout=WAIT)
    assert "Licensed to Ada Lovelace <ada@example.org>" in dialog.details.text()
    assert f"Key id {KID}" in dialog.details.text() and "OS keyring" in dialog.details.text()
    assert dialog.key.toPlainText() == "" and dialog.remove_button.isEnabled()
    shown = " ".join(label.text() for label in dialog.findChildren(QLabel))
    assert good not in shown and signature not in shown  # never shown once kept

    dialog.remove_button.click()
    confirm = dialog.findChild(QMessageBox, "removeLicenceConfirm")
    assert isinstance(confirm, QMessageBox) and confirm.isVisible()
    with qtbot.waitSignal(dialog.licence_changed, timeout=WAIT):
        confirm.button(QMessageBox.StandardButton.Yes).click()
    assert memory_keyring.without_trial() == {}
    qtbot.waitUntil(lambda: dialog.tier.text() == "Writer Pro trial · 14 days left", timeout=WAIT)

    _core(clock)
    dialog.refresh()
    qtbot.waitUntil(lambda: dialog.tier.text() == "Core", timeout=WAIT)
    assert "trial ended on 16 March 2026" in dialog.details.text()
    assert [m.text() for m in dialog.gate_marks.values()] == ["✗ No"] * 3


def test_without_a_keyring_the_window_says_how_else_to_give_the_key(
    qtbot: Any, ctx: AppContext, signer: Ed25519PrivateKey
) -> None:
    keyring.set_keyring(fail.Keyring())
    dialog = LicenceDialog(ctx)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.no_keyring.isVisible(), timeout=WAIT)
    note = dialog.no_keyring.text()
    assert note.startswith("This window cannot keep a key: no OS keyring is available")
    assert "LEXMEM_LICENCE " in note and "LEXMEM_LICENCE_FILE" in note and "chmod 600" in note
    dialog.key.setPlainText(_key(signer))
    qtbot.waitUntil(lambda: dialog.verdict_text().startswith("Valid: Writer Pro"), timeout=WAIT)
    assert not dialog.activate_button.isEnabled()  # nowhere to keep it


# -- refused actions ---------------------------------------------------------------------------


def test_the_tray_shows_the_tier_and_under_core_capture_modes_prompt_for_writer_pro(
    qtbot: Any, lm: Lexmem, clock: Clock
) -> None:
    lm.settings.capture.mode = "assist"
    app = App(lm, tray=False, service=False)
    notes: list[tuple[str, str]] = []
    app.ctx.hub.notify.connect(lambda title, text: notes.append((title, text)))
    try:
        qtbot.waitUntil(lambda: app.licence is not None, timeout=WAIT)
        assert app.status_text().endswith("· Writer Pro trial · 14 days left")
        assert app.tray_state() == "capturing"
        items = [a.text() for a in app.window.menuBar().actions()[0].menu().actions()]
        assert items[-4:] == ["Settings…", "Licence…", "", "Quit lexmem"]

        _core(clock)
        app.ctx.emit(UiChanges(state=True))  # what a minute's tick or a key change does
        qtbot.waitUntil(
            lambda: app.licence is not None and app.licence.tier == "core", timeout=WAIT
        )
        assert app.tray_state() == "off"
        assert app.status_text() == (
            "Capture off: automatic capture needs Writer Pro · service runs in another process · Core"
        )
        assert app.window.state_label.text() == app.status_text()
        assert app.menu.mode_actions["full"].text() == "Full (needs Writer Pro)"
        qtbot.waitUntil(lambda: bool(notes), timeout=WAIT)  # the trial's end, said once
        assert notes[0][0] == "lexmem is now Core" and "trial has ended" in notes[0][1]
        qtbot.waitUntil(lambda: not lm.licence.status().notice, timeout=WAIT)

        app.menu.mode_actions["full"].trigger()  # a click in the Capture mode menu
        prompt = _prompt(app.window, qtbot)
        assert (
            prompt.gate == CAPTURE and prompt.text() == "<b>Automatic capture needs Writer Pro.</b>"
        )
        assert "Capture mode Full is saved" in prompt.informativeText()
        _says_what_writer_pro_adds(prompt)
        qtbot.waitUntil(lambda: load_settings(lm.paths).capture.mode == "full", timeout=WAIT)
        assert app.tray_state() == "off"

        dialog = _open_key_window_from(prompt, qtbot)
        assert dialog.tier.text() == "Core" and dialog.parentWidget() is app.window
        app.open_licence()  # the menu's Licence… raises the same window
        assert _licence_windows() == [dialog]
        dialog.close()
        assert len(notes) == 1
    finally:
        app.stop()
        app.window.deleteLater()


def test_under_core_a_watched_folder_is_refused_and_the_llm_note_shows(
    qtbot: Any, ctx: AppContext, clock: Clock, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "db.md").write_text("# Database\n\nThe staging database listens on port 5433.\n")
    ctx.settings.llm.url = "http://127.0.0.1:11434/v1"
    _core(clock)
    dialog = SettingsDialog(ctx)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: not dialog.llm_licence_note.isHidden(), timeout=WAIT)
    assert "LLM-assisted encoding needs Writer Pro" in dialog.llm_licence_note.text()

    dialog.add_watched_folder(str(notes))
    prompt = _prompt(dialog, qtbot)
    assert prompt.gate == CAPTURE and f"{notes} was not added" in prompt.informativeText()
    _says_what_writer_pro_adds(prompt)
    assert load_settings(ctx.paths).capture.watch == [] and dialog.watch.folders() == []
    assert ctx.runner.pending == 0 and not dialog.watch_bar.isVisible()
    key_window = _open_key_window_from(prompt, qtbot)
    assert key_window.parentWidget() is dialog
    key_window.close()


def test_under_core_quick_remember_past_the_limit_prompts_and_keeps_the_text(
    qtbot: Any, ctx: AppContext, clock: Clock
) -> None:
    dim = ctx.lm.store.dim
    ctx.lm.store.store_many(
        [Memory(content=f"Filler memory {i}", embedding=[0.0] * dim) for i in range(CORE_ACTIVE_LIMIT)]
    )  # fmt: skip
    _core(clock)
    quick = QuickRememberDialog(ctx)
    qtbot.addWidget(quick)
    quick.popup()
    quick.text.setPlainText("Deploys go out on Tuesdays")
    quick.save()
    prompt = _prompt(quick, qtbot)
    assert prompt.gate == STORAGE
    assert prompt.text() == "<b>Keeping more than 1,000 active memories needs Writer Pro.</b>"
    assert "your text stays in the box" in prompt.informativeText()
    assert (
        quick.error.isVisible() and "Core keeps up to 1,000 active memories" in quick.error.text()
    )
    assert quick.text.toPlainText() == "Deploys go out on Tuesdays" and quick.isVisible()
    prompt.close_button.click()
    assert ctx.lm.count() == CORE_ACTIVE_LIMIT


class _Browser(QObject):
    """Stands in for the person's web browser: Qt hands it the URLs the app opens
    (QDesktopServices.setUrlHandler), so the test sees the address and nothing launches."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url.toString())


def test_the_prompt_and_the_licence_window_say_where_to_get_a_key(
    qtbot: Any, lm: Lexmem, clock: Clock
) -> None:
    """Issue 18: the upgrade prompt and the Licence window had no way to get a key."""
    browser = _Browser()
    QDesktopServices.setUrlHandler("https", browser, "open")
    app = App(lm, tray=False, service=False)
    try:
        _core(clock)
        app.ctx.emit(UiChanges(state=True))
        qtbot.waitUntil(
            lambda: app.licence is not None and app.licence.tier == "core", timeout=WAIT
        )
        app.menu.mode_actions["full"].trigger()
        prompt = _prompt(app.window, qtbot)
        assert prompt.get_button.text() == "Get a key…"
        prompt.get_button.click()
        assert browser.opened == [KEY_URL]
        # …and the licence window waits for the key the person comes back with.
        qtbot.waitUntil(lambda: bool(_licence_windows()), timeout=WAIT)
        (dialog,) = _licence_windows()
        qtbot.addWidget(dialog)
        assert dialog.get_button.isVisible() and dialog.get_button.isEnabled()
        dialog.get_button.click()
        assert browser.opened == [KEY_URL, KEY_URL]
        dialog.close()
    finally:
        QDesktopServices.unsetUrlHandler("https")
        app.stop()
        app.window.deleteLater()


def test_where_no_browser_opens_the_address_is_shown_to_copy(
    qtbot: Any, ctx: AppContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ui.licence_dialog import open_key_page

    parent = QWidget()
    qtbot.addWidget(parent)
    # Offscreen with no handler Qt would start xdg-open: say no browser answered, as a
    # machine without one does.
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: False))
    assert not open_key_page(parent)
    box = parent.findChild(QMessageBox, "keyPageAddress")
    assert box is not None and box.informativeText() == KEY_URL


def test_licence_show_says_where_to_get_a_key_until_there_is_one(data_home: Path) -> None:
    from click.testing import CliRunner

    from lexmem.cli import cli

    out = CliRunner().invoke(cli, ["--home", str(data_home), "licence", "show"])
    assert out.exit_code == 0, out.output
    assert f"Get a key  {KEY_URL}, then: lexmem licence activate KEY" in out.output
