"""The services running for this user, so that ``doctor`` can name the orphans.

A service records itself in the per-user state folder (``<state>/services/<pid>.json``:
its process id and data folder) while it runs. A service whose data folder was
deleted notices and stops by itself (the writer loop checks); :func:`services` also
finds older ones on Linux, through ``/proc``: a ``lexmem serve`` process of this user
whose working folder (the hook starts it there) or ``LEXMEM_HOME`` names its folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from lexmem.base import Frozen, atomic_write
from lexmem.config import DIR_MODE, FILE_MODE, secure_umask, state_dir

__all__ = ["RunningService", "register", "services", "unregister"]


class RunningService(Frozen):
    """A lexmem service process and the data folder it serves."""

    __slots__ = ("home", "pid")
    __match_args__ = ("pid", "home")

    pid: int
    home: Path

    def __init__(self, pid: int, home: Path) -> None:
        super().__init__(pid, home)

    @property
    def known(self) -> bool:
        """Whether lexmem can tell which folder this is (a relative path it could not
        resolve against the service's own working folder cannot be)."""
        return self.home.is_absolute()

    @property
    def folder_exists(self) -> bool:
        return self.known and self.home.is_dir()


def _folder(environ: Mapping[str, str] | None) -> Path:
    return state_dir(environ) / "services"


def register(home: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """Record this process as the service for ``home``; the record's path (``None`` if
    the state folder cannot be written: the record is a courtesy)."""
    folder = _folder(environ)
    record = folder / f"{os.getpid()}.json"
    try:
        with secure_umask():
            folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        atomic_write(record, json.dumps({"pid": os.getpid(), "home": str(home)}) + "\n",
                     mode=FILE_MODE, durable=False)  # fmt: skip
    except OSError:
        return None
    return record


def unregister(record: Path | None) -> None:
    if record is not None:
        with contextlib.suppress(OSError):
            record.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process took the number: not ours
        return False
    return True


def _recorded(environ: Mapping[str, str] | None) -> dict[int, Path]:
    found: dict[int, Path] = {}
    folder = _folder(environ)
    with contextlib.suppress(OSError):
        for record in folder.glob("*.json"):
            try:
                data = json.loads(record.read_text(encoding="utf-8"))
                pid, home = int(data["pid"]), Path(str(data["home"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if _alive(pid):
                found[pid] = home
            else:  # a service that was killed: its record goes with it
                with contextlib.suppress(OSError):
                    record.unlink()
    return found


def _home_of(entry: Path, home: Path) -> Path:
    """A service's data folder as it sees it: a relative ``LEXMEM_HOME`` is relative to
    the service's working folder, not to the one asking. When that cannot be read, the
    path stays relative (:attr:`RunningService.known` is then false)."""
    home = home.expanduser()
    if home.is_absolute():
        return home
    try:
        cwd = os.readlink(entry / "cwd")
    except OSError:
        return home
    return Path(cwd.removesuffix(" (deleted)")) / home


def _from_proc() -> dict[int, Path]:
    """``lexmem serve`` processes of this user, from ``/proc`` (Linux)."""
    found: dict[int, Path] = {}
    proc = Path("/proc")
    if not sys.platform.startswith("linux") or not proc.is_dir():
        return found
    uid = os.getuid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            words = [os.path.basename(a.decode("utf-8", "replace")) for a in argv if a]
            if "serve" not in words or not any(w.startswith("lexmem") for w in words):
                continue
            env = dict(
                item.split(b"=", 1)
                for item in (entry / "environ").read_bytes().split(b"\0")
                if b"=" in item
            )
            home = env.get(b"LEXMEM_HOME")
            if home:
                found[int(entry.name)] = _home_of(entry, Path(os.fsdecode(home)))
            else:  # the hook starts a service in its data folder
                cwd = os.readlink(entry / "cwd")
                found[int(entry.name)] = Path(cwd.removesuffix(" (deleted)"))
        except (OSError, ValueError):
            continue
    return found


def services(environ: Mapping[str, str] | None = None) -> list[RunningService]:
    """Every lexmem service of this user still running, by process id."""
    found = _from_proc()
    found.update(_recorded(environ))
    return [RunningService(pid, home) for pid, home in sorted(found.items())]
