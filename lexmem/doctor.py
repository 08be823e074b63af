"""``lexmem doctor``: checks that say what is wrong and how to put it right.

Damage and repair: every table of the store is opened and read in full (every version
file it lists, every row, every column), so a truncated or overwritten manifest or data
file shows as ``fail`` with its cause. ``lexmem doctor --repair`` takes each damaged
table back to its newest version that reads in full. LanceDB keeps older versions (the
store keeps at least the newest :data:`lexmem.store.KEEP_VERSIONS` of each table, see
its retention), so going back is a new commit that restores an old one, and what the
versions after it held is what the repair loses (it says how much). A version file too
damaged for the table to open at all is moved aside into ``repair-<time>/`` in the data
folder, never deleted. Repair refuses while the service runs: it must be the only
process touching the store.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .config import Paths, load_settings, resolve_paths, secure_umask
from .errors import LexmemError
from .locks import FileLock, LockTimeout

__all__ = [
    "Check",
    "check_tables",
    "repair_store",
    "run_checks",
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


def _loose(paths: Paths) -> list[Path]:
    """Files and folders in the data folder that others could read."""
    bad = []
    for root, dirs, files in os.walk(paths.home):
        for name in dirs + files:
            p = Path(root) / name
            try:
                st = p.lstat()
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if stat.S_IMODE(st.st_mode) & 0o077:
                bad.append(p)
    if paths.home.exists() and stat.S_IMODE(paths.home.stat().st_mode) & 0o077:
        bad.insert(0, paths.home)
    return bad


def _check_permissions(paths: Paths, fix: bool, loose_before: list[Path]) -> Check:
    if os.name != "posix":
        return Check("permissions", "ok", "owner-only access is left to the platform's ACLs")
    bad = [p for p in loose_before if p.exists() and stat.S_IMODE(p.stat().st_mode) & 0o077]
    bad += [p for p in _loose(paths) if p not in bad]
    if loose_before and not bad and paths.home in loose_before:
        return Check("permissions", "warn", f"{paths.home} was readable by others; it is now 0700")
    if bad and fix:
        for p in bad:
            p.chmod(0o700 if p.is_dir() else 0o600)
        return Check("permissions", "ok", f"tightened {len(bad)} files and folders to owner-only")
    if bad:
        return Check(
            "permissions", "fail",
            f"{len(bad)} files or folders are readable by others (e.g. {bad[0]}); run `lexmem doctor --fix`",
        )  # fmt: skip
    return Check("permissions", "ok", "data folder 0700, files 0600")


def _check_keyring() -> Check:
    from . import keystore

    ok, detail = keystore.backend_available()
    if ok:
        return Check("keyring", "ok", detail)
    return Check(
        "keyring", "warn",
        f"{detail}: a licence key can come from LEXMEM_LICENCE or LEXMEM_LICENCE_FILE instead, "
        "and an LLM endpoint's API key cannot be kept",
    )  # fmt: skip


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


class _Damaged(Exception):
    """A table that does not read in full (the detail says which, and what to run)."""


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
    from .store import CONFIDENCE, LINKS, q

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


def run_checks(home: str | None = None, *, fix: bool = False, repair: bool = False) -> list[Check]:
    """Run every check (after repairing damaged tables, with ``repair``); never raises
    for a problem it can describe."""
    checks: list[Check] = []
    paths = Paths(Path(home).expanduser().absolute()) if home else resolve_paths()
    # Look before ensure(): it tightens the folder, and the user should hear that it was loose.
    loose_before = _loose(paths) if paths.home.exists() and os.name == "posix" else []
    try:
        paths.ensure()
        probe = paths.home / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
        free = shutil.disk_usage(paths.home).free
        state = "ok" if free > 200e6 else "warn"
        checks.append(
            Check("data folder", state, f"{paths.home} (writable, {free / 1e9:.1f} GB free)")
        )
    except (LexmemError, OSError) as exc:
        checks.append(Check("data folder", "fail", str(exc)))
        return checks
    checks.append(_check_permissions(paths, fix, loose_before))
    try:
        # No write-back: opening the store below migrates the file with the store, all
        # or nothing (lexmem.migrations).
        settings = load_settings(paths, write_back=False)
        checks.append(Check("settings", "ok", f"{paths.settings} (schema {settings.schema_version})"
                            if paths.settings.exists() else "defaults (no settings.toml yet)"))  # fmt: skip
    except LexmemError as exc:
        checks.append(Check("settings", "fail", str(exc)))
        return checks
    if repair:
        checks.extend(repair_store(paths))
    had_tables = bool(table_names(paths))
    tables = check_tables(paths)  # before anything opens (or migrates) the store

    from .embedder import Embedder

    embedder = Embedder(settings.embedding, paths.models)
    try:
        vec = embedder.embed_one("lexmem doctor checks the embedding model")
        checks.append(
            Check("model", "ok", f"{embedder.model_name}: loads offline, {len(vec)}-number vectors")
        )
    except LexmemError as exc:
        checks.append(Check("model", "fail", str(exc)))

    from .store import MemoryStore

    try:
        if tables.state == "fail":
            raise _Damaged(tables.detail)
        store = MemoryStore(
            paths, dim=settings.embedding.dim, space_id=embedder.space_id, settings=settings.store
        ).open()
        n = store.count()
        detail = f"{n} memories, {store.versions_on_disk()} table versions"
        if had_tables:
            detail += f"; {tables.detail}"
        if store.needs_vector_index():
            checks.append(
                Check(
                    "store",
                    "warn",
                    f"{detail}; large enough for a vector index: run `lexmem optimize`",
                )
            )
        elif store.needs_reembed:
            checks.append(
                Check(
                    "store",
                    "warn",
                    f"{detail}; vectors are from another model: run `lexmem reembed`",
                )
            )
        else:
            checks.append(Check("store", "ok", detail))
        store.close()
    except (LexmemError, _Damaged) as exc:
        checks.append(Check("store", "fail", str(exc)))
    except Exception as exc:  # noqa: BLE001 - a damaged store must still produce a report
        checks.append(
            Check("store", "fail", f"cannot open the store ({type(exc).__name__}: {exc})")
        )
    checks.append(_check_keyring())
    checks.extend(_check_integrations(paths, embedder))
    return checks


def _check_integrations(paths: Paths, embedder: Any) -> list[Check]:
    """Where lexmem is set up in the agents, whether the service runs, and whether the hook works."""
    from .api import Lexmem
    from .integrations import check_hook, installed, service_state

    checks = [Check(f.name, f.state, f.detail) for f in (*installed(), service_state(paths))]
    try:
        hook = check_hook(paths, lambda: Lexmem.open(paths.home, embedder=embedder))
        checks.append(Check(hook.name, hook.state, hook.detail))
    except Exception as exc:  # noqa: BLE001 - a broken store must still produce a report
        checks.append(
            Check("hook", "fail", f"could not test the hook ({type(exc).__name__}: {exc})")
        )
    return checks
