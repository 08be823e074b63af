"""The memories on PostgreSQL + pgvector: :class:`PostgresStore` implements
:class:`lexmem.store.protocol.MemoryBackend` over the team schema
(:mod:`lexmem.store.postgres.schema`), with the promises of each operation's docstring
there.

``[store] url`` names the database, without its password; a password, when the server
asks for one, is in the OS keyring. The data folder (:attr:`paths`) still holds what is
local: settings, the service's socket and locks, logs, the model.

Every write is one transaction under the write lock (:meth:`Database.write`): all or
nothing, and no other lexmem writer, in any process on any machine, between its reads and
its writes. Every value reads back as written: scores are ``double precision``, times
``timestamptz`` (microseconds, UTC), vectors pgvector's float32 (what the model gives),
read through ``vector_send`` so no decimal text comes between; ``metadata`` is ``jsonb``
(the same object back; its text is written with sorted keys again in :meth:`arrow_table`).

Vector queries: pgvector 0.6.2's HNSW scan yields at most ``hnsw.ef_search`` rows and
filters after the scan, so :meth:`PostgresStore.nearest` raises ``ef_search`` to the depth
for its transaction and, when the scan comes back short of ``k`` (a selective filter),
asks again with the index left out: the exact scan returns every row the filter admits.

Forgetting on a server (:meth:`PostgresStore.delete_many` with ``erase``): the rows, their
links and confidence history go in one transaction, with the neighbours' context that
quoted them; then ``VACUUM FULL`` (outside any transaction, under the write lock) rewrites
the memories, links and confidence tables with their TOAST tables and every index
(full-text and vector included) into new files, so no table or index file of the database
keeps a byte of the forgotten text; the old files are unlinked by PostgreSQL at its next
checkpoint. The planner's statistics (``pg_statistic``) sample column values, a content
among them: the rewrite analyses the tables again, and as a superuser lexmem also rewrites
that catalog and asks for the checkpoint at once. What stays, plainly: the write-ahead log
keeps the text until its segments are recycled (checkpoints, ``max_wal_size``), and so do
WAL archives, replicas and backups of the server, which lexmem does not control; the
server's own log keeps it only if statement logging with parameters is turned on; and
connected as a role that is not a superuser, the old statistics rows stay in the
catalog's pages until autovacuum reuses them, and the old files until the server's own
checkpoint. The rewrite takes
an exclusive lock on each table for its length (readers wait) and costs a rebuild of the
HNSW index: about 1.6 s at 10,000 memories on a small machine.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Self, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from lexmem.config import Paths
from lexmem.errors import (
    ConfigError,
    InvalidInputError,
    LexmemError,
    NotFoundError,
)
from lexmem.models import (
    ConfidencePoint,
    Memory,
    MemoryLink,
    MemoryStatus,
    MemoryType,
    new_id,
    utcnow,
)
from lexmem.settings import StoreSettings
from lexmem.store.postgres.db import Database, failure
from lexmem.store.postgres.migrations import migrate, read_meta
from lexmem.store.postgres.schema import MEMORY_COLUMNS, TABLES
from lexmem.store.protocol import DigestColumns, MemoryFilter, Neighbour
from lexmem.store.schema import ROW_COLUMNS, SESSION_SOURCES, memory_from_row, memory_to_row

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SORTS", "PostgresStore", "filter_sql", "vector_text"]

log = logging.getLogger("lexmem.store")

_T = TypeVar("_T")

_ID_PREFIX = re.compile(r"^[0-9a-fA-F-]{4,36}$")
# HNSW's ef_search takes 1 to 1000; the default 40 is the floor.
_EF_MIN, _EF_MAX = 40, 1000
# A load (an import, a large store_many) goes in without the HNSW index, built again
# after, when it adds at least this many rows and at least a twentieth of the table: a
# row costs ~4 ms of index upkeep loaded into the index, ~0.16 ms of a build
# (docs/team.md).
_REBUILD_MIN_ROWS = 200
_REBUILD_SHARE = 20
_VECTOR_INDEX = (
    "CREATE INDEX memories_embedding_idx ON lexmem.memories "
    "USING hnsw (embedding vector_cosine_ops)"
)
# The memory an index build may use, for the build's transaction only. pgvector builds
# HNSW in memory while the graph fits (a million 384-number vectors take about 2 GB) and
# inserts the rest one by one when it does not, which at the server's default (64 MB) made
# a million-memory import take more than an hour; a build takes only what it needs.
_BUILD_MEMORY = "SET LOCAL maintenance_work_mem = '2GB'"
# Tables an erasure rewrites.
_ERASED = ("lexmem.memories", "lexmem.memory_links", "lexmem.memory_confidence_history")
# Every column is named in C collation where order matters: Python's and Arrow's order
# (code points), whatever the database's default collation is.
_C = 'COLLATE "C"'

# list_ids' orders: newest or highest first, title A to Z; NULLs last as Arrow sorts them.
SORTS = {
    "salience": "current_salience DESC NULLS LAST",
    "created": "created_at DESC NULLS LAST",
    "accessed": "last_accessed_at DESC NULLS LAST",
    "updated": "updated_at DESC NULLS LAST",
    "title": f"title {_C} ASC NULLS LAST",
}


def _expr(field: str) -> str:
    """The SQL that reads a memory row's ``field`` under its own name."""
    column = MEMORY_COLUMNS[field]
    if field == "vector":
        return f"vector_send({column}) AS vector"
    if field == "metadata":
        return f"{column}::text AS metadata"
    return column if column == field else f"{column} AS {field}"


_ROW_SQL = ", ".join(_expr(f) for f in ROW_COLUMNS)
_ROW_VEC_SQL = _ROW_SQL + ", " + _expr("vector")
# The columns a new memory is written to, in memory_to_row's order, then its context.
_WRITE_FIELDS = (*ROW_COLUMNS, "vector", "context")
_WRITE_COLUMNS = ", ".join(MEMORY_COLUMNS[f] for f in _WRITE_FIELDS)
# What edit() may change, and the columns replace() writes (not the id, not the context).
_EDITABLE = frozenset(
    {
        "content", "title", "type", "project", "embedding", "salience", "importance",
        "metadata", "fingerprint", "word_count", "learning_context",
    }
)  # fmt: skip
_REPLACE_FIELDS = tuple(f for f in (*ROW_COLUMNS, "vector") if f != "id")


def vector_text(values: Sequence[float] | Any) -> str:
    """pgvector's text for a vector (``[1.5,2.0]``): each float32 value exactly, so the
    float32 stored is the one given."""
    return "[" + ",".join(map(repr, (float(x) for x in values))) + "]"


