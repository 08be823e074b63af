"""DuckDB as the SQL lens over the store: statistics, insights, export and import.

DuckDB reads Arrow tables that the store hands it; it never opens a database
file of its own, so nothing here can lock another process out.

An export is a folder: ``manifest.json`` plus one file per table
(``memories``, ``links``, ``confidence``) in JSON Lines, Parquet or CSV. It is
written under a temporary name and renamed into place, so an export is either
complete or absent. Importing it into an empty store reproduces every row exactly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexmem.config import secure_umask
from lexmem.errors import (
    ImportFormatError,
    InvalidInputError,
    LexmemError,
    StoreError,
    io_failure,
)
from lexmem.store.schema import CONFIDENCE, LINKS, confidence_schema, links_schema, memory_schema

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from lexmem.store.protocol import MemoryBackend

__all__ = [
    "FORMATS",
    "ImportInterrupted",
    "ctrl_c_between_batches",
    "destination_error",
    "export_store",
    "import_store",
    "insights",
    "interrupted_after",
    "interrupted_at",
    "stats",
]

FORMATS = {"jsonl": "jsonl", "parquet": "parquet", "csv": "csv"}
EXPORT_VERSION = 1
TABLES = ("memories", LINKS, CONFIDENCE)


def _connect() -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(
        ":memory:",
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
    )
    con.execute("SET TimeZone = 'UTC'")
    return con


def _arrow(store: MemoryBackend, name: str, columns: list[str] | None = None) -> pa.Table:
    return store.arrow_table(name, columns)


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    return row[0] if row else None


def _pairs(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in con.execute(sql).fetchall()}


# ISO 8601 like every other timestamp lexmem prints (the session time zone is UTC).
_ISO = "%Y-%m-%dT%H:%M:%S.%f+00:00"


def stats(store: MemoryBackend) -> dict[str, Any]:
    """Counts and distributions over the whole store."""
    con = _connect()
    mem = _arrow(
        store,
        "memories",
        [
            "id",
            "type",
            "status",
            "source",
            "project",
            "pinned",
            "salience",
            "created_at",
            "access_count",
        ],
    )
    links = _arrow(store, LINKS, ["id", "link_type"])
    conf = _arrow(store, CONFIDENCE, ["id"])
    con.register("mem", mem)
    con.register("links", links)
    total = int(_one(con, "SELECT count(*) FROM mem"))
    out: dict[str, Any] = {
        "memories": total,
        "by_status": _pairs(con, "SELECT status, count(*) FROM mem GROUP BY 1 ORDER BY 2 DESC"),
        "by_type": _pairs(
            con, "SELECT type, count(*) FROM mem WHERE status = 'active' GROUP BY 1 ORDER BY 2 DESC"
        ),
        "by_source": _pairs(
            con,
            "SELECT source, count(*) FROM mem WHERE status = 'active' GROUP BY 1 ORDER BY 2 DESC",
        ),
        "top_projects": _pairs(
            con,
            "SELECT coalesce(project, '(none)'), count(*) FROM mem WHERE status = 'active' "
            "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
        ),
        "pinned": int(_one(con, "SELECT count(*) FROM mem WHERE pinned")),
        "mean_salience": _one(
            con, "SELECT round(avg(salience), 4) FROM mem WHERE status = 'active'"
        ),
        "accesses": int(_one(con, "SELECT coalesce(sum(access_count), 0) FROM mem")),
        "oldest": _one(con, f"SELECT strftime(min(created_at), '{_ISO}') FROM mem"),
        "newest": _one(con, f"SELECT strftime(max(created_at), '{_ISO}') FROM mem"),
        "links": links.num_rows,
        "links_by_type": _pairs(
            con, "SELECT link_type, count(*) FROM links GROUP BY 1 ORDER BY 2 DESC"
        ),
        "confidence_points": conf.num_rows,
        "disk_bytes": _disk_bytes(store.paths.store),
        "table_versions": store.versions_on_disk(),
        "vector_index": store.has_vector_index(),
        "embedding_space": store.stored_space,
    }
    out["capture"] = _capture_stats(store, con)
    con.close()
    return out


def _capture_stats(store: MemoryBackend, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Seed 000 §8 and seed 001 §6 figures, from the audit log and the sessions table."""
    if "audit" not in store.list_tables():
        return {}
    audit = _arrow(store, "audit", ["decision", "rule", "kind", "confidence", "reason"])
    sessions = _arrow(store, "sessions", ["status", "memory_count"])
    mem = _arrow(store, "memories", ["source", "type", "classification_method"])
    con.register("audit", audit)
    con.register("sess", sessions)
    con.register("m2", mem)
    return {
        "candidates_by_decision": _pairs(
            con, "SELECT decision, count(*) FROM audit GROUP BY 1 ORDER BY 2 DESC"
        ),
        "saved_by_kind": _pairs(
            con,
            "SELECT kind, count(*) FROM audit WHERE decision = 'saved' GROUP BY 1 ORDER BY 2 DESC",
        ),
        "memories_by_source_and_type": _pairs(
            con, "SELECT source || '/' || type, count(*) FROM m2 GROUP BY 1 ORDER BY 2 DESC"
        ),
        "classifications_by_method": _pairs(
            con, "SELECT classification_method, count(*) FROM m2 GROUP BY 1 ORDER BY 2 DESC"
        ),
        "confidence_histogram": _pairs(
            con,
            "SELECT printf('%.1f', floor(confidence * 10) / 10), count(*) FROM audit "
            "WHERE decision <> 'quarantined' GROUP BY 1 ORDER BY 1",
        ),
        "top_skip_reasons": _pairs(
            con,
            "SELECT regexp_replace(reason, '[0-9.]+', 'N', 'g'), count(*) FROM audit "
            "WHERE decision = 'skipped' GROUP BY 1 ORDER BY 2 DESC LIMIT 5",
        ),
        "sessions_by_status": _pairs(
            con, "SELECT status, count(*) FROM sess GROUP BY 1 ORDER BY 2 DESC"
        ),
    }


