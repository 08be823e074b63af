"""Compatibility for ``lexmem-hook`` commands installed before the hook moved.

The console-script wrapper pip generated for an existing install says ``from lexmem.hook
import main``; agents' configurations name that wrapper, so it must keep working until
the next ``pip install`` regenerates it for :mod:`lexmem.capture.entry`. Standard library
only, like the hook: this adds one small module to each call through an old wrapper.
"""

from __future__ import annotations

from lexmem.capture.entry import main

__all__ = ["main"]

if __name__ == "__main__":  # ``python -m lexmem.hook --handoff``: the hook's detached child
    main()
