"""Start at login (a real Desktop Entry in a temporary XDG config folder) and secrets in
the OS keyring (a real in-memory keyring backend, never the user's)."""

from __future__ import annotations

import configparser
import os
import shlex
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import PasswordDeleteError

from lexmem import keystore
from lexmem.desktop import (
    autostart_command,
    autostart_enabled,
    autostart_path,
    desktop_entry,
    set_autostart,
)
from lexmem.keystore import SecretStoreError


class MemoryKeyring(KeyringBackend):
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


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


# -- start at login -----------------------------------------------------------------------


def _entry(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text(encoding="utf-8"))
    return parser["Desktop Entry"]


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="XDG autostart")
def test_start_at_login_writes_and_removes_a_desktop_entry(tmp_path: Path) -> None:
    target = autostart_path()
    assert target == Path(os.environ["XDG_CONFIG_HOME"]) / "autostart" / "lexmem.desktop"
    assert not autostart_enabled()
    home = tmp_path / "my data"
    assert set_autostart(True, command=autostart_command(home)) == target
    assert autostart_enabled() and stat.S_IMODE(target.stat().st_mode) == 0o600
    entry = _entry(target)
    assert entry["Type"] == "Application" and entry["Name"] == "lexmem"
    assert entry["Terminal"] == "false" and entry["X-GNOME-Autostart-enabled"] == "true"
    argv = shlex.split(entry["Exec"])
    assert argv[0] == autostart_command()[0] and Path(argv[0]).is_absolute()
    assert argv[1:] == ["--home", str(home), "app"]
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temp file
    set_autostart(True)  # again, without --home: replaced in place
    assert shlex.split(_entry(target)["Exec"])[1:] == ["app"]
    set_autostart(False)
    assert not target.exists() and not autostart_enabled()
    set_autostart(False)  # already off: nothing to do, no error


def test_exec_quotes_what_the_spec_reserves() -> None:
    text = desktop_entry(["/opt/my apps/lexmem", "--home", '/data/"q"$x\\y%', "app"])
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    # Quoted, `"` `$` `\` escaped inside quotes, `%` doubled; then `\` escaped once more.
    assert exec_line == (
        'Exec="/opt/my apps/lexmem" --home "/data/\\\\"q\\\\"\\\\$x\\\\\\\\y%%" app'
    )
    with pytest.raises(Exception, match="one line"):
        desktop_entry(["lexmem", "a\nb"])


# -- the keyring ---------------------------------------------------------------------------


def test_secrets_round_trip_through_the_keyring(memory_keyring: MemoryKeyring) -> None:
    assert keystore.backend_available() == (True, MemoryKeyring.name)
    assert keystore.get_secret(keystore.LLM_API_KEY) is None
    keystore.set_secret(keystore.LLM_API_KEY, "sk-local-123")
    assert memory_keyring.secrets == {("lexmem", "llm-api-key"): "sk-local-123"}
    assert keystore.get_secret("llm-api-key") == "sk-local-123"
    assert keystore.delete_secret("llm-api-key") is True
    assert keystore.delete_secret("llm-api-key") is False
    keystore.set_secret("llm-api-key", "sk-2")
    keystore.set_secret("llm-api-key", "")  # an empty key removes the entry
    assert memory_keyring.secrets == {}
    with pytest.raises(SecretStoreError, match="one line"):
        keystore.set_secret("llm-api-key", "sk\nmore")


def test_without_a_keyring_every_call_says_why_in_one_line() -> None:
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        ok, why = keystore.backend_available()
        assert not ok and why.startswith("no OS keyring is available")
        for call in (
            lambda: keystore.get_secret("llm-api-key"),
            lambda: keystore.set_secret("llm-api-key", "sk-1"),
            lambda: keystore.delete_secret("llm-api-key"),
        ):
            with pytest.raises(SecretStoreError) as err:
                call()
            assert str(err.value).startswith("keyring entry lexmem/llm-api-key: no OS keyring")
            assert "\n" not in str(err.value)
    finally:
        keyring.set_keyring(before)
