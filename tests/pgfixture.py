"""A real PostgreSQL 16 with pgvector for the tests: PyPI's ``pgserver`` (the ``team``
extra, in ``dev``), one server for the whole run, a fresh database for each test.

The server listens on a Unix socket in its own temporary folder and on no TCP address;
it starts (``initdb`` included) in about a second, on the first test that asks for it,
and stops, its folder removed, when the run ends. Each test's database is created from
``template1`` (~30 ms) and dropped after it, its connections ended.

Without pgserver (lexmem installed without ``team``) the tests that need a server skip
and say how to install it; under CI (``CI=true``) they fail instead.

Running as root, pgserver runs PostgreSQL as the system user ``pgserver`` (it creates
it with ``useradd``) and opens read and traverse permissions on every folder above the
server's data folder: the folder here is a fresh one under the system's temporary folder,
never pytest's own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["PgServer", "pg_available", "pg_database", "pg_server"]


@dataclass(frozen=True)
class PgServer:
    """A running server: connection URLs by database name, and its client programs."""

    handle: Any  # pgserver.PostgresServer
    bin_dir: Path

    def url(self, database: str = "postgres") -> str:
        return str(self.handle.get_uri(database))

    def dump(self, url: str, *options: str) -> str:
        """``pg_dump`` of the database at ``url`` (schema and rows unless ``options`` say
        otherwise) as SQL text."""
        out = subprocess.run(
            [str(self.bin_dir / "pg_dump"), "--no-password", *options, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return out.stdout

    @contextmanager
    def new_database(self) -> Iterator[str]:
        """A fresh, empty database, dropped on leaving (its open connections ended): its
        URL."""
        import psycopg
        from psycopg import sql

        name = f"lexmem_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield self.url(name)
        finally:
            with psycopg.connect(self.url(), autocommit=True) as admin:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


def _missing(why: str) -> None:
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true but no PostgreSQL for the tests: {why}")
    pytest.skip(f"no PostgreSQL for the tests: {why}")


def pg_available() -> None:
    """Skip the running test without pgserver and psycopg (fail it under CI)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver  # noqa: F401
            import psycopg  # noqa: F401
    except ImportError as exc:
        _missing(f"{exc.name} is not installed (pip install -e '.[team]')")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL with pgvector for the whole run, on a Unix socket only."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns once that XDG_RUNTIME_DIR is unset (pgserver's lock
            # folder then falls back to /tmp/runtime-UID): nothing for a test to act on.
            warnings.simplefilter("ignore")
            import pgserver
            import psycopg  # noqa: F401  (the tests' client: the same extra)
    except ImportError as exc:
        _missing(f"{exc.name} is not installed (pip install -e '.[team]')")
    root = Path(tempfile.mkdtemp(prefix="lexmem-pg-"))
    try:
        handle = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(root, ignore_errors=True)
        _missing(f"pgserver could not start PostgreSQL in {root} ({exc})")
    try:
        # The client programs beside the server's (pg_dump): pgserver names their folder
        # only in a private module; the version is pinned (pyproject.toml).
        from pgserver._commands import POSTGRES_BIN_PATH

        yield PgServer(handle, Path(POSTGRES_BIN_PATH))
    finally:
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty database on the run's server, dropped after the test: its URL."""
    with pg_server.new_database() as url:
        yield url
