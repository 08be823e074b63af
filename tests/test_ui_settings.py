"""Quick remember and the settings window, driven as a person would: real core, real
runner threads, real keys and signals (offscreen), an in-memory keyring."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import PasswordDeleteError
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from lexmem.api import Lexmem
from lexmem.capture.inbox import Inbox
from lexmem.config import location_file, resolve_paths, write_location
from lexmem.desktop import autostart_path
from lexmem.embedder import Embedder
from lexmem.models import MemorySource
from lexmem.settings import load_settings
from lexmem.store.lance import MemoryFilter
from ui import theme
from ui.context import AppContext
from ui.quick import QuickRememberDialog
from ui.settings_dialog import SettingsDialog

# Generous: the machine may be busy; each wait ends as soon as its condition holds.
WAIT = 30_000
KEY = "sk-test-4f1d9a2b7c3e5f60718293a4b5c6d7e8"


class MemoryKeyring(KeyringBackend):
    """A real keyring backend that keeps secrets in a dict (never the user's keyring)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.secrets.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


def _own(backend: MemoryKeyring) -> dict[tuple[str, str], str]:
    """The secrets the person put there: not the trial's record and key (lexmem keeps
    those in the keyring itself once anything asks for the tier)."""
    return {k: v for k, v in backend.secrets.items() if k[1] not in ("trial", "trial-key")}


@pytest.fixture(autouse=True)
def memory_keyring() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


@pytest.fixture
def dialog(qtbot: Any, ctx: AppContext) -> SettingsDialog:
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(
        lambda: "keyring" in dlg.key_status.text() and "Looking" not in dlg.key_status.text(),
        timeout=WAIT,
    )
    return dlg


def _events(ctx: AppContext) -> list[dict[str, Any]]:
    inbox = Inbox(ctx.paths.inbox)
    return [inbox.read(p) for p in inbox.pending()] if ctx.paths.inbox.exists() else []


def _config_keys(ctx: AppContext) -> list[str]:
    return [e["metadata"]["key"] for e in _events(ctx) if e["event_type"] == "config_change"]


# -- quick remember ------------------------------------------------------------------------


def test_quick_remember_guesses_live_and_saves_with_enter(qtbot: Any, ctx: AppContext) -> None:
    dlg = QuickRememberDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.popup()
    qtbot.keyClicks(dlg.text, "To release: run make dist")
    qtbot.keyClick(dlg.text, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(dlg.text, "then upload the wheel with twine")
    qtbot.waitUntil(lambda: dlg.guess.text().startswith("auto → procedural ("), timeout=10_000)
    dlg.project.setEditText("shop")
    dlg.pin.setChecked(True)
    with qtbot.waitSignal(dlg.remembered, timeout=30_000) as sig:
        qtbot.keyClick(dlg.text, Qt.Key.Key_Return)
    (mid,) = sig.args[0]
    memory = ctx.lm.get(mid)
    assert memory.content == "To release: run make dist\nthen upload the wheel with twine"
    assert memory.project == "shop" and memory.pinned and str(memory.type) == "procedural"
    assert dlg.result() == QDialog.DialogCode.Accepted and not dlg.isVisible()
    assert dlg.text.toPlainText() == "" and not dlg.pin.isChecked()  # ready to show again


def test_quick_remember_esc_cancels_and_saves_nothing(qtbot: Any, ctx: AppContext) -> None:
    dlg = QuickRememberDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.popup()
    qtbot.keyClicks(dlg.text, "The staging database listens on port 5433")
    qtbot.keyClick(dlg.text, Qt.Key.Key_Escape)
    assert dlg.result() == QDialog.DialogCode.Rejected and not dlg.isVisible()
    assert ctx.lm.count() == 0 and _events(ctx) == []
    assert dlg.text.toPlainText() == "The staging database listens on port 5433"  # the draft


def test_quick_remember_keeps_the_text_and_says_why_when_saving_fails(
    qtbot: Any, ctx: AppContext
) -> None:
    ctx.paths.inbox.parent.mkdir(parents=True, exist_ok=True)
    ctx.paths.inbox.write_text("")  # a broken data folder: the inbox is a file
    dlg = QuickRememberDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.popup()
    qtbot.keyClicks(dlg.text, "Deploys go out on Tuesdays")
    qtbot.keyClick(dlg.text, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: dlg.error.isVisible(), timeout=30_000)
    assert str(ctx.paths.inbox) in dlg.error.text() and "\n" not in dlg.error.text()
    assert dlg.text.toPlainText() == "Deploys go out on Tuesdays"
    assert dlg.isVisible() and dlg.save_button.isEnabled() and ctx.lm.count() == 0


# -- settings ------------------------------------------------------------------------------


def test_the_idle_time_of_the_model_round_trips_through_the_embedding_tab(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog
) -> None:
    saved = lambda: load_settings(ctx.paths)  # noqa: E731
    assert dialog.idle_unload.value() == 10  # the default, shown
    dialog.idle_unload.setValue(3)
    qtbot.waitUntil(lambda: saved().embedding.idle_unload_minutes == 3.0, timeout=WAIT)
    # The shared object changes too, which the core's own embedder reads at each decision.
    assert ctx.settings.embedding.idle_unload_minutes == 3.0
    dialog.idle_unload.setValue(0)
    qtbot.waitUntil(lambda: saved().embedding.idle_unload_minutes == 0.0, timeout=WAIT)
    assert dialog.idle_unload.text() == "never"

    again = SettingsDialog(ctx)  # a new window reads the saved value back
    qtbot.addWidget(again)
    again.embedding_tab.reload()
    assert again.idle_unload.value() == 0
    ctx.lm.settings.embedding.idle_unload_minutes = 25.0
    again.embedding_tab.reload()
    assert again.idle_unload.value() == 25


def test_edits_land_in_the_file_and_the_shared_settings_at_once(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog, tmp_path: Path
) -> None:
    shared = ctx.settings  # the object the in-process service reads
    saved = lambda: load_settings(ctx.paths)  # noqa: E731

    dialog.mode.setCurrentIndex(dialog.mode.findData("full"))
    qtbot.waitUntil(lambda: saved().capture.mode == "full", timeout=WAIT)
    assert shared.capture.mode == "full"

    dialog.retention.setValue(30)
    dialog.digest.setValue(4096)
    dialog.set_project_mode("/work/secret-client", "off")
    dialog.edit_folders("optout", str(tmp_path / "private-repo"), True)
    qtbot.waitUntil(
        lambda: saved().capture.optout == [str(tmp_path / "private-repo")], timeout=WAIT
    )
    s = saved()
    assert (s.store.retention_days, s.context.digest_bytes) == (30, 4096)
    assert s.capture.project_modes == {"/work/secret-client": "off"}
    assert shared.store.retention_days == 30 and shared.context.digest_bytes == 4096
    # The widgets show the model once each save's change reaches the UI thread.
    qtbot.waitUntil(
        lambda: dialog.optout.folders() == [str(tmp_path / "private-repo")], timeout=WAIT
    )
    assert dialog.project_modes.rowCount() == 1
    # Named as everywhere else, the folder on hover; Remove still takes the folder out.
    assert dialog.project_modes.item(0, 0).text() == "secret-client"
    assert dialog.project_modes.item(0, 0).toolTip() == "/work/secret-client"
    dialog.project_modes.selectRow(0)
    dialog.remove_project.click()
    qtbot.waitUntil(lambda: saved().capture.project_modes == {}, timeout=WAIT)
    qtbot.waitUntil(lambda: dialog.project_modes.rowCount() == 0, timeout=WAIT)
    # lexmem's own settings become no configuration-change events (no memories).
    assert _config_keys(ctx) == []

    dialog.pause_button.click()
    qtbot.waitUntil(lambda: dialog.pause_status.text().startswith("Paused until"), timeout=WAIT)
    assert saved().capture.paused_until > "2000" and not dialog.resume_button.isHidden()
    dialog.resume_button.click()
    qtbot.waitUntil(lambda: dialog.pause_status.text() == "Capturing", timeout=WAIT)
    assert saved().capture.paused_until == ""

    dialog.llm_url.setText("localhost:11434 v1")
    dialog.llm_url.editingFinished.emit()
    assert dialog.error.text().startswith("'localhost:11434 v1' is not an endpoint")
    dialog.llm_url.setText("http://127.0.0.1:11434/v1")
    dialog.llm_url.editingFinished.emit()
    qtbot.waitUntil(lambda: saved().llm.url == "http://127.0.0.1:11434/v1", timeout=WAIT)
    assert dialog.error.text() == ""


def test_the_api_key_goes_to_the_keyring_and_nowhere_else(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog, memory_keyring: MemoryKeyring
) -> None:
    assert dialog.api_key.isEnabled() and "No key stored" in dialog.key_status.text()
    dialog.llm_model.setText("llama3.2")
    dialog.llm_model.editingFinished.emit()
    dialog.api_key.setText(KEY)
    qtbot.keyClick(dialog.api_key, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "A key is stored" in dialog.key_status.text(), timeout=WAIT)
    assert _own(memory_keyring) == {("lexmem", "llm-api-key"): KEY}
    assert dialog.api_key.text() == "" and dialog.key_remove.isEnabled()
    qtbot.waitUntil(lambda: load_settings(ctx.paths).llm.model == "llama3.2", timeout=WAIT)
    for path in ctx.paths.home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    dialog.key_remove.click()
    qtbot.waitUntil(lambda: "No key stored" in dialog.key_status.text(), timeout=WAIT)
    assert _own(memory_keyring) == {}


def test_without_a_keyring_the_key_field_says_so(qtbot: Any, ctx: AppContext) -> None:
    keyring.set_keyring(fail.Keyring())
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: "cannot be kept" in dlg.key_status.text(), timeout=WAIT)
    assert "no OS keyring is available" in dlg.key_status.text()
    assert not dlg.api_key.isEnabled()


def test_theme_applies_at_once_and_start_at_login_writes_the_entry(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog
) -> None:
    dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
    assert theme.current_theme() == "dark"  # applied before the save finishes
    qtbot.waitUntil(lambda: load_settings(ctx.paths).ui.theme == "dark", timeout=WAIT)
    assert ctx.settings.ui.theme == "dark" and _config_keys(ctx) == []
    dialog.theme.setCurrentIndex(dialog.theme.findData("light"))
    assert theme.current_theme() == "light"

    entry = autostart_path()
    # The note names the entry from the home folder and wraps: the whole path was cut at
    # the window's edge (issue 18).
    note = dialog.autostart_note
    assert note.wordWrap() and note.text().startswith("Writes ~/"), note.text()
    dialog.autostart.setChecked(True)
    assert entry.is_file() and "\nExec=" in entry.read_text()
    assert entry.read_text().rstrip().splitlines()[0] == "[Desktop Entry]"
    dialog.autostart.setChecked(False)
    assert not entry.exists()


def test_a_watched_folder_is_read_at_once_with_progress(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    (notes / "deploy").mkdir(parents=True)
    (notes / "deploy" / "release.md").write_text("# Release\n\nRun make dist, then twine upload.\n")
    (notes / "db.md").write_text("# Database\n\nThe staging database listens on port 5433.\n")
    (notes / "team.markdown").write_text("# Team\n\nStand-ups are at 9:30 on weekdays.\n")
    (notes / "todo.txt").write_text("not a note")
    dialog.add_watched_folder(str(notes))
    qtbot.waitUntil(lambda: dialog.watch_status.text().startswith("Read 3 notes"), timeout=60_000)
    assert (dialog.watch_bar.value(), dialog.watch_bar.maximum()) == (3, 3)
    assert load_settings(ctx.paths).capture.watch == [str(notes.resolve())]
    assert dialog.watch.folders() == [str(notes.resolve())]
    ctx.lm.refresh()
    assert ctx.lm.count(MemoryFilter(source=MemorySource.MARKDOWN_CHUNK)) == 3
    assert len(ctx.lm.journal.file_hashes_under(str(notes.resolve()))) == 3  # each note read
    dialog.add_watched_folder(str(notes))
    assert dialog.error.text().endswith("is already watched")


def test_a_service_elsewhere_reads_the_folder_and_the_dialog_shows_how_far(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog, tmp_path: Path
) -> None:
    from faultkit import environment, lexmem_command

    from lexmem.locks import service_running

    notes = tmp_path / "notes"
    notes.mkdir()
    for name in ("a.md", "b.md"):
        (notes / name).write_text(f"# {name}\n\nThe build server is ci-{name[0]}.example.\n")
    # The single writer in another process (`lexmem serve`): the dialog's scan goes to it.
    serve = subprocess.Popen(
        [*lexmem_command(), "serve"], env=environment(ctx.paths.home),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        qtbot.waitUntil(lambda: service_running(ctx.paths), timeout=60_000)
        dialog.add_watched_folder(str(notes))
        qtbot.waitUntil(
            lambda: dialog.watch_status.text().startswith("Read 2 notes"), timeout=60_000
        )
    finally:
        serve.terminate()
        serve.wait(30)
    assert (dialog.watch_bar.value(), dialog.watch_bar.maximum()) == (2, 2)
    ctx.lm.refresh()
    assert ctx.lm.count(MemoryFilter(source=MemorySource.MARKDOWN_CHUNK)) == 2
    assert len(ctx.lm.journal.file_hashes_under(str(notes.resolve()))) == 2  # each note read
    ops = [e.rule for e in ctx.lm.audit_entries(limit=20) if e.kind == "memory_op"]
    assert ops == ["op.scan_notes"]  # the service read them, not this process


def test_export_everything(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog, tmp_path: Path
) -> None:
    ctx.lm.remember("Deploys go out on Tuesdays")
    dialog.export_to(str(tmp_path / "backup"), "jsonl")
    qtbot.waitUntil(lambda: dialog.export_status.text().startswith("Exported"), timeout=30_000)
    assert dialog.export_status.text().startswith("Exported 1 memories, 0 links")
    assert (tmp_path / "backup" / "manifest.json").exists()


def test_switching_the_embedding_model_re_embeds_with_progress(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog, embedder: Embedder
) -> None:
    for text in ("Deploys go out on Tuesdays", "The staging database listens on port 5433"):
        ctx.lm.remember(text)
    # The same network as a "local folder" model under another name: a real second model.
    folder = embedder.models_dir / "all-MiniLM-L6-v2-int8"
    with qtbot.waitSignal(dialog.restart_required, timeout=120_000) as sig:
        dialog.switch_model("local/minilm-copy", str(folder), 384)
    assert sig.args == ["the embedding model is now local/minilm-copy"]
    assert (dialog.reembed_bar.value(), dialog.reembed_bar.maximum()) == (2, 2)
    assert load_settings(ctx.paths).embedding.model == "local/minilm-copy"
    ctx.lm.refresh()
    assert ctx.lm.store.stored_space.startswith("local/minilm-copy|")
    with Lexmem.open(ctx.paths.home) as reopened:  # the restarted app
        hit = reopened.search("which port does staging use").hits[0]
        assert hit.memory.content == "The staging database listens on port 5433"


def test_moving_the_data_folder_from_the_dialog_round_trip(
    qtbot: Any, ctx: AppContext, embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mid = ctx.lm.remember("The staging database listens on port 5433").memories[0].id
    first = ctx.paths.home
    monkeypatch.delenv("LEXMEM_HOME")
    write_location(first)  # as after an earlier move: the pointer names this folder
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    assert dlg.move_button.isEnabled()
    second = tmp_path / "elsewhere"
    with qtbot.waitSignal(dlg.data_folder_moved, timeout=60_000) as sig:
        dlg.move_data_folder_to(str(second))
    assert sig.args == [str(second)]
    assert "lexmem restarts on the new folder" in dlg.move_status.text()
    assert resolve_paths().home == second and not first.exists()

    with Lexmem.open(embedder=embedder) as lm2:  # the app, restarted on the new folder
        assert lm2.get(mid).content == "The staging database listens on port 5433"
        ctx2 = AppContext(lm2)
        try:
            dlg2 = SettingsDialog(ctx2)
            qtbot.addWidget(dlg2)
            with qtbot.waitSignal(dlg2.data_folder_moved, timeout=60_000):
                dlg2.move_data_folder_to(str(first))
        finally:
            ctx2.close()
    assert location_file().read_text() == f"{first}\n" and not second.exists()
    with Lexmem.open(embedder=embedder) as lm3:
        assert lm3.paths.home == first and lm3.get(mid).content.startswith("The staging")


def test_your_name_is_the_speaker_setting(
    qtbot: Any, ctx: AppContext, dialog: SettingsDialog
) -> None:
    """The Capture tab's "Your name" is ``[capture] user_name``, the speaker of the
    person's prompts; spaces are folded and an empty field means the login name."""
    saved = lambda: load_settings(ctx.paths)  # noqa: E731
    assert dialog.user_name.text() == "" and dialog.user_name.placeholderText()
    dialog.user_name.setText("  Ada   Lovelace ")
    dialog.user_name.editingFinished.emit()
    qtbot.waitUntil(lambda: saved().capture.user_name == "Ada Lovelace", timeout=WAIT)
    assert ctx.settings.capture.user_name == "Ada Lovelace"
    qtbot.waitUntil(lambda: dialog.user_name.text() == "Ada Lovelace", timeout=WAIT)
    dialog.user_name.clear()
    dialog.user_name.editingFinished.emit()
    qtbot.waitUntil(lambda: saved().capture.user_name == "", timeout=WAIT)
