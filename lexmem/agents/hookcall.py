"""A hook event handed over in memory: what ``lexmem-hook`` does with a payload, without
its process.

Claude Code (2.1.118 and later) can call an MCP tool for a hook instead of running a
command (``"type": "mcp_tool"``): lexmem's MCP server, already connected, gets the
payload's fields as the tool's arguments (:func:`payload_from_fields` puts the payload
back together) and :func:`record_payload` does what the hook would: opt-out first (an
opted-out repository leaves no trace), the capture mode, the allowed paths and pause,
redaction field by field, and inbox events with the hook's event ids and kinds, all as
:func:`lexmem.capture.hook.capture` writes them (as the service's intake does with a
payload ``lexmem-hook`` hands over). Nothing unredacted is written anywhere. The relay
(:mod:`lexmem.agents.relay`) answers the call itself and records the event so, which is
why this module imports only the standard library and lexmem's hook.

The event's time is when the call arrived: Claude Code waits for each such call before
it goes on, so arrival order is the agent's order (the pipeline orders a window's events
by time, see :func:`lexmem.service.pipeline.agent_order`).
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:  # the relay imports this module: no ``typing`` at run time
    from collections.abc import Mapping
    from typing import Any

    from lexmem.config import Paths

__all__ = [
    "FLAG_FIELDS", "HOOK_FIELDS", "HOOK_TOOL", "JSON_FIELDS", "TEXT_FIELDS",
    "payload_from_fields", "record_payload",
]  # fmt: skip

# The tool Claude Code's hooks call instead of running ``lexmem-hook`` (``"type":
# "mcp_tool"``).
HOOK_TOOL = "record_hook_event"

# The fields of Claude Code's hook payloads lexmem reads, as the hook tool takes them. A
# structured field arrives as JSON text (Claude Code writes an object it interpolates
# as JSON); a missing one as "" (it interpolates nothing for it).
TEXT_FIELDS = (
    "hook_event_name", "session_id", "cwd", "transcript_path", "permission_mode", "prompt",
    "tool_name", "tool_use_id", "last_assistant_message", "source", "reason", "trigger",
    "custom_instructions", "agent_id", "agent_type", "agent_transcript_path", "model",
    "turn_id",
)  # fmt: skip
JSON_FIELDS = ("tool_input", "tool_response", "error")
FLAG_FIELDS = ("stop_hook_active", "is_interrupt")
HOOK_FIELDS = frozenset((*TEXT_FIELDS, *JSON_FIELDS, *FLAG_FIELDS))


def _decoded(value: Any) -> Any:
    """A structured field as Claude Code meant it: JSON text decoded, other text kept."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[") and text[-1:] in ("}", "]"):
            try:
                return json.loads(text)
            except (ValueError, RecursionError):
                return value
    return value


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def payload_from_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The hook payload from the tool's arguments: empty ones left out (a field the event
    does not carry), structured ones decoded, flags made booleans."""
    payload: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None or value == "":
            continue
        if key in JSON_FIELDS:
            payload[key] = _decoded(value)
        elif key in FLAG_FIELDS:
            flag = _flag(value)
            if flag is not None:
                payload[key] = flag
        else:
            payload[key] = value if isinstance(value, str) else str(value)
    return payload


def record_payload(
    paths: Paths, payload: Mapping[str, Any], agent: str = "claude", *,
    event_id: str | None = None, timestamp: str | None = None, log: Any = None,
) -> list[str]:  # fmt: skip
    """Write the inbox events a hook payload makes, as ``lexmem-hook AGENT`` would; returns
    their ids (none when opted out, off, paused or outside the allowed paths).

    A SessionStart payload is recorded too, but nothing is printed and no service is
    started: this runs in the service, in a ``lexmem mcp`` serving on its own, or in the
    relay (:mod:`lexmem.agents.relay`, after it answered the call, with the id and time
    it stamped the call with; None: a fresh id, now). No work budget: the agent is not
    waiting, every field is read rule by rule. ``log``: as for the hook's ``capture``.
    """
    from lexmem.capture import hook
    from lexmem.capture.inbox import new_event_id, now_iso

    return hook.capture(paths, agent, payload, budget=None, event_id=event_id or new_event_id(),
                        timestamp=timestamp or now_iso(), log=log)  # fmt: skip
