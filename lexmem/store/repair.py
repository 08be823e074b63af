"""Damage and repair of the store's tables, below the doctor (which reports them).

Every table of the store is opened and read in full (every version file it lists, every
row, every column), so a truncated or overwritten manifest or data file shows as
``fail`` with its cause. A repair takes each damaged table back to its newest version
that reads in full. LanceDB keeps older versions (the store keeps at least the newest
:data:`lexmem.store.lance.KEEP_VERSIONS` of each table, see its retention), so going back is
a new commit that restores an old one, and what the versions after it held is what the
repair loses (it says how much). A version file too damaged for the table to open at
all is moved aside into ``repair-<time>/`` in the data folder, never deleted. Backups
use the same scan to refuse copying a damaged store.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lexmem.config import Paths, secure_umask
from lexmem.locks import FileLock, LockTimeout
from lexmem.store.lancedb_import import import_lancedb

__all__ = [
    "REPAIR_HINT",
    "Check",
    "check_tables",
    "repair_store",
    "scan_table",
    "table_names",
    "version_files",
]

REPAIR_HINT = "run `lexmem doctor --repair`"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    state: str  # ok, warn, fail
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "detail": self.detail}


# -- damage -----------------------------------------------------------------------------


def table_names(paths: Paths) -> list[str]:
    """Every table in the store's folder (a LanceDB table is a ``<name>.lance`` folder)."""
    if not paths.store.is_dir():
        return []
    return sorted(p.name.removesuffix(".lance") for p in paths.store.glob("*.lance") if p.is_dir())


def scan_table(table: Any) -> int:
    """Read the checked-out version of ``table`` in full and return its row count.

    Every version file the table lists is parsed (a damaged old one fails here too), then
    every row and column is decoded, batch by batch, as a reader would. Raises whatever
    the storage engine raises on a damaged file, or :class:`ValueError` when what it
    reads does not add up.
    """
    known = {int(v["version"]) for v in table.list_versions()}
    if table.version not in known:
        raise ValueError(f"version {table.version} is not among the table's versions")
    expected = int(table.count_rows())
    seen = sum(int(batch.num_rows) for batch in table.search().limit(None).to_batches())
    if seen != expected:
        raise ValueError(f"{seen} rows read where the version lists {expected}")
    return seen


def _cause(exc: BaseException) -> str:
    """The storage engine's error, cut to one short line (it appends source locations)."""
    text = re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__
    text = re.sub(r",? /\S+\.rs:\d+:\d+", "", text)
    return text if len(text) <= 160 else text[:159] + "…"


def _connect(paths: Paths) -> Any:
    import_lancedb()
    import lancedb

    return lancedb.connect(str(paths.store))


def _probe(paths: Paths, name: str) -> tuple[Any | None, int | None, str]:
    """(table, rows, "") when the table opens and reads in full; else what went wrong,
    with the table when it at least opened."""
    try:
        table = _connect(paths).open_table(name)
    except Exception as exc:  # noqa: BLE001 - a damaged table raises anything
        return None, None, _cause(exc)
    try:
        return table, scan_table(table), ""
    except Exception as exc:  # noqa: BLE001 - a damaged table raises anything
        return table, None, _cause(exc)


def check_tables(paths: Paths) -> Check:
    """Open and read every table in full; ``fail`` names the damaged ones."""
    meta = paths.store / "meta.json"
    names = table_names(paths)
    if not names and not meta.exists():
        return Check("tables", "ok", "no tables yet")
    damaged: list[str] = []
    for name in names:
        cause = _probe(paths, name)[2]
        if cause:
            damaged.append(f"{name}: {cause}")
    if damaged:
        what = damaged[0] if len(damaged) == 1 else f"{len(damaged)} tables ({'; '.join(damaged)})"
        return Check("tables", "fail", f"damaged: {what}; {REPAIR_HINT}")
    return Check("tables", "ok", f"{len(names)} tables read in full")


