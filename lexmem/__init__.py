"""lexmem — local-first memory for AI agents and the people who work with them.

The core package: no Qt here (the desktop layer lives in ``ui``). Heavy
libraries (LanceDB, fastembed, DuckDB) load when first used, so importing
``lexmem`` is cheap.
"""

from __future__ import annotations

from lexmem.version import __version__

TYPE_CHECKING = False  # not ``typing``: importing it would cost the hook ~3 ms

__all__ = [
    "Changes",
    "Lexmem",
    "LexmemError",
    "Memory",
    "MemoryContext",
    "MemoryFilter",
    "MemoryLink",
    "MemorySource",
    "MemoryStatus",
    "MemoryType",
    "TypeClassification",
    "__version__",
]

if TYPE_CHECKING:  # what ``__getattr__`` loads, for type checkers
    from typing import Any

    from lexmem.api import Lexmem
    from lexmem.errors import LexmemError
    from lexmem.models import (
        Changes,
        Memory,
        MemoryContext,
        MemoryLink,
        MemorySource,
        MemoryStatus,
        MemoryType,
        TypeClassification,
    )
    from lexmem.store.protocol import MemoryFilter

_LAZY = {
    "Lexmem": "api",
    "LexmemError": "errors",
    "MemoryFilter": "store.lance",
    "Changes": "models",
    "Memory": "models",
    "MemoryContext": "models",
    "MemoryLink": "models",
    "MemorySource": "models",
    "MemoryStatus": "models",
    "MemoryType": "models",
    "TypeClassification": "models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lexmem' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)
