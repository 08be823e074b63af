"""lexmem's version, in a module that imports nothing: the store records it (a backup's
manifest, the team database's migration log) without standing on the package's facade,
and the package re-exports it as ``lexmem.__version__``. The wheel's version in
pyproject.toml says the same (a test checks)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
