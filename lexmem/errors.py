"""lexmem's exceptions: one root, subclasses that carry what went wrong.

    LexmemError                 every error lexmem raises on purpose
    ├── ConfigError             a settings file or option that cannot be used
    ├── DataFolderError         the data folder is missing, unwritable or has loose permissions
    ├── ModelError              the embedding model cannot be found, verified or loaded
    ├── StoreError              the store cannot be read or written
    │   ├── NotFoundError       no memory (or link) with that id
    │   ├── StoreLockedError    another process holds the write lock for too long
    │   ├── StoreIOError        the machine failed a read or write of the store (disk full, ...)
    │   ├── StoreDamagedError   a table of the store cannot be read: `lexmem doctor` repairs it
    │   ├── SchemaTooNewError   a team database laid out by a newer lexmem: refused untouched
    │   └── WriterElsewhereError  a write outside the single writer (a service elsewhere)
    ├── InvalidInputError       a value a user or caller gave is unusable
    │   ├── ChunkerError        (lexmem.capture.chunker) empty text, invalid UTF-8, bad chunk sizes
    │   └── BadEvent            (lexmem.capture.inbox) an inbox file that is not a valid event
    ├── ImportFormatError       an export folder that cannot be imported
    ├── LockTimeout             (lexmem.locks) a lock stayed held past its timeout (an OSError too)
    ├── ServiceBusyError        (lexmem.service.writer) another process runs the service
    ├── LicenceError, LicenceRequiredError   (lexmem.licence)
    ├── SecretStoreError        (lexmem.keystore) the OS keyring cannot be used
    └── LlmError                (lexmem.llm) the optional LLM endpoint failed

Every message is one line a person can act on; the CLI prints it as it is.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DataFolderError",
    "ImportFormatError",
    "InvalidInputError",
    "LexmemError",
    "ModelError",
    "NotFoundError",
    "SchemaTooNewError",
    "StoreDamagedError",
    "StoreError",
    "StoreIOError",
    "StoreLockedError",
    "WriterElsewhereError",
    "io_failure",
]


class LexmemError(Exception):
    """Root of lexmem's own errors; ``str(error)`` is a one-line message."""

    exit_code = 1


class ConfigError(LexmemError):
    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class DataFolderError(LexmemError):
    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{message}: {path}")
        self.path = path


class ModelError(LexmemError):
    def __init__(self, message: str, *, model: str) -> None:
        super().__init__(f"embedding model {model}: {message}")
        self.model = model


class StoreError(LexmemError):
    pass


class NotFoundError(StoreError):
    exit_code = 3

    def __init__(self, what: str, ident: str) -> None:
        super().__init__(f"no {what} with id {ident}")
        self.what = what
        self.ident = ident


class StoreLockedError(StoreError):
    def __init__(self, path: str, waited: float) -> None:
        super().__init__(
            f"the store is busy (another lexmem process held {path} for {waited:.0f}s)"
        )
        self.path = path


class StoreIOError(StoreError):
    """The machine failed a read or write of the store (full, read-only, failing disk):
    ``reason`` is the operating system's (:func:`io_failure`). The backend's own error is
    the ``__cause__``."""

    def __init__(self, reason: str, *, path: str | None = None) -> None:
        super().__init__(f"the store could not be read or written ({reason})")
        self.reason = reason
        self.path = path


class StoreDamagedError(StoreError):
    """A table of the store cannot be read (a damaged or missing file): damage, not a bug
    to report. ``cause`` is the backend's one-line reason, ``path`` the store's folder and
    ``table`` the table when the backend knows it; the backend's error is the ``__cause__``."""

    def __init__(self, cause: str, *, path: str | None = None, table: str | None = None) -> None:
        super().__init__(
            f"the store cannot be read ({cause}): "
            "run `lexmem doctor` to check it and `lexmem doctor --repair` to repair it"
        )
        self.cause = cause
        self.path = path
        self.table = table


class SchemaTooNewError(StoreError):
    """A database whose schema a newer lexmem laid out (``found`` is past ``known``, the
    newest this lexmem has steps for): it is refused before anything in it changes.
    ``where`` names the database without credentials."""

    def __init__(self, where: str, *, found: int, known: int) -> None:
        super().__init__(
            f"{where} has lexmem schema version {found}, newer than this lexmem knows "
            f"({known}): update lexmem to use it; the database is left as it is"
        )
        self.where = where
        self.found = found
        self.known = known


class WriterElsewhereError(StoreError):
    """A commit from a process that is not the store's single writer while another
    process is: a write that should have gone through the service."""


class InvalidInputError(LexmemError):
    exit_code = 2


class ImportFormatError(LexmemError):
    exit_code = 2


# What the file system says when the machine, not lexmem, is the problem: full, over
# quota, read-only, failing, or not ours to write.
_IO_ERRNO_NAMES = ("ENOSPC", "EDQUOT", "EROFS", "EIO", "EFBIG", "EACCES", "EPERM")


def io_failure(exc: BaseException) -> str | None:
    """The operating system's reason ("No space left on device") when ``exc``, or what
    caused it, is a failed file read or write; None for anything else.

    Python raises :class:`OSError`; LanceDB's Rust core a ``RuntimeError`` ending in
    "(os error 28)"; DuckDB an ``IOException`` carrying ``"errno":"28"``.
    """
    import errno
    import os
    import re

    wanted = {getattr(errno, name) for name in _IO_ERRNO_NAMES if hasattr(errno, name)}
    seen: BaseException | None = exc
    for _ in range(8):  # the exception, its cause, and theirs
        if seen is None:
            break
        code = seen.errno if isinstance(seen, OSError) else None
        if not isinstance(code, int):
            found = re.search(r"os error (\d+)|\"errno\":\s*\"?(\d+)", str(seen))
            code = int(found.group(1) or found.group(2)) if found else None
        if code is not None and code in wanted:
            return os.strerror(code)
        seen = seen.__cause__ or seen.__context__
    return None
