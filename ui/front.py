"""The ``lexmem`` console script's front door: the warm service first, then the rest.

Two kinds of command are answered without importing the CLI, the store or the model,
when the service runs for the data folder:

- a read (``search``, ``show``, ``list``, ``stats``, ``digest``, ``audit``, ``sessions``):
  the service renders it and the output comes back over the reader socket, identical to
  what this process would have printed;
- ``mcp``: a standard-library relay to an MCP session in the service
  (:mod:`lexmem.agents.relay`).

Anything else, or no service to answer, goes to the full command line (:mod:`ui.launch`),
exactly as before. This module imports only the standard library and lexmem's
standard-library modules (a test checks what an answered ``lexmem search`` loads).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from lexmem.config import Paths

__all__ = ["main", "split"]


def split(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """``(home, command and its arguments)`` from the arguments after ``lexmem``; ``None``
    when they hold anything the front does not understand (the full CLI then reads them)."""
    home: str | None = None
    args = list(argv)
    while args and args[0].startswith("--home"):
        if args[0] == "--home" and len(args) > 1:
            home, args = args[1], args[2:]
        elif args[0].startswith("--home="):
            home, args = args[0].partition("=")[2], args[1:]
        else:
            return None
    if not args or any(a in ("-h", "--help") for a in args):
        return None
    return home, args


def _paths(home: str | None) -> Paths:
    from pathlib import Path

    from lexmem.config import Paths, resolve_paths

    if home:
        return Paths(Path(home).expanduser().absolute())
    return resolve_paths()


def _answered(argv: Sequence[str]) -> int | None:
    """The exit code of a command the service answered (or the relay served)."""
    parts = split(argv)
    if parts is None:
        return None
    home, args = parts
    if args == ["mcp"]:
        # The agent waits for the relay's first answer as its session starts: the data
        # folder without pathlib, and the relay imports the rest once it has answered.
        from lexmem import places
        from lexmem.agents.relay import relay

        code = relay(places.absolute(home) if home else places.data_home())
        if code is not None:
            # Every event recorded, every answer written (unbuffered): the agent is
            # waiting for the process to end, not for the interpreter to tidy up.
            os._exit(code)
        return None
    from lexmem import wire

    if args[0] in wire.READ_COMMANDS:
        return wire.ask_cli(_paths(home), args)
    return None


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point of ``lexmem``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not os.environ.get("LEXMEM_NO_SERVICE"):
        code = _answered(args)
        if code is not None:
            sys.exit(code)
    from ui.launch import main as full

    full(args)