def version_files(table_dir: Path) -> list[tuple[int, Path]]:
    """The table's version files, newest first. LanceDB names version N either ``N`` or
    (its newer scheme, so that names sort newest first) ``2**64 - 1 - N``."""
    out = []
    for p in (table_dir / "_versions").glob("*.manifest"):
        stem = p.name.removesuffix(".manifest")
        if stem.isdigit():
            n = int(stem)
            out.append((2**64 - 1 - n if n >= 2**63 else n, p))
    return sorted(out, reverse=True)


def _well_formed(manifest: Path) -> bool:
    """Whether a version file can be a Lance manifest at all: Lance ends every manifest
    with the position of its metadata (8 bytes), the format version (4) and the magic
    ``LANC``, so a truncated or overwritten file fails this without being parsed."""
    try:
        with open(manifest, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size < 16:
                return False
            fh.seek(size - 16)
            tail = fh.read(16)
    except OSError:
        return False
    return tail[-4:] == b"LANC" and int.from_bytes(tail[:8], "little") < size


class _Aside:
    """Version files moved out of the store, into ``repair-<time>/`` (never deleted), and
    back again when the repair cannot use their absence."""

    def __init__(self, paths: Paths, stamp: str) -> None:
        self.paths = paths
        self.root = paths.home / f"repair-{stamp}"
        self.moved: list[tuple[Path, Path]] = []

    def move(self, path: Path) -> None:
        target = self.root / path.relative_to(self.paths.home)
        with secure_umask():
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.replace(path, target)
        self.moved.append((path, target))

    def put_back(self, since: int = 0) -> None:
        while len(self.moved) > since:
            original, target = self.moved.pop()
            os.replace(target, original)


def _versions(table: Any | None) -> list[dict[str, Any]] | None:
    """The table's versions, or None when it did not open or cannot list them."""
    if table is None or table.version < 1:
        return None
    try:
        versions: list[dict[str, Any]] = table.list_versions()
        return versions
    except Exception:  # noqa: BLE001 - a damaged version file raises anything
        return None


def _open_listing(paths: Paths, name: str, aside: _Aside) -> tuple[Any, list[dict[str, Any]]]:
    """Open a table whose version files are damaged: move aside the ones that are not
    even well formed, then the one the storage engine names as corrupt (or else the
    newest) until the table opens and lists its versions. Raises LookupError when no
    version is left."""
    table_dir = paths.store / f"{name}.lance"
    for _, path in version_files(table_dir):
        if not _well_formed(path):
            aside.move(path)
    while True:
        try:
            table = _connect(paths).open_table(name)
            error = ""
        except Exception as exc:  # noqa: BLE001 - a damaged table raises anything
            table, error = None, str(exc)
        versions = _versions(table)
        if versions is not None:
            return table, versions
        if table is not None and not error:
            try:
                table.list_versions()
            except Exception as exc:  # noqa: BLE001 - the engine names the corrupt file
                error = str(exc)
        left = version_files(table_dir)
        if not left:
            raise LookupError("no version of it can be read")
        named = re.search(r"_versions/(\d+)\.manifest", error)
        chosen = [p for _, p in left if named and p.name == f"{named.group(1)}.manifest"]
        aside.move(chosen[0] if chosen else left[0][1])


def _repair_table(paths: Paths, name: str, aside: _Aside) -> Check | None:
    """Take one table back to its newest version that reads in full (None: it is sound)."""
    table, _, cause = _probe(paths, name)
    if not cause:
        return None
    first_moved = len(aside.moved)
    top = max((v for v, _ in version_files(paths.store / f"{name}.lance")), default=0)
    listed = _versions(table)
    top_rows = listed[-1]["metadata"].get("total_rows") if listed else None
    try:
        table, versions = _open_listing(paths, name, aside)
        good: tuple[int, datetime, int] | None = None
        for v in sorted(versions, key=lambda v: int(v["version"]), reverse=True):
            try:
                table.checkout(int(v["version"]))
                good = (int(v["version"]), v["timestamp"], scan_table(table))
                break
            except Exception:  # noqa: BLE001 - this version is damaged too: try an older one
                continue
        if good is None:
            raise LookupError("no version of it reads in full")
        table.checkout_latest()
        if good[0] != table.version:
            table.restore(good[0])
        still = _probe(paths, name)[2]
        if still:
            raise LookupError(f"it still fails after going back ({still})")
    except Exception as exc:  # noqa: BLE001 - the report must name whatever stopped it
        aside.put_back(first_moved)
        why = str(exc) if isinstance(exc, LookupError) else f"going back failed ({_cause(exc)})"
        return Check(
            "repair", "fail",
            f"{name} ({cause}): {why}; restore a backup instead (`lexmem backup --list`, "
            "`lexmem restore --backup PATH`)",
        )  # fmt: skip
    version, when, rows = good
    lost = top - version
    if lost:
        detail = f"went back to version {version} of {when:%Y-%m-%d %H:%M:%S}; lost the {lost} "
        detail += "commit after it" if lost == 1 else "commits after it"
        if top_rows is not None and int(top_rows) > rows:
            n = int(top_rows) - rows
            detail += f" ({n} row{'s' if n != 1 else ''})"
    else:
        detail = f"version {version} of {when:%Y-%m-%d %H:%M:%S} is intact; nothing lost"
    moved = len(aside.moved) - first_moved
    if moved:
        files = "file" if moved == 1 else "files"
        detail += f"; {moved} damaged version {files} kept in {aside.root}"
    return Check("repair", "warn", f"{name} was damaged ({cause}): {detail}")


def _drop_strays(paths: Paths) -> list[Check]:
    """After a table went back: remove the links and confidence points of memories that
    went with the lost commits (they would point at nothing)."""
    from lexmem.store.lance import q
    from lexmem.store.schema import CONFIDENCE, LINKS

    try:
        name = json.loads((paths.store / "meta.json").read_text(encoding="utf-8"))["memories_table"]
        db = _connect(paths)
        column = db.open_table(name).search().select(["id"]).limit(None).to_arrow()["id"]
        ids = set(column.to_pylist())
        gone = {}
        for table_name, keys in ((LINKS, ("from_id", "to_id")), (CONFIDENCE, ("memory_id",))):
            table = db.open_table(table_name)
            rows = table.search().select(["id", *keys]).limit(None).to_list()
            strays = [r["id"] for r in rows if any(r[k] not in ids for k in keys)]
            for start in range(0, len(strays), 500):
                part = strays[start : start + 500]
                table.delete("id IN (" + ", ".join(q(i) for i in part) + ")")
            gone[table_name] = len(strays)
    except Exception as exc:  # noqa: BLE001 - the report must name whatever stopped it
        return [
            Check("repair", "warn", f"could not look for links to lost memories ({_cause(exc)})")
        ]
    if not any(gone.values()):
        return []
    links, points = gone[LINKS], gone[CONFIDENCE]
    what = f"{links} link{'s' if links != 1 else ''} and {points} confidence point"
    what += "s" if points != 1 else ""
    return [Check("repair", "warn", f"removed {what} of memories lost with those commits")]


def repair_store(paths: Paths) -> list[Check]:
    """Take every damaged table back to its newest version that reads in full.

    Refuses while the service runs (it would write to what is being repaired) and holds
    the service lock and the store's write lock throughout, so neither a service nor a
    writer starts meanwhile.
    """
    service = FileLock(paths.service_lock, timeout=0)
    try:
        service.acquire()
    except LockTimeout:
        return [Check("repair", "fail", "the lexmem service is running: quit lexmem or stop "
                      "`lexmem serve` first, then run `lexmem doctor --repair` again")]  # fmt: skip
    try:
        with FileLock(paths.write_lock, timeout=30.0), secure_umask():
            aside = _Aside(paths, datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
            done = [c for name in table_names(paths) if (c := _repair_table(paths, name, aside))]
            if any(c.state == "warn" for c in done):
                done.extend(_drop_strays(paths))
    except LockTimeout:
        return [Check("repair", "fail", "another lexmem process is writing to the store; "
                      "try again when it has finished")]  # fmt: skip
    finally:
        service.release()
    return done or [Check("repair", "ok", "nothing to repair: every table reads in full")]
