"""A PostgreSQL with pgvector on this machine, for trying team memory (and for the
tests): PyPI's ``pgserver`` (the ``team`` extra) runs PostgreSQL 16 with pgvector in a
folder of its own, listening on a Unix socket in that folder and on no TCP address.

:func:`start` starts it (``initdb`` the first time, about a second), creates the
database ``lexmem`` with pgvector in it, and returns its URL; the server keeps running
after the command ends, until :func:`stop`. Nothing is reachable from another machine:
there is no TCP listener, and the socket's folder is the server's data folder, mode 0700.

Authentication on the socket is ``trust``: whoever can reach the folder may connect as
any role. That is what a single person trying team memory needs; a team shares a real
server (docs/team.md).

Run as root, pgserver runs PostgreSQL as a system user ``pgserver`` (created with
``useradd`` when missing) and opens read and traverse permissions on every folder above
the server's folder; the default folder is therefore beside lexmem's data folder, never
inside it.
"""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path
from typing import Any

import psycopg

from lexmem.errors import ConfigError, StoreIOError

__all__ = ["DATABASE", "default_folder", "start", "stop"]

DATABASE = "lexmem"


def default_folder(data_home: Path) -> Path:
    """Where a local team server lives when no folder is given: beside the data folder."""
    return data_home.parent / f"{data_home.name}-team-server"


def _pgserver() -> Any:
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver then keeps its
            # lock under /tmp/runtime-UID, which is all a person needs to know.
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:
        raise ConfigError("a local team server needs pgserver: pip install 'lexmem[team]'") from exc
    return pgserver


def start(folder: Path) -> str:
    """Start (or find running) the server in ``folder`` and return the URL of its
    ``lexmem`` database, pgvector created in it."""
    pgserver = _pgserver()
    folder = folder.expanduser().absolute()
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(folder, cleanup_mode=None)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StoreIOError(f"PostgreSQL could not start in {folder} ({exc})") from exc
    admin_url = str(server.get_uri())
    try:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if not exists:
                admin.execute(f"CREATE DATABASE {DATABASE}")
        url = str(server.get_uri(DATABASE))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreIOError(f"the local server in {folder} did not answer ({first})") from exc
    return url


def stop(folder: Path) -> bool:
    """Stop the server in ``folder`` (its data stays); False when none ran there."""
    folder = folder.expanduser().absolute()
    if not (folder / "postmaster.pid").exists():
        return False
    pgserver = _pgserver()
    from pgserver._commands import POSTGRES_BIN_PATH  # pinned version: pyproject.toml

    # pgserver keeps one handle per folder for the process; a stopped server's must go,
    # or the next start in this process would hand back the handle of a server that is gone.
    pgserver.PostgresServer._instances.pop(folder.resolve(), None)

    # PostgreSQL's own stop, run as the folder's owner (pgserver's user when root started it).
    command = [str(Path(POSTGRES_BIN_PATH) / "pg_ctl"), "-D", str(folder), "-w", "stop"]
    try:
        if _is_root():  # pg_ctl refuses root: the server runs as pgserver's own user
            command = ["su", "-s", "/bin/sh", "pgserver", "-c", " ".join(map(_quote, command))]
        subprocess.run(command, check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StoreIOError(f"the local server in {folder} did not stop ({exc})") from exc
    return True


def _is_root() -> bool:
    import os

    return hasattr(os, "geteuid") and os.geteuid() == 0


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
