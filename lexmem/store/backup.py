"""``lexmem backup`` and ``lexmem restore --backup``: consistent snapshots of the data folder.

What a backup holds: the store (every table, at one version each, and ``meta.json``),
``settings.toml`` and the context digests. Not the inbox (events still on their way in),
logs, the model files, lock files, licence or LLM state, or anything holding a secret
(keys live in the keyring, never in the data folder).

Consistency without stopping the service: every lexmem writer commits under the store's
write lock, and LanceDB never changes a file once written (a commit adds files and a new
version manifest beside the old ones). So, holding the write lock for a moment, a backup
hard-links every file of the store into a staging folder inside the data folder (copies
where links are impossible, and always for the few small files that are replaced rather
than added to): that is the state between two commits, for every table at once. The lock
goes back, and the backup is verified and packed from the staging folder at leisure;
compaction may meanwhile remove old files from the store, but not the staged links.

A backup is one ``.tar.gz`` (mode 0600). Its first member, ``MANIFEST.json``, names the
lexmem that made it, the layouts (schema versions), each table's version and row count,
the size and SHA-256 of every file, and a checksum of itself. Restoring verifies all of
that before it touches anything, refuses while the service runs, moves the data it
replaces aside (kept, never deleted), and reads what it put in place in full; any failure
puts the old data back.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from lexmem.base import atomic_writer
from lexmem.config import DIR_MODE, FILE_MODE, SCHEMA_VERSION, Paths, secure_umask
from lexmem.errors import (
    InvalidInputError,
    LexmemError,
    StoreError,
    StoreLockedError,
    io_failure,
)
from lexmem.files import link_tree, tree_files
from lexmem.locks import FileLock, LockTimeout
from lexmem.store.lancedb_import import import_lancedb
from lexmem.version import __version__

__all__ = [
    "BackupInfo",
    "RestoreResult",
    "create_backup",
    "list_backups",
    "read_backup",
    "restore_backup",
]

MANIFEST = "MANIFEST.json"
FORMAT = "lexmem-backup"
FORMAT_VERSION = 1
SUFFIX = ".tar.gz"
# What a backup holds, relative to the data folder.
ITEMS = ("store", "settings.toml", "digests")
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class BackupInfo:
    """What a backup's manifest says about it."""

    path: Path
    created_at: str
    lexmem_version: str
    store_schema_version: int
    settings_schema_version: int | None
    memories_table: str
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    size: int = 0

    @property
    def memories(self) -> int:
        return int(self.tables.get(self.memories_table, {}).get("rows", 0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "created_at": self.created_at,
            "lexmem_version": self.lexmem_version, "store_schema_version": self.store_schema_version,
            "settings_schema_version": self.settings_schema_version,
            "memories_table": self.memories_table, "memories": self.memories,
            "tables": self.tables, "size": self.size,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class RestoreResult:
    backup: BackupInfo
    home: Path
    replaced: Path | None  # where the data the backup replaced was moved (None: there was none)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backup": self.backup.to_dict(),
            "data_folder": str(self.home),
            "replaced": str(self.replaced) if self.replaced else None,
        }


def _current_version_only(store: Path) -> Callable[[str], bool]:
    """Which files of the store a backup takes: each table's data, index and deletion
    files, and the manifest of its newest version only (its history stays behind; so do
    transaction records and the version hint, which LanceDB does without)."""
    from lexmem.store.repair import version_files

    newest = set()
    for table in store.glob("*.lance"):
        found = version_files(table)
        if found:
            newest.add(found[0][1].relative_to(store).as_posix())

    def keep(rel: str) -> bool:
        parts = PurePosixPath(rel).parts
        if (
            len(parts) >= 3
            and parts[0].endswith(".lance")
            and parts[1] in ("_versions", "_transactions")
        ):
            return rel in newest
        return True

    return keep


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _checksum(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")


def _read_tables(store: Path) -> dict[str, dict[str, int]]:
    """Each table's version and row count, every table read in full (a damaged one raises)."""
    import_lancedb()
    import lancedb

    from lexmem.store.repair import scan_table

    db = lancedb.connect(str(store))
    out = {}
    for folder in sorted(store.glob("*.lance")):
        name = folder.name.removesuffix(".lance")
        table = db.open_table(name)
        out[name] = {"version": int(table.version), "rows": scan_table(table)}
    return out


def _settings_version(path: Path) -> int | None:
    if not path.exists():
        return None
    import tomllib

    version = tomllib.loads(path.read_text(encoding="utf-8")).get("schema_version", 0)
    return version if isinstance(version, int) else None


# -- making a backup ---------------------------------------------------------------------------


def _destination(paths: Paths, dest: Path | None) -> Path:
    if dest is None:
        folder = paths.home / "backups"
    elif dest.is_dir():
        folder = dest
    elif dest.name.endswith(SUFFIX):
        if dest.exists():
            raise InvalidInputError(f"{dest} already exists: give a new name or a folder")
        if not dest.parent.is_dir():
            raise InvalidInputError(f"{dest.parent} is not a folder")
        return dest
    else:
        raise InvalidInputError(
            f"{dest} is neither a folder nor a new file name ending in {SUFFIX}"
        )
    try:
        with secure_umask():
            folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise _destination_error(folder, exc) from exc
    stamp = _stamp()
    target = folder / f"lexmem-{stamp}{SUFFIX}"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"lexmem-{stamp}-{n}{SUFFIX}"
    return target


@contextmanager
def _staging(paths: Paths, prefix: str) -> Iterator[Path]:
    """A scratch folder inside the data folder (same file system as the store, so hard
    links work), removed however the block ends."""
    with secure_umask():
        paths.home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    folder = paths.home / f".{prefix}-{_stamp()}-{os.getpid()}"
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _owner_free(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Archive members carry no user or group names: a backup may travel."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _take_between_commits(path: Path, timeout: float) -> FileLock:
    """The store's write lock, tried every couple of milliseconds: a busy service frees
    it only for moments between its commits, which a slower poll keeps missing."""
    lock = FileLock(path, timeout=0)
    deadline = time.monotonic() + timeout
    while True:
        try:
            lock.acquire()
            return lock
        except LockTimeout as exc:
            if time.monotonic() >= deadline:
                raise StoreLockedError(str(path), timeout) from exc
            time.sleep(0.002)


def create_backup(
    paths: Paths, dest: Path | None = None, *, lock_timeout: float = 60.0
) -> BackupInfo:
    """Write a consistent snapshot of the data folder to ``dest`` (a new ``.tar.gz`` file,
    or a folder to put one in; default ``backups/`` in the data folder) and return its
    manifest. Safe while the service runs: it holds the store's write lock only while it
    links the store's files, and nothing half-written is left if it fails."""
    if not (paths.store / "meta.json").is_file():
        raise InvalidInputError(f"there is nothing to back up in {paths.home} (no store yet)")
    target = _destination(paths, dest.expanduser().absolute() if dest else None)
    try:
        return _backup_into(paths, target, lock_timeout)
    except OSError as exc:  # the data folder itself, where the snapshot is staged
        raise StoreError(
            f"cannot back up {paths.home}: staging the snapshot there failed "
            f"({io_failure(exc) or exc.strerror or exc}); nothing was written to {target}"
        ) from exc


def _destination_error(path: Path, exc: OSError) -> LexmemError:
    from lexmem.store.lens import destination_error

    return destination_error(
        path, exc, verb="back up to", busy_hint="give a folder or a new .tar.gz file name"
    )


def _backup_into(paths: Paths, target: Path, lock_timeout: float) -> BackupInfo:
    with _staging(paths, "backup") as staging:
        lock = _take_between_commits(paths.write_lock, lock_timeout)
        try:
            # The moment of the snapshot: no commit is half-way while the lock is held.
            link_tree(paths.store, staging / "store", _current_version_only(paths.store))
            with secure_umask():
                if paths.settings.is_file():
                    shutil.copy2(paths.settings, staging / "settings.toml")
        finally:
            lock.release()
        if paths.digests.is_dir():
            link_tree(paths.digests, staging / "digests")
        try:
            tables = _read_tables(staging / "store")
        except Exception as exc:
            from lexmem.store.repair import REPAIR_HINT

            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
            raise StoreError(
                f"cannot back up: a table is damaged ({first}); {REPAIR_HINT}"
            ) from exc
        try:
            meta = json.loads((staging / "store" / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(
                f"cannot back up: {paths.store / 'meta.json'} is unreadable ({exc})"
            ) from exc
        files = {
            rel: {"size": (staging / rel).stat().st_size, "sha256": _sha256(staging / rel)}
            for rel in tree_files(staging)
        }
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "lexmem_version": __version__,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "source": str(paths.home),
            "store_schema_version": int(meta.get("schema_version", 1)),
            "settings_schema_version": _settings_version(staging / "settings.toml"),
            "memories_table": str(meta.get("memories_table", "")),
            "tables": tables,
            "files": files,
        }
        manifest["checksum"] = _checksum(manifest)
        _write_archive(target, staging, manifest)
    return _info(target, manifest)


def _write_archive(target: Path, staging: Path, manifest: dict[str, Any]) -> None:
    """The archive written atomically (:class:`~lexmem.base.atomic_writer`)."""
    body = json.dumps(manifest, indent=2, sort_keys=True).encode()
    try:
        # Level 1: vectors hardly compress, and the backup runs beside the service.
        with (
            atomic_writer(target, mode=FILE_MODE) as raw,
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode = len(body), FILE_MODE
            info.mtime = int(datetime.now(UTC).timestamp())
            tar.addfile(info, io.BytesIO(body))
            for rel in manifest["files"]:
                tar.add(staging / rel, arcname=rel, recursive=False, filter=_owner_free)
    except OSError as exc:
        raise _destination_error(target, exc) from exc


# -- reading backups ---------------------------------------------------------------------------


class _Damaged(Exception):
    """What is wrong with a backup file, in a few words."""


def _info(path: Path, manifest: dict[str, Any]) -> BackupInfo:
    return BackupInfo(
        path=path,
        created_at=str(manifest["created_at"]),
        lexmem_version=str(manifest["lexmem_version"]),
        store_schema_version=int(manifest["store_schema_version"]),
        settings_schema_version=manifest.get("settings_schema_version"),
        memories_table=str(manifest.get("memories_table", "")),
        tables={k: dict(v) for k, v in manifest["tables"].items()},
        size=path.stat().st_size if path.exists() else 0,
    )


def _checked_name(name: str) -> str:
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] not in ITEMS:
        raise _Damaged(f"it names a file outside a data folder ({name!r})")
    return rel.as_posix()


def _manifest_of(tar: tarfile.TarFile) -> dict[str, Any]:
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile():
        raise _Damaged(f"its first member is not {MANIFEST}")
    fh = tar.extractfile(first)
    if fh is None:
        raise _Damaged(f"its {MANIFEST} cannot be read")
    try:
        manifest = json.loads(fh.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Damaged(f"its {MANIFEST} is not JSON") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _Damaged("it is not a lexmem backup")
    if manifest.get("checksum") != _checksum(manifest):
        raise _Damaged(f"its {MANIFEST} does not match its checksum")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise _Damaged(f"it has backup format {manifest.get('format_version')!r}")
    for name in manifest["files"]:
        _checked_name(name)
    return manifest


def _read_errors() -> tuple[type[BaseException], ...]:
    return (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, KeyError, TypeError)


def read_backup(path: Path) -> BackupInfo:
    """A backup's manifest (its own checksum verified; the files it lists are not read)."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            return _info(path, _manifest_of(tar))
    except FileNotFoundError as exc:
        raise InvalidInputError(f"no backup at {path}") from exc
    except IsADirectoryError as exc:
        raise InvalidInputError(f"{path} is a folder, not a backup file") from exc
    except _Damaged as exc:
        raise InvalidInputError(f"{path} is not a usable backup: {exc}") from exc
    except _read_errors() as exc:
        raise InvalidInputError(f"{path} is damaged or not a lexmem backup ({exc})") from exc


def list_backups(folder: Path) -> list[BackupInfo]:
    """The backups in ``folder``, oldest first; files that are not backups are skipped."""
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        try:
            out.append(read_backup(path))
        except InvalidInputError:
            continue
    return sorted(out, key=lambda b: (b.created_at, b.path.name))


def _unpack(source: Path, into: Path) -> dict[str, Any]:
    """Extract a backup into ``into``, checking every file against the manifest (size and
    SHA-256, nothing missing, nothing extra) as it goes. Raises :class:`_Damaged`."""
    try:
        with tarfile.open(source, "r:gz") as tar:
            manifest = _manifest_of(tar)
            expected: dict[str, dict[str, Any]] = manifest["files"]
            seen: set[str] = set()
            for index, member in enumerate(tar):
                if index == 0:
                    continue  # the manifest, read above
                name = _checked_name(member.name)
                if name not in expected or name in seen or not member.isfile():
                    raise _Damaged(f"it holds a file its manifest does not list ({name})")
                _extract(tar, member, into / name, expected[name])
                seen.add(name)
            missing = sorted(set(expected) - seen)
            if missing:
                raise _Damaged(f"{missing[0]} is missing")
            # Constraint: tar stops at its end-of-archive marker, before the zero padding
            # after it and gzip's trailer; a damaged byte there went unseen, since gzip's
            # CRC is checked only at the end of the stream. Read to the end: every byte
            # of the file is then checked.
            while tar.fileobj is not None and tar.fileobj.read(_CHUNK):
                pass
    except _read_errors() as exc:
        raise _Damaged(f"it cannot be read ({type(exc).__name__}: {exc})") from exc
    return manifest


def _extract(
    tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, want: dict[str, Any]
) -> None:
    src = tar.extractfile(member)
    if src is None:
        raise _Damaged(f"{member.name} cannot be read")
    h = hashlib.sha256()
    size = 0
    with secure_umask():
        target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        with open(target, "xb") as out:
            while chunk := src.read(_CHUNK):
                h.update(chunk)
                size += len(chunk)
                out.write(chunk)
    os.utime(target, (member.mtime, member.mtime))
    if size != want.get("size") or h.hexdigest() != want.get("sha256"):
        raise _Damaged(f"{member.name} does not match its checksum")


def _verify_store(store: Path, manifest: dict[str, Any]) -> None:
    """The unpacked store reads in full and holds what the manifest says."""
    try:
        tables = _read_tables(store)
    except Exception as exc:
        raise _Damaged(f"a table does not read ({type(exc).__name__}: {exc})") from exc
    if tables != manifest["tables"]:
        raise _Damaged("its tables do not hold the versions and rows its manifest lists")


# -- restoring ----------------------------------------------------------------------------------


def _service_busy(paths: Paths) -> str:
    try:
        pid = paths.service_lock.read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    who = f" (pid {pid})" if pid.isdigit() else ""
    return (
        f"the lexmem service is running for {paths.home}{who}: quit lexmem or stop "
        "`lexmem serve` first, then restore"
    )


def _is_empty(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def restore_backup(paths: Paths, source: Path, *, lock_timeout: float = 30.0) -> RestoreResult:
    """Put the data folder back as the backup ``source`` holds it.

    Verifies the whole backup first (nothing changes if it is damaged, or was made by a
    newer lexmem), refuses while the service runs, and holds the service lock and the
    store's write lock throughout. The store, settings and digests it replaces move to
    ``replaced-<time>/`` in the data folder; if putting the backup in place fails, they
    are moved back.
    """
    from lexmem.store.schema import STORE_SCHEMA_VERSION

    source = source.expanduser().absolute()
    read_backup(source)  # a readable manifest before anything else happens
    with secure_umask():
        paths.home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    service = FileLock(paths.service_lock, timeout=0)
    try:
        service.acquire()
    except LockTimeout as exc:
        raise InvalidInputError(_service_busy(paths)) from exc
    try:
        writer = FileLock(paths.write_lock, timeout=lock_timeout)
        try:
            writer.acquire()
        except LockTimeout as exc:
            raise StoreLockedError(str(paths.write_lock), lock_timeout) from exc
        try:
            with _staging(paths, "restore") as staging:
                try:
                    manifest = _unpack(source, staging)
                    newer = (
                        manifest["store_schema_version"] > STORE_SCHEMA_VERSION
                        or (manifest["settings_schema_version"] or 0) > SCHEMA_VERSION
                    )
                    if newer:
                        raise _Damaged(
                            f"it was made by a newer lexmem ({manifest['lexmem_version']}): "
                            "upgrade lexmem to restore it"
                        )
                    _verify_store(staging / "store", manifest)
                except _Damaged as exc:
                    raise InvalidInputError(f"{source} cannot be restored: {exc}") from exc
                except OSError as exc:
                    raise StoreError(
                        f"cannot unpack {source} into {paths.home} ({exc.strerror or exc})"
                    ) from exc
                replaced = _swap_in(paths, staging, manifest)
        finally:
            writer.release()
    finally:
        service.release()
    return RestoreResult(_info(source, manifest), paths.home, replaced)


def _swap_in(paths: Paths, staging: Path, manifest: dict[str, Any]) -> Path | None:
    """Move the current items aside and the unpacked ones into place; undo on failure."""
    aside = paths.home / f"replaced-{_stamp()}"
    n = 1
    while aside.exists():
        n += 1
        aside = paths.home / f"replaced-{_stamp()}-{n}"
    moved: list[str] = []  # items now in ``aside``
    emptied: list[str] = []  # empty folders removed (nothing to keep)
    placed: list[str] = []  # items now in the data folder from the backup
    try:
        for item in ITEMS:
            live = paths.home / item
            if _is_empty(live):
                live.rmdir()
                emptied.append(item)
            elif live.exists():
                with secure_umask():
                    aside.mkdir(mode=DIR_MODE, exist_ok=True)
                os.replace(live, aside / item)
                moved.append(item)
        for item in ITEMS:
            if (staging / item).exists():
                os.replace(staging / item, paths.home / item)
                placed.append(item)
        try:
            _verify_store(paths.store, manifest)
        except _Damaged as exc:
            raise StoreError(f"the restored store does not read back ({exc})") from exc
    except BaseException as exc:
        for item in placed:
            os.replace(paths.home / item, staging / item)
        for item in moved:
            os.replace(aside / item, paths.home / item)
        for item in emptied:
            (paths.home / item).mkdir(mode=DIR_MODE, exist_ok=True)
        if aside.exists() and not any(aside.iterdir()):
            aside.rmdir()
        if isinstance(exc, OSError):
            raise StoreError(
                f"cannot put the backup in place ({exc.strerror or exc}); the data folder "
                "is as it was"
            ) from exc
        if isinstance(exc, StoreError):
            raise StoreError(f"{exc}; the data folder is as it was") from exc
        raise
    return aside if moved else None
