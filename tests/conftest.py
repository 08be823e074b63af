"""Shared fixtures: every test gets its own data folder and HOME; the real model loads once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Constraint: Qt reads the platform when it is first imported; set it before any test imports it.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError
from pgfixture import pg_database, pg_server  # noqa: F401  (fixtures; a server starts only when asked)
from store_backends import BACKENDS, use_postgres

from lexmem.api import Lexmem
from lexmem.config import Paths, secure_umask
from lexmem.embedder import Embedder
from lexmem.locks import FileLock
from lexmem.service.writer import CaptureService
from lexmem.settings import EmbeddingSettings


@pytest.fixture(autouse=True)
def _isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point HOME and the data folder at the test's own temporary folders."""
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LEXMEM_HOME", str(tmp_path / "lexmem"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))  # the trial's record
    monkeypatch.delenv("LEXMEM_DEBUG", raising=False)
    # No display: a bare `lexmem` prints its status rather than opening the app.
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    # Licence keys come from the test's own keyring (below), never from the environment;
    # subprocesses get the null keyring backend, never the user's.
    monkeypatch.delenv("LEXMEM_LICENCE", raising=False)
    monkeypatch.delenv("LEXMEM_LICENCE_FILE", raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")


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

    def without_trial(self) -> dict[tuple[str, str], str]:
        """The secrets a person put here: all but the trial's record and key, which
        lexmem keeps here itself as soon as anything asks for the tier."""
        return {k: v for k, v in self.secrets.items() if k[1] not in ("trial", "trial-key")}


@pytest.fixture(autouse=True)
def memory_keyring() -> Iterator[MemoryKeyring]:
    """Every test in this process gets an empty in-memory keyring."""
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real embedded model, loaded once for the whole run (loading costs ~0.4 s)."""
    models = tmp_path_factory.mktemp("models")
    e = Embedder(EmbeddingSettings(), models)
    e.load()
    return e


@pytest.fixture
def data_home(tmp_path: Path) -> Path:
    return tmp_path / "lexmem"


@pytest.fixture
def lm(data_home: Path, embedder: Embedder) -> Iterator[Lexmem]:
    """A real lexmem core on a fresh data folder, sharing the loaded model."""
    core = Lexmem.open(data_home, embedder=embedder)
    yield core
    core.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, data_home: Path) -> str:
    """The storage backend a conformance test runs on: each test taking it runs once per
    backend (``tests/store_backends.py``). For ``postgres`` the data folder's settings name
    a fresh database on the tests' real server, so every core opened on that folder (in
    this process or another) uses it."""
    name = str(request.param)
    if name == "postgres":
        use_postgres(data_home, request.getfixturevalue("pg_database"))
    return name


@pytest.fixture
def paths(data_home: Path) -> Paths:
    p = Paths(data_home)
    p.ensure()
    return p


@pytest.fixture
def service_up(data_home: Path) -> Iterator[FileLock]:
    """Stands in for a running service: its lock, held, so SessionStart spawns nothing."""
    with secure_umask():
        data_home.mkdir(parents=True, exist_ok=True)
    lock = FileLock(Paths(data_home).service_lock, timeout=0)
    lock.acquire()
    yield lock
    lock.release()


@pytest.fixture
def service(data_home: Path, embedder: Embedder) -> Iterator[CaptureService]:
    """The service holds its lock while the agent works, as `lexmem serve` would."""
    lm = Lexmem.open(data_home, embedder=embedder)
    svc = CaptureService(lm)
    svc.acquire()
    yield svc
    svc.release()
    lm.close()


@contextmanager
def shared_model(embedder: Embedder) -> Iterator[None]:
    """In-process invocations share one loaded model (each would load its own: ~0.5 s)."""
    real_open = Lexmem.open.__func__  # type: ignore[attr-defined]

    def open_shared(cls: type[Lexmem], /, home: Any = None, **kw: Any) -> Lexmem:
        kw["embedder"] = kw.get("embedder") or embedder
        return real_open(cls, home, **kw)  # type: ignore[no-any-return]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Lexmem, "open", classmethod(open_shared))
        yield


@pytest.fixture
def ctx(qtbot: Any, lm: Lexmem) -> Iterator[Any]:
    """The UI's context over ``lm`` (its runner, hub and settings), closed after the test.
    Qt is imported here, not at the top: the core's tests never load it."""
    from ui.context import AppContext

    c = AppContext(lm)
    yield c
    c.close()
