"""The desktop integration (no Qt here): what the tray app reaches through the facade
(:mod:`lexmem.api` re-exports it) and ``lexmem install|uninstall desktop``.

- **Start at login**: a freedesktop.org Desktop Entry in ``$XDG_CONFIG_HOME/autostart``
  (``~/.config/autostart``) that runs ``lexmem app``.
- **The applications menu** (``lexmem install|uninstall desktop``): a Desktop Entry in
  ``$XDG_DATA_HOME/applications`` that runs the lexmem installation it was installed
  from (a virtual environment's script or the bundle's executable), and the icon in the
  hicolor theme. Uninstalling removes exactly those, the autostart entry, and the
  folders the install created.
- **Moving the data folder**: copy it to a new place, verify the copy, point lexmem at
  it (the location pointer of :mod:`lexmem.config`, which the hook follows too), and only
  then remove the old folder. Nothing is half-written when a step fails.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from lexmem.base import atomic_write
from lexmem.config import (
    CREATED_RECORD,
    DIR_MODE,
    FILE_MODE,
    Paths,
    default_home,
    resolve_paths,
    secure_umask,
    write_location,
)
from lexmem.errors import DataFolderError, InvalidInputError
from lexmem.locks import FileLock, LockTimeout

__all__ = [
    "AUTOSTART_NAME",
    "DESKTOP_ID",
    "DesktopChange",
    "DesktopPlan",
    "Moved",
    "apply_desktop",
    "autostart_command",
    "autostart_enabled",
    "autostart_path",
    "autostart_supported",
    "desktop_entry",
    "desktop_supported",
    "icon_path",
    "menu_command",
    "menu_entry_path",
    "move_data_folder",
    "plan_desktop",
    "set_autostart",
]

log = logging.getLogger("lexmem")

AUTOSTART_NAME = "lexmem.desktop"
#: The Desktop Entry id and icon name (the app sets its desktop file name to it).
DESKTOP_ID = "lexmem"
Progress = Callable[[int, int], None]


# -- start at login -----------------------------------------------------------------


def autostart_supported(platform: str | None = None) -> tuple[bool, str]:
    """Whether start-at-login works here, and why not (one line) when it does not."""
    plat = platform or sys.platform
    if plat.startswith("win") or plat == "darwin":
        return False, "start at login is not supported on this platform yet"
    return True, ""


def autostart_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/autostart/lexmem.desktop`` (``~/.config`` when unset or relative)."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "autostart" / AUTOSTART_NAME


def autostart_enabled(environ: Mapping[str, str] | None = None) -> bool:
    return autostart_path(environ).is_file()


def autostart_command(home: Path | None = None) -> list[str]:
    """The command that starts the app: this bundle, the ``lexmem`` script beside this
    interpreter, or ``lexmem`` on the PATH. ``home`` adds ``--home`` (an explicit
    ``LEXMEM_HOME`` the login session would not have)."""
    if getattr(sys, "frozen", False):
        exe = sys.executable
    else:
        name = "lexmem.exe" if os.name == "nt" else "lexmem"
        beside = Path(sys.executable).with_name(name)
        exe = str(beside) if beside.exists() else (shutil.which("lexmem") or "lexmem")
    return [exe, *(["--home", str(home)] if home is not None else []), "app"]


# Desktop Entry spec, "The Exec key": arguments with reserved characters are quoted, and
# inside quotes `"`, `` ` ``, `$` and `\` are escaped by a backslash; then the string as a
# whole is escaped once more as a string value (`\` becomes `\\`).
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def _exec_arg(arg: str) -> str:
    if arg and not (_RESERVED & set(arg)) and "%" not in arg and "=" not in arg:
        return arg
    inner = "".join("\\" + c if c in '"`$\\' else c for c in arg).replace("%", "%%")
    return f'"{inner}"'


def _string_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def desktop_entry(command: Sequence[str], *, menu: bool = False) -> str:
    """A Desktop Entry that starts ``command``: at login, quietly in the tray (the
    autostart entry), or with ``menu`` from the applications menu, named by the icon
    theme's ``lexmem`` that :func:`apply_desktop` puts in place.

    Version 1.4: the newest desktop-file-validate 0.26 (Debian 12) accepts; nothing here
    needs a key 1.5 added.
    """
    if not command or any("\n" in a or "\r" in a for a in command):
        raise InvalidInputError(f"the {'menu' if menu else 'autostart'} command must be one line")
    exec_line = " ".join(_exec_arg(a) for a in command)
    lines = [
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.4",
        "Name=lexmem",
        "GenericName=Agent memory",
    ]
    if menu:
        lines += [
            "Comment=Local-first memory for AI agents: search, review and remember",
            f"Exec={_string_value(exec_line)}",
            f"Icon={DESKTOP_ID}",
            "Terminal=false",
            "Categories=Utility;",
            "Keywords=memory;agent;notes;search;remember;",
            # The app's windows carry this class and Wayland app id (the app sets its
            # desktop file name to lexmem), so the launcher and the windows are one.
            f"StartupWMClass={DESKTOP_ID}",
            "StartupNotify=false",
        ]
    else:
        lines += [
            "Comment=Local-first memory for AI agents: capture and review in the tray",
            f"Exec={_string_value(exec_line)}",
            f"Icon={_string_value(_icon_path())}",
            "Terminal=false",
            "Categories=Utility;",
            "StartupNotify=false",
            "X-GNOME-Autostart-enabled=true",
        ]
    return "\n".join(lines) + "\n"


def _icon_path() -> str:
    """The packaged SVG when it is a real file, else the icon theme's name."""
    try:
        svg = files("lexmem_resources").joinpath("icons", "lexmem.svg")
        if isinstance(svg, Path) and svg.is_file():
            return str(svg)
    except (ImportError, OSError):
        pass
    return DESKTOP_ID


