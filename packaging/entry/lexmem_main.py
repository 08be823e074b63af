"""The bundle's ``lexmem``: the installed command's entry point (``ui.front:main``).

A read command or ``mcp`` goes to the running service when there is one (the front
door); with no command it opens the tray app on a desktop and prints the status
elsewhere; every other command (``serve``, ``ingest``, ``remember`` …) is the CLI's.
"""

from __future__ import annotations

from ui.front import main

main()
