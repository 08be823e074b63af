"""Storage backends by name: the store, its journal and its search, for the facade.

``lance`` (embedded LanceDB in the data folder) is the default; ``postgres`` keeps the
memories in a PostgreSQL database with pgvector (``[store] url``), implementing
:mod:`lexmem.store.protocol` the same way. Its module is imported only when it is asked
for, so the core opens without psycopg installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lexmem.errors import ConfigError
from lexmem.store.journal import Journal
from lexmem.store.lance import MemoryStore
from lexmem.store.search import Searcher

if TYPE_CHECKING:
    from lexmem.config import Paths
    from lexmem.embedder import Embedder
    from lexmem.settings import SearchSettings, StoreSettings
    from lexmem.store.protocol import JournalBackend, MemoryBackend, SearchBackend

__all__ = ["BACKENDS", "journal_for", "make_store", "searcher_for"]

BACKENDS = ("lance", "postgres")


def _postgres() -> object:
    try:
        import lexmem.store.postgres.store as module
    except ImportError as exc:  # psycopg is the team extra
        raise ConfigError("the postgres backend needs psycopg: pip install 'lexmem[team]'") from exc
    return module


def make_store(
    paths: Paths,
    *,
    dim: int,
    space_id: str,
    settings: StoreSettings | None = None,
    backend: str = "lance",
) -> MemoryBackend:
    """A store of the named backend for the data folder ``paths``, not opened yet
    (:meth:`~lexmem.store.protocol.MemoryBackend.open`)."""
    if backend == "lance":
        return MemoryStore(paths, dim=dim, space_id=space_id, settings=settings)
    if backend == "postgres":
        module = _postgres()
        store: MemoryBackend = module.PostgresStore(  # type: ignore[attr-defined]
            paths, dim=dim, space_id=space_id, settings=settings
        )
        return store
    raise ConfigError(f"unknown storage backend {backend!r} (known: {', '.join(BACKENDS)})")


def journal_for(store: MemoryBackend) -> JournalBackend:
    """The capture journal kept beside ``store``'s memories."""
    if isinstance(store, MemoryStore):
        return Journal(store)
    from lexmem.store.postgres.journal import PostgresJournal
    from lexmem.store.postgres.store import PostgresStore

    if isinstance(store, PostgresStore):
        return PostgresJournal(store)
    raise ConfigError(f"no journal for a {type(store).__name__} store")


def searcher_for(
    store: MemoryBackend, embedder: Embedder, settings: SearchSettings | None = None
) -> SearchBackend:
    """Hybrid search over ``store``: its own keyword and vector queries, one fusion."""
    if isinstance(store, MemoryStore):
        return Searcher(store, embedder, settings)
    import importlib

    from lexmem.store.postgres.store import PostgresStore

    if isinstance(store, PostgresStore):
        searcher: SearchBackend = importlib.import_module(
            "lexmem.store.postgres.search"
        ).PostgresSearcher(store, embedder, settings)
        return searcher
    raise ConfigError(f"no search for a {type(store).__name__} store")
