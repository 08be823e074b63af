"""A fake model server on 127.0.0.1 for driving the real agent CLIs in tests.

It speaks the two wire protocols the agents use:

- Anthropic Messages (Claude Code): ``POST /v1/messages``, streaming (server-sent events:
  ``message_start``, ``content_block_start``/``_delta``/``_stop``, ``message_delta``,
  ``message_stop``) or not, and ``POST /v1/messages/count_tokens``.
- OpenAI Responses (Codex): ``POST /v1/responses``, streaming (``response.created``,
  ``response.output_item.added``, ``response.output_text.delta``,
  ``response.output_item.done``, ``response.completed``, ...).

Every request is recorded (path and parsed body) so a test can assert what the agent sent.
Replies are scripted: :meth:`FakeModel.script` queues turns (text, or a tool call) that
are given, in order, to the agent's *main* requests (those that offer tools); requests
without tools (titles, summaries, quota probes) and main requests once the script has run
out get a plain text reply.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeModel", "Recorded", "Turn"]

DEFAULT_TEXT = "Done."


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted model turn: text, or a call of ``tool`` with ``input``."""

    text: str = DEFAULT_TEXT
    tool: str | None = None
    # A tool name that is matched as a suffix of the names the agent offers (Codex and
    # Claude Code qualify MCP tools differently): the first offered name ending in it.
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Recorded:
    """One request as the agent sent it."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float

    @property
    def tools(self) -> list[tuple[str | None, str]]:
        """(namespace, name) of every tool the request offers the model. Codex offers an
        MCP server's tools in a namespace (``mcp__lexmem`` holding ``search_memory``);
        Claude Code offers them flat (``mcp__lexmem__search_memory``)."""
        found: list[tuple[str | None, str]] = []
        for tool in self.body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":
                for inner in tool.get("tools") or []:
                    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                        found.append((str(tool.get("name")), inner["name"]))
            elif isinstance(tool.get("name"), str):
                found.append((None, tool["name"]))
            elif isinstance(tool.get("function"), dict):  # chat-completions shape
                found.append((None, str(tool["function"].get("name"))))
        return found

    @property
    def tool_names(self) -> list[str]:
        """The tools' names, a namespaced one as ``namespace__name``
        (``mcp__lexmem__search_memory`` from either agent)."""
        return [f"{ns}__{name}" if ns else name for ns, name in self.tools]

    @property
    def strings(self) -> str:
        """Every string in the body (system prompt, messages, tool results), one a line,
        unescaped: what the model would read."""
        out: list[str] = []

        def walk(value: Any) -> None:
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, dict):
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        walk(self.body)
        return "\n".join(out)

    @property
    def text(self) -> str:
        """Everything the request carries as JSON text (system prompt, messages, input)."""
        return json.dumps(self.body, ensure_ascii=False)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeModel:
    """A scripted Anthropic Messages + OpenAI Responses server in a background thread."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._script: list[Turn] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:
                model._record(self, {})
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [], "models": []})
                else:
                    self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                rec = model._record(self, body if isinstance(body, dict) else {"_body": body})
                path = self.path.split("?", 1)[0].rstrip("/")
                if path.endswith("/messages/count_tokens"):
                    self._json(200, {"input_tokens": max(1, len(rec.text) // 4)})
                elif path.endswith("/messages"):
                    model._anthropic(self, rec)
                elif path.endswith("/responses"):
                    model._responses(self, rec)
                else:
                    self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def _json(self, status: int, data: dict[str, Any]) -> None:
                out = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def _stream_start(self) -> None:
                """The headers of a server-sent event stream (both APIs stream so)."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()

        self.handler = Handler
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeModel:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scripting and what was sent ----------------------------------------------------------

    def script(self, *turns: Turn) -> None:
        """Replace the queue of turns given to the next main requests."""
        with self._lock:
            self._script = list(turns)

    def reset(self) -> None:
        """Forget the recorded requests and the script (between two sessions)."""
        with self._lock:
            self.requests.clear()
            self._script = []

    def main_requests(self) -> list[Recorded]:
        """The agent's main-loop requests: model calls that offer tools, in order."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path.split("?", 1)[0].rstrip("/").endswith(("/messages", "/responses"))
                and r.tool_names
            ]

    def _record(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> Recorded:
        rec = Recorded(handler.path, body, dict(handler.headers.items()), time.monotonic())
        with self._lock:
            self.requests.append(rec)
        return rec

    def _next_turn(self, rec: Recorded) -> Turn:
        with self._lock:
            if rec.tool_names and self._script:
                return self._script.pop(0)
        return Turn()

    @staticmethod
    def _resolve(turn: Turn, rec: Recorded) -> tuple[str | None, str] | None:
        """(namespace, name) of the offered tool the turn calls (``None``: answer with
        text): the first whose full name is the turn's tool or ends with it."""
        if turn.tool is None:
            return None
        for (ns, name), full in zip(rec.tools, rec.tool_names, strict=True):
            if full == turn.tool or full.endswith(turn.tool):
                return ns, name
        return None  # not offered: the model can only answer in text

    # -- Anthropic Messages ---------------------------------------------------------------------

    def _anthropic(self, h: Any, rec: Recorded) -> None:
        turn = self._next_turn(rec)
        tool = self._resolve(turn, rec)
        n = next(self._ids)
        model = str(rec.body.get("model") or "claude-fake")
        if tool is not None:
            ns, name = tool
            block: dict[str, Any] = {
                "type": "tool_use", "id": f"toolu_{n:06d}", "input": turn.input,
                "name": f"{ns}__{name}" if ns else name,
            }  # fmt: skip
            stop = "tool_use"
        else:
            text = turn.text if turn.tool is None else f"(no tool {turn.tool}) {turn.text}"
            block = {"type": "text", "text": text}
            stop = "end_turn"
        usage = {"input_tokens": max(1, len(rec.text) // 4), "output_tokens": 5}
        message = {
            "id": f"msg_{n:06d}", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage,
        }  # fmt: skip
        if not rec.body.get("stream"):
            h._json(200, message)
            return
        h._stream_start()
        start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
        events = [("message_start", {"type": "message_start", "message": start})]
        if block["type"] == "text":
            events += [
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": block["text"]}}),
            ]  # fmt: skip
        else:
            events += [
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": dict(block, input={})}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "input_json_delta",
                                                   "partial_json": json.dumps(block["input"])}}),
            ]  # fmt: skip
        events += [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        for name, data in events:
            h.wfile.write(_sse(name, data))
        h.wfile.flush()
        h.close_connection = True

    # -- OpenAI Responses --------------------------------------------------------------------------

    def _responses(self, h: Any, rec: Recorded) -> None:
        turn = self._next_turn(rec)
        tool = self._resolve(turn, rec)
        n = next(self._ids)
        rid = f"resp_{n:06d}"
        model = str(rec.body.get("model") or "gpt-fake")
        if tool is not None:
            ns, name = tool
            item: dict[str, Any] = {
                "type": "function_call", "id": f"fc_{n:06d}", "call_id": f"call_{n:06d}",
                "name": name, "arguments": json.dumps(turn.input), "status": "completed",
            }  # fmt: skip
            if ns:
                item["namespace"] = ns
        else:
            text = turn.text if turn.tool is None else f"(no tool {turn.tool}) {turn.text}"
            item = {
                "type": "message", "id": f"msg_{n:06d}", "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }  # fmt: skip
        usage = {
            "input_tokens": max(1, len(rec.text) // 4), "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": max(1, len(rec.text) // 4) + 5,
        }  # fmt: skip
        response = {
            "id": rid, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "completed", "output": [item], "usage": usage,
        }  # fmt: skip
        if not rec.body.get("stream"):
            h._json(200, response)
            return
        h._stream_start()
        for name, data in self._response_events(response, item):
            h.wfile.write(_sse(name, dict(data, type=name)))
        h.wfile.flush()
        h.close_connection = True

    @staticmethod
    def _response_events(
        response: dict[str, Any], item: dict[str, Any]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        pending = dict(response, status="in_progress", output=[], usage=None)
        yield "response.created", {"response": pending}
        yield "response.in_progress", {"response": pending}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield (
                "response.output_item.added",
                {"output_index": 0, "item": dict(item, status="in_progress", content=[])},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            ids = {"item_id": item["id"], "output_index": 0, "content_index": 0}
            yield "response.content_part.added", dict(ids, part=part)
            yield "response.output_text.delta", dict(ids, delta=text)
            yield "response.output_text.done", dict(ids, text=text)
            yield "response.content_part.done", dict(ids, part=dict(part, text=text))
        else:
            yield (
                "response.output_item.added",
                {"output_index": 0, "item": dict(item, status="in_progress", arguments="")},
            )
            ids = {"item_id": item["id"], "output_index": 0}
            yield "response.function_call_arguments.delta", dict(ids, delta=item["arguments"])
            yield "response.function_call_arguments.done", dict(ids, arguments=item["arguments"])
        yield "response.output_item.done", {"output_index": 0, "item": item}
        yield "response.completed", {"response": response}
