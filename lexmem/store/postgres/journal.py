"""The capture journal on PostgreSQL: :class:`PostgresJournal` implements
:class:`lexmem.store.protocol.JournalBackend` in the team database's journal tables
(step 3 of :mod:`lexmem.store.postgres.schema`), beside a :class:`PostgresStore`'s
memories, under the same write lock."""

from __future__ import annotations

from lexmem.store.postgres.store import PostgresStore

__all__ = ["PostgresJournal"]


class PostgresJournal:
    """The journal's tables in the store's database."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.db = store.db

    def ensure(self) -> None:
        """The tables are made by the schema's steps when the store opens."""
