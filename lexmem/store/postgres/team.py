"""Team sync on the server: the memories of a team's projects in one PostgreSQL database,
pushed by each member's lexmem and pulled by the others'.

A client pushes :class:`Change` s (a memory's row at a version, or its deletion) and pulls
every change after a revision. The rules, all enforced here and in the schema
(:mod:`lexmem.store.postgres.schema`, steps 5 and 6):

- **Versions.** A change carries the memory's version on the pushing client. A push is
  idempotent: the same change again (same version, same digest of its content) changes
  nothing. A higher version than the server's replaces the row, its links out and its
  confidence points. Two changes at the same version are concurrent edits: the later
  ``updated_at`` wins, then the larger writer name, then the larger digest, an order
  every server applies alike whatever the order of arrival. A change that loses, and a
  server row a pushed change beats at the same version, is kept whole (its row as
  ``jsonb``) in ``lexmem.memory_history``.
- **Deletions** leave a tombstone (id, project, owner, version, revision: no text) and
  take the row, its links, its confidence and its kept versions with them. A forgotten
  id stays forgotten: a later push of a row under it is refused as a conflict, and its
  text is not kept.
- **Revisions.** Every insert and update of a memory and every tombstone takes the next
  value of one sequence, by trigger, under a transaction-wide advisory lock held to
  commit, so revisions are handed out in commit order: a pull that sees revision *r* has
  seen every smaller one that will ever exist, and its cursor skips nothing. Writers of
  one database therefore commit one at a time; a push is short (one transaction), and
  the single-user backend already writes under a lock of its own.
- **Notices.** Each committed change notifies the channel ``lexmem_changes`` (no
  payload: what changed is for the pull, under row-level security, to say);
  :meth:`TeamServer.wait_for_change` listens on a connection of its own.
- **Row-level security.** Each person is a ``LOGIN`` role (:meth:`TeamServer.add_member`
  makes it: no superuser, no ``BYPASSRLS``). A member sees and writes a memory, its
  links, confidence, tombstone and kept versions when the memory's project is shared with
  a team of theirs, or when they own it (wrote it first) and its project is shared with
  no team: a private memory. Writing into a project shared only with other teams is
  refused. RLS is *enabled, not forced*: a member never owns the tables, so every policy
  binds every member, while the tables' owner (the role that ran the migrations: the
  single-user PostgreSQL backend, the administrator) reads and writes every row as
  before. Forcing it would bind the owner alone, who can lift it at will, and a
  superuser bypasses it in any case; so a member role must never own the tables or be a
  superuser, and :meth:`TeamServer.add_member` refuses such a role.

Team projects are names shared by a team (``"shop"``), never a local path: each client
maps its local project to the team's name and back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, LiteralString, Self

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from lexmem.errors import ConfigError, InvalidInputError, LexmemError, StoreError
from lexmem.store.postgres.db import (
    CONNECT_TIMEOUT,
    WRITE_LOCK_TIMEOUT,
    Database,
    failure,
    safe_url,
)
from lexmem.store.postgres.migrations import migrate, read_meta
from lexmem.store.postgres.schema import MEMORY_COLUMNS, REVISION_LOCK_KEY
from lexmem.store.schema import ROW_COLUMNS

__all__ = ["CHANNEL", "Change", "Conflict", "PullBatch", "PushOutcome", "TeamServer"]

log = logging.getLogger("lexmem.team")

# The channel every committed change notifies (schema step 5).
CHANNEL = "lexmem_changes"

# A memory row's fields as a push carries them (lexmem.store.schema.memory_to_row) and
# the one derived field a push may add.
_FIELDS = (*ROW_COLUMNS, "vector")
_OPTIONAL = ("context",)
_TIMESTAMPS = frozenset({"created_at", "updated_at", "last_accessed_at", "last_reinforced_at"})
# The tables a member reads and writes, and those it only reads.
_MEMBER_WRITES = (
    "memories", "memory_links", "memory_confidence_history", "tombstones", "memory_history",
)  # fmt: skip
_MEMBER_READS = ("teams", "team_projects", "team_members", "meta", "schema_version")
# How many times a push that PostgreSQL broke off as a deadlock is tried again.
_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Change:
    """One memory's change: its row at ``version``, or its deletion."""

    memory_id: str
    version: int
    deleted: bool = False
    row: dict[str, Any] | None = None
    links: tuple[dict[str, Any], ...] = ()
    confidence: tuple[dict[str, Any], ...] = ()
    project: str | None = None
    revision: int = 0
    owner: str = ""
    written_by: str = ""  # the role that wrote this version (a pulled row's)


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two versions of a memory met: the server keeps one, the other is in history."""

    memory_id: str
    kept_version: int
    lost_version: int
    kept_mine: bool


@dataclass(frozen=True, slots=True)
class PushOutcome:
    applied: tuple[str, ...]
    conflicts: tuple[Conflict, ...]


@dataclass(frozen=True, slots=True)
class PullBatch:
    changes: tuple[Change, ...]
    revision: int


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A pushed change, checked, with what the push computes from it once."""

    change: Change
    project: str | None
    digest: str
    order: tuple[datetime, str]  # (updated_at or created_at, digest) for the tie-break