def _write_private(target: Path, data: bytes) -> None:
    """Write ``data`` owner-only and atomically (0600 in 0700)."""
    with secure_umask():
        target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    atomic_write(target, data, mode=FILE_MODE)


def set_autostart(
    enabled: bool,
    *,
    command: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Write (atomically, owner-only) or remove the autostart entry; returns its path."""
    supported, why = autostart_supported()
    target = autostart_path(environ)
    if not supported:
        raise InvalidInputError(why)
    if not enabled:
        try:
            target.unlink(missing_ok=True)
        except OSError as exc:
            raise DataFolderError(f"cannot remove ({exc.strerror})", path=str(target)) from exc
        return target
    text = desktop_entry(command or autostart_command())
    try:
        _write_private(target, text.encode("utf-8"))
    except OSError as exc:
        raise DataFolderError(
            f"cannot write the autostart entry ({exc.strerror})", path=str(target)
        ) from exc
    return target


# -- the applications menu ----------------------------------------------------------------


def menu_command(home: Path | None = None) -> list[str]:
    """What the menu entry runs: the app with its browser open (a person who picks it
    from a menu wants a window; a second launch raises the running app's window)."""
    return [*autostart_command(home), "--show"]


def _data_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_DATA_HOME", "").strip()
    return Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"


def menu_entry_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/applications/lexmem.desktop`` (``~/.local/share`` when unset)."""
    return _data_home(environ) / "applications" / f"{DESKTOP_ID}.desktop"


def icon_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/icons/hicolor/scalable/apps/lexmem.svg``: the fallback icon theme,
    which every icon theme inherits, in the size every desktop can scale."""
    return _data_home(environ) / "icons" / "hicolor" / "scalable" / "apps" / f"{DESKTOP_ID}.svg"


def _icon_bytes() -> bytes:
    try:
        return files("lexmem_resources").joinpath("icons", "lexmem.svg").read_bytes()
    except (ImportError, OSError) as exc:
        raise DataFolderError(
            "the lexmem icon is missing from this installation; reinstall lexmem",
            path="lexmem_resources/icons/lexmem.svg",
        ) from exc


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DataFolderError(
            f"cannot read ({exc.strerror}); nothing was changed", path=str(path)
        ) from exc


def _runs_lexmem(entry: bytes) -> bool:
    """Whether a Desktop Entry's Exec runs a program named lexmem (so it is lexmem's own,
    whichever installation wrote it)."""
    for line in entry.decode("utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "Exec":
            try:
                argv = shlex.split(value.replace("\\\\", "\\"))
            except ValueError:
                return False
            return bool(argv) and Path(argv[0]).name in ("lexmem", "lexmem.exe")
    return False


@dataclass(frozen=True, slots=True)
class DesktopChange:
    """One file of the desktop integration: its bytes now and after (``None``: absent)."""

    path: Path
    before: bytes | None
    after: bytes | None

    def describe(self) -> str:
        """A unified diff for text; one line for the icon."""
        if self.path.suffix != ".desktop":
            if self.after is None:
                return f"remove {self.path}\n"
            return f"{'create' if self.before is None else 'replace'} {self.path} (the lexmem icon, {len(self.after):,} bytes)\n"
        a = (self.before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        b = (self.after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        return "".join(
            difflib.unified_diff(
                a, b,
                fromfile=str(self.path) if self.before is not None else "/dev/null",
                tofile=str(self.path) if self.after is not None else "/dev/null",
            )
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class DesktopPlan:
    """What ``lexmem install|uninstall desktop`` would change (files), and the folders it
    would create (install) or remove again once empty (uninstall)."""

    action: str
    changes: tuple[DesktopChange, ...]
    folders: tuple[Path, ...]

    def describe(self) -> str:
        text = "".join(c.describe() for c in self.changes)
        if self.action == "uninstall":
            text += "".join(
                f"remove {f}{os.sep} (install created it) once empty\n" for f in self.folders
            )
        return text


def desktop_supported(platform: str | None = None) -> tuple[bool, str]:
    """Whether the menu entry can be installed here (freedesktop.org desktops), and why not."""
    plat = platform or sys.platform
    if plat.startswith("win") or plat == "darwin":
        return False, (
            "the desktop entry is for Linux desktops (freedesktop.org); on macOS and Windows "
            "start lexmem from its app bundle or folder"
        )
    return True, ""


def plan_desktop(
    action: str,
    *,
    command: Sequence[str] | None = None,
    paths: Paths,
    environ: Mapping[str, str] | None = None,
) -> DesktopPlan:
    """What installing or uninstalling the menu entry and icon would change; writes nothing.

    Install writes the menu entry (running ``command``, by default this lexmem's app) and
    the icon, replacing an older lexmem's; a ``lexmem.desktop`` that runs another program
    is refused. Uninstall removes both, the autostart entry, and the folders install
    created (recorded in the data folder's ``integrations.json``) once they are empty.
    """
    supported, why = desktop_supported()
    if not supported:
        raise InvalidInputError(why)
    if action not in ("install", "uninstall"):
        raise InvalidInputError(f"unknown action {action!r}")
    entry, icon = menu_entry_path(environ), icon_path(environ)
    entry_now = _read_bytes(entry)
    if entry_now is not None and not _runs_lexmem(entry_now):
        raise InvalidInputError(
            f"{entry} exists and starts another program; move it away first (nothing was changed)"
        )
    icon_now = _read_bytes(icon)
    changes: list[DesktopChange] = []
    if action == "install":
        text = desktop_entry(command or menu_command(), menu=True).encode("utf-8")
        for path, now, after in ((entry, entry_now, text), (icon, icon_now, _icon_bytes())):
            if now != after:
                changes.append(DesktopChange(path, now, after))
        new_folders: list[Path] = []
        for path in (entry, icon):
            for folder in reversed(path.parents):
                if not folder.exists() and folder not in new_folders:
                    new_folders.append(folder)
        return DesktopPlan(action, tuple(changes), tuple(new_folders))
    autostart = autostart_path(environ)
    for path, now in ((entry, entry_now), (icon, icon_now), (autostart, _read_bytes(autostart))):
        if now is not None:
            changes.append(DesktopChange(path, now, None))
    # Only the recorded folders on the way to these files: the record also lists the
    # agent settings files `lexmem install claude|codex` created.
    mine = {*entry.parents, *icon.parents}
    ours = sorted(
        (Path(p) for p in _recorded(paths) if Path(p) in mine), key=lambda p: -len(p.parts)
    )
    return DesktopPlan(action, tuple(changes), tuple(ours))


def _record(paths: Paths) -> dict[str, Any]:
    try:
        data = json.loads((paths.home / CREATED_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _recorded(paths: Paths) -> list[str]:
    """What ``lexmem install`` created (agent settings files, desktop folders)."""
    return [p for p in _record(paths).get("created", []) if isinstance(p, str)]


def _save_record(paths: Paths, created: set[str]) -> None:
    """Rewrite the record's list, keeping what the agent installs recorded in it."""
    if created == set(_recorded(paths)):
        return
    data = {**_record(paths), "created": sorted(created)}
    paths.ensure()
    _write_private(paths.home / CREATED_RECORD, (json.dumps(data, indent=2) + "\n").encode())


def apply_desktop(plan: DesktopPlan, paths: Paths) -> list[str]:
    """Carry out a plan; returns one line per file or folder, said to the user."""
    lines: list[str] = []
    try:
        if plan.action == "install":
            # Recorded before anything is created, so an interrupted install is undone too.
            _save_record(paths, {*_recorded(paths), *map(str, plan.folders)})
            for change in plan.changes:
                assert change.after is not None
                _write_private(change.path, change.after)
                lines.append(f"{'created' if change.before is None else 'wrote'} {change.path}")
                if change.path.suffix == ".svg" and change.path.parents[2].is_dir():
                    # A user icon cache (icon-theme.cache) is trusted only while it is
                    # newer than the theme's folder: touching it makes desktops look again.
                    os.utime(change.path.parents[2])
            return lines
        for change in plan.changes:
            change.path.unlink(missing_ok=True)
            lines.append(f"removed {change.path}")
        gone = set()
        for folder in plan.folders:
            try:
                folder.rmdir()
                lines.append(f"removed {folder}{os.sep}")
            except FileNotFoundError:
                pass
            except OSError:
                continue  # something else keeps files there now: the folder stays, recorded
            gone.add(str(folder))
        _save_record(paths, set(_recorded(paths)) - gone)
    except OSError as exc:
        raise DataFolderError(
            f"cannot {plan.action} the desktop entry ({exc.strerror})",
            path=str(exc.filename or paths.home),
        ) from exc
    return lines


# -- moving the data folder -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Moved:
    """A finished move: the new folder, what was copied, and anything left behind."""

    paths: Paths
    files: int
    size: int  # bytes copied
    #: The old folder when it could not be removed (the move itself succeeded); else "".
    left_behind: str = ""


def _holder_pid(lock: Path) -> int | None:
    try:
        return int(lock.read_text(encoding="ascii").strip() or "0") or None
    except (OSError, ValueError):
        return None


def _take_service_lock(paths: Paths) -> FileLock | None:
    """Hold the service lock; None when this very process holds it (its own service,
    which is the caller: it keeps running and waits for the store's write lock)."""
    lock = FileLock(paths.service_lock, timeout=0)
    try:
        lock.acquire()
    except LockTimeout as exc:
        pid = _holder_pid(paths.service_lock)
        if pid == os.getpid():
            return None
        who = f" (process {pid})" if pid else ""
        raise DataFolderError(
            f"a lexmem service in another process{who} uses the data folder; quit it first",
            path=str(paths.home),
        ) from exc
    return lock


def _plan(source: Path) -> tuple[list[Path], list[Path], list[Path], int]:
    """Folders, files and symlinks under ``source`` (relative), and the bytes to copy."""
    folders: list[Path] = []
    files: list[Path] = []
    links: list[Path] = []
    total = 0
    for root, dirs, names in os.walk(source):
        here = Path(root)
        rel = here.relative_to(source)
        for d in list(dirs):
            if (here / d).is_symlink():
                links.append(rel / d)
                dirs.remove(d)
            else:
                folders.append(rel / d)
        for n in names:
            p = here / n
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                links.append(rel / n)
            elif stat.S_ISREG(st.st_mode):
                files.append(rel / n)
                total += st.st_size
            else:
                raise DataFolderError(
                    "cannot copy a special file (a pipe, socket or device)", path=str(p)
                )
    return folders, files, links, total


def _copy_file(src: Path, dst: Path, tick: Callable[[int], None]) -> str:
    """Copy one file, returning the sha256 of what was read."""
    h = hashlib.sha256()
    with open(src, "rb") as fin, open(dst, "xb") as fout:
        while block := fin.read(1 << 20):
            h.update(block)
            fout.write(block)
            tick(len(block))
        fout.flush()
        os.fsync(fout.fileno())
    shutil.copystat(src, dst, follow_symlinks=False)
    return h.hexdigest()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _sync_inbox(source: Path, target: Path) -> int:
    """Copy events that reached the old inbox after the main copy; returns how many."""
    old, new = source / "inbox", target / "inbox"
    if not old.is_dir():
        return 0
    n = 0
    for event in sorted(old.glob("*.json")):
        dest = new / event.name
        if not dest.exists():
            new.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            # Hidden while written (".tmp-", as the inbox's own), so no drain reads it early.
            atomic_write(
                dest,
                event.read_bytes(),
                mode=stat.S_IMODE(event.stat().st_mode),
                tmp_prefix=f".tmp-{event.name}-",
            )
            n += 1
    return n


def _check_target(source: Path, target: Path) -> None:
    if not target.is_absolute():
        raise InvalidInputError(f"the new data folder must be an absolute path, not {target}")
    real_source, real_target = source.resolve(), target.resolve()
    if real_target == real_source:
        raise InvalidInputError(f"the data folder is already {source}")
    if real_source in real_target.parents:
        raise InvalidInputError(f"{target} is inside the data folder it would be moved from")
    if real_target in real_source.parents:
        raise InvalidInputError(f"{target} holds the data folder itself; choose an empty folder")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidInputError(f"{target} is not empty; choose an empty or a new folder")
    nearest = next(a for a in target.parents if a.exists())
    if not nearest.is_dir():
        raise InvalidInputError(f"{nearest} is not a folder")


def move_data_folder(
    paths: Paths,
    target: Path,
    *,
    progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
) -> Moved:
    """Move the data folder to ``target`` (empty or absent) and point lexmem at it.

    The steps: hold the service lock (refused while a service in another process runs;
    this process's own service is the caller and only waits for the store's write lock)
    and the store's write lock; copy into a hidden folder beside ``target`` with
    ``progress(bytes_done, bytes_total)``; verify every file's sha256; rename it into
    place; write the location pointer atomically; then remove the old folder. A failure
    before the pointer is written removes the copy and leaves everything as it was.

    Constraint: the pointer only applies when ``LEXMEM_HOME`` is not set, so a move
    under ``LEXMEM_HOME`` is refused (change the variable instead); and only the folder
    lexmem resolves to can be moved, or the pointer would redirect another one.
    """
    env = os.environ if environ is None else environ
    source = paths.home
    if env.get("LEXMEM_HOME", "").strip():
        raise InvalidInputError(
            "LEXMEM_HOME is set: change it to use another data folder (moving would not apply)"
        )
    if resolve_paths(env).home.resolve() != source.resolve():
        raise InvalidInputError(
            f"{source} is not the data folder lexmem uses, so it cannot be moved"
        )
    if not source.is_dir():
        raise DataFolderError("there is no data folder to move", path=str(source))
    target = target.expanduser()
    _check_target(source, target)

    service = _take_service_lock(paths)
    try:
        # Every store write takes this lock: holding it, the copy is one consistent state.
        writes = FileLock(paths.write_lock, timeout=60.0)
        try:
            writes.acquire()
        except LockTimeout as exc:
            raise DataFolderError(
                "the store stayed busy for a minute (a long write is running); try again later",
                path=str(paths.home),
            ) from exc
        try:
            moved = _copy_and_switch(source, target, progress, env)
            # Removed while the locks are held, so no service can start on the old folder
            # in between (the lock files go with it; the held descriptors stay valid).
            left = _remove_old(source)
        finally:
            writes.release()
    finally:
        if service is not None:
            service.release()
    log.info("[MEM:STORE] Moved the data folder from %s to %s", source, target)
    return Moved(moved.paths, moved.files, moved.size, left)


def _remove_old(source: Path) -> str:
    """Remove the old folder; its path when that failed (the move itself stands)."""
    try:
        shutil.rmtree(source)
    except OSError as exc:
        log.warning("[MEM:STORE] moved the data folder, but could not remove %s: %s", source, exc)
        return str(source)
    return ""


def _copy_and_switch(
    source: Path, target: Path, progress: Progress | None, env: Mapping[str, str]
) -> Moved:
    folders, files, links, total = _plan(source)
    staging = target.parent / f".{target.name}.lexmem-moving-{os.getpid()}"
    existed = target.exists()
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    placed = False
    # Folders above the target that do not exist yet (a fresh platform folder): created,
    # and removed again if the move fails.
    created = next((a for a in reversed(target.parents) if not a.exists()), None)
    try:
        with secure_umask():
            target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            if staging.exists():
                shutil.rmtree(staging)  # left by a move that died; it was never in use
            staging.mkdir(mode=DIR_MODE)
            for rel in folders:
                (staging / rel).mkdir(mode=DIR_MODE)
            digests = {rel: _copy_file(source / rel, staging / rel, tick) for rel in files}
            for rel in links:
                (staging / rel).symlink_to(os.readlink(source / rel))
            for rel, digest in digests.items():
                if _sha256(staging / rel) != digest:
                    raise DataFolderError(
                        "the copy does not match the original", path=str(staging / rel)
                    )
            if existed:
                target.rmdir()
            os.replace(staging, target)
            placed = True
            _sync_inbox(source, target)
            home = target.absolute()
            write_location(None if home == default_home(env) else home, env)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if placed:
            shutil.rmtree(target, ignore_errors=True)
        if existed and not target.exists():
            target.mkdir(mode=DIR_MODE)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    # The pointer names the new folder now: from here on nothing is rolled back.
    try:
        _sync_inbox(source, target)  # events a hook wrote just before the switch
    except OSError as exc:
        log.warning("[MEM:STORE] events left in %s/inbox after the move: %s", source, exc)
    return Moved(Paths(target.absolute()), len(files), total)
