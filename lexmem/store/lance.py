"""The memory store (seed 004's ``IMemoryStore``) on embedded LanceDB.

Tables, all in one LanceDB folder under the data folder:

- ``memories_vN``: one row per memory with its vector; a full-text (BM25) index on
  ``content`` and, once the table is large, an IVF-PQ vector index. ``N`` changes
  only when every vector is recomputed for a new embedding model.
- ``links``: typed edges between memories, unique per (from, to, type).
- ``confidence``: the confidence trajectory, one row per recorded value.

``meta.json`` beside the tables names the live memories table and its vector space,
and carries the layout's ``schema_version`` (:data:`STORE_SCHEMA_VERSION`): an older
layout is brought up to date when the store opens (:mod:`lexmem.store.migrations`), a newer
one is refused untouched.

Any process may read. Writes take an inter-process lock (``store.lock``) for the
length of one commit, so commits from several lexmem processes never race; each
commit is a new table version, and the store compacts and prunes old versions
every so often so a long-lived folder does not grow without bound.

Retention of old versions (:meth:`MemoryStore._compact`): a version survives clean-up
while it is younger than :data:`KEEP_VERSIONS_FOR` (readers mid-query keep a consistent
view), and the newest :data:`KEEP_VERSIONS` versions of each table survive however old
they are, so ``lexmem doctor --repair`` always has a few good versions to go back to when
the newest one is damaged.

Erasure wins over that retention (:meth:`MemoryStore.erase`): forgetting a memory (and
review's reject, an opt-out purge, retention expiry) rewrites every table that held its
text so no data file, deletion-vectored row, older version or full-text index keeps a
byte of it, and then removes every older version. Right after an erasure each table has
one version; repair can go back only to versions written since.

A reader in another process may hold a version that an erasure has just removed; the
store's reads reopen the table and try once more when a file they expected is gone.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lexmem.base import atomic_write
from lexmem.config import Paths, secure_umask
from lexmem.errors import (
    InvalidInputError,
    LexmemError,
    NotFoundError,
    StoreDamagedError,
    StoreError,
    StoreIOError,
    StoreLockedError,
    WriterElsewhereError,
    io_failure,
)
from lexmem.locks import FileLock, LockTimeout, held_here
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
from lexmem.store.flat import (
    ACCESS_COLUMNS,
    FLAT_MAX_ROWS,
    FlatVectors,
    admitted,
    arrow_rows,
    filter_columns,
)
from lexmem.store.lancedb_import import import_lancedb
from lexmem.store.protocol import DigestColumns, MemoryBackend, MemoryFilter, Neighbour, members
from lexmem.store.schema import (
    CONFIDENCE,
    ERASE_KEYS,
    LINKS,
    ROW_COLUMNS,
    SESSION_SOURCES,
    STORE_SCHEMA_VERSION,
    confidence_schema,
    links_schema,
    memory_from_row,
    memory_schema,
    memory_to_row,
    table_schema,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["SESSION_SOURCES", "MemoryFilter", "MemoryStore", "store_failure"]

log = logging.getLogger("lexmem.store")

OPTIMIZE_EVERY = 64  # commits between compactions
KEEP_VERSIONS_FOR = timedelta(minutes=10)  # readers mid-query keep a consistent view
KEEP_VERSIONS = 8  # the newest versions of each table that clean-up never removes
WRITER_WAIT_S = 3.0  # how long a commit waits for another process's commit to let the writer go
# LanceDB's caches for one open store. Its defaults (6 GB of index data, 1 GB of file
# metadata) never evict in practice, so a long-lived process (the tray, `lexmem serve`)
# grew by every index page and manifest it ever read. These bound them: the scalar and
# full-text indices of a 100,000-memory store fit in the index cache.
INDEX_CACHE_BYTES = 64 << 20
METADATA_CACHE_BYTES = 16 << 20
# How long the vector leg trusts its in-memory copy without asking the table's version
# (the connection's read_consistency_interval: LanceDB looks no more often).
FLAT_RECHECK_S = 1.0
# A filter that admits at least this share of the rows is applied to a query's result
# rather than inside it (:meth:`MemoryStore.filtered_rows`); the share is counted again
# after this many seconds.
POSTFILTER_SHARE = 0.5
SHARE_RECHECK_S = 30.0
# The column LanceDB names a row's id in, for queries asked with_row_id.
ROW_ID = "_rowid"
_ID_PREFIX = re.compile(r"^[0-9a-fA-F-]{4,36}$")
_T = TypeVar("_T")


def _in_sessions(sessions: Iterable[str]) -> str:
    return "session_id IN (" + ", ".join(q(x) for x in sorted(set(sessions))) + ")"


_CONTEXT_READ = ["id", "session_id", "created_at", "content", "source", "context"]
# What a digest ranks by (:meth:`MemoryStore.digest_columns`).
_DIGEST_READ = [
    "id", "salience", "pinned", "created_at", "last_accessed_at", "access_count",
    "last_reinforced_at", "project", "fingerprint", "source_document",
]  # fmt: skip


def _join_context(before: str | None, after: str | None) -> str | None:
    """A memory's context: the text of the memory before it, then of the one after it."""
    return "\n".join(t for t in (before, after) if t) or None


