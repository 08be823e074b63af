"""lexmem's exceptions: one root, subclasses that carry what went wrong.

    LexmemError                 every error lexmem raises on purpose
    ├── ConfigError             a settings file or option that cannot be used
    ├── DataFolderError         the data folder is missing, unwritable or has loose permissions
    ├── ModelError              the embedding model cannot be found, verified or loaded
    ├── StoreError              the store cannot be read or written
    │   ├── NotFoundError       no memory (or link) with that id
    │   └── StoreLockedError    another process holds the write lock for too long
    ├── InvalidInputError       a value a user or caller gave is unusable
    │   └── ChunkerError        (lexmem.chunker) empty text, invalid UTF-8, bad chunk sizes
    └── ImportFormatError       an export folder that cannot be imported

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
    "StoreError",
    "StoreLockedError",
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


class InvalidInputError(LexmemError):
    exit_code = 2


class ImportFormatError(LexmemError):
    exit_code = 2
