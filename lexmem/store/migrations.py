"""Layout versions of the data folder, and the steps that bring an older layout up to date.

Two files carry a layout (``schema_version``):

- ``store/meta.json``: the store's tables (:data:`lexmem.store.schema.STORE_SCHEMA_VERSION`);
  the steps are :data:`STORE_STEPS` below.
- ``settings.toml``: the settings (:data:`lexmem.config.SCHEMA_VERSION`); the steps are
  :data:`lexmem.config.MIGRATIONS`, kept beside the settings because the hook reads the
  settings (migrating them in memory) without importing anything heavier than
  :mod:`lexmem.config`.

Both are plans of the same shape, ``{N: the step from layout N to N + 1}``, read by the
same :func:`lexmem.config.schema_steps`. Adding a layout is bumping the version and adding
its step; a step may meet a folder part-way there (another lexmem may have added what it
adds) and must then only finish the job.

:func:`migrate_data_folder` runs when the store opens, before anything else touches the
tables. A folder written by a newer lexmem is refused before anything is written. An
older one is migrated under the store's write lock (so two processes opening it migrate
it once), all or nothing: before the first step the store and the settings file are
snapshotted into ``migrations/<time>/`` in the data folder (LanceDB's write-once files as
hard links, the rest as copies: cheap at any size); if a step fails, the folder is put
back exactly as it was (every file byte for byte, the files the failed step wrote
removed) and one line names the step and the snapshot, which is kept. A migration that
succeeds removes its snapshot.
"""

from __future__ import annotations

import contextlib
import filecmp
import logging
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from lexmem import config
from lexmem.base import atomic_writer
from lexmem.config import DIR_MODE, Paths, schema_steps, secure_umask
from lexmem.errors import ConfigError, StoreError
from lexmem.files import link_tree, tree_files
from lexmem.store.schema import STORE_SCHEMA_VERSION

if TYPE_CHECKING:
    from lexmem.store.lance import MemoryStore

__all__ = ["STORE_STEPS", "Step", "migrate_data_folder", "pending_steps"]

log = logging.getLogger("lexmem.migrations")


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the store's layout: ``run`` takes an open store from layout N to N + 1."""

    name: str
    run: Callable[[MemoryStore], None]


def _add_context(store: MemoryStore) -> None:
    """Layout 1 -> 2: the memories table gains ``context`` (the conversation around each
    memory, see :data:`lexmem.store.lance.SESSION_SOURCES`), filled from the sessions and
    indexed for full-text search. One pass over the table.

    Stores that lexmem wrote before the layout was numbered 2 may have the column
    already (it was added on open, unversioned): then the step only brings it up to
    date and builds any missing index.
    """
    table = store.table()
    if "context" not in table.schema.names:
        table.add_columns({"context": "CAST(NULL AS STRING)"})
        log.info("[MEM:STORE] Added the session context column to %s", table.name)
    store.rebuild_context()


STORE_STEPS: dict[int, Step] = {
    1: Step("add the session context column", _add_context),
}


def _settings_version(path: Path) -> Any:
    """The layout the settings file says it has (0 when it does not say; None: no file)."""
    if not path.exists():
        return None
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get("schema_version", 0)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read settings ({exc})", path=str(path)) from exc


def _step_name(what: str, version: int, doc: str | None) -> str:
    """``settings 0 -> 1 (move the top-level model into [embedding])``: from the step's
    docstring."""
    words = (doc or "").strip().splitlines()[0].rstrip(".") if (doc or "").strip() else "?"
    return f"{what} {version} -> {version + 1} ({words[:1].lower() + words[1:]})"


def pending_steps(store: MemoryStore) -> list[tuple[str, Callable[[], None]]]:
    """The steps that would bring this data folder up to date, named, in order (empty
    when it is current). Raises for a store or settings file from a newer lexmem."""
    paths = store.paths
    meta = store.read_meta()
    try:
        store_steps = (
            schema_steps(meta.get("schema_version", 1), STORE_SCHEMA_VERSION) if meta else range(0)
        )
    except ValueError as exc:
        raise StoreError(f"{store.meta_path}: {exc}; this folder is left as it is") from exc
    version = _settings_version(paths.settings)
    try:
        settings_steps = (
            range(0) if version is None else schema_steps(version, config.SCHEMA_VERSION)
        )
    except ValueError as exc:
        raise ConfigError(str(exc), path=str(paths.settings)) from exc
    out: list[tuple[str, Callable[[], None]]] = []
    for v in store_steps:
        step = STORE_STEPS[v]
        out.append((f"store {v} -> {v + 1} ({step.name})", partial(step.run, store)))
    if store_steps:
        out.append(("store: record the new layout", partial(_record_layout, store)))
    if settings_steps:
        names = ", ".join(
            _step_name("settings", v, config.MIGRATIONS[v].__doc__) for v in settings_steps
        )
        # load_settings applies config.MIGRATIONS and writes the file back atomically.
        out.append((names, partial(_write_settings, paths)))
    return out


