"""The memories on PostgreSQL + pgvector: :class:`PostgresStore` implements
:class:`lexmem.store.protocol.MemoryBackend` over the team schema
(:mod:`lexmem.store.postgres.schema`), with the promises of each operation's docstring
there.

``[store] url`` names the database, without its password; a password, when the server
asks for one, is in the OS keyring. The data folder (:attr:`paths`) still holds what is
local: settings, the service's socket and locks, logs, the model.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Self, TypeVar

from lexmem.config import Paths
from lexmem.errors import ConfigError, StoreError
from lexmem.settings import StoreSettings
from lexmem.store.postgres.db import Database
from lexmem.store.postgres.migrations import migrate, read_meta

__all__ = ["PostgresStore"]

_T = TypeVar("_T")


class PostgresStore:
    """The memories, their links and confidence history in a PostgreSQL database."""

    def __init__(
        self,
        paths: Paths,
        *,
        dim: int,
        space_id: str,
        settings: StoreSettings | None = None,
        url: str | None = None,
    ) -> None:
        self.paths = paths
        self.dim = dim
        self.space_id = space_id
        self.settings = settings or StoreSettings()
        self.url = url if url is not None else self.settings.url
        if not self.url.strip():
            raise ConfigError("store.backend is postgres but store.url names no database")
        self.db = Database(self.url)
        self._stored_space = space_id

    # -- what it is -----------------------------------------------------------------

    @property
    def stored_space(self) -> str:
        return self._stored_space

    @property
    def needs_reembed(self) -> bool:
        return self._stored_space != self.space_id

    # -- opening, reading, writing --------------------------------------------------

    def open(self) -> Self:
        self.db.open()
        try:
            with self.db.connection() as conn:
                conn.autocommit = True
                try:
                    migrate(conn, dim=self.dim, space=self.space_id)
                    meta = read_meta(conn)
                finally:
                    conn.autocommit = False
        except StoreError:
            self.db.close()
            raise
        self._stored_space = meta.get("embedding_space", self.space_id)
        return self

    def close(self) -> None:
        self.db.close()

    def refresh(self) -> None:
        """Every read is a fresh statement: there is nothing to refresh."""

    def reading(self, read: Callable[[], _T]) -> _T:
        return read()

    def writing(self) -> AbstractContextManager[None]:
        return self.db.writing()
