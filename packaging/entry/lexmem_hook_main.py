"""The bundle's ``lexmem-hook``: the installed hook command (``lexmem.capture.entry:main``).

A separate executable so that agents pay only for the standard library and lexmem's
hook module at every call, not for the desktop app's start-up.
"""

from __future__ import annotations

from lexmem.capture.entry import main

main()
