"""Two building blocks under everything else: writing a file atomically
(:func:`atomic_write`, :class:`atomic_writer`) and the frozen value class (:class:`Frozen`).

Standard library only, and nothing slow to import: the hook imports this module on every
call. No ``typing``, ``dataclasses``, ``tempfile`` (it pulls in ``random`` and ``shutil``)
or ``contextlib`` at import time; each would cost the agent milliseconds. It imports no
other lexmem module: it is the bottom layer.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import BinaryIO

__all__ = ["FILE_MODE", "Frozen", "atomic_write", "atomic_writer"]

FILE_MODE = 0o600

_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation on the descriptor
_NAME_TRIES = 100


# -- atomic writes -----------------------------------------------------------------------------


def _sync_folder(folder: str) -> None:
    """fsync ``folder``, so that a rename into it survives a power cut.

    Constraint: the file is already in place when this runs; a file system that cannot
    sync a folder (Windows, some network and FUSE file systems) must not turn a finished
    write into a failure, so its refusal is ignored.
    """
    if os.name != "posix":
        return
    try:
        fd = os.open(folder or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _discard(fh: BinaryIO | None, tmp: str) -> None:
    """Close and remove a temporary file after a failure (which is what gets raised).
    (No ``contextlib.suppress``: the hook would pay for importing it.)"""
    if fh is not None:
        try:  # noqa: SIM105
            fh.close()
        except OSError:
            pass
    try:  # noqa: SIM105
        os.unlink(tmp)
    except OSError:
        pass


class atomic_writer:
    """Context manager: write ``path`` atomically; the body writes bytes to the file given.

    The bytes go to a new temporary file in the same folder, under a unique name
    (``tmp_prefix``, default ``.<name>.``, then random hex, then ``.tmp``: a hidden name
    that never ends like the real files, so no reader takes it for one). When the body
    ends without an error the file is flushed and fsynced, has exactly ``mode`` (whatever
    the umask), is renamed over ``path`` (``os.replace``) and its folder is fsynced: ``path``
    then holds either all of the old bytes or all of the new ones, even after a crash. On
    any failure, in the body or in the writing, the temporary file is removed and the
    error raised on; ``path`` is left as it was.

    ``durable=False`` skips both fsyncs, for files that are a courtesy (a job's progress,
    a search's access record): readers still see all or nothing, but a crash may lose the
    file, or leave it empty, and its reader must take that as "nothing".

    The folder must exist: creating it (and with what mode) is the caller's business.
    """

    __slots__ = ("_file", "_tmp", "durable", "mode", "path", "tmp_prefix")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: int = FILE_MODE,
        tmp_prefix: str | None = None,
        durable: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.mode = mode
        self.tmp_prefix = tmp_prefix
        self.durable = durable
        self._file: BinaryIO | None = None
        self._tmp = ""

    def __enter__(self) -> BinaryIO:
        folder, name = os.path.split(self.path)
        prefix = f".{name}." if self.tmp_prefix is None else self.tmp_prefix
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY
        for attempt in range(_NAME_TRIES):
            tmp = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}.tmp")
            try:
                fd = os.open(tmp, flags, self.mode)
            except FileExistsError:  # 48 random bits: practically never
                if attempt + 1 == _NAME_TRIES:
                    raise
                continue
            break
        self._tmp = tmp
        try:
            # Only when the umask took bits away (a 0644 file under umask 077): a file system
            # that refuses modes (FAT, some shares) then fails only a write that needs one.
            if os.name == "posix" and os.fstat(fd).st_mode & 0o7777 != self.mode:
                os.fchmod(fd, self.mode)
            fh = open(fd, "wb")  # closed by __exit__
        except BaseException:
            os.close(fd)
            _discard(None, tmp)
            raise
        self._file = fh
        return fh

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        fh, tmp = self._file, self._tmp
        self._file = None
        if exc_type is not None:
            _discard(fh, tmp)
            return
        assert fh is not None
        try:
            fh.flush()
            if self.durable:
                os.fsync(fh.fileno())
            fh.close()
            if os.name != "posix":
                os.chmod(tmp, self.mode)
            os.replace(tmp, self.path)
        except BaseException:
            _discard(fh, tmp)
            raise
        if self.durable:
            _sync_folder(os.path.dirname(self.path))


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    mode: int = FILE_MODE,
    encoding: str = "utf-8",
    tmp_prefix: str | None = None,
    durable: bool = True,
) -> None:
    """Replace ``path``'s content by ``data`` atomically: all of it or none of it, even
    after a crash (see :class:`atomic_writer`, and its ``durable``). Text is encoded with
    ``encoding`` and written as it is (no newline translation). The file gets exactly
    ``mode``. Raises ``OSError`` (after removing the temporary file) when the write fails."""
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_writer(path, mode=mode, tmp_prefix=tmp_prefix, durable=durable) as fh:
        fh.write(data)


# -- frozen value classes ----------------------------------------------------------------------


class Frozen:
    """Base of the small frozen value classes the hook uses, with the surface of
    ``@dataclass(frozen=True, slots=True)``: equality, hash, repr, ``match``, copy and
    pickle, all from the fields. (Importing ``dataclasses`` would cost the hook ~7 ms.)

    A subclass names its fields in ``__match_args__`` (in the order of its ``__init__``'s
    parameters) and in ``__slots__``, and its ``__init__`` passes their values on::

        class Point(Frozen):
            __slots__ = ("x", "y")
            __match_args__ = ("x", "y")
            x: int
            y: int

            def __init__(self, x: int, y: int) -> None:
                super().__init__(x, y)
    """

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    def __init__(self, *values: object) -> None:
        for name, value in zip(self.__match_args__, values, strict=True):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Frozen)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[type[Frozen], tuple[object, ...]]:
        return (type(self), self._values())
