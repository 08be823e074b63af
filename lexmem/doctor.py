"""``lexmem doctor``: checks that say what is wrong and how to put it right.

Damage and repair: every table of the store is opened and read in full, so a truncated
or overwritten manifest or data file shows as ``fail`` with its cause; ``lexmem doctor
--repair`` takes each damaged table back to its newest version that reads in full
(:mod:`lexmem.store.repair` does both and says what a repair loses). Repair refuses while the
service runs: it must be the only process touching the store.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from lexmem.config import Paths, resolve_paths
from lexmem.errors import LexmemError, StoreDamagedError, StoreIOError, io_failure
from lexmem.settings import Settings, load_settings
from lexmem.store.repair import Check, check_tables, repair_store, table_names

__all__ = ["Check", "run_checks"]


class _Damaged(Exception):
    """A table that does not read in full (the detail says which, and what to run)."""


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
    if not paths.home.is_dir():
        return Check("permissions", "warn", f"not checked: {paths.home} is not there")
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
    from lexmem import keystore

    ok, detail = keystore.backend_available()
    if ok:
        return Check("keyring", "ok", detail)
    return Check(
        "keyring", "warn",
        f"{detail}: a licence key can come from LEXMEM_LICENCE or LEXMEM_LICENCE_FILE instead, "
        "and an LLM endpoint's API key cannot be kept",
    )  # fmt: skip


def _check_data_folder(paths: Paths) -> Check:
    try:
        paths.ensure()
        probe = paths.home / ".doctor-probe"
        try:
            probe.write_text("ok")
        except OSError as exc:
            reason = io_failure(exc) or exc.strerror or str(exc)
            return Check("data folder", "fail", f"{paths.home} cannot be written ({reason})")
        probe.unlink()
        free = shutil.disk_usage(paths.home).free
    except (LexmemError, OSError) as exc:
        return Check("data folder", "fail", str(exc))
    state = "ok" if free > 200e6 else "warn"
    return Check("data folder", state, f"{paths.home} (writable, {free / 1e9:.1f} GB free)")


def _check_links(store: Any) -> Check | None:
    """Links whose memory is not in the store (a memory lost, e.g. by an incomplete
    import): a problem doctor names, with one example; None when there are none."""
    from lexmem.store.schema import LINKS

    ids = set(store.arrow_table("memories", ["id"]).column("id").to_pylist())
    links = store.arrow_table(LINKS, ["id", "from_id", "to_id"])
    dangling = [
        (link_id, a if a not in ids else b)
        for link_id, a, b in zip(
            links.column("id").to_pylist(),
            links.column("from_id").to_pylist(),
            links.column("to_id").to_pylist(),
            strict=True,
        )
        if a not in ids or b not in ids
    ]
    if not dangling:
        return None
    link_id, missing = dangling[0]
    # A warning, not a failure: the store itself reads, and a team's memory that was
    # never shared here can be the missing end of a link pulled with its other end.
    return Check(
        "links", "warn",
        f"{len(dangling)} of {links.num_rows} links point to a memory that is not in the store "
        f"(e.g. link {link_id} to {missing}): a memory lost, as by an incomplete import, "
        "that an export or backup holding it can bring back",
    )  # fmt: skip


def run_checks(home: str | None = None, *, fix: bool = False, repair: bool = False) -> list[Check]:
    """Run every check (after repairing damaged tables, with ``repair``); never raises
    for a problem it can describe. Each check runs whatever the others found: a data
    folder that cannot be written (read-only, full) fails its own check, and the store,
    the model and the rest are still read and reported."""
    checks: list[Check] = []
    paths = Paths(Path(home).expanduser().absolute()) if home else resolve_paths()
    # Look before ensure(): it tightens the folder, and the user should hear that it was loose.
    try:
        loose_before = _loose(paths) if paths.home.exists() and os.name == "posix" else []
    except OSError:
        loose_before = []
    checks.append(_check_data_folder(paths))
    try:
        checks.append(_check_permissions(paths, fix, loose_before))
    except OSError as exc:
        checks.append(Check("permissions", "fail", f"cannot check or tighten them ({exc})"))
    settings_note = ""
    try:
        # No write-back: opening the store below migrates the file with the store, all
        # or nothing (lexmem.store.migrations).
        settings = load_settings(paths, write_back=False)
        checks.append(Check("settings", "ok", f"{paths.settings} (schema {settings.schema_version})"
                            if paths.settings.exists() else "defaults (no settings.toml yet)"))  # fmt: skip
    except (LexmemError, OSError) as exc:
        checks.append(Check("settings", "fail", str(exc)))
        settings = Settings()
        settings_note = " (checked with the default settings: settings.toml does not load)"
    if repair:
        try:
            checks.extend(repair_store(paths))
        except (LexmemError, OSError) as exc:
            checks.append(Check("repair", "fail", str(exc)))
    try:
        had_tables = bool(table_names(paths))
        tables = check_tables(paths)  # before anything opens (or migrates) the store
    except OSError as exc:
        had_tables, tables = False, Check("tables", "fail", f"cannot read the store ({exc})")

    from lexmem.embedder import Embedder

    embedder = Embedder(settings.embedding, paths.models)
    try:
        vec = embedder.embed_one("lexmem doctor checks the embedding model")
        checks.append(
            Check("model", "ok", f"{embedder.model_name}: loads offline, {len(vec)}-number vectors")
        )
    except (LexmemError, OSError) as exc:
        checks.append(Check("model", "fail", f"{exc}{settings_note}"))

    from lexmem.store.backends import make_store

    try:
        if tables.state == "fail":
            raise _Damaged(tables.detail)
        store = make_store(
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
        try:
            found = _check_links(store)
        except Exception as exc:  # noqa: BLE001 - a report, whatever the store says
            found = Check("links", "fail", f"cannot read the links ({type(exc).__name__}: {exc})")
        if found is not None:
            checks.append(found)
        store.close()
    except (StoreDamagedError, StoreIOError) as exc:  # the engine's own words, as before
        raw = exc.__cause__ or exc
        checks.append(
            Check("store", "fail", f"cannot open the store ({type(raw).__name__}: {raw})")
        )
    except (LexmemError, _Damaged) as exc:
        checks.append(Check("store", "fail", f"{exc}{settings_note}"))
    except Exception as exc:  # noqa: BLE001 - a damaged store must still produce a report
        checks.append(
            Check("store", "fail", f"cannot open the store ({type(exc).__name__}: {exc})")
        )
    checks.append(_check_keyring())
    checks.append(_check_services())
    try:
        checks.extend(_check_integrations(paths, embedder))
    except Exception as exc:  # noqa: BLE001 - one check failing must not hide the others
        checks.append(
            Check(
                "agents", "fail", f"could not check the agent set-ups ({type(exc).__name__}: {exc})"
            )
        )
    return checks


def _check_services() -> Check:
    """The lexmem services of this user, and any whose data folder was deleted. A service
    whose data folder lexmem cannot tell (a relative path, its working folder unreadable)
    is said to be so, never called stale."""
    from lexmem.service.registry import services

    running = services()
    orphans = [s for s in running if s.known and not s.folder_exists]
    unknown = [s for s in running if not s.known]
    untold = "".join(
        f"; pid {s.pid} for {s.home} (relative to a working folder lexmem cannot read: "
        "cannot tell whether it still exists)"
        for s in unknown
    )
    if orphans:
        listed = "; ".join(f"pid {s.pid} for {s.home}" for s in orphans)
        pids = " ".join(str(s.pid) for s in orphans)
        return Check("services", "warn",
                     f"{len(orphans)} running for a data folder that is gone ({listed}): "
                     f"`kill {pids}`{untold}")  # fmt: skip
    if not running:
        return Check("services", "ok", "no lexmem service running")
    told = "; ".join(f"pid {s.pid} for {s.home}" for s in running if s.known)
    return Check("services", "ok", (told + untold).removeprefix("; "))


def _check_integrations(paths: Paths, embedder: Any) -> list[Check]:
    """Where lexmem is set up in the agents, whether the service runs, and whether the hook works."""
    from lexmem.agents.integrations import check_hook, installed, service_state
    from lexmem.api import Lexmem

    checks = [Check(f.name, f.state, f.detail) for f in (*installed(), service_state(paths))]
    try:
        hook = check_hook(paths, lambda: Lexmem.open(paths.home, embedder=embedder))
        checks.append(Check(hook.name, hook.state, hook.detail))
    except Exception as exc:  # noqa: BLE001 - a broken store must still produce a report
        checks.append(
            Check("hook", "fail", f"could not test the hook ({type(exc).__name__}: {exc})")
        )
    return checks
