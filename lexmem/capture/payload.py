"""An agent's payload as ``lexmem-hook`` reads it, shared by the hook
(:mod:`lexmem.capture.hook`) and its entry point (:mod:`lexmem.capture.entry`), which
hands a background call to the service without importing the hook: the adapters, the
limits, and reading a pipe to its end or to a whole JSON object. Standard library only.
"""

from __future__ import annotations

import os

__all__ = [
    "ADAPTERS", "HANDOFF_WAIT_SECONDS", "MAX_INPUT_BYTES", "STDIN_IDLE_SECONDS", "complete",
    "read_pipe",
]  # fmt: skip

ADAPTERS = ("claude", "codex", "event")
# Agents' payloads are kilobytes (Claude Code cuts tool output at 30,000 characters); a
# payload larger than this is not read (and the hook's log says so).
MAX_INPUT_BYTES = 16 * 1024 * 1024
# A writer that holds the pipe open mid-document, silent this long: the rest is read by
# the child the hook hands the payload to, not by the agent's hook.
STDIN_IDLE_SECONDS = 2.0
# How long a handed-over payload waits for a service to say it has written the events.
HANDOFF_WAIT_SECONDS = 120.0


def complete(data: bytes) -> bool:
    """Whether ``data`` is one whole JSON object (what an agent sends)."""
    import json

    try:
        return isinstance(
            json.loads(data.decode("utf-8", errors="replace").removeprefix("\ufeff")), dict
        )
    except (ValueError, RecursionError):
        return False


def read_pipe(fd: int, start: bytes, idle: float) -> tuple[bytes, bool]:
    """``start`` and what follows on the pipe ``fd``, and whether that is all of it: read
    to its end, or to a whole JSON object once nothing more is there for now (a writer
    may keep the pipe open). False when the pipe stays open with an incomplete document
    and no new byte for ``idle`` seconds; past :data:`MAX_INPUT_BYTES` nothing more is read."""
    import select

    chunks: list[bytes] = [start]
    size = len(start)
    tried = -1  # how much was there (trailing blanks aside) when it last failed to parse
    while size <= MAX_INPUT_BYTES:
        if not select.select([fd], [], [], 0)[0]:
            # Nothing more for now: a whole object already read is the payload.
            data = b"".join(chunks)
            chunks = [data]
            end = len(data.rstrip())
            if end != tried and data[end - 1 : end] == b"}":
                if complete(data):
                    return data, True
                tried = end
            if not select.select([fd], [], [], idle)[0]:
                return data, False
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    # Past the cap: a whole object followed by blanks is still the payload.
    return b"".join(chunks).rstrip(), True