# -- values in and out ----------------------------------------------------------------


def _timestamp(value: Any, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidInputError(f"{what}: {value!r} is not a timestamp") from exc
    if not isinstance(value, datetime):
        raise InvalidInputError(f"{what}: {value!r} is not a timestamp")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _vector_text(value: Any, what: str) -> str:
    try:
        return "[" + ",".join(repr(float(x)) for x in value) + "]"
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what}: the vector is not a list of numbers") from exc


def _vector_list(text: str) -> list[float]:
    return [float(x) for x in text.strip("[]").split(",")] if text.strip("[]") else []


def _canonical(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value


def _normalised(record: dict[str, Any], stamps: Iterable[str], what: str) -> dict[str, Any]:
    out = dict(record)
    for key in stamps:
        if key in out:
            out[key] = _timestamp(out[key], f"{what}, {key}")
    return out


def _digest(change: Change, row: dict[str, Any]) -> str:
    """What a change is, as one string: the same change pushed again (its timestamps as
    datetimes or as text, from the outbox) has the same digest."""
    vector = row.get("vector")
    body = {
        "version": change.version,
        "row": {k: v for k, v in row.items() if k != "vector"},
        "links": sorted(
            (_normalised(link, ("created_at",), "a link") for link in change.links),
            key=lambda link: str(link.get("id")),
        ),
        "confidence": sorted(
            (
                _normalised(point, ("recorded_at",), "a confidence point")
                for point in change.confidence
            ),
            key=lambda point: str(point.get("id")),
        ),
    }
    text = json.dumps(_canonical(body), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode())
    if vector is not None:
        # The vector's exact bits, not its text: a float64 reads back from JSON as written.
        try:
            digest.update(array("d", (float(x) for x in vector)).tobytes())
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"the change of memory {change.memory_id!r}: the vector is not a list of numbers"
            ) from exc
    return digest.hexdigest()


def _prepare(change: Change) -> _Prepared:
    """Check a pushed change; one line naming the memory for what is wrong with it."""
    if not isinstance(change, Change):
        raise InvalidInputError(f"a push takes Change values, not {type(change).__name__}")
    what = f"the change of memory {change.memory_id!r}"
    if not isinstance(change.memory_id, str) or not change.memory_id:
        raise InvalidInputError("a change names no memory")
    if not isinstance(change.version, int) or change.version < 1:
        raise InvalidInputError(f"{what}: version {change.version!r} (versions start at 1)")
    if change.deleted:
        digest = _digest(change, {"deleted": True})
        return _Prepared(change, change.project, digest, (datetime.min.replace(tzinfo=UTC), digest))
    if change.row is None:
        raise InvalidInputError(f"{what}: no row and not a deletion")
    missing = [f for f in _FIELDS if f not in change.row]
    if missing:
        raise InvalidInputError(f"{what}: the row lacks {', '.join(missing)}")
    if change.row["id"] != change.memory_id:
        raise InvalidInputError(f"{what}: the row is memory {change.row['id']!r}")
    for link in change.links:
        if link.get("from_id") != change.memory_id:
            raise InvalidInputError(f"{what}: a link out of it starts at {link.get('from_id')!r}")
    for point in change.confidence:
        if point.get("memory_id") != change.memory_id:
            raise InvalidInputError(f"{what}: a confidence point of {point.get('memory_id')!r}")
    project = change.project if change.project is not None else change.row.get("project")
    row = _normalised(change.row, _TIMESTAMPS, what)
    row["project"] = project
    if isinstance(row["metadata"], str):
        # memory_to_row's JSON text or the dict it holds: the same change either way.
        try:
            row["metadata"] = json.loads(row["metadata"])
        except ValueError as exc:
            raise InvalidInputError(f"{what}: its metadata is not JSON") from exc
    digest = _digest(change, row)
    when = row.get("updated_at") or row["created_at"]
    if when is None:
        raise InvalidInputError(f"{what}: the row has no created_at")
    return _Prepared(change, project, digest, (when, digest))


def _row_values(prepared: _Prepared) -> dict[str, Any]:
    """The pushed row as the write statement's parameters."""
    change = prepared.change
    assert change.row is not None  # a deletion is never written as a row
    what = f"the change of memory {change.memory_id!r}"
    values = {f: change.row.get(f) for f in (*_FIELDS, *_OPTIONAL)}
    values["project"] = prepared.project
    values["vector"] = (
        _vector_text(values["vector"], what) if values["vector"] is not None else None
    )
    metadata = values["metadata"]
    if metadata is not None and not isinstance(metadata, str):
        values["metadata"] = json.dumps(metadata, sort_keys=True)
    for key in _TIMESTAMPS:
        values[key] = _timestamp(values[key], f"{what}, {key}")
    values["version"] = change.version
    values["change_digest"] = prepared.digest
    return values


def _history_row(row: dict[str, Any]) -> str:
    """A row kept in memory_history, as JSON text (timestamps in ISO 8601)."""
    return json.dumps(_canonical_row(row), sort_keys=True)


