"""The storage backends the store's conformance suite runs against.

The store's tests (``tests/test_store.py``, ``tests/test_journal.py``) take the ``backend``
fixture (``tests/conftest.py``), parametrised by :data:`BACKENDS`: each test runs once per
backend, on a core whose store is of that kind, in the test's temporary folder. A backend
joins by its name here (and in :mod:`lexmem.store.backends`); ``tests/test_store_protocol.py``
checks that it has every operation of :mod:`lexmem.store.protocol`.

A test of one backend's own machinery (LanceDB's indices, versions and layout) says so with
:func:`only`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lexmem.api import Lexmem
from lexmem.embedder import Embedder

BACKENDS = ("lance", "postgres")


def use_postgres(home: Path, url: str) -> None:
    """Make the data folder ``home`` keep its memories in the database at ``url``."""
    from lexmem.config import Paths
    from lexmem.settings import Settings, save_settings

    settings = Settings()
    settings.store.backend = "postgres"
    settings.store.url = url
    save_settings(Paths(home), settings)


def open_core(home: Path, embedder: Embedder, backend: str) -> Lexmem:
    """A real lexmem core on ``home`` whose store is of the named backend."""
    return Lexmem.open(home, embedder=embedder, backend=backend)


def only(backend: str, name: str) -> None:
    """Skip the running test unless it runs on the backend ``name`` (its own machinery)."""
    if backend != name:
        pytest.skip(f"tests {name}'s own machinery")


def backend_classes(backend: str) -> tuple[type, type, type]:
    """The named backend's classes for the memories, the journal and search."""
    if backend == "postgres":
        from lexmem.store.postgres.journal import PostgresJournal
        from lexmem.store.postgres.search import PostgresSearcher
        from lexmem.store.postgres.store import PostgresStore

        return PostgresStore, PostgresJournal, PostgresSearcher
    if backend == "lance":
        from lexmem.store.journal import Journal
        from lexmem.store.lance import MemoryStore
        from lexmem.store.search import Searcher

        return MemoryStore, Journal, Searcher
    raise LookupError(f"no classes listed for the backend {backend!r}")
