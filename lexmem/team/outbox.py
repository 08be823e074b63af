"""What waits to be pushed to the team's server, and what this client knows of the team.

The outbox is a folder (``team/outbox/`` in the data folder, 0700) holding one JSON file
(0600, written atomically) per memory id with the latest change of that memory: a second
change before a push replaces the first (coalescing), so a kill at any point leaves each
memory's file either the old change or the new one, never half of either. A file leaves
only after the server confirmed its (memory id, version), which the server applies once
however often it arrives: nothing is lost and nothing duplicated.

A forgotten memory's file is replaced by a deletion that holds its id, version and team
project only: no byte of its text stays in the outbox.

:class:`TeamState` (``team/state.db``, SQLite, 0600) keeps the rest: each shared memory's
version as the team last saw it, the pull cursor per team project, the last sync, the
last error and how many conflicts were seen. It holds ids and numbers, never text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lexmem.base import atomic_write
from lexmem.config import DIR_MODE, FILE_MODE, Paths, secure_umask

__all__ = ["Entry", "Outbox", "TeamState", "team_folder"]

_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


def team_folder(paths: Paths) -> Path:
    return paths.home / "team"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # a numpy vector
        return value.tolist()
    return value


def _unjson(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$dt"}:
            return datetime.fromisoformat(value["$dt"])
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    return value


@dataclass(slots=True)
class Entry:
    """One memory's latest change waiting for the server."""

    memory_id: str
    version: int
    project: str | None  # the team project
    deleted: bool = False
    row: dict[str, Any] | None = None
    links: list[dict[str, Any]] = field(default_factory=list)
    confidence: list[dict[str, Any]] = field(default_factory=list)
    tries: int = 0

    def to_json(self) -> str:
        return json.dumps(
            _jsonable({
                "memory_id": self.memory_id, "version": self.version, "project": self.project,
                "deleted": self.deleted, "row": self.row, "links": self.links,
                "confidence": self.confidence, "tries": self.tries,
            }),
            sort_keys=True,
        )  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> Entry:
        data = _unjson(json.loads(text))
        return cls(
            memory_id=str(data["memory_id"]), version=int(data["version"]),
            project=data.get("project"), deleted=bool(data.get("deleted")),
            row=data.get("row"), links=list(data.get("links") or []),
            confidence=list(data.get("confidence") or []), tries=int(data.get("tries") or 0),
        )  # fmt: skip


class Outbox:
    """The folder of changes waiting for the server, one file per memory id."""

    def __init__(self, paths: Paths) -> None:
        self.folder = team_folder(paths) / "outbox"

    def _path(self, memory_id: str) -> Path:
        if _SAFE_ID.match(memory_id):
            return self.folder / f"{memory_id}.json"
        digest = hashlib.sha256(memory_id.encode()).hexdigest()[:40]
        return self.folder / f"h-{digest}.json"

    def put(self, entry: Entry) -> None:
        with secure_umask():
            self.folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            atomic_write(self._path(entry.memory_id), entry.to_json(), mode=FILE_MODE)

    def get(self, memory_id: str) -> Entry | None:
        try:
            return Entry.from_json(self._path(memory_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError):
            return None  # a foreign file: left for the person, never pushed

    def entries(self, limit: int | None = None) -> list[Entry]:
        """The waiting changes, oldest file first."""
        out: list[Entry] = []
        for path in self._files():
            try:
                out.append(Entry.from_json(path.read_text(encoding="utf-8")))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError):
                continue
            if limit is not None and len(out) >= limit:
                break
        return out

    def _files(self) -> list[Path]:
        try:
            found = [e for e in os.scandir(self.folder) if e.name.endswith(".json")]
        except FileNotFoundError:
            return []
        found.sort(key=lambda e: (e.stat().st_mtime_ns, e.name))
        return [Path(e.path) for e in found]

    def size(self) -> int:
        return len(self._files())

    def done(self, memory_id: str, version: int) -> None:
        """The server confirmed ``version``: the file goes, unless a newer change replaced
        it meanwhile."""
        current = self.get(memory_id)
        if current is not None and current.version <= version:
            self._path(memory_id).unlink(missing_ok=True)

    def drop(self, memory_id: str) -> None:
        self._path(memory_id).unlink(missing_ok=True)

    def clear_project(self, project: str) -> int:
        n = 0
        for entry in self.entries():
            if entry.project == project:
                self.drop(entry.memory_id)
                n += 1
        return n


