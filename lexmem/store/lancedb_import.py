"""Importing LanceDB without the REST client of Lance Namespace, which a local store never calls.

``import lancedb`` (0.40) imports ``lance_namespace`` from ``lancedb/db.py`` for its
interface and response types; ``lance_namespace`` imports
``lance_namespace_urllib3_client.models``, and the first import of any submodule runs
the package's ``__init__``, which builds the whole generated REST client: every ``*Api``
class (pydantic ``validate_call`` on each of some 150 methods), the urllib3 client and its
configuration. Nothing in lancedb, lance or lance_namespace uses those objects: a REST
namespace is served by Lance's native code. Measured: about half the CPU of ``import
lancedb`` on a cold process.

:func:`import_lancedb` puts a lazy stand-in for that package's ``__init__`` in
``sys.modules`` before LanceDB is imported: a real package module (its spec, path and
file are the package's own), so every submodule (the models that lance_namespace needs)
imports from it as usual, but the ``__init__`` runs only when something reads a name from
the package itself (``ApiClient``, ``TableApi``, ``__version__``...), and then in full
before that name is returned. Nothing is stubbed: whatever touches the client gets the
real one.

Every import of lancedb in the store goes through here (``import_lancedb()`` and then
``import lancedb`` or ``from lancedb.x import y``, so type-checking still follows LanceDB's
own types).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["DEFERRED", "import_lancedb"]

# The packages whose ``__init__`` is deferred. Only the package's own body: a submodule
# imported by name (``lance_namespace_urllib3_client.models``) is imported for real.
DEFERRED = ("lance_namespace_urllib3_client",)

_lock = threading.RLock()
_pending: set[str] = set()  # deferred and not run yet


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` has not run yet; reading any name it lacks runs it."""

    def __getattr__(self, name: str) -> Any:
        # Called only for a name the module does not have (yet).
        _load(self)
        return types.ModuleType.__getattribute__(self, name)


def _load(module: types.ModuleType) -> None:
    with _lock:  # another thread waits here until the body has run, then reads the name
        name = module.__name__
        if name not in _pending:
            # Run already, or running in this thread: a name the body reads from its own
            # package before defining it fails as in any partly imported module.
            return
        _pending.discard(name)
        spec = module.__spec__
        assert spec is not None and spec.loader is not None
        try:
            spec.loader.exec_module(module)
        except BaseException:
            # As a failed import: gone from sys.modules, so the next import tries again.
            if sys.modules.get(name) is module:
                del sys.modules[name]
            raise
        finally:
            module.__class__ = types.ModuleType


def _defer(name: str) -> None:
    if name in sys.modules:
        return  # already imported (or deferred): nothing to save
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed, or not a package: lancedb imports what it finds
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredPackage
    _pending.add(name)
    sys.modules[name] = module


def import_lancedb() -> types.ModuleType:
    """``lancedb``, imported (once) with :data:`DEFERRED` deferred until first used."""
    if "lancedb" not in sys.modules:
        with _lock:
            if "lancedb" not in sys.modules:
                for name in DEFERRED:
                    _defer(name)
    import lancedb

    return lancedb