def _record_layout(store: MemoryStore) -> None:
    store.write_meta(dict(store.read_meta(), schema_version=STORE_SCHEMA_VERSION))


def _write_settings(paths: Paths) -> None:
    from lexmem.settings import load_settings

    load_settings(paths, write_back=True)


def migrate_data_folder(store: MemoryStore) -> list[str]:
    """Bring the store and settings of this data folder up to date; return the names of
    the steps that ran (none when it was current). See the module's docstring."""
    if not pending_steps(store):
        return []
    with store.writing():
        steps = pending_steps(store)  # another process may have migrated it meanwhile
        if not steps:
            return []
        snapshot = _snapshot(store.paths)
        current = ""
        try:
            for current, run in steps:
                log.info("[MEM:STORE] Migrating %s: %s", store.paths.home, current)
                run()
        except BaseException as exc:  # noqa: BLE001 - whatever stopped a step (even Ctrl-C)
            _fail(store, snapshot, current, exc)
        shutil.rmtree(snapshot, ignore_errors=True)
        with contextlib.suppress(OSError):
            snapshot.parent.rmdir()  # only when no other snapshot is kept there
    return [name for name, _ in steps]


def _fail(store: MemoryStore, snapshot: Path, step: str, exc: BaseException) -> NoReturn:
    """Put the folder back as the snapshot holds it and raise one line naming the step."""
    cause = (str(exc).strip().splitlines() or [""])[0][:200]
    what = f"{type(exc).__name__}: {cause}" if cause else type(exc).__name__
    try:
        _roll_back(store.paths, snapshot)
    except Exception as undo:  # noqa: BLE001 - say both what failed and what is left
        raise StoreError(
            f"migrating {store.paths.home} failed at step '{step}' ({what}), and putting "
            f"it back failed too ({undo}): its state from before is in {snapshot}"
        ) from exc
    finally:
        store.refresh()
    raise StoreError(
        f"migrating {store.paths.home} failed at step '{step}' ({what}); the folder is "
        f"as it was (a copy from before is in {snapshot})"
    ) from exc


# -- the snapshot ------------------------------------------------------------------------------


def _snapshot(paths: Paths) -> Path:
    """The store and the settings file as they are, in ``migrations/<time>/``."""
    root = paths.home / "migrations"
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    target = root / stamp
    n = 1
    while target.exists():
        n += 1
        target = root / f"{stamp}-{n}"
    with secure_umask():
        target.mkdir(mode=DIR_MODE, parents=True)
    link_tree(paths.store, target / "store", hidden=True)
    if paths.settings.exists():
        with secure_umask():
            shutil.copy2(paths.settings, target / "settings.toml")
    return target


def _same(live: Path, kept: Path) -> bool:
    """Whether a live file still is what the snapshot kept (the same hard-linked file,
    or a copy with the same bytes)."""
    try:
        return live.samefile(kept) or filecmp.cmp(live, kept, shallow=False)
    except OSError:
        return False


def _put_back(kept: Path, live: Path) -> None:
    """Replace ``live`` by the snapshot's file, atomically (a copy under a temporary name,
    then a rename: :class:`~lexmem.base.atomic_writer`), with the kept file's mode."""
    with secure_umask():
        live.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    with (
        open(kept, "rb") as src,
        atomic_writer(live, mode=stat.S_IMODE(os.fstat(src.fileno()).st_mode)) as dst,
    ):
        shutil.copyfileobj(src, dst)


def _roll_back(paths: Paths, snapshot: Path) -> None:
    """Make the store and settings file exactly what the snapshot holds: remove what the
    failed steps wrote, put back what they changed, remove the folders they made."""
    kept_store = snapshot / "store"
    kept = set(tree_files(kept_store, hidden=True))
    for rel in tree_files(paths.store, hidden=True):
        if rel not in kept:
            (paths.store / rel).unlink()
    for rel in sorted(kept):
        if not _same(paths.store / rel, kept_store / rel):
            _put_back(kept_store / rel, paths.store / rel)
    for folder, dirs, _ in os.walk(paths.store, topdown=False):
        for name in dirs:
            path = Path(folder) / name
            if not (kept_store / path.relative_to(paths.store)).is_dir() and not any(
                path.iterdir()
            ):
                path.rmdir()
    settings = snapshot / "settings.toml"
    if settings.exists():
        if not _same(paths.settings, settings):
            _put_back(settings, paths.settings)
    else:
        paths.settings.unlink(missing_ok=True)