_SCHEMA = """
CREATE TABLE IF NOT EXISTS versions (memory_id TEXT PRIMARY KEY, version INTEGER NOT NULL,
                                     project TEXT);
CREATE TABLE IF NOT EXISTS cursors (project TEXT PRIMARY KEY, revision INTEGER NOT NULL,
                                    shared INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mine (memory_id TEXT PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lost (memory_id TEXT PRIMARY KEY, version INTEGER NOT NULL,
                                 winner TEXT NOT NULL, at TEXT NOT NULL, project TEXT);
"""


class TeamState:
    """Versions, cursors and the sync's figures (``team/state.db``)."""

    def __init__(self, paths: Paths) -> None:
        self.path = team_folder(paths) / "state.db"
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self._lock, secure_umask():
            self.path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                os.chmod(self.path, FILE_MODE)
                conn.executescript(_SCHEMA)
                with conn:
                    yield conn
            finally:
                conn.close()

    # -- versions ---------------------------------------------------------------------

    def version(self, memory_id: str) -> int:
        with self._db() as db:
            row = db.execute("SELECT version FROM versions WHERE memory_id = ?", (memory_id,))
            found = row.fetchone()
        return int(found[0]) if found else 0

    def versions(self, ids: Sequence[str]) -> dict[str, int]:
        return self._versions_in("versions", ids)

    def _versions_in(self, table: str, ids: Sequence[str]) -> dict[str, int]:
        """``memory_id -> version`` of ``ids`` in ``table`` (``versions`` or ``mine``),
        asked 500 at a time (SQLite's limit on parameters)."""
        out: dict[str, int] = {}
        with self._db() as db:
            for i in range(0, len(ids), 500):
                part = list(ids[i : i + 500])
                marks = ",".join("?" * len(part))
                for mid, v in db.execute(
                    f"SELECT memory_id, version FROM {table} WHERE memory_id IN ({marks})", part
                ):
                    out[str(mid)] = int(v)
        return out

    def project_of(self, memory_id: str) -> str | None:
        """The team project a memory was last shared in (None: never shared)."""
        with self._db() as db:
            found = db.execute(
                "SELECT project FROM versions WHERE memory_id = ?", (memory_id,)
            ).fetchone()
        return None if found is None else (found[0] or "")

    def set_versions(self, known: Mapping[str, tuple[int, str | None]]) -> None:
        """Record each memory's version as the team has it (only ever raised)."""
        if not known:
            return
        with self._db() as db:
            db.executemany(
                "INSERT INTO versions (memory_id, version, project) VALUES (?, ?, ?) "
                "ON CONFLICT (memory_id) DO UPDATE SET version = max(version, excluded.version),"
                " project = excluded.project",
                [(mid, v, p) for mid, (v, p) in known.items()],
            )

    def forget_project(self, project: str) -> None:
        with self._db() as db:
            db.execute(
                "DELETE FROM mine WHERE memory_id IN"
                " (SELECT memory_id FROM versions WHERE project = ?)",
                (project,),
            )
            db.execute("DELETE FROM lost WHERE project = ?", (project,))
            db.execute("DELETE FROM versions WHERE project = ?", (project,))
            db.execute("DELETE FROM cursors WHERE project = ?", (project,))

    # -- cursors ----------------------------------------------------------------------

    def cursor(self, project: str) -> int:
        with self._db() as db:
            found = db.execute(
                "SELECT revision FROM cursors WHERE project = ?", (project,)
            ).fetchone()
        return int(found[0]) if found else 0

    def set_cursor(self, project: str, revision: int) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO cursors (project, revision) VALUES (?, ?) ON CONFLICT (project) "
                "DO UPDATE SET revision = max(revision, excluded.revision)",
                (project, revision),
            )

    def shared(self, project: str) -> bool:
        """Whether the memories this client had in ``project`` when it joined were queued."""
        with self._db() as db:
            found = db.execute("SELECT shared FROM cursors WHERE project = ?", (project,))
            row = found.fetchone()
        return bool(row and row[0])

    def mark_shared(self, project: str) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO cursors (project, revision, shared) VALUES (?, 0, 1) "
                "ON CONFLICT (project) DO UPDATE SET shared = 1",
                (project,),
            )

    # -- this client's edits, and those that lost --------------------------------------

    def mine(self, ids: Sequence[str]) -> dict[str, int]:
        """The version this client's own edit of each memory went in at, where the team
        has not yet built on it (a later version) or replaced it."""
        return self._versions_in("mine", ids)

    def set_mine(self, versions: Mapping[str, int]) -> None:
        if not versions:
            return
        with self._db() as db:
            db.executemany(
                "INSERT INTO mine (memory_id, version) VALUES (?, ?) ON CONFLICT (memory_id) "
                "DO UPDATE SET version = excluded.version",
                list(versions.items()),
            )
            # A new edit of this client's went in: an earlier loss of it is behind it.
            db.executemany("DELETE FROM lost WHERE memory_id = ?", [(m,) for m in versions])

    def drop_mine(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._db() as db:
            db.executemany("DELETE FROM mine WHERE memory_id = ?", [(m,) for m in ids])

    def add_lost(self, losses: Sequence[tuple[str, int, str, str | None]]) -> None:
        """This client's edit of a memory lost a conflict: (memory id, the version that
        lost, the role whose version the team kept ("" until known), team project)."""
        if not losses:
            return
        at = now_text()
        with self._db() as db:
            db.executemany(
                "INSERT INTO lost (memory_id, version, winner, at, project) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (memory_id) DO UPDATE SET version = excluded.version,"
                " at = excluded.at, project = excluded.project, winner = CASE"
                " WHEN excluded.winner != '' THEN excluded.winner ELSE lost.winner END",
                [(mid, v, who, at, project) for mid, v, who, project in losses],
            )
            db.executemany("DELETE FROM mine WHERE memory_id = ?", [(x[0],) for x in losses])

    def drop_lost(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        with self._db() as db:
            db.executemany("DELETE FROM lost WHERE memory_id = ?", [(m,) for m in ids])

    def name_winner(self, memory_id: str, winner: str) -> None:
        """The role whose version beat this client's, once a pull says."""
        with self._db() as db:
            db.execute(
                "UPDATE lost SET winner = ? WHERE memory_id = ? AND winner = ''",
                (winner, memory_id),
            )

    def lost(self, memory_id: str | None = None) -> list[dict[str, Any]]:
        """This client's edits that lost a conflict, the latest first (of one memory
        when ``memory_id`` is given): id, version, winner, at, project."""
        where, args = ("WHERE memory_id = ?", (memory_id,)) if memory_id else ("", ())
        with self._db() as db:
            rows = db.execute(
                f"SELECT memory_id, version, winner, at, project FROM lost {where}"
                " ORDER BY at DESC, memory_id",
                args,
            ).fetchall()
        return [
            {"id": r[0], "version": int(r[1]), "winner": r[2], "at": r[3], "project": r[4]}
            for r in rows
        ]

    # -- figures ----------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        with self._db() as db:
            return {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta")}

    def set_meta(self, **values: str | int | float) -> None:
        with self._db() as db:
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(k, str(v)) for k, v in values.items()],
            )

    def add_conflicts(self, n: int) -> None:
        if n <= 0:
            return
        with self._db() as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('conflicts', ?) ON CONFLICT (key) "
                "DO UPDATE SET value = CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER)",
                (str(n),),
            )


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
