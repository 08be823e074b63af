"""An MCP server that does nothing, as fast as a process can: the floor lexmem's own MCP
server and tool hooks are measured against (``bench/agents.py``'s ``noop-tool-hooks``).

Standard library only, run with ``python -S``: it answers the handshake, lists one tool
of the name lexmem's hooks call (taking any arguments) and answers each call of it with
``{}`` (what lexmem's tool answers), and answers every other request "method not found"
(Claude Code then falls back from ``server/discover`` to the ``initialize`` handshake).
It records nothing.
"""

import json
import sys

TOOL = {
    "name": "record_hook_event",
    "description": "Does nothing.",
    "inputSchema": {"type": "object", "additionalProperties": True},
}


def answer(message: dict) -> dict | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    params = message.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "noop", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "{}"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": ident, "error": error}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = answer(message) if isinstance(message, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    try:  # noqa: SIM105 - not contextlib: the floor imports as little as it can
        main()
    except KeyboardInterrupt:
        pass
