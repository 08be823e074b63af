"""Inter-process file locks (standard library only).

The store is written by one process at a time: writers take an exclusive lock
on a file in the data folder. The lock is advisory (flock on POSIX, msvcrt on
Windows) and released by the operating system if the holder dies, so a crash
never leaves the store locked.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import TracebackType

from .errors import LexmemError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lexmem.config import Paths

__all__ = ["FileLock", "LockTimeout", "held_here", "service_running"]

# The lock files this process holds now (by path), and how many FileLock objects hold
# each: a second FileLock on the same file in the same process would wait on the first.
_HELD: dict[str, int] = {}


def _key(path: Path) -> str:
    return os.path.abspath(path)


def held_here(path: Path) -> bool:
    """True when a :class:`FileLock` of this process holds the lock file ``path``."""
    return _HELD.get(_key(path), 0) > 0


class LockTimeout(LexmemError, OSError):
    """The lock stayed held by another process for longer than the timeout."""


class FileLock:
    """An exclusive, re-entrant (per object) lock on ``path``.

    ``timeout=None`` waits forever; ``0`` tries once.
    """

    def __init__(self, path: Path, timeout: float | None = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            self._depth += 1
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        delay = 0.005
        while True:
            if _try_lock(fd):
                break
            if deadline is not None and time.monotonic() >= deadline:
                os.close(fd)
                raise LockTimeout(f"{self.path} is held by another process")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        self._fd = fd
        self._depth = 1
        key = _key(self.path)
        _HELD[key] = _HELD.get(key, 0) + 1
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the pid is a courtesy for people reading the file, not the lock itself

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth > 0:
            return
        fd, self._fd = self._fd, None
        key = _key(self.path)
        if _HELD.get(key, 0) <= 1:
            _HELD.pop(key, None)
        else:
            _HELD[key] -= 1
        _unlock(fd)
        os.close(fd)

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            pass

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def service_running(paths: Paths) -> bool:
    """True when a process holds the service lock (the lock is released if it dies).

    The probe only reads: it neither creates the lock file nor writes its own pid
    into it, so it never disturbs what a person reading the file sees.
    """
    try:
        fd = os.open(paths.service_lock, os.O_RDONLY)
    except OSError:
        return False  # no lock file: no service ever ran on this data folder
    try:
        if os.name == "nt":  # pragma: no cover - Windows only
            probe = FileLock(paths.service_lock, timeout=0)
            try:
                probe.acquire()
            except LockTimeout:
                return True
            probe.release()
            return False
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return False
    finally:
        os.close(fd)