# -- insights ---------------------------------------------------------------

_DAY_US = 86_400_000_000
_TYPE_ORDER = ("semantic", "episodic", "procedural")


def _day_index(column: str, offset_us: int, first_day: int) -> str:
    """SQL for the day (0 = the window's first) a timestamp falls on, at a fixed UTC offset.

    Constraint: plain epoch arithmetic, not time zone casts: the lens loads no DuckDB
    extension (ICU included), and a fixed offset is what the caller's clock says today.
    """
    return f"CAST(floor((epoch_us({column}) + {offset_us}) / {_DAY_US}.0) AS BIGINT) - {first_day}"


def _per_day(
    con: duckdb.DuckDBPyConnection, column: str, days: int, order: Sequence[str] = ()
) -> dict[str, list[int]]:
    """Counts per value of ``column`` and per day of the window ``w``."""
    out: dict[str, list[int]] = {}
    for key, day, n in con.execute(
        f"SELECT {column}, d, count(*) FROM w GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall():
        out.setdefault(str(key), [0] * days)[int(day)] = int(n)
    # Fixed keys first in their order (types keep their colours), then by total, then name.
    rank = {k: i for i, k in enumerate(order)}
    keys = sorted(out, key=lambda k: (rank.get(k, len(rank)), -sum(out[k]), k))
    return {k: out[k] for k in keys}


def insights(
    store: MemoryBackend, *, days: int = 30, now: datetime | None = None
) -> dict[str, Any]:
    """What the last ``days`` days brought, for the app's charts.

    Days are calendar days at ``now``'s UTC offset (default: the local clock), the last
    one being today. Returns ``dates`` (ISO dates, oldest first); ``by_type`` and
    ``by_source`` (a list of per-day counts for each type or source of the memories
    created each day, whatever their status now); ``top_projects`` (active memories
    created in the window, per project, at most ten); ``skip_reasons`` (skipped
    candidates per reason, numbers taken out so that "confidence 0.42 below …" and
    "confidence 0.55 below …" count as one, at most eight); ``decisions`` (candidates
    per audit decision, not counting the app's own operations); and ``total``.
    """
    if days < 1:
        raise InvalidInputError(f"days must be at least 1, not {days}")
    now = now or datetime.now().astimezone()
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    offset = now.utcoffset() or timedelta(0)
    offset_us = offset // timedelta(microseconds=1)
    today = now.date()
    first = today - timedelta(days=days - 1)
    first_day = (first - date(1970, 1, 1)).days
    con = _connect()
    try:
        mem = _arrow(store, "memories", ["type", "source", "project", "status", "created_at"])
        con.register("mem", mem)
        con.execute(
            "CREATE TEMP VIEW w AS SELECT * FROM (SELECT *, "
            f"{_day_index('created_at', offset_us, first_day)} AS d FROM mem) "
            f"WHERE created_at IS NOT NULL AND d BETWEEN 0 AND {days - 1}"
        )
        out: dict[str, Any] = {
            "days": days,
            "dates": [(first + timedelta(days=i)).isoformat() for i in range(days)],
            "total": int(_one(con, "SELECT count(*) FROM w")),
            "by_type": _per_day(con, "type", days, _TYPE_ORDER),
            "by_source": _per_day(con, "source", days),
            "top_projects": [
                (str(k), int(n))
                for k, n in con.execute(
                    "SELECT coalesce(project, '(none)'), count(*) FROM w WHERE status = 'active' "
                    "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10"
                ).fetchall()
            ],
            "skip_reasons": [],
            "decisions": {},
        }
        # The journal's tables exist once a service has run; reading must not create them.
        if "audit" in store.list_tables():
            audit = _arrow(store, "audit", ["decision", "reason", "kind", "timestamp"])
            con.register("audit", audit)
            con.execute(
                "CREATE TEMP VIEW aw AS SELECT * FROM (SELECT *, "
                f"{_day_index('timestamp', offset_us, first_day)} AS d FROM audit) "
                f"WHERE d BETWEEN 0 AND {days - 1} AND kind IS DISTINCT FROM 'memory_op'"
            )
            out["decisions"] = _pairs(
                con, "SELECT decision, count(*) FROM aw GROUP BY 1 ORDER BY 2 DESC, 1"
            )
            out["skip_reasons"] = [
                (str(k), int(n))
                for k, n in con.execute(
                    "SELECT regexp_replace(trim(regexp_replace(coalesce(reason, ''), "
                    "'[0-9]+([.][0-9]+)?', '', 'g')), '\\s+', ' ', 'g') AS r, count(*) "
                    "FROM aw WHERE decision = 'skipped' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 8"
                ).fetchall()
            ]
        return out
    finally:
        con.close()


def _disk_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for f in files:
            with contextlib.suppress(OSError):  # a file removed while we walk
                total += os.path.getsize(os.path.join(root, f))
    return total


# -- export -----------------------------------------------------------------

_COPY = {
    "jsonl": "(FORMAT json)",
    "parquet": "(FORMAT parquet, COMPRESSION zstd)",
    "csv": "(FORMAT csv, HEADER true)",
}


def _sql_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# Why a destination cannot be written, in the words a person looks for.
_DEST_REASONS = {
    "EBUSY": "it is a mount point, or in use",
    "EROFS": "read-only file system",
    "ENOSPC": "no space left on the device",
    "EDQUOT": "over the disk quota",
    "EACCES": "permission denied",
    "EPERM": "permission denied",
    "ENOTDIR": "a part of the path is not a folder",
    "ENAMETOOLONG": "the name is too long",
}


def destination_error(
    path: Path, exc: BaseException, *, verb: str = "export to", busy_hint: str = ""
) -> LexmemError:
    """The one-line error for a destination (an export folder, a backup file) that cannot
    be written: the path, the reason, and that nothing was left there. A busy mount point
    is bad input (exit 2: it can never be replaced, a folder inside it can be used); the
    machine refusing (full, read-only, no permission, a failing disk) is exit 1."""
    import errno
    import re

    seen: BaseException | None = exc
    code: int | None = None
    for _ in range(8):  # the exception, its cause, and theirs
        if seen is None:
            break
        if isinstance(seen, OSError) and isinstance(seen.errno, int):
            code = seen.errno
            break
        # DuckDB's IOException carries "errno":"28"; LanceDB's errors "(os error 28)"
        found = re.search(r"os error (\d+)|\"errno\":\s*\"?(\d+)", str(seen))
        if found:
            code = int(found.group(1) or found.group(2))
            break
        seen = seen.__cause__ or seen.__context__
    name = errno.errorcode.get(code, "") if code is not None else ""
    reason = _DEST_REASONS.get(name) or io_failure(exc)
    if reason is None:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        reason = os.strerror(code) if code is not None else first
    if name == "EBUSY":
        hint = f": {busy_hint}" if busy_hint else ""
        return InvalidInputError(f"cannot {verb} {path} ({reason}){hint}; nothing was written")
    return StoreError(f"cannot {verb} {path} ({reason}); nothing was written")


def export_store(store: MemoryBackend, out: Path, fmt: str = "jsonl") -> dict[str, int]:
    """Write every memory (with its vector), link and confidence point to ``out``.

    The manifest gives each table's row count and each file's SHA-256, which
    :func:`import_store` checks. Any failure to write (a busy mount point, a read-only or
    full disk, no permission) is one line naming ``out``, and leaves nothing behind:
    neither the temporary folder nor a change to ``out``."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown export format {fmt!r} (use jsonl, parquet or csv)")
    out = out.expanduser().absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidInputError(f"{out} already exists and is not an empty folder")
    parent = out.parent
    if not parent.is_dir():
        raise InvalidInputError(f"{parent} does not exist")
    busy = f"export into a new folder inside it, e.g. {out / 'lexmem-export'}"
    if out.is_dir() and os.path.ismount(out):
        # Said before anything is tried: renaming over it fails (EBUSY), and the folder
        # it is mounted in may not be writable at all, which would name the wrong cause.
        raise InvalidInputError(f"cannot export to {out} (it is a mount point): {busy}")
    con = _connect()
    counts: dict[str, int] = {}
    with secure_umask():
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        except OSError as exc:  # a read-only or full destination
            con.close()
            raise destination_error(out, exc, busy_hint=busy) from exc
        removed_empty, empty_mode = False, 0o700
        try:
            files: dict[str, str] = {}
            for name in TABLES:
                # Schema order: CSV columns are read back by position.
                cols = [f.name for f in memory_schema(store.dim)] if name == "memories" else None
                data = _arrow(store, name, cols)
                con.register(f"t_{name}", data)
                target = tmp / f"{name}.{fmt}"
                con.execute(f"COPY (SELECT * FROM t_{name}) TO {_sql_path(target)} {_COPY[fmt]}")
                counts[name] = data.num_rows
                files[target.name] = _file_sha256(target)
            manifest = {
                "lexmem_export": EXPORT_VERSION,
                "format": fmt,
                "dim": store.dim,
                "embedding_space": store.stored_space,
                "counts": counts,
                "sha256": files,
            }
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
            if out.exists():
                empty_mode = out.stat().st_mode & 0o7777
                out.rmdir()  # an empty folder: renamed over below (Windows needs it gone)
                removed_empty = True
            os.replace(tmp, out)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if removed_empty and not out.exists():  # the person's empty folder, put back
                with contextlib.suppress(OSError):
                    out.mkdir(mode=empty_mode)
            if isinstance(exc, OSError) or io_failure(exc) is not None:
                # DuckDB and Python say "disk full" each their own way
                raise destination_error(out, exc, busy_hint=busy) from exc
            raise
        finally:
            con.close()
    return counts


def _duck_type(field: pa.Field) -> str:
    import pyarrow as pa

    t = field.type
    if pa.types.is_fixed_size_list(t):
        return f"FLOAT[{t.list_size}]"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ"
    if pa.types.is_string(t):
        return "VARCHAR"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    raise AssertionError(f"no DuckDB type for {t}")  # pragma: no cover - schema is fixed


def _read(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, schema: pa.Schema) -> pa.Table:
    if not path.exists():
        raise ImportFormatError(f"{path.name} is missing from the export")
    cols = "{" + ", ".join(f"'{f.name}': '{_duck_type(f)}'" for f in schema) + "}"
    names = ", ".join(f'"{f.name}"' for f in schema)
    src = _sql_path(path)
    if fmt == "jsonl":
        sql = f"SELECT {names} FROM read_json({src}, format='newline_delimited', columns={cols})"
    elif fmt == "csv":
        sql = f"SELECT {names} FROM read_csv({src}, header=true, columns={cols})"
    else:
        sql = f"SELECT {names} FROM read_parquet({src})"
    try:
        table = con.sql(sql).to_arrow_table()
        return table.cast(schema)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ImportFormatError(
            f"{path.name} cannot be read as a lexmem {fmt} export: {first}"
        ) from exc


class ImportInterrupted(LexmemError):
    """Ctrl-C reached an import; ``str()`` says exactly what was kept. Exit code 130, as
    for any command Ctrl-C ends."""

    exit_code = 130


@contextlib.contextmanager
def ctrl_c_between_batches() -> Iterator[Callable[[], bool]]:
    """Ctrl-C during an import, heard at the next safe point instead of anywhere.

    Constraint: a KeyboardInterrupt raised in the middle of a LanceDB call leaves that
    call running on LanceDB's own thread: a table's ``add`` could then commit after the
    rollback that was meant to undo it, and the store would hold rows nobody reported.
    So while the block runs, SIGINT only raises a flag; the block asks the function it is
    given ("was Ctrl-C pressed?") between batches. Only in the main thread, and only when
    Ctrl-C would raise KeyboardInterrupt (a process with a handler of its own, such as
    ``lexmem serve``, or one that ignores SIGINT, is left as it is)."""
    import signal
    import threading

    pressed: list[bool] = []
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield lambda: False
        return

    def heard(_signum: int, _frame: object) -> None:
        pressed.append(True)

    previous = signal.signal(signal.SIGINT, heard)
    try:
        yield lambda: bool(pressed)
    finally:
        signal.signal(signal.SIGINT, previous)


# The imports this process ran, by source folder: None while one runs, then its counts.
# Ctrl-C can land after the writer's job ended (while it lets go of the store); the
# caller then says from here what had been imported.
IMPORTS_HERE: dict[str, dict[str, int] | None] = {}


def interrupted_after(counts: dict[str, int]) -> str:
    """What an import that Ctrl-C reached only after its commit kept: all of it."""
    done = (
        f"{counts.get('memories', 0):,} memories, {counts.get('links', 0):,} links and "
        f"{counts.get('confidence', 0):,} confidence points"
    )
    return f"interrupted after the import had finished: {done} were imported"


def interrupted_at(store: MemoryBackend, source: Path) -> str:
    """What an import interrupted at an unknown point kept, counted in the store."""
    store.refresh()
    here = set(_ids(_arrow(store, "memories", ["id"]), "id"))
    try:
        manifest = json.loads((source / "manifest.json").read_text())
        fmt = str(manifest["format"])
        con = _connect()
        try:
            mem = _read(con, source / f"memories.{fmt}", fmt, memory_schema(store.dim))
        finally:
            con.close()
    except (OSError, ValueError, KeyError, TypeError, LexmemError):
        return f"interrupted: the store now holds {len(here):,} memories in all"
    ids = _ids(mem, "id")
    kept = sum(1 for i in ids if i in here)
    return (
        f"interrupted: {kept:,} of the export's {len(ids):,} memories are in the store; "
        "run the same import with --skip-existing to add the rest"
    )


class _Stop(Exception):
    """Raised from the progress callback to end an import between two batches."""


def _manifest_counts(manifest: dict[str, Any], source: Path) -> dict[str, int]:
    counts = manifest.get("counts")
    if not isinstance(counts, dict) or not all(
        isinstance(counts.get(name), int) for name in TABLES
    ):
        raise ImportFormatError(
            f"{source / 'manifest.json'} gives no row count for every table; nothing was imported"
        )
    return {name: int(counts[name]) for name in TABLES}


def _check_hashes(manifest: dict[str, Any], source: Path, fmt: str) -> None:
    """Each table file against the SHA-256 its manifest gives (exports before the manifest
    carried them give none: their row counts are still checked)."""
    hashes = manifest.get("sha256")
    if hashes is None:
        return
    if not isinstance(hashes, dict):
        raise ImportFormatError(f"{source / 'manifest.json'}: its sha256 entry is not a table")
    for name in TABLES:
        file = source / f"{name}.{fmt}"
        want = hashes.get(file.name)
        if not isinstance(want, str):
            raise ImportFormatError(
                f"{source / 'manifest.json'} gives no sha256 for {file.name}; nothing was imported"
            )
        if not file.is_file():
            raise ImportFormatError(f"{file.name} is missing from the export; nothing was imported")
        if _file_sha256(file) != want.lower():
            raise ImportFormatError(
                f"{file} does not match the sha256 in its manifest (the export was cut short "
                "or changed); nothing was imported"
            )


_NOUNS = {"memories": "memories", LINKS: "links", CONFIDENCE: "confidence points"}


def _ids(table: pa.Table, column: str) -> list[str]:
    return [str(v) for v in table.column(column).to_pylist()] if table.num_rows else []


def import_store(
    store: MemoryBackend,
    source: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    skip_existing: bool = False,
    interrupted: Callable[[], bool] | None = None,
) -> dict[str, int]:
    """Add the rows of an export folder to the store, all or nothing.

    Before anything is written the export is checked: its row counts (and each file's
    SHA-256, when its manifest gives them) must be what its manifest says, every link
    and confidence point must belong to a memory in the export or already here, and no
    row may already be here unless ``skip_existing`` (then those rows are left out and
    counted under ``skipped_*``). ``interrupted()`` is asked between batches: when it
    says yes the import is undone and :class:`ImportInterrupted` says what was kept."""
    source = source.expanduser()
    manifest_path = source / "manifest.json"
    if not manifest_path.is_file():
        raise ImportFormatError(f"{source} is not a lexmem export (no manifest.json)")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise ImportFormatError(f"{manifest_path} is not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict):
        raise ImportFormatError(f"{manifest_path} is not a lexmem export manifest")
    fmt = manifest.get("format")
    if manifest.get("lexmem_export") != EXPORT_VERSION or fmt not in FORMATS:
        raise ImportFormatError(
            f"{source}: unsupported export (version {manifest.get('lexmem_export')}, format {fmt})"
        )
    if manifest.get("dim") != store.dim:
        raise ImportFormatError(
            f"the export holds {manifest.get('dim')}-number vectors; this store uses {store.dim} "
            "(switch embedding.model back, import, then re-embed)"
        )
    expected = _manifest_counts(manifest, source)
    _check_hashes(manifest, source, str(fmt))
    con = _connect()
    try:
        mem = _read(con, source / f"memories.{fmt}", fmt, memory_schema(store.dim))
        links = _read(con, source / f"{LINKS}.{fmt}", fmt, links_schema())
        conf = _read(con, source / f"{CONFIDENCE}.{fmt}", fmt, confidence_schema())
    finally:
        con.close()
    for name, table in (("memories", mem), (LINKS, links), (CONFIDENCE, conf)):
        if table.num_rows != expected[name]:
            raise ImportFormatError(
                f"{source / f'{name}.{fmt}'} holds {table.num_rows:,} {_NOUNS[name]} but its "
                f"manifest says {expected[name]:,} (the export is incomplete or was changed); "
                "nothing was imported"
            )
    mem_ids = _ids(mem, "id")
    if len(set(mem_ids)) != len(mem_ids):
        raise ImportFormatError(f"{source} holds the same memory id twice; nothing was imported")
    here = set(_ids(_arrow(store, "memories", ["id"]), "id"))
    known = here | set(mem_ids)
    for name, table, column in ((LINKS, links, "from_id"), (LINKS, links, "to_id"),
                                (CONFIDENCE, conf, "memory_id")):  # fmt: skip
        for row_id, target in zip(_ids(table, "id"), _ids(table, column), strict=True):
            if target not in known:
                what = "link" if name == LINKS else "confidence point"
                raise ImportFormatError(
                    f"the export's {what} {row_id} belongs to memory {target}, which is neither "
                    "in the export nor in this store (the export is incomplete); nothing was "
                    "imported"
                )
    tables = {"memories": mem, LINKS: links, CONFIDENCE: conf}
    skipped: dict[str, int] = {}
    for name, table in tables.items():
        present = here if name == "memories" else set(_ids(_arrow(store, name, ["id"]), "id"))
        ids = _ids(table, "id")
        clash = [i for i in ids if i in present]
        if clash and not skip_existing:
            raise InvalidInputError(
                f"{len(clash):,} of the export's {len(ids):,} {_NOUNS[name]} already exist here "
                f"(e.g. {sorted(clash)[0]}): `lexmem import --skip-existing {source}` adds only "
                "the others"
            )
        if clash:
            import pyarrow as pa
            import pyarrow.compute as pc

            keep = pc.invert(pc.is_in(table.column("id"), value_set=pa.array(sorted(present))))
            tables[name] = table.filter(keep)
        skipped[name] = len(clash)
    mem, links, conf = tables["memories"], tables[LINKS], tables[CONFIDENCE]

    def step(done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)
        if interrupted is not None and interrupted():
            raise _Stop

    same_space = manifest.get("embedding_space") == store.stored_space
    adding = mem.num_rows + links.num_rows + conf.num_rows
    new_ids = _ids(mem, "id")
    try:
        step(0, mem.num_rows)
        if adding:
            n_mem, n_links, n_conf = store.import_rows(mem, links, conf, step)
        else:
            n_mem = n_links = n_conf = 0
    except _Stop as exc:
        # The store undid every table (import_rows is all or nothing): say what it holds.
        store.refresh()
        now_here = set(_ids(_arrow(store, "memories", ["id"]), "id"))
        kept = sum(1 for i in new_ids if i in now_here)
        if kept == 0:
            raise ImportInterrupted(
                f"interrupted: nothing of {source} was imported (the store is as it was)"
            ) from exc
        raise ImportInterrupted(
            f"interrupted: {kept:,} of {len(new_ids):,} memories imported; run the same "
            "import with --skip-existing to add the rest"
        ) from exc
    return {
        "memories": n_mem,
        "links": n_links,
        "confidence": n_conf,
        "skipped_memories": skipped["memories"],
        "skipped_links": skipped[LINKS],
        "skipped_confidence": skipped[CONFIDENCE],
        "needs_reembed": int(not same_space and n_mem > 0),
    }