def _canonical_row(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key == "metadata" and isinstance(value, dict):
            out[key] = json.dumps(value, sort_keys=True) if value else None
        elif isinstance(value, datetime):
            out[key] = value.astimezone(UTC).isoformat()
        elif key == "vector" and isinstance(value, str):
            out[key] = _vector_list(value)
        elif key == "vector" and value is not None:
            out[key] = [float(x) for x in value]
        else:
            out[key] = value
    return out


def _cast(field: str) -> sql.Composable:
    placeholder = sql.Placeholder(field)
    if field == "vector":
        return sql.SQL("{}::vector").format(placeholder)
    if field == "metadata":
        return sql.SQL("{}::jsonb").format(placeholder)
    if field in _TIMESTAMPS:
        return sql.SQL("{}::timestamptz").format(placeholder)
    return placeholder


def _upsert_statement() -> sql.Composed:
    """Insert a pushed row, or replace the row under its id only if it is still the row
    the push decided against (its revision): a row that changed meanwhile is left alone
    and the push decides again."""
    fields = (*_FIELDS, *_OPTIONAL)
    columns = [MEMORY_COLUMNS[f] for f in fields] + ["version", "change_digest"]
    values = [_cast(f) for f in fields] + [
        sql.Placeholder("version"),
        sql.Placeholder("change_digest"),
    ]
    sets = [
        sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
        for c in columns
        if c != "id"
    ]
    return sql.SQL(
        "INSERT INTO lexmem.memories ({columns}) VALUES ({values}) "
        "ON CONFLICT (id) DO UPDATE SET {sets} "
        "WHERE lexmem.memories.revision = {seen} RETURNING revision"
    ).format(
        columns=sql.SQL(", ").join(map(sql.Identifier, columns)),
        values=sql.SQL(", ").join(values),
        sets=sql.SQL(", ").join(sets),
        seen=sql.Placeholder("seen_revision"),
    )


def _select_rows(where: LiteralString, *, lock: bool = False) -> sql.Composed:
    """Memory rows in memory_to_row's shape (the vector as text, metadata as jsonb) with
    their sync columns; a locking read leaves the vector out (it is read only for a row
    that loses, :meth:`_Push._write`)."""
    fields = [
        sql.SQL("{} AS {}").format(sql.Identifier(MEMORY_COLUMNS[f]), sql.Identifier(f))
        for f in ROW_COLUMNS
    ]
    return sql.SQL(
        "SELECT {fields}, {vector} AS vector, version, revision, owner, written_by, "
        "change_digest FROM lexmem.memories m WHERE {where}{lock}"
    ).format(
        fields=sql.SQL(", ").join(fields),
        vector=sql.SQL("NULL::text" if lock else "embedding::text"),
        where=sql.SQL(where),
        lock=sql.SQL(" FOR NO KEY UPDATE" if lock else ""),
    )


_UPSERT = _upsert_statement()
_LOCK_ROW = _select_rows("m.id = %s", lock=True)
_PULL_ROWS = _select_rows(
    "m.project_id = ANY(%(projects)s) AND m.revision > %(after)s ORDER BY m.revision LIMIT %(limit)s"
)


def _row_out(record: dict[str, Any]) -> dict[str, Any]:
    """A memories row read back as memory_to_row makes it."""
    row = {f: record[f] for f in ROW_COLUMNS}
    for key in _TIMESTAMPS:
        if row[key] is not None:
            row[key] = row[key].astimezone(UTC)
    metadata = row["metadata"]
    row["metadata"] = json.dumps(metadata, sort_keys=True) if metadata else None
    row["vector"] = _vector_list(record["vector"])
    return row


# -- the server -----------------------------------------------------------------------


class TeamServer:
    """A team database, as one role (the URL's user) sees it."""

    def __init__(
        self, url: str, *, password: str | None = None, dim: int = 384, space: str = ""
    ) -> None:
        self._url = url
        self._conninfo = make_conninfo(url, password=password) if password else url
        self.dim = dim
        self.space = space
        self._where = safe_url(url)
        self._db: Database | None = None
        self._role = ""
        self._listener: psycopg.Connection[Any] | None = None
        self._listen_lock = threading.Lock()

    # -- what it is ---------------------------------------------------------------------

    @property
    def where(self) -> str:
        """The database's address, without its password."""
        return self._where

    @property
    def role(self) -> str:
        """The role this server is seen as (PostgreSQL's ``current_user``)."""
        return self._role

    # -- opening and closing ------------------------------------------------------------

    def open(self) -> Self:
        """Connect, bring the schema to the newest step (a database from a newer lexmem is
        refused untouched), check it holds this model's vectors, and start listening."""
        if self._db is not None:
            return self
        db = Database(self._conninfo)
        db.open()
        try:
            with db.connection() as conn:
                conn.autocommit = True
                try:
                    migrate(conn, dim=self.dim, space=self.space)
                    meta = read_meta(conn)
                    if self.space and not meta.get("embedding_space") and _may_update_meta(conn):
                        # Laid out without a model named (an administrator's lexmem, say):
                        # the first model to come that may write it names it.
                        conn.execute(
                            "UPDATE lexmem.meta SET value = %s"
                            " WHERE key = 'embedding_space' AND value = ''",
                            (self.space,),
                        )
                        meta = read_meta(conn)
                    row = conn.execute("SELECT current_user").fetchone()
                finally:
                    conn.autocommit = False
            self._check_meta(meta)
            self._role = str(row[0]) if row else ""
            self._db = db
            self._listener = self._listen()
        except BaseException as exc:
            self._db = None
            db.close()
            if isinstance(exc, psycopg.Error):
                raise failure(exc, f"opening {self._where}", self._where) from exc
            raise
        log.info("[MEM:TEAM] %s open as %s", self._where, self._role)
        return self

    def _check_meta(self, meta: dict[str, str]) -> None:
        dim = meta.get("embedding_dim")
        if dim is not None and dim != str(self.dim):
            raise ConfigError(
                f"{self._where} holds vectors of {dim} dimensions; this lexmem's model makes "
                f"{self.dim}"
            )
        space = meta.get("embedding_space")
        if self.space and space and space != self.space:
            raise ConfigError(
                f"{self._where} holds vectors of the model {space!r}; this lexmem's model is "
                f"{self.space!r}"
            )

    def close(self) -> None:
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _database(self) -> Database:
        if self._db is None:
            raise StoreError(f"{self._where} is not open")
        return self._db

    @contextmanager
    def _tx(self, doing: str, *, snapshot: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction; ``snapshot``: read-only on one snapshot (a pull's queries
        agree on what has committed)."""
        db = self._database()
        try:
            with db.connection() as conn, conn.transaction(), conn.cursor() as cur:
                if snapshot:
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield cur
        except LexmemError:
            raise
        except psycopg.Error as exc:
            raise failure(exc, doing, self._where) from exc

    # -- push -------------------------------------------------------------------------

    def push(self, changes: Sequence[Change]) -> PushOutcome:
        """Apply ``changes`` in one transaction (see the module's rules). A change whose
        project this role may not write fails the whole call with
        :class:`~lexmem.errors.InvalidInputError` naming the project; nothing is written."""
        prepared = [_prepare(c) for c in changes]
        if not prepared:
            return PushOutcome((), ())
        db = self._database()
        for attempt in range(1, _RETRIES + 1):
            try:
                with db.connection() as conn, conn.transaction(), conn.cursor() as cur:
                    return _Push(cur, self._role).run(prepared)
            except LexmemError:
                raise
            except (pgerrors.DeadlockDetected, pgerrors.SerializationFailure) as exc:
                if attempt == _RETRIES:
                    raise failure(exc, "pushing to the team database", self._where) from exc
                log.info("[MEM:TEAM] push broken off (%s); again", type(exc).__name__)
            except psycopg.Error as exc:
                raise failure(exc, "pushing to the team database", self._where) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    # -- pull -------------------------------------------------------------------------

    def pull(self, projects: Sequence[str], after: int, limit: int = 500) -> PullBatch:
        """The changes (rows and tombstones) in ``projects`` with a revision above
        ``after``, oldest first, at most ``limit``, that this role may see."""
        if limit < 1:
            raise InvalidInputError(f"a pull of {limit} changes: ask for at least 1")
        wanted = sorted(set(projects))
        if not wanted:
            return PullBatch((), after)
        params = {"projects": wanted, "after": after, "limit": limit}
        with self._tx("pulling from the team database", snapshot=True) as cur:
            cur.row_factory = psycopg.rows.dict_row
            rows = cur.execute(_PULL_ROWS, params).fetchall()
            tombs = cur.execute(
                "SELECT memory_id, project_id, owner, version, revision FROM lexmem.tombstones"
                " WHERE project_id = ANY(%(projects)s) AND revision > %(after)s"
                " ORDER BY revision LIMIT %(limit)s",
                params,
            ).fetchall()
            merged = sorted(
                [(int(r["revision"]), False, r) for r in rows]
                + [(int(t["revision"]), True, t) for t in tombs],
                key=lambda item: item[0],
            )[:limit]
            ids = [r["id"] for _, deleted, r in merged if not deleted]
            links = self._links_of(cur, ids)
            points = self._confidence_of(cur, ids)
        changes = []
        for revision, deleted, record in merged:
            if deleted:
                changes.append(
                    Change(
                        memory_id=record["memory_id"],
                        version=int(record["version"]),
                        deleted=True,
                        project=record["project_id"],
                        revision=revision,
                        owner=record["owner"],
                    )
                )
                continue
            memory_id = record["id"]
            changes.append(
                Change(
                    memory_id=memory_id,
                    version=int(record["version"]),
                    row=_row_out(record),
                    links=tuple(links.get(memory_id, ())),
                    confidence=tuple(points.get(memory_id, ())),
                    project=record["project"],
                    revision=revision,
                    owner=record["owner"],
                    written_by=record["written_by"] or "",
                )
            )
        return PullBatch(tuple(changes), changes[-1].revision if changes else after)

    @staticmethod
    def _links_of(cur: psycopg.Cursor[Any], ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        if not ids:
            return out
        for link in cur.execute(
            "SELECT id, from_memory_id AS from_id, to_memory_id AS to_id, link_type, strength,"
            " created_at FROM lexmem.memory_links WHERE from_memory_id = ANY(%s) ORDER BY id",
            (ids,),
        ).fetchall():
            link["created_at"] = link["created_at"].astimezone(UTC)
            out.setdefault(link["from_id"], []).append(dict(link))
        return out

    @staticmethod
    def _confidence_of(cur: psycopg.Cursor[Any], ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        if not ids:
            return out
        for point in cur.execute(
            "SELECT id, memory_id, confidence, recorded_at FROM lexmem.memory_confidence_history"
            " WHERE memory_id = ANY(%s) ORDER BY recorded_at, id",
            (ids,),
        ).fetchall():
            point["recorded_at"] = point["recorded_at"].astimezone(UTC)
            out.setdefault(point["memory_id"], []).append(dict(point))
        return out

    def latest_revision(self, projects: Sequence[str]) -> int:
        """The newest revision in ``projects`` this role may see (0: none)."""
        wanted = sorted(set(projects))
        if not wanted:
            return 0
        with self._tx("reading the team database's revision") as cur:
            row = cur.execute(
                "SELECT greatest("
                " (SELECT max(revision) FROM lexmem.memories WHERE project_id = ANY(%(p)s)),"
                " (SELECT max(revision) FROM lexmem.tombstones WHERE project_id = ANY(%(p)s)))",
                {"p": wanted},
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def writable_projects(self) -> list[str]:
        """The team projects this role may push to: those shared with a team it is in
        (any other name is private to whoever writes it, unless another team shares it)."""
        with self._tx("reading this role's team projects") as cur:
            rows = cur.execute("SELECT p FROM unnest(lexmem.my_projects()) p ORDER BY p").fetchall()
        return [str(r[0]) for r in rows]

    # -- change notices ---------------------------------------------------------------

    def _listen(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(
            self._conninfo, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT)
        )
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
        return conn

    def wait_for_change(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a change committed by anyone; True when one
        was (or may have been: the listening connection was lost and is back). The
        notices that came meanwhile are used up, so the next wait waits for a new one."""
        self._database()
        with self._listen_lock:
            try:
                if self._listener is None or self._listener.closed or self._listener.broken:
                    if self._listener is not None:
                        self._listener.close()
                    self._listener = self._listen()
                    return True
                got = any(True for _ in self._listener.notifies(timeout=timeout, stop_after=1))
                if got:
                    for _ in self._listener.notifies(timeout=0):
                        pass
                return got
            except psycopg.Error as exc:
                if self._listener is not None:
                    self._listener.close()
                    self._listener = None
                raise failure(exc, "waiting for changes", self._where) from exc

    # -- opting out -------------------------------------------------------------------

    def forget_project(self, project: str) -> int:
        """Take this role's memories of ``project`` off the server: each leaves a
        tombstone, and its links, confidence and kept versions go, with the losing
        versions this role wrote of others' memories there. Returns how many memories."""
        if not project:
            raise InvalidInputError("forget_project needs a project name")
        with self._tx(f"forgetting the team project {project!r}") as cur:
            _take_revision_lock(cur)
            rows = cur.execute(
                "SELECT id, version, owner, project_id FROM lexmem.memories"
                " WHERE project_id = %s AND owner = current_user ORDER BY id FOR UPDATE",
                (project,),
            ).fetchall()
            ids = [r[0] for r in rows]
            if rows:
                cur.executemany(
                    "INSERT INTO lexmem.tombstones (memory_id, version, owner, project_id)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (memory_id) DO NOTHING",
                    rows,
                )
                cur.execute("DELETE FROM lexmem.memories WHERE id = ANY(%s)", (ids,))
            cur.execute(
                "DELETE FROM lexmem.memory_history WHERE memory_id = ANY(%s)"
                " OR (project_id = %s AND written_by = current_user)",
                (ids, project),
            )
        log.info("[MEM:TEAM] %s: %d memories of %r forgotten", self._where, len(ids), project)
        return len(ids)

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The versions of a memory that lost a conflict, oldest first: ``memory_id``,
        ``version``, ``project``, ``owner``, ``written_by``, ``kept_at`` and ``row`` (in
        memory_to_row's shape, timestamps as datetimes)."""
        with self._tx("reading a memory's history") as cur:
            cur.row_factory = psycopg.rows.dict_row
            records = cur.execute(
                "SELECT memory_id, version, project_id AS project, owner, written_by, kept_at,"
                " memory AS row FROM lexmem.memory_history WHERE memory_id = %s ORDER BY id",
                (memory_id,),
            ).fetchall()
        out = []
        for record in records:
            record["kept_at"] = record["kept_at"].astimezone(UTC)
            record["row"] = _normalised(record["row"], _TIMESTAMPS, "a kept version")
            out.append(dict(record))
        return out

    # -- administration ---------------------------------------------------------------

    def create_team(self, team: str) -> None:
        """A team named ``team`` (nothing happens if it exists)."""
        _check_name(team, "a team")
        with self._tx(f"creating the team {team!r}") as cur:
            cur.execute(
                "INSERT INTO lexmem.teams (name) VALUES (%s) ON CONFLICT DO NOTHING", (team,)
            )

    def share_project(self, team: str, project: str) -> None:
        """Share the team project ``project`` with ``team``: its members see and write
        its memories. Refused when others' private memories are already filed under
        that name: sharing would show them to the team."""
        _check_name(team, "a team")
        _check_name(project, "a project")
        with self._tx(f"sharing {project!r} with the team {team!r}") as cur:
            _require_team(cur, team)
            strangers = cur.execute(
                "SELECT DISTINCT owner FROM lexmem.memories WHERE project_id = %(p)s"
                " AND NOT lexmem.project_is_shared(%(p)s) AND owner NOT IN"
                " (SELECT member FROM lexmem.team_members WHERE team = %(t)s) ORDER BY owner",
                {"p": project, "t": team},
            ).fetchall()
            if strangers:
                names = ", ".join(str(r[0]) for r in strangers)
                raise InvalidInputError(
                    f"the project {project!r} holds private memories of {names}, who "
                    f"{'is' if len(strangers) == 1 else 'are'} not in the team {team!r}: "
                    "sharing it would show them to the team"
                )
            cur.execute(
                "INSERT INTO lexmem.team_projects (team, project) VALUES (%s, %s)"
                " ON CONFLICT DO NOTHING",
                (team, project),
            )

    def add_member(self, team: str, role: str, *, password: str | None = None) -> None:
        """Make ``role`` a member of ``team``: the ``LOGIN`` role is created when missing
        (no superuser, no ``BYPASSRLS``; with ``password``, stored as a SCRAM verifier)
        and given what lexmem needs. A role that would escape row-level security (a
        superuser, ``BYPASSRLS``, the tables' owner or a member of it) is refused."""
        _check_name(team, "a team")
        _check_name(role, "a role")
        if role.startswith("pg_"):
            raise InvalidInputError(f"the role name {role!r}: names starting pg_ are PostgreSQL's")
        ident = sql.Identifier(role)
        with self._tx(f"adding {role!r} to the team {team!r}") as cur:
            _require_team(cur, team)
            found = cur.execute(
                "SELECT rolsuper OR rolbypassrls, pg_has_role(oid,"
                " (SELECT relowner FROM pg_class WHERE oid = 'lexmem.memories'::regclass),"
                " 'USAGE') FROM pg_roles WHERE rolname = %s",
                (role,),
            ).fetchone()
            secret: sql.Composable = sql.SQL("")
            if password:
                verifier = cur.connection.pgconn.encrypt_password(
                    password.encode(), role.encode(), b"scram-sha-256"
                )
                secret = sql.SQL(" PASSWORD {}").format(sql.Literal(verifier.decode()))
            if found is None:
                cur.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE{}"
                    ).format(ident, secret)
                )
            elif found[0] or found[1]:
                raise InvalidInputError(
                    f"the role {role!r} is a superuser, bypasses row-level security or owns "
                    "lexmem's tables: it would see every team's memories; add a plain role"
                )
            else:
                cur.execute(sql.SQL("ALTER ROLE {} LOGIN{}").format(ident, secret))
            database = cur.execute("SELECT current_database()").fetchone()
            assert database is not None  # SELECT without FROM returns its row
            grants = [
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(str(database[0])), ident
                ),
                sql.SQL("GRANT USAGE ON SCHEMA lexmem TO {}").format(ident),
                sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
                    sql.SQL(", ").join(sql.Identifier("lexmem", t) for t in _MEMBER_WRITES),
                    ident,
                ),
                sql.SQL("GRANT SELECT ON {} TO {}").format(
                    sql.SQL(", ").join(sql.Identifier("lexmem", t) for t in _MEMBER_READS), ident
                ),
                sql.SQL("GRANT USAGE ON SEQUENCE lexmem.change_revision TO {}").format(ident),
                sql.SQL("GRANT EXECUTE ON FUNCTION lexmem.project_is_shared(text) TO {}").format(
                    ident
                ),
            ]
            for grant in grants:
                cur.execute(grant)
            cur.execute(
                "INSERT INTO lexmem.team_members (team, member) VALUES (%s, %s)"
                " ON CONFLICT DO NOTHING",
                (team, role),
            )
        log.info("[MEM:TEAM] %s: %s joined the team %s", self._where, role, team)


