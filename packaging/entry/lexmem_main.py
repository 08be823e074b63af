"""The bundle's ``lexmem``: the installed command's entry point (``ui.launch:main``).

With no command it opens the tray app on a desktop and prints the status elsewhere;
every other command (``mcp``, ``serve``, ``ingest``, ``search`` …) is the CLI's.
"""

from __future__ import annotations

from ui.launch import main

main()
