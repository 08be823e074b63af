"""Agent payloads that reach the service whole: redacted in memory, written as inbox events.

Two ways in, one function, :func:`accept`:

- ``lexmem-hook`` hands the service what it cannot check within its own work budget (or
  cannot read whole) over the reader socket, as an ``event`` request (:func:`serve_event`);
- an agent's MCP tool hook gives the MCP server its payload directly.

Either way the payload is the agent's, unredacted, and is held in memory only: it is
redacted here exactly as the hook redacts (:func:`lexmem.capture.hook.capture`, the same
function, without the hook's work budget), under the same opt-out, capture mode, allowed
paths and pause, and only the redacted events are written to the inbox, which the writer
loop then takes in like any other.

The wire (:mod:`lexmem.wire`): one request line, then ``size`` bytes of payload::

    {"v": 1, "kind": "event", "adapter": "claude", "cwd": null,
     "event_id": "<uuid>", "timestamp": "<iso>", "size": 1234}

answered, once the events are written, with ``{"ok": true, "events": [ids]}`` (an empty
list when the payload makes none; the reason is in ``logs/hook.log``), or ``{"error":
"..."}`` for a request that is not well formed.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any, BinaryIO

from lexmem import wire
from lexmem.capture import hook
from lexmem.capture.inbox import new_event_id, now_iso
from lexmem.capture.payload import ADAPTERS, MAX_INPUT_BYTES
from lexmem.config import Paths

__all__ = ["accept", "accept_bytes", "serve_event"]


def _paths(owner: Any) -> Paths:
    """The data folder of a core, a service (``.lm``), or the paths themselves."""
    if isinstance(owner, Paths):
        return owner
    paths = getattr(owner, "paths", None)
    if paths is None and getattr(owner, "lm", None) is not None:
        paths = owner.lm.paths
    if not isinstance(paths, Paths):
        raise TypeError(f"no data folder in {type(owner).__name__}")
    return paths


def accept(
    owner: Any,
    adapter: str,
    payload: Mapping[str, Any],
    cwd: str | None = None,
    *,
    event_id: str | None = None,
    timestamp: str | None = None,
) -> list[str]:
    """Capture one agent hook payload as ``lexmem-hook ADAPTER`` would; the event ids written.

    ``owner``: the service's open core (or the service, or a :class:`~lexmem.config.Paths`).
    ``adapter``: ``"claude"``, ``"codex"`` or ``"event"``, as for ``lexmem-hook``.
    ``payload``: the agent's payload as parsed JSON, unredacted; nothing of it is written
    before it is redacted (in memory, with no work budget: every field is checked).
    ``cwd``: the working folder when the payload names none.
    ``event_id``, ``timestamp``: the call's, when it has them already (a handed-over hook
    payload); the same payload accepted twice with the same ``event_id`` writes events
    with the same ids, which the service stores once. None: a fresh id, now.

    An empty list when the repository is opted out (nothing written, nothing logged),
    capture is off or paused, or the payload makes no event (``logs/hook.log`` says
    why). No digest is printed and no service started: the caller is the service, or
    speaks for it.
    """
    if adapter not in ADAPTERS:
        raise ValueError(f"unknown adapter {adapter!r} (use claude, codex or event)")
    return hook.capture(
        _paths(owner), adapter, payload, budget=None, event_id=event_id or new_event_id(),
        timestamp=timestamp or now_iso(), cwd=cwd,
    )  # fmt: skip


def accept_bytes(
    owner: Any,
    adapter: str,
    raw: bytes,
    cwd: str | None = None,
    *,
    event_id: str | None = None,
    timestamp: str | None = None,
) -> list[str]:
    """:func:`accept` of a payload's bytes, parsed as the hook parses stdin (a payload that
    is not one JSON object makes no event, and one line in ``logs/hook.log``)."""
    paths = _paths(owner)
    log = hook._Log(paths)
    notes: list[str] = []
    payload = hook._parse(adapter, raw, "the reader socket", log, notes)
    if payload is None:
        return []
    for note in notes:
        log.write(note)
    return accept(paths, adapter, payload, cwd, event_id=event_id, timestamp=timestamp)


def serve_event(owner: Any, request: dict[str, Any], conn: socket.socket, stream: BinaryIO) -> None:
    """The reader socket's ``event`` request: read the payload, capture it, answer."""
    size, adapter = request.get("size"), request.get("adapter")
    if not (isinstance(size, int) and 0 <= size <= MAX_INPUT_BYTES):
        wire.send_json(conn, {"error": f"bad request: size {size!r}"})
        return
    if adapter not in ADAPTERS:
        wire.send_json(conn, {"error": f"bad request: adapter {adapter!r}"})
        return
    conn.settimeout(60)  # the bytes follow the line at once, or the sender went away
    raw = stream.read(size)
    conn.settimeout(None)
    if len(raw) < size:
        return  # it went away: it asks again
    cwd, event_id, timestamp = (request.get(k) for k in ("cwd", "event_id", "timestamp"))
    ids = accept_bytes(
        owner, str(adapter), raw, cwd if isinstance(cwd, str) else None,
        event_id=event_id if isinstance(event_id, str) and _is_uuid(event_id) else None,
        timestamp=timestamp if isinstance(timestamp, str) and timestamp else None,
    )  # fmt: skip
    wire.send_json(conn, {"ok": True, "events": ids})


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False