def _may_update_meta(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT has_table_privilege('lexmem.meta', 'UPDATE')").fetchone()
    return bool(row and row[0])


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise InvalidInputError(f"{what} needs a name without surrounding spaces, not {name!r}")


def _require_team(cur: psycopg.Cursor[Any], team: str) -> None:
    if cur.execute("SELECT 1 FROM lexmem.teams WHERE name = %s", (team,)).fetchone() is None:
        raise InvalidInputError(f"there is no team named {team!r} (create_team makes one)")


def _take_revision_lock(cur: psycopg.Cursor[Any]) -> None:
    """The revision lock for the rest of the transaction, first thing, so no row lock is
    held while waiting for it (the trigger would take it at the first write otherwise,
    and two writers could each hold what the other waits for)."""
    cur.execute(
        "SELECT set_config('lock_timeout', %s, true)", (f"{int(WRITE_LOCK_TIMEOUT * 1000)}ms",)
    )
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (REVISION_LOCK_KEY,))
    cur.execute("SELECT set_config('lock_timeout', '0', true)")


class _Push:
    """One push's transaction: decide each change against the row it locked."""

    def __init__(self, cur: psycopg.Cursor[Any], role: str) -> None:
        self.cur = cur
        self.role = role
        self.applied: list[str] = []
        self.conflicts: list[Conflict] = []
        # The last change written per memory: its links and confidence follow the rows.
        self.written: dict[str, _Prepared] = {}
        self.tombs: dict[str, int] = {}

    def run(self, prepared: list[_Prepared]) -> PushOutcome:
        cur = self.cur
        _take_revision_lock(cur)
        self._check_projects(prepared)
        kept_pointers = self._pointers(prepared)
        # The tombstones of the push's memories, read once: every writer of a tombstone
        # holds the revision lock, so none comes meanwhile but this push's own.
        self.tombs = {
            str(r[0]): int(r[1])
            for r in cur.execute(
                "SELECT memory_id, version FROM lexmem.tombstones WHERE memory_id = ANY(%s)",
                (sorted({p.change.memory_id for p in prepared}),),
            ).fetchall()
        }
        # One order of row locks for every push (ids sorted; a memory's changes in order).
        for item in sorted(prepared, key=lambda p: p.change.memory_id):
            try:
                if item.change.deleted:
                    self._delete(item)
                else:
                    self._write(item, kept_pointers)
            except pgerrors.InsufficientPrivilege as exc:
                raise InvalidInputError(
                    f"{self.role} may not write memory {item.change.memory_id!r} "
                    f"(project {item.project!r}): {str(exc).splitlines()[0]}"
                ) from exc
        for item in self.written.values():
            self._replace_links_and_confidence(item)
        order = {p.change.memory_id: i for i, p in enumerate(prepared)}
        applied = sorted(set(self.applied), key=order.__getitem__)
        return PushOutcome(tuple(applied), tuple(self.conflicts))

    def _check_projects(self, prepared: list[_Prepared]) -> None:
        projects = sorted({p.project for p in prepared if p.project is not None})
        if not projects:
            return
        row = self.cur.execute("SELECT row_security_active('lexmem.memories')").fetchone()
        if not (row and row[0]):
            return  # the tables' owner: row-level security does not bind it
        refused = self.cur.execute(
            "SELECT p FROM unnest(%s::text[]) p WHERE NOT (p = ANY(lexmem.my_projects())"
            " OR NOT lexmem.project_is_shared(p)) ORDER BY p",
            (projects,),
        ).fetchall()
        if refused:
            names = ", ".join(repr(r[0]) for r in refused)
            raise InvalidInputError(
                f"{self.role} may not write to the team project {names}: it is shared with a "
                f"team {self.role} is not in; nothing was pushed"
            )

    def _pointers(self, prepared: list[_Prepared]) -> set[str]:
        """The superseded_by targets a pushed row may keep: memories this role sees on
        the server or that the push brings, not forgotten. A pointer to another is
        dropped: the foreign key would refuse the commit, and a pointer into a private
        memory would tell the team its id."""
        targets = {
            str(p.change.row["superseded_by"])
            for p in prepared
            if p.change.row is not None and p.change.row.get("superseded_by")
        }
        if not targets:
            return set()
        rows = {p.change.memory_id for p in prepared if not p.change.deleted}
        deleted = {p.change.memory_id for p in prepared if p.change.deleted}
        seen = self.cur.execute(
            "SELECT id FROM lexmem.memories WHERE id = ANY(%s)", (sorted(targets),)
        ).fetchall()
        gone = self.cur.execute(
            "SELECT memory_id FROM lexmem.tombstones WHERE memory_id = ANY(%s)",
            (sorted(targets | rows),),
        ).fetchall()
        return ({r[0] for r in seen} | (rows - {r[0] for r in gone})) - deleted

    def _delete(self, item: _Prepared) -> None:
        cur, change = self.cur, item.change
        if change.memory_id in self.tombs:
            self.applied.append(change.memory_id)  # forgotten already: a repeat
            return
        row = cur.execute(
            "SELECT project_id, owner, version FROM lexmem.memories WHERE id = %s FOR UPDATE",
            (change.memory_id,),
        ).fetchone()
        # Only a memory the server holds, and this role sees, leaves a tombstone: no one
        # has another to delete, and a tombstone would take the id from its owner.
        if row is not None:
            cur.execute("DELETE FROM lexmem.memories WHERE id = %s", (change.memory_id,))
            version = max(int(row[2]), change.version)
            cur.execute(
                "INSERT INTO lexmem.tombstones (memory_id, project_id, owner, version)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (memory_id) DO NOTHING",
                (change.memory_id, row[0], row[1], version),
            )
            self.tombs[change.memory_id] = version
            cur.execute(
                "DELETE FROM lexmem.memory_history WHERE memory_id = %s", (change.memory_id,)
            )
        self.written.pop(change.memory_id, None)
        self.applied.append(change.memory_id)

    def _write(self, item: _Prepared, kept_pointers: set[str]) -> None:
        cur, change = self.cur, item.change
        assert change.row is not None  # _prepare refused a row change without one
        tomb = self.tombs.get(change.memory_id)
        if tomb is not None:
            # Forgotten on the server: forgetting wins, and the pushed text is not kept.
            self.conflicts.append(Conflict(change.memory_id, tomb, change.version, False))
            return
        values = _row_values(item)
        if values["superseded_by"] is not None and values["superseded_by"] not in kept_pointers:
            values["superseded_by"] = None
        blind = False
        for _ in range(_RETRIES):
            cur.row_factory = psycopg.rows.dict_row
            try:
                server = cur.execute(_LOCK_ROW, (change.memory_id,)).fetchone()
            finally:
                cur.row_factory = psycopg.rows.tuple_row
            if server is None:
                if self._upsert(values, None):
                    self._won(item)
                    return
                if blind:
                    # The id is taken, twice over, by a row this role cannot see.
                    raise InvalidInputError(
                        f"{self.role} may not write memory {change.memory_id!r} (project "
                        f"{item.project!r}): a memory of that id is in a project "
                        f"{self.role} cannot see"
                    )
                blind = True
                continue  # written meanwhile by another: decide against it
            if int(server["version"]) == change.version and server["change_digest"] == item.digest:
                self.applied.append(change.memory_id)  # a repeat of what is there
                return
            mine = (change.version, item.order[0], self.role, item.digest)
            when = server["updated_at"] or server["created_at"]
            theirs = (int(server["version"]), when, server["written_by"], server["change_digest"])
            if mine > theirs:
                if int(server["version"]) >= change.version:
                    # The same version edited twice: the server's loses, and is kept.
                    vector = cur.execute(
                        "SELECT embedding::text FROM lexmem.memories WHERE id = %s",
                        (change.memory_id,),
                    ).fetchone()
                    server["vector"] = vector[0] if vector else None
                    self._keep(
                        server,
                        server,
                        int(server["version"]),
                        server["written_by"],
                        server["change_digest"],
                    )
                    self.conflicts.append(
                        Conflict(change.memory_id, change.version, int(server["version"]), True)
                    )
                if self._upsert(values, int(server["revision"])):
                    self._won(item)
                    return
                continue
            self._keep(
                server,
                dict(change.row, project=item.project),
                change.version,
                self.role,
                item.digest,
            )
            self.conflicts.append(
                Conflict(change.memory_id, int(server["version"]), change.version, False)
            )
            return
        raise StoreError(f"memory {change.memory_id!r} kept changing under the push; try again")

    def _upsert(self, values: dict[str, Any], seen_revision: int | None) -> bool:
        row = self.cur.execute(_UPSERT, {**values, "seen_revision": seen_revision}).fetchone()
        return row is not None

    def _won(self, item: _Prepared) -> None:
        self.written[item.change.memory_id] = item
        self.applied.append(item.change.memory_id)

    def _keep(
        self,
        server: dict[str, Any],
        row: dict[str, Any],
        version: int,
        written_by: str,
        digest: str,
    ) -> None:
        """A losing version (``row``) of the memory ``server`` holds into memory_history,
        once, under the memory's project and owner."""
        self.cur.execute(
            "INSERT INTO lexmem.memory_history (memory_id, version, project_id, owner,"
            " written_by, change_digest, memory) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb)"
            " ON CONFLICT ON CONSTRAINT uq_memory_history DO NOTHING",
            (
                server["id"],
                version,
                server["project"],
                server["owner"],
                written_by,
                digest,
                _history_row({f: row.get(f) for f in _FIELDS}),
            ),
        )

    def _replace_links_and_confidence(self, item: _Prepared) -> None:
        """The links out of a written memory and its confidence points become the
        pushed ones; a link to a memory the server lacks, or this role cannot see, is
        left out."""
        cur, change = self.cur, item.change
        memory_id = change.memory_id
        cur.execute("DELETE FROM lexmem.memory_links WHERE from_memory_id = %s", (memory_id,))
        if change.links:
            cur.executemany(
                "INSERT INTO lexmem.memory_links (id, from_memory_id, to_memory_id, link_type,"
                " strength, created_at) SELECT %(id)s, %(from_id)s, %(to_id)s, %(link_type)s,"
                " coalesce(%(strength)s, 0.5), coalesce(%(created_at)s::timestamptz, now())"
                " WHERE %(to_id)s <> %(from_id)s"
                " AND EXISTS (SELECT 1 FROM lexmem.memories WHERE id = %(to_id)s)"
                " ON CONFLICT DO NOTHING",
                [
                    {
                        "id": link.get("id"),
                        "from_id": memory_id,
                        "to_id": link.get("to_id"),
                        "link_type": link.get("link_type"),
                        "strength": link.get("strength"),
                        "created_at": _timestamp(link.get("created_at"), "a link"),
                    }
                    for link in change.links
                ],
            )
        cur.execute(
            "DELETE FROM lexmem.memory_confidence_history WHERE memory_id = %s", (memory_id,)
        )
        if change.confidence:
            cur.executemany(
                "INSERT INTO lexmem.memory_confidence_history (id, memory_id, confidence,"
                " recorded_at) VALUES (%s, %s, %s, coalesce(%s::timestamptz, now()))"
                " ON CONFLICT (id) DO NOTHING",
                [
                    (
                        point.get("id"),
                        memory_id,
                        point.get("confidence"),
                        _timestamp(point.get("recorded_at"), "a confidence point"),
                    )
                    for point in change.confidence
                ],
            )
