"""``lexmem-hook``'s entry point: a call the agent does not wait for goes to the warm
service with next to nothing imported; every other call is :func:`lexmem.capture.hook.main`.

    lexmem-hook ADAPTER --background   the agent does not wait for this call (Claude Code's
                                       ``async`` hooks, the commands lexmem's shell lines
                                       start in the background)

Such a call has nobody waiting on it, so nothing is gained by checking its payload here:
with a service listening on the reader socket, the payload is read whole and handed to
it as it came (``{"kind": "event"}``, :mod:`lexmem.service.intake`; in memory, never the
disk), and the service applies the opt-out, the capture mode and the redaction with its
rules already compiled, exactly as the hook would. This process then costs the machine
the interpreter, ``json`` and the socket (about half of the hook's own start), at the
moments an agent is busiest: a session's start and end, the tool calls it records
without waiting.

Nothing is lost on the way: with no service listening (no socket, a stale one, a
service too old to take events), or when the service does not say it has written the
events, the same payload, with the same event id and time, goes through the hook as
before (which records it itself and starts the service); a service that wrote the events
and then went away stores nothing twice (the event ids). A writer that keeps the pipe
open mid-document is handled as the hook handles it.

Standard library and lexmem's standard-library modules only (a contract in
pyproject.toml); the hook's own modules are imported only when the call is theirs.
"""

from __future__ import annotations

import os
import sys

from lexmem.capture.payload import (
    ADAPTERS,
    HANDOFF_WAIT_SECONDS,
    MAX_INPUT_BYTES,
    STDIN_IDLE_SECONDS,
    read_pipe,
)
from lexmem.capture.stamps import new_event_id, now_iso, process_started
from lexmem.places import SOCKET_NAME, data_home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BACKGROUND_FLAG", "main", "to_service"]

BACKGROUND_FLAG = "--background"


def main() -> None:
    """Console entry point: ``lexmem-hook ADAPTER [...]``. Always exits 0."""
    argv = sys.argv[1:]
    if _background(argv):
        try:
            done = to_service(argv)
        except Exception:  # noqa: BLE001 - the hook below records it, and says what failed
            done = None
        if done is True:
            os._exit(0)
        if isinstance(done, tuple):  # read, not taken: the hook records these very bytes
            raw, whole, event_id, timestamp = done
            from lexmem.capture import hook

            code = hook.run(argv, stdin=raw, whole=whole, event_id=event_id, timestamp=timestamp)
            try:  # noqa: SIM105 - not contextlib: importing it costs every call
                sys.stdout.flush()
            except (OSError, ValueError):
                pass
            os._exit(code)
    from lexmem.capture.hook import main as hook_main

    hook_main()


def _background(argv: Sequence[str]) -> bool:
    """A call the agent does not wait for, of a payload on stdin."""
    return (
        len(argv) >= 2
        and argv[0] in ADAPTERS
        and BACKGROUND_FLAG in argv[1:]
        and all(a.startswith("--") for a in argv[1:])  # Codex's notify passes the JSON
        and os.name == "posix"
    )


def to_service(argv: Sequence[str]) -> bool | tuple[bytes, bool, str, str] | None:
    """Hand the payload on stdin to the service; True once it says the events are written.

    ``None`` when no service is listening (nothing read: the hook does it all);
    otherwise what was read, whether that is all of it, and the call's event id and time,
    for the hook to record when the service did not take it."""
    event_id, timestamp = new_event_id(), now_iso(process_started())
    home = data_home()
    path = os.path.join(home, SOCKET_NAME)
    if not os.path.exists(path):
        return None
    raw, whole = _read_stdin()
    if not whole or not raw.strip() or len(raw) > MAX_INPUT_BYTES:
        return raw, whole, event_id, timestamp  # the hook says why, or reads the rest
    from lexmem import wire

    sock = wire.connect_path(path, timeout=HANDOFF_WAIT_SECONDS)
    if sock is not None:
        reply = wire.send_event(sock, argv[0], raw, event_id, timestamp, HANDOFF_WAIT_SECONDS)
        if isinstance(reply, dict) and reply.get("ok") is True:
            return True
    return raw, whole, event_id, timestamp


def _read_stdin() -> tuple[bytes, bool]:
    """Stdin as the hook reads it (:func:`read_pipe`); a terminal gives nothing."""
    try:
        if os.isatty(0):
            return b"", True
    except OSError:
        return b"", True
    return read_pipe(0, b"", STDIN_IDLE_SECONDS)