def _chain(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation memories among ``rows`` in session order (by capture time,
    then id). Only these form the chain, so a note filed under a session neither has
    a context nor is one (and writing it reads no session)."""
    return sorted(
        (r for r in rows if r["session_id"] and r["source"] in SESSION_SOURCES),
        key=lambda r: (r["session_id"], r["created_at"], r["id"]),
    )


def _neighbours(chain: list[dict[str, Any]], k: int) -> list[int]:
    """The positions next to ``k`` in ``chain`` that share its session."""
    sid = chain[k]["session_id"]
    return [j for j in (k - 1, k + 1) if 0 <= j < len(chain) and chain[j]["session_id"] == sid]


def _session_contexts(rows: Iterable[dict[str, Any]]) -> dict[str, str | None]:
    """Each row's context: the content of the conversation memory before it and of
    the one after it in its session (:func:`_chain`); None for any other memory and
    for one alone in its session."""
    rows = list(rows)
    out: dict[str, str | None] = {r["id"]: None for r in rows}
    chain = _chain(rows)
    for k, r in enumerate(chain):
        near = {j - k: chain[j]["content"] for j in _neighbours(chain, k)}
        out[r["id"]] = _join_context(near.get(-1), near.get(1))
    return out


# Scalar indices that make filters and id look-ups cheap at 100k rows (measured:
# a 10-id fetch 27 -> 11 ms, a filtered vector query 21 -> 16 ms).
_SCALAR_INDICES = (
    ("id", "btree"), ("status", "bitmap"), ("type", "bitmap"), ("source", "bitmap"),
    ("project", "btree"), ("session_id", "btree"),
)  # fmt: skip


def _index_memories(table: Any, *, only_missing: bool = False) -> None:
    """The full-text indices on content and context and the scalar indices, on a
    memories table."""
    import_lancedb()
    from lancedb.index import FTS, Bitmap, BTree

    existing = {tuple(i.columns) for i in table.list_indices()} if only_missing else set()
    for text in ("content", "context"):
        if (text,) not in existing:
            table.create_index(text, config=FTS(), replace=True)
    for column, kind in _SCALAR_INDICES:
        if (column,) not in existing:
            table.create_index(
                column, config=BTree() if kind == "btree" else Bitmap(), replace=True
            )


def _retention(table: Any) -> timedelta:
    """How old a version of ``table`` may be before clean-up removes it.

    :data:`KEEP_VERSIONS_FOR`, stretched so that the newest :data:`KEEP_VERSIONS`
    versions survive however old they are: a store left idle for an hour would otherwise
    keep only what the next compaction writes, and a damaged newest version would leave
    ``lexmem doctor --repair`` nothing to go back to. The stretch has a grace of a tenth
    of the window for the time compaction takes before it cleans up.
    """
    versions = table.list_versions()
    if not versions:
        return KEEP_VERSIONS_FOR
    kept = versions[-KEEP_VERSIONS] if len(versions) >= KEEP_VERSIONS else versions[0]
    stamp: datetime = kept["timestamp"]  # LanceDB reports local, naive times
    age = datetime.now(stamp.tzinfo) - stamp
    return max(KEEP_VERSIONS_FOR, age + KEEP_VERSIONS_FOR / 10)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what caused it, and what caused that (a few levels)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def gone_file(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is LanceDB finding a file of an older table
    version missing: an erasure in another process removed the version this process was
    reading."""
    return any(
        s in str(e).lower()
        for e in _causes(exc)
        for s in ("not found", "no such file", "does not exist", "object at location")
    )


def store_failure(exc: BaseException, folder: Path | str | None = None) -> StoreError | None:
    """The :class:`StoreError` that LanceDB's own failure ``exc`` is, None for anything
    else: :class:`StoreIOError` when the machine failed a read or write (a full or
    read-only disk), :class:`StoreDamagedError` when a table file cannot be read.

    LanceDB raises untyped errors (``RuntimeError``, ``OSError``, ``ValueError``) whose
    message starts "lance error"; this is the one place that reads their text."""
    if isinstance(exc, LexmemError) or not isinstance(exc, Exception):
        return None
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if "lance error" not in first.lower():
        return None
    where = str(folder) if folder is not None else None
    reason = io_failure(exc)
    if reason is not None:
        return StoreIOError(reason, path=where)
    named = re.search(r"([\w-]+)\.lance\b", first)  # the table's folder, when the text has it
    cause = first.split(", /", 1)[0]  # no Rust source location
    return StoreDamagedError(cause, path=where, table=named.group(1) if named else None)


_F = TypeVar("_F", bound=Callable[..., Any])


def _translated(method: _F) -> _F:
    """``method`` with LanceDB's failures raised as :func:`store_failure` says (the
    backend's exception kept as the cause)."""
    import functools
    import inspect

    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generating(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                yield from method(self, *args, **kwargs)
            except Exception as exc:
                failure = store_failure(exc, _folder(self))
                if failure is None:
                    raise
                raise failure from exc

        return generating  # type: ignore[return-value]

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            failure = store_failure(exc, _folder(self))
            if failure is None:
                raise
            raise failure from exc

    return call  # type: ignore[return-value]


def _folder(owner: Any) -> Path | None:
    paths = getattr(owner, "paths", None) or getattr(getattr(owner, "store", None), "paths", None)
    return getattr(paths, "store", None)


_C = TypeVar("_C", bound=type)


def store_boundary(protocol: type) -> Callable[[_C], _C]:
    """Class decorator: every method of ``protocol`` that the class defines raises
    LanceDB's failures as lexmem's typed errors (:func:`store_failure`). The operations
    call each other; an error already translated passes through unchanged."""

    def decorate(cls: _C) -> _C:
        for name, signature in members(protocol).items():
            method = vars(cls).get(name)
            if signature is not None and callable(method):
                setattr(cls, name, _translated(method))
        return cls

    return decorate


def _rewrite(table: Any, key: str) -> None:
    """Write every live row of ``table`` anew, in one commit.

    Constraint: a delete only marks rows in a deletion vector; the rows stay in their data
    file until compaction rewrites that file, and LanceDB's compaction rewrites a file only
    once a tenth of its rows are deleted (its options are not reachable without pylance).
    Updating every row leaves each old file with nothing live, so the commit drops them
    from the table, and clean-up can then delete them from disk. Cost: the table is read
    and written once (measured in docs/privacy.md)."""
    n = int(table.count_rows())
    if n == 0:
        return  # a fragment with no live row is dropped by the delete that emptied it
    data = table.search().limit(n).to_arrow()
    table.merge_insert(key).when_matched_update_all().execute(data)


def _prune_all(table: Any) -> None:
    """Compact ``table`` and delete every version but the newest, with every file only
    older versions used (erasure: no older version may keep a forgotten text)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "removes every version except the latest": meant
        table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


def q(value: str) -> str:
    """A SQL string literal (LanceDB filters are SQL)."""
    return "'" + str(value).replace("'", "''") + "'"


def _ts(value: datetime) -> str:
    return f"CAST({q(value.isoformat())} AS TIMESTAMP)"


def filter_where(flt: MemoryFilter) -> str | None:
    """The LanceDB ``where`` (SQL) that admits what ``flt`` admits; None for everything."""
    parts: list[str] = []
    if flt.project is not None:
        parts.append(f"project = {q(flt.project)}")
    if flt.exclude_projects:
        listed = ", ".join(q(p) for p in flt.exclude_projects)
        parts.append(f"(project IS NULL OR project NOT IN ({listed}))")
    if flt.type is not None:
        parts.append(f"type = {q(flt.type)}")
    if flt.status is not None:
        parts.append(f"status = {q(flt.status)}")
    if flt.source is not None:
        parts.append(f"source = {q(flt.source)}")
    if flt.pinned is not None:
        parts.append("pinned = true" if flt.pinned else "pinned = false")
    if flt.session_id is not None:
        parts.append(f"session_id = {q(flt.session_id)}")
    if flt.user_id is not None:
        parts.append(f"user_id = {q(flt.user_id)}")
    if flt.created_after is not None:
        parts.append(f"created_at >= {_ts(flt.created_after)}")
    if flt.created_before is not None:
        parts.append(f"created_at < {_ts(flt.created_before)}")
    if flt.source_document is not None:
        parts.append(f"source_document = {q(flt.source_document)}")
    return " AND ".join(parts) if parts else None


SORT_KEYS = {
    "salience": ("salience", "descending"),
    "created": ("created_at", "descending"),
    "accessed": ("last_accessed_at", "descending"),
    "updated": ("updated_at", "descending"),
    "title": ("title", "ascending"),
}


def _seen_lately(mark: tuple[int, float] | None, commits: int) -> bool:
    """Whether ``mark`` (this process's commit count, when) was taken with no commit of
    this process since, within :data:`FLAT_RECHECK_S`."""
    if mark is None:
        return False
    seen_commits, seen_at = mark
    return seen_commits == commits and time.monotonic() - seen_at < FLAT_RECHECK_S


@store_boundary(MemoryBackend)
class MemoryStore:
    """Seed 004's ``IMemoryStore`` and the rest of a memory's life, on LanceDB: the
    LanceDB backend of :class:`~lexmem.store.protocol.MemoryBackend`.

    Methods are synchronous and thread-safe; callers that must not block (the UI)
    run them on an executor.
    """

    def __init__(
        self, paths: Paths, *, dim: int, space_id: str, settings: StoreSettings | None = None
    ) -> None:
        self.paths = paths
        self.dim = dim
        self.space_id = space_id
        self.settings = settings or StoreSettings()
        self._lock = FileLock(paths.write_lock, timeout=60.0)
        # The single writer's lock: a commit is made only by the process holding it (the
        # service), or by one that takes it for the commit when no service runs.
        self._writer = FileLock(paths.service_lock, timeout=0)
        self._opening = False
        self._thread_lock = threading.RLock()
        self._db: Any = None
        self._session: Any = None  # lancedb.Session: the bounded caches
        self._tables: dict[str, Any] = {}
        # This process's commit count each cached handle has seen: a handle another
        # thread opened just before a commit (after a refresh) would trust its older
        # version for the connection's consistency interval and hide the commit from the
        # writer reading back what it wrote.
        self._tables_seen: dict[str, int] = {}
        # Reader threads open tables while a writer iterates them: guard the dict itself.
        self._tables_lock = threading.Lock()
        self._project_names: tuple[int, tuple[str, ...]] | None = None
        self._flat: FlatVectors | None = None  # the vector leg's in-memory copy
        # (this process's commit count, when) the copy was last found current.
        self._flat_fresh: tuple[int, float] | None = None
        # (this process's commit count, when) the table was last found too large for it.
        self._flat_too_big: tuple[int, float] | None = None
        self._commits = 0  # commits made by this process
        self._flat_kept = False  # the commit under way left the copy good (_keeping_flat)
        self._meta: dict[str, Any] = {}
        self._index_cache: dict[tuple[str, Any], bool] = {}
        # where -> (the share of rows it admits, when counted): filtered_rows.
        self._shares: dict[str, tuple[float, float]] = {}
        self.on_commit: list[Callable[[], None]] = []

    # -- opening ----------------------------------------------------------

    @property
    def meta_path(self) -> Path:
        return self.paths.store / "meta.json"

    def open(self) -> MemoryStore:
        self.paths.ensure()
        self._opening = True  # creating or migrating the layout: any process opening it
        try:
            return self._open()
        finally:
            self._opening = False

    def _open(self) -> MemoryStore:
        import_lancedb()
        import lancedb

        with secure_umask():
            # Long-lived readers (an MCP server, the app) see other processes' commits
            # within a second; without an interval LanceDB never looks again.
            self._session = lancedb.Session(
                index_cache_size_bytes=INDEX_CACHE_BYTES,
                metadata_cache_size_bytes=METADATA_CACHE_BYTES,
            )
            self._db = lancedb.connect(
                str(self.paths.store),
                read_consistency_interval=timedelta(seconds=1),
                session=self._session,
            )
        self._meta = self._read_meta()
        if not self._meta:
            with self._writing():
                self._meta = self._read_meta()  # another process may have won the race
                if not self._meta:
                    self._create_tables("memories_v1", stored_space=self.space_id)
        from lexmem.store.migrations import migrate_data_folder

        # Before anything else touches the tables: a layout from a newer lexmem is
        # refused as it is, an older one brought up to date (all or nothing).
        migrate_data_folder(self)
        self._drop_orphans()
        return self

    def _scan_all(self, where: str, columns: list[str]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = (
            self.table().search().where(where).select(columns).limit(None).to_list()
        )
        return rows

    def _add_context_to(self, batch: list[dict[str, Any]], stored: list[dict[str, Any]]) -> None:
        """Give the rows about to be added their context, and the stored memories
        next to them their new one (the one before gains a following memory; one
        captured late, said earlier, changes both its neighbours). ``stored`` is the
        sessions' order without their text (id, session_id, created_at, source); only
        the text of the few stored memories around the batch's is read. Measured cost:
        a single ``store`` into a 600-memory session ~5-8 ms more (a small read and an
        update of its predecessor); LoCoMo's batched ingest of 2,760 turns, well under
        a second."""
        import pyarrow as pa

        mine = {r["id"] for r in batch}
        for r in batch:
            r["context"] = None
        chain = _chain([*stored, *batch])
        touched = set()  # positions whose context is (re)computed
        for k, r in enumerate(chain):
            if r["id"] in mine:
                touched.add(k)
                touched.update(_neighbours(chain, k))
        needed = {j for k in touched for j in _neighbours(chain, k)}
        text = {r["id"]: r["content"] for r in batch}
        wanted = sorted(chain[j]["id"] for j in needed if chain[j]["id"] not in mine)
        if wanted:
            cond = "id IN (" + ", ".join(q(i) for i in wanted) + ")"
            text.update((r["id"], r["content"]) for r in self._scan_all(cond, ["id", "content"]))
        changed = []
        for k in sorted(touched):
            near = {j - k: text[chain[j]["id"]] for j in _neighbours(chain, k)}
            context = _join_context(near.get(-1), near.get(1))
            if chain[k]["id"] in mine:
                chain[k]["context"] = context  # the batch's own dict
            else:
                changed.append({"id": chain[k]["id"], "context": context})
        if changed:
            data = pa.Table.from_pylist(
                changed, schema=pa.schema([("id", pa.string()), ("context", pa.string())])
            )
            self.table().merge_insert("id").when_matched_update_all().execute(data)

    def _sync_context(self, sessions: Iterable[str] | None) -> None:
        """Bring ``context`` up to date in these sessions (all of them when None),
        rewriting only the rows whose context changed (an edit, a deletion, an
        import). Runs under the write lock."""
        import pyarrow as pa

        if sessions is None:
            stored = self.table().search().select(_CONTEXT_READ).limit(None).to_list()
        else:
            wanted = sorted(set(sessions))
            stored = []
            for start in range(0, len(wanted), 500):
                part = ", ".join(q(x) for x in wanted[start : start + 500])
                stored += (
                    self.table()
                    .search()
                    .where(f"session_id IN ({part})")
                    .select(_CONTEXT_READ)
                    .limit(None)
                    .to_list()
                )
        context = _session_contexts(stored)
        changed = [
            {"id": r["id"], "context": context[r["id"]]}
            for r in stored
            if context[r["id"]] != r.get("context")
        ]
        if changed:
            data = pa.Table.from_pylist(
                changed, schema=pa.schema([("id", pa.string()), ("context", pa.string())])
            )
            self.table().merge_insert("id").when_matched_update_all().execute(data)

    def _drop_orphans(self) -> None:
        """Drop a half-built memories table left by a re-embed that died part-way."""
        live = self._meta.get("memories_table")
        orphans = [
            n for n in self._list_tables() if re.fullmatch(r"memories_v\d+", n) and n != live
        ]
        if not orphans:
            return
        probe = FileLock(self.paths.write_lock, timeout=0)
        try:
            probe.acquire()  # a running re-embed holds the lock: leave its table alone
        except LockTimeout:
            return
        try:
            for name in orphans:
                self._db.drop_table(name)
        finally:
            probe.release()

    def _read_meta(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.meta_path.read_text(encoding="utf-8"))
            return data
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read {self.meta_path} ({exc})") from exc

    def _write_meta(self, meta: dict[str, Any]) -> None:
        atomic_write(self.meta_path, json.dumps(meta, indent=2, sort_keys=True))
        self._meta = meta
        self._tables.pop("memories", None)

    def _create_tables(self, memories_name: str, *, stored_space: str) -> None:
        with secure_umask():
            names = set(self._list_tables())
            for name in names & {memories_name, LINKS, CONFIDENCE}:
                try:
                    self._db.open_table(name)
                except ValueError:  # listed but never committed: a create a full disk cut short
                    self._db.drop_table(name)
                    names.discard(name)
            if memories_name not in names:
                table = self._db.create_table(memories_name, schema=table_schema(self.dim))
                _index_memories(table)
            if LINKS not in names:
                self._db.create_table(LINKS, schema=links_schema())
            if CONFIDENCE not in names:
                self._db.create_table(CONFIDENCE, schema=confidence_schema())
        self._write_meta(
            {
                "schema_version": STORE_SCHEMA_VERSION,
                "memories_table": memories_name,
                "embedding_space": stored_space,
                "dim": self.dim,
                "optimized_version": 0,
            }
        )

    def writing(self) -> AbstractContextManager[None]:
        """The write lock, for other tables kept in this store's folder (the journal)."""
        return self._writing()

    # -- the layout (for lexmem.store.migrations, under the write lock) -----------------

    def read_meta(self) -> dict[str, Any]:
        """``meta.json`` as it is on disk now (empty before the store is created)."""
        return self._read_meta()

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace ``meta.json`` atomically."""
        self._write_meta(meta)

    def rebuild_context(self) -> None:
        """Recompute every memory's ``context`` from its session, rewriting only the rows
        whose context changes, and build any index the memories table lacks."""
        self.refresh()
        self._sync_context(None)
        _index_memories(self.table(), only_missing=True)

    @property
    def db(self) -> Any:
        return self._db

    def list_tables(self) -> list[str]:
        return self._list_tables()

    def _list_tables(self) -> list[str]:
        result = self._db.list_tables()
        names = getattr(result, "tables", result)
        return list(names)

    @property
    def stored_space(self) -> str:
        """The vector space the stored vectors belong to."""
        return str(self._meta.get("embedding_space", ""))

    @property
    def needs_reembed(self) -> bool:
        return self.stored_space != self.space_id

    def table(self, name: str = "memories") -> Any:
        t = self._tables.get(name)
        if t is None:
            with self._tables_lock:
                t = self._tables.get(name)
                if t is None:
                    seen = self._commits  # before opening: a commit meanwhile is caught up
                    real = self._meta["memories_table"] if name == "memories" else name
                    t = self._db.open_table(real)
                    self._tables[name] = t
                    self._tables_seen[name] = seen
        elif self._tables_seen.get(name, -1) < self._commits:
            commits = self._commits
            t.checkout_latest()
            self._tables_seen[name] = commits
        return t

    def refresh(self) -> None:
        """See commits made by other processes since this one opened the store."""
        with self._tables_lock:
            self._meta = self._read_meta()
            self._tables.clear()
        self._index_cache.clear()
        self._flat = self._flat_fresh = self._flat_too_big = None

    # -- writing ----------------------------------------------------------

    @contextmanager
    def _as_writer(self) -> Iterator[None]:
        """Hold the single writer's lock for a commit: this process runs the service, or
        it takes the lock for the commit when no service runs anywhere. A write while
        another process is the writer raises :class:`WriterElsewhereError`."""
        deadline = time.monotonic() + WRITER_WAIT_S  # another commit's moment, not a service
        while not (self._opening or self._writer.held or held_here(self.paths.service_lock)):
            try:
                self._writer.acquire()
            except OSError as exc:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise WriterElsewhereError(
                    "the lexmem service in another process is the only writer of this store; "
                    "this write must go through it (an inbox event)"
                ) from exc
            try:
                yield
            finally:
                self._writer.release()
            return
        yield

    def _refuse_a_recreated_home(self, before: tuple[int, int] | None, started: float) -> None:
        """A data folder deleted while a commit was under way: the commit wrote its table
        files back into a folder of its own making. Take that folder away again when it
        holds nothing but those files (anything else there is someone's, and stays), and
        stop: the store is gone."""
        if before is None or _identity(self.paths.home) == before:
            return
        self._flat = self._flat_fresh = None
        home = self.paths.home
        if home.is_dir() and _only_fresh_store_files(home, self.paths.store, started):
            import shutil

            shutil.rmtree(home, ignore_errors=True)
            log.warning("[MEM:STORE] a commit wrote into a deleted data folder: removed %s", home)
        raise StoreIOError(f"the store is gone: {self.paths.store}")

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with self._thread_lock, self._as_writer():
            try:
                self._lock.acquire()
            except LockTimeout as exc:
                raise StoreLockedError(str(self.paths.write_lock), self._lock.timeout or 0) from exc
            except OSError as exc:  # a read-only or full data folder
                raise StoreError(
                    f"cannot write to the store ({exc.strerror or exc}): {self.paths.store}"
                ) from exc
            try:
                if not self._opening and not self.paths.store.is_dir():
                    # The data folder was deleted (or moved) under this process: a commit
                    # would only write fragments of a table back into its old place.
                    raise StoreIOError(f"the store is gone: {self.paths.store}")
                if self._meta:
                    fresh = self._read_meta()
                    if fresh.get("memories_table") != self._meta.get("memories_table"):
                        self._meta = fresh
                        with self._tables_lock:
                            self._tables.clear()
                    with self._tables_lock:
                        cached = list(self._tables.values())
                    for t in cached:
                        t.checkout_latest()
                # Opening may make the folder itself; afterwards it is there to compare.
                home_before = None if self._opening else _identity(self.paths.home)
                started = time.time()
                try:
                    with secure_umask():
                        yield
                except Exception as exc:
                    self._commits += 1  # it may have committed before it failed
                    self._flat = self._flat_fresh = None
                    self._refuse_a_recreated_home(home_before, started)
                    failure = store_failure(exc, self.paths.store)
                    if failure is None:
                        raise
                    raise failure from exc
                self._commits += 1
                self._refuse_a_recreated_home(home_before, started)
                if not self._flat_kept:
                    # A commit that may have changed what the copy holds: a forgotten
                    # memory's text does not stay in memory until the next search.
                    self._flat = self._flat_fresh = None
                for callback in self.on_commit:
                    callback()
            finally:
                self._flat_kept = False
                self._lock.release()

    def _check_vector(self, m: Memory) -> None:
        if m.embedding is None:
            raise InvalidInputError(f"memory {m.id} has no embedding")
        if len(m.embedding) != self.dim:
            raise InvalidInputError(
                f"memory {m.id} has a {len(m.embedding)}-number embedding; the store holds {self.dim}"
            )

    def store(self, memory: Memory) -> Memory:
        """Persist a new memory with all its fields (seed 004 ``StoreAsync``)."""
        return self.store_many([memory])[0]

    def store_many(self, memories: Sequence[Memory]) -> list[Memory]:
        """Persist memories in one commit; their confidence starts the trajectory."""
        if not memories:
            return []
        import pyarrow as pa

        for m in memories:
            self._check_vector(m)
        rows = [memory_to_row(m) for m in memories]
        # Only a conversation's memories have a context; the others skip the read.
        sessions = {
            r["session_id"] for r in rows if r["session_id"] and r["source"] in SESSION_SOURCES
        }
        now = utcnow()
        history = [
            {
                "id": new_id(),
                "memory_id": m.id,
                "confidence": float(m.confidence),
                "recorded_at": now,
            }
            for m in memories
        ]
        with self._writing():
            ids = [m.id for m in memories]
            if len(set(ids)) != len(ids):
                raise InvalidInputError("two memories in one batch share an id")
            stored: list[dict[str, Any]] = []
            if sessions and len(ids) <= 500:
                # One read answers both "is an id taken" and the sessions' order.
                where = f"id IN ({', '.join(q(i) for i in ids)}) OR " + _in_sessions(sessions)
                stored = self._scan_all(where, ["id", "session_id", "created_at", "source"])
                existing = {r["id"] for r in stored} & set(ids)
            else:
                existing = self._existing_ids(ids)
            if existing:
                raise InvalidInputError(f"a memory with id {sorted(existing)[0]} already exists")
            if sessions:
                if not stored:
                    stored = self._scan_all(
                        _in_sessions(sessions), ["id", "session_id", "created_at", "source"]
                    )
                self._add_context_to(rows, stored)
            self.table().add(pa.Table.from_pylist(rows, schema=table_schema(self.dim)))
            self.table(CONFIDENCE).add(pa.Table.from_pylist(history, schema=confidence_schema()))
            self._maybe_optimize()
        for m in memories:
            log.info("[MEM:STORE] Stored %s memory %s for user %s", m.type, m.id, m.user_id)
        return list(memories)

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are stored (one query per 500 ids)."""
        return self._existing_ids(ids)

    def add_missing_confidence(self) -> int:
        """Give each memory with no confidence point its first one back (its confidence
        when it was created) and return how many. :meth:`store_many` commits the
        memories, then their first points: a process killed between the two commits
        leaves memories without history, which the service mends when it starts."""
        import pyarrow as pa
        import pyarrow.compute as pc

        with self._writing():
            memories = (
                self.table().search().select(["id", "confidence", "created_at"]).limit(None)
            ).to_arrow()
            known = self.table(CONFIDENCE).search().select(["memory_id"]).limit(None).to_arrow()
            missing = memories.filter(
                pc.invert(pc.is_in(memories.column("id"), value_set=known.column("memory_id")))
            )
            if missing.num_rows == 0:
                return 0
            points = [
                {"id": new_id(), "memory_id": r["id"], "confidence": float(r["confidence"] or 0.0),
                 "recorded_at": r["created_at"]}
                for r in missing.to_pylist()
            ]  # fmt: skip
            self.table(CONFIDENCE).add(pa.Table.from_pylist(points, schema=confidence_schema()))
        log.info("[MEM:STORE] Restored the first confidence point of %d memories", len(points))
        return len(points)

    def _existing_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            where = "id IN (" + ", ".join(q(i) for i in part) + ")"
            rows = self._scan(where, ["id"])
            found.update(r["id"] for r in rows)
        return found

    def replace(self, memory: Memory) -> Memory:
        """Overwrite an existing memory's row (edits, re-embedding)."""
        import pyarrow as pa

        self._check_vector(memory)
        data = pa.Table.from_pylist([memory_to_row(memory)], schema=memory_schema(self.dim))
        with self._writing():
            if not self._existing_ids([memory.id]):
                raise NotFoundError("memory", memory.id)
            # The row's own context stays (the merge names only the memory's fields); a
            # changed content is the next memory's context.
            self.table().merge_insert("id").when_matched_update_all().execute(data)
            if memory.session_id and str(memory.source) in SESSION_SOURCES:
                self._sync_context([memory.session_id])
            self._maybe_optimize()
        return memory

    def _update(
        self,
        where: str,
        values: dict[str, Any] | None = None,
        values_sql: dict[str, str] | None = None,
    ) -> int:
        result = self.table().update(where=where, values=values, values_sql=values_sql)
        return int(getattr(result, "rows_updated", 0) or 0)

    def _update_one(self, memory_id: str, **values: Any) -> None:
        with self._writing():
            if self._update(f"id = {q(memory_id)}", values=values) == 0:
                raise NotFoundError("memory", memory_id)
            self._maybe_optimize()

    def update_salience(self, memory_id: str, salience: float) -> None:
        if not 0.0 <= salience <= 1.0:
            raise InvalidInputError(f"salience must be between 0 and 1, not {salience}")
        self._update_one(memory_id, salience=float(salience), updated_at=utcnow())

    def record_access(self, memory_id: str) -> None:
        """Increment the access count and set last access to now (seed 004)."""
        if self.record_access_many([memory_id]) == 0:
            raise NotFoundError("memory", memory_id)

    def record_access_many(self, memory_ids: Sequence[str]) -> int:
        if not memory_ids:
            return 0
        where = "id IN (" + ", ".join(q(i) for i in memory_ids) + ")"
        with self._writing(), self._keeping_flat(memory_ids):
            n = self._update(
                where,
                values_sql={"access_count": "access_count + 1", "last_accessed_at": _ts(utcnow())},
            )
            self._maybe_optimize()
        return n

    def record_accesses(self, counts: Mapping[str, int]) -> int:
        """Add searches' access records, merged per memory (``id -> times``); last access
        is now. One update per distinct count (LanceDB's SQL has no CASE), usually one.
        Unknown ids are skipped."""
        by_count: dict[int, list[str]] = {}
        for memory_id, n in counts.items():
            if int(n) > 0:
                by_count.setdefault(int(n), []).append(memory_id)
        if not by_count:
            return 0
        updated = 0
        with self._writing(), self._keeping_flat([i for ids in by_count.values() for i in ids]):
            now = _ts(utcnow())
            for n, ids in sorted(by_count.items()):
                updated += self._update(
                    "id IN (" + ", ".join(q(i) for i in ids) + ")",
                    values_sql={"access_count": f"access_count + {n}", "last_accessed_at": now},
                )
            self._maybe_optimize()
        return updated

    def reinforce(self, memory_id: str, boost: float = 0.1) -> Memory:
        """Raise salience toward 1 and stamp last_reinforced_at (a repeat, a confirmation)."""
        m = self.get(memory_id)
        salience = min(1.0, m.salience + boost * (1.0 - m.salience) + 1e-9)
        now = utcnow()
        self._update_one(memory_id, salience=salience, last_reinforced_at=now, updated_at=now)
        return m.replace(salience=salience, last_reinforced_at=now, updated_at=now)

    def set_pinned(self, memory_id: str, pinned: bool) -> None:
        self._update_one(memory_id, pinned=pinned, updated_at=utcnow())

    def archive(self, memory_id: str) -> None:
        """Set status to archived: the memory leaves active results (seed 004)."""
        self._update_one(memory_id, status=str(MemoryStatus.ARCHIVED), updated_at=utcnow())
        log.info("[MEM:STORE] Archived memory %s", memory_id)

    def restore(self, memory_id: str) -> None:
        """Make an archived or superseded memory active again."""
        with self._writing():
            n = self._update(
                f"id = {q(memory_id)}",
                values_sql={
                    "status": "'active'",
                    "updated_at": _ts(utcnow()),
                    "superseded_by": "NULL",
                },
            )
            if n == 0:
                raise NotFoundError("memory", memory_id)

    def supersede(self, memory_id: str, replacement_id: str) -> None:
        """Mark ``memory_id`` superseded by ``replacement_id`` and link them (seed 004)."""
        if memory_id == replacement_id:
            raise InvalidInputError("a memory cannot supersede itself")
        if replacement_id in {m.id for m in self.supersede_chain(memory_id, forward=False)}:
            raise InvalidInputError(
                f"{replacement_id} already precedes {memory_id}: that would make a cycle"
            )
        with self._writing():
            missing = {memory_id, replacement_id} - self._existing_ids([memory_id, replacement_id])
            if missing:
                raise NotFoundError("memory", sorted(missing)[0])
            current = self._scan(f"id = {q(memory_id)}", ["superseded_by"], limit=1)[0]
            if current["superseded_by"] not in (None, replacement_id):
                raise InvalidInputError(
                    f"{memory_id} is already superseded by {current['superseded_by']}; "
                    "supersede the newest version, or restore this one first"
                )
            now = utcnow()
            self._update(
                f"id = {q(memory_id)}",
                values={
                    "status": str(MemoryStatus.SUPERSEDED),
                    "superseded_by": replacement_id,
                    "updated_at": now,
                },
            )
            self._add_link(MemoryLink(replacement_id, memory_id, "supersedes", 1.0))
            self._maybe_optimize()

    def supersede_chain(self, memory_id: str, *, forward: bool = True) -> list[Memory]:
        """Follow the chain: forward to newer versions, or backward to older ones."""
        out: list[Memory] = []
        seen = {memory_id}
        current = memory_id
        while True:
            if forward:
                nxt = self.get(current).superseded_by
            else:
                rows = self._scan(f"superseded_by = {q(current)}", ["id"])
                nxt = rows[0]["id"] if rows else None
            if nxt is None or nxt in seen:
                return out
            seen.add(nxt)
            try:
                out.append(self.get(nxt))
            except NotFoundError:
                return out
            current = nxt

    def edit(self, memory_id: str, **fields: Any) -> Memory:
        """Change fields of a memory; callers re-embed when the content changes."""
        allowed = {
            "content",
            "title",
            "type",
            "project",
            "embedding",
            "salience",
            "importance",
            "metadata",
            "fingerprint",
            "word_count",
            "learning_context",
        }
        unknown = set(fields) - allowed
        if unknown:
            raise InvalidInputError(f"cannot edit {sorted(unknown)[0]}")
        m = self.get(memory_id, with_embedding=True)
        updated = m.replace(**fields, updated_at=utcnow())
        return self.replace(updated)

    def delete(self, memory_id: str) -> None:
        """Hard delete: the row, its links and its confidence history (the right to forget),
        erased from disk (:meth:`erase`)."""
        if not self.delete_many([memory_id]):
            raise NotFoundError("memory", memory_id)

    def delete_many(self, memory_ids: Sequence[str], *, erase: bool = True) -> list[str]:
        """Hard delete these memories (unknown ids are skipped) and, unless ``erase`` is
        False (a caller that erases several things at once does it itself), erase them from
        disk. Returns the ids deleted."""
        with self._writing():
            found = self._existing_ids(list(dict.fromkeys(memory_ids)))
            if not found:
                return []
            ids = sorted(found)
            rows: list[dict[str, Any]] = []
            for start in range(0, len(ids), 500):
                part = "id IN (" + ", ".join(q(i) for i in ids[start : start + 500]) + ")"
                rows += self._scan(part, ["session_id", "source"])
                self.table().delete(part)
                self.table(CONFIDENCE).delete(part.replace("id IN", "memory_id IN", 1))
                links = part.replace("id IN", "from_id IN", 1)
                self.table(LINKS).delete(f"{links} OR {part.replace('id IN', 'to_id IN', 1)}")
                # Older versions keep their status; the pointer to a forgotten memory goes.
                self._update(
                    part.replace("id IN", "superseded_by IN", 1),
                    values_sql={"superseded_by": "NULL"},
                )
            sessions = {
                r["session_id"] for r in rows if r["session_id"] and r["source"] in SESSION_SOURCES
            }
            if sessions:
                # The next memory's context held this one's text: forgetting takes it too.
                self._sync_context(sessions)
            if erase:
                self.erase()
            else:
                self._maybe_optimize()
        for mid in ids:
            log.info("[MEM:STORE] Deleted memory %s", mid)
        return ids

    def erase(self, others: dict[str, str] | None = None) -> None:
        """Leave no byte of deleted or overwritten text anywhere on disk: rewrite the
        memories, links and confidence tables (and ``others``, table name to its unique
        key: the journal's), rebuild the memories' indices from the live rows, and delete
        every older version and every file only those used.

        Erasure wins over :data:`KEEP_VERSIONS`: afterwards each table has one version
        (a backup taken before still holds what was erased; the docs say so)."""
        self.erase_tables({**ERASE_KEYS, **(others or {})})

    def erase_tables(self, tables: dict[str, str]) -> None:
        """:meth:`erase` for these tables only (name to unique key)."""
        with self._writing():
            for name, key in tables.items():
                table = self.table(name)
                _rewrite(table, key)
                _prune_all(table)
                if name == "memories":
                    # Full-text index files keep the tokens of deleted rows; scalar ones
                    # their values (a project's path): built again from the live rows.
                    self._index_cache.clear()
                    _index_memories(table)
                    _prune_all(table)
            if "memories" in tables:
                self._write_meta(dict(self._meta, optimized_version=self.table().version))

    def decay_all(self, factor: float) -> int:
        """Multiply active salience by ``factor`` (seed 004), skipping pinned and floor rows."""
        if not 0.0 < factor <= 1.0:
            raise InvalidInputError(f"decay factor must be in (0, 1], not {factor}")
        floor = self.settings.salience_floor
        with self._writing():
            n = self._update(
                f"status = 'active' AND pinned = false AND salience > {floor!r}",
                values_sql={"salience": f"salience * {float(factor)!r}"},
            )
            self._maybe_optimize()
        log.info("[MEM:STORE] Decayed salience for %d memories", n)
        return n

    # -- links and confidence ---------------------------------------------

    def store_link(self, link: MemoryLink) -> MemoryLink:
        """Store a link; an existing (from, to, type) link is updated, never duplicated."""
        if link.from_id == link.to_id:
            raise InvalidInputError("a memory cannot link to itself")
        if not link.link_type.strip():
            raise InvalidInputError("a link needs a type")
        with self._writing():
            missing = {link.from_id, link.to_id} - self._existing_ids([link.from_id, link.to_id])
            if missing:
                raise NotFoundError("memory", sorted(missing)[0])
            stored = self._add_link(link)
            self._maybe_optimize()
        return stored

    def delete_link(self, from_id: str, to_id: str, link_type: str) -> int:
        """Remove one (from, to, type) link; returns how many rows went (0 or 1)."""
        where = f"from_id = {q(from_id)} AND to_id = {q(to_id)} AND link_type = {q(link_type)}"
        with self._writing():
            t = self.table(LINKS)
            n = int(t.count_rows(where))
            if n:
                t.delete(where)
        return n

    def _add_link(self, link: MemoryLink) -> MemoryLink:
        import pyarrow as pa

        t = self.table(LINKS)
        where = f"from_id = {q(link.from_id)} AND to_id = {q(link.to_id)} AND link_type = {q(link.link_type)}"
        existing = t.search().where(where).select(["id", "created_at"]).limit(1).to_list()
        if existing:
            t.update(where=where, values={"strength": float(link.strength)})
            return MemoryLink(
                link.from_id,
                link.to_id,
                link.link_type,
                link.strength,
                existing[0]["id"],
                existing[0]["created_at"],
            )
        row = {
            "id": link.id, "from_id": link.from_id, "to_id": link.to_id, "link_type": link.link_type,
            "strength": float(link.strength), "created_at": link.created_at,
        }  # fmt: skip
        t.add(pa.Table.from_pylist([row], schema=links_schema()))
        return link

    def get_links_from(self, memory_id: str) -> list[MemoryLink]:
        return self._links(f"from_id = {q(memory_id)}")

    def get_links_to(self, memory_id: str) -> list[MemoryLink]:
        return self._links(f"to_id = {q(memory_id)}")

    def _links(self, where: str) -> list[MemoryLink]:
        rows = self.table(LINKS).search().where(where).limit(100_000).to_list()
        rows.sort(key=lambda r: r["created_at"])
        return [
            MemoryLink(
                r["from_id"], r["to_id"], r["link_type"], r["strength"], r["id"], r["created_at"]
            )
            for r in rows
        ]

    def record_confidence(self, memory_id: str, confidence: float) -> None:
        """Append to the confidence trajectory and make it the memory's current confidence."""
        import pyarrow as pa

        if not 0.0 <= confidence <= 1.0:
            raise InvalidInputError(f"confidence must be between 0 and 1, not {confidence}")
        now = utcnow()
        with self._writing():
            if self._update(f"id = {q(memory_id)}", values={"confidence": float(confidence)}) == 0:
                raise NotFoundError("memory", memory_id)
            row = {
                "id": new_id(),
                "memory_id": memory_id,
                "confidence": float(confidence),
                "recorded_at": now,
            }
            self.table(CONFIDENCE).add(pa.Table.from_pylist([row], schema=confidence_schema()))
            self._maybe_optimize()

    def confidence_history(self, memory_id: str) -> list[ConfidencePoint]:
        rows = (
            self.table(CONFIDENCE)
            .search()
            .where(f"memory_id = {q(memory_id)}")
            .limit(100_000)
            .to_list()
        )
        rows.sort(key=lambda r: (r["recorded_at"], r["id"]))
        return [
            ConfidencePoint(r["memory_id"], r["confidence"], r["recorded_at"], r["id"])
            for r in rows
        ]

    # -- reading ----------------------------------------------------------

    def reading(self, read: Callable[[], _T]) -> _T:
        """Run ``read``; when an erasure in another process has removed the files of the
        version this process had open, reopen the tables and run it once more."""
        try:
            return read()
        except Exception as exc:
            if not gone_file(exc):
                raise
            log.info("[MEM:STORE] A table version was erased under a read; reopening")
            self.refresh()
            return read()

    def _scan(
        self, where: str | None, columns: Sequence[str], limit: int | None = None
    ) -> list[dict[str, Any]]:
        return self.reading(lambda: self._scan_once(where, columns, limit))

    def _scan_once(
        self, where: str | None, columns: Sequence[str], limit: int | None
    ) -> list[dict[str, Any]]:
        query = self.table().search()
        if where:
            query = query.where(where)
        query = query.select(list(columns))
        n = (
            limit
            if limit is not None
            else max(1, self.table().count_rows(where) if where else self.table().count_rows())
        )
        rows: list[dict[str, Any]] = query.limit(n).to_list()
        return rows

    def scan_arrow(
        self, where: str | None = None, columns: Sequence[str] = ROW_COLUMNS
    ) -> pa.Table:
        """Rows as an Arrow table (for the DuckDB lens and bulk reads)."""

        def read() -> pa.Table:
            query = self.table().search()
            if where:
                query = query.where(where)
            n = self.table().count_rows(where) if where else self.table().count_rows()
            return query.select(list(columns)).limit(max(n, 1)).to_arrow()

        return self.reading(read)

    def resolve_id(self, ident: str) -> str:
        """A full id from an id or a unique prefix of at least 4 characters."""
        ident = ident.strip().lower()
        if 0 < len(ident) < 4 and re.fullmatch(r"[0-9a-f-]+", ident):
            raise InvalidInputError(f"{ident!r} is too short: give at least 4 characters of the id")
        if not _ID_PREFIX.match(ident):
            raise InvalidInputError(f"{ident!r} is not a memory id")
        if len(ident) == 36:
            return ident
        rows = self._scan(f"id LIKE {q(ident.lower() + '%')}", ["id"], limit=2)
        if not rows:
            raise NotFoundError("memory", ident)
        if len(rows) > 1:
            raise InvalidInputError(
                f"id prefix {ident} matches more than one memory; give more of it"
            )
        return str(rows[0]["id"])

    def get(self, memory_id: str, *, with_embedding: bool = True) -> Memory:
        """Seed 004 ``GetByIdAsync``; raises :class:`NotFoundError`."""
        m = self.get_optional(memory_id, with_embedding=with_embedding)
        if m is None:
            raise NotFoundError("memory", memory_id)
        return m

    def get_optional(self, memory_id: str, *, with_embedding: bool = True) -> Memory | None:
        cols = [*ROW_COLUMNS, "vector"] if with_embedding else list(ROW_COLUMNS)
        rows = self._scan(f"id = {q(memory_id)}", cols, limit=1)
        return memory_from_row(rows[0]) if rows else None

    def get_many(self, ids: Sequence[str], *, with_embedding: bool = False) -> list[Memory]:
        """Memories in the order of ``ids``; unknown ids are skipped."""
        if not ids:
            return []
        cols = [*ROW_COLUMNS, "vector"] if with_embedding else list(ROW_COLUMNS)
        flat = None if with_embedding else self._flat_copy(refresh=False)
        if flat is not None and flat.serves(cols):
            return [memory_from_row(row) for row in flat.get(ids, cols)]
        found = {row["id"]: memory_from_row(row) for row in self._rows_by_id(ids, cols)}
        return [found[i] for i in ids if i in found]

    def _rows_by_id(self, ids: Sequence[str], columns: Sequence[str]) -> list[dict[str, Any]]:
        """The table's rows of ``ids`` (in no order; unknown ids skipped), read from
        LanceDB 500 ids a query."""
        rows: list[dict[str, Any]] = []
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            where = "id IN (" + ", ".join(q(i) for i in part) + ")"
            rows += self._scan(where, list(columns), limit=len(part))
        return rows

    def get_by_type(self, mtype: MemoryType, user_id: str, limit: int = 50) -> list[Memory]:
        """Active memories of a type for a user, most salient first (seed 004)."""
        return self.list_memories(
            MemoryFilter(type=mtype, user_id=user_id), sort="salience", limit=limit
        )

    def list_ids(self, flt: MemoryFilter | None = None, *, sort: str = "created") -> list[str]:
        """Ids only, in order: cheap enough for 100,000 memories (the browser's model)."""
        import pyarrow.compute as pc

        column, order = SORT_KEYS.get(sort, SORT_KEYS["created"])
        where = filter_where(flt or MemoryFilter())
        table = self.scan_arrow(where, ["id", column, "pinned"] if column != "id" else ["id"])
        if table.num_rows == 0:
            return []
        idx = pc.sort_indices(table, sort_keys=[(column, order), ("id", "ascending")])
        return [str(v) for v in table.column("id").take(idx).to_pylist()]

    def list_memories(
        self,
        flt: MemoryFilter | None = None,
        *,
        sort: str = "created",
        limit: int | None = 50,
        offset: int = 0,
    ) -> list[Memory]:
        """Memories matching a filter, sorted, one page at a time."""
        if sort not in SORT_KEYS:
            raise InvalidInputError(f"cannot sort by {sort!r} (use one of {', '.join(SORT_KEYS)})")
        if offset < 0 or (limit is not None and limit < 0):
            raise InvalidInputError("limit and offset must not be negative")
        ids = self.list_ids(flt, sort=sort)
        page = ids[offset : offset + limit] if limit is not None else ids[offset:]
        return self.get_many(page)

    def count(self, flt: MemoryFilter | None = None) -> int:
        where = filter_where(flt or MemoryFilter(status=None))
        return self.reading(
            lambda: int(self.table().count_rows(where) if where else self.table().count_rows())
        )

    def iter_all(self, *, batch: int = 512, with_embedding: bool = True) -> Iterator[list[Memory]]:
        """Every memory, in batches (export, re-embedding)."""
        ids = self.list_ids(MemoryFilter(status=None), sort="created")
        for start in range(0, len(ids), batch):
            yield self.get_many(ids[start : start + batch], with_embedding=with_embedding)

    def all_links(self) -> list[MemoryLink]:
        return self._links("id IS NOT NULL")

    def all_confidence(self) -> list[ConfidencePoint]:
        rows = (
            self.table(CONFIDENCE)
            .search()
            .limit(max(1, self.table(CONFIDENCE).count_rows()))
            .to_list()
        )
        return [
            ConfidencePoint(r["memory_id"], r["confidence"], r["recorded_at"], r["id"])
            for r in rows
        ]

    # -- bulk import (export/import round trip) ----------------------------

    def import_rows(
        self,
        memories: pa.Table,
        links: pa.Table,
        confidence: pa.Table,
        progress: Callable[[int, int], None] | None = None,
        batch: int = 2000,
    ) -> tuple[int, int, int]:
        """Add exported rows as they are (ids, timestamps and history kept exactly).

        Memories go in batches (with progress); if anything fails part-way, every
        table is restored to its version from before the import.
        """
        import pyarrow as pa

        with self._writing():
            ids = memories.column("id").to_pylist() if memories.num_rows else []
            if len(set(ids)) != len(ids):
                raise InvalidInputError("the import holds the same memory id twice")
            clash = self._existing_ids(ids)
            if clash:
                raise InvalidInputError(
                    f"{len(clash)} memories in the import already exist here (e.g. {sorted(clash)[0]})"
                )
            names = ("memories", LINKS, CONFIDENCE)
            before = {name: self.table(name).version for name in names}
            try:
                total = memories.num_rows
                data = memories.cast(memory_schema(self.dim))
                data = data.append_column(
                    "context", pa.nulls(total, pa.string())
                )  # exports leave the derived context out; rebuilt below
                for start in range(0, total, batch):
                    self.table().add(data.slice(start, batch))
                    if progress:
                        progress(min(start + batch, total), total)
                sessions = {
                    s
                    for s, src in zip(
                        data.column("session_id").to_pylist(),
                        data.column("source").to_pylist(),
                        strict=True,
                    )
                    if s and src in SESSION_SOURCES
                }
                if sessions:
                    self._sync_context(sessions)
                if links.num_rows:
                    self.table(LINKS).add(links.cast(links_schema()))
                if confidence.num_rows:
                    self.table(CONFIDENCE).add(confidence.cast(confidence_schema()))
            except BaseException:
                for name in names:
                    table = self.table(name)
                    if table.version != before[name]:
                        table.restore(before[name])
                raise
            self._maybe_optimize(force=True)
        return memories.num_rows, links.num_rows, confidence.num_rows

    # -- vector space changes ----------------------------------------------

    def reembed(
        self,
        embed: Callable[[list[str]], Any],
        progress: Callable[[int, int], None] | None = None,
        batch: int = 256,
    ) -> int:
        """Recompute every vector into a fresh table, then switch to it atomically.

        A crash part-way leaves the old table live and untouched; the half-built one
        is dropped the next time.
        """
        import pyarrow as pa

        with self._writing():
            old_name = self._meta["memories_table"]
            version = int(old_name.rsplit("_v", 1)[-1]) + 1 if "_v" in old_name else 2
            new_name = f"memories_v{version}"
            if new_name in self._list_tables():
                self._db.drop_table(new_name)

            new_table = self._db.create_table(new_name, schema=table_schema(self.dim))
            source = self.table()
            total = source.count_rows()
            done = 0
            ids = [r["id"] for r in source.search().select(["id"]).limit(max(total, 1)).to_list()]
            for start in range(0, len(ids), batch):
                part = ids[start : start + batch]
                where = "id IN (" + ", ".join(q(i) for i in part) + ")"
                rows = (
                    source.search()
                    .where(where)
                    .select([*ROW_COLUMNS, "context"])
                    .limit(len(part))
                    .to_list()
                )
                vectors = embed([r["content"] for r in rows])
                for r, v in zip(rows, vectors, strict=True):
                    r["vector"] = [float(x) for x in v]
                new_table.add(pa.Table.from_pylist(rows, schema=table_schema(self.dim)))
                done += len(rows)
                if progress:
                    progress(done, total)
            _index_memories(new_table)
            meta = dict(
                self._meta,
                memories_table=new_name,
                embedding_space=self.space_id,
                dim=self.dim,
                optimized_version=0,
            )
            self._write_meta(meta)
            self._db.drop_table(old_name)
        return done

    # -- maintenance --------------------------------------------------------

    def _maybe_optimize(self, *, force: bool = False) -> None:
        """Every so many commits: compact and fold new rows into the existing indices.

        Constraint: building the vector index takes minutes at 100k rows, far too long
        for a write someone is waiting on; only :meth:`optimize` (the service's
        background maintenance, ``lexmem optimize``) builds it.
        """
        table = self.table()
        since = table.version - int(self._meta.get("optimized_version", 0))
        if force or since >= OPTIMIZE_EVERY:
            self._compact()

    def _compact(self) -> None:
        with secure_umask():
            for name in ("memories", LINKS, CONFIDENCE):
                table = self.table(name)
                # A reader's refresh may have cached a handle opened before this block's
                # own commit: a compaction from that version is refused as preempted.
                table.checkout_latest()
                table.optimize(cleanup_older_than=_retention(table))
        self._write_meta(dict(self._meta, optimized_version=self.table().version))

    def optimize(self, *, build_vector_index: bool = True) -> None:
        """Build missing indices (the vector index once the table is large), compact,
        fold new rows into the indices and prune versions older than a few minutes."""
        with self._writing(), self._keeping_flat():
            _index_memories(self.table(), only_missing=True)
            if build_vector_index:
                self._ensure_vector_index()
            self._compact()

    def needs_vector_index(self) -> bool:
        """True when the table is large enough for a vector index and has none yet."""
        return self.count() >= self.settings.vector_index_min_rows and not self.has_vector_index()

    def _ensure_vector_index(self) -> None:
        table = self.table()
        rows = table.count_rows()
        if rows < self.settings.vector_index_min_rows:
            return
        if self.has_vector_index():
            return
        import_lancedb()
        from lancedb.index import IvfPq

        self._index_cache.clear()

        partitions = max(16, min(1024, int(rows**0.5)))
        table.create_index(
            "vector",
            config=IvfPq(
                distance_type="cosine",
                num_partitions=partitions,
                num_sub_vectors=max(1, self.dim // 8),
            ),
        )

    def has_vector_index(self) -> bool:
        """Whether the live table has an IVF-PQ index (cached: asked on every vector search)."""
        key = ("vector_index", self._meta.get("memories_table"))
        cached = self._index_cache.get(key)
        if cached is None:
            cached = any("vector" in i.columns for i in self.table().list_indices())
            self._index_cache[key] = cached
        return cached

    def versions_on_disk(self) -> int:
        return len(self.table().list_versions())

    def close(self) -> None:
        self._tables.clear()
        self._db = None

    def session_rows(
        self,
        session_ids: Iterable[str],
        where: str | None = None,
        columns: Sequence[str] = ROW_COLUMNS,
        limit: int = 2000,
        also_ids: Iterable[str] = (),
    ) -> pa.Table:
        """Every memory of these sessions (and the memories ``also_ids``) that ``where``
        admits, as Arrow (vectors stay one flat buffer); at most ``limit`` rows. Search
        reads its candidates' session neighbours through this: one query per search."""
        sessions = sorted({s for s in session_ids if s})
        ids = sorted(set(also_ids))
        parts = []
        if sessions:
            parts.append("session_id IN (" + ", ".join(q(s) for s in sessions) + ")")
        if ids:
            parts.append("id IN (" + ", ".join(q(i) for i in ids) + ")")
        if not parts:
            return self.table().schema.empty_table().select(list(columns))
        cond = " OR ".join(parts)
        if where:
            cond = f"({where}) AND ({cond})"
        return self.reading(
            lambda: self.table().search().where(cond).select(list(columns)).limit(limit).to_arrow()
        )

    def session_table(
        self, session_ids: Iterable[str], flt: MemoryFilter, columns: Sequence[str],
        limit: int, also_ids: Iterable[str] = (),
    ) -> tuple[pa.Table, np.ndarray]:  # fmt: skip
        """:meth:`session_rows` under ``flt`` with ``columns``, and the rows' vectors
        apart as a float32 matrix (row i for row i): from the in-memory copy of the rows
        while it is current, where the same rows cost a tenth of LanceDB's query (~1 ms
        against ~10 ms at 3,000 memories, most of that query reading every vector)."""
        import numpy as np

        flat = self._flat_copy(refresh=False)
        if flat is not None and flat.serves(columns):
            return flat.session_rows(flt, session_ids, also_ids, limit, columns)
        where = filter_where(flt)
        table = self.session_rows(session_ids, where, [*columns, "vector"], limit, also_ids)
        n = table.num_rows
        flat_values = table.column("vector").combine_chunks().flatten()
        vectors = np.asarray(flat_values.to_numpy(zero_copy_only=False), dtype=np.float32)
        return table.drop_columns(["vector"]).combine_chunks(), vectors.reshape(n, self.dim)

    # -- named reads for the rest of lexmem (no caller outside builds a where) ----------

    def ids_superseded_by(self, memory_id: str) -> list[str]:
        return [str(r["id"]) for r in self._scan(f"superseded_by = {q(memory_id)}", ["id"])]

    def ids_in_projects(self, projects: Sequence[str]) -> list[str]:
        wanted = sorted(set(projects))
        ids: list[str] = []
        for start in range(0, len(wanted), 200):
            part = ", ".join(q(p) for p in wanted[start : start + 200])
            ids += [str(r["id"]) for r in self._scan(f"project IN ({part})", ["id"])]
        return ids

    def project_names(self) -> list[str]:
        # Asked before every agent's search (which projects are opted out): a scan of the
        # whole table, kept until the table's next version.
        version = self.table().version
        cached = self._project_names
        if cached is not None and cached[0] == version:
            return list(cached[1])
        table = self.scan_arrow("project IS NOT NULL", ["project"])
        names = sorted({str(p) for p in table.column("project").to_pylist() if p})
        self._project_names = (version, tuple(names))
        return names

    def recent_fingerprint(self, fingerprint: str, since: datetime) -> str | None:
        where = (
            f"status = 'active' AND fingerprint = {q(fingerprint)} AND created_at >= {_ts(since)}"
        )
        rows = self._scan(where, ["id"], limit=1)
        return str(rows[0]["id"]) if rows else None

    def _vector_search(self, vector: Any) -> Any:
        """The LanceDB vector query, nearest first by cosine, with no filter, columns or
        limit yet (uses the IVF-PQ index once the store has one)."""
        query = self.table().search(vector, vector_column_name="vector").distance_type("cosine")
        if self.has_vector_index():
            # Re-rank the index's candidates by exact distance: PQ alone loses recall.
            query = query.nprobes(32).refine_factor(4)
        return query

    def vector_query(
        self, vector: Any, where: str | None, depth: int, columns: Sequence[str]
    ) -> Any:
        """The LanceDB vector query, nearest first by cosine, ``_distance`` among the
        columns, ``where`` applied before it."""
        query = self._vector_search(vector)
        if where:
            query = query.where(where, prefilter=True)
        return query.select([*columns, "_distance"]).limit(depth)

    def filtered_rows(
        self, search: Callable[[], Any], flt: MemoryFilter, depth: int,
        columns: Sequence[str], scored: str,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The first ``depth`` rows that ``flt`` admits of the ranked LanceDB query
        ``search()`` (a vector search with no filter, columns or limit yet), with
        ``columns`` and its ``scored`` column (``_distance``).

        Why: LanceDB applies a filter before a vector query by marking every row it
        admits, and at 100,000 memories that cost as much as the search itself (21 ms
        against 10, with the status column's bitmap index). A search's filter usually
        admits nearly every row (the active ones), so then the query runs unfiltered
        for a few more rows than asked, and the filter is applied to those
        (:func:`~lexmem.store.flat.admitted`, the SQL's meaning). The first ``depth``
        admitted are the filtered query's: a row it admits nearer than the last of them
        would have been among the ones read. When too few are admitted from a full
        read, the query runs again filtered first; so it does whenever the filter admits
        under :data:`POSTFILTER_SHARE` of the rows. (Not for a keyword query: LanceDB
        counts BM25's document frequencies over the rows a filter admits, so its scores
        depend on where the filter is applied.)"""
        where = filter_where(flt)
        share = self._admitted_share(where) if where else 1.0
        if where and share >= POSTFILTER_SHARE:
            import math

            fetch = min(4 * depth, math.ceil(depth / share) + 10)
            read = [*dict.fromkeys([*columns, *filter_columns(flt)]), scored]
            got = search().with_row_id(True).select(read).limit(fetch).to_arrow()
            mask = admitted(got, flt)
            kept = got if mask is None else got.filter(mask)
            if kept.num_rows >= depth or got.num_rows < fetch:
                return arrow_rows(kept.select([*columns, scored, ROW_ID]).slice(0, depth))
            self._shares.pop(where, None)  # fewer admitted than counted: count again
        query = search().with_row_id(True)
        if where:
            query = query.where(where, prefilter=True)
        return arrow_rows(query.select([*columns, scored]).limit(depth).to_arrow())

    def get_by_row_ids(self, wanted: Sequence[tuple[str, int]]) -> dict[str, Memory]:
        """The memories of ``wanted`` (id, LanceDB row id as a query just returned it in
        ``_rowid``) by id, read by row id: ~3 ms for ten at 100,000 memories, where
        :meth:`get_many`'s ``id IN (...)`` query takes ~7. A row id from an older
        version of the table (a compaction since) may name another row or none: only a
        row whose id is the one wanted is returned, and a read that fails returns
        nothing (the caller reads what is missing with :meth:`get_many`)."""
        if not wanted:
            return {}
        try:
            taken = self.table().take_row_ids([r for _, r in wanted])
            rows = arrow_rows(taken.select(list(ROW_COLUMNS)).to_arrow())
        except Exception as exc:  # noqa: BLE001 - the fallback is the authoritative read
            log.debug("reading %d rows by row id failed (%s): read by id", len(wanted), exc)
            return {}
        ids = {i for i, _ in wanted}
        return {m.id: m for m in map(memory_from_row, rows) if m.id in ids}

    def _admitted_share(self, where: str) -> float:
        """The share of the table's rows that ``where`` admits, counted at most every
        :data:`SHARE_RECHECK_S` seconds (an old count costs a query speed, never rows:
        :meth:`filtered_rows`)."""
        now = time.monotonic()
        cached = self._shares.get(where)
        if cached is not None and now - cached[1] < SHARE_RECHECK_S:
            return cached[0]
        table = self.table()
        total = table.count_rows()
        share = table.count_rows(where) / total if total else 0.0
        if len(self._shares) >= 64:  # filters by project or date come and go
            self._shares.clear()
        self._shares[where] = (share, now)
        return share

    def nearest_rows(
        self, vector: Any, flt: MemoryFilter, depth: int, columns: Sequence[str], *,
        copy: bool = True,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """The ``depth`` rows ``flt`` admits nearest ``vector`` by cosine, nearest first,
        with ``columns`` and ``_distance``: from the in-memory copy of the rows while the
        store is below its vector-index size (:mod:`lexmem.store.flat`), else LanceDB's
        query. ``copy``: take a new copy when the one held is stale (a search: it pays
        off over the next ones); without, a stale copy sends the query to LanceDB."""
        flat = self._flat_copy(refresh=copy)
        if flat is not None and flat.serves(columns):
            return flat.nearest(vector, flt, depth, columns)
        return self.filtered_rows(
            lambda: self._vector_search(vector), flt, depth, columns, "_distance"
        )

    def _flat_copy(self, *, refresh: bool) -> FlatVectors | None:
        flat = self._flat
        commits = self._commits
        # Asking the table its version waits behind any query LanceDB is running (the
        # keyword leg's, meanwhile); other processes' commits are seen within a second
        # either way (the connection's read_consistency_interval).
        if flat is not None and _seen_lately(self._flat_fresh, commits):
            return flat
        if flat is None and _seen_lately(self._flat_too_big, commits):
            # The same holds while the table is too large for a copy: a search at 100,000
            # memories would otherwise ask the version on its critical path each time.
            return None
        table = self.table()
        version = table.version
        if flat is not None and flat.version == version:
            self._flat_fresh = (commits, time.monotonic())
            return flat
        self._flat = self._flat_fresh = self._flat_too_big = None
        if not refresh:
            return None
        if self.has_vector_index() or table.count_rows() > FLAT_MAX_ROWS:
            self._flat_too_big = (commits, time.monotonic())
            return None
        columns = [*ROW_COLUMNS, "vector"]

        def read() -> tuple[int, pa.Table]:
            # A query, not to_lance(): the lance module and a second dataset handle
            # cost a long-lived process ~80 MB for good.
            live = self.table()
            version = live.version
            rows = live.search().select(columns).limit(max(live.count_rows(), 1)).to_arrow()
            return (version if live.version == version else -1), rows  # -1: never current

        version, data = self.reading(read)
        fresh = FlatVectors.from_table(version, data, self.dim)
        with self._thread_lock:
            if self.table().version == version and self._commits == commits:
                self._flat = fresh
                self._flat_fresh = (commits, time.monotonic())
        return fresh

    @contextmanager
    def _keeping_flat(self, accessed: Sequence[str] = ()) -> Iterator[None]:
        """Around commits that change nothing the flat copy holds but the access
        records of ``accessed`` (or nothing at all: compaction, index upkeep), inside
        :meth:`_writing`: a copy good before them is moved to the version after, with
        those records as the store now has them."""
        flat = self._flat
        before = self.table().version if flat is not None else None
        yield
        if flat is None or flat.version != before or self._flat is not flat:
            return
        rows = self._rows_by_id(accessed, ["id", *ACCESS_COLUMNS])
        self._flat = flat.at(self.table().version, rows)
        self._flat_fresh = None  # checked against the table at the next search
        self._flat_kept = True

    def nearest(self, embedding: Sequence[float], flt: MemoryFilter, k: int) -> list[Neighbour]:
        rows = self.nearest_rows(embedding, flt, k, ["id", "content"], copy=False)
        return [
            Neighbour(str(r["id"]), str(r["content"]), 1.0 - float(r["_distance"])) for r in rows
        ]

    def archived_before(self, cutoff: datetime, limit: int = 10_000) -> list[str]:
        where = (
            "status = 'archived' AND pinned = false AND "
            f"coalesce(updated_at, created_at) < {_ts(cutoff)}"
        )
        return [str(r["id"]) for r in self._scan(where, ["id"], limit=limit)]

    def digest_columns(self, project: str | None) -> DigestColumns:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        where = "status = 'active'"
        if project is not None:
            where += f" AND (project = {q(project)} OR project IS NULL)"
        else:
            where += " AND project IS NULL"
        table = self.scan_arrow(where, _DIGEST_READ)

        def numbers(column: str) -> Any:
            col = pc.fill_null(table.column(column), 0)
            return col.to_numpy(zero_copy_only=False).astype(np.float64)

        def micros(column: str) -> Any:
            col = table.column(column).cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            values = pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.float64)
            return np.where(col.is_null().to_numpy(zero_copy_only=False), np.nan, values)

        def keys(positions: Any) -> list[tuple[str, str | None, str | None]]:
            rows = table.select(["id", "fingerprint", "source_document"]).take(positions)
            return [
                (str(r["id"]), r["fingerprint"], r["source_document"]) for r in rows.to_pylist()
            ]

        pinned = table.column("pinned").fill_null(False).to_numpy(zero_copy_only=False)
        return DigestColumns(
            salience=numbers("salience"),
            pinned=pinned.astype(bool),
            access_count=numbers("access_count"),
            created_us=micros("created_at"),
            last_accessed_us=micros("last_accessed_at"),
            last_reinforced_us=micros("last_reinforced_at"),
            general=table.column("project").is_null().to_numpy(zero_copy_only=False),
            keys=keys,
        )

    def arrow_table(self, name: str, columns: Sequence[str] | None = None) -> pa.Table:
        def read() -> pa.Table:
            table = self.table(name)
            query = table.search()
            if columns:
                query = query.select(list(columns))
            return query.limit(max(int(table.count_rows()), 1)).to_arrow()

        return self.reading(read)


def _identity(folder: Path) -> tuple[int, int] | None:
    """The folder's device and inode: the same path made anew is another folder."""
    try:
        st = folder.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _only_fresh_store_files(home: Path, store: Path, since: float) -> bool:
    """Whether ``home`` holds nothing but files under ``store`` written since ``since``
    (what a commit into a deleted folder leaves), with a second's slack for clocks."""
    for path in home.rglob("*"):
        if path != store and store not in path.parents:
            return False
        try:
            if path.is_file() and path.stat().st_mtime < since - 1.0:
                return False
        except OSError:
            continue
    return True