def _vector_from(data: bytes | None) -> list[float] | None:
    """A vector from ``vector_send``'s bytes: dimension (int16), unused (int16), then
    big-endian float32s; each as the float32's exact value."""
    if data is None:
        return None
    import numpy as np

    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float64).tolist()  # type: ignore[no-any-return]


_METADATA_AT = ROW_COLUMNS.index("metadata")


def _binary_types(cur: psycopg.Cursor[Any]) -> list[int]:
    """The type oids of :data:`_WRITE_COLUMNS` for a binary COPY, with pgvector's binary
    format taught to ``cur`` and its connection (the extension's oid differs between
    databases; a cursor copies its connection's adapters when it is made)."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    conn = cur.connection
    cached: tuple[list[int], type[Dumper]] | None = getattr(conn, "_lexmem_copy", None)
    if cached is not None:
        cur.adapters.register_dumper(None, cached[1])
        return cached[0]
    rows = conn.execute(
        "SELECT attname, atttypid::int FROM pg_attribute "
        "WHERE attrelid = 'lexmem.memories'::regclass AND attnum > 0 AND NOT attisdropped"
    ).fetchall()
    oids = {str(name): int(oid) for name, oid in rows}
    columns = [MEMORY_COLUMNS[f] for f in _WRITE_FIELDS]

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = oids["embedding"]

        def dump(self, obj: Any) -> bytes:
            import numpy as np

            data = np.asarray(obj, dtype=">f4")
            return struct.pack(">HH", data.size, 0) + data.tobytes()

    # By oid only: COPY's set_types looks the dumper up so.
    conn.adapters.register_dumper(None, VectorDumper)
    cur.adapters.register_dumper(None, VectorDumper)
    types = [oids[c] for c in columns]
    conn._lexmem_copy = (types, VectorDumper)  # type: ignore[attr-defined]
    return types


def _memory_values(r: Mapping[str, Any]) -> list[Any]:
    """A memory row's values in :data:`_WRITE_FIELDS`' order (its context None)."""
    values = [_aware(r.get(f)) for f in ROW_COLUMNS]
    metadata = values[_METADATA_AT]
    if metadata is not None:  # jsonb's dumpers take the object
        try:
            values[_METADATA_AT] = json.loads(str(metadata))
        except ValueError as exc:
            raise InvalidInputError(
                f"memory {r.get('id')} has metadata that is not JSON ({exc})"
            ) from exc
    values.append(r["vector"])
    values.append(None)
    return values


def _copy_refused(cur: psycopg.Cursor[Any]) -> bool:
    """Whether row-level security applies to this connection's role on the memories
    (a team member's, not the tables' owner): PostgreSQL refuses COPY FROM then, and rows
    go in by INSERT."""
    conn = cur.connection
    known: bool | None = getattr(conn, "_lexmem_rls", None)
    if known is None:
        cur.execute("SELECT row_security_active('lexmem.memories'::regclass)")
        row = cur.fetchone()
        known = bool(row and row[0])
        conn._lexmem_rls = known  # type: ignore[attr-defined]
    return known


def _insert_rows(
    cur: psycopg.Cursor[Any], table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Rows in by INSERT, where COPY is refused (:func:`_copy_refused`)."""
    marks = ", ".join("%s::vector" if c == "embedding" else "%s" for c in columns)
    values = (
        [
            vector_text(v) if c == "embedding" and v is not None
            else Jsonb(v) if c == "metadata" and v is not None
            else v
            for c, v in zip(columns, row, strict=True)
        ]
        for row in rows
    )  # fmt: skip
    cur.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", values)


