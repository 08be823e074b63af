"""Storage backends by name: the store, its journal and its search, for the facade.

``lance`` (embedded LanceDB in the data folder) is the only one today; PostgreSQL +
pgvector is to join it under its own name, implementing :mod:`lexmem.store.protocol`.
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

BACKENDS = ("lance",)


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
    raise ConfigError(f"unknown storage backend {backend!r} (known: {', '.join(BACKENDS)})")


def _lance(store: MemoryBackend) -> MemoryStore:
    if isinstance(store, MemoryStore):
        return store
    raise ConfigError(f"no journal or search for a {type(store).__name__} store")


def journal_for(store: MemoryBackend) -> JournalBackend:
    """The capture journal kept beside ``store``'s memories."""
    return Journal(_lance(store))


def searcher_for(
    store: MemoryBackend, embedder: Embedder, settings: SearchSettings | None = None
) -> SearchBackend:
    """Hybrid search over ``store`` (its own queries: LanceDB's BM25 and vector search)."""
    return Searcher(_lance(store), embedder, settings)