def _text_rows(
    cur: psycopg.Cursor[Any], table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Rows in by text COPY, or by INSERT where COPY is refused."""
    if _copy_refused(cur):
        _insert_rows(cur, table, columns, rows)
        return
    with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _aware(value: Any) -> Any:
    """A time without a zone taken as UTC, as the local store's Arrow columns take it."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _utc(value: Any) -> Any:
    return value.astimezone(UTC) if isinstance(value, datetime) else value


def filter_sql(flt: MemoryFilter) -> tuple[str, list[Any]]:
    """The ``WHERE`` condition (with ``%s`` parameters, never a value in the text) that
    admits what ``flt`` admits over ``lexmem.memories``, and its parameters."""
    parts: list[str] = []
    params: list[Any] = []

    def add(text: str, value: Any) -> None:
        parts.append(text)
        params.append(value)

    if flt.project is not None:
        add("project_id = %s", flt.project)
    if flt.exclude_projects:
        add("(project_id IS NULL OR NOT project_id = ANY(%s))", list(flt.exclude_projects))
    if flt.type is not None:
        add("memory_type = %s", str(flt.type))
    if flt.status is not None:
        add("status = %s", str(flt.status))
    if flt.source is not None:
        add("source = %s", str(flt.source))
    if flt.pinned is not None:
        add("pinned = %s", bool(flt.pinned))
    if flt.session_id is not None:
        add("session_id = %s", flt.session_id)
    if flt.user_id is not None:
        add("user_id = %s", flt.user_id)
    if flt.created_after is not None:
        add("created_at >= %s", flt.created_after)
    if flt.created_before is not None:
        add("created_at < %s", flt.created_before)
    if flt.source_document is not None:
        add("source_document_id = %s", flt.source_document)
    return (" AND ".join(parts) if parts else "TRUE"), params


# Each memory's context from its session, for the sessions in %(sessions)s: the content
# of the conversation memory before it and of the one after it (lance.py's
# _session_contexts), NULL for any other memory; only rows whose context changes are
# written.
_SYNC_CONTEXT = f"""
WITH chain AS (
    SELECT id, lag(content) OVER w AS before, lead(content) OVER w AS after
    FROM lexmem.memories
    WHERE session_id = ANY(%(sessions)s) AND source = ANY(%(sources)s)
    WINDOW w AS (PARTITION BY session_id ORDER BY created_at, id {_C})
), wanted AS (
    SELECT m.id,
           NULLIF(concat_ws(E'\\n', NULLIF(c.before, ''), NULLIF(c.after, '')), '') AS context
    FROM lexmem.memories m LEFT JOIN chain c ON c.id = m.id
    WHERE m.session_id = ANY(%(sessions)s)
)
UPDATE lexmem.memories m SET context = wanted.context
FROM wanted
WHERE m.id = wanted.id AND m.context IS DISTINCT FROM wanted.context
"""


class PostgresStore:
    """The memories, their links and confidence history in a PostgreSQL database."""

    def __init__(
        self,
        paths: Paths,
        *,
        dim: int,
        space_id: str,
        settings: StoreSettings | None = None,
        url: str | None = None,
    ) -> None:
        self.paths = paths
        self.dim = dim
        self.space_id = space_id
        self.settings = settings or StoreSettings()
        self.url = url if url is not None else self.settings.url
        if not self.url.strip():
            raise ConfigError("store.backend is postgres but store.url names no database")
        self.db = Database(self.url)
        self._stored_space = space_id
        self._stored_dim = dim

    # -- what it is -----------------------------------------------------------------

    @property
    def stored_space(self) -> str:
        return self._stored_space

    @property
    def needs_reembed(self) -> bool:
        return self._stored_space != self.space_id or self._stored_dim != self.dim

    # -- opening, reading, writing --------------------------------------------------

    def open(self) -> Self:
        from lexmem.store.postgres.address import tls_problem

        # As for a team's server: judged as libpq will connect (hostaddr, PGHOST, a
        # service ...), before it does, so no memory crosses a network in clear text.
        problem = tls_problem(self.url)
        if problem:
            raise ConfigError(f"store.url: {problem}")
        self.db.open()
        try:
            with self.db.connection() as conn:
                try:
                    conn.autocommit = True
                    migrate(conn, dim=self.dim, space=self.space_id)
                    meta = read_meta(conn)
                except psycopg.Error as exc:
                    raise failure(exc, f"opening {self.db.where}", self.db.where) from exc
                finally:
                    with contextlib.suppress(psycopg.Error):
                        conn.autocommit = False
        except LexmemError:
            self.db.close()
            raise
        self._take_meta(meta)
        return self

    def _take_meta(self, meta: Mapping[str, str]) -> None:
        self._stored_space = meta.get("embedding_space", self.space_id)
        self._stored_dim = int(meta.get("embedding_dim", self.dim))

    def close(self) -> None:
        self.db.close()

    def refresh(self) -> None:
        """Every read is a fresh statement; what is kept is the vector space the stored
        vectors are in, which a re-embedding in another process changes."""
        rows = self._rows("SELECT key, value FROM lexmem.meta", doing="reading lexmem.meta")
        self._take_meta({str(r["key"]): str(r["value"]) for r in rows})

    def reading(self, read: Callable[[], _T]) -> _T:
        return read()

    def writing(self) -> AbstractContextManager[None]:
        return self.db.writing()

    # -- the queries ----------------------------------------------------------------

    def _rows(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = (), doing: str = ""
    ) -> list[dict[str, Any]]:
        """The rows of one query as dicts, times in UTC."""
        with self.db.tx(doing or "reading the team database's memories") as cur:
            cur.execute(query, params)
            names = [d.name for d in cur.description or ()]
            return [{n: _utc(v) for n, v in zip(names, row, strict=True)} for row in cur]

    def _column(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = (), doing: str = ""
    ) -> list[Any]:
        with self.db.tx(doing or "reading the team database's memories") as cur:
            cur.execute(query, params)
            return [row[0] for row in cur]

    @staticmethod
    def _memory(row: dict[str, Any]) -> Memory:
        if "vector" in row:
            row["vector"] = _vector_from(row["vector"])
        return memory_from_row(row)

    def _check_vector(self, memory_id: str, embedding: Sequence[float] | None) -> None:
        if embedding is None:
            raise InvalidInputError(f"memory {memory_id} has no embedding")
        if len(embedding) != self.dim:
            raise InvalidInputError(
                f"memory {memory_id} has a {len(embedding)}-number embedding; "
                f"the store holds {self.dim}"
            )

    @staticmethod
    def _sync_context(cur: psycopg.Cursor[Any], sessions: Sequence[str]) -> None:
        if sessions:
            cur.execute(
                _SYNC_CONTEXT,
                {"sessions": sorted(set(sessions)), "sources": sorted(SESSION_SOURCES)},
            )

    # -- reading memories -----------------------------------------------------------

    def count(self, flt: MemoryFilter | None = None) -> int:
        where, params = filter_sql(flt or MemoryFilter(status=None))
        return int(self._column(f"SELECT count(*) FROM lexmem.memories WHERE {where}", params)[0])

    def resolve_id(self, ident: str) -> str:
        ident = ident.strip().lower()
        if 0 < len(ident) < 4 and re.fullmatch(r"[0-9a-f-]+", ident):
            raise InvalidInputError(f"{ident!r} is too short: give at least 4 characters of the id")
        if not _ID_PREFIX.match(ident):
            raise InvalidInputError(f"{ident!r} is not a memory id")
        if len(ident) == 36:
            return ident
        found = self._column(
            "SELECT id FROM lexmem.memories WHERE starts_with(id, %s) LIMIT 2", (ident,)
        )
        if not found:
            raise NotFoundError("memory", ident)
        if len(found) > 1:
            raise InvalidInputError(
                f"id prefix {ident} matches more than one memory; give more of it"
            )
        return str(found[0])

    def get(self, memory_id: str, *, with_embedding: bool = True) -> Memory:
        m = self.get_optional(memory_id, with_embedding=with_embedding)
        if m is None:
            raise NotFoundError("memory", memory_id)
        return m

    def get_optional(self, memory_id: str, *, with_embedding: bool = True) -> Memory | None:
        cols = _ROW_VEC_SQL if with_embedding else _ROW_SQL
        rows = self._rows(f"SELECT {cols} FROM lexmem.memories WHERE id = %s", (memory_id,))
        return self._memory(rows[0]) if rows else None

    def get_many(self, ids: Sequence[str], *, with_embedding: bool = False) -> list[Memory]:
        if not ids:
            return []
        cols = _ROW_VEC_SQL if with_embedding else _ROW_SQL
        rows = self._rows(
            f"SELECT {cols} FROM lexmem.memories WHERE id = ANY(%s)", (list(dict.fromkeys(ids)),)
        )
        found = {r["id"]: self._memory(r) for r in rows}
        return [found[i] for i in ids if i in found]

    def get_by_type(self, mtype: MemoryType, user_id: str, limit: int = 50) -> list[Memory]:
        return self.list_memories(
            MemoryFilter(type=mtype, user_id=user_id), sort="salience", limit=limit
        )

    def iter_all(self, *, batch: int = 512, with_embedding: bool = True) -> Iterator[list[Memory]]:
        ids = [
            str(i)
            for i in self._column(f"SELECT id FROM lexmem.memories ORDER BY created_at, id {_C}")
        ]
        for start in range(0, len(ids), batch):
            yield self.get_many(ids[start : start + batch], with_embedding=with_embedding)

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        found = self._column("SELECT id FROM lexmem.memories WHERE id = ANY(%s)", (list(ids),))
        return {str(i) for i in found}

    def _order(self, sort: str) -> str:
        return f"{SORTS.get(sort, SORTS['created'])}, id {_C}"

    def list_ids(self, flt: MemoryFilter | None = None, *, sort: str = "created") -> list[str]:
        where, params = filter_sql(flt or MemoryFilter())
        query = f"SELECT id FROM lexmem.memories WHERE {where} ORDER BY {self._order(sort)}"
        return [str(i) for i in self._column(query, params)]

    def list_memories(
        self,
        flt: MemoryFilter | None = None,
        *,
        sort: str = "created",
        limit: int | None = 50,
        offset: int = 0,
    ) -> list[Memory]:
        if sort not in SORTS:
            raise InvalidInputError(f"cannot sort by {sort!r} (use one of {', '.join(SORTS)})")
        if offset < 0 or (limit is not None and limit < 0):
            raise InvalidInputError("limit and offset must not be negative")
        where, params = filter_sql(flt or MemoryFilter())
        query = (
            f"SELECT {_ROW_SQL} FROM lexmem.memories WHERE {where} "
            f"ORDER BY {self._order(sort)} LIMIT %s OFFSET %s"
        )
        rows = self._rows(query, [*params, limit, offset])
        return [self._memory(r) for r in rows]

    def ids_superseded_by(self, memory_id: str) -> list[str]:
        query = f"SELECT id FROM lexmem.memories WHERE superseded_by = %s ORDER BY id {_C}"
        return [str(i) for i in self._column(query, (memory_id,))]

    def ids_in_projects(self, projects: Sequence[str]) -> list[str]:
        if not projects:
            return []
        query = f"SELECT id FROM lexmem.memories WHERE project_id = ANY(%s) ORDER BY id {_C}"
        return [str(i) for i in self._column(query, (sorted(set(projects)),))]

    def project_names(self) -> list[str]:
        query = (
            f"SELECT DISTINCT project_id {_C} AS p FROM lexmem.memories "
            "WHERE project_id IS NOT NULL ORDER BY p"
        )
        return [str(p) for p in self._column(query) if p]

    def recent_fingerprint(self, fingerprint: str, since: datetime) -> str | None:
        found = self._column(
            "SELECT id FROM lexmem.memories WHERE status = 'active' AND fingerprint = %s "
            "AND created_at >= %s LIMIT 1",
            (fingerprint, since),
        )
        return str(found[0]) if found else None

    def nearest_rows(
        self, embedding: Sequence[float] | Any, flt: MemoryFilter, depth: int, columns: str
    ) -> list[dict[str, Any]]:
        """The ``depth`` rows ``flt`` admits nearest ``embedding`` by cosine, nearest first:
        ``columns`` (SQL over ``lexmem.memories``) and ``distance``.

        The HNSW scan runs with ``hnsw.ef_search`` at least ``depth`` (its most is 1,000);
        when it comes back short of ``depth`` rows (a filter that keeps few rows drops
        most of the scan's), the query runs again ordered by an expression the index
        cannot serve: exact, every row the filter admits, whatever the planner's
        settings."""
        if depth <= 0:
            return []
        where, params = filter_sql(flt)
        vec = vector_text(embedding)
        query = (
            f"SELECT {columns}, embedding <=> %s::vector AS distance FROM lexmem.memories "
            f"WHERE {where} ORDER BY embedding <=> %s::vector LIMIT %s"
        )
        # "+ 0": the same order, but not the index's operator, so no index scan serves it.
        exact = query.replace(
            "ORDER BY embedding <=> %s::vector", "ORDER BY (embedding <=> %s::vector) + 0"
        )
        args = [vec, *params, vec, depth]
        ef = str(min(_EF_MAX, max(_EF_MIN, depth)))
        with self.db.tx("finding the nearest memories") as cur:
            cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", (ef,))
            cur.execute(query, args)
            names = [d.name for d in cur.description or ()]
            rows = [dict(zip(names, r, strict=True)) for r in cur]
            if len(rows) < depth:
                cur.execute(exact, args)
                rows = [dict(zip(names, r, strict=True)) for r in cur]
        return rows

    def nearest(self, embedding: Sequence[float], flt: MemoryFilter, k: int) -> list[Neighbour]:
        rows = self.nearest_rows(embedding, flt, k, "id, content")
        return [
            Neighbour(str(r["id"]), str(r["content"]), 1.0 - float(r["distance"])) for r in rows
        ]

    def archived_before(self, cutoff: datetime, limit: int = 10_000) -> list[str]:
        query = (
            "SELECT id FROM lexmem.memories WHERE status = 'archived' AND NOT pinned "
            "AND coalesce(updated_at, created_at) < %s "
            f"ORDER BY coalesce(updated_at, created_at), id {_C} LIMIT %s"
        )
        return [str(i) for i in self._column(query, (cutoff, limit))]

    def digest_columns(self, project: str | None) -> DigestColumns:
        import numpy as np

        def us(column: str) -> str:
            return f"(extract(epoch FROM {column}) * 1000000)::float8"

        scope = "project_id IS NULL"
        if project is not None:
            scope = "(project_id = %s OR project_id IS NULL)"
        query = (
            "SELECT id, current_salience, pinned, access_count, "
            f"{us('created_at')}, {us('last_accessed_at')}, {us('last_reinforced_at')}, "
            "project_id IS NULL, fingerprint, source_document_id "
            f"FROM lexmem.memories WHERE status = 'active' AND {scope} ORDER BY id {_C}"
        )
        with self.db.tx("reading the digest's columns") as cur:
            cur.execute(query, (project,) if project is not None else ())
            rows = cur.fetchall()
        cols = list(zip(*rows, strict=True)) if rows else [()] * 10

        def numbers(k: int) -> Any:
            return np.array([0.0 if v is None else float(v) for v in cols[k]], dtype=np.float64)

        def times(k: int) -> Any:
            return np.array([np.nan if v is None else v for v in cols[k]], dtype=np.float64)

        ids, fingerprints, documents = cols[0], cols[8], cols[9]

        def keys(positions: Any) -> list[tuple[str, str | None, str | None]]:
            return [(str(ids[int(p)]), fingerprints[int(p)], documents[int(p)]) for p in positions]

        return DigestColumns(
            salience=numbers(1),
            pinned=np.array([bool(v) for v in cols[2]], dtype=bool),
            access_count=numbers(3),
            created_us=times(4),
            last_accessed_us=times(5),
            last_reinforced_us=times(6),
            general=np.array([bool(v) for v in cols[7]], dtype=bool),
            keys=keys,
        )

    # -- links and confidence -------------------------------------------------------

    @staticmethod
    def _link(r: Sequence[Any]) -> MemoryLink:
        return MemoryLink(str(r[0]), str(r[1]), str(r[2]), float(r[3]), str(r[4]), _utc(r[5]))

    def _links(self, where: str, params: Sequence[Any]) -> list[MemoryLink]:
        query = (
            "SELECT from_memory_id, to_memory_id, link_type, strength, id, created_at "
            f"FROM lexmem.memory_links WHERE {where} ORDER BY created_at, id {_C}"
        )
        with self.db.tx("reading the memories' links") as cur:
            cur.execute(query, params)
            return [self._link(r) for r in cur]

    def get_links_from(self, memory_id: str) -> list[MemoryLink]:
        return self._links("from_memory_id = %s", (memory_id,))

    def get_links_to(self, memory_id: str) -> list[MemoryLink]:
        return self._links("to_memory_id = %s", (memory_id,))

    def all_links(self) -> list[MemoryLink]:
        return self._links("TRUE", ())

    def _points(self, where: str, params: Sequence[Any]) -> list[ConfidencePoint]:
        query = (
            "SELECT memory_id, confidence, recorded_at, id FROM lexmem.memory_confidence_history "
            f"WHERE {where} ORDER BY memory_id {_C}, recorded_at, id {_C}"
        )
        with self.db.tx("reading the confidence history") as cur:
            cur.execute(query, params)
            return [ConfidencePoint(str(r[0]), float(r[1]), _utc(r[2]), str(r[3])) for r in cur]

    def all_confidence(self) -> list[ConfidencePoint]:
        return self._points("TRUE", ())

    def confidence_history(self, memory_id: str) -> list[ConfidencePoint]:
        return self._points("memory_id = %s", (memory_id,))

    def supersede_chain(self, memory_id: str, *, forward: bool = True) -> list[Memory]:
        out: list[Memory] = []
        seen = {memory_id}
        current = memory_id
        while True:
            if forward:
                nxt = self.get(current, with_embedding=False).superseded_by
            else:
                before = self.ids_superseded_by(current)
                nxt = before[0] if before else None
            if nxt is None or nxt in seen:
                return out
            seen.add(nxt)
            found = self.get_optional(nxt)
            if found is None:
                return out
            out.append(found)
            current = nxt

    # -- writing memories -----------------------------------------------------------

    def store(self, memory: Memory) -> Memory:
        return self.store_many([memory])[0]

    def store_many(self, memories: Sequence[Memory]) -> list[Memory]:
        if not memories:
            return []
        for m in memories:
            self._check_vector(m.id, m.embedding)
        ids = [m.id for m in memories]
        if len(set(ids)) != len(ids):
            raise InvalidInputError("two memories in one batch share an id")
        rows = [memory_to_row(m) for m in memories]
        now = utcnow()
        sessions = [
            r["session_id"] for r in rows if r["session_id"] and r["source"] in SESSION_SOURCES
        ]
        with self.db.write("storing memories") as cur:
            cur.execute("SELECT id FROM lexmem.memories WHERE id = ANY(%s) LIMIT 1", (ids,))
            taken = cur.fetchone()
            if taken is not None:
                raise InvalidInputError(f"a memory with id {taken[0]} already exists")
            rebuild = self._without_vector_index(cur, len(rows))
            self._copy_memories(cur, rows)
            _text_rows(
                cur,
                "lexmem.memory_confidence_history",
                ("id", "memory_id", "confidence", "recorded_at"),
                ((new_id(), m.id, float(m.confidence), now) for m in memories),
            )
            self._sync_context(cur, sessions)
            if rebuild:
                self._rebuild_vector_index(cur)
        for m in memories:
            log.info("[MEM:STORE] Stored %s memory %s for user %s", m.type, m.id, m.user_id)
        return list(memories)

    @staticmethod
    def _without_vector_index(cur: psycopg.Cursor[Any], adding: int) -> bool:
        """Drop the HNSW index for a load of ``adding`` rows when building it again after
        costs less than keeping it up row by row (see :data:`_REBUILD_SHARE`); whether it
        was dropped. In the load's transaction: readers of the table wait for its end,
        and a failure puts the index back as it was."""
        if adding < _REBUILD_MIN_ROWS:
            return False
        cur.execute("SELECT count(*) FROM lexmem.memories")
        row = cur.fetchone()
        stored = int(row[0]) if row else 0
        if adding * _REBUILD_SHARE < stored + adding:
            return False
        cur.execute("DROP INDEX lexmem.memories_embedding_idx")
        return True

    @staticmethod
    def _rebuild_vector_index(cur: psycopg.Cursor[Any]) -> None:
        # The replacements' checks wait for the commit, and an index cannot be built on
        # a table with checks pending: run them now.
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cur.execute(_BUILD_MEMORY)
        cur.execute(_VECTOR_INDEX)

    @staticmethod
    def _copy_memories(cur: psycopg.Cursor[Any], rows: Sequence[Mapping[str, Any]]) -> None:
        """COPY memory rows (memory_to_row's, or an export's) in, in PostgreSQL's binary
        format (a vector as its float32s, no decimal text: bench/pg_store.py); their
        context is None until :meth:`_sync_context` (an export leaves it out)."""
        if _copy_refused(cur):
            _insert_rows(
                cur,
                "lexmem.memories",
                [MEMORY_COLUMNS[f] for f in _WRITE_FIELDS],
                (_memory_values(r) for r in rows),
            )
            return
        types = _binary_types(cur)
        with cur.copy(
            f"COPY lexmem.memories ({_WRITE_COLUMNS}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(types)
            for r in rows:
                copy.write_row(_memory_values(r))

    def _replace(self, memory: Memory) -> Memory:
        """Overwrite a stored memory's fields (its context stays; its neighbours' follows
        a changed content)."""
        self._check_vector(memory.id, memory.embedding)
        row = memory_to_row(memory)
        sets = ", ".join(
            f"{MEMORY_COLUMNS[f]} = %s::vector" if f == "vector" else f"{MEMORY_COLUMNS[f]} = %s"
            for f in _REPLACE_FIELDS
        )
        values = [vector_text(row[f]) if f == "vector" else row[f] for f in _REPLACE_FIELDS]
        with self.db.write(f"changing memory {memory.id}") as cur:
            cur.execute(f"UPDATE lexmem.memories SET {sets} WHERE id = %s", [*values, memory.id])
            if cur.rowcount == 0:
                raise NotFoundError("memory", memory.id)
            if memory.session_id and str(memory.source) in SESSION_SOURCES:
                self._sync_context(cur, [memory.session_id])
        return memory

    def edit(self, memory_id: str, **fields: Any) -> Memory:
        unknown = set(fields) - _EDITABLE
        if unknown:
            raise InvalidInputError(f"cannot edit {sorted(unknown)[0]}")
        with self.db.writing():
            m = self.get(memory_id, with_embedding=True)
            return self._replace(m.replace(**fields, updated_at=utcnow()))

    def _update_one(self, memory_id: str, sets: str, params: Sequence[Any], doing: str) -> None:
        with self.db.write(doing) as cur:
            cur.execute(f"UPDATE lexmem.memories SET {sets} WHERE id = %s", [*params, memory_id])
            if cur.rowcount == 0:
                raise NotFoundError("memory", memory_id)

    def update_salience(self, memory_id: str, salience: float) -> None:
        if not 0.0 <= salience <= 1.0:
            raise InvalidInputError(f"salience must be between 0 and 1, not {salience}")
        self._update_one(
            memory_id,
            "current_salience = %s, updated_at = %s",
            (float(salience), utcnow()),
            f"setting the salience of {memory_id}",
        )

    def record_confidence(self, memory_id: str, confidence: float) -> None:
        if not 0.0 <= confidence <= 1.0:
            raise InvalidInputError(f"confidence must be between 0 and 1, not {confidence}")
        with self.db.write(f"recording the confidence of {memory_id}") as cur:
            cur.execute(
                "UPDATE lexmem.memories SET confidence = %s WHERE id = %s",
                (float(confidence), memory_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError("memory", memory_id)
            cur.execute(
                "INSERT INTO lexmem.memory_confidence_history (id, memory_id, confidence, "
                "recorded_at) VALUES (%s, %s, %s, %s)",
                (new_id(), memory_id, float(confidence), utcnow()),
            )

    def set_pinned(self, memory_id: str, pinned: bool) -> None:
        self._update_one(
            memory_id,
            "pinned = %s, updated_at = %s",
            (bool(pinned), utcnow()),
            f"pinning {memory_id}",
        )

    def archive(self, memory_id: str) -> None:
        self._update_one(
            memory_id,
            "status = %s, updated_at = %s",
            (str(MemoryStatus.ARCHIVED), utcnow()),
            f"archiving {memory_id}",
        )
        log.info("[MEM:STORE] Archived memory %s", memory_id)

    def restore(self, memory_id: str) -> None:
        self._update_one(
            memory_id,
            "status = 'active', updated_at = %s, superseded_by = NULL",
            (utcnow(),),
            f"restoring {memory_id}",
        )

    def supersede(self, memory_id: str, replacement_id: str) -> None:
        if memory_id == replacement_id:
            raise InvalidInputError("a memory cannot supersede itself")
        with self.db.writing():
            missing = {memory_id, replacement_id} - self.existing_ids([memory_id, replacement_id])
            if missing:
                raise NotFoundError("memory", sorted(missing)[0])
            if replacement_id in {m.id for m in self.supersede_chain(memory_id, forward=False)}:
                raise InvalidInputError(
                    f"{replacement_id} already precedes {memory_id}: that would make a cycle"
                )
            with self.db.tx(f"superseding {memory_id}") as cur:
                cur.execute(
                    "SELECT superseded_by FROM lexmem.memories WHERE id = %s FOR UPDATE",
                    (memory_id,),
                )
                row = cur.fetchone()
                current = row[0] if row else None
                if current not in (None, replacement_id):
                    raise InvalidInputError(
                        f"{memory_id} is already superseded by {current}; "
                        "supersede the newest version, or restore this one first"
                    )
                cur.execute(
                    "UPDATE lexmem.memories SET status = %s, superseded_by = %s, updated_at = %s "
                    "WHERE id = %s",
                    (str(MemoryStatus.SUPERSEDED), replacement_id, utcnow(), memory_id),
                )
                self._upsert_link(cur, MemoryLink(replacement_id, memory_id, "supersedes", 1.0))

    def reinforce(self, memory_id: str, boost: float = 0.1) -> Memory:
        with self.db.writing():
            m = self.get(memory_id)
            salience = min(1.0, m.salience + boost * (1.0 - m.salience) + 1e-9)
            now = utcnow()
            self._update_one(
                memory_id,
                "current_salience = %s, last_reinforced_at = %s, updated_at = %s",
                (salience, now, now),
                f"reinforcing {memory_id}",
            )
        return m.replace(salience=salience, last_reinforced_at=now, updated_at=now)

    def decay_all(self, factor: float) -> int:
        if not 0.0 < factor <= 1.0:
            raise InvalidInputError(f"decay factor must be in (0, 1], not {factor}")
        with self.db.write("decaying salience") as cur:
            cur.execute(
                "UPDATE lexmem.memories SET current_salience = current_salience * %s "
                "WHERE status = 'active' AND NOT pinned AND current_salience > %s",
                (float(factor), float(self.settings.salience_floor)),
            )
            n = cur.rowcount
        log.info("[MEM:STORE] Decayed salience for %d memories", n)
        return n

    def record_access(self, memory_id: str) -> None:
        if self.record_access_many([memory_id]) == 0:
            raise NotFoundError("memory", memory_id)

    def record_access_many(self, memory_ids: Sequence[str]) -> int:
        if not memory_ids:
            return 0
        with self.db.write("recording accesses") as cur:
            cur.execute(
                "UPDATE lexmem.memories SET access_count = access_count + 1, "
                "last_accessed_at = %s WHERE id = ANY(%s)",
                (utcnow(), list(memory_ids)),
            )
            return cur.rowcount

    def record_accesses(self, counts: Mapping[str, int]) -> int:
        wanted = {str(k): int(n) for k, n in counts.items() if int(n) > 0}
        if not wanted:
            return 0
        with self.db.write("recording searches' accesses") as cur:
            cur.execute(
                "UPDATE lexmem.memories m SET access_count = m.access_count + a.n, "
                "last_accessed_at = %s "
                "FROM (SELECT unnest(%s::text[]) AS id, unnest(%s::bigint[]) AS n) a "
                "WHERE m.id = a.id",
                (utcnow(), list(wanted), list(wanted.values())),
            )
            return cur.rowcount

    def delete(self, memory_id: str) -> None:
        if not self.delete_many([memory_id]):
            raise NotFoundError("memory", memory_id)

    def delete_many(self, memory_ids: Sequence[str], *, erase: bool = True) -> list[str]:
        wanted = list(dict.fromkeys(memory_ids))
        if not wanted:
            return []
        with self.db.writing():
            with self.db.tx("forgetting memories") as cur:
                cur.execute(
                    "DELETE FROM lexmem.memories WHERE id = ANY(%s) RETURNING id, session_id, "
                    "source",
                    (wanted,),
                )
                gone = cur.fetchall()
                # The cascades take links and confidence; the pointers of the memories a
                # forgotten one replaced go (their status stays), as the neighbours'
                # context that quoted it.
                ids = sorted(str(r[0]) for r in gone)
                cur.execute(
                    "UPDATE lexmem.memories SET superseded_by = NULL WHERE superseded_by = ANY(%s)",
                    (ids,),
                )
                self._sync_context(
                    cur, [str(r[1]) for r in gone if r[1] and r[2] in SESSION_SOURCES]
                )
            if ids and erase:
                self.erase()
        for mid in ids:
            log.info("[MEM:STORE] Deleted memory %s", mid)
        return ids

    def erase(self, tables: Sequence[str] = _ERASED) -> None:
        """Rewrite ``tables`` (qualified names; the memories' three by default) with
        ``VACUUM FULL`` and checkpoint, so no file of theirs keeps a deleted row's bytes
        (see this module's docstring for what stays). Under the write lock, outside any
        transaction: a caller inside one gets :class:`StoreError`."""

        def statistics(conn: psycopg.Connection[Any]) -> None:
            row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            found = row.fetchone()
            if found and found[0]:
                # The planner's statistics sample column values (a content among them);
                # ANALYZE replaced them, and the old rows go with a rewrite of the
                # catalog, which only a superuser may make. The old files are unlinked
                # at the next checkpoint, asked for at once.
                conn.execute("VACUUM FULL pg_catalog.pg_statistic")
                conn.execute("CHECKPOINT")

        vacuums = [f"VACUUM (FULL, ANALYZE) {table}" for table in tables]
        self.db.rewrite(vacuums, "erasing forgotten memories", after=statistics)

    def store_link(self, link: MemoryLink) -> MemoryLink:
        if link.from_id == link.to_id:
            raise InvalidInputError("a memory cannot link to itself")
        if not link.link_type.strip():
            raise InvalidInputError("a link needs a type")
        with self.db.write("storing a link") as cur:
            cur.execute(
                "SELECT id FROM lexmem.memories WHERE id = ANY(%s)", ([link.from_id, link.to_id],)
            )
            missing = {link.from_id, link.to_id} - {str(r[0]) for r in cur}
            if missing:
                raise NotFoundError("memory", sorted(missing)[0])
            return self._upsert_link(cur, link)

    def _upsert_link(self, cur: psycopg.Cursor[Any], link: MemoryLink) -> MemoryLink:
        cur.execute(
            "INSERT INTO lexmem.memory_links (id, from_memory_id, to_memory_id, link_type, "
            "strength, created_at) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT ON CONSTRAINT uq_memory_link DO UPDATE SET strength = EXCLUDED.strength "
            "RETURNING from_memory_id, to_memory_id, link_type, strength, id, created_at",
            (
                link.id, link.from_id, link.to_id, link.link_type, float(link.strength),
                link.created_at,
            ),
        )  # fmt: skip
        row = cur.fetchone()
        assert row is not None  # INSERT ... RETURNING always returns its row
        return self._link(row)

    def delete_link(self, from_id: str, to_id: str, link_type: str) -> int:
        with self.db.write("removing a link") as cur:
            cur.execute(
                "DELETE FROM lexmem.memory_links WHERE from_memory_id = %s AND to_memory_id = %s "
                "AND link_type = %s",
                (from_id, to_id, link_type),
            )
            return cur.rowcount

    def add_missing_confidence(self) -> int:
        with self.db.write("restoring first confidence points") as cur:
            cur.execute(
                "INSERT INTO lexmem.memory_confidence_history (id, memory_id, confidence, "
                "recorded_at) SELECT gen_random_uuid()::text, m.id, m.confidence, m.created_at "
                "FROM lexmem.memories m WHERE NOT EXISTS (SELECT 1 FROM "
                "lexmem.memory_confidence_history h WHERE h.memory_id = m.id)"
            )
            n = cur.rowcount
        if n:
            log.info("[MEM:STORE] Restored the first confidence point of %d memories", n)
        return n

    # -- the tables whole ------------------------------------------------------------

    def list_tables(self) -> list[str]:
        present = set(
            self._column(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'lexmem'",
                doing="listing the team database's tables",
            )
        )
        return [name for name, table in TABLES.items() if table in present]

    def arrow_table(self, name: str, columns: Sequence[str] | None = None) -> pa.Table:
        if name not in TABLES:
            raise InvalidInputError(f"no table {name!r} in the team database")
        with self.db.tx(f"reading the table {name}") as cur:
            return _read_arrow(cur, name, self.dim, columns)

    def import_rows(
        self,
        memories: pa.Table,
        links: pa.Table,
        confidence: pa.Table,
        progress: Callable[[int, int], None] | None = None,
        batch: int = 2000,
    ) -> tuple[int, int, int]:
        from lexmem.store.schema import confidence_schema, links_schema, memory_schema

        ids = [str(i) for i in memories.column("id").to_pylist()] if memories.num_rows else []
        if len(set(ids)) != len(ids):
            raise InvalidInputError("the import holds the same memory id twice")
        data = memories.cast(memory_schema(self.dim)) if memories.num_rows else None
        total = memories.num_rows
        with self.db.write("importing memories") as cur:
            clash: set[str] = set()
            for start in range(0, len(ids), 10_000):
                cur.execute(
                    "SELECT id FROM lexmem.memories WHERE id = ANY(%s)",
                    (ids[start : start + 10_000],),
                )
                clash.update(str(r[0]) for r in cur)
            if clash:
                raise InvalidInputError(
                    f"{len(clash)} memories in the import already exist here "
                    f"(e.g. {sorted(clash)[0]})"
                )
            rebuild = self._without_vector_index(cur, total)
            sessions: set[str] = set()
            if data is not None:
                for start in range(0, total, batch):
                    rows = data.slice(start, batch).to_pylist()
                    for r in rows:
                        self._check_vector(str(r["id"]), r["vector"])
                        if r["session_id"] and r["source"] in SESSION_SOURCES:
                            sessions.add(str(r["session_id"]))
                    self._copy_memories(cur, rows)
                    if progress:
                        progress(min(start + batch, total), total)
            if links.num_rows:
                _text_rows(
                    cur,
                    "lexmem.memory_links",
                    ("id", "from_memory_id", "to_memory_id", "link_type", "strength", "created_at"),
                    (
                        (r["id"], r["from_id"], r["to_id"], r["link_type"],
                         0.5 if r["strength"] is None else r["strength"],
                         r["created_at"] or utcnow())
                        for r in links.cast(links_schema()).to_pylist()
                    ),
                )  # fmt: skip
            if confidence.num_rows:
                _text_rows(
                    cur,
                    "lexmem.memory_confidence_history",
                    ("id", "memory_id", "confidence", "recorded_at"),
                    (
                        (r["id"], r["memory_id"],
                         1.0 if r["confidence"] is None else r["confidence"],
                         r["recorded_at"] or utcnow())
                        for r in confidence.cast(confidence_schema()).to_pylist()
                    ),
                )  # fmt: skip
            self._sync_context(cur, sorted(sessions))
            if rebuild:
                self._rebuild_vector_index(cur)
        self._analyze()
        return memories.num_rows, links.num_rows, confidence.num_rows

    def reembed(
        self,
        embed: Callable[[list[str]], Any],
        progress: Callable[[int, int], None] | None = None,
        batch: int = 256,
    ) -> int:
        done = 0
        with self.db.write("re-embedding the memories") as cur:
            # The new vectors wait in a table of this transaction's own; the memories keep
            # their old ones, for every reader, until the commit at the end.
            cur.execute(
                f"CREATE TEMP TABLE reembedded (id text PRIMARY KEY, embedding vector({self.dim}))"
                " ON COMMIT DROP"
            )
            cur.execute(f"SELECT id FROM lexmem.memories ORDER BY id {_C}")
            ids = [str(r[0]) for r in cur.fetchall()]
            total = len(ids)
            for start in range(0, total, batch):
                part = ids[start : start + batch]
                cur.execute("SELECT id, content FROM lexmem.memories WHERE id = ANY(%s)", (part,))
                rows = cur.fetchall()
                vectors = embed([str(r[1]) for r in rows])
                with cur.copy("COPY reembedded (id, embedding) FROM STDIN") as copy:
                    for r, v in zip(rows, vectors, strict=True):
                        self._check_vector(str(r[0]), list(v))
                        copy.write_row((r[0], vector_text(v)))
                done += len(rows)
                if progress:
                    progress(done, total)
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # see _rebuild_vector_index
            cur.execute("DROP INDEX lexmem.memories_embedding_idx")
            if self._stored_dim != self.dim:
                cur.execute("ALTER TABLE lexmem.memories ALTER COLUMN embedding DROP NOT NULL")
                cur.execute(
                    f"ALTER TABLE lexmem.memories ALTER COLUMN embedding TYPE vector({self.dim}) "
                    f"USING NULL::vector({self.dim})"
                )
            cur.execute(
                "UPDATE lexmem.memories m SET embedding = r.embedding FROM reembedded r "
                "WHERE m.id = r.id"
            )
            if self._stored_dim != self.dim:
                cur.execute("ALTER TABLE lexmem.memories ALTER COLUMN embedding SET NOT NULL")
            cur.execute(_BUILD_MEMORY)
            cur.execute(_VECTOR_INDEX)
            cur.execute(
                "INSERT INTO lexmem.meta (key, value) VALUES ('embedding_space', %s), "
                "('embedding_dim', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (self.space_id, str(self.dim)),
            )
        self._stored_space = self.space_id
        self._stored_dim = self.dim
        self._analyze()
        return done

    def _analyze(self) -> None:
        with self.db.write("analysing the memories' tables") as cur:
            for table in _ERASED:
                cur.execute(f"ANALYZE {table}")

    def optimize(self, *, build_vector_index: bool = True) -> None:
        """Fresh planner statistics for the memories' tables (``ANALYZE``); the HNSW index
        always exists and PostgreSQL's autovacuum reclaims dead rows, so there is nothing
        to build or prune."""
        self._analyze()

    def needs_vector_index(self) -> bool:
        return False

    def has_vector_index(self) -> bool:
        return True

    def versions_on_disk(self) -> int:
        return 1


# The protocol's names of the links' and confidence's columns, where the seed's differ.
_LINK_COLUMNS = {"from_id": "from_memory_id", "to_id": "to_memory_id"}


def _journal_schema(cur: psycopg.Cursor[Any], table: str) -> tuple[pa.Schema, dict[str, str]]:
    """A journal table's Arrow schema from its PostgreSQL columns (the local journal's
    types: text as string, times as UTC microseconds, jsonb as its text, vectors as
    float32 lists), and the SQL that reads each column."""
    import pyarrow as pa

    types = {
        "text": pa.string(),
        "timestamptz": pa.timestamp("us", tz="UTC"),
        "int8": pa.int64(),
        "int4": pa.int32(),
        "float8": pa.float64(),
        "bool": pa.bool_(),
        "jsonb": pa.string(),
        "vector": pa.list_(pa.float32()),
    }
    cur.execute(
        "SELECT column_name, udt_name FROM information_schema.columns "
        "WHERE table_schema = 'lexmem' AND table_name = %s ORDER BY ordinal_position",
        (table,),
    )
    fields, exprs = [], {}
    for column, udt in cur.fetchall():
        fields.append(pa.field(str(column), types.get(str(udt), pa.string())))
        quoted = f'"{column}"'
        exprs[str(column)] = (
            f"vector_send({quoted})"
            if udt == "vector"
            else f"{quoted}::text"
            if udt not in types or udt == "jsonb"
            else quoted
        )
    return pa.schema(fields), exprs


def _read_arrow(
    cur: psycopg.Cursor[Any], name: str, dim: int, columns: Sequence[str] | None
) -> pa.Table:
    """The table ``name`` (a protocol name) as Arrow in the local store's schema."""
    import numpy as np
    import pyarrow as pa

    from lexmem.store.schema import confidence_schema, links_schema, table_schema

    if name == "memories":
        schema = table_schema(dim)
        exprs = {f: _expr(f).split(" AS ")[0] for f in schema.names}
    elif name == "links":
        schema = links_schema()
        exprs = {f: _LINK_COLUMNS.get(f, f) for f in schema.names}
    elif name == "confidence":
        schema = confidence_schema()
        exprs = {f: f for f in schema.names}
    else:
        schema, exprs = _journal_schema(cur, TABLES[name])
    wanted = list(columns) if columns else list(schema.names)
    unknown = [c for c in wanted if c not in exprs]
    if unknown:
        raise InvalidInputError(f"the table {name} has no column {unknown[0]!r}")
    select = ", ".join(exprs[c] for c in wanted)
    cur.execute(f"SELECT {select} FROM lexmem.{TABLES[name]}")
    rows = cur.fetchall()
    values = list(zip(*rows, strict=True)) if rows else [()] * len(wanted)
    arrays = []
    fields = []
    for column, data in zip(wanted, values, strict=True):
        field = schema.field(column)
        fields.append(field)
        if exprs[column].startswith("vector_send("):
            vectors = [_vector_from(v) for v in data]
            if pa.types.is_fixed_size_list(field.type):
                size = field.type.list_size
                flat = np.asarray(
                    [x for v in vectors for x in (v or [0.0] * size)], dtype=np.float32
                )
                arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(flat), size))
            else:
                arrays.append(pa.array(vectors, type=field.type))
        elif column == "metadata":
            arrays.append(
                pa.array(
                    [
                        None if v is None else json.dumps(json.loads(v), sort_keys=True)
                        for v in data
                    ],
                    type=field.type,
                )
            )
        else:
            arrays.append(pa.array([_utc(v) for v in data], type=field.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
